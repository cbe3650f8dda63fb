#include "llmc/core/weight_format.h"

namespace llmc {
namespace {

// Block sizes and byte counts of GGML's formats follow ggml's type traits
// (QK4_0 = 32, QK_K = 256 and the block structs in ggml-common.h).
constexpr WeightFormatInfo kFormats[] = {
    {"f32", 1, 4, 0, false},      {"f16", 1, 2, 1, false},      {"bf16", 1, 2, 30, false},
    {"i8", 0, 0, -1, true},       {"i4", 0, 0, -1, true},       {"q8_0", 32, 34, 8, false},
    {"q4_0", 32, 18, 2, false},   {"q4_1", 32, 20, 3, false},   {"q5_0", 32, 22, 6, false},
    {"q5_1", 32, 24, 7, false},   {"q2_k", 256, 84, 10, false}, {"q3_k", 256, 110, 11, false},
    {"q4_k", 256, 144, 12, false}, {"q5_k", 256, 176, 13, false}, {"q6_k", 256, 210, 14, false},
};

}  // namespace

std::span<const WeightFormatInfo> AllWeightFormats() { return kFormats; }

std::optional<WeightFormatInfo> LookupWeightFormat(std::string_view name) {
  for (const auto& f : kFormats)
    if (f.name == name) return f;
  return std::nullopt;
}

std::optional<WeightFormatInfo> LookupGgmlType(int ggml_type) {
  if (ggml_type < 0) return std::nullopt;
  for (const auto& f : kFormats)
    if (f.ggml_type == ggml_type) return f;
  return std::nullopt;
}

int64_t GroupwiseBlockBytes(std::string_view name, int64_t group) {
  if (name == "i8") return group + 2;          // int8 values + f16 scale
  if (name == "i4") return group / 2 + 2 + 2;  // packed nibbles + f16 scale + f16 zero
  return -1;
}

int64_t WeightByteSize(std::string_view name, int64_t num_elements, int64_t group) {
  auto info = LookupWeightFormat(name);
  if (!info || num_elements < 0) return -1;
  int64_t block = info->grouped ? group : info->block_elems;
  int64_t bytes = info->grouped ? GroupwiseBlockBytes(name, group) : info->block_bytes;
  if (block <= 0 || bytes <= 0 || num_elements % block != 0) return -1;
  return num_elements / block * bytes;
}

}  // namespace llmc
