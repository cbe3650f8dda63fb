// llmc host kernel library: moe.
//
// A mixture of SwiGLU experts (llm.moe): route each token to its top-K
// experts, run each expert once over the tokens that chose it, and sum each
// token's K results weighted by its router probabilities.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_MOE_H_
#define LLMC_HOST_MOE_H_

#include "llmc_host_elementwise.h"
#include "llmc_host_gemm.h"
#include "llmc_host_parallel.h"
#include "llmc_host_q8.h"

namespace llmc {
namespace host {
namespace detail {

struct moe_route_tag {};
struct moe_hidden_tag {};
struct moe_out_tag {};

// The K largest of p[0, E), best first; the lower index first on ties (a
// stable order, so the route is a function of the token's logits alone).
template <int64_t E, int64_t K>
LLMC_HOST_INLINE void moe_top_k(const float* p, int32_t* chosen) {
  bool taken[E] = {};
  for (int64_t k = 0; k < K; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e)
      if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
    taken[best] = true;
    chosen[k] = static_cast<int32_t>(best);
  }
}

// Runs f(e, first, count, r0, r1) over the rows [r0, r1) of every expert
// some slot chose (count slots from by_expert[first]): `Rows` rows an
// expert, all experts' rows as one range split across the pool.
template <int64_t E, int64_t Rows, class F>
inline void for_expert_rows(const llmc_host_step_info* step, const int32_t* used, int64_t n_used,
                            const int32_t* first, int64_t k, int64_t avg_tokens, const F& f) {
  parallel_for(step, n_used * Rows, rows_grain(n_used * Rows, k, avg_tokens),
               [&](int64_t a, int64_t b) {
                 while (a < b) {
                   const int64_t j = a / Rows, r0 = a % Rows;
                   const int64_t r1 = std::min<int64_t>(Rows, r0 + (b - a));
                   const int32_t e = used[j];
                   f(e, first[e], first[e + 1] - first[e], r0, r1);
                   a += r1 - r0;
                 }
               });
}

}  // namespace detail

// y[t] = sum_k w[t, k] * down_e(silu(gate_e x[t]) * up_e x[t]), e = the
// token's k-th expert: router [E, H] (RFmt: f32, f16 or bf16) gives
// p = softmax(R x[t]) over the E experts; the top K by p are chosen and
// weighted by their p, renormalized to sum 1 when Norm. gate, up: [E * I, H]
// (expert e's rows from e * I), down [E * H, I]. Only the chosen experts'
// rows are read, each once per step; a token's result is the same whatever
// other tokens the step holds (each dot product is one row's, each token's
// sum taken in its own k order). Q8G/Q8U/Q8D: llama.cpp-style q8
// activations for that projection. y must not alias x.
template <class RFmt, class GFmt, class UFmt, class DFmt, int64_t E, int64_t K, int64_t H,
          int64_t I, bool Norm, bool Q8G = false, bool Q8U = false, bool Q8D = false,
          class Act = float>
void moe(const llmc_host_step_info* step, const Act* x, const void* router, const void* gate,
         const void* up, const void* down, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(K >= 1 && K <= E, "top_k must be in [1, experts]");
  static_assert(RFmt::is_plain, "the router must be f32, f16 or bf16");
  static_assert(H % GFmt::block_elems == 0 && H % UFmt::block_elems == 0 &&
                    I % DFmt::block_elems == 0,
                "expert rows must be whole blocks");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const int64_t S = T * K;  // slots, token-major: slot t * K + k

  // Scratch of the calling thread: logits [T, E]; per slot its expert and
  // weight; the slots grouped by expert; the experts some slot chose.
  float* route = detail::scratch<detail::moe_route_tag>(
      static_cast<size_t>(T * E + 3 * S + 2 * E + 1));
  float* logits = route;
  int32_t* expert_of = reinterpret_cast<int32_t*>(route + T * E);
  float* weight_of = route + T * E + S;
  int32_t* by_expert = reinterpret_cast<int32_t*>(route + T * E + 2 * S);
  int32_t* first = reinterpret_cast<int32_t*>(route + T * E + 3 * S);  // [E + 1]
  int32_t* used = first + (E + 1);                                      // [E]

  // 1. Route: logits in f32 as any GEMM row, softmax and top-K per token.
  const uint8_t* rb = static_cast<const uint8_t*>(router);
  detail::for_rows(step, T, E * H, [&](int64_t t0, int64_t t1) {
    detail::gemm<RFmt>(
        rb, H, 0, E, t1 - t0, [&](int64_t i) { return x + (t0 + i) * H; },
        [&](int64_t i, int64_t n, float v) { logits[(t0 + i) * E + n] = v; });
    for (int64_t t = t0; t < t1; ++t) {
      float* p = logits + t * E;
      float mx = p[0];
      for (int64_t e = 1; e < E; ++e) mx = std::max(mx, p[e]);
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(p[e] - mx));
      for (int64_t e = 0; e < E; ++e) p[e] /= sum;
      detail::moe_top_k<E, K>(p, expert_of + t * K);
      float kept = 0.0f;
      for (int64_t k = 0; k < K; ++k) kept += (weight_of[t * K + k] = p[expert_of[t * K + k]]);
      if constexpr (Norm)
        for (int64_t k = 0; k < K; ++k) weight_of[t * K + k] /= kept;
    }
  });

  // 2. Group the slots by expert (a counting sort, slot order kept).
  for (int64_t e = 0; e <= E; ++e) first[e] = 0;
  for (int64_t s = 0; s < S; ++s) ++first[expert_of[s] + 1];
  int64_t n_used = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (first[e + 1] > 0) used[n_used++] = static_cast<int32_t>(e);
    first[e + 1] += first[e];
  }
  int32_t cursor[E];
  for (int64_t e = 0; e < E; ++e) cursor[e] = first[e];
  for (int64_t s = 0; s < S; ++s) by_expert[cursor[expert_of[s]]++] = static_cast<int32_t>(s);
  const int64_t avg = (S + n_used - 1) / std::max<int64_t>(n_used, 1);

  // 3. gate and up of each chosen expert over its slots' tokens, then
  // silu(gate) * up in place: hidden [S, I].
  float* hidden = detail::scratch<detail::moe_hidden_tag>(static_cast<size_t>(2 * S * I));
  float* upped = hidden + S * I;
  auto token_row = [&](const int32_t* slots) {
    return [x, slots](int64_t m) { return x + (slots[m] / K) * H; };
  };
  const block_q8* xq = nullptr;
  if constexpr (Q8G || Q8U)
    xq = detail::quantize_rows_q8<H>(step, T, [x](int64_t t) { return x + t * H; });
  auto project = [&](auto fmt_tag, auto q8_tag, const void* w, const int32_t* slots, int64_t count,
                     int64_t e, int64_t r0, int64_t r1, float* out) {
    using Fmt = decltype(fmt_tag);
    const uint8_t* we = static_cast<const uint8_t*>(w) + e * I * Fmt::row_bytes(H);
    auto store = [out, slots](int64_t m, int64_t n, float v) { out[slots[m] * I + n] = v; };
    if constexpr (decltype(q8_tag)::value) {
      detail::gemm_q8<Fmt>(we, H, r0, r1, count,
                           [xq, slots](int64_t m) { return xq + (slots[m] / K) * (H / 32); },
                           store);
    } else {
      detail::gemm<Fmt>(we, H, r0, r1, count, token_row(slots), store);
    }
  };
  detail::for_expert_rows<E, I>(
      step, used, n_used, first, H, avg,
      [&](int32_t e, int64_t at, int64_t count, int64_t r0, int64_t r1) {
        const int32_t* slots = by_expert + at;
        project(GFmt{}, std::bool_constant<Q8G>{}, gate, slots, count, e, r0, r1, hidden);
        project(UFmt{}, std::bool_constant<Q8U>{}, up, slots, count, e, r0, r1, upped);
        for (int64_t m = 0; m < count; ++m) {
          float* h = hidden + slots[m] * I;
          const float* u = upped + slots[m] * I;
          for (int64_t n = r0; n < r1; ++n) h[n] = detail::silu1(h[n]) * u[n];
        }
      });

  // 4. down of each chosen expert: out [S, H].
  float* out = detail::scratch<detail::moe_out_tag>(static_cast<size_t>(S * H));
  const uint8_t* db = static_cast<const uint8_t*>(down);
  const block_q8* hq = nullptr;
  if constexpr (Q8D)
    hq = detail::quantize_rows_q8<I>(step, S, [hidden](int64_t s) { return hidden + s * I; });
  detail::for_expert_rows<E, H>(
      step, used, n_used, first, I, avg,
      [&](int32_t e, int64_t at, int64_t count, int64_t r0, int64_t r1) {
        const int32_t* slots = by_expert + at;
        const uint8_t* we = db + e * H * DFmt::row_bytes(I);
        auto store = [out, slots](int64_t m, int64_t n, float v) { out[slots[m] * H + n] = v; };
        if constexpr (Q8D) {
          detail::gemm_q8<DFmt>(we, I, r0, r1, count,
                                [hq, slots](int64_t m) { return hq + slots[m] * (I / 32); },
                                store);
        } else {
          detail::gemm<DFmt>(we, I, r0, r1, count,
                             [hidden, slots](int64_t m) { return hidden + slots[m] * I; },
                             store);
        }
      });

  // 5. Each token's K results, weighted, summed in its own k order.
  detail::for_tokens(step, K * H, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      Act* yr = y + t * H;
      for (int64_t j = 0; j < H; ++j) yr[j] = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float w = weight_of[t * K + k];
        const float* o = out + (t * K + k) * H;
        for (int64_t j = 0; j < H; ++j) yr[j] += w * o[j];
      }
    }
  });
}

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_MOE_H_
