//===- AttentionGroup.h - the shape of an attention group -------*- C++ -*-===//
//
// An attention kernel's group is its llm.paged_attention, and, where
// llmc-place-rope moved them there, the RoPEs of its query and key. Both
// code generators recognize it here, the same way.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_COMMON_ATTENTIONGROUP_H
#define LLMC_COMPILER_TARGET_COMMON_ATTENTIONGROUP_H

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "llvm/ADT/ArrayRef.h"

namespace llmc {

// The attention of a group whose compute ops (weights and the yield left
// out) are one llm.paged_attention and the RoPEs that produce its query and
// key; null for any other group. Each RoPE rotates a group input.
llm::PagedAttentionOp attentionWithRopes(llvm::ArrayRef<mlir::Operation *> compute);

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_COMMON_ATTENTIONGROUP_H
