#include "llmc/core/format/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llmc/core/status_macros.h"
#include "llmc/core/weight_format.h"

namespace llmc {

// Values are read with memcpy in host order; GGUF is little endian (a v3
// big-endian file is recognised by its byte-swapped version and rejected).
static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;
// The GGUF spec limits keys to 65535 bytes.
constexpr uint64_t kMaxKeyBytes = 65535;
// The largest metadata strings in real files are chat templates and embedded
// tokenizer JSON (a few MiB); 64 MiB leaves room and bounds one copy.
constexpr uint64_t kMaxStringBytes = 64ull << 20;
// Vocabularies run to ~256k entries; 16M elements leaves room while bounding
// the memory an array can take once widened (16M x 8 bytes, or 16M strings).
constexpr uint64_t kMaxArrayCount = 1ull << 24;
// GGML_MAX_NAME is 64 including the terminator; llama.cpp rejects longer names.
constexpr uint64_t kMaxTensorNameBytes = 63;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// general.alignment is a u32 in llama.cpp; the largest power of two it holds.
constexpr uint64_t kMaxAlignment = 1ull << 31;
// Smallest encodings, used to bound counts by the bytes that remain before
// anything is allocated: a key-value pair is a key length, one key byte, a
// type and a one-byte value; a tensor info is a name length, one name byte,
// n_dims, one dimension, the type and the offset.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

// Size in bytes of a fixed-size value type; 0 for string, array and unknown.
uint64_t FixedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

bool IsKnownType(uint32_t type) { return type <= static_cast<uint32_t>(GgufType::kFloat64); }

bool IsInteger(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

bool IsFloat(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kFloat64; }

// The field name of a scalar in truncation errors.
const char* ScalarField(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "uint8 value";
    case GgufType::kInt8: return "int8 value";
    case GgufType::kUint16: return "uint16 value";
    case GgufType::kInt16: return "int16 value";
    case GgufType::kUint32: return "uint32 value";
    case GgufType::kInt32: return "int32 value";
    case GgufType::kFloat32: return "float32 value";
    case GgufType::kBool: return "bool value";
    case GgufType::kString: return "string value";
    case GgufType::kArray: return "array value";
    case GgufType::kUint64: return "uint64 value";
    case GgufType::kInt64: return "int64 value";
    case GgufType::kFloat64: return "float64 value";
  }
  return "value";
}

std::string TypeName(const GgufValue& v) {
  if (v.type != GgufType::kArray) return ToString(v.type);
  return absl::StrFormat("array of %s", ToString(v.array_type));
}

}  // namespace

const char* ToString(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "unknown";
}

int64_t GgufTensorInfo::num_elements() const {
  // The parser has checked that the product fits in int64_t.
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// Reads one GGUF image front to back. Each read first checks the bytes that
// remain, so a lying length or count fails before anything is allocated.
// `where_` names the item being read ("key 'x'", "tensor 'y'") for errors.
class GgufParser {
 public:
  GgufParser(GgufFile* out, const uint8_t* data, size_t size, std::string name)
      : out_(out), data_(data), size_(size), name_(std::move(name)) {}

  absl::Status Run() {
    LLMC_RETURN_IF_ERROR(ReadHeader());
    for (uint64_t i = 0; i < kv_count_; ++i) LLMC_RETURN_IF_ERROR(ReadKeyValue(i));
    LLMC_RETURN_IF_ERROR(ReadAlignment());
    for (uint64_t i = 0; i < tensor_count_; ++i) LLMC_RETURN_IF_ERROR(ReadTensorInfo(i));
    return PlaceTensorData();
  }

 private:
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status Error(const std::string& what) const {
    if (where_.empty()) return absl::InvalidArgumentError(absl::StrFormat("%s: %s", name_, what));
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s: %s", name_, where_, what));
  }

  // Fails unless `n` bytes remain for `field`.
  absl::Status Need(uint64_t n, std::string_view field) const {
    if (n <= remaining()) return absl::OkStatus();
    return Error(absl::StrFormat("truncated: %s at offset %d needs %d bytes, only %d remain", field,
                                 pos_, n, remaining()));
  }

  template <typename T>
  absl::Status Read(T* out, std::string_view field) {
    LLMC_RETURN_IF_ERROR(Need(sizeof(T), field));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  // A string is a u64 length and that many bytes. The cap is checked before
  // the remaining bytes so that an oversized length names the limit. Array
  // elements pass their index; names are only formatted on the error paths,
  // as a vocabulary has ~10^5 strings.
  absl::Status ReadString(std::string* out, std::string_view field, uint64_t cap,
                          int64_t index = -1) {
    auto name = [&] {
      return index < 0 ? std::string(field) : absl::StrFormat("%s %d", field, index);
    };
    const size_t at = pos_;
    if (remaining() < 8) return Need(8, name() + " length");
    uint64_t length = 0;
    std::memcpy(&length, data_ + pos_, 8);
    pos_ += 8;
    if (length > cap)
      return Error(absl::StrFormat("%s length %d at offset %d exceeds the limit of %d bytes",
                                   name(), length, at, cap));
    if (length > remaining())
      return Error(
          absl::StrFormat("truncated: %s length %d at offset %d exceeds the %d bytes that remain",
                          name(), length, at, remaining()));
    out->assign(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return absl::OkStatus();
  }

  absl::Status ReadHeader() {
    LLMC_RETURN_IF_ERROR(Need(4, "magic"));
    if (std::memcmp(data_, kMagic, 4) != 0) {
      std::string shown;
      for (int i = 0; i < 4; ++i) {
        char c = static_cast<char>(data_[i]);
        shown += (c >= 0x20 && c < 0x7f) ? c : '?';
      }
      return Error(
          absl::StrFormat("not a GGUF file: magic is '%s' (bytes %02x %02x %02x %02x), "
                          "expected 'GGUF'",
                          shown, data_[0], data_[1], data_[2], data_[3]));
    }
    pos_ = 4;
    uint32_t version = 0;
    LLMC_RETURN_IF_ERROR(Read(&version, "header field 'version'"));
    if (version != 0 && (version & 0xffff) == 0)
      return Error(absl::StrFormat(
          "header field 'version' is 0x%08x, which looks byte-swapped: big-endian GGUF files "
          "are not supported",
          version));
    if (version == 1)
      return Error(
          "GGUF version 1 is not supported (it predates 64-bit counts); "
          "re-convert the model to version 3");
    if (version != 2 && version != 3)
      return Error(absl::StrFormat("unsupported GGUF version %d (supported: 2, 3)", version));
    out_->version_ = version;
    LLMC_RETURN_IF_ERROR(Read(&tensor_count_, "header field 'tensor_count'"));
    LLMC_RETURN_IF_ERROR(Read(&kv_count_, "header field 'kv_count'"));
    // Bound both counts by the smallest encodings that must follow.
    if (kv_count_ > remaining() / kMinKvBytes)
      return Error(absl::StrFormat(
          "header field 'kv_count' is %d, but the %d bytes that remain hold at most %d pairs",
          kv_count_, remaining(), remaining() / kMinKvBytes));
    if (tensor_count_ > (remaining() - kv_count_ * kMinKvBytes) / kMinTensorInfoBytes)
      return Error(absl::StrFormat(
          "header field 'tensor_count' is %d, but the %d bytes that remain after %d key-value "
          "pairs hold at most %d tensor infos",
          tensor_count_, remaining(), kv_count_,
          (remaining() - kv_count_ * kMinKvBytes) / kMinTensorInfoBytes));
    return absl::OkStatus();
  }

  absl::Status ReadKeyValue(uint64_t index) {
    where_ = absl::StrFormat("key #%d", index);
    std::string key;
    LLMC_RETURN_IF_ERROR(ReadString(&key, "key", kMaxKeyBytes));
    if (key.empty()) return Error("key is empty");
    where_ = absl::StrFormat("key '%s'", key);
    if (!keys_.insert(key).second) return Error("duplicate key");
    GgufValue value;
    uint32_t raw_type = 0;
    LLMC_RETURN_IF_ERROR(Read(&raw_type, "value type"));
    if (!IsKnownType(raw_type))
      return Error(absl::StrFormat("unknown value type %d (valid: 0..12)", raw_type));
    value.type = static_cast<GgufType>(raw_type);
    if (value.type == GgufType::kArray) {
      LLMC_RETURN_IF_ERROR(ReadArray(&value));
    } else {
      LLMC_RETURN_IF_ERROR(ReadScalar(value.type, &value.scalar));
    }
    out_->metadata_.emplace_back(std::move(key), std::move(value));
    where_.clear();
    return absl::OkStatus();
  }

  using Scalar = decltype(GgufValue::scalar);

  template <typename T>
  absl::Status ReadAs(Scalar* out, std::string_view field) {
    T v{};
    LLMC_RETURN_IF_ERROR(Read(&v, field));
    if constexpr (std::is_floating_point_v<T>) {
      *out = static_cast<double>(v);
    } else if constexpr (std::is_signed_v<T>) {
      *out = static_cast<int64_t>(v);
    } else {
      *out = static_cast<uint64_t>(v);
    }
    return absl::OkStatus();
  }

  absl::Status ReadScalar(GgufType type, Scalar* out) {
    const char* field = ScalarField(type);
    switch (type) {
      case GgufType::kUint8: return ReadAs<uint8_t>(out, field);
      case GgufType::kInt8: return ReadAs<int8_t>(out, field);
      case GgufType::kUint16: return ReadAs<uint16_t>(out, field);
      case GgufType::kInt16: return ReadAs<int16_t>(out, field);
      case GgufType::kUint32: return ReadAs<uint32_t>(out, field);
      case GgufType::kInt32: return ReadAs<int32_t>(out, field);
      case GgufType::kUint64: return ReadAs<uint64_t>(out, field);
      case GgufType::kInt64: return ReadAs<int64_t>(out, field);
      case GgufType::kFloat32: return ReadAs<float>(out, field);
      case GgufType::kFloat64: return ReadAs<double>(out, field);
      case GgufType::kBool: {
        // Like llama.cpp, any nonzero byte is true.
        uint8_t b = 0;
        LLMC_RETURN_IF_ERROR(Read(&b, field));
        *out = b != 0;
        return absl::OkStatus();
      }
      case GgufType::kString: {
        std::string s;
        LLMC_RETURN_IF_ERROR(ReadString(&s, "string value", kMaxStringBytes));
        *out = std::move(s);
        return absl::OkStatus();
      }
      case GgufType::kArray: break;
    }
    return Error("internal: ReadScalar on an array");
  }

  absl::Status ReadArray(GgufValue* value) {
    uint32_t raw_type = 0;
    LLMC_RETURN_IF_ERROR(Read(&raw_type, "array element type"));
    if (raw_type == static_cast<uint32_t>(GgufType::kArray))
      return Error("arrays of arrays are not supported");
    if (!IsKnownType(raw_type))
      return Error(absl::StrFormat("unknown array element type %d (valid: 0..12)", raw_type));
    GgufType elem = static_cast<GgufType>(raw_type);
    value->array_type = elem;
    uint64_t count = 0;
    size_t at = pos_;
    LLMC_RETURN_IF_ERROR(Read(&count, "array count"));
    if (count > kMaxArrayCount)
      return Error(absl::StrFormat("array count %d at offset %d exceeds the limit of %d elements",
                                   count, at, kMaxArrayCount));
    // Every element takes at least this many bytes (a string, its length).
    uint64_t min_elem = elem == GgufType::kString ? 8 : FixedSize(elem);
    if (count * min_elem > remaining())  // no overflow: count <= 2^24, min_elem <= 8
      return Error(absl::StrFormat(
          "truncated: array of %d %s at offset %d needs at least %d bytes, only %d remain", count,
          ToString(elem), at, count * min_elem, remaining()));
    if (elem == GgufType::kString) {
      value->strings.resize(count);
      for (uint64_t i = 0; i < count; ++i)
        LLMC_RETURN_IF_ERROR(ReadString(&value->strings[i], "string element", kMaxStringBytes,
                                        static_cast<int64_t>(i)));
    } else if (IsFloat(elem)) {
      value->floats.resize(count);
      for (uint64_t i = 0; i < count; ++i) {
        Scalar s;
        LLMC_RETURN_IF_ERROR(ReadScalar(elem, &s));
        value->floats[i] = std::get<double>(s);
      }
    } else {
      value->ints.resize(count);
      for (uint64_t i = 0; i < count; ++i) {
        Scalar s;
        LLMC_RETURN_IF_ERROR(ReadScalar(elem, &s));
        if (auto* u = std::get_if<uint64_t>(&s)) {
          if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return Error(absl::StrFormat("uint64 element %d is %d, above the int64 range", i, *u));
          value->ints[i] = static_cast<int64_t>(*u);
        } else if (auto* b = std::get_if<bool>(&s)) {
          value->ints[i] = *b ? 1 : 0;
        } else {
          value->ints[i] = std::get<int64_t>(s);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadAlignment() {
    const GgufValue* v = out_->Find("general.alignment");
    if (v == nullptr) return absl::OkStatus();
    where_ = "key 'general.alignment'";
    if (!IsInteger(v->type))
      return Error(absl::StrFormat("has type %s, expected an unsigned integer", TypeName(*v)));
    const auto* s = std::get_if<int64_t>(&v->scalar);
    if (s != nullptr && *s <= 0)
      return Error(
          absl::StrFormat("is %d; it must be a power of two between 1 and %d", *s, kMaxAlignment));
    uint64_t alignment = s != nullptr ? static_cast<uint64_t>(*s) : std::get<uint64_t>(v->scalar);
    if (alignment == 0 || !std::has_single_bit(alignment) || alignment > kMaxAlignment)
      return Error(absl::StrFormat("is %d; it must be a power of two between 1 and %d", alignment,
                                   kMaxAlignment));
    out_->alignment_ = alignment;
    where_.clear();
    return absl::OkStatus();
  }

  absl::Status ReadTensorInfo(uint64_t index) {
    where_ = absl::StrFormat("tensor #%d", index);
    GgufTensorInfo info;
    // GGML_MAX_NAME bounds names, so the cap is checked before anything is copied.
    LLMC_RETURN_IF_ERROR(ReadString(&info.name, "name", kMaxTensorNameBytes));
    if (info.name.empty()) return Error("name is empty");
    where_ = absl::StrFormat("tensor '%s'", info.name);
    if (!tensor_names_.insert(info.name).second) return Error("duplicate tensor name");

    uint32_t n_dims = 0;
    LLMC_RETURN_IF_ERROR(Read(&n_dims, "n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims)
      return Error(absl::StrFormat("n_dims is %d; it must be between 1 and %d", n_dims, kMaxDims));
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      LLMC_RETURN_IF_ERROR(Read(&ne, absl::StrFormat("ne[%d]", d)));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Error(absl::StrFormat("ne[%d] is %d; dimensions must be positive", d, ne));
      info.ne.push_back(static_cast<int64_t>(ne));
      if (__builtin_mul_overflow(elements, static_cast<int64_t>(ne), &elements))
        return Error(absl::StrFormat("shape [%s] has more than 2^63 elements",
                                     absl::StrJoin(info.ne, ", ")));
    }

    uint32_t ggml_type = 0;
    LLMC_RETURN_IF_ERROR(Read(&ggml_type, "ggml type"));
    std::optional<WeightFormatInfo> format;
    if (ggml_type <= static_cast<uint32_t>(std::numeric_limits<int>::max()))
      format = LookupGgmlType(static_cast<int>(ggml_type));
    if (!format)
      return Error(absl::StrFormat(
          "unsupported ggml type %d (supported: f32=0, f16=1, q4_0=2, q4_1=3, q5_0=6, q5_1=7, "
          "q8_0=8, q2_k=10, q3_k=11, q4_k=12, q5_k=13, q6_k=14, bf16=30)",
          ggml_type));
    info.ggml_type = static_cast<int>(ggml_type);
    if (info.ne[0] % format->block_elems != 0)
      return Error(absl::StrFormat("ne[0] = %d is not a multiple of the %s block size %d",
                                   info.ne[0], format->name, format->block_elems));
    // Whole blocks; elements / block_elems * block_bytes can overflow only for
    // the 1-element float formats.
    if (__builtin_mul_overflow(static_cast<uint64_t>(elements / format->block_elems),
                               static_cast<uint64_t>(format->block_bytes), &info.byte_size))
      return Error(
          absl::StrFormat("byte size of %d %s elements overflows", elements, format->name));

    LLMC_RETURN_IF_ERROR(Read(&info.offset, "offset"));
    if (info.offset % out_->alignment_ != 0)
      return Error(absl::StrFormat("offset %d is not a multiple of the alignment %d", info.offset,
                                   out_->alignment_));
    out_->tensors_.push_back(std::move(info));
    where_.clear();
    return absl::OkStatus();
  }

  // The data section starts at the end of the tensor infos, padded to the
  // alignment; tensor offsets count from there, so no tensor can overlap the
  // header. Each tensor must lie inside the file and apart from the others.
  absl::Status PlaceTensorData() {
    uint64_t data_offset = (pos_ + out_->alignment_ - 1) / out_->alignment_ * out_->alignment_;
    out_->data_offset_ = data_offset;
    auto& tensors = out_->tensors_;
    for (const GgufTensorInfo& t : tensors) {
      uint64_t start = 0, end = 0;
      if (__builtin_add_overflow(data_offset, t.offset, &start) ||
          __builtin_add_overflow(start, t.byte_size, &end) || end > size_) {
        where_ = absl::StrFormat("tensor '%s'", t.name);
        return Error(absl::StrFormat(
            "data [offset %d, %d bytes] runs past the end of the file (size %d; data section "
            "starts at %d)",
            t.offset, t.byte_size, size_, data_offset));
      }
    }
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
      const GgufTensorInfo& prev = tensors[order[i - 1]];
      const GgufTensorInfo& cur = tensors[order[i]];
      if (cur.offset < prev.offset + prev.byte_size) {
        where_ = absl::StrFormat("tensor '%s'", cur.name);
        return Error(
            absl::StrFormat("data [offset %d, %d bytes] overlaps tensor '%s' [offset %d, %d bytes]",
                            cur.offset, cur.byte_size, prev.name, prev.offset, prev.byte_size));
      }
    }
    return absl::OkStatus();
  }

  GgufFile* out_;
  const uint8_t* data_;
  size_t size_;
  std::string name_;
  size_t pos_ = 0;
  std::string where_;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  std::unordered_set<std::string> keys_;
  std::unordered_set<std::string> tensor_names_;
};

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  LLMC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  return Parse(std::move(file));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(std::shared_ptr<MappedFile> file) {
  if (file == nullptr) return absl::InvalidArgumentError("GgufFile::Parse: null file");
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf,
                        ParseBytes(file->data(), file->size(), file->path()));
  gguf->file_ = std::move(file);
  return gguf;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::ParseBytes(const uint8_t* data, size_t size,
                                                               const std::string& name) {
  if (data == nullptr && size != 0)
    return absl::InvalidArgumentError(absl::StrFormat("%s: null data", name));
  std::unique_ptr<GgufFile> gguf(new GgufFile());
  gguf->path_ = name;
  gguf->alignment_ = kDefaultAlignment;
  gguf->base_ = data;
  gguf->size_ = size;
  GgufParser parser(gguf.get(), data, size, name);
  LLMC_RETURN_IF_ERROR(parser.Run());
  return gguf;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

namespace {

absl::Status KeyError(const std::string& path, std::string_view key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrFormat("%s: key '%s' %s", path, key, why));
}

absl::Status Missing(const std::string& path, std::string_view key) {
  return absl::NotFoundError(absl::StrFormat("%s: key '%s' is missing", path, key));
}

absl::Status WrongType(const std::string& path, std::string_view key, const GgufValue& v,
                       const char* expected) {
  return KeyError(path, key, absl::StrFormat("has type %s, expected %s", TypeName(v), expected));
}

}  // namespace

absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufType::kString) return WrongType(path_, key, *v, "string");
  return std::get<std::string>(v->scalar);
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (!IsInteger(v->type)) return WrongType(path_, key, *v, "an integer");
  if (auto* u = std::get_if<uint64_t>(&v->scalar)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return KeyError(path_, key, absl::StrFormat("is %d, above the int64 range", *u));
    return static_cast<int64_t>(*u);
  }
  return std::get<int64_t>(v->scalar);
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (IsFloat(v->type)) return std::get<double>(v->scalar);
  if (auto* u = std::get_if<uint64_t>(&v->scalar); u && IsInteger(v->type))
    return static_cast<double>(*u);
  if (auto* s = std::get_if<int64_t>(&v->scalar); s && IsInteger(v->type))
    return static_cast<double>(*s);
  return WrongType(path_, key, *v, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufType::kBool) return WrongType(path_, key, *v, "bool");
  return std::get<bool>(v->scalar);
}

absl::StatusOr<const std::vector<std::string>*> GgufFile::GetStringArray(
    std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufType::kArray || v->array_type != GgufType::kString)
    return WrongType(path_, key, *v, "array of string");
  return &v->strings;
}

absl::StatusOr<const std::vector<int64_t>*> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufType::kArray ||
      !(IsInteger(v->array_type) || v->array_type == GgufType::kBool))
    return WrongType(path_, key, *v, "an array of integers");
  return &v->ints;
}

absl::StatusOr<const std::vector<double>*> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufType::kArray || !IsFloat(v->array_type))
    return WrongType(path_, key, *v, "an array of floats");
  return &v->floats;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const uint8_t* GgufFile::TensorData(const GgufTensorInfo& info) const {
  return base_ + data_offset_ + info.offset;
}

}  // namespace llmc
