// llmc host kernel library: q8.
//
// q8 activations: activation rows rounded to int8 blocks and integer dot
// products against the 32-element block formats (llama.cpp's CPU path).
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_Q8_H_
#define LLMC_HOST_Q8_H_

#include "llmc_host_gemm.h"
#include "llmc_host_parallel.h"

namespace llmc {
namespace host {

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
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) { return gguf::q8_0_quant(b, i); }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = false;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) { return load256(b + 2); }
#endif
};

template <>
struct q8_weight<fmt::q4_0> : q8_scales<false> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) { return gguf::q4_0_quant(b, i); }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = false;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) {
    return _mm256_sub_epi8(nibbles32(b + 2), _mm256_set1_epi8(8));
  }
#endif
};

template <>
struct q8_weight<fmt::q4_1> : q8_scales<true> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) { return gguf::q4_1_quant(b, i); }
#if LLMC_HOST_SIMD
  static constexpr bool is_unsigned = true;
  static LLMC_HOST_INLINE __m256i quants(const uint8_t* b) { return nibbles32(b + 4); }
#endif
};

template <>
struct q8_weight<fmt::q5_0> : q8_scales<false> {
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) { return gguf::q5_0_quant(b, i); }
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
  static LLMC_HOST_INLINE int quant(const uint8_t* b, int i) { return gguf::q5_1_quant(b, i); }
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

#if LLMC_HOST_SIMD
// Sums of 4 adjacent products of unsigned a and signed b, per int32 lane:
// one VNNI instruction where the target has it (-march=native on Zen 4,
// Sapphire Rapids), else AVX2's maddubs (pairs into int16, which cannot
// saturate here: |a| <= 127 and |b| <= 127 give pairs of at most 32258)
// and madd. The same integers either way.
LLMC_HOST_INLINE __m256i dot_u8s8(__m256i a, __m256i b, __m256i ones16) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  (void)ones16;
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b);
#elif defined(__AVXVNNI__)
  (void)ones16;
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones16);
#endif
}
#endif

// out[r] = sum over the row of w * x_r for R quantized activation rows.
template <class Fmt, int R>
LLMC_HOST_INLINE void dot_rows_q8(const uint8_t* row, int64_t k, const block_q8* const* xs,
                                  float* out) {
  using W = q8_weight<Fmt>;
  const int64_t nb = k / 32;
#if LLMC_HOST_SIMD
  // Two accumulators per row, even blocks into one and odd into the other,
  // whatever the tile height R: a token's result must not depend on how
  // many tokens share its tile, since the next layer's q8 rounding turns a
  // different float order into different tokens (batched decode must match
  // decoding alone; `llmc bench --verify-seqs`). Two halve the chain of
  // dependent FMAs (4 cycles each), which bounds a decode GEMV's row rate on
  // one core.
  // The min terms (q4_1, q5_1) are one scalar chain a row, block after
  // block: two would cost registers an R = 4 tile does not have on AVX2.
  __m256 acc0[R], acc1[R];
  float off[R] = {};
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  // One block into one of the accumulators (named arrays, not an index that
  // changes with b, so that they stay in registers).
  auto block = [&](int64_t b, __m256 (&acc)[R]) LLMC_HOST_LAMBDA_INLINE {
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
      const __m256i p = detail::dot_u8s8(aw, qx, ones);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * xb->d), acc[r]);
      if constexpr (W::has_min) off[r] += W::min(wb) * xb->s;
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    block(b, acc0);
    block(b + 1, acc1);
  }
  if (b < nb) block(b, acc0);
  for (int r = 0; r < R; ++r) out[r] = vhsum(vf{_mm256_add_ps(acc0[r], acc1[r])}) + off[r];
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

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_Q8_H_
