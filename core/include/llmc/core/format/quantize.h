// llmc's group-wise integer weight formats (`i8`, `i4`; weight_format.h):
// round-to-nearest quantization of float weights, and the reference
// dequantizer that the host kernels and tests are checked against.
//
// Byte layout of one group of G elements (G = 32, 64 or 128), groups laid
// out one after the other along each row:
//
//   i8 (symmetric):   f16 scale s | int8 q[G]
//                     y = q * s, q in [-127, 127], s = max|x| / 127
//   i4 (asymmetric):  f16 scale s | f16 zero z | G/2 bytes of nibbles
//                     y = (q - z) * s, q in [0, 15]
//
// The i4 nibbles come in 16-byte chunks, one per 32 elements: byte j of
// chunk c holds element 32c + j in its low nibble and element 32c + j + 16 in
// its high nibble (GGUF's q4_0/q4_1 order, so the kernels unpack them the
// same way). The zero point is an integer in 0..15 stored as f16 (exact);
// decoders compute (q - z) * s in f32, which is exact in the subtraction for
// any f16 z. The range of each i4 group is widened to include 0 (as GPTQ's
// RTN quantizer does), so that z always lies in 0..15 and zero weights are
// exact. Scales are rounded to f16 first and the integers are computed with
// the rounded scale, so that the stored pair is self-consistent.
#ifndef LLMC_CORE_FORMAT_QUANTIZE_H_
#define LLMC_CORE_FORMAT_QUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace llmc {

// Quantizes `count` floats (rows laid out one after the other; `count` a
// multiple of `group`) into `format` ("i8" or "i4") with `group` elements per
// group, writing WeightByteSize(format, count, group) bytes to `dst`
// (`dst_bytes` must be at least that). Rounding is to nearest, ties to even.
// Errors: unknown format or group, a count that is not whole groups, a short
// destination, a non-finite input, or a scale beyond f16's range.
absl::Status QuantizeGroupwise(std::string_view format, int64_t group, const float* src,
                               int64_t count, uint8_t* dst, size_t dst_bytes);

// The inverse: `count` elements of `format`/`group` from `src` (`src_bytes`
// long) into `dst`, computing y = q * s (i8) or (q - z) * s (i4) in f32.
absl::Status DequantizeGroupwise(std::string_view format, int64_t group, const uint8_t* src,
                                 size_t src_bytes, int64_t count, float* dst);

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_QUANTIZE_H_
