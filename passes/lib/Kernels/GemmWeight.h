//===- GemmWeight.h - the weight a GEMM group multiplies by ---------------===//
//
// Pass-internal: the kernel-selection passes (llmc-select-gemv,
// llmc-select-gemm-tiles) decide per GEMM group from its weight's shape and
// format.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_KERNELS_GEMMWEIGHT_H
#define LLMC_PASSES_KERNELS_GEMMWEIGHT_H

#include "llmc/Dialect/LLM/IR/LLMOps.h"

namespace llmc::llm {

// The weight type of the group's first `llm.linear` or `llm.lm_head` (a
// GEMM group has one), or null for a group without a GEMM.
inline WeightType gemmWeightOf(FusionOp group) {
  for (mlir::Operation &op : group.getBody().front()) {
    if (auto l = mlir::dyn_cast<LinearOp>(op))
      return mlir::cast<WeightType>(l.getWeight().getType());
    if (auto h = mlir::dyn_cast<LMHeadOp>(op))
      return mlir::cast<WeightType>(h.getWeight().getType());
  }
  return {};
}

} // namespace llmc::llm

#endif // LLMC_PASSES_KERNELS_GEMMWEIGHT_H
