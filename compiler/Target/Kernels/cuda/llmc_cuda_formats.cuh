// Element types and weight formats of the llmc CUDA kernel library.
//
// Split from llmc_cuda_kernels.cuh so that the weight decoders compile for
// the host as well (LLMC_HD is __host__ __device__ under nvcc/NVRTC, inline
// under a host compiler with the toolkit's include directory): the unit test
// test/unit/kernels/cuda_formats checks every decoder on the host against
// core's dequantizers, which are bit-exact with ggml. No GPU needed.
//
// The block layouts are block_decode.h's (core's, shared with the host
// kernels and the dequantizers): the decoders below take their scale
// unpacking and per-element bit extraction from it. What stays here is what
// the GPU wants differently: 16-bit loads of 2-byte-aligned rows, 8 elements
// unpacked from those words at a time, and q4_1/q5_1's fused multiply-add.
#ifndef LLMC_CUDA_FORMATS_CUH_
#define LLMC_CUDA_FORMATS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#if defined(__CUDACC_RTC__)
// NVRTC: no standard library headers.
#elif defined(__CUDACC__)
#include <string.h>
#else
#include <math.h>
#include <string.h>
#include <vector_types.h>
#endif

// Embedded next to this file (core/include/llmc/core/format/ in the repo);
// it also defines LLMC_HD.
#include "block_decode.h"

namespace llmc {
namespace cuda {

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

using gguf::bf16_to_float;
using gguf::bits_to_float;

//===----------------------------------------------------------------------===//
// Activation element types: half, __nv_bfloat16, float.
//===----------------------------------------------------------------------===//
LLMC_HD float to_float(float x) { return x; }
LLMC_HD float to_float(__half x) { return __half2float(x); }
LLMC_HD float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class Act> LLMC_HD Act from_float(float x);
template <> LLMC_HD float from_float<float>(float x) { return x; }
template <> LLMC_HD __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> LLMC_HD __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

LLMC_HD float f16_bits(u16 h) { return __half2float(__ushort_as_half(h)); }
LLMC_HD float lo_f16(u32 w) { return f16_bits(static_cast<u16>(w & 0xffffu)); }
LLMC_HD float hi_f16(u32 w) { return f16_bits(static_cast<u16>(w >> 16)); }
LLMC_HD float lo_bf16(u32 w) { return bits_to_float(w << 16); }
LLMC_HD float hi_bf16(u32 w) { return bits_to_float(w & 0xffff0000u); }

// 8 consecutive activations (16-byte aligned for half/bf16, 32 for float).
LLMC_HD void load8(const float* p, float v[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
LLMC_HD void load8(const __half* p, float v[8]) {
  const uint4 a = *reinterpret_cast<const uint4*>(p);
  const u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { v[2 * i] = lo_f16(w[i]); v[2 * i + 1] = hi_f16(w[i]); }
}
LLMC_HD void load8(const __nv_bfloat16* p, float v[8]) {
  const uint4 a = *reinterpret_cast<const uint4*>(p);
  const u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { v[2 * i] = lo_bf16(w[i]); v[2 * i + 1] = hi_bf16(w[i]); }
}

// 8 floats to 8 consecutive activations (16-byte aligned): one 16-byte
// store for half/bf16.
LLMC_HD void store8(float* p, const float v[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) p[i] = v[i];
}
template <class Act> LLMC_HD void store8(Act* p, const float v[8]) {
  static_assert(sizeof(Act) == 2, "store8: half or bf16");
  __align__(16) Act o[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) o[i] = from_float<Act>(v[i]);
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(o);
}

//===----------------------------------------------------------------------===//
// Weight formats: the GGUF block layouts exactly as ggml, plus plain floats.
// Each format has `block_elems`, `block_bytes`, `row_bytes(K)` and
//   decode8(row, g, w[8]): elements 8g .. 8g+7 of the row, as floats,
//   load1(row, k) (plain formats): element k.
// Rows of GGUF blocks are only 2-byte aligned (34-, 18-, 22-byte blocks), so
// blocks are read with 16-bit loads; plain rows need 16-byte alignment.
//===----------------------------------------------------------------------===//
namespace fmt {

LLMC_HD u32 ld16(const u8* p) { return *reinterpret_cast<const u16*>(p); }
// 8 bytes at a 2-byte-aligned address.
LLMC_HD void ld8b(const u8* p, u32& lo, u32& hi) {
  lo = ld16(p) | (ld16(p + 2) << 16);
  hi = ld16(p + 4) | (ld16(p + 6) << 16);
}

struct f32 {
  static constexpr const char* name = "f32";
  static constexpr int block_elems = 1, block_bytes = 4;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return 4 * k; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    load8(reinterpret_cast<const float*>(row) + 8 * g, w);
  }
  LLMC_HD static float load1(const u8* row, int k) { return reinterpret_cast<const float*>(row)[k]; }
};
struct f16 {
  static constexpr const char* name = "f16";
  static constexpr int block_elems = 1, block_bytes = 2;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return 2 * k; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    load8(reinterpret_cast<const __half*>(row) + 8 * g, w);
  }
  LLMC_HD static float load1(const u8* row, int k) {
    return f16_bits(reinterpret_cast<const u16*>(row)[k]);
  }
};
struct bf16 {
  static constexpr const char* name = "bf16";
  static constexpr int block_elems = 1, block_bytes = 2;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return 2 * k; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    load8(reinterpret_cast<const __nv_bfloat16*>(row) + 8 * g, w);
  }
  LLMC_HD static float load1(const u8* row, int k) {
    return bf16_to_float(reinterpret_cast<const u16*>(row)[k]);
  }
};

// block_q8_0 {f16 d; int8 qs[32]}: x = d * q.
struct q8_0 {
  static constexpr const char* name = "q8_0";
  static constexpr int block_elems = 32, block_bytes = 34;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 32 * 34; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 2) * block_bytes;
    const float d = f16_bits(ld16(b));
    u32 lo, hi;
    ld8b(b + 2 + (g & 3) * 8, lo, hi);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = d * static_cast<float>(static_cast<i8>((lo >> (8 * i)) & 0xff));
      w[4 + i] = d * static_cast<float>(static_cast<i8>((hi >> (8 * i)) & 0xff));
    }
  }
};

// Nibble i (0..7) of the 8 bytes lo|hi, low or high half of each byte.
LLMC_HD u32 nib(u32 lo, u32 hi, int i, int shift) {
  const u32 w = i < 4 ? lo : hi;
  return (w >> (8 * (i & 3) + shift)) & 0xf;
}

// block_q4_0 {f16 d; u8 qs[16]}: element j < 16 is the low nibble of qs[j],
// element j + 16 the high nibble; x = d * (q - 8).
struct q4_0 {
  static constexpr const char* name = "q4_0";
  static constexpr int block_elems = 32, block_bytes = 18;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 32 * 18; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 2) * block_bytes;
    const float d = f16_bits(ld16(b));
    const int s = g & 3, shift = s < 2 ? 0 : 4;
    u32 lo, hi;
    ld8b(b + 2 + (s & 1) * 8, lo, hi);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = d * (static_cast<float>(nib(lo, hi, i, shift)) - 8.0f);
  }
};

// block_q4_1 {f16 d; f16 m; u8 qs[16]}: x = d * q + m.
struct q4_1 {
  static constexpr const char* name = "q4_1";
  static constexpr int block_elems = 32, block_bytes = 20;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 32 * 20; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 2) * block_bytes;
    const float d = f16_bits(ld16(b)), m = f16_bits(ld16(b + 2));
    const int s = g & 3, shift = s < 2 ? 0 : 4;
    u32 lo, hi;
    ld8b(b + 4 + (s & 1) * 8, lo, hi);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = fmaf(d, static_cast<float>(nib(lo, hi, i, shift)), m);
  }
};

// block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: the fifth bit of element e is bit
// e of qh (little-endian u32); x = d * (q - 16).
struct q5_0 {
  static constexpr const char* name = "q5_0";
  static constexpr int block_elems = 32, block_bytes = 22;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 32 * 22; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 2) * block_bytes;
    const float d = f16_bits(ld16(b));
    const u32 qh = (ld16(b + 2) | (ld16(b + 4) << 16)) >> (8 * (g & 3));
    const int s = g & 3, shift = s < 2 ? 0 : 4;
    u32 lo, hi;
    ld8b(b + 6 + (s & 1) * 8, lo, hi);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const u32 q = nib(lo, hi, i, shift) | gguf::q5_high(qh, i);
      w[i] = d * (static_cast<float>(q) - 16.0f);
    }
  }
};

// block_q5_1 {f16 d; f16 m; u8 qh[4]; u8 qs[16]}: x = d * q + m.
struct q5_1 {
  static constexpr const char* name = "q5_1";
  static constexpr int block_elems = 32, block_bytes = 24;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 32 * 24; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 2) * block_bytes;
    const float d = f16_bits(ld16(b)), m = f16_bits(ld16(b + 2));
    const u32 qh = (ld16(b + 4) | (ld16(b + 6) << 16)) >> (8 * (g & 3));
    const int s = g & 3, shift = s < 2 ? 0 : 4;
    u32 lo, hi;
    ld8b(b + 8 + (s & 1) * 8, lo, hi);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const u32 q = nib(lo, hi, i, shift) | gguf::q5_high(qh, i);
      w[i] = fmaf(d, static_cast<float>(q), m);
    }
  }
};


//===----------------------------------------------------------------------===//
// k-quants: 256-element super-blocks (llama.cpp's Q2_K / Q3_K_M / Q4_K_M /
// Q5_K_M / Q6_K files). Rows are 2-byte aligned at best, so these read bytes
// or 16-bit words.
//===----------------------------------------------------------------------===//
// q2_K and q3_K walk a super-block alike: element e = 128h + 32j + 16s + l
// (half h, 2-bit field j, 16-element sub-block s, l < 16) is bits 2j..2j+1
// of quant byte 32h + 16s + l, and its sub-block scale is number e / 16. A
// group of 8 (l = 0 or 8) stays inside one sub-block; its 8 quant bytes (and
// q3_K's 8 hmask bytes) start at an even offset.

// Field `shift` (bits shift..shift+1) of byte i (0..7) of lo|hi: gguf::crumb
// on a word holding 4 quant bytes, which is what the 16-bit loads give.
LLMC_HD u32 crumb(u32 lo, u32 hi, int i, int shift) {
  const u32 w = i < 4 ? lo : hi;
  return (w >> (8 * (i & 3) + shift)) & 3u;
}

// block_q2_K {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}: scales[e / 16] is
// scale | min << 4 (4 bits each); x = (d * scale) * q - dmin * min.
struct q2_K {
  static constexpr const char* name = "q2_k";
  static constexpr int block_elems = 256, block_bytes = 84;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 256 * 84; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 5) * block_bytes;
    const int e = (g & 31) * 8, h = e >> 7, j = (e >> 5) & 3, s = (e >> 4) & 1, l = e & 15;
    const u32 sc = b[e >> 4];
    const float d = f16_bits(ld16(b + 80)) * static_cast<float>(sc & 0xf);
    const float m = f16_bits(ld16(b + 82)) * static_cast<float>(sc >> 4);
    u32 lo, hi;
    ld8b(b + 16 + 32 * h + 16 * s + l, lo, hi);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = d * static_cast<float>(crumb(lo, hi, i, 2 * j)) - m;
  }
};

// block_q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}: the 16 6-bit
// scales, stored plus 32, are packed as low nibbles (bytes 0..7: low nibbles
// for scales 0..7, high nibbles for 8..15) and 2-bit fields (scale n: field
// n / 4 of byte 8 + n % 4). The third quant bit of element e is bit 4h + j of
// hmask[16s + l]; clear, it subtracts 4: x = (d * (scale - 32)) * (q - 4|0).
struct q3_K {
  static constexpr const char* name = "q3_k";
  static constexpr int block_elems = 256, block_bytes = 110;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 256 * 110; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 5) * block_bytes;
    const int e = (g & 31) * 8, h = e >> 7, j = (e >> 5) & 3, s = (e >> 4) & 1, l = e & 15;
    const int scale = gguf::q3_k_scale(b + 96, e >> 4);
    const float d = f16_bits(ld16(b + 108)) * static_cast<float>(scale);
    u32 lo, hi, mlo, mhi;
    ld8b(b + 32 + 32 * h + 16 * s + l, lo, hi);
    ld8b(b + 16 * s + l, mlo, mhi);
    const int bit = 4 * h + j;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const u32 mw = i < 4 ? mlo : mhi;
      const int q = static_cast<int>(crumb(lo, hi, i, 2 * j)) -
                    (((mw >> (8 * (i & 3) + bit)) & 1u) ? 0 : 4);
      w[i] = d * static_cast<float>(q);
    }
  }
};

// The {f16 d; f16 dmin; u8 scales[12]} header of a q4_K/q5_K super-block
// in one 16-byte load (super-blocks of 144 and 176 bytes stay 16-byte
// aligned in rows that start so, as the GEMVs require too), and sub-block
// j's scale d * sc and min dmin * m from it: gguf::scale_min_k4 on the
// bytes in registers, where the byte-wise version costs the GEMM's decoder
// a load per byte.
LLMC_HD void k4_scale_min(const uint4& h, int j, float* d, float* m) {
  // Bytes j % 4 of scales[0..3], [4..7], [8..11] (words y, z, w): sub-blocks
  // 0..3 take 6 bits of the first two; 4..7 take the third's nibbles below
  // the first two's top 2 bits.
  const int sh = 8 * (j & 3);
  const u32 a = h.y >> sh, bb = h.z >> sh, cc = h.w >> sh;
  const bool lo = j < 4;
  const u32 sc = lo ? a & 63u : (cc & 0x0fu) | ((a >> 2) & 0x30u);
  const u32 mn = lo ? bb & 63u : ((cc >> 4) & 0x0fu) | ((bb >> 2) & 0x30u);
  *d = lo_f16(h.x) * static_cast<float>(sc);
  *m = hi_f16(h.x) * static_cast<float>(mn);
}
LLMC_HD void k4_scale_min(const u8* b, int j, float* d, float* m) {
  k4_scale_min(*reinterpret_cast<const uint4*>(b), j, d, m);
}

// block_q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}: 64-element chunk
// c uses qs[32c .. 32c+31], low nibbles for its first 32 elements (sub-block
// 2c), high nibbles for the next 32 (2c + 1); x = d * sc * q - dmin * m.
// A group's 8 quant bytes are 8-byte aligned: one load.
struct q4_K {
  static constexpr const char* name = "q4_k";
  static constexpr int block_elems = 256, block_bytes = 144;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 256 * 144; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 5) * block_bytes;
    const int e = (g & 31) * 8, c = e >> 6, sub = (e >> 5) & 1, l = e & 31;
    float d, m;
    k4_scale_min(b, 2 * c + sub, &d, &m);
    const uint2 q = *reinterpret_cast<const uint2*>(b + 16 + 32 * c + l);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w[i] = d * static_cast<float>(nib(q.x, q.y, i, 4 * sub)) - m;
  }
};

// block_q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: as
// q4_K, the fifth bit of element l of sub-block s is bit s of qh[l].
struct q5_K {
  static constexpr const char* name = "q5_k";
  static constexpr int block_elems = 256, block_bytes = 176;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 256 * 176; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 5) * block_bytes;
    const int e = (g & 31) * 8, c = e >> 6, sub = (e >> 5) & 1, l = e & 31, s = 2 * c + sub;
    float d, m;
    k4_scale_min(b, s, &d, &m);
    const uint2 qh = *reinterpret_cast<const uint2*>(b + 16 + l);
    const uint2 q = *reinterpret_cast<const uint2*>(b + 48 + 32 * c + l);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const u32 v = nib(q.x, q.y, i, 4 * sub) | (((i < 4 ? qh.x : qh.y) >> (8 * (i & 3) + s) & 1u) << 4);
      w[i] = d * static_cast<float>(v) - m;
    }
  }
};

// block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: element r of
// the 128-element half h, quarter k = r / 32, l = r % 32: low 4 bits from
// ql[64h + l + 32(k & 1)] (high nibble when k >= 2), top 2 bits from
// qh[32h + l] >> 2k; x = d * scales[8h + l / 16 + 2k] * (q - 32).
struct q6_K {
  static constexpr const char* name = "q6_k";
  static constexpr int block_elems = 256, block_bytes = 210;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / 256 * 210; }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const u8* b = row + (g >> 5) * block_bytes;
    const int e = (g & 31) * 8, h = e >> 7, r = e & 127, k = r >> 5, l = r & 31;
    const float d = f16_bits(ld16(b + 208)) *
                    static_cast<float>(static_cast<signed char>(b[192 + 8 * h + (l >> 4) + 2 * k]));
    const u8* ql = b + 64 * h + l + 32 * (k & 1);
    const u8* qh = b + 128 + 32 * h + l;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      w[i] = d * static_cast<float>(gguf::q6_k_quant(ql + i, qh + i, k));
    }
  }
};

//===----------------------------------------------------------------------===//
// llmc's group-wise integers from the quantize pass (runtime/include/llmc/
// runtime/format/quantize.h): groups of G elements along each row.
//===----------------------------------------------------------------------===//
// {f16 s; i8 q[G]}: x = q * s.
template <int G> struct i8 {
  static constexpr const char* name = "i8";
  static constexpr int block_elems = G, block_bytes = 2 + G;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / G * (2 + G); }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const int e = 8 * g;
    const u8* b = row + (e / G) * block_bytes;
    const float s = f16_bits(ld16(b));
    const u8* q = b + 2 + e % G;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = static_cast<float>(static_cast<signed char>(q[i])) * s;
  }
};

// {f16 s; f16 z; u8 nibbles[G/2]}: 16-byte chunks of 32 elements, element j
// < 16 of a chunk in the low nibble of byte j, j + 16 in its high nibble;
// x = (q - z) * s.
template <int G> struct i4 {
  static constexpr const char* name = "i4";
  static constexpr int block_elems = G, block_bytes = 4 + G / 2;
  LLMC_HD static constexpr i64 row_bytes(i64 k) { return k / G * (4 + G / 2); }
  LLMC_HD static void decode8(const u8* row, int g, float w[8]) {
    const int e = 8 * g, in = e % G, j = in & 31;
    const u8* b = row + (e / G) * block_bytes;
    const float s = f16_bits(ld16(b)), z = f16_bits(ld16(b + 2));
    const u8* q = b + 4 + 16 * (in >> 5) + (j & 15);
    const int shift = j < 16 ? 0 : 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = (static_cast<float>((q[i] >> shift) & 0xf) - z) * s;
  }
};

} // namespace fmt

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_FORMATS_CUH_
