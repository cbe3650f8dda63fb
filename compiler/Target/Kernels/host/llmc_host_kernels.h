// llmc host kernel template library.
//
// The host emitter generates, for each kernel of a model, a small C++ function
// that includes this header and calls one of the templates below, instantiated
// with the model's constants (shapes, weight formats, head counts):
//
//   #include "llmc_host_kernels.h"
//   extern "C" void llmc_k12(const llmc_host_args* a) {
//     llmc::host::linear<llmc::host::fmt::q4_1, /*N=*/576, /*K=*/576, /*HasBias=*/false>(
//         a->step, (const float*)a->buffers[0], a->weights[0], nullptr, (float*)a->buffers[1]);
//   }
//
// Self-contained: the C/C++ standard library, <immintrin.h> when the compiler
// targets AVX2 + FMA + F16C (x86-64-v3 or newer), and "host_abi.h" (the
// calling convention, copied next to this file by the emitter). Defining
// LLMC_HOST_FORCE_SCALAR before including it disables every intrinsic; the
// portable fallback computes the same values (up to float summation order).
//
// Conventions:
//  - Activations are row-major [T, features] in f32; accumulation is in f32.
//    Every activation pointer's element type is a deduced template parameter
//    (`Act`), so f16/bf16 activations can be added later without changing
//    call sites; today only `float` is accepted (a static_assert says so).
//  - Weights are `const void*` in a packed format named by a tag type of
//    namespace `fmt` (GGUF block layouts exactly as ggml). Quantized formats
//    are dequantized on the fly; the values are those of ggml's reference
//    dequantizers up to the rounding of one fused multiply-add.
//  - Work is split with the runtime's thread pool through step->parallel_for;
//    a null parallel_for runs everything on the calling thread. Kernels never
//    call parallel_for from inside a chunk and use stack scratch only, except
//    paged_attention's split path, which reuses a buffer owned by the calling
//    thread (grown on demand, kept for the next call).
//
// See README.md next to this file for the list of templates and performance
// notes.
#ifndef LLMC_HOST_KERNELS_H_
#define LLMC_HOST_KERNELS_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "host_abi.h"

#if !defined(LLMC_HOST_FORCE_SCALAR) && defined(__AVX2__) && defined(__FMA__) && \
    defined(__F16C__)
#define LLMC_HOST_SIMD 1
#include <immintrin.h>
#else
#define LLMC_HOST_SIMD 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LLMC_HOST_INLINE inline __attribute__((always_inline))
#define LLMC_HOST_LAMBDA_INLINE __attribute__((always_inline))
#define LLMC_HOST_UNROLL _Pragma("GCC unroll 16")
#else
#define LLMC_HOST_INLINE inline
#define LLMC_HOST_LAMBDA_INLINE
#define LLMC_HOST_UNROLL
#endif

namespace llmc {
namespace host {

// True when the AVX2/FMA/F16C code paths are compiled in.
inline constexpr bool kSimd = LLMC_HOST_SIMD != 0;

// Activation element types the kernels accept. Adding f16/bf16 activations
// means adding their storage types here and a load/store pair in detail::.
template <class Act>
inline constexpr bool is_supported_activation = std::is_same_v<Act, float>;

enum class rope_style { half, interleaved };  // HF rotate_half | GGML normal mode
enum class rope_scaling_kind { none, linear, llama3 };
enum class gelu_approx { erf, tanh };

// Hugging Face `rope_scaling` (the dialect's #llm.rope_scaling).
struct rope_scaling {
  rope_scaling_kind kind = rope_scaling_kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

// Runs f(begin, end) over [0, n) through the step's thread pool, in chunks of
// at least `grain` items (the pool decides the split). Serial when the step
// has no pool or n <= grain. Returns when every chunk is done.
template <class F>
inline void parallel_for(const llmc_host_step_info* step, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (step == nullptr || step->parallel_for == nullptr || n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  llmc_range_fn tramp = [](void* ctx, int64_t begin, int64_t end) {
    (*static_cast<Fn*>(ctx))(begin, end);
  };
  step->parallel_for(step->pool, n, grain, tramp,
                     const_cast<void*>(static_cast<const void*>(std::addressof(f))));
}

namespace detail {

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

LLMC_HOST_INLINE uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
LLMC_HOST_INLINE uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
LLMC_HOST_INLINE float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
LLMC_HOST_INLINE uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// IEEE half -> float, exact (subnormals, infinities, NaN payloads).
LLMC_HOST_INLINE float half_to_float(uint16_t h) {
#if LLMC_HOST_SIMD
  return _cvtsh_ss(h);
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0) return bits_to_float(float_to_bits(static_cast<float>(mant) * 0x1p-24f) | sign);
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000u | (mant << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
#endif
}
LLMC_HOST_INLINE float bf16_to_float(uint16_t b) {
  return bits_to_float(static_cast<uint32_t>(b) << 16);
}
LLMC_HOST_INLINE float load_half(const uint8_t* p) { return half_to_float(load_u16(p)); }

// q3_k: the j-th 6-bit sub-block scale, minus 32 (see dequantize.cc).
LLMC_HOST_INLINE int q3k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}
// q4_k/q5_k: the j-th 6-bit scale and min.
LLMC_HOST_INLINE void k4_scale_min(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

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

//===----------------------------------------------------------------------===//
// Weight formats
//===----------------------------------------------------------------------===//
//
// Each tag type has: `name` (as in weight_format.h), `block_elems`,
// `block_bytes`, `row_bytes(K)`, `dot(row, x, K)` (sum over k of w[k] x[k],
// dequantizing on the fly) and `dequant_row(row, y, K)`. K must be a multiple
// of block_elems. Internally the kernels decode a "span" (a block, or 32
// elements of a plain format) into 32-element groups of 4 vf registers:
// decode_simd(bytes, f) calls f(offset_in_span, const vf w[4]) per group;
// decode_scalar(bytes, float* out) writes the whole span (the portable path,
// the same operations as ggml's reference).
namespace fmt {

template <class Self, int64_t BlockElems, int64_t BlockBytes, bool Plain>
struct format_base {
  static constexpr int64_t block_elems = BlockElems;
  static constexpr int64_t block_bytes = BlockBytes;
  static constexpr bool is_plain = Plain;
  static constexpr int64_t span_elems = Plain ? 32 : BlockElems;
  static constexpr int64_t span_bytes = Plain ? 32 * BlockBytes : BlockBytes;
  static constexpr int64_t row_bytes(int64_t k) { return k / BlockElems * BlockBytes; }
  // sum_k w[k] * x[k] over one row of k elements (f32 accumulation).
  static float dot(const void* row, const float* x, int64_t k);
  // y[0..k) = the row's values.
  static void dequant_row(const void* row, float* y, int64_t k);
};

// Plain formats: 32-element spans; element i is also readable alone (load1),
// and 8 at a time (load8, p at the first of them) for norms and biases.
template <class Self, int64_t Bytes>
struct plain_base : format_base<Self, 1, Bytes, true> {
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* b, float* y) {
    for (int i = 0; i < 32; ++i) y[i] = Self::load1(b, i);
  }
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* b, F& f) {
    const detail::vf w[4] = {Self::load8(b), Self::load8(b + 8 * Bytes),
                             Self::load8(b + 16 * Bytes), Self::load8(b + 24 * Bytes)};
    f(0, w);
  }
#if !LLMC_HOST_SIMD
  static LLMC_HOST_INLINE detail::vf load8(const uint8_t* p) {
    detail::vf r;
    for (int i = 0; i < 8; ++i) r.v[i] = Self::load1(p, i);
    return r;
  }
#endif
};

struct f32 : plain_base<f32, 4> {
  static constexpr const char* name = "f32";
  static LLMC_HOST_INLINE float load1(const uint8_t* row, int64_t i) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  }
#if LLMC_HOST_SIMD
  static LLMC_HOST_INLINE detail::vf load8(const uint8_t* p) {
    return {_mm256_loadu_ps(reinterpret_cast<const float*>(p))};
  }
#endif
};

struct f16 : plain_base<f16, 2> {
  static constexpr const char* name = "f16";
  static LLMC_HOST_INLINE float load1(const uint8_t* row, int64_t i) {
    return detail::load_half(row + 2 * i);
  }
#if LLMC_HOST_SIMD
  static LLMC_HOST_INLINE detail::vf load8(const uint8_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
#endif
};

struct bf16 : plain_base<bf16, 2> {
  static constexpr const char* name = "bf16";
  static LLMC_HOST_INLINE float load1(const uint8_t* row, int64_t i) {
    return detail::bf16_to_float(detail::load_u16(row + 2 * i));
  }
#if LLMC_HOST_SIMD
  static LLMC_HOST_INLINE detail::vf load8(const uint8_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
#endif
};

// q8_0: f16 d, 32 int8; y = q * d.
struct q8_0 : format_base<q8_0, 32, 34, false> {
  static constexpr const char* name = "q8_0";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const int8_t* qs = reinterpret_cast<const int8_t*>(x + 2);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const __m256 d = _mm256_set1_ps(detail::load_half(x));
    detail::vf w[4];
    for (int i = 0; i < 4; ++i)
      w[i].v = _mm256_mul_ps(
          detail::i8x8_to_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + 2 + 8 * i))),
          d);
    f(0, w);
  }
#endif
};

// q4_0: f16 d, 16 bytes (low nibbles: elements 0..15, high: 16..31); y = (q-8)*d.
struct q4_0 : format_base<q4_0, 32, 18, false> {
  static constexpr const char* name = "q4_0";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const uint8_t* qs = x + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const __m256 d = _mm256_set1_ps(detail::load_half(x));
    const __m128i eight = _mm_set1_epi8(8);
    __m128i q[4];
    detail::nibbles16(x + 2, q);
    detail::vf w[4];
    for (int i = 0; i < 4; ++i)
      w[i].v = _mm256_mul_ps(detail::i8x8_to_ps(_mm_sub_epi8(q[i], eight)), d);
    f(0, w);
  }
#endif
};

// q4_1: f16 d, f16 m, 16 bytes of nibbles; y = q*d + m.
struct q4_1 : format_base<q4_1, 32, 20, false> {
  static constexpr const char* name = "q4_1";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const float m = detail::load_half(x + 2);
    const uint8_t* qs = x + 4;
    for (int j = 0; j < 16; ++j) {
      const float lo = static_cast<float>(qs[j] & 0x0F) * d;
      const float hi = static_cast<float>(qs[j] >> 4) * d;
      y[j] = lo + m;
      y[j + 16] = hi + m;
    }
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    __m256 d, m;
    detail::load_half2(x, &d, &m);
    __m128i q[4];
    detail::nibbles16(x + 4, q);
    detail::vf w[4];
    for (int i = 0; i < 4; ++i) w[i].v = _mm256_fmadd_ps(detail::u8x8_to_ps(q[i]), d, m);
    f(0, w);
  }
#endif
};

// q5_0: f16 d, u32 qh (fifth bit of element j = bit j), 16 bytes of nibbles;
// y = (q5 - 16) * d.
struct q5_0 : format_base<q5_0, 32, 22, false> {
  static constexpr const char* name = "q5_0";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const uint32_t qh = detail::load_u32(x + 2);
    const uint8_t* qs = x + 6;
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
      y[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
      y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
    }
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const __m256 d = _mm256_set1_ps(detail::load_half(x));
    const uint32_t qh = detail::load_u32(x + 2);
    const __m128i sixteen = _mm_set1_epi8(16);
    __m128i q[4];
    detail::nibbles16(x + 6, q);
    detail::vf w[4];
    for (int i = 0; i < 4; ++i)
      w[i].v = _mm256_mul_ps(
          detail::i8x8_to_ps(
              _mm_sub_epi8(_mm_or_si128(q[i], detail::bit4_bytes(qh >> (8 * i))), sixteen)),
          d);
    f(0, w);
  }
#endif
};

// q5_1: f16 d, f16 m, u32 qh, 16 bytes of nibbles; y = q5*d + m.
struct q5_1 : format_base<q5_1, 32, 24, false> {
  static constexpr const char* name = "q5_1";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const float m = detail::load_half(x + 2);
    const uint32_t qh = detail::load_u32(x + 4);
    const uint8_t* qs = x + 8;
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
      const float lo = static_cast<float>((qs[j] & 0x0F) | h0) * d;
      const float hi = static_cast<float>((qs[j] >> 4) | h1) * d;
      y[j] = lo + m;
      y[j + 16] = hi + m;
    }
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    __m256 d, m;
    detail::load_half2(x, &d, &m);
    const uint32_t qh = detail::load_u32(x + 4);
    __m128i q[4];
    detail::nibbles16(x + 8, q);
    detail::vf w[4];
    for (int i = 0; i < 4; ++i)
      w[i].v = _mm256_fmadd_ps(
          detail::u8x8_to_ps(_mm_or_si128(q[i], detail::bit4_bytes(qh >> (8 * i)))), d, m);
    f(0, w);
  }
#endif
};

// The k-quants: 256-element super-blocks. In q2_k/q3_k, half h (128
// elements) uses quant bytes qs[32h .. 32h+31]; 2-bit field j of them gives
// elements 128h + 32j .. +31 (one 32-element group), with a sub-block scale
// per 16 elements (index 8h + 2j + g).

// q2_k: 16 scale bytes (scale | min << 4), 64 quant bytes, f16 d, f16 dmin;
// y = (d*scale) * q - dmin*min.
struct q2_k : format_base<q2_k, 256, 84, false> {
  static constexpr const char* name = "q2_k";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const uint8_t* scales = x;
    const uint8_t* qs = x + 16;
    const float d = detail::load_half(x + 80);
    const float dmin = detail::load_half(x + 82);
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
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const uint8_t* scales = x;
    const float d = detail::load_half(x + 80);
    const float dmin = detail::load_half(x + 82);
    const __m256i m3 = _mm256_set1_epi8(3);
    LLMC_HOST_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m256i qv = detail::load256(x + 16 + 32 * h);
      LLMC_HOST_UNROLL
      for (int j = 0; j < 4; ++j) {
        __m256 t[4];
        detail::i8x32_to_ps(_mm256_and_si256(detail::srl16(qv, 2 * j), m3), t);
        const uint8_t s0 = scales[8 * h + 2 * j], s1 = scales[8 * h + 2 * j + 1];
        const __m256 dl0 = _mm256_set1_ps(d * static_cast<float>(s0 & 0x0F));
        const __m256 ml0 = _mm256_set1_ps(dmin * static_cast<float>(s0 >> 4));
        const __m256 dl1 = _mm256_set1_ps(d * static_cast<float>(s1 & 0x0F));
        const __m256 ml1 = _mm256_set1_ps(dmin * static_cast<float>(s1 >> 4));
        const detail::vf w[4] = {{_mm256_fmsub_ps(t[0], dl0, ml0)},
                                 {_mm256_fmsub_ps(t[1], dl0, ml0)},
                                 {_mm256_fmsub_ps(t[2], dl1, ml1)},
                                 {_mm256_fmsub_ps(t[3], dl1, ml1)}};
        f(128 * h + 32 * j, w);
      }
    }
  }
#endif
};

// q3_k: 32 hmask bytes, 64 quant bytes, 12 scale bytes, f16 d. The third bit
// of element 128h + 32j + 16g + l is bit 4h + j of hmask[16g + l]; when clear,
// 4 is subtracted. y = (d * scale) * q.
struct q3_k : format_base<q3_k, 256, 110, false> {
  static constexpr const char* name = "q3_k";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const uint8_t* hmask = x;
    const uint8_t* qs = x + 32;
    const uint8_t* scales = x + 96;
    const float d = detail::load_half(x + 108);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int g = 0; g < 2; ++g) {
          const float dl = d * static_cast<float>(detail::q3k_scale(scales, 8 * h + 2 * j + g));
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
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const uint8_t* scales = x + 96;
    const float d = detail::load_half(x + 108);
    float dl[16];
    for (int j = 0; j < 16; ++j) dl[j] = d * static_cast<float>(detail::q3k_scale(scales, j));
    const __m256i hm = detail::load256(x);
    const __m256i m3 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    const __m256i zero = _mm256_setzero_si256();
    LLMC_HOST_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m256i qv = detail::load256(x + 32 + 32 * h);
      LLMC_HOST_UNROLL
      for (int j = 0; j < 4; ++j) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1u << (4 * h + j)));
        const __m256i clear = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), zero);
        const __m256i q = _mm256_sub_epi8(_mm256_and_si256(detail::srl16(qv, 2 * j), m3),
                                          _mm256_and_si256(clear, four));
        __m256 t[4];
        detail::i8x32_to_ps(q, t);
        const __m256 d0 = _mm256_set1_ps(dl[8 * h + 2 * j]);
        const __m256 d1 = _mm256_set1_ps(dl[8 * h + 2 * j + 1]);
        const detail::vf w[4] = {{_mm256_mul_ps(d0, t[0])}, {_mm256_mul_ps(d0, t[1])},
                                 {_mm256_mul_ps(d1, t[2])}, {_mm256_mul_ps(d1, t[3])}};
        f(128 * h + 32 * j, w);
      }
    }
  }
#endif
};

// q4_k: f16 d, f16 dmin, 12 scale bytes, 128 quant bytes. Chunk c (64
// elements): low nibbles of qs[32c..+31] are sub-block 2c, high nibbles
// sub-block 2c+1; y = (d*scale) * q - dmin*min.
struct q4_k : format_base<q4_k, 256, 144, false> {
  static constexpr const char* name = "q4_k";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const float dmin = detail::load_half(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* qs = x + 16;
    for (int c = 0; c < 4; ++c) {
      int sc1, m1, sc2, m2;
      detail::k4_scale_min(scales, 2 * c, &sc1, &m1);
      detail::k4_scale_min(scales, 2 * c + 1, &sc2, &m2);
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
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const float d = detail::load_half(x);
    const float dmin = detail::load_half(x + 2);
    const uint8_t* scales = x + 4;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    LLMC_HOST_UNROLL
    for (int c = 0; c < 4; ++c) {
      int sc1, m1, sc2, m2;
      detail::k4_scale_min(scales, 2 * c, &sc1, &m1);
      detail::k4_scale_min(scales, 2 * c + 1, &sc2, &m2);
      const __m256i qv = detail::load256(x + 16 + 32 * c);
      __m256 t[4];
      {
        detail::i8x32_to_ps(_mm256_and_si256(qv, m4), t);
        const __m256 dd = _mm256_set1_ps(d * static_cast<float>(sc1));
        const __m256 mm = _mm256_set1_ps(dmin * static_cast<float>(m1));
        const detail::vf w[4] = {{_mm256_fmsub_ps(t[0], dd, mm)}, {_mm256_fmsub_ps(t[1], dd, mm)},
                                 {_mm256_fmsub_ps(t[2], dd, mm)}, {_mm256_fmsub_ps(t[3], dd, mm)}};
        f(64 * c, w);
      }
      {
        detail::i8x32_to_ps(_mm256_and_si256(_mm256_srli_epi16(qv, 4), m4), t);
        const __m256 dd = _mm256_set1_ps(d * static_cast<float>(sc2));
        const __m256 mm = _mm256_set1_ps(dmin * static_cast<float>(m2));
        const detail::vf w[4] = {{_mm256_fmsub_ps(t[0], dd, mm)}, {_mm256_fmsub_ps(t[1], dd, mm)},
                                 {_mm256_fmsub_ps(t[2], dd, mm)}, {_mm256_fmsub_ps(t[3], dd, mm)}};
        f(64 * c + 32, w);
      }
    }
  }
#endif
};

// q5_k: as q4_k with 32 qh bytes after the scales: the fifth bit of element
// 64c + l is bit 2c of qh[l], of element 64c + 32 + l bit 2c + 1.
struct q5_k : format_base<q5_k, 256, 176, false> {
  static constexpr const char* name = "q5_k";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float d = detail::load_half(x);
    const float dmin = detail::load_half(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* qh = x + 16;
    const uint8_t* qs = x + 48;
    for (int c = 0; c < 4; ++c) {
      int sc1, m1, sc2, m2;
      detail::k4_scale_min(scales, 2 * c, &sc1, &m1);
      detail::k4_scale_min(scales, 2 * c + 1, &sc2, &m2);
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
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const float d = detail::load_half(x);
    const float dmin = detail::load_half(x + 2);
    const uint8_t* scales = x + 4;
    const __m256i qh = detail::load256(x + 16);
    const __m256i m4 = _mm256_set1_epi8(0x0F), sixteen = _mm256_set1_epi8(16);
    LLMC_HOST_UNROLL
    for (int c = 0; c < 4; ++c) {
      int sc1, m1, sc2, m2;
      detail::k4_scale_min(scales, 2 * c, &sc1, &m1);
      detail::k4_scale_min(scales, 2 * c + 1, &sc2, &m2);
      const __m256i qv = detail::load256(x + 48 + 32 * c);
      const __m256i b0 = _mm256_set1_epi8(static_cast<char>(1u << (2 * c)));
      const __m256i b1 = _mm256_set1_epi8(static_cast<char>(1u << (2 * c + 1)));
      const __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen);
      const __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen);
      __m256 t[4];
      {
        detail::i8x32_to_ps(_mm256_or_si256(_mm256_and_si256(qv, m4), h0), t);
        const __m256 dd = _mm256_set1_ps(d * static_cast<float>(sc1));
        const __m256 mm = _mm256_set1_ps(dmin * static_cast<float>(m1));
        const detail::vf w[4] = {{_mm256_fmsub_ps(t[0], dd, mm)}, {_mm256_fmsub_ps(t[1], dd, mm)},
                                 {_mm256_fmsub_ps(t[2], dd, mm)}, {_mm256_fmsub_ps(t[3], dd, mm)}};
        f(64 * c, w);
      }
      {
        detail::i8x32_to_ps(
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 4), m4), h1), t);
        const __m256 dd = _mm256_set1_ps(d * static_cast<float>(sc2));
        const __m256 mm = _mm256_set1_ps(dmin * static_cast<float>(m2));
        const detail::vf w[4] = {{_mm256_fmsub_ps(t[0], dd, mm)}, {_mm256_fmsub_ps(t[1], dd, mm)},
                                 {_mm256_fmsub_ps(t[2], dd, mm)}, {_mm256_fmsub_ps(t[3], dd, mm)}};
        f(64 * c + 32, w);
      }
    }
  }
#endif
};

// q6_k: 128 ql bytes (low 4 bits), 64 qh bytes (high 2 bits), 16 int8
// scales, f16 d. Group k (0..3) of half h: elements 128h + 32k + l take the
// low (k < 2) or high (k >= 2) nibble of ql[64h + 32(k&1) + l] and the 2-bit
// field k of qh[32h + l]; values are stored plus 32; sub-block scale
// 8h + 2k + l/16; y = (d*scale) * q.
struct q6_k : format_base<q6_k, 256, 210, false> {
  static constexpr const char* name = "q6_k";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(x + 192);
    const float d = detail::load_half(x + 208);
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
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const int8_t* scales = reinterpret_cast<const int8_t*>(x + 192);
    const float d = detail::load_half(x + 208);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    const __m256i off = _mm256_set1_epi8(32);
    LLMC_HOST_UNROLL
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = detail::load256(x + 64 * h);
      const __m256i ql1 = detail::load256(x + 64 * h + 32);
      const __m256i qh = detail::load256(x + 128 + 32 * h);
      LLMC_HOST_UNROLL
      for (int k = 0; k < 4; ++k) {
        const __m256i src = (k & 1) ? ql1 : ql0;
        const __m256i nib = _mm256_and_si256(k < 2 ? src : _mm256_srli_epi16(src, 4), m4);
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(detail::srl16(qh, 2 * k), m3), 4);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib, hi), off);
        __m256 t[4];
        detail::i8x32_to_ps(q, t);
        const __m256 d0 = _mm256_set1_ps(d * static_cast<float>(scales[8 * h + 2 * k]));
        const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(scales[8 * h + 2 * k + 1]));
        const detail::vf w[4] = {{_mm256_mul_ps(d0, t[0])}, {_mm256_mul_ps(d0, t[1])},
                                 {_mm256_mul_ps(d1, t[2])}, {_mm256_mul_ps(d1, t[3])}};
        f(128 * h + 32 * k, w);
      }
    }
  }
#endif
};

// llmc's group-wise integers (the quantize pass; layout in the runtime's
// format/quantize.h). A block is one quantization group of G = 32, 64 or 128
// elements, so the tags are templates on G.
// i8<G>: f16 s, G int8; y = q * s.
template <int64_t G>
struct i8 : format_base<i8<G>, G, G + 2, false> {
  static_assert(G == 32 || G == 64 || G == 128, "group must be 32, 64 or 128");
  static constexpr const char* name = "i8";
  static constexpr int64_t group = G;
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float s = detail::load_half(x);
    const int8_t* qs = reinterpret_cast<const int8_t*>(x + 2);
    for (int j = 0; j < G; ++j) y[j] = static_cast<float>(qs[j]) * s;
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const __m256 s = _mm256_set1_ps(detail::load_half(x));
    LLMC_HOST_UNROLL
    for (int c = 0; c < G / 32; ++c) {
      detail::vf w[4];
      for (int i = 0; i < 4; ++i)
        w[i].v = _mm256_mul_ps(detail::i8x8_to_ps(detail::load8b(x + 2 + 32 * c + 8 * i)), s);
      f(32 * c, w);
    }
  }
#endif
};

// i4<G>: f16 s, f16 z (an integer 0..15), G/2 bytes of nibbles in 16-byte
// chunks of 32 elements (low nibbles: elements 0..15 of the chunk, high:
// 16..31, as q4_0); y = (q - z) * s, the subtraction exact in f32.
template <int64_t G>
struct i4 : format_base<i4<G>, G, G / 2 + 4, false> {
  static_assert(G == 32 || G == 64 || G == 128, "group must be 32, 64 or 128");
  static constexpr const char* name = "i4";
  static constexpr int64_t group = G;
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    const float s = detail::load_half(x);
    const float z = detail::load_half(x + 2);
    for (int c = 0; c < G / 32; ++c) {
      const uint8_t* qs = x + 4 + 16 * c;
      float* yc = y + 32 * c;
      for (int j = 0; j < 16; ++j) {
        yc[j] = (static_cast<float>(qs[j] & 0x0F) - z) * s;
        yc[j + 16] = (static_cast<float>(qs[j] >> 4) - z) * s;
      }
    }
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    __m256 s, z;
    detail::load_half2(x, &s, &z);
    LLMC_HOST_UNROLL
    for (int c = 0; c < G / 32; ++c) {
      __m128i q[4];
      detail::nibbles16(x + 4 + 16 * c, q);
      detail::vf w[4];
      for (int i = 0; i < 4; ++i)
        w[i].v = _mm256_mul_ps(_mm256_sub_ps(detail::u8x8_to_ps(q[i]), z), s);
      f(32 * c, w);
    }
  }
#endif
};

}  // namespace fmt

namespace detail {

//===----------------------------------------------------------------------===//
// Row decoding and dot products
//===----------------------------------------------------------------------===//

// Calls f(offset, const vf w[4]) for each 32-element group of the span at b.
template <class Fmt, class F>
LLMC_HOST_INLINE void decode_span(const uint8_t* b, F& f) {
#if LLMC_HOST_SIMD
  Fmt::decode_simd(b, f);
#else
  alignas(32) float buf[Fmt::span_elems];
  Fmt::decode_scalar(b, buf);
  for (int g = 0; g < static_cast<int>(Fmt::span_elems / 32); ++g) {
    const float* p = buf + 32 * g;
    const vf w[4] = {vload(p), vload(p + 8), vload(p + 16), vload(p + 24)};
    f(32 * g, w);
  }
#endif
}

// out[r] = sum_k w[k] * xs[r][k] for R activation rows against one weight row:
// each 32-element group is decoded once into registers and multiplied with
// all R rows (R = 1 is the streaming GEMV of decode).
template <class Fmt, int R>
LLMC_HOST_INLINE void dot_rows(const uint8_t* row, int64_t k, const float* const* xs, float* out) {
  // Enough independent FMA chains to cover the FMA latency.
  constexpr int A = R <= 2 ? 4 : (R <= 4 ? 2 : 1);
  vf acc[R][A];
  LLMC_HOST_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_HOST_UNROLL
    for (int a = 0; a < A; ++a) acc[r][a] = vzero();
  const int64_t spans = k / Fmt::span_elems;
  for (int64_t b = 0; b < spans; ++b) {
    const int64_t base = b * Fmt::span_elems;
    auto body = [&](int off, const vf* w) LLMC_HOST_LAMBDA_INLINE {
      LLMC_HOST_UNROLL
      for (int r = 0; r < R; ++r) {
        const float* xp = xs[r] + base + off;
        LLMC_HOST_UNROLL
        for (int i = 0; i < 4; ++i) acc[r][i % A] = vfma(w[i], vload(xp + 8 * i), acc[r][i % A]);
      }
    };
    decode_span<Fmt>(row + b * Fmt::span_bytes, body);
  }
  LLMC_HOST_UNROLL
  for (int r = 0; r < R; ++r) {
    vf s = acc[r][0];
    LLMC_HOST_UNROLL
    for (int a = 1; a < A; ++a) s = vadd(s, acc[r][a]);
    out[r] = vhsum(s);
  }
  if constexpr (Fmt::is_plain) {
    for (int64_t i = spans * Fmt::span_elems; i < k; ++i) {
      const float w = Fmt::load1(row, i);
      for (int r = 0; r < R; ++r) out[r] += w * xs[r][i];
    }
  }
}

template <class Fmt>
inline void dequant_row(const uint8_t* row, float* y, int64_t k) {
  const int64_t spans = k / Fmt::span_elems;
  for (int64_t b = 0; b < spans; ++b) {
    float* yb = y + b * Fmt::span_elems;
    auto body = [&](int off, const vf* w) LLMC_HOST_LAMBDA_INLINE {
      for (int i = 0; i < 4; ++i) vstore(yb + off + 8 * i, w[i]);
    };
    decode_span<Fmt>(row + b * Fmt::span_bytes, body);
  }
  if constexpr (Fmt::is_plain)
    for (int64_t i = spans * Fmt::span_elems; i < k; ++i) y[i] = Fmt::load1(row, i);
}

// Rows [n0, n1) of the weight times R activation rows starting at m.
template <class Fmt, int R, class XRow, class Store>
inline void gemm_tile(const uint8_t* w, int64_t rb, int64_t k, int64_t n0, int64_t n1, int64_t m,
                      const XRow& xrow, const Store& store) {
  const float* xs[R];
  for (int r = 0; r < R; ++r) xs[r] = xrow(m + r);
  for (int64_t n = n0; n < n1; ++n) {
    float o[R];
    dot_rows<Fmt, R>(w + n * rb, k, xs, o);
    for (int r = 0; r < R; ++r) store(m + r, n, o[r]);
  }
}

// Weight rows per cache tile when several activation rows share them.
inline constexpr int64_t kWeightTileBytes = 16 * 1024;

// store(m, n, dot(weight row n, xrow(m))) for m in [0, M), n in [n0, n1).
// M == 1: one streaming pass over the rows. M > 1: weight rows in tiles of
// ~16 KiB (stay in L1/L2) times groups of 8 (then 4, 2, 1) activation rows,
// so each decoded weight group is reused from registers by up to 8 tokens.
template <class Fmt, class XRow, class Store>
inline void gemm(const uint8_t* w, int64_t k, int64_t n0, int64_t n1, int64_t M, const XRow& xrow,
                 const Store& store) {
  const int64_t rb = Fmt::row_bytes(k);
  if (M == 1) {
    gemm_tile<Fmt, 1>(w, rb, k, n0, n1, 0, xrow, store);
    return;
  }
  const int64_t nb = std::max<int64_t>(4, kWeightTileBytes / std::max<int64_t>(rb, 1));
  for (int64_t nt = n0; nt < n1; nt += nb) {
    const int64_t ne = std::min(n1, nt + nb);
    int64_t m = 0;
    for (; m + 8 <= M; m += 8) gemm_tile<Fmt, 8>(w, rb, k, nt, ne, m, xrow, store);
    if (M - m >= 4) {
      gemm_tile<Fmt, 4>(w, rb, k, nt, ne, m, xrow, store);
      m += 4;
    }
    if (M - m >= 2) {
      gemm_tile<Fmt, 2>(w, rb, k, nt, ne, m, xrow, store);
      m += 2;
    }
    if (M - m >= 1) gemm_tile<Fmt, 1>(w, rb, k, nt, ne, m, xrow, store);
  }
}

// Weight rows per parallel chunk: about 64 chunks (2–16 threads each get 4+
// of them, so a dynamic pool balances within a chunk), but at least ~16K
// multiply-adds per chunk so the pool's overhead stays small.
inline int64_t rows_grain(int64_t n, int64_t k, int64_t m) {
  const int64_t work = std::max<int64_t>(k * std::max<int64_t>(m, 1), 1);
  int64_t g = std::max<int64_t>((n + 63) / 64, (16384 + work - 1) / work);
  return std::min(std::max<int64_t>(g, 1), std::max<int64_t>(n, 1));
}

// Token rows per parallel chunk for per-token kernels (norms, rope, embed):
// at least ~16K elements per chunk.
inline int64_t token_grain(int64_t width) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
}

inline constexpr int64_t kParallelElems = 1 << 16;  // elementwise: parallel above this
inline constexpr int64_t kElemGrain = 1 << 14;

template <class Fmt>
LLMC_HOST_INLINE float load_plain(const void* p, int64_t i) {
  static_assert(Fmt::is_plain, "expected a plain (f32/f16/bf16) weight format");
  return Fmt::load1(static_cast<const uint8_t*>(p), i);
}
template <class Fmt>
LLMC_HOST_INLINE vf load8_plain(const void* p, int64_t i) {
  static_assert(Fmt::is_plain, "expected a plain (f32/f16/bf16) weight format");
  return Fmt::load8(static_cast<const uint8_t*>(p) + i * Fmt::block_bytes);
}

// sum of x[i]^2 in f32.
inline float sum_squares(const float* x, int64_t n) {
  vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const vf x0 = vload(x + i), x1 = vload(x + i + 8), x2 = vload(x + i + 16),
             x3 = vload(x + i + 24);
    a0 = vfma(x0, x0, a0);
    a1 = vfma(x1, x1, a1);
    a2 = vfma(x2, x2, a2);
    a3 = vfma(x3, x3, a3);
  }
  for (; i + 8 <= n; i += 8) {
    const vf x0 = vload(x + i);
    a0 = vfma(x0, x0, a0);
  }
  float s = vhsum(vadd(vadd(a0, a1), vadd(a2, a3)));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

inline float sum(const float* x, int64_t n) {
  vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = vadd(a0, vload(x + i));
    a1 = vadd(a1, vload(x + i + 8));
    a2 = vadd(a2, vload(x + i + 16));
    a3 = vadd(a3, vload(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) a0 = vadd(a0, vload(x + i));
  float s = vhsum(vadd(vadd(a0, a1), vadd(a2, a3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

// The sequence owning token t (query_starts[s] <= t < query_starts[s+1]),
// or -1.
inline int64_t seq_of(const llmc_host_step_info* step, int64_t t) {
  const int32_t* qs = step->query_starts;
  const int64_t S = step->num_seqs;
  if (qs == nullptr || S <= 0) return -1;
  const int64_t s = std::upper_bound(qs, qs + S + 1, static_cast<int32_t>(t)) - qs - 1;
  if (s < 0 || s >= S || t >= qs[s + 1]) return -1;
  return s;
}

template <int64_t D>
LLMC_HOST_INLINE float dot_f32(const float* a, const float* b) {
  vf a0 = vzero(), a1 = vzero();
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) {
    a0 = vfma(vload(a + d), vload(b + d), a0);
    a1 = vfma(vload(a + d + 8), vload(b + d + 8), a1);
  }
  for (; d + 8 <= D; d += 8) a0 = vfma(vload(a + d), vload(b + d), a0);
  float s = vhsum(vadd(a0, a1));
  for (; d < D; ++d) s += a[d] * b[d];
  return s;
}

// out[i] = q . k_i for four keys.
template <int64_t D>
LLMC_HOST_INLINE void dot4_f32(const float* q, const float* k0, const float* k1, const float* k2,
                               const float* k3, float* out) {
  vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    const vf qv = vload(q + d);
    a0 = vfma(qv, vload(k0 + d), a0);
    a1 = vfma(qv, vload(k1 + d), a1);
    a2 = vfma(qv, vload(k2 + d), a2);
    a3 = vfma(qv, vload(k3 + d), a3);
  }
  vhsum4(a0, a1, a2, a3, out);
  for (; d < D; ++d) {
    out[0] += q[d] * k0[d];
    out[1] += q[d] * k1[d];
    out[2] += q[d] * k2[d];
    out[3] += q[d] * k3[d];
  }
}

inline constexpr int kAttnTile = 32;  // keys per online-softmax update
// Work items wanted per attention call: when a step has fewer (token, kv
// head) pairs, each pair's keys are split into ranges that run in parallel
// (flash-decoding) and are merged afterwards.
inline constexpr int64_t kAttnMinItems = 32;
inline constexpr int64_t kAttnMinKeysPerSplit = 128;

// The cache positions token t attends to: [*start, *end] of sequence *seq.
// False when the token belongs to no sequence or sees no key.
inline bool attn_range(const llmc_host_step_info* step, int64_t t, int64_t window, int64_t* seq,
                       int64_t* start, int64_t* end) {
  const int64_t s = seq_of(step, t);
  const int64_t bs = step->block_size;
  if (s < 0 || bs <= 0 || step->positions == nullptr || step->context_lens == nullptr)
    return false;
  const int64_t pos = step->positions[t];
  *seq = s;
  *end = std::min({pos, static_cast<int64_t>(step->context_lens[s]) - 1,
                   step->max_blocks * bs - 1});
  *start = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  return *end >= *start;
}

// Online softmax of token t for the GH query heads h0 .. h0+GH-1 (all sharing
// kv head kvh) over the cache positions [start, end] of sequence s, in tiles
// of 32 keys: on return m[g] is the running maximum score, l[g] the sum of
// exp(score - m[g]) and acc[g*D ..] the exp-weighted sum of V rows.
template <int64_t Heads, int64_t KvHeads, int64_t D, int GH>
inline void attend_range(const llmc_host_step_info* step, int64_t s, int64_t t, int64_t kvh,
                         int64_t h0, const float* q, const float* kc, const float* vc,
                         float scale, int64_t start, int64_t end, float* m, float* l,
                         float* acc) {
  constexpr int64_t QW = Heads * D, KVW = KvHeads * D;
  constexpr int TILE = kAttnTile;
  const int64_t bs = step->block_size;
  const int32_t* bt = step->block_tables + s * step->max_blocks;
  alignas(32) float qs[GH][D];
  alignas(32) float sc[GH][TILE];
  for (int g = 0; g < GH; ++g) {
    const float* qh = q + t * QW + (h0 + g) * D;
    for (int64_t d = 0; d < D; ++d) {
      qs[g][d] = qh[d] * scale;
      acc[g * D + d] = 0.0f;
    }
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  const float* kp[TILE];
  const float* vp[TILE];
  int64_t bi = start / bs, off = start % bs;
  for (int64_t p0 = start; p0 <= end; p0 += TILE) {
    const int n = static_cast<int>(std::min<int64_t>(TILE, end - p0 + 1));
    for (int j = 0; j < n; ++j) {
      const int64_t row = (static_cast<int64_t>(bt[bi]) * bs + off) * KVW + kvh * D;
      kp[j] = kc + row;
      vp[j] = vc + row;
      if (++off == bs) {
        off = 0;
        ++bi;
      }
    }
    for (int g = 0; g < GH; ++g) {
      // Scores of the tile; padding keys get -inf (weight 0).
      float* sg = sc[g];
      int j = 0;
      for (; j + 4 <= n; j += 4) dot4_f32<D>(qs[g], kp[j], kp[j + 1], kp[j + 2], kp[j + 3], sg + j);
      for (; j < n; ++j) sg[j] = dot_f32<D>(qs[g], kp[j]);
      for (; j < TILE; ++j) sg[j] = -std::numeric_limits<float>::infinity();
      // Online softmax update: one rescale of the accumulator per tile.
      vf mx = vload(sg);
      for (int v = 8; v < TILE; v += 8) mx = vmax(mx, vload(sg + v));
      const float mnew = std::max(m[g], vhmax(mx));
      const float alpha =
          m[g] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m[g] - mnew);
      const vf mv = vset1(mnew);
      vf ps = vzero();
      for (int v = 0; v < TILE; v += 8) {
        const vf p = vexp(vsub(vload(sg + v), mv));
        vstore(sg + v, p);
        ps = vadd(ps, p);
      }
      l[g] = l[g] * alpha + vhsum(ps);
      m[g] = mnew;
      float* ag = acc + g * D;
      if (alpha != 1.0f) {
        const vf av = vset1(alpha);
        int64_t d = 0;
        for (; d + 8 <= D; d += 8) vstore(ag + d, vmul(vload(ag + d), av));
        for (; d < D; ++d) ag[d] *= alpha;
      }
      // acc += sum_j p_j * v_j, 32 lanes of the head at a time in registers.
      int64_t d = 0;
      for (; d + 32 <= D; d += 32) {
        vf a0 = vload(ag + d), a1 = vload(ag + d + 8), a2 = vload(ag + d + 16),
           a3 = vload(ag + d + 24);
        for (int jj = 0; jj < n; ++jj) {
          const vf pj = vset1(sg[jj]);
          const float* vr = vp[jj] + d;
          a0 = vfma(pj, vload(vr), a0);
          a1 = vfma(pj, vload(vr + 8), a1);
          a2 = vfma(pj, vload(vr + 16), a2);
          a3 = vfma(pj, vload(vr + 24), a3);
        }
        vstore(ag + d, a0);
        vstore(ag + d + 8, a1);
        vstore(ag + d + 16, a2);
        vstore(ag + d + 24, a3);
      }
      for (; d + 8 <= D; d += 8) {
        vf a0 = vload(ag + d);
        for (int jj = 0; jj < n; ++jj) a0 = vfma(vset1(sg[jj]), vload(vp[jj] + d), a0);
        vstore(ag + d, a0);
      }
      for (; d < D; ++d) {
        float a = ag[d];
        for (int jj = 0; jj < n; ++jj) a += sg[jj] * vp[jj][d];
        ag[d] = a;
      }
    }
  }
}

// Scratch of the split path: owned by the thread that calls the kernel (the
// pool's workers write into it while that thread waits in parallel_for).
inline float* attn_scratch(size_t floats) {
  thread_local struct buffer {
    float* p = nullptr;
    size_t n = 0;
    ~buffer() { delete[] p; }
  } buf;
  if (buf.n < floats) {
    delete[] buf.p;
    buf.p = new float[floats];
    buf.n = floats;
  }
  return buf.p;
}

// Inverse RoPE frequencies of the P pairs, in double.
inline void rope_inv_freq(int64_t pairs, int64_t head_dim, double theta, const rope_scaling& sc,
                          const float* freq_factors, double* inv) {
  constexpr double kPi = 3.14159265358979323846;
  for (int64_t i = 0; i < pairs; ++i) {
    double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (sc.kind == rope_scaling_kind::linear) {
      f /= sc.factor;
    } else if (sc.kind == rope_scaling_kind::llama3) {
      // Hugging Face's _compute_llama3_parameters.
      const double old_ctx = static_cast<double>(sc.original_max_position);
      const double low_wavelen = old_ctx / sc.low_freq_factor;
      const double high_wavelen = old_ctx / sc.high_freq_factor;
      const double wavelen = 2.0 * kPi / f;
      if (wavelen > low_wavelen) {
        f /= sc.factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth =
            (old_ctx / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        f = (1.0 - smooth) * f / sc.factor + smooth * f;
      }
    }
    if (freq_factors != nullptr) f /= static_cast<double>(freq_factors[i]);
    inv[i] = f;
  }
}

template <class VecOp, class ScalarOp>
inline void map_elems(const llmc_host_step_info* step, int64_t total, const VecOp& vop,
                      const ScalarOp& sop) {
  auto body = [&](int64_t b, int64_t e) {
    const int64_t vend = b + (e - b) / 8 * 8;
    for (int64_t i = b; i < vend; i += 8) vop(i);
    for (int64_t i = vend; i < e; ++i) sop(i);
  };
  if (total >= kParallelElems)
    parallel_for(step, total, kElemGrain, body);
  else
    body(0, total);
}

LLMC_HOST_INLINE float silu1(float x) { return x / (1.0f + std::exp(-x)); }
LLMC_HOST_INLINE vf silu8(vf x) { return vdiv(x, vadd(vset1(1.0f), vexp(vsub(vzero(), x)))); }

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3).
inline constexpr float kGeluC0 = 0.7978845608028654f;
inline constexpr float kGeluC1 = 0.7978845608028654f * 0.044715f;
LLMC_HOST_INLINE float gelu_tanh1(float x) {
  const float u2 = 2.0f * x * (kGeluC0 + kGeluC1 * x * x);
  return x / (1.0f + std::exp(-u2));
}
LLMC_HOST_INLINE vf gelu_tanh8(vf x) {
  const vf u2 = vmul(vset1(-2.0f), vmul(x, vfma(vset1(kGeluC1), vmul(x, x), vset1(kGeluC0))));
  return vdiv(x, vadd(vset1(1.0f), vexp(u2)));
}
// gelu_erf(x) = 0.5 x (1 + erf(x/sqrt 2)) = 0.5 x erfc(-x/sqrt 2), which keeps
// full relative accuracy for negative x.
LLMC_HOST_INLINE float gelu_erf1(float x) {
  return 0.5f * x * std::erfc(-x * 0.70710678118654752f);
}

#define LLMC_HOST_CHECK_ACT(Act)                       \
  static_assert(::llmc::host::is_supported_activation<Act>, \
                "llmc host kernels: only f32 activations are implemented")

}  // namespace detail

namespace detail {
// Per-thread scratch that grows and is kept between calls; `Tag` keeps the
// prologue's rows apart from the GEMM tiles and the RoPE tables.
template <class Tag>
inline float* scratch(size_t floats) {
  thread_local struct buffer {
    float* p = nullptr;
    size_t n = 0;
    ~buffer() { delete[] p; }
  } buf;
  if (buf.n < floats) {
    delete[] buf.p;
    buf.p = new float[floats];
    buf.n = floats;
  }
  return buf.p;
}
struct prologue_tag {};
struct tile_tag {};

// Runs f(r0, r1) over [0, rows): on the calling thread when the work is
// small (a decode step), else across the pool.
template <class F>
inline void for_rows(const llmc_host_step_info* step, int64_t rows, int64_t width, const F& f) {
  if (rows * width < kParallelElems)
    f(int64_t{0}, rows);
  else
    parallel_for(step, rows, token_grain(width), f);
}
// for_rows over the step's tokens.
template <class F>
inline void for_tokens(const llmc_host_step_info* step, int64_t width, const F& f) {
  for_rows(step, step->num_tokens, width, f);
}
}  // namespace detail

//===----------------------------------------------------------------------===//
// q8 activations: integer dot products for the 32-element block formats
//===----------------------------------------------------------------------===//
//
// With Q8 = true a GEMM over q4_0, q4_1, q5_0, q5_1 or q8_0 weights first
// rounds each activation row to blocks of 32 int8 with one f32 scale (what
// llama.cpp's CPU backend does with q8_0/q8_1), then multiplies weight quants
// by activation quants in integers (AVX2 maddubs: 32 products per
// instruction) and applies the two scales once per block:
//   sum_k w_k x_k ~= sum_blocks dw dx sum_i qw_i qx_i  (+ mw sx for q4_1/q5_1,
//   sx = dx sum_i qx_i).
// The rounding of x costs accuracy (relative error ~ 1/254 per element
// before averaging); Q8 = false keeps the f32 path, which matches a float64
// reference to ~1e-7.

struct block_q8 {
  float d;  // scale: x ~= d * q
  float s;  // d * sum(q), for the formats with an offset
  int8_t q[32];
};

namespace detail {

// x [k] (k a multiple of 32) -> k / 32 blocks; round half to even like
// _mm256_round_ps(_MM_FROUND_TO_NEAREST_INT).
inline void quantize_row_q8(const float* x, block_q8* y, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32, ++y) {
    float amax = 0.0f;
#if LLMC_HOST_SIMD
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    amax = vhmax(vf{m});
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i)
      qi[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), id),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i sum32 = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum32), _mm256_extracti128_si256(sum32, 1));
    const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    const int sum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
    // int32 -> int8 in element order (packs interleave 128-bit lanes).
    const __m256i p16 = _mm256_packs_epi32(qi[0], qi[1]);
    const __m256i p16b = _mm256_packs_epi32(qi[2], qi[3]);
    __m256i p8 = _mm256_packs_epi16(p16, p16b);
    p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y->q), p8);
#else
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::nearbyint(x[i] * id));
      y->q[i] = static_cast<int8_t>(q);
      sum += q;
    }
#endif
    y->d = d;
    y->s = d * static_cast<float>(sum);
  }
}

// Weight-side access for the integer path: the 32 quants of a block as
// signed (`q_signed`) or unsigned (`q_unsigned`) bytes, its scale, its offset.
template <class Fmt>
struct q8_weight;  // specialized for the formats that take q8 activations

// Every such block starts with its f16 scale; the "_1" formats follow it
// with an f16 min.
template <bool HasMin>
struct q8_scales {
  static constexpr bool has_min = HasMin;
  static LLMC_HOST_INLINE float scale(const uint8_t* b) { return load_half(b); }
  static LLMC_HOST_INLINE float min(const uint8_t* b) {
    if constexpr (HasMin) return load_half(b + 2);
    return 0.0f;
  }
};

template <>
struct q8_weight<fmt::q8_0> : q8_scales<false> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) {
    return static_cast<int8_t>(b[2 + i]);
  }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = false;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) { return load256(b + 2); }
#endif
};

template <>
struct q8_weight<fmt::q4_0> : q8_scales<false> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) {
    const uint8_t v = b[2 + (i & 15)];
    return (i < 16 ? (v & 0x0F) : (v >> 4)) - 8;
  }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = false;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) {
    return _mm256_sub_epi8(nibbles32(b + 2), _mm256_set1_epi8(8));
  }
#endif
};

template <>
struct q8_weight<fmt::q4_1> : q8_scales<true> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) {
    const uint8_t v = b[4 + (i & 15)];
    return i < 16 ? (v & 0x0F) : (v >> 4);
  }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = true;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) { return nibbles32(b + 4); }
#endif
};

template <>
struct q8_weight<fmt::q5_0> : q8_scales<false> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) {
    const uint8_t v = b[6 + (i & 15)];
    const int hi = static_cast<int>((load_u32(b + 2) >> i) & 1) << 4;
    return ((i < 16 ? (v & 0x0F) : (v >> 4)) | hi) - 16;
  }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = false;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes32(load_u32(b + 2)), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b + 6), hi), _mm256_set1_epi8(16));
  }
#endif
};

template <>
struct q8_weight<fmt::q5_1> : q8_scales<true> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) {
    const uint8_t v = b[8 + (i & 15)];
    const int hi = static_cast<int>((load_u32(b + 4) >> i) & 1) << 4;
    return (i < 16 ? (v & 0x0F) : (v >> 4)) | hi;
  }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = true;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes32(load_u32(b + 4)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles32(b + 8), hi);
  }
#endif
};

template <class Fmt, class = void>
struct takes_q8 : std::false_type {};
template <class Fmt>
struct takes_q8<Fmt, std::void_t<decltype(q8_weight<Fmt>::has_min)>> : std::true_type {};

// out[r] = sum over the row of w * x_r for R quantized activation rows.
template <class Fmt, int R>
LLMC_HOST_INLINE void dot_rows_q8(const uint8_t* row, int64_t k, const block_q8* const* xs,
                                  float* out) {
  using W = q8_weight<Fmt>;
  const int64_t nb = k / 32;
#if LLMC_HOST_SIMD
  // One accumulator per row, blocks summed in order, whatever the tile
  // height R: a token's result must not depend on how many tokens share its
  // tile, since the next layer's q8 rounding turns a different float order
  // into different tokens (batched decode must match decoding alone; `llmc
  // bench --verify-seqs`). Alternating two accumulators for R <= 2, as
  // before, measured no faster here (SmolLM2 tg/pp within noise).
  constexpr int A = 1;
  __m256 acc[R][A];
  float offset[R][A] = {};
  for (int r = 0; r < R; ++r)
    for (int a = 0; a < A; ++a) acc[r][a] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    const int a = static_cast<int>(b % A);
    const uint8_t* wb = row + b * Fmt::block_bytes;
    const __m256i qw = W::quants(wb);
    const float dw = W::scale(wb);
    __m256i aw = qw;
    if constexpr (!W::is_unsigned) aw = _mm256_sign_epi8(qw, qw);
    LLMC_HOST_UNROLL
    for (int r = 0; r < R; ++r) {
      const block_q8* xb = xs[r] + b;
      __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb->q));
      if constexpr (!W::is_unsigned) qx = _mm256_sign_epi8(qx, qw);
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, qx), ones);
      acc[r][a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * xb->d), acc[r][a]);
      if constexpr (W::has_min) offset[r][a] += W::min(wb) * xb->s;
    }
  }
  for (int r = 0; r < R; ++r) {
    __m256 sum = acc[r][0];
    float off = offset[r][0];
    for (int a = 1; a < A; ++a) {
      sum = _mm256_add_ps(sum, acc[r][a]);
      off += offset[r][a];
    }
    out[r] = vhsum(vf{sum}) + off;
  }
#else
  float offset[R] = {};
  float acc[R] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * Fmt::block_bytes;
    const float dw = W::scale(wb);
    int qw[32];
    for (int i = 0; i < 32; ++i) qw[i] = W::quant(wb, i);
    for (int r = 0; r < R; ++r) {
      const block_q8* xb = xs[r] + b;
      int sum = 0;
      for (int i = 0; i < 32; ++i) sum += qw[i] * xb->q[i];
      acc[r] += dw * xb->d * static_cast<float>(sum);
      if constexpr (W::has_min) offset[r] += W::min(wb) * xb->s;
    }
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r] + offset[r];
#endif
}

template <class Fmt, int R, class XRow, class Store>
inline void gemm_tile_q8(const uint8_t* w, int64_t rb, int64_t k, int64_t n0, int64_t n1, int64_t m,
                         const XRow& xrow, const Store& store) {
  const block_q8* xs[R];
  for (int r = 0; r < R; ++r) xs[r] = xrow(m + r);
  for (int64_t n = n0; n < n1; ++n) {
    float o[R];
    dot_rows_q8<Fmt, R>(w + n * rb, k, xs, o);
    for (int r = 0; r < R; ++r) store(m + r, n, o[r]);
  }
}

// gemm() with quantized activation rows xrow(m) -> const block_q8*.
template <class Fmt, class XRow, class Store>
inline void gemm_q8(const uint8_t* w, int64_t k, int64_t n0, int64_t n1, int64_t M,
                    const XRow& xrow, const Store& store) {
  const int64_t rb = Fmt::row_bytes(k);
  if (M == 1) {
    gemm_tile_q8<Fmt, 1>(w, rb, k, n0, n1, 0, xrow, store);
    return;
  }
  const int64_t nb = std::max<int64_t>(4, kWeightTileBytes / std::max<int64_t>(rb, 1));
  for (int64_t nt = n0; nt < n1; nt += nb) {
    const int64_t ne = std::min(n1, nt + nb);
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) gemm_tile_q8<Fmt, 4>(w, rb, k, nt, ne, m, xrow, store);
    if (M - m >= 2) {
      gemm_tile_q8<Fmt, 2>(w, rb, k, nt, ne, m, xrow, store);
      m += 2;
    }
    if (M - m >= 1) gemm_tile_q8<Fmt, 1>(w, rb, k, nt, ne, m, xrow, store);
  }
}

struct q8_tag {};

// Activation rows xrow(t) for t < T (K floats each; T is the step's tokens
// for a linear, its logits rows for the LM head), quantized once into
// per-thread scratch: T rows of K / 32 blocks.
template <int64_t K, class XRow>
inline const block_q8* quantize_rows_q8(const llmc_host_step_info* step, int64_t T,
                                        const XRow& xrow) {
  static_assert(K % 32 == 0, "q8 activations need K a multiple of 32");
  constexpr int64_t nb = K / 32;
  const size_t floats = static_cast<size_t>(std::max<int64_t>(T, 1) * nb) * sizeof(block_q8) /
                        sizeof(float);
  block_q8* q = reinterpret_cast<block_q8*>(scratch<q8_tag>(floats));
  for_rows(step, T, K, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) quantize_row_q8(xrow(t), q + t * nb, K);
  });
  return q;
}

}  // namespace detail


namespace fmt {
template <class S, int64_t E, int64_t B, bool P>
float format_base<S, E, B, P>::dot(const void* row, const float* x, int64_t k) {
  float out;
  detail::dot_rows<S, 1>(static_cast<const uint8_t*>(row), k, &x, &out);
  return out;
}
template <class S, int64_t E, int64_t B, bool P>
void format_base<S, E, B, P>::dequant_row(const void* row, float* y, int64_t k) {
  detail::dequant_row<S>(static_cast<const uint8_t*>(row), y, k);
}
}  // namespace fmt

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

// out[t, :] = table[tokens[t], :] for a [Vocab, Hidden] table in format Fmt.
// An id outside [0, Vocab) gives a row of zeros (the table is never read out
// of bounds).
template <class Fmt, int64_t Vocab, int64_t Hidden, class Act = float>
void embed(const llmc_host_step_info* step, const void* table, Act* out) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(Hidden % Fmt::block_elems == 0, "Hidden must be a whole number of blocks");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  constexpr int64_t rb = Fmt::row_bytes(Hidden);
  const uint8_t* tb = static_cast<const uint8_t*>(table);
  const int32_t* tokens = step->tokens;
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t id = tokens[t];
      float* o = out + t * Hidden;
      if (id < 0 || id >= Vocab)
        std::fill(o, o + Hidden, 0.0f);
      else
        detail::dequant_row<Fmt>(tb + id * rb, o, Hidden);
    }
  };
  if (T * Hidden >= detail::kParallelElems)
    parallel_for(step, T, detail::token_grain(Hidden), body);
  else
    body(0, T);
}

// One row of rms_norm (below); also the norm of fused prologues.
template <int64_t Hidden, class WFmt>
LLMC_HOST_INLINE void rms_norm_row(const float* xr, const void* weight, float eps, float* o) {
  const float ms = detail::sum_squares(xr, Hidden) / static_cast<float>(Hidden);
  const float r = 1.0f / std::sqrt(ms + eps);
  const detail::vf rv = detail::vset1(r);
  constexpr int64_t V = Hidden / 8 * 8;
  for (int64_t i = 0; i < V; i += 8)
    detail::vstore(o + i, detail::vmul(detail::load8_plain<WFmt>(weight, i),
                                       detail::vmul(detail::vload(xr + i), rv)));
  for (int64_t i = V; i < Hidden; ++i) o[i] = detail::load_plain<WFmt>(weight, i) * (xr[i] * r);
}

// out = x / sqrt(mean(x^2) + eps) * weight per token (mean in f32, as HF:
// out = w * (x * r)). WFmt: f32, f16 or bf16. In place (out == x) allowed.
template <int64_t Hidden, class WFmt = fmt::f32, class Act = float>
void rms_norm(const llmc_host_step_info* step, const Act* x, const void* weight, Act* out,
              double eps) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(WFmt::is_plain, "norm weights must be f32, f16 or bf16");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const float feps = static_cast<float>(eps);
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      rms_norm_row<Hidden, WFmt>(x + t * Hidden, weight, feps, out + t * Hidden);
  };
  parallel_for(step, T, detail::token_grain(Hidden), body);
}

// One row of layer_norm (below); also the norm of fused prologues.
template <int64_t Hidden, bool HasBias, class WFmt, class BFmt>
LLMC_HOST_INLINE void layer_norm_row(const float* xr, const void* weight, const void* bias,
                                     float feps, float* o) {
  (void)bias;
  const float mean = detail::sum(xr, Hidden) / static_cast<float>(Hidden);
  const detail::vf mv = detail::vset1(mean);
  detail::vf a0 = detail::vzero(), a1 = detail::vzero();
  int64_t i = 0;
  for (; i + 16 <= Hidden; i += 16) {
    const detail::vf c0 = detail::vsub(detail::vload(xr + i), mv);
    const detail::vf c1 = detail::vsub(detail::vload(xr + i + 8), mv);
    a0 = detail::vfma(c0, c0, a0);
    a1 = detail::vfma(c1, c1, a1);
  }
  for (; i + 8 <= Hidden; i += 8) {
    const detail::vf c0 = detail::vsub(detail::vload(xr + i), mv);
    a0 = detail::vfma(c0, c0, a0);
  }
  float ss = detail::vhsum(detail::vadd(a0, a1));
  for (; i < Hidden; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(Hidden) + feps);
  const detail::vf rv = detail::vset1(r);
  constexpr int64_t V = Hidden / 8 * 8;
  for (i = 0; i < V; i += 8) {
    detail::vf y = detail::vmul(detail::vmul(detail::vsub(detail::vload(xr + i), mv), rv),
                                detail::load8_plain<WFmt>(weight, i));
    if constexpr (HasBias) y = detail::vadd(y, detail::load8_plain<BFmt>(bias, i));
    detail::vstore(o + i, y);
  }
  for (i = V; i < Hidden; ++i) {
    float y = (xr[i] - mean) * r * detail::load_plain<WFmt>(weight, i);
    if constexpr (HasBias) y += detail::load_plain<BFmt>(bias, i);
    o[i] = y;
  }
}

// out = (x - mean) / sqrt(var + eps) * weight (+ bias) per token, mean and
// (biased) variance in f32, two passes. In place allowed.
template <int64_t Hidden, bool HasBias, class WFmt = fmt::f32, class BFmt = WFmt,
          class Act = float>
void layer_norm(const llmc_host_step_info* step, const Act* x, const void* weight,
                const void* bias, Act* out, double eps) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(WFmt::is_plain && BFmt::is_plain, "norm weights must be f32, f16 or bf16");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const float feps = static_cast<float>(eps);
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      layer_norm_row<Hidden, HasBias, WFmt, BFmt>(x + t * Hidden, weight, bias, feps,
                                                  out + t * Hidden);
  };
  parallel_for(step, T, detail::token_grain(Hidden), body);
}

// y[t, n] = sum_k w[n, k] x[t, k] (+ bias[n]) for a [N, K] weight in Fmt and
// x [T, K], y [T, N]. Parallel over N. T == 1 streams each weight row once
// (GEMV); T > 1 decodes each weight group once per 8 tokens. BiasFmt: f32,
// f16 or bf16. y must not alias x.
template <class Fmt, int64_t N, int64_t K, bool HasBias, class BiasFmt = fmt::f32,
          class Act = float, bool Q8 = false>
void linear(const llmc_host_step_info* step, const Act* x, const void* w, const void* bias, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(N > 0 && K > 0, "empty linear");
  static_assert(K % Fmt::block_elems == 0, "K must be a whole number of blocks");
  static_assert(BiasFmt::is_plain, "bias must be f32, f16 or bf16");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  auto xrow = [x](int64_t t) { return x + t * K; };
  auto store = [y, bias](int64_t t, int64_t n, float v) {
    (void)bias;
    if constexpr (HasBias) v += detail::load_plain<BiasFmt>(bias, n);
    y[t * N + n] = v;
  };
  if constexpr (Q8) {
    static_assert(detail::takes_q8<Fmt>::value, "this format has no q8-activation path");
    const block_q8* xq = detail::quantize_rows_q8<K>(step, T, xrow);
    auto qrow = [xq](int64_t t) { return xq + t * (K / 32); };
    parallel_for(step, N, detail::rows_grain(N, K, T), [&](int64_t n0, int64_t n1) {
      detail::gemm_q8<Fmt>(wb, K, n0, n1, T, qrow, store);
    });
  } else {
    parallel_for(step, N, detail::rows_grain(N, K, T), [&](int64_t n0, int64_t n1) {
      detail::gemm<Fmt>(wb, K, n0, n1, T, xrow, store);
    });
  }
}

// logits[i, v] = sum_k w[v, k] x[logits_rows[i], k] for i < num_logits, with a
// [Vocab, Hidden] weight in Fmt. A row index outside [0, T) gives zeros.
template <class Fmt, int64_t Vocab, int64_t Hidden, class Act = float, bool Q8 = false>
void lm_head(const llmc_host_step_info* step, const Act* x, const void* w, float* logits) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(Hidden % Fmt::block_elems == 0, "Hidden must be a whole number of blocks");
  const int64_t M = step->num_logits;
  const int64_t T = step->num_tokens;
  if (M <= 0) return;
  const int32_t* rows = step->logits_rows;
  if (T <= 0 || rows == nullptr) {
    std::fill(logits, logits + M * Vocab, 0.0f);
    return;
  }
  auto valid = [rows, T](int64_t i) { return rows[i] >= 0 && rows[i] < T; };
  auto xrow = [x, valid, rows](int64_t i) {
    return x + (valid(i) ? static_cast<int64_t>(rows[i]) : 0) * Hidden;
  };
  auto store = [logits, valid](int64_t i, int64_t n, float v) {
    logits[i * Vocab + n] = valid(i) ? v : 0.0f;
  };
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  if constexpr (Q8) {
    static_assert(detail::takes_q8<Fmt>::value, "this format has no q8-activation path");
    const block_q8* xq = detail::quantize_rows_q8<Hidden>(step, M, xrow);
    auto qrow = [xq](int64_t i) { return xq + i * (Hidden / 32); };
    parallel_for(step, Vocab, detail::rows_grain(Vocab, Hidden, M), [&](int64_t n0, int64_t n1) {
      detail::gemm_q8<Fmt>(wb, Hidden, n0, n1, M, qrow, store);
    });
  } else {
    parallel_for(step, Vocab, detail::rows_grain(Vocab, Hidden, M), [&](int64_t n0, int64_t n1) {
      detail::gemm<Fmt>(wb, Hidden, n0, n1, M, xrow, store);
    });
  }
}

// Rotary embedding of x [T, Heads*HeadDim] into out (out == x allowed) at
// step->positions. Pair i rotates by positions[t] * inv_freq[i], inv_freq[i] =
// theta^(-2i/HeadDim), scaled by `scaling` (HF semantics) and divided by
// freq_factors[i] when given (llama.cpp semantics; HeadDim/2 f32 values).
// Frequencies, angles, cos and sin are computed in double and rounded once to
// float: the result is within a few float ulps of exact, at any position.
namespace detail {

// cos/sin of one position for the HeadDim/2 pairs, laid out for Style: half
// keeps one value per pair; interleaved repeats it for both lanes of the pair
// with s = (-sin, sin) so that a pair rotates with one swap and one FMA.
template <int64_t HeadDim, rope_style Style>
LLMC_HOST_INLINE void rope_cos_sin(double pos, const double* inv, float* c, float* s) {
  constexpr int64_t P = HeadDim / 2;
  for (int64_t i = 0; i < P; ++i) {
    const double a = pos * inv[i];
    const float ci = static_cast<float>(std::cos(a)), si = static_cast<float>(std::sin(a));
    if constexpr (Style == rope_style::half) {
      c[i] = ci;
      s[i] = si;
    } else {
      c[2 * i] = c[2 * i + 1] = ci;
      s[2 * i] = -si;
      s[2 * i + 1] = si;
    }
  }
}

// Rotates `heads` consecutive heads of one token from xi into o (o == xi allowed).
template <int64_t HeadDim, rope_style Style>
LLMC_HOST_INLINE void rope_heads(const float* xi, float* o, int64_t heads, const float* c,
                                 const float* s) {
  constexpr int64_t P = HeadDim / 2;
  for (int64_t h = 0; h < heads; ++h, xi += HeadDim, o += HeadDim) {
    int64_t i = 0;
    if constexpr (Style == rope_style::half) {
      for (; i + 8 <= P; i += 8) {
        const vf x0 = vload(xi + i), x1 = vload(xi + P + i);
        const vf cv = vload(c + i), sv = vload(s + i);
        vstore(o + i, vsub(vmul(x0, cv), vmul(x1, sv)));
        vstore(o + P + i, vfma(x0, sv, vmul(x1, cv)));
      }
      for (; i < P; ++i) {
        const float x0 = xi[i], x1 = xi[P + i];
        o[i] = x0 * c[i] - x1 * s[i];
        o[P + i] = x1 * c[i] + x0 * s[i];
      }
    } else {
      for (; i + 8 <= HeadDim; i += 8) {
        const vf xv = vload(xi + i);
        vstore(o + i, vfma(vswap_pairs(xv), vload(s + i), vmul(xv, vload(c + i))));
      }
      for (; i < HeadDim; i += 2) {
        const float x0 = xi[i], x1 = xi[i + 1];
        o[i] = x0 * c[i] + x1 * s[i];  // s[i] = -sin
        o[i + 1] = x1 * c[i + 1] + x0 * s[i + 1];
      }
    }
  }
}

}  // namespace detail

template <int64_t Heads, int64_t HeadDim, rope_style Style, class Act = float>
void rope(const llmc_host_step_info* step, const Act* x, Act* out, double theta,
          const rope_scaling& scaling = {}, const float* freq_factors = nullptr) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(HeadDim % 2 == 0, "RoPE needs an even head_dim");
  constexpr int64_t P = HeadDim / 2, W = Heads * HeadDim;
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  double inv[P];
  detail::rope_inv_freq(P, HeadDim, theta, scaling, freq_factors, inv);
  const int32_t* positions = step->positions;
  auto body = [&](int64_t t0, int64_t t1) {
    alignas(32) float c[HeadDim], s[HeadDim];
    for (int64_t t = t0; t < t1; ++t) {
      detail::rope_cos_sin<HeadDim, Style>(static_cast<double>(positions[t]), inv, c, s);
      detail::rope_heads<HeadDim, Style>(x + t * W, out + t * W, Heads, c, s);
    }
  };
  parallel_for(step, T, std::max<int64_t>(4, detail::token_grain(W)), body);
}

// Causal attention over the paged KV cache (one layer). q [T, Heads*HeadDim],
// k and v [T, KvHeads*HeadDim], out [T, Heads*HeadDim]; kcache and vcache
// [num_blocks, block_size, KvHeads, HeadDim]. First writes each new token's
// k/v row at slot_mapping[t] (negative slots are skipped), then token t of
// sequence s attends to the cache positions 0 .. positions[t] (clamped to
// context_lens[s] - 1), or the last `window` of them when window > 0, through
// block_tables[s, pos / block_size]. Online softmax in f32; `scale` multiplies
// q.k. A token outside every sequence, or with no visible key, gets zeros.
//
// Work items are (token, kv head) with all Heads/KvHeads query heads that
// share it, so each K/V row is read once per step. With fewer than 32 items
// (small decode batches) each item's keys are split into ranges of at least
// 128 keys that run in parallel, and the partial softmax states are merged.
template <int64_t Heads, int64_t KvHeads, int64_t HeadDim, class Act = float>
void paged_attention(const llmc_host_step_info* step, const Act* q, const Act* k, const Act* v,
                     Act* kcache, Act* vcache, Act* out, float scale, int64_t window = 0) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(Heads > 0 && KvHeads > 0 && Heads % KvHeads == 0,
                "heads must be a multiple of kv_heads");
  constexpr int64_t G = Heads / KvHeads, D = HeadDim, QW = Heads * D, KVW = KvHeads * D;
  constexpr int GH = static_cast<int>(G);
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const int32_t* slots = step->slot_mapping;
  parallel_for(step, T, detail::token_grain(2 * KVW), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t slot = slots[t];
      if (slot < 0) continue;
      std::memcpy(kcache + slot * KVW, k + t * KVW, sizeof(float) * KVW);
      std::memcpy(vcache + slot * KVW, v + t * KVW, sizeof(float) * KVW);
    }
  });

  const int64_t items = T * KvHeads;
  int64_t splits = 1;
  if (items < detail::kAttnMinItems) {
    int64_t longest = 0, s, b, e;
    for (int64_t t = 0; t < T; ++t)
      if (detail::attn_range(step, t, window, &s, &b, &e)) longest = std::max(longest, e - b + 1);
    splits = std::min((detail::kAttnMinItems + items - 1) / items,
                      longest / detail::kAttnMinKeysPerSplit);
    splits = std::max<int64_t>(splits, 1);
  }

  if (splits == 1) {
    parallel_for(step, items, 1, [&](int64_t b, int64_t e) {
      alignas(32) float acc[G * D];
      float m[G], l[G];
      for (int64_t it = b; it < e; ++it) {
        const int64_t t = it / KvHeads, kvh = it % KvHeads;
        float* o = out + t * QW + kvh * G * D;
        int64_t s, start, end;
        if (!detail::attn_range(step, t, window, &s, &start, &end)) {
          std::fill(o, o + G * D, 0.0f);
          continue;
        }
        detail::attend_range<Heads, KvHeads, D, GH>(step, s, t, kvh, kvh * G, q, kcache, vcache,
                                                    scale, start, end, m, l, acc);
        for (int64_t g = 0; g < G; ++g) {
          const float inv = 1.0f / l[g];
          for (int64_t d = 0; d < D; ++d) o[g * D + d] = acc[g * D + d] * inv;
        }
      }
    });
    return;
  }

  // Split path: partial (m, l, acc) per (item, split), then a merge per item.
  constexpr int64_t PW = G * (D + 2);  // one partial: m[G], l[G], acc[G*D]
  float* part = detail::attn_scratch(static_cast<size_t>(items * splits * PW));
  parallel_for(step, items * splits, 1, [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t item = it / splits, sp = it % splits;
      const int64_t t = item / KvHeads, kvh = item % KvHeads;
      float* pm = part + it * PW;
      float* pl = pm + G;
      int64_t s, start, end;
      if (!detail::attn_range(step, t, window, &s, &start, &end)) {
        for (int64_t g = 0; g < G; ++g) pl[g] = 0.0f;
        continue;
      }
      const int64_t chunk = (end - start + splits) / splits;  // ceil(len / splits)
      const int64_t lo = start + sp * chunk, hi = std::min(end, lo + chunk - 1);
      if (lo > hi) {
        for (int64_t g = 0; g < G; ++g) pl[g] = 0.0f;
        continue;
      }
      detail::attend_range<Heads, KvHeads, D, GH>(step, s, t, kvh, kvh * G, q, kcache, vcache,
                                                  scale, lo, hi, pm, pl, pl + G);
    }
  });
  parallel_for(step, items, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / KvHeads, kvh = item % KvHeads;
      for (int64_t g = 0; g < G; ++g) {
        float* o = out + t * QW + (kvh * G + g) * D;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* pm = part + (item * splits + sp) * PW;
          if (pm[G + g] > 0.0f) mx = std::max(mx, pm[g]);
        }
        std::fill(o, o + D, 0.0f);
        if (mx == -std::numeric_limits<float>::infinity()) continue;  // no visible key
        float den = 0.0f;
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float* pm = part + (item * splits + sp) * PW;
          if (!(pm[G + g] > 0.0f)) continue;
          const float w = std::exp(pm[g] - mx);
          den += w * pm[G + g];
          const float* pa = pm + 2 * G + g * D;
          for (int64_t d = 0; d < D; ++d) o[d] += w * pa[d];
        }
        const float inv = 1.0f / den;
        for (int64_t d = 0; d < D; ++d) o[d] *= inv;
      }
    }
  });
}

// Elementwise kernels on [T, N]; out may alias an input.
template <int64_t N, class Act = float>
void silu(const llmc_host_step_info* step, const Act* x, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) { detail::vstore(y + i, detail::silu8(detail::vload(x + i))); },
      [&](int64_t i) { y[i] = detail::silu1(x[i]); });
}

template <int64_t N, gelu_approx Approx, class Act = float>
void gelu(const llmc_host_step_info* step, const Act* x, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  if constexpr (Approx == gelu_approx::tanh) {
    detail::map_elems(
        step, step->num_tokens * N,
        [&](int64_t i) { detail::vstore(y + i, detail::gelu_tanh8(detail::vload(x + i))); },
        [&](int64_t i) { y[i] = detail::gelu_tanh1(x[i]); });
  } else {
    // Not vectorized (erfc); see README.
    auto one = [&](int64_t i) { y[i] = detail::gelu_erf1(x[i]); };
    detail::map_elems(
        step, step->num_tokens * N,
        [&](int64_t i) {
          for (int j = 0; j < 8; ++j) one(i + j);
        },
        one);
  }
}

template <int64_t N, class Act = float>
void mul(const llmc_host_step_info* step, const Act* a, const Act* b, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) { detail::vstore(y + i, detail::vmul(detail::vload(a + i), detail::vload(b + i))); },
      [&](int64_t i) { y[i] = a[i] * b[i]; });
}

template <int64_t N, class Act = float>
void add(const llmc_host_step_info* step, const Act* a, const Act* b, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) { detail::vstore(y + i, detail::vadd(detail::vload(a + i), detail::vload(b + i))); },
      [&](int64_t i) { y[i] = a[i] + b[i]; });
}

// y = silu(gate) * up (the SwiGLU of Llama MLPs, for a fused epilogue).
template <int64_t N, class Act = float>
void silu_mul(const llmc_host_step_info* step, const Act* gate, const Act* up, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) {
        detail::vstore(y + i, detail::vmul(detail::silu8(detail::vload(gate + i)),
                                           detail::vload(up + i)));
      },
      [&](int64_t i) { y[i] = detail::silu1(gate[i]) * up[i]; });
}

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//
//
// A fusion group's generated kernel composes these: prologue rows (an
// elementwise expression and/or a norm, once per token), a GEMM over the
// regions of a merged weight, and an epilogue on each output tile (RoPE, then
// an elementwise expression written by the shared expression emitter).

// Elementwise math for generated expressions. The same statement text runs
// on 8 lanes (vf) and on single lanes (float) through overloading, and the
// CUDA target provides the same names; see compiler/Target/Common/ExprEmitter.
namespace detail {
LLMC_HOST_INLINE vf operator+(vf a, vf b) { return vadd(a, b); }
LLMC_HOST_INLINE vf operator-(vf a, vf b) { return vsub(a, b); }
LLMC_HOST_INLINE vf operator*(vf a, vf b) { return vmul(a, b); }
}  // namespace detail

namespace expr {
LLMC_HOST_INLINE float silu(float x) { return detail::silu1(x); }
LLMC_HOST_INLINE detail::vf silu(detail::vf x) { return detail::silu8(x); }
LLMC_HOST_INLINE float gelu_tanh(float x) { return detail::gelu_tanh1(x); }
LLMC_HOST_INLINE detail::vf gelu_tanh(detail::vf x) { return detail::gelu_tanh8(x); }
LLMC_HOST_INLINE float gelu_erf(float x) { return detail::gelu_erf1(x); }
LLMC_HOST_INLINE detail::vf gelu_erf(detail::vf x) {  // erfc has no vector form here
  alignas(32) float v[8];
  detail::vstore(v, x);
  for (float& e : v) e = detail::gelu_erf1(e);
  return detail::vload(v);
}
}  // namespace expr

// Lane tags: how generated bodies load and store V::n consecutive floats.
struct lanes8 {
  static LLMC_HOST_INLINE detail::vf load(const float* p) { return detail::vload(p); }
  static LLMC_HOST_INLINE void store(float* p, detail::vf v) { detail::vstore(p, v); }
};
struct lanes1 {
  static LLMC_HOST_INLINE float load(const float* p) { return *p; }
  static LLMC_HOST_INLINE void store(float* p, float v) { *p = v; }
};

// body(lanes, t, j) for rows [t0, t1) and columns [j0, j1): 8 columns at a
// time, then single columns.
template <class Body>
LLMC_HOST_INLINE void for_each_lane(int64_t t0, int64_t t1, int64_t j0, int64_t j1,
                                    const Body& body) {
  for (int64_t t = t0; t < t1; ++t) {
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) body(lanes8{}, t, j);
    for (; j < j1; ++j) body(lanes1{}, t, j);
  }
}


// Computes each token's prologue row row(t, out) into scratch [T, K] and
// returns it; the rows are ready when this returns.
template <int64_t K, class RowFn>
inline const float* prologue_rows(const llmc_host_step_info* step, const RowFn& row) {
  float* x = detail::scratch<detail::prologue_tag>(
      static_cast<size_t>(std::max<int64_t>(step->num_tokens, 1) * K));
  detail::for_tokens(step, K, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) row(t, x + t * K);
  });
  return x;
}

// cos/sin of every token of the step for one RoPE configuration, computed
// once per kernel and shared by the tiles that rotate heads.
template <int64_t HeadDim, rope_style Style>
struct rope_table {
  // [T][2][HeadDim]: cos row then sin row. Owned, so that the tables of one
  // kernel (Q and K may differ) never share or move each other's storage.
  std::vector<float> storage;
  float* cs = nullptr;

  // `slot` numbers the tables of one kernel (kept for the generated calls).
  void build(const llmc_host_step_info* step, int slot, double theta, const rope_scaling& sc,
             const float* freq_factors) {
    (void)slot;
    constexpr int64_t P = HeadDim / 2;
    const int64_t T = step->num_tokens;
    double inv[P];
    detail::rope_inv_freq(P, HeadDim, theta, sc, freq_factors, inv);
    storage.resize(static_cast<size_t>(std::max<int64_t>(T, 1)) * 2 * HeadDim);
    cs = storage.data();
    const int32_t* positions = step->positions;
    float* table = cs;
    detail::for_tokens(step, 64 * HeadDim, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        detail::rope_cos_sin<HeadDim, Style>(static_cast<double>(positions[t]), inv,
                                             table + t * 2 * HeadDim,
                                             table + t * 2 * HeadDim + HeadDim);
    });
  }

  // Rotates, in place, the heads in columns [j0, j1) (multiples of HeadDim)
  // of a tile holding tokens [t0, t1) with leading dimension ld.
  void apply(float* tile, int64_t ld, int64_t t0, int64_t t1, int64_t j0, int64_t j1) const {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = cs + t * 2 * HeadDim;
      float* row = tile + (t - t0) * ld;
      detail::rope_heads<HeadDim, Style>(row, row, (j1 - j0) / HeadDim, c, c + HeadDim);
    }
  }
};

// Where one projection's rows live in a merged weight, and the column
// granularity its epilogue needs (a RoPE head, or 8 lanes).
struct gemm_region {
  int64_t offset;
  int64_t width;
  int64_t align;
};

inline constexpr int64_t kFusedTokenBlock = 64;  // tokens per tile

// The GEMM of a fused group: x [T, K] times a merged weight [sum widths, K]
// in Fmt (+ an optional bias in BiasFmt over the merged rows), handed to
// epi(region, t0, t1, j0, j1, tiles, ld) tile by tile. Each tile holds tokens
// [t0, t1) and region-local columns [j0, j1); tiles[r] points at region r's
// values (leading dimension ld) and epi may overwrite them.
//
// Paired: every region has the same width and each tile holds the same
// columns of all of them (an epilogue that combines gate and up, region = -1).
// Otherwise each tile belongs to one region (Q, K, V with RoPE on two).
template <class Fmt, int64_t K, int64_t R, bool Paired, class BiasFmt, bool Q8, class XRow,
          class Epi>
void fused_gemm(const llmc_host_step_info* step, const XRow& xrow, const void* weight,
                const void* bias, const gemm_region (&regions)[R], const Epi& epi) {
  static_assert(K % Fmt::block_elems == 0, "K must be a whole number of blocks");
  static_assert(!Q8 || detail::takes_q8<Fmt>::value, "this format has no q8-activation path");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const block_q8* xq = nullptr;
  if constexpr (Q8) xq = detail::quantize_rows_q8<K>(step, T, xrow);
  (void)xq;
  int64_t total = 0, align = 8;
  for (const gemm_region& g : regions) {
    total += g.width;
    align = std::max(align, g.align);
  }
  struct item {
    int64_t region, j0, j1;
  };
  std::vector<item> items;
  const int64_t grain = detail::rows_grain(total, K, T);
  auto chunk_of = [&](int64_t a, int64_t w) {
    const int64_t c = (grain + a - 1) / a * a;
    return std::min(std::max(c, a), w);
  };
  if constexpr (Paired) {
    const int64_t w = regions[0].width;
    const int64_t c = chunk_of(align, w);
    for (int64_t j = 0; j < w; j += c) items.push_back({-1, j, std::min(w, j + c)});
  } else {
    for (int64_t r = 0; r < R; ++r) {
      const int64_t c = chunk_of(regions[r].align, regions[r].width);
      for (int64_t j = 0; j < regions[r].width; j += c)
        items.push_back({r, j, std::min(regions[r].width, j + c)});
    }
  }
  const uint8_t* wb = static_cast<const uint8_t*>(weight);
  const int64_t tb = std::min<int64_t>(T, kFusedTokenBlock);
  auto run = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const item it = items[static_cast<size_t>(i)];
      const int64_t ld = it.j1 - it.j0;
      float* base = detail::scratch<detail::tile_tag>(static_cast<size_t>(R * tb * ld));
      float* tiles[R];
      for (int64_t r = 0; r < R; ++r) tiles[r] = base + r * tb * ld;
      for (int64_t t0 = 0; t0 < T; t0 += tb) {
        const int64_t t1 = std::min(T, t0 + tb);
        auto one = [&](int64_t r) {
          float* tile = tiles[r];
          const int64_t n0 = regions[r].offset + it.j0;
          auto store = [&](int64_t m, int64_t n, float v) {
            if constexpr (!std::is_void_v<BiasFmt>) v += detail::load_plain<BiasFmt>(bias, n);
            tile[m * ld + (n - n0)] = v;
          };
          if constexpr (Q8) {
            auto xr = [&](int64_t m) { return xq + (t0 + m) * (K / 32); };
            detail::gemm_q8<Fmt>(wb, K, n0, n0 + ld, t1 - t0, xr, store);
          } else {
            auto xr = [&](int64_t m) { return xrow(t0 + m); };
            detail::gemm<Fmt>(wb, K, n0, n0 + ld, t1 - t0, xr, store);
          }
        };
        if (it.region < 0)
          for (int64_t r = 0; r < R; ++r) one(r);
        else
          one(it.region);
        epi(it.region, t0, t1, it.j0, it.j1, static_cast<float* const*>(tiles), ld);
      }
    }
  };
  parallel_for(step, static_cast<int64_t>(items.size()), 1, run);
}

// An elementwise group without a GEMM: body(lanes, t, j) over [T, W].
template <int64_t W, class Body>
void fused_elementwise(const llmc_host_step_info* step, const Body& body) {
  detail::for_tokens(step, W, [&](int64_t t0, int64_t t1) { for_each_lane(t0, t1, 0, W, body); });
}

}  // namespace host

// Generated expressions name their functions llmc::expr::* on every target.
namespace expr = host::expr;

}  // namespace llmc

#endif  // LLMC_HOST_KERNELS_H_
