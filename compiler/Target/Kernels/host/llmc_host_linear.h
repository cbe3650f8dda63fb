// llmc host kernel library: linear.
//
// Unfused linear layers: linear (GEMV/GEMM with bias) and lm_head (the
// logits rows only).
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_LINEAR_H_
#define LLMC_HOST_LINEAR_H_

#include "llmc_host_gemm.h"
#include "llmc_host_parallel.h"
#include "llmc_host_q8.h"

namespace llmc {
namespace host {

// y[t, n] = sum_k w[n, k] x[t, k] (+ bias[n]) for a [N, K] weight in Fmt and
// x [T, K], y [T, N]. Parallel over N. T == 1 streams each weight row once
// (GEMV); T > 1 decodes each weight group once per 4 tokens. BiasFmt: f32,
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
// [Vocab, Hidden] weight in Fmt. A row index outside [0, T) gives zeros. With
// softcap > 0 each logit z is stored as softcap * tanh(z / softcap).
template <class Fmt, int64_t Vocab, int64_t Hidden, class Act = float, bool Q8 = false>
void lm_head(const llmc_host_step_info* step, const Act* x, const void* w, float* logits,
             float softcap = 0.0f) {
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
  auto store = [logits, valid, softcap](int64_t i, int64_t n, float v) {
    if (softcap > 0.0f) v = softcap * std::tanh(v / softcap);
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

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_LINEAR_H_
