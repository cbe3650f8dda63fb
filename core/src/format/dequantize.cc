#include "llmc/core/format/dequantize.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "llmc/core/format/block_decode.h"
#include "llmc/core/weight_format.h"

// The block layouts and their decoders live in block_decode.h, shared with
// the host and CUDA kernel libraries; this file adds the format table, the
// checks and the encoders (float to f16/bf16).

namespace llmc {
namespace {

// One block in, its elements out; `x` points at the block, `y` at its output.
using BlockFn = void (*)(const uint8_t* x, float* y);

struct BlockFormat {
  std::string_view name;
  BlockFn fn;
};

constexpr BlockFormat kBlockFormats[] = {
    {"q8_0", gguf::decode_q8_0}, {"q4_0", gguf::decode_q4_0}, {"q4_1", gguf::decode_q4_1},
    {"q5_0", gguf::decode_q5_0}, {"q5_1", gguf::decode_q5_1}, {"q2_k", gguf::decode_q2_k},
    {"q3_k", gguf::decode_q3_k}, {"q4_k", gguf::decode_q4_k}, {"q5_k", gguf::decode_q5_k},
    {"q6_k", gguf::decode_q6_k},
};

constexpr const char* kSupported =
    "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k";

}  // namespace

float HalfToFloat(uint16_t h) { return gguf::half_to_float(h); }

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) {
    if (abs == 0x7F800000) return sign | 0x7C00;
    // NaN: keep the top payload bits and set the quiet bit.
    return static_cast<uint16_t>(sign | 0x7E00 | ((abs >> 13) & 0x3FF));
  }
  // 65520 = 0x477FF000 is halfway between the largest half (65504) and the
  // next power of two; it and everything above round to infinity.
  if (abs >= 0x477FF000) return sign | 0x7C00;
  const uint32_t exp = abs >> 23;
  if (exp < 113) {
    // Below the smallest normal half (2^-14): a subnormal or zero. The value is
    // m * 2^(exp-150) with the implicit bit; in units of 2^-24 it is
    // m >> (126 - exp), rounded to nearest even. Below 2^-25 it rounds to 0.
    if (exp < 102) return sign;
    const uint32_t m = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exp;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | r);
  }
  // Normal: rebias the exponent from 127 to 15 and drop 13 mantissa bits,
  // rounding to nearest even; a carry moves into the exponent as it should.
  uint32_t r = (abs >> 13) - (112u << 10);
  const uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float BF16ToFloat(uint16_t b) { return gguf::bf16_to_float(b); }

uint16_t FloatToBF16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even.
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

absl::Status Dequantize(std::string_view format, const uint8_t* src, size_t src_bytes,
                        int64_t count, float* dst) {
  const auto info = LookupWeightFormat(format);
  const BlockFormat* block = nullptr;
  for (const auto& b : kBlockFormats)
    if (b.name == format) block = &b;
  const bool plain = format == "f32" || format == "f16" || format == "bf16";
  if (!info || (!plain && block == nullptr))
    return absl::InvalidArgumentError(absl::StrFormat(
        "dequantize: unknown or unsupported format '%s' (supported: %s)", format, kSupported));
  if (count < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("dequantize %s: count %d is negative", format, count));
  if (count % info->block_elems != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("dequantize %s: count %d is not a whole number of %d-element blocks",
                        format, count, info->block_elems));
  const uint64_t blocks = static_cast<uint64_t>(count / info->block_elems);
  uint64_t need = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info->block_bytes), &need) ||
      src_bytes < need)
    return absl::InvalidArgumentError(absl::StrFormat(
        "dequantize %s: %d elements need %d bytes, got %d", format, count, need, src_bytes));
  if (count == 0) return absl::OkStatus();
  if (format == "f32") {
    std::memcpy(dst, src, need);
  } else if (format == "f16") {
    for (int64_t i = 0; i < count; ++i) dst[i] = gguf::half_to_float(gguf::load_u16(src + 2 * i));
  } else if (format == "bf16") {
    for (int64_t i = 0; i < count; ++i) dst[i] = gguf::bf16_to_float(gguf::load_u16(src + 2 * i));
  } else {
    for (uint64_t b = 0; b < blocks; ++b)
      block->fn(src + b * info->block_bytes, dst + b * info->block_elems);
  }
  return absl::OkStatus();
}

}  // namespace llmc
