//===- Passes.h - llmc passes -----------------------------------*- C++ -*-===//
#ifndef LLMC_PASSES_PASSES_H
#define LLMC_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "llmc/Dialect/LLM/IR/LLMDialect.h"

namespace llmc {

#define GEN_PASS_DECL
#include "llmc/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "llmc/Passes/Passes.h.inc"

// External models of MLIR's mesh ShardingInterface for the llm ops with one
// iteration space over tensors (llm.add, llm.mul, llm.silu, llm.gelu,
// llm.linear, llm.rms_norm, and llm.weight, which never proposes a
// sharding), so that MLIR's sharding-propagation and mesh-spmdization passes
// run on llm IR in llmc-opt. An experiment measured against our partition
// passes (docs/partitioning.md, "Why not MLIR's mesh dialect"); the
// compiler's pipelines do not use it.
void registerLLMMeshShardingModels(mlir::DialectRegistry &registry);

} // namespace llmc

#endif // LLMC_PASSES_PASSES_H
