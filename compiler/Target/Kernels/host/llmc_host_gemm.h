// llmc host kernel library: gemm.
//
// Row decoding, dot products and the tiled f32 GEMM over any weight
// format; plain-format element loads; the formats' dot/dequant_row.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_GEMM_H_
#define LLMC_HOST_GEMM_H_

#include "llmc_host_formats.h"

namespace llmc {
namespace host {
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

// Independent FMA chains per (activation row, weight row): vector i of each
// 32-element group goes to chain i % kDotChains. Two cover the FMA latency
// of decode's GEMV while keeping its weight reads sequential, and leave
// room in the 16 vector registers for tiles of four activation rows.
inline constexpr int kDotChains = 2;

// out[r] = sum_k w[k] * xs[r][k] for R activation rows against one weight row:
// each 32-element group is decoded once into registers and multiplied with
// all R rows (R = 1 is the streaming GEMV of decode).
//
// The same chains, summed the same way, whatever R: a token's result must
// not depend on how many tokens share its tile, or the same request would
// get other numbers batched than alone (the serving engine's batch
// invariance, test/e2e/engine_batch_invariance_test.py).
template <class Fmt, int R>
LLMC_HOST_INLINE void dot_rows(const uint8_t* row, int64_t k, const float* const* xs, float* out) {
  constexpr int C = kDotChains;
  vf acc[R][C];
  LLMC_HOST_UNROLL
  for (int r = 0; r < R; ++r)
    LLMC_HOST_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = vzero();
  const int64_t spans = k / Fmt::span_elems;
  for (int64_t b = 0; b < spans; ++b) {
    const int64_t base = b * Fmt::span_elems;
    auto body = [&](int off, const vf* w) LLMC_HOST_LAMBDA_INLINE {
      LLMC_HOST_UNROLL
      for (int r = 0; r < R; ++r) {
        const float* xp = xs[r] + base + off;
        LLMC_HOST_UNROLL
        for (int i = 0; i < 4; ++i) acc[r][i % C] = vfma(w[i], vload(xp + 8 * i), acc[r][i % C]);
      }
    };
    decode_span<Fmt>(row + b * Fmt::span_bytes, body);
  }
  LLMC_HOST_UNROLL
  for (int r = 0; r < R; ++r) {
    vf s = acc[r][0];
    LLMC_HOST_UNROLL
    for (int c = 1; c < C; ++c) s = vadd(s, acc[r][c]);
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
// ~16 KiB (stay in L1/L2) times groups of 4 (then 2, 1) activation rows, so
// each decoded weight group is reused from registers by up to 4 tokens.
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
    for (; m + 4 <= M; m += 4) gemm_tile<Fmt, 4>(w, rb, k, nt, ne, m, xrow, store);
    if (M - m >= 2) {
      gemm_tile<Fmt, 2>(w, rb, k, nt, ne, m, xrow, store);
      m += 2;
    }
    if (M - m >= 1) gemm_tile<Fmt, 1>(w, rb, k, nt, ne, m, xrow, store);
  }
}

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

}  // namespace detail
}  // namespace host
}  // namespace llmc

namespace llmc {
namespace host {

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

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_GEMM_H_
