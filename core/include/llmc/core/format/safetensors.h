// Reader of safetensors files, the tensor format of Hugging Face checkpoints.
//
// Layout:
//   u64 N (little endian) | N bytes of UTF-8 JSON | data section
// The JSON is an object mapping each tensor name to
//   {"dtype": "F32", "shape": [576, 1536], "data_offsets": [begin, end]}
// with offsets relative to the start of the data section, plus an optional
// "__metadata__" object of string values. Shapes are outermost first
// (row-major). A model may be split into shards listed by
// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard}}.
//
// Nothing is copied: every shard is mapped, tensors point into the mapping and
// pages are read when a tensor is first touched. The format does not align the
// data section, so `data` may be unaligned for its dtype.
//
// Everything is checked — header length against the file and a 100 MiB cap,
// the JSON's structure and types, offsets against the data section, byte sizes
// against shape x element size (overflow included), overlaps between tensors,
// and for a sharded model the index against the shards — and every error names
// the file and the tensor or field at fault. A malformed file never crashes.
#ifndef LLMC_CORE_FORMAT_SAFETENSORS_H_
#define LLMC_CORE_FORMAT_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/format/mapped_file.h"

namespace llmc {

struct SafetensorsTensor {
  std::string name;
  // As written in the header: "F32", "F16", "BF16", "I8", and the other
  // byte-sized safetensors dtypes (BOOL, U8, I16, U16, I32, U32, I64, U64, F64,
  // F8_E4M3, F8_E5M2, F8_E8M0, C64), which parse but which a consumer
  // may reject. Unknown and sub-byte dtypes (F4, F6_*) are parse errors.
  std::string dtype;
  std::vector<int64_t> shape;     // outermost first; [] is a scalar
  const uint8_t* data = nullptr;  // inside the file's mapping; may be unaligned
  uint64_t byte_size = 0;
  std::string file;  // path of the shard it lives in
};

// Parses the header of one .safetensors image (u64 little-endian header length
// N, N bytes of JSON, then data). `name` is used in errors and as each tensor's
// `file`. Pointers refer into `data`. Tensors come back in data order.
absl::StatusOr<std::vector<SafetensorsTensor>> ParseSafetensorsHeader(const uint8_t* data,
                                                                      size_t size,
                                                                      const std::string& name);

class SafetensorsModel {
 public:
  // `path` is a .safetensors file, or a folder holding model.safetensors or
  // model.safetensors.index.json (+ the shards it names, e.g.
  // model-00001-of-00002.safetensors). A folder with both uses
  // model.safetensors, as transformers does.
  static absl::StatusOr<std::unique_ptr<SafetensorsModel>> Open(const std::string& path);

  // Every tensor of every shard: shards in file-name order, data order within
  // a shard.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // nullptr when there is no tensor of that name.
  const SafetensorsTensor* Find(std::string_view name) const;

 private:
  SafetensorsModel() = default;
  std::vector<std::shared_ptr<MappedFile>> files_;  // keep tensors' bytes mapped
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> by_name_;  // index into tensors_
};

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_SAFETENSORS_H_
