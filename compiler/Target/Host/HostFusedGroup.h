//===- HostFusedGroup.h - C++ for a multi-op fusion group -------*- C++ -*-===//
//
// The host emitter's path for groups the fuse pass formed: a prologue (an
// elementwise expression and/or a norm, once per token), an anchor (a linear
// over a possibly merged weight, or the LM head), and an epilogue on each
// output tile (RoPE, then elementwise ops through the shared ExprEmitter).
// Groups of elementwise ops alone become one loop over [T, width].
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_HOST_HOSTFUSEDGROUP_H
#define LLMC_COMPILER_TARGET_HOST_HOSTFUSEDGROUP_H

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

// What one launch binds, in the order its kernel reads them.
struct HostBindings {
  std::vector<int64_t> buffers;
  std::vector<std::string> weights;
  std::vector<int64_t> caches;
};

// The generated kernel text of a group and a description of it.
struct HostKernelText {
  std::string body;    // statements inside `void kN(const llmc_host_args *a) { ... }`
  std::string ops;     // e.g. "rms_norm 576 + linear q4_1 960x576 + split + rope x2"
  std::string launch;  // how the work is split
};

// The host template library's tag type for a weight's format, e.g.
// "llmc::host::fmt::q4_1" (defined in HostEmitter.cpp).
std::string formatTag(llm::WeightType w);

// Whether a GEMM over `w` takes q8 activations under `q8Activations`.
bool usesQ8Activations(llm::WeightType w, bool q8Activations);

// Fails with a diagnostic naming the op the host templates cannot fuse.
mlir::LogicalResult emitFusedGroup(llm::FusionOp group,
                                   const llvm::DenseMap<mlir::Value, int64_t> &bufferOf,
                                   bool q8Activations, HostKernelText &text,
                                   HostBindings &bindings);

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_HOST_HOSTFUSEDGROUP_H
