// llmc host kernel library: norms.
//
// Per-token kernels: the embedding lookup, RMS norm and layer norm (and
// the one-row forms that fused prologues call).
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_NORMS_H_
#define LLMC_HOST_NORMS_H_

#include "llmc_host_gemm.h"
#include "llmc_host_parallel.h"

namespace llmc {
namespace host {
namespace detail {

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

}  // namespace detail
}  // namespace host
}  // namespace llmc

namespace llmc {
namespace host {

// out[t, :] = table[tokens[t], :] * scale for a [Vocab, Hidden] table in
// format Fmt (Gemma scales by sqrt(Hidden)). An id outside [0, Vocab) gives a
// row of zeros (the table is never read out of bounds).
template <class Fmt, int64_t Vocab, int64_t Hidden, class Act = float>
void embed(const llmc_host_step_info* step, const void* table, Act* out, float scale = 1.0f) {
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
      if (scale != 1.0f)
        for (int64_t i = 0; i < Hidden; ++i) o[i] *= scale;
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

// Each head of each row normalized on its own (Qwen3's norm of Q and K):
// x, out [T, Heads * HeadDim], one weight of HeadDim for every head, the
// mean in f32 as HF's. In place (out == x) allowed.
template <int64_t Heads, int64_t HeadDim, class WFmt = fmt::f32, class Act = float>
void rms_norm_heads(const llmc_host_step_info* step, const Act* x, const void* weight, Act* out,
                    double eps) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(WFmt::is_plain, "norm weights must be f32, f16 or bf16");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const float feps = static_cast<float>(eps);
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < Heads; ++h) {
        const int64_t at = (t * Heads + h) * HeadDim;
        rms_norm_row<HeadDim, WFmt>(x + at, weight, feps, out + at);
      }
  };
  parallel_for(step, T, detail::token_grain(Heads * HeadDim), body);
}

// out = x / sqrt(mean(x^2) + eps) * weight per token (mean in f32, as HF:
// out = w * (x * r)). WFmt: f32, f16 or bf16. In place (out == x) allowed.
template <int64_t Hidden, class WFmt = fmt::f32, class Act = float>
void rms_norm(const llmc_host_step_info* step, const Act* x, const void* weight, Act* out,
              double eps) {
  rms_norm_heads<1, Hidden, WFmt, Act>(step, x, weight, out, eps);
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

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_NORMS_H_
