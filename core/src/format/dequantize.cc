#include "llmc/core/format/dequantize.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_format.h"
#include "llmc/core/weight_format.h"

// Exactness note: ggml's reference evaluates e.g. `d1 * q - m1` as a rounded
// product then a rounded difference. The code below keeps every operation in
// its own statement and in ggml's order; it matches bit for bit as long as the
// compiler does not fuse a multiply and an add (x86-64 without -mfma never
// does; on targets with FMA, build with -ffp-contract=off to keep exactness).

namespace llmc {
namespace {

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// One block in, its elements out; `x` points at the block, `y` at its output.
using BlockFn = void (*)(const uint8_t* x, float* y);

// q8_0: f16 d, then 32 int8 quants; y = q * d.
void BlockQ8_0(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const int8_t* qs = reinterpret_cast<const int8_t*>(x + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// q4_0: f16 d, then 16 bytes; byte j holds element j in its low nibble and
// element j+16 in its high nibble, both offset by 8; y = (q - 8) * d.
void BlockQ4_0(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const uint8_t* qs = x + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// q4_1: f16 d, f16 m, then nibbles as in q4_0 without the offset; y = q*d + m.
void BlockQ4_1(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const float m = LoadHalf(x + 2);
  const uint8_t* qs = x + 4;
  for (int j = 0; j < 16; ++j) {
    const float lo = static_cast<float>(qs[j] & 0x0F) * d;
    const float hi = static_cast<float>(qs[j] >> 4) * d;
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

// The fifth bit of q5 element j (0..31) is bit j of the 32-bit word qh.
int Q5High(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1) << 4; }

// q5_0: f16 d, u32 qh, then nibbles as in q4_0; y = (q5 - 16) * d.
void BlockQ5_0(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const uint32_t qh = LoadU32(x + 2);
  const uint8_t* qs = x + 6;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(((qs[j] & 0x0F) | Q5High(qh, j)) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | Q5High(qh, j + 16)) - 16) * d;
  }
}

// q5_1: f16 d, f16 m, u32 qh, then nibbles; y = q5*d + m.
void BlockQ5_1(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const float m = LoadHalf(x + 2);
  const uint32_t qh = LoadU32(x + 4);
  const uint8_t* qs = x + 8;
  for (int j = 0; j < 16; ++j) {
    const float lo = static_cast<float>((qs[j] & 0x0F) | Q5High(qh, j)) * d;
    const float hi = static_cast<float>((qs[j] >> 4) | Q5High(qh, j + 16)) * d;
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

// The k-quants below share one walk over a 256-element super-block: two
// halves of 128 elements; in half h, 2-bit field j (bits 2j..2j+1) of the 32
// quant bytes qs[32h .. 32h+31] gives elements 128h + 32j .. +31, in two
// groups of 16 with one sub-block scale each (sub-block 8h + 2j + g).

// q2_k: 16 scale bytes (low nibble: scale, high nibble: min), 64 quant bytes,
// f16 d, f16 dmin; y = (d*scale) * q - (dmin*min).
void BlockQ2_K(const uint8_t* x, float* y) {
  const uint8_t* scales = x;
  const uint8_t* qs = x + 16;
  const float d = LoadHalf(x + 80);
  const float dmin = LoadHalf(x + 82);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int g = 0; g < 2; ++g) {
        const uint8_t sc = scales[8 * h + 2 * j + g];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        float* out = y + 128 * h + 32 * j + 16 * g;
        const uint8_t* q = qs + 32 * h + 16 * g;
        for (int l = 0; l < 16; ++l) {
          const float v = dl * static_cast<float>((q[l] >> (2 * j)) & 3);
          out[l] = v - ml;
        }
      }
}

// q3_k: 32 hmask bytes, 64 quant bytes, 12 scale bytes, f16 d. The 16 scales
// are 6-bit, stored minus 32: their low 4 bits are the nibbles of bytes 0..7
// (low nibbles for scales 0..7, high nibbles for 8..15) and their high 2 bits
// are field j/4 of byte 8 + j%4. The third quant bit of element 128h + 32j +
// 16g + l is bit 4h + j of hmask[16g + l]; when it is clear, 4 is subtracted.
int Q3Scale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

void BlockQ3_K(const uint8_t* x, float* y) {
  const uint8_t* hmask = x;
  const uint8_t* qs = x + 32;
  const uint8_t* scales = x + 96;
  const float d = LoadHalf(x + 108);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int g = 0; g < 2; ++g) {
        const float dl = d * static_cast<float>(Q3Scale(scales, 8 * h + 2 * j + g));
        const uint8_t bit = static_cast<uint8_t>(1u << (4 * h + j));
        float* out = y + 128 * h + 32 * j + 16 * g;
        const uint8_t* q = qs + 32 * h + 16 * g;
        const uint8_t* hm = hmask + 16 * g;
        for (int l = 0; l < 16; ++l) {
          const int v = ((q[l] >> (2 * j)) & 3) - ((hm[l] & bit) ? 0 : 4);
          out[l] = dl * static_cast<float>(v);
        }
      }
}

// q4_k and q5_k pack 8 6-bit scales and 8 6-bit mins in 12 bytes: for
// sub-block j < 4, scale = s[j] & 63 and min = s[j+4] & 63; for j >= 4 the
// low 4 bits come from the nibbles of s[j+4] and the high 2 bits from the top
// bits of s[j-4] (scale) and s[j] (min).
void ScaleMinK4(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// q4_k: f16 d, f16 dmin, 12 scale bytes, 128 quant bytes. Chunk c (64
// elements) uses bytes qs[32c..32c+31]: low nibbles give elements 64c..+31
// (sub-block 2c), high nibbles 64c+32..+63 (sub-block 2c+1);
// y = (d*scale) * q - (dmin*min).
void BlockQ4_K(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const float dmin = LoadHalf(x + 2);
  const uint8_t* scales = x + 4;
  const uint8_t* qs = x + 16;
  for (int c = 0; c < 4; ++c) {
    int sc1, m1, sc2, m2;
    ScaleMinK4(scales, 2 * c, &sc1, &m1);
    ScaleMinK4(scales, 2 * c + 1, &sc2, &m2);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    const float d2 = d * static_cast<float>(sc2), min2 = dmin * static_cast<float>(m2);
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      const float lo = d1 * static_cast<float>(q[l] & 0x0F);
      y[64 * c + l] = lo - min1;
    }
    for (int l = 0; l < 32; ++l) {
      const float hi = d2 * static_cast<float>(q[l] >> 4);
      y[64 * c + 32 + l] = hi - min2;
    }
  }
}

// q5_k: as q4_k with 32 qh bytes (after the scales, before the nibbles): the
// fifth bit of element 64c + l is bit 2c of qh[l], of element 64c + 32 + l
// bit 2c + 1.
void BlockQ5_K(const uint8_t* x, float* y) {
  const float d = LoadHalf(x);
  const float dmin = LoadHalf(x + 2);
  const uint8_t* scales = x + 4;
  const uint8_t* qh = x + 16;
  const uint8_t* qs = x + 48;
  for (int c = 0; c < 4; ++c) {
    int sc1, m1, sc2, m2;
    ScaleMinK4(scales, 2 * c, &sc1, &m1);
    ScaleMinK4(scales, 2 * c + 1, &sc2, &m2);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    const float d2 = d * static_cast<float>(sc2), min2 = dmin * static_cast<float>(m2);
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] & 0x0F) + (((qh[l] >> (2 * c)) & 1) << 4);
      const float lo = d1 * static_cast<float>(v);
      y[64 * c + l] = lo - min1;
    }
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] >> 4) + (((qh[l] >> (2 * c + 1)) & 1) << 4);
      const float hi = d2 * static_cast<float>(v);
      y[64 * c + 32 + l] = hi - min2;
    }
  }
}

// q6_k: 128 ql bytes (low 4 bits), 64 qh bytes (high 2 bits), 16 int8
// scales, f16 d. In half h (128 elements), for l in 0..31: element l takes the
// low nibble of ql[64h+l], element l+32 the low nibble of ql[64h+l+32],
// elements l+64 and l+96 the high nibbles of those; their high bits are the
// 2-bit fields 0..3 of qh[32h+l]. Values are stored plus 32; sub-block scale
// index 8h + l/16 + 2k for the k-th of the four; y = (d*scale) * q.
void BlockQ6_K(const uint8_t* x, float* y) {
  const uint8_t* ql = x;
  const uint8_t* qh = x + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(x + 192);
  const float d = LoadHalf(x + 208);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* l4 = ql + 64 * h;
    const uint8_t* h2 = qh + 32 * h;
    const int8_t* sc = scales + 8 * h;
    float* out = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q[4] = {
          ((l4[l] & 0x0F) | (((h2[l] >> 0) & 3) << 4)) - 32,
          ((l4[l + 32] & 0x0F) | (((h2[l] >> 2) & 3) << 4)) - 32,
          ((l4[l] >> 4) | (((h2[l] >> 4) & 3) << 4)) - 32,
          ((l4[l + 32] >> 4) | (((h2[l] >> 6) & 3) << 4)) - 32,
      };
      for (int k = 0; k < 4; ++k) {
        const float ds = d * static_cast<float>(sc[is + 2 * k]);
        out[l + 32 * k] = ds * static_cast<float>(q[k]);
      }
    }
  }
}

struct BlockFormat {
  std::string_view name;
  BlockFn fn;
};

constexpr BlockFormat kBlockFormats[] = {
    {"q8_0", BlockQ8_0}, {"q4_0", BlockQ4_0}, {"q4_1", BlockQ4_1}, {"q5_0", BlockQ5_0},
    {"q5_1", BlockQ5_1}, {"q2_k", BlockQ2_K}, {"q3_k", BlockQ3_K}, {"q4_k", BlockQ4_K},
    {"q5_k", BlockQ5_K}, {"q6_k", BlockQ6_K},
};

constexpr const char* kSupported =
    "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k";

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

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

float BF16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

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
    for (int64_t i = 0; i < count; ++i) dst[i] = HalfToFloat(LoadU16(src + 2 * i));
  } else if (format == "bf16") {
    for (int64_t i = 0; i < count; ++i) dst[i] = BF16ToFloat(LoadU16(src + 2 * i));
  } else {
    for (uint64_t b = 0; b < blocks; ++b)
      block->fn(src + b * info->block_bytes, dst + b * info->block_elems);
  }
  return absl::OkStatus();
}

}  // namespace llmc
