//===- Pipelines.cpp - llmc pass pipelines --------------------------------===//
#include "llmc/Passes/Pipelines.h"

#include "llmc/Passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace llmc {

void buildImportCleanupStage(mlir::OpPassManager &pm) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  pm.addPass(createVerifyStep());
}

void buildPartitionStage(mlir::OpPassManager &pm, const CompilePipelineOptions &options) {
  if (options.pp > 1 || !options.ppLayers.empty()) {
    PartitionPipelineOptions p;
    p.stages = options.pp;
    p.stage = options.ppStage;
    p.layers = options.ppLayers;
    pm.addPass(createPartitionPipeline(p));
  }
  if (options.tp > 1) {
    PartitionTensorOptions t;
    t.tp = options.tp;
    pm.addPass(createPartitionTensor(t));
  }
}

void buildKernelStage(mlir::OpPassManager &pm, const CompilePipelineOptions &options) {
  if (options.quantize != "none") {
    QuantizeOptions q;
    q.mode = options.quantize;
    q.group = options.quantizeGroup;
    q.skip = options.quantizeSkip;
    pm.addPass(createQuantize(q));
  }
  buildPartitionStage(pm, options);
  if (options.fuse) {
    FuseOptions f;
    f.prologueElementwise = options.fusePrologueElementwise;
    pm.addPass(createFuse(f));
  }
  pm.addPass(createOutlineKernels());
  pm.addPass(createPlaceRope());
  SelectGemvOptions g;
  g.kind = options.gemv;
  g.activationType = options.cudaActivations;
  pm.addPass(createSelectGemv(g));
  SelectAttentionOptions a;
  a.activationType = options.cudaActivations;
  pm.addPass(createSelectAttention(a));
  SelectGemmTilesOptions t;
  t.activationType = options.cudaActivations;
  t.wgmma = options.wgmma;
  pm.addPass(createSelectGemmTiles(t));
  pm.addPass(createPlanMemory());
}

void buildCompilePipeline(mlir::OpPassManager &pm, const CompilePipelineOptions &options) {
  buildImportCleanupStage(pm);
  buildKernelStage(pm, options);
}

void registerPipelines() {
  mlir::PassPipelineRegistration<>("llmc-compile-pipeline",
                                   "the pass pipeline of `llmc compile`",
                                   [](mlir::OpPassManager &pm) { buildCompilePipeline(pm); });
}

} // namespace llmc
