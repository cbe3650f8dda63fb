//===- Pipelines.h - llmc pass pipelines ------------------------*- C++ -*-===//
//
// Pipelines are assembled here, and only here, from named stages, so that the
// driver and llmc-opt run the same thing and every stage can be dumped.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_PIPELINES_H
#define LLMC_PASSES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace llmc {

// Stage 1: clean up the imported IR and check the runtime's calling
// convention. Quantization, partitioning, fusion, memory planning and
// outlining append their stages after it as they land.
void buildImportCleanupStage(mlir::OpPassManager &pm);

// Stage 2: turn @step into a sequence of kernels (one llm.fusion group each)
// and plan their activation buffers. The fuse pass will run first here.
void buildKernelStage(mlir::OpPassManager &pm);

// The whole compile pipeline used by `llmc compile`: every stage in order.
void buildCompilePipeline(mlir::OpPassManager &pm);

// Registers the pipelines with the pass registry (`--llmc-compile-pipeline`).
void registerPipelines();

} // namespace llmc

#endif // LLMC_PASSES_PIPELINES_H
