#include "llmc/core/format/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "json_parse.h"
#include "llmc/core/status_macros.h"

namespace llmc {
namespace {

using format_internal::DescribeJson;
using format_internal::ParseJson;
using nlohmann::json;

// The reference implementation refuses headers above 100 MB; a header that
// large would be a million tensors, so anything bigger is corruption.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

struct Dtype {
  const char* name;
  uint64_t size;
};
// The byte-sized dtypes of the safetensors spec. The sub-byte ones (F4,
// F6_E2M3, F6_E3M2) pack several elements per byte and are left out on
// purpose: no supported checkpoint uses them, and they would need a bit count.
constexpr Dtype kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};

const Dtype* FindDtype(const std::string& name) {
  for (const Dtype& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

absl::Status Error(const std::string& file, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", message));
}

absl::Status TensorError(const std::string& file, const std::string& tensor,
                         absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", tensor, "': ", message));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A JSON array as written, for messages about arrays that failed to parse.
std::string ArrayText(const json& array) {
  std::vector<std::string> items;
  for (const json& item : array) items.push_back(DescribeJson(item));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

// Fetches a required field of a tensor entry.
absl::StatusOr<const json*> Field(const std::string& file, const std::string& tensor,
                                  const json& entry, const char* key) {
  auto it = entry.find(key);
  if (it == entry.end())
    return TensorError(file, tensor, absl::StrFormat("missing field '%s'", key));
  return &*it;
}

absl::StatusOr<SafetensorsTensor> ParseTensor(const std::string& file, const std::string& name,
                                              const json& entry, const uint8_t* section,
                                              uint64_t section_size) {
  if (!entry.is_object())
    return TensorError(file, name,
                       absl::StrCat("entry must be an object, got ", DescribeJson(entry)));
  SafetensorsTensor t;
  t.name = name;
  t.file = file;

  LLMC_ASSIGN_OR_RETURN(const json* dtype, Field(file, name, entry, "dtype"));
  if (!dtype->is_string())
    return TensorError(file, name,
                       absl::StrCat("field 'dtype' must be a string, got ", DescribeJson(*dtype)));
  t.dtype = dtype->get<std::string>();
  const Dtype* info = FindDtype(t.dtype);
  if (info == nullptr) {
    std::vector<const char*> known;
    for (const Dtype& d : kDtypes) known.push_back(d.name);
    return TensorError(
        file, name,
        absl::StrFormat("unknown dtype '%s' (known: %s)", t.dtype, absl::StrJoin(known, ", ")));
  }

  LLMC_ASSIGN_OR_RETURN(const json* shape, Field(file, name, entry, "shape"));
  if (!shape->is_array())
    return TensorError(file, name,
                       absl::StrCat("field 'shape' must be an array, got ", DescribeJson(*shape)));
  for (size_t i = 0; i < shape->size(); ++i) {
    const json& dim = (*shape)[i];
    if (dim.is_number_integer() && !dim.is_number_unsigned())
      return TensorError(
          file, name, absl::StrFormat("shape %s: dimension %d is negative", ArrayText(*shape), i));
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return TensorError(file, name,
                         absl::StrFormat("shape %s: dimension %d must be a non-negative integer",
                                         ArrayText(*shape), i));
    t.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }

  LLMC_ASSIGN_OR_RETURN(const json* offsets, Field(file, name, entry, "data_offsets"));
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    return TensorError(
        file, name,
        absl::StrCat("field 'data_offsets' must be two non-negative integers "
                     "[begin, end], got ",
                     offsets->is_array() ? ArrayText(*offsets) : DescribeJson(*offsets)));
  uint64_t begin = (*offsets)[0].get<uint64_t>();
  uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end)
    return TensorError(file, name,
                       absl::StrFormat("data_offsets [%d, %d]: begin is after end", begin, end));
  if (end > section_size)
    return TensorError(file, name,
                       absl::StrFormat("data_offsets [%d, %d] run past the data section (%d bytes)",
                                       begin, end, section_size));

  // elements x element size, refusing shapes whose byte count overflows.
  uint64_t needed = info->size;
  for (int64_t dim : t.shape) {
    if (__builtin_mul_overflow(needed, static_cast<uint64_t>(dim), &needed))
      return TensorError(file, name,
                         absl::StrFormat("shape %s of %s overflows a 64-bit byte count",
                                         ShapeText(t.shape), t.dtype));
  }
  if (end - begin != needed)
    return TensorError(
        file, name,
        absl::StrFormat("data_offsets [%d, %d] hold %d bytes but shape %s of %s "
                        "needs %d",
                        begin, end, end - begin, ShapeText(t.shape), t.dtype, needed));
  t.data = section + begin;
  t.byte_size = needed;
  return t;
}

// `__metadata__` is free-form text (format, producer); only its types matter.
absl::Status CheckMetadata(const std::string& file, const json& metadata) {
  if (!metadata.is_object())
    return Error(file, absl::StrCat("field '__metadata__' must be an object of strings, got ",
                                    DescribeJson(metadata)));
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string())
      return Error(file,
                   absl::StrFormat("field '__metadata__': key '%s' must hold a string, got %s", key,
                                   DescribeJson(value)));
  }
  return absl::OkStatus();
}

// Rejects tensors that share bytes. Empty tensors own no bytes and may sit
// anywhere, even at the same offset as another tensor.
absl::Status CheckOverlaps(const std::string& file, const std::vector<SafetensorsTensor>& tensors,
                           const uint8_t* section) {
  const SafetensorsTensor* last = nullptr;  // non-empty tensor that ends furthest
  for (const SafetensorsTensor& t : tensors) {
    if (t.byte_size == 0) continue;
    if (last != nullptr && t.data < last->data + last->byte_size)
      return TensorError(
          file, t.name,
          absl::StrFormat("data_offsets [%d, %d] overlap tensor '%s' at [%d, %d]", t.data - section,
                          t.data - section + t.byte_size, last->name, last->data - section,
                          last->data - section + last->byte_size));
    if (last == nullptr || t.data + t.byte_size > last->data + last->byte_size) last = &t;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<SafetensorsTensor>> ParseSafetensorsHeader(const uint8_t* data,
                                                                      size_t size,
                                                                      const std::string& name) {
  if (size < 8)
    return Error(name,
                 absl::StrFormat("file is %d bytes, too short for the 8-byte header length", size));
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | data[i];
  if (header_size > kMaxHeaderBytes)
    return Error(name, absl::StrFormat("header length %d exceeds the limit of %d bytes (100 MiB)",
                                       header_size, kMaxHeaderBytes));
  if (header_size > size - 8)
    return Error(name, absl::StrFormat("header length %d runs past the end of the file (%d bytes "
                                       "follow the length)",
                                       header_size, size - 8));

  std::string_view text(reinterpret_cast<const char*>(data + 8), header_size);
  std::string duplicate;
  LLMC_ASSIGN_OR_RETURN(json header, ParseJson(text, name + ": header", &duplicate));
  if (!header.is_object())
    return Error(name, absl::StrCat("header must be a JSON object, got ", DescribeJson(header)));
  if (!duplicate.empty()) return TensorError(name, duplicate, "appears twice in the header");

  const uint8_t* section = data + 8 + header_size;
  uint64_t section_size = size - 8 - header_size;
  std::vector<SafetensorsTensor> tensors;
  tensors.reserve(header.size());
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      LLMC_RETURN_IF_ERROR(CheckMetadata(name, entry));
      continue;
    }
    if (key.empty()) return Error(name, "a tensor has an empty name");
    LLMC_ASSIGN_OR_RETURN(SafetensorsTensor t,
                          ParseTensor(name, key, entry, section, section_size));
    tensors.push_back(std::move(t));
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.data != b.data ? a.data < b.data : a.name < b.name;
            });
  LLMC_RETURN_IF_ERROR(CheckOverlaps(name, tensors, section));
  return tensors;
}

namespace {

namespace fs = std::filesystem;

bool IsFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// The shards an index names, each with the tensors the index places in it.
using ShardPlan = std::map<std::string, std::vector<std::string>>;

absl::StatusOr<ShardPlan> ReadIndex(const MappedFile& index) {
  const std::string& file = index.path();
  std::string_view text(reinterpret_cast<const char*>(index.data()), index.size());
  LLMC_ASSIGN_OR_RETURN(json j, ParseJson(text, file));
  if (!j.is_object())
    return Error(file, absl::StrCat("must be a JSON object, got ", DescribeJson(j)));
  auto map = j.find("weight_map");
  if (map == j.end()) return Error(file, "missing field 'weight_map'");
  if (!map->is_object())
    return Error(file,
                 absl::StrCat("field 'weight_map' must be an object, got ", DescribeJson(*map)));
  if (map->empty()) return Error(file, "field 'weight_map' is empty");
  ShardPlan plan;
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string())
      return Error(file, absl::StrFormat("weight_map: tensor '%s' must map to a file name, got %s",
                                         tensor, DescribeJson(shard)));
    const std::string& shard_name = shard.get_ref<const std::string&>();
    // Shards sit next to the index; a path could reach outside the model.
    if (shard_name.empty() || shard_name == "." || shard_name == ".." ||
        shard_name.find('/') != std::string::npos || shard_name.find('\\') != std::string::npos)
      return Error(file, absl::StrFormat("weight_map: tensor '%s' maps to '%s', which is not a "
                                         "file name in the index's folder",
                                         tensor, shard_name));
    plan[shard_name].push_back(tensor);
  }
  return plan;
}

}  // namespace

const SafetensorsTensor* SafetensorsModel::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(const std::string& path) {
  std::unique_ptr<SafetensorsModel> model(new SafetensorsModel);
  // Maps one shard and adds its tensors, refusing a name another shard has.
  auto add_shard = [&](const std::string& shard_path) -> absl::Status {
    LLMC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(shard_path));
    LLMC_ASSIGN_OR_RETURN(std::vector<SafetensorsTensor> tensors,
                          ParseSafetensorsHeader(file->data(), file->size(), shard_path));
    model->files_.push_back(std::move(file));
    for (SafetensorsTensor& t : tensors) {
      auto [it, inserted] = model->by_name_.emplace(t.name, model->tensors_.size());
      if (!inserted)
        return TensorError(shard_path, t.name,
                           absl::StrCat("also appears in ", model->tensors_[it->second].file));
      model->tensors_.push_back(std::move(t));
    }
    return absl::OkStatus();
  };

  std::error_code ec;
  fs::path index_path;
  if (fs::is_directory(path, ec)) {
    fs::path dir(path);
    if (IsFile(dir / kSingleFile)) {
      LLMC_RETURN_IF_ERROR(add_shard((dir / kSingleFile).string()));
      return model;
    }
    if (!IsFile(dir / kIndexFile))
      return absl::NotFoundError(
          absl::StrFormat("%s: folder holds neither %s nor %s", path, kSingleFile, kIndexFile));
    index_path = dir / kIndexFile;
  } else if (path.size() >= 11 && path.compare(path.size() - 11, 11, ".index.json") == 0) {
    index_path = path;  // the index itself, named directly
  } else {
    LLMC_RETURN_IF_ERROR(add_shard(path));
    return model;
  }

  LLMC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> index, MappedFile::Open(index_path.string()));
  LLMC_ASSIGN_OR_RETURN(ShardPlan plan, ReadIndex(*index));
  const std::string& index_name = index->path();
  for (const auto& [shard, names] : plan) {
    fs::path shard_path = index_path.parent_path() / shard;
    if (!IsFile(shard_path))
      return absl::NotFoundError(absl::StrFormat(
          "%s: weight_map puts tensor '%s' in shard '%s', which does not exist (looked for %s)",
          index_name, names.front(), shard, shard_path.string()));
    size_t first = model->tensors_.size();
    LLMC_RETURN_IF_ERROR(add_shard(shard_path.string()));
    std::set<std::string_view> present;
    for (size_t i = first; i < model->tensors_.size(); ++i) present.insert(model->tensors_[i].name);
    for (const std::string& name : names) {
      if (!present.count(name))
        return Error(index_name,
                     absl::StrFormat("weight_map puts tensor '%s' in shard '%s', which does not "
                                     "contain it",
                                     name, shard));
    }
  }
  // Tensors a shard holds but the index does not list are kept: transformers
  // loads whole shards, so they are part of the checkpoint all the same.
  return model;
}

}  // namespace llmc
