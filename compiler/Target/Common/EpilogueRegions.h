//===- EpilogueRegions.h - what a GEMM group's epilogue reads ---*- C++ -*-===//
//
// Both code generators apply a fused linear's epilogue per output tile or
// column, so both need the same facts about it, found here once: the regions
// of the linear's output (the parts of its llm.split, or the whole output),
// the RoPEs that rotate a region, and the region each elementwise op works
// on, or that it combines regions (gate/up: SiLU(gate) * up), in which case
// the GEMM computes the regions of one output column together ("paired").
// Targets add their own limits on top (e.g. CUDA's RoPE runs after the GEMM).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_COMMON_EPILOGUEREGIONS_H
#define LLMC_COMPILER_TARGET_COMMON_EPILOGUEREGIONS_H

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace llmc {

struct EpilogueRegions {
  struct Region {
    int64_t offset = 0, width = 0;
    llvm::SmallVector<llm::RopeOp> ropes; // rotations of this region, in order
  };
  llvm::SmallVector<Region> regions;
  // The value of each region: a result of `split`, or the linear's result.
  llvm::SmallVector<mlir::Value> values;
  llm::SplitOp split;                        // null when the output is whole
  // The region of each epilogue value; kCombined for ops over several.
  llvm::DenseMap<mlir::Value, int64_t> regionOf;
  static constexpr int64_t kCombined = -1;
  llvm::SmallVector<mlir::Operation *> elementwise; // in order
  bool paired = false; // some op combines regions (then all have one width, no RoPE)

  int64_t numRopes() const;
};

// Analyzes the epilogue `epi` (the group's ops after `linear`, in order);
// `yieldsOf` maps a value to the group results it is. Fails with a
// diagnostic starting with `target` ("host codegen", "CUDA codegen") on an op
// that is not a split, a RoPE of a region or an elementwise op over regions.
mlir::FailureOr<EpilogueRegions>
analyzeEpilogue(llm::LinearOp linear, llvm::ArrayRef<mlir::Operation *> epi,
                const llvm::DenseMap<mlir::Value, llvm::SmallVector<unsigned>> &yieldsOf,
                llvm::StringRef target);

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_COMMON_EPILOGUEREGIONS_H
