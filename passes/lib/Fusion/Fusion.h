//===- Fusion.h - the two phases of the fuse pass ---------------*- C++ -*-===//
#ifndef LLMC_PASSES_FUSION_FUSION_H
#define LLMC_PASSES_FUSION_FUSION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace llmc {

// Phase 1: linears that read the same input with weights of one format (and
// the same bias kind) become one linear over a `concat` weight followed by
// llm.split: Q, K and V into one GEMM, gate and up into another. Returns the
// number of merges.
unsigned mergeSiblingProjections(mlir::func::FuncOp fn);

// Phase 2: gathers each GEMM anchor with its prologue (elementwise producers
// and a norm) and epilogue (split, RoPE on a region, elementwise consumers)
// into an llm.fusion group, then chains of leftover elementwise ops into
// groups of their own. Returns the number of groups formed.
unsigned formFusionGroups(mlir::func::FuncOp fn, bool prologueElementwise = true);

} // namespace llmc

#endif // LLMC_PASSES_FUSION_FUSION_H
