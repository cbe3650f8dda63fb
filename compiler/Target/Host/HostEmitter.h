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

#include "llmc/runtime/artifact/manifest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace llmc {

struct HostKernelPlan {
  std::string source;                  // kernels.cpp
  std::vector<ManifestKernel> kernels; // unique kernels, target "host"
  struct Launch {
    std::string group;                 // the llm.fusion group's name
    int64_t kernel = 0;
    std::vector<int64_t> buffers;
    std::vector<std::string> weights;  // weight names, in binding order
    std::vector<int64_t> caches;       // layer indices
  };
  std::vector<Launch> launches;
  std::vector<ManifestBuffer> buffers;
  int64_t logitsBuffer = -1;
};

// Fails with a diagnostic on the first group it cannot emit.
mlir::FailureOr<HostKernelPlan> emitHostKernels(mlir::ModuleOp module);

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_HOST_HOSTEMITTER_H
