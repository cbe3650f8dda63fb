// llmc host kernel library: simd.
//
// Scalar conversions (f16/bf16, from block_decode.h), the 8-lane float vector
// `vf` (AVX2 or a portable array) and the AVX2 integer unpacking the block
// formats use.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_SIMD_H_
#define LLMC_HOST_SIMD_H_

#include "block_decode.h"
#include "llmc_host_base.h"

namespace llmc {
namespace host {
namespace detail {

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

// The byte loads, bit casts and f16/bf16 conversions are block_decode.h's
// (core's, shared with the dequantizers and the CUDA kernels).
using gguf::bf16_to_float;
using gguf::bits_to_float;
using gguf::float_to_bits;
using gguf::load_u16;
using gguf::load_u32;

// IEEE half -> float, exact: F16C where the build has it (one instruction;
// the same floats as the portable conversion but for signaling NaNs, which
// it quiets).
LLMC_HOST_INLINE float half_to_float(uint16_t h) {
#if LLMC_HOST_SIMD
  return _cvtsh_ss(h);
#else
  return gguf::half_to_float(h);
#endif
}
LLMC_HOST_INLINE float load_half(const uint8_t* p) { return half_to_float(load_u16(p)); }

//===----------------------------------------------------------------------===//
// vf: 8 floats. One AVX register, or a plain array in the portable build.
//===----------------------------------------------------------------------===//

#if LLMC_HOST_SIMD
struct vf {
  __m256 v;
};
LLMC_HOST_INLINE vf vzero() { return {_mm256_setzero_ps()}; }
LLMC_HOST_INLINE vf vset1(float a) { return {_mm256_set1_ps(a)}; }
LLMC_HOST_INLINE vf vload(const float* p) { return {_mm256_loadu_ps(p)}; }
LLMC_HOST_INLINE void vstore(float* p, vf a) { _mm256_storeu_ps(p, a.v); }
LLMC_HOST_INLINE vf vadd(vf a, vf b) { return {_mm256_add_ps(a.v, b.v)}; }
LLMC_HOST_INLINE vf vsub(vf a, vf b) { return {_mm256_sub_ps(a.v, b.v)}; }
LLMC_HOST_INLINE vf vmul(vf a, vf b) { return {_mm256_mul_ps(a.v, b.v)}; }
LLMC_HOST_INLINE vf vdiv(vf a, vf b) { return {_mm256_div_ps(a.v, b.v)}; }
LLMC_HOST_INLINE vf vmax(vf a, vf b) { return {_mm256_max_ps(a.v, b.v)}; }
LLMC_HOST_INLINE vf vfma(vf a, vf b, vf c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
// (a0,a1,a2,a3,...) -> (a1,a0,a3,a2,...)
LLMC_HOST_INLINE vf vswap_pairs(vf a) { return {_mm256_permute_ps(a.v, 0xB1)}; }
LLMC_HOST_INLINE float vhsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
LLMC_HOST_INLINE float vhmax(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// out[i] = horizontal sum of the i-th argument.
LLMC_HOST_INLINE void vhsum4(vf a, vf b, vf c, vf d, float* out) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a.v, b.v), _mm256_hadd_ps(c.v, d.v));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
// e^x, Cephes-style: |relative error| < 2e-7 for x in [-87, 88]; 0 below
// about -87.3 (no subnormals), +inf above 88.7 is clamped to ~2.4e38.
LLMC_HOST_INLINE vf vexp(vf a) {
  __m256 x = _mm256_min_ps(a.v, _mm256_set1_ps(88.3762626647949f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
  __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  fx = _mm256_min_ps(fx, _mm256_set1_ps(127.0f));
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_fmadd_ps(y, z, x);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return {_mm256_mul_ps(y, _mm256_castsi256_ps(e))};
}
#else
struct vf {
  float v[8];
};
LLMC_HOST_INLINE vf vzero() { return vf{}; }
LLMC_HOST_INLINE vf vset1(float a) {
  vf r;
  for (int i = 0; i < 8; ++i) r.v[i] = a;
  return r;
}
LLMC_HOST_INLINE vf vload(const float* p) {
  vf r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
LLMC_HOST_INLINE void vstore(float* p, vf a) { std::memcpy(p, a.v, sizeof a.v); }
#define LLMC_HOST_VBIN(name, expr)             \
  LLMC_HOST_INLINE vf name(vf a, vf b) {       \
    vf r;                                      \
    for (int i = 0; i < 8; ++i) r.v[i] = expr; \
    return r;                                  \
  }
LLMC_HOST_VBIN(vadd, a.v[i] + b.v[i])
LLMC_HOST_VBIN(vsub, a.v[i] - b.v[i])
LLMC_HOST_VBIN(vmul, a.v[i] * b.v[i])
LLMC_HOST_VBIN(vdiv, a.v[i] / b.v[i])
LLMC_HOST_VBIN(vmax, a.v[i] > b.v[i] ? a.v[i] : b.v[i])
#undef LLMC_HOST_VBIN
LLMC_HOST_INLINE vf vfma(vf a, vf b, vf c) {
  vf r;
  for (int i = 0; i < 8; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
  return r;
}
LLMC_HOST_INLINE vf vswap_pairs(vf a) {
  vf r;
  for (int i = 0; i < 8; i += 2) {
    r.v[i] = a.v[i + 1];
    r.v[i + 1] = a.v[i];
  }
  return r;
}
LLMC_HOST_INLINE float vhsum(vf a) {
  return ((a.v[0] + a.v[4]) + (a.v[2] + a.v[6])) + ((a.v[1] + a.v[5]) + (a.v[3] + a.v[7]));
}
LLMC_HOST_INLINE float vhmax(vf a) {
  float m = a.v[0];
  for (int i = 1; i < 8; ++i) m = a.v[i] > m ? a.v[i] : m;
  return m;
}
LLMC_HOST_INLINE void vhsum4(vf a, vf b, vf c, vf d, float* out) {
  out[0] = vhsum(a);
  out[1] = vhsum(b);
  out[2] = vhsum(c);
  out[3] = vhsum(d);
}
LLMC_HOST_INLINE vf vexp(vf a) {
  vf r;
  for (int i = 0; i < 8; ++i) r.v[i] = std::exp(a.v[i]);
  return r;
}
#endif

#if LLMC_HOST_SIMD
//===----------------------------------------------------------------------===//
// Integer unpacking for the block formats (AVX2).
//===----------------------------------------------------------------------===//

// The low 8 int8 lanes of `a` as floats.
LLMC_HOST_INLINE __m256 i8x8_to_ps(__m128i a) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a));
}
// 32 int8 lanes as 4 float vectors (elements 0-7, 8-15, 16-23, 24-31).
LLMC_HOST_INLINE void i8x32_to_ps(__m256i b, __m256* o) {
  const __m128i lo = _mm256_castsi256_si128(b);
  const __m128i hi = _mm256_extracti128_si256(b, 1);
  o[0] = i8x8_to_ps(lo);
  o[1] = i8x8_to_ps(_mm_unpackhi_epi64(lo, lo));
  o[2] = i8x8_to_ps(hi);
  o[3] = i8x8_to_ps(_mm_unpackhi_epi64(hi, hi));
}
// The low 8 uint8 lanes of `a` as floats.
LLMC_HOST_INLINE __m256 u8x8_to_ps(__m128i a) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(a));
}
LLMC_HOST_INLINE __m128i load8b(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
// The nibble formats are unpacked in 8-byte pieces (each in the low half of
// an xmm register): masks and shifts run on any ALU port and only the final
// byte->dword widening uses the shuffle port, with no cross-lane extracts.
// 16 bytes of nibble pairs at p -> elements 0-7, 8-15 (low nibbles of bytes
// 0-7, 8-15) and 16-23, 24-31 (high nibbles), ggml's q4_0/q4_1/q5_* order.
LLMC_HOST_INLINE void nibbles16(const uint8_t* p, __m128i* o) {
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i c0 = load8b(p), c1 = load8b(p + 8);
  o[0] = _mm_and_si128(c0, m);
  o[1] = _mm_and_si128(c1, m);
  o[2] = _mm_and_si128(_mm_srli_epi16(c0, 4), m);
  o[3] = _mm_and_si128(_mm_srli_epi16(c1, 4), m);
}
// Byte i of entry b is 0x10 where bit i of b is set: the fifth bit of q5
// quants, 8 at a time, from a load instead of shuffles.
struct bit4_table {
  uint64_t v[256];
};
constexpr bit4_table make_bit4_table() {
  bit4_table t{};
  for (int b = 0; b < 256; ++b) {
    uint64_t x = 0;
    for (int i = 0; i < 8; ++i)
      if ((b >> i) & 1) x |= uint64_t{0x10} << (8 * i);
    t.v[b] = x;
  }
  return t;
}
inline constexpr bit4_table kBit4 = make_bit4_table();
LLMC_HOST_INLINE __m128i bit4_bytes(uint32_t bits) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kBit4.v[bits & 0xFF]));
}
// Two consecutive f16 values at p (d and m) converted together.
LLMC_HOST_INLINE void load_half2(const uint8_t* p, __m256* a, __m256* b) {
  const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(p))));
  *a = _mm256_broadcastss_ps(v);
  *b = _mm256_broadcastss_ps(_mm_movehdup_ps(v));
}
LLMC_HOST_INLINE __m256i srl16(__m256i a, int n) {
  return _mm256_srl_epi16(a, _mm_cvtsi32_si128(n));
}
LLMC_HOST_INLINE __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// 16 bytes of nibble pairs -> 32 bytes: elements 0-15 (low nibbles) then
// 16-31 (high nibbles), for the integer dot products.
LLMC_HOST_INLINE __m256i nibbles32(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}
// Byte j is 0xFF where bit j of x is set (j = 0..31).
LLMC_HOST_INLINE __m256i bits_to_bytes32(uint32_t x) {
  const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                          0x0303030303030303LL);
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask);
}
#endif

}  // namespace detail
}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_SIMD_H_
