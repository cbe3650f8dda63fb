//===- CudaGroup.h - shared pieces of the CUDA group emitters ---*- C++ -*-===//
//
// What CudaEmitter.cpp (one kernel per fusion group) hands to the emitter of
// GEMM groups (CudaGemmGroup.cpp), and the small text helpers both use. A
// kernel's text names its symbol prefix kSym; the emitter substitutes it
// once identical kernels are merged.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_CUDA_CUDAGROUP_H
#define LLMC_COMPILER_TARGET_CUDA_CUDAGROUP_H

#include "CudaEmitter.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include <functional>
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <utility>
#include <vector>

namespace llmc::cudagen {

inline constexpr llvm::StringLiteral kSym = "@K@";

// A group's bound pointers and how its results are yielded.
struct GroupIO {
  mutable llm::FusionOp group; // (op handles are not const-correct)
  // `inN` / `outN` pointers in binding order: {C++ type, name}.
  std::vector<std::pair<std::string, std::string>> pointers;
  std::string decls; // their declarations from the ABI's `a.buffers[i]`
  llvm::DenseMap<mlir::Value, llvm::SmallVector<unsigned>> yieldsOf;
  const CudaEmitOptions *options = nullptr;
  // Binds a weight (an llm.weight result inside the group); returns its
  // `a.weights[i]` expression.
  std::function<std::string(mlir::Value)> weight;

  std::string in(mlir::Value v) const {
    return "in" + std::to_string(llvm::cast<mlir::BlockArgument>(v).getArgNumber());
  }
};

int64_t widthOf(mlir::Value v);
bool isActivation(mlir::Value v);
std::string number(double v);
std::string cdiv(int64_t a, int64_t b);

// The CUDA library's `fmt::` tag of a weight; fails (with a diagnostic on
// `user`) for formats the library does not decode.
mlir::FailureOr<std::string> formatTag(mlir::Operation *user, llm::WeightType w);

// `extern "C" __global__` entry `<kSym>_<suffix>` taking the ABI's
// parameters, with `s` the library's step_info view of them.
std::string entry(llvm::StringRef suffix, int threads, int minBlocks, llvm::StringRef body);
ManifestCudaLaunch launch(llvm::StringRef suffix, llvm::StringRef when,
                          std::vector<std::string> grid, int64_t block);

// `put(outI + t * width + col, expr);` for each group result `v` is.
void storeYields(const GroupIO &io, mlir::Value v, llvm::StringRef expr, llvm::StringRef col,
                 llvm::raw_ostream &os, llvm::StringRef indent);

// The rope_freqs{...} initializer for `r` (binds its freq_factors weight).
std::string ropeFreqs(const GroupIO &io, llm::RopeOp r);

// A group anchored on a linear or the LM head: prologue norm, GEMV/GEMM,
// epilogue, RoPE launches.
// With 16-bit weights in the activation type it also emits the halves of a
// cuBLASLt GEMM (`gemm`, whose symbols use kSym); else gemm.n stays 0.
mlir::LogicalResult emitGemmGroup(const GroupIO &io, mlir::Operation *anchor,
                                  llvm::ArrayRef<mlir::Operation *> pro,
                                  llvm::ArrayRef<mlir::Operation *> epi, std::string &defs,
                                  std::vector<ManifestCudaLaunch> &launches,
                                  ManifestCudaGemm &gemm);

} // namespace llmc::cudagen

#endif // LLMC_COMPILER_TARGET_CUDA_CUDAGROUP_H
