// Reader of GGUF files (versions 2 and 3), the model format of llama.cpp.
//
// Layout (little endian):
//   magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (default 32) | tensor data
// A string is u64 length + bytes (no terminator). An array value is
// u32 element_type + u64 count + elements. ne[0] is the innermost dimension.
//
// Every length, count and offset is checked against the bytes that remain and
// against overflow, with caps on string and array sizes; a malformed file is
// an error naming the file and the field, never a crash. The rules follow
// llama.cpp's gguf.cpp: versions 2 and 3 only; keys at most 65535 bytes,
// non-empty and unique; string values at most 64 MiB; arrays at most 2^24
// elements, never of arrays; `general.alignment` an integer power of two (at
// most 2^31, default 32); tensor names 1..63 bytes and unique; 1..4
// dimensions, each positive, with fewer than 2^63 elements; a GGML type that
// llmc supports (weight_format.h) with ne[0] a whole number of blocks; data
// offsets aligned, inside the file and not overlapping one another.
#ifndef LLMC_CORE_FORMAT_GGUF_H_
#define LLMC_CORE_FORMAT_GGUF_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/format/mapped_file.h"

namespace llmc {

enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

const char* ToString(GgufType type);

// One metadata value. Integers of every width are widened (signed ones to
// int64_t, unsigned ones to uint64_t), floats to double; `type` keeps the
// type stored in the file. Arrays hold their elements in the vector matching
// their element type: strings in `strings`, integers in `ints` (as int64_t;
// uint64 values above INT64_MAX are rejected), floats in `floats`, bools in
// `ints` as 0/1. Arrays of arrays are rejected.
struct GgufValue {
  GgufType type = GgufType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;
  GgufType array_type = GgufType::kUint8;  // for kArray
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGML order: ne[0] innermost
  int ggml_type = 0;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t byte_size = 0;   // computed from ne and the type's block size
  int64_t num_elements() const;
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a mapped file; the result keeps the mapping alive.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(std::shared_ptr<MappedFile> file);
  // Parses an in-memory image (fuzzing, tests); `name` is used in errors.
  // Nothing is copied: `data` must outlive the result, whose TensorData()
  // points into it.
  static absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const uint8_t* data, size_t size,
                                                              const std::string& name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // File offset of the data section (the end of the header, padded to the
  // alignment); tensor offsets count from here.
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  // Typed lookups; errors name the file and the key ("missing" or "has type X").
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;    // any integer type
  absl::StatusOr<double> GetFloat(std::string_view key) const;   // float or integer
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<const std::vector<std::string>*> GetStringArray(std::string_view key) const;
  absl::StatusOr<const std::vector<int64_t>*> GetIntArray(std::string_view key) const;
  absl::StatusOr<const std::vector<double>*> GetFloatArray(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // Pointer to the tensor's bytes inside the mapping (checked at parse time).
  const uint8_t* TensorData(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  std::string path_;
  std::shared_ptr<MappedFile> file_;  // null for ParseBytes
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  friend class GgufParser;
};

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_GGUF_H_
