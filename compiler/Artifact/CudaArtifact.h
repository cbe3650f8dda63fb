//===- CudaArtifact.h - the CUDA part of model.llmc -------------*- C++ -*-===//
//
// For `llmc compile --target=...,sm_XX`: emits the model's CUDA kernels
// (Target/CUDA/CudaEmitter), compiles them with NVRTC for every requested
// arch, checks each PTX with ptxas, and writes
//   kernels/cuda/src/{kernels.cu, llmc_cuda_kernels.cuh, llmc_cuda_formats.cuh,
//                     cuda_abi.h}
//   kernels/sm_XX/kernels.ptx
// into the artifact being built, with the manifest's `cuda` section (the
// ptxas report included). PTX of identical inputs comes from the cache
// NVRTCCompiler keeps under ~/.cache/llmc/cuda.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_ARTIFACT_CUDAARTIFACT_H
#define LLMC_COMPILER_ARTIFACT_CUDAARTIFACT_H

#include "Artifact/StepPlan.h"
#include "Target/CUDA/CudaEmitter.h"
#include "llmc/core/artifact/manifest.h"

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace llmc {

struct CudaArtifactOptions {
  std::vector<std::string> archs;        // "sm_80", "sm_90", ...
  CudaEmitOptions emit;
  bool useCache = true;
  std::function<void(const std::string &)> progress;
};

// The CUDA source of `module` (for --emit=cuda).
absl::StatusOr<CudaKernelPlan> emitCudaSource(mlir::ModuleOp module,
                                              const CudaEmitOptions &options);

// The PTX of `source` for each arch, in order (for --emit=ptx and artifacts);
// fails with NVRTC's log, or when the toolkit is missing.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
compileCudaSource(const std::string &source, const CudaArtifactOptions &options,
                  ManifestCuda *report);

// Writes the CUDA files under `dir` (the artifact being built) and fills
// `cuda`; `weightIndex` gives (adding if new) a weight's tensor index.
absl::Status buildCudaArtifact(mlir::ModuleOp module, const CudaArtifactOptions &options,
                               const std::string &dir, const WeightIndexFn &weightIndex,
                               ManifestCuda &cuda);

} // namespace llmc

#endif // LLMC_COMPILER_ARTIFACT_CUDAARTIFACT_H
