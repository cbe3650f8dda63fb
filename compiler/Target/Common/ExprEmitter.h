//===- ExprEmitter.h - elementwise ops as target-neutral C++ ----*- C++ -*-===//
//
// The prologues and epilogues of fused kernels are elementwise expressions
// (SiLU·mul, GELU, residual adds). Both code generators write them with this
// one emitter: each op becomes a statement `auto eN = <expr>;` over names the
// caller bound (loaded lanes of an input or a GEMM tile). The text uses only
// `+ - *` and functions in namespace `llmc::expr` (silu, gelu_tanh,
// gelu_erf), which every target's kernel library provides for its lane types:
// the host for float and its 8-lane AVX2 vector, CUDA for float.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_COMMON_EXPREMITTER_H
#define LLMC_COMPILER_TARGET_COMMON_EXPREMITTER_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace llmc {

class ExprEmitter {
public:
  // True for the ops emit() accepts.
  static bool isElementwise(mlir::Operation *op);

  // `v` is available under the C++ expression `expr` (e.g. "t0", a loaded lane).
  void bind(mlir::Value v, std::string expr) { names[v] = std::move(expr); }
  bool isBound(mlir::Value v) const { return names.count(v) != 0; }
  // The name of a bound value; empty if unbound.
  std::string lookup(mlir::Value v) const { return names.lookup(v); }

  // Writes `<indent>auto eN = ...;\n` for `op` and binds its result to eN.
  // Fails (with a diagnostic on `op`) for non-elementwise ops or unbound
  // operands.
  mlir::LogicalResult emit(mlir::Operation *op, llvm::raw_ostream &os, llvm::StringRef indent);

private:
  llvm::DenseMap<mlir::Value, std::string> names;
  unsigned next = 0;
};

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_COMMON_EXPREMITTER_H
