// Conversions of GGUF weight formats to f32: the half-precision scalars and
// GGML's block formats (q8_0, q4_0, q4_1, q5_0, q5_1 and the k-quants q2_k …
// q6_k). Each block dequantizer gives bit for bit what ggml's reference
// dequantize_row_* gives (same bit layout, same float operations in the same
// order), so that host-side references and tests can compare exactly.
// Format names are those of weight_format.h.
#ifndef LLMC_CORE_FORMAT_DEQUANTIZE_H_
#define LLMC_CORE_FORMAT_DEQUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace llmc {

// IEEE half <-> float. HalfToFloat is exact (subnormals, infinities and NaN
// payloads kept); FloatToHalf rounds to nearest even, overflows to infinity
// and keeps NaNs quiet NaNs.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);

// bfloat16 <-> float. BF16ToFloat is exact; FloatToBF16 rounds to nearest
// even (as ggml's fp32_to_bf16) and keeps NaNs quiet NaNs.
float BF16ToFloat(uint16_t b);
uint16_t FloatToBF16(float f);

// Dequantizes `count` elements stored in `format` ("f32", "f16", "bf16",
// "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k",
// "q6_k") from `src` (`src_bytes` long, no alignment needed) into `dst`.
// Errors: unknown format, a count that is negative or not a whole number of
// blocks, or `src_bytes` smaller than the blocks need.
absl::Status Dequantize(std::string_view format, const uint8_t* src, size_t src_bytes,
                        int64_t count, float* dst);

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_DEQUANTIZE_H_
