// llmc host kernel library: formats.
//
// Weight formats: one tag type per packed layout (GGUF blocks as ggml,
// the i8/i4 group formats of --quantize), each decoding a span on the fly.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_FORMATS_H_
#define LLMC_HOST_FORMATS_H_

#include "llmc_host_simd.h"

namespace llmc {
namespace host {

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
// decode_scalar(bytes, float* out) writes the whole span (the portable path:
// for the GGUF blocks, block_decode.h's decoders, the same operations as
// ggml's reference and as core's dequantizers).
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
    gguf::decode_q8_0(x, y);
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
    gguf::decode_q4_0(x, y);
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
    gguf::decode_q4_1(x, y);
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
    gguf::decode_q5_0(x, y);
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
    gguf::decode_q5_1(x, y);
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
    gguf::decode_q2_k(x, y);
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
    gguf::decode_q3_k(x, y);
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const uint8_t* scales = x + 96;
    const float d = detail::load_half(x + 108);
    float dl[16];
    for (int j = 0; j < 16; ++j) dl[j] = d * static_cast<float>(gguf::q3_k_scale(scales, j));
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

// q4_k (HasHigh false) and q5_k (true), gguf::decode_k4's layouts: f16 d,
// f16 dmin, 12 bytes of 6-bit scales and mins, q5_k's 32 qh bytes, 128 quant
// bytes. Chunk c (64 elements): low nibbles of its 32 quant bytes are
// sub-block 2c, high nibbles sub-block 2c+1; q5_k's fifth bit of element l of
// sub-block s is bit s of qh[l]. y = (d*scale) * q - dmin*min.
template <class Self, int64_t BlockBytes, bool HasHigh>
struct k4_base : format_base<Self, 256, BlockBytes, false> {
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    gguf::decode_k4<HasHigh>(x, y);
  }
#if LLMC_HOST_SIMD
  template <class F>
  static LLMC_HOST_INLINE void decode_simd(const uint8_t* x, F& f) {
    const float d = detail::load_half(x);
    const float dmin = detail::load_half(x + 2);
    const uint8_t* scales = x + 4;
    const __m256i m4 = _mm256_set1_epi8(0x0F), sixteen = _mm256_set1_epi8(16);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (HasHigh) qh = detail::load256(x + 16);
    LLMC_HOST_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i qv = detail::load256(x + (HasHigh ? 48 : 16) + 32 * c);
      LLMC_HOST_UNROLL
      for (int sub = 0; sub < 2; ++sub) {
        const int s = 2 * c + sub;
        int sc, m;
        gguf::scale_min_k4(scales, s, &sc, &m);
        __m256i q = _mm256_and_si256(sub ? _mm256_srli_epi16(qv, 4) : qv, m4);
        if constexpr (HasHigh) {
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1u << s));
          q = _mm256_or_si256(
              q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), sixteen));
        }
        __m256 t[4];
        detail::i8x32_to_ps(q, t);
        const __m256 dd = _mm256_set1_ps(d * static_cast<float>(sc));
        const __m256 mm = _mm256_set1_ps(dmin * static_cast<float>(m));
        const detail::vf w[4] = {{_mm256_fmsub_ps(t[0], dd, mm)}, {_mm256_fmsub_ps(t[1], dd, mm)},
                                 {_mm256_fmsub_ps(t[2], dd, mm)}, {_mm256_fmsub_ps(t[3], dd, mm)}};
        f(64 * c + 32 * sub, w);
      }
    }
  }
#endif
};

struct q4_k : k4_base<q4_k, 144, false> {
  static constexpr const char* name = "q4_k";
};
struct q5_k : k4_base<q5_k, 176, true> {
  static constexpr const char* name = "q5_k";
};

// q6_k: 128 ql bytes (low 4 bits), 64 qh bytes (high 2 bits), 16 int8
// scales, f16 d. Group k (0..3) of half h: elements 128h + 32k + l take the
// low (k < 2) or high (k >= 2) nibble of ql[64h + 32(k&1) + l] and the 2-bit
// field k of qh[32h + l]; values are stored plus 32; sub-block scale
// 8h + 2k + l/16; y = (d*scale) * q.
struct q6_k : format_base<q6_k, 256, 210, false> {
  static constexpr const char* name = "q6_k";
  static LLMC_HOST_INLINE void decode_scalar(const uint8_t* x, float* y) {
    gguf::decode_q6_k(x, y);
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

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_FORMATS_H_
