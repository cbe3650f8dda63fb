//===- HostEmitter.h - C++ for the host kernels of a model ------*- C++ -*-===//
//
// Turns the kernel groups of a planned @step (after llmc-outline-kernels and
// llmc-plan-memory) into one C++ translation unit of `extern "C"` kernels
// that call the host template library (Target/Kernels/host), plus the step
// plan binding each launch to its buffers, weights and caches. Groups whose
// code is identical (the same op on the same shapes in every layer) share one
// kernel: only the bindings differ.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_HOST_HOSTEMITTER_H
#define LLMC_COMPILER_TARGET_HOST_HOSTEMITTER_H

#include "Target/Common/KernelLaunch.h"
#include "llmc/core/artifact/manifest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace llmc {

struct HostKernelPlan {
  std::string source;                  // kernels.cpp
  std::vector<ManifestKernel> kernels; // unique kernels, target "host"
  std::vector<KernelLaunch> launches;
  std::vector<ManifestBuffer> buffers;
  int64_t logitsBuffer = -1;
};

struct HostEmitOptions {
  // GEMMs over q4_0, q4_1, q5_0, q5_1 and q8_0 weights round their
  // activations to int8 blocks and multiply in integers, as llama.cpp's CPU
  // backend does (about 2x less work per weight than dequantizing to f32).
  // False keeps f32 activations everywhere (bit-for-bit the f32 reference
  // path).
  bool q8Activations = true;
};

// Fails with a diagnostic on the first group it cannot emit.
mlir::FailureOr<HostKernelPlan> emitHostKernels(mlir::ModuleOp module,
                                                const HostEmitOptions &options = {});

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_HOST_HOSTEMITTER_H
