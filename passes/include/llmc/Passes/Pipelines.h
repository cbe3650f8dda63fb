//===- Pipelines.h - llmc pass pipelines ------------------------*- C++ -*-===//
//
// Pipelines are assembled here, and only here, from named stages, so that the
// driver and llmc-opt run the same thing and every stage can be dumped.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_PIPELINES_H
#define LLMC_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

// What `llmc compile` (and `--llmc-compile-pipeline` in llmc-opt) can vary.
struct CompilePipelineOptions {
  // Weight quantization of float weights: "none", "w8a16" or "w4a16".
  std::string quantize = "none";
  // Elements per quantization group (32, 64 or 128).
  int64_t quantizeGroup = 128;
  // Weights kept in their original precision: a weight is skipped when its
  // name contains one of these (e.g. "lm_head", "output", "embed").
  std::vector<std::string> quantizeSkip;
  // Run the fuse pass (merge sibling projections, form prologue/epilogue
  // groups). Off gives one kernel per op, the baseline fusion is measured
  // against.
  bool fuse = true;
  // The fuse pass's prologue-elementwise option (off for CUDA targets).
  bool fusePrologueElementwise = true;
  // Tensor parallelism: ranks of the group (1: none).
  int64_t tp = 1;
  // Pipeline parallelism: stages (1: none), the stage this pipeline builds,
  // and optionally each stage's layers ("0-11", "12-23"; default: balanced
  // by weight bytes).
  int64_t pp = 1;
  int64_t ppStage = 0;
  std::vector<std::string> ppLayers;
  // llmc-select-gemv: the CUDA activation type and the GEMV kind ("auto" or
  // "fp").
  std::string cudaActivations = "bf16";
  std::string gemv = "auto";
  // llmc-select-gemm-tiles: every CUDA target is sm_90a, so prefill tiles
  // run on wgmma.
  bool wgmma = false;
};

// Stage 1: clean up the imported IR and check the runtime's calling
// convention. Quantization, partitioning, fusion, memory planning and
// outlining append their stages after it as they land.
void buildImportCleanupStage(mlir::OpPassManager &pm);

// Partitioning, when asked: keep one pipeline stage's layers, then split
// them over the tensor-parallel group. Part of the kernel stage (after
// quantization, before fusion); --emit=mlir appends it to import cleanup.
void buildPartitionStage(mlir::OpPassManager &pm, const CompilePipelineOptions &options);

// Stage 2: turn @step into a sequence of kernels (one llm.fusion group each)
// and plan their activation buffers: quantize (when asked), partition (when
// asked), fuse, outline the remaining ops, plan memory.
void buildKernelStage(mlir::OpPassManager &pm, const CompilePipelineOptions &options = {});

// The whole compile pipeline used by `llmc compile`: every stage in order.
void buildCompilePipeline(mlir::OpPassManager &pm, const CompilePipelineOptions &options = {});

// Registers the pipelines with the pass registry (`--llmc-compile-pipeline`).
void registerPipelines();

} // namespace llmc

#endif // LLMC_PASSES_PIPELINES_H
