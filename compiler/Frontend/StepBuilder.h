//===- StepBuilder.h - build the @step function of a model ------*- C++ -*-===//
#ifndef LLMC_COMPILER_FRONTEND_STEPBUILDER_H
#define LLMC_COMPILER_FRONTEND_STEPBUILDER_H

#include "WeightCatalog.h"

#include "llmc/core/model_config.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace llmc {

struct StepBuildOptions {
  // Element type of activations and of the KV cache: f32 on the host, f16 or
  // bf16 for CUDA.
  enum class DType { kF32, kF16, kBF16 };
  DType activations = DType::kF32;
};

// Builds a module holding `func.func @step` for a decoder-only transformer of
// the Llama family (docs/architecture.md has the calling convention). Weights
// are looked up in `catalog`; a missing weight or an invalid config is
// reported through the context's diagnostics and yields null.
mlir::OwningOpRef<mlir::ModuleOp> buildStepModule(mlir::MLIRContext &context,
                                                  const ModelConfig &config,
                                                  const WeightCatalog &catalog,
                                                  const StepBuildOptions &options = {});

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_STEPBUILDER_H
