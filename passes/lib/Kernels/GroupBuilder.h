//===- GroupBuilder.h - wrap ops into an llm.fusion group -------*- C++ -*-===//
//
// Shared by the fuse pass (multi-op groups) and llmc-outline-kernels (one op
// each), so that every group is built the same way: inputs are the values the
// ops read from outside (weights excepted: they are re-created inside, the
// region being isolated from above), outputs the values used outside.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_KERNELS_GROUPBUILDER_H
#define LLMC_PASSES_KERNELS_GROUPBUILDER_H

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/IR/Location.h"
#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace llmc {

// "layers.0.attn" from the builder's NameLoc, or "step" when there is none.
std::string locationName(mlir::Location loc);

// Replaces `ops` (one block, in block order) by one llm.fusion group named
// `name`, placed where the first of them was. Every value the ops read from
// outside must be defined before that point. Returns null (leaving the IR
// untouched) when not.
llm::FusionOp buildFusionGroup(llvm::ArrayRef<mlir::Operation *> ops, llvm::StringRef name);

} // namespace llmc

#endif // LLMC_PASSES_KERNELS_GROUPBUILDER_H
