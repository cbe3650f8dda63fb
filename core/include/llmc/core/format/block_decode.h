// The GGUF block formats, decoded: one scalar definition of each of ggml's
// q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k and q6_k blocks, with
// the small pieces (f16/bf16 to float, the k-quants' packed scales, the
// per-element bit extraction) that the kernel libraries' vectorized and
// element-wise decoders share with it.
//
// Three users compile this one file, so a fix to a layout reaches all of them:
//   - core's dequantizers (dequantize.cc: weight conversion, test references);
//   - the host kernel library (compiler/Target/Kernels/host), built with each
//     artifact by the host C++ compiler;
//   - the CUDA kernel library (compiler/Target/Kernels/cuda), compiled by
//     NVRTC (and, for the tests, by a host compiler: test/cuda-emu and
//     unit/kernels/cuda_formats).
// The compiler embeds this file with both kernel libraries and writes it next
// to their headers, which include it as "block_decode.h"; hence it includes
// nothing: NVRTC has no standard library, and the integer types below are
// spelled with built-in types, as llmc_cuda_formats.cuh does.
//
// Exactness: each decoder gives bit for bit what ggml's dequantize_row_*
// gives: the same bit layout and the same float operations in the same order,
// each in its own statement. That holds where the compiler does not fuse a
// multiply and an add (x86-64 without FMA never does; build with
// -ffp-contract=off where it might). The CUDA kernels' element-wise
// decoders, which use only the pieces, are compiled with --fmad=true on
// purpose and may differ by that one rounding.
#ifndef LLMC_CORE_FORMAT_BLOCK_DECODE_H_
#define LLMC_CORE_FORMAT_BLOCK_DECODE_H_

// LLMC_HD: a function every setting can call, inlined. Under nvcc/NVRTC it is
// __host__ __device__; the host kernels' hot loops relied on always_inline
// before these helpers were shared, so host compilers keep getting it.
#ifndef LLMC_HD
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LLMC_HD __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define LLMC_HD inline __attribute__((always_inline))
#else
#define LLMC_HD inline
#endif
#endif

namespace llmc {
namespace gguf {

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;

//===----------------------------------------------------------------------===//
// Scalars. Rows of blocks are 2-byte aligned at best (34-, 18-, 22-byte
// blocks), so multi-byte fields are read without alignment (little-endian).
//===----------------------------------------------------------------------===//

LLMC_HD float bits_to_float(u32 u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

LLMC_HD u32 float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  u32 u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

LLMC_HD u16 load_u16(const u8* p) {
#if defined(__CUDA_ARCH__)
  return static_cast<u16>(p[0] | (p[1] << 8));
#else
  u16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
#endif
}

LLMC_HD u32 load_u32(const u8* p) {
#if defined(__CUDA_ARCH__)
  return static_cast<u32>(load_u16(p)) | (static_cast<u32>(load_u16(p + 2)) << 16);
#else
  u32 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
#endif
}

// IEEE half -> float, exact: subnormals, infinities and NaN payloads kept.
// (The kernels use the hardware conversion where they have one, F16C on the
// host and cvt on the GPU: the same float for every half that is not a NaN;
// F16C, for one, quiets signaling NaNs.)
LLMC_HD float half_to_float(u16 h) {
  const u32 sign = static_cast<u32>(h & 0x8000) << 16;
  const u32 exp = (h >> 10) & 0x1F;
  const u32 mant = h & 0x3FF;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return bits_to_float(float_to_bits(magnitude) | sign);
  }
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (mant << 13));
  // Rebias the exponent from 15 to 127.
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// bfloat16 -> float, exact: the top half of the float's bits.
LLMC_HD float bf16_to_float(u16 b) { return bits_to_float(static_cast<u32>(b) << 16); }

LLMC_HD float load_half(const u8* p) { return half_to_float(load_u16(p)); }

//===----------------------------------------------------------------------===//
// Per-element pieces: the bit extraction every decoder of a format does,
// whether it walks a whole block (below), 32 elements in SIMD registers (host
// kernels) or 8 elements a thread (CUDA kernels).
//===----------------------------------------------------------------------===//

// The 32-element formats keep their quants in 16 bytes of nibble pairs: byte
// j holds element j in its low nibble and element j + 16 in its high one.
LLMC_HD int nibble32(const u8* qs, int i) {
  const u8 v = qs[i & 15];
  return i < 16 ? (v & 0x0F) : (v >> 4);
}

// q5_0/q5_1: the fifth bit of element i (0..31) is bit i of the 32-bit qh,
// returned in place (0 or 16).
LLMC_HD int q5_high(u32 qh, int i) { return static_cast<int>((qh >> i) & 1) << 4; }

// The stored quant of element i (0..31) of a 32-element block at b, before
// scaling: q8_0 and the offset formats already minus their offset.
LLMC_HD int q8_0_quant(const u8* b, int i) { return static_cast<i8>(b[2 + i]); }
LLMC_HD int q4_0_quant(const u8* b, int i) { return nibble32(b + 2, i) - 8; }
LLMC_HD int q4_1_quant(const u8* b, int i) { return nibble32(b + 4, i); }
LLMC_HD int q5_0_quant(const u8* b, int i) {
  return (nibble32(b + 6, i) | q5_high(load_u32(b + 2), i)) - 16;
}
LLMC_HD int q5_1_quant(const u8* b, int i) {
  return nibble32(b + 8, i) | q5_high(load_u32(b + 4), i);
}

// q2_k/q3_k: bits 2j..2j+1 of a quant byte (field j, 0..3).
LLMC_HD int crumb(int q, int j) { return (q >> (2 * j)) & 3; }

// q3_k: the quant from its 2-bit field j of quant byte q and its third bit,
// hmask byte hm & mask (mask: one bit); a clear third bit subtracts 4. (Byte
// parameters: with int ones GCC vectorizes the portable q3_k decoder worse.)
LLMC_HD int q3_k_quant(u8 q, u8 hm, int j, u8 mask) {
  return crumb(q, j) - ((hm & mask) ? 0 : 4);
}

// q3_k: the 16 6-bit sub-block scales, stored plus 32, in 12 bytes: the low
// 4 bits of scale j are the low (j < 8) or high (j >= 8) nibble of byte j % 8,
// its high 2 bits field j / 4 of byte 8 + j % 4. Returns scale j minus 32.
LLMC_HD int q3_k_scale(const u8* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
  const int high = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

// q4_k/q5_k pack 8 6-bit scales and 8 6-bit mins in 12 bytes (ggml's
// get_scale_min_k4): for sub-block j < 4, scale = s[j] & 63 and min =
// s[j+4] & 63; for j >= 4 the low 4 bits come from the nibbles of s[j+4] and
// the high 2 bits from the top bits of s[j-4] (scale) and s[j] (min).
LLMC_HD void scale_min_k4(const u8* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// q4_k/q5_k: the 4-bit quant in quant byte q of a sub-block whose quants are
// the low (sub 0) or high (sub 1) nibbles.
LLMC_HD int k_nibble(int q, int sub) { return (q >> (4 * sub)) & 0x0F; }

// q5_k: the fifth bit of an element of sub-block s (0..7) is bit s of its qh
// byte, returned in place (0 or 16).
LLMC_HD int q5_k_high(int qh, int s) { return ((qh >> s) & 1) << 4; }

// q6_k: element 32k + l of a 128-element half (k = 0..3) takes the low (k < 2)
// or high (k >= 2) nibble of its ql byte (32(k & 1) + l of the half's 64) and
// 2-bit field k of its qh byte (l of the half's 32); values are stored plus 32.
LLMC_HD int q6_k_quant(const u8* ql, const u8* qh, int k) {
  return (((*ql >> (4 * (k >> 1))) & 0x0F) | (((*qh >> (2 * k)) & 3) << 4)) - 32;
}

//===----------------------------------------------------------------------===//
// Whole blocks: decode_<format>(block, y) writes the block's elements to y.
//===----------------------------------------------------------------------===//

// q8_0: f16 d, then 32 int8 quants; y = q * d. (One walk in element order:
// the portable host kernels vectorize it, not decode32's.)
LLMC_HD void decode_q8_0(const u8* x, float* y) {
  const float d = load_half(x);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q8_0_quant(x, j)) * d;
}

// The nibble blocks: f16 d, for the "_1" formats an f16 m, then the
// quants (q5's qh word first); Quant(block, i) is element i's stored quant
// (above). y = q * d, or q*d + m with a min.
template <int (*Quant)(const u8*, int), bool HasMin>
LLMC_HD void decode_nibble32(const u8* x, float* y) {
  const float d = load_half(x);
  const float m = HasMin ? load_half(x + 2) : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const float lo = static_cast<float>(Quant(x, j)) * d;
    const float hi = static_cast<float>(Quant(x, j + 16)) * d;
    // Not `+ 0` without a min: that would turn -0 into +0.
    y[j] = HasMin ? lo + m : lo;
    y[j + 16] = HasMin ? hi + m : hi;
  }
}
LLMC_HD void decode_q4_0(const u8* x, float* y) { decode_nibble32<q4_0_quant, false>(x, y); }
LLMC_HD void decode_q4_1(const u8* x, float* y) { decode_nibble32<q4_1_quant, true>(x, y); }
LLMC_HD void decode_q5_0(const u8* x, float* y) { decode_nibble32<q5_0_quant, false>(x, y); }
LLMC_HD void decode_q5_1(const u8* x, float* y) { decode_nibble32<q5_1_quant, true>(x, y); }

// The k-quants below share one walk over a 256-element super-block: two
// halves of 128 elements; in half h, 2-bit field j (bits 2j..2j+1) of the 32
// quant bytes qs[32h .. 32h+31] gives elements 128h + 32j .. +31, in two
// groups of 16 with one sub-block scale each (sub-block 8h + 2j + g).

// q2_k: 16 scale bytes (low nibble: scale, high nibble: min), 64 quant bytes,
// f16 d, f16 dmin; y = (d*scale) * q - (dmin*min).
LLMC_HD void decode_q2_k(const u8* x, float* y) {
  const u8* scales = x;
  const u8* qs = x + 16;
  const float d = load_half(x + 80);
  const float dmin = load_half(x + 82);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int g = 0; g < 2; ++g) {
        const u8 sc = scales[8 * h + 2 * j + g];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        float* out = y + 128 * h + 32 * j + 16 * g;
        const u8* q = qs + 32 * h + 16 * g;
        for (int l = 0; l < 16; ++l) {
          const float v = dl * static_cast<float>(crumb(q[l], j));
          out[l] = v - ml;
        }
      }
}

// q3_k: 32 hmask bytes, 64 quant bytes, 12 scale bytes (q3_k_scale), f16 d.
// The third quant bit of element 128h + 32j + 16g + l is bit 4h + j of
// hmask[16g + l]; y = (d * scale) * q.
LLMC_HD void decode_q3_k(const u8* x, float* y) {
  const u8* hmask = x;
  const u8* qs = x + 32;
  const u8* scales = x + 96;
  const float d = load_half(x + 108);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int g = 0; g < 2; ++g) {
        const float dl = d * static_cast<float>(q3_k_scale(scales, 8 * h + 2 * j + g));
        const u8 mask = static_cast<u8>(1u << (4 * h + j));
        float* out = y + 128 * h + 32 * j + 16 * g;
        const u8* q = qs + 32 * h + 16 * g;
        const u8* hm = hmask + 16 * g;
        for (int l = 0; l < 16; ++l)
          out[l] = dl * static_cast<float>(q3_k_quant(q[l], hm[l], j, mask));
      }
}

// q4_k (HasHigh false) and q5_k (true): f16 d, f16 dmin, 12 scale bytes
// (scale_min_k4), q5_k's 32 qh bytes, 128 quant bytes. Chunk c (64 elements)
// uses quant bytes 32c..32c+31: low nibbles give elements 64c..+31 (sub-block
// 2c), high nibbles 64c+32..+63 (sub-block 2c+1); q5_k's fifth bit of
// element l of sub-block s is bit s of qh[l]. y = (d*scale) * q - (dmin*min).
template <bool HasHigh>
LLMC_HD void decode_k4(const u8* x, float* y) {
  const float d = load_half(x);
  const float dmin = load_half(x + 2);
  const u8* scales = x + 4;
  const u8* qh = x + 16;
  const u8* qs = x + (HasHigh ? 48 : 16);
  for (int c = 0; c < 4; ++c) {
    const u8* q = qs + 32 * c;
    for (int sub = 0; sub < 2; ++sub) {
      const int s = 2 * c + sub;
      int sc, m;
      scale_min_k4(scales, s, &sc, &m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      float* out = y + 64 * c + 32 * sub;
      for (int l = 0; l < 32; ++l) {
        int v = k_nibble(q[l], sub);
        if (HasHigh) v += q5_k_high(qh[l], s);
        const float w = dl * static_cast<float>(v);
        out[l] = w - ml;
      }
    }
  }
}
LLMC_HD void decode_q4_k(const u8* x, float* y) { decode_k4<false>(x, y); }
LLMC_HD void decode_q5_k(const u8* x, float* y) { decode_k4<true>(x, y); }

// q6_k: 128 ql bytes (low 4 bits), 64 qh bytes (high 2 bits), 16 int8
// scales, f16 d. In half h (128 elements), element 32k + l (l < 32) is
// q6_k_quant(ql[64h + 32(k&1) + l], qh[32h + l], k) with sub-block scale
// 8h + l/16 + 2k; y = (d*scale) * q.
LLMC_HD void decode_q6_k(const u8* x, float* y) {
  const u8* ql = x;
  const u8* qh = x + 128;
  const i8* scales = reinterpret_cast<const i8*>(x + 192);
  const float d = load_half(x + 208);
  for (int h = 0; h < 2; ++h) {
    const u8* l4 = ql + 64 * h;
    const u8* h2 = qh + 32 * h;
    const i8* sc = scales + 8 * h;
    float* out = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      for (int k = 0; k < 4; ++k) {
        const float ds = d * static_cast<float>(sc[is + 2 * k]);
        out[l + 32 * k] = ds * static_cast<float>(q6_k_quant(l4 + l + 32 * (k & 1), h2 + l, k));
      }
    }
  }
}

}  // namespace gguf
}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_BLOCK_DECODE_H_
