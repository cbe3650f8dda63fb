// Storage formats of weights: plain floats, llmc's group-wise integer formats
// (produced by the quantize pass) and GGUF's block formats (kept as they are).
// One table describes them for the compiler (the `llm` dialect's weight type
// uses it for byte sizes and shape rules) and the runtime (packing, loading).
#ifndef LLMC_CORE_WEIGHT_FORMAT_H_
#define LLMC_CORE_WEIGHT_FORMAT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace llmc {

struct WeightFormatInfo {
  std::string_view name;  // as spelled in IR and manifests: "f16", "q4_1", "i4"
  // Elements per block along the innermost dimension; the innermost dimension
  // must be a multiple of it. For llmc's group-wise formats the block is the
  // quantization group, and 0 here means "chosen per weight (32, 64 or 128)".
  int64_t block_elems;
  // Bytes per block; for group-wise formats see GroupwiseBlockBytes().
  int64_t block_bytes;
  int ggml_type;  // GGML type id in GGUF files, -1 if not a GGUF format
  bool grouped;   // llmc group-wise int format (needs a group size)
};

// Every format, in a fixed order: plain floats, group-wise ints, GGUF blocks.
std::span<const WeightFormatInfo> AllWeightFormats();
// Looks a format up by name; nullopt if unknown.
std::optional<WeightFormatInfo> LookupWeightFormat(std::string_view name);
// Looks a format up by GGML type id; nullopt for types llmc does not support.
std::optional<WeightFormatInfo> LookupGgmlType(int ggml_type);

// Bytes of one group of `group` elements in a group-wise format: the packed
// integers plus an f16 scale (and an f16 zero point for the asymmetric i4).
// The byte layout inside a group is documented in format/quantize.h.
int64_t GroupwiseBlockBytes(std::string_view name, int64_t group);

// Total bytes of a weight of `num_elements` elements whose innermost dimension
// is a multiple of the block. Returns -1 if the format is unknown or the count
// does not split into whole blocks.
int64_t WeightByteSize(std::string_view name, int64_t num_elements, int64_t group = 0);

}  // namespace llmc

#endif  // LLMC_CORE_WEIGHT_FORMAT_H_
