// Builds GGUF images byte by byte for tests: valid files with any metadata and
// tensors, and, through the overrides and the recorded layout, the corrupt
// files of the error-path tests (lying counts, bad offsets, truncations).
#ifndef LLMC_TEST_UNIT_RUNTIME_FORMAT_GGUF_BUILDER_H_
#define LLMC_TEST_UNIT_RUNTIME_FORMAT_GGUF_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmc/core/format/gguf.h"
#include "llmc/core/weight_format.h"

namespace llmc::testing {

// Little-endian byte sink.
class ByteWriter {
 public:
  template <typename T>
  ByteWriter& Put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes_.insert(bytes_.end(), b, b + sizeof(T));
    return *this;
  }
  ByteWriter& U8(uint8_t v) { return Put(v); }
  ByteWriter& U32(uint32_t v) { return Put(v); }
  ByteWriter& U64(uint64_t v) { return Put(v); }
  // A GGUF string: u64 length, then the bytes.
  ByteWriter& Str(std::string_view s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  ByteWriter& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  ByteWriter& Raw(const std::vector<uint8_t>& v) { return Raw(v.data(), v.size()); }
  ByteWriter& PadTo(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Where each part of a built image starts.
struct GgufLayout {
  size_t kv_begin = 0;              // first key-value pair (after the 24-byte header)
  std::vector<size_t> key_begin;    // each pair's key length field
  std::vector<size_t> value_begin;  // each pair's value type field
  size_t tensor_infos_begin = 0;
  std::vector<size_t> tensor_info_begin;
  size_t data_begin = 0;                  // the data section (padded)
  std::vector<size_t> tensor_data_begin;  // file offset of each tensor's bytes
  size_t size = 0;
};

class GgufBuilder {
 public:
  GgufBuilder& Version(uint32_t v) {
    version_ = v;
    return *this;
  }
  // Header counts written instead of the true ones.
  GgufBuilder& KvCount(uint64_t n) {
    kv_count_ = n;
    return *this;
  }
  GgufBuilder& TensorCount(uint64_t n) {
    tensor_count_ = n;
    return *this;
  }

  // A key-value pair with an already-encoded value (everything after the type).
  GgufBuilder& RawKv(std::string key, uint32_t type, std::vector<uint8_t> value) {
    kvs_.push_back({std::move(key), type, std::move(value)});
    return *this;
  }

  template <typename T>
  GgufBuilder& Scalar(std::string key, GgufType type, T v) {
    ByteWriter w;
    w.Put(v);
    return RawKv(std::move(key), static_cast<uint32_t>(type), std::move(w.bytes()));
  }
  GgufBuilder& U8(std::string k, uint8_t v) { return Scalar(std::move(k), GgufType::kUint8, v); }
  GgufBuilder& I8(std::string k, int8_t v) { return Scalar(std::move(k), GgufType::kInt8, v); }
  GgufBuilder& U16(std::string k, uint16_t v) { return Scalar(std::move(k), GgufType::kUint16, v); }
  GgufBuilder& I16(std::string k, int16_t v) { return Scalar(std::move(k), GgufType::kInt16, v); }
  GgufBuilder& U32(std::string k, uint32_t v) { return Scalar(std::move(k), GgufType::kUint32, v); }
  GgufBuilder& I32(std::string k, int32_t v) { return Scalar(std::move(k), GgufType::kInt32, v); }
  GgufBuilder& U64(std::string k, uint64_t v) { return Scalar(std::move(k), GgufType::kUint64, v); }
  GgufBuilder& I64(std::string k, int64_t v) { return Scalar(std::move(k), GgufType::kInt64, v); }
  GgufBuilder& F32(std::string k, float v) { return Scalar(std::move(k), GgufType::kFloat32, v); }
  GgufBuilder& F64(std::string k, double v) { return Scalar(std::move(k), GgufType::kFloat64, v); }
  GgufBuilder& Bool(std::string k, bool v) {
    return Scalar(std::move(k), GgufType::kBool, static_cast<uint8_t>(v));
  }
  GgufBuilder& Str(std::string k, std::string_view v) {
    ByteWriter w;
    w.Str(v);
    return RawKv(std::move(k), static_cast<uint32_t>(GgufType::kString), std::move(w.bytes()));
  }

  // An array of fixed-size elements of C++ type T stored as `elem`.
  template <typename T>
  GgufBuilder& Array(std::string key, GgufType elem, const std::vector<T>& values) {
    ByteWriter w;
    w.U32(static_cast<uint32_t>(elem)).U64(values.size());
    for (const T& v : values) w.Put(v);
    return RawKv(std::move(key), static_cast<uint32_t>(GgufType::kArray), std::move(w.bytes()));
  }
  GgufBuilder& StrArray(std::string key, const std::vector<std::string>& values) {
    ByteWriter w;
    w.U32(static_cast<uint32_t>(GgufType::kString)).U64(values.size());
    for (const auto& v : values) w.Str(v);
    return RawKv(std::move(key), static_cast<uint32_t>(GgufType::kArray), std::move(w.bytes()));
  }

  // Writes `general.alignment` (u32) and, if it is a power of two, aligns the
  // data section to it (an invalid one is only written, for error tests).
  GgufBuilder& Alignment(uint32_t a) {
    if (a != 0 && (a & (a - 1)) == 0) alignment_ = a;
    return U32("general.alignment", a);
  }

  // A tensor; `data` defaults to zeros of the size implied by the type. An
  // explicit `offset` is written as is and no data is placed for the tensor.
  GgufBuilder& Tensor(std::string name, std::vector<uint64_t> ne, uint32_t ggml_type,
                      std::vector<uint8_t> data = {}, std::optional<uint64_t> offset = {}) {
    if (data.empty() && !offset) {
      uint64_t n = 1;
      for (uint64_t d : ne) n *= d;
      if (auto f = LookupGgmlType(static_cast<int>(ggml_type)))
        data.assign(n / f->block_elems * f->block_bytes, 0);
    }
    tensors_.push_back({std::move(name), std::move(ne), ggml_type, std::move(data), offset});
    return *this;
  }

  std::vector<uint8_t> Build(GgufLayout* layout = nullptr) const {
    GgufLayout l;
    ByteWriter w;
    w.Raw("GGUF", 4).U32(version_);
    w.U64(tensor_count_.value_or(tensors_.size()));
    w.U64(kv_count_.value_or(kvs_.size()));
    l.kv_begin = w.size();
    for (const auto& kv : kvs_) {
      l.key_begin.push_back(w.size());
      w.Str(kv.key);
      l.value_begin.push_back(w.size());
      w.U32(kv.type).Raw(kv.value);
    }
    l.tensor_infos_begin = w.size();
    // Offsets of tensors without an explicit one: packed in order, aligned.
    std::vector<uint64_t> offsets;
    uint64_t cursor = 0;
    for (const auto& t : tensors_) {
      if (t.offset) {
        offsets.push_back(*t.offset);
        continue;
      }
      cursor = (cursor + alignment_ - 1) / alignment_ * alignment_;
      offsets.push_back(cursor);
      cursor += t.data.size();
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      l.tensor_info_begin.push_back(w.size());
      w.Str(t.name).U32(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) w.U64(d);
      w.U32(t.ggml_type).U64(offsets[i]);
    }
    w.PadTo(alignment_);
    l.data_begin = w.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      l.tensor_data_begin.push_back(l.data_begin + offsets[i]);
      if (tensors_[i].offset) continue;
      auto& bytes = w.bytes();
      if (bytes.size() < l.data_begin + offsets[i]) bytes.resize(l.data_begin + offsets[i], 0);
      w.Raw(tensors_[i].data);
    }
    l.size = w.size();
    if (layout != nullptr) *layout = l;
    return std::move(w.bytes());
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;
  };
  struct TensorSpec {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t ggml_type;
    std::vector<uint8_t> data;
    std::optional<uint64_t> offset;
  };
  uint32_t version_ = 3;
  std::optional<uint64_t> kv_count_, tensor_count_;
  uint64_t alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<TensorSpec> tensors_;
};

}  // namespace llmc::testing

#endif  // LLMC_TEST_UNIT_RUNTIME_FORMAT_GGUF_BUILDER_H_
