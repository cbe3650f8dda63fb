// The shape of one step, as the performance model sees it, and the value of
// a launch's cost forms (ManifestCudaCost in manifest.h) at that shape.
//
// Decode of B sequences at context C: tokens = seqs = logits = B, keys = B*C.
// Prefill of T tokens of one sequence from position 0: keys = the keys
// each query row attends, summed (T*(T+1)/2, causal); logits = 1 (the last
// row only).
#ifndef LLMC_CORE_ARTIFACT_CUDA_COST_H_
#define LLMC_CORE_ARTIFACT_CUDA_COST_H_

#include <cstdint>

#include "llmc/core/artifact/manifest.h"

namespace llmc {

struct CostShape {
  int64_t tokens = 1;  // T
  int64_t seqs = 1;    // S
  int64_t keys = 1;    // K
  int64_t logits = 1;  // L

  static CostShape Decode(int64_t batch, int64_t context) {
    return {batch, batch, batch * context, batch};
  }
  static CostShape Prefill(int64_t tokens) {
    return {tokens, 1, tokens * (tokens + 1) / 2, 1};
  }
};

// c + T*t + S*s + K*k + L*l + P*p, with P = cdiv(T, tokens_per_pass), or
// of L when the passes are of logits rows (0 when tokens_per_pass is 0).
inline double EvaluateCost(const ManifestCostForm& f, const CostShape& x,
                           const ManifestCudaCost& cost) {
  const int64_t rows = cost.passes_of_logits ? x.logits : x.tokens, per = cost.tokens_per_pass;
  const double passes = per > 0 ? double((rows + per - 1) / per) : 0.0;
  return f.c + f.t * double(x.tokens) + f.s * double(x.seqs) + f.k * double(x.keys) +
         f.l * double(x.logits) + f.p * passes;
}

}  // namespace llmc

#endif  // LLMC_CORE_ARTIFACT_CUDA_COST_H_
