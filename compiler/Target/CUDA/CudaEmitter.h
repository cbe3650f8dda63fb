//===- CudaEmitter.h - CUDA C++ for the kernels of a model ------*- C++ -*-===//
//
// The CUDA twin of Target/Host/HostEmitter: turns the fusion groups of a
// planned @step into one CUDA C++ translation unit of `extern "C"
// __global__` kernels that instantiate the CUDA template library
// (Target/Kernels/cuda/llmc_cuda_kernels.cuh) with the model's constants,
// plus a step plan binding each launch to its buffers, weights and caches
// (the ABI of core/include/llmc/core/artifact/cuda_abi.h).
//
// One group becomes one kernel with one or more launches:
//   GEMM groups     a GEMV (T <= gemvMaxTokens: decode) or a tensor-core GEMM
//                   (prefill), the prologue norm folded into its loads and
//                   the epilogue (bias, split regions, elementwise ops from
//                   the shared ExprEmitter, paired gate/up tiles) applied per
//                   output column; RoPE on a region runs as a second launch
//                   in place on the region's output.
//   attention       the K/V cache write, the flash-decoding split pass, and
//                   the reduction of the splits (when there are several).
//   others          embedding, RMS norm, RoPE, elementwise: one block a token.
// Where the step has logits, the device sampler's entry follows (greedy
// picks and seeded draws over the logits rows, one block a pick), for the runtime to launch
// after the step so that only token ids leave the GPU.
// Groups with identical code share a kernel; only the bindings differ.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_CUDA_CUDAEMITTER_H
#define LLMC_COMPILER_TARGET_CUDA_CUDAEMITTER_H

#include "Target/Common/KernelLaunch.h"
#include "llmc/core/artifact/manifest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace llmc {

struct CudaEmitOptions {
  std::string activationType = "bf16"; // bf16 | f16 | f32 (buffers and KV cache)
  // Token counts up to this run the GEMV variant of a GEMM (f32 activations
  // always do: the tensor-core GEMM takes half/bf16).
  int gemvMaxTokens = 4;
  // Steps whose longest query (Q) exceeds this take the flash-attention
  // prefill kernel (half/bf16 activations, head_dim a multiple of 16 up to
  // 128); shorter ones the split (flash-decoding) kernel.
  int attnPrefillMinQuery = 16;
  // Every CUDA target is sm_90a (Hopper's arch-specific features): GEMM
  // tiles may run on wgmma (llmc.gemm `<tile>_mma`).
  bool wgmma = false;
};

// Whether every arch of `archs` ("sm_80", "sm_90a", ...) has wgmma: only
// sm_90a does (PTX for it runs on compute capability 9.0 alone).
bool archsHaveWgmma(const std::vector<std::string> &archs);

struct CudaKernelPlan {
  std::string source;                        // kernels.cu
  std::vector<ManifestCudaKernel> kernels;
  std::vector<KernelLaunch> launches;
  // The device sampler's entries over the logits (cuda_abi.h); none on a
  // pipeline stage before the last, which has no logits.
  std::vector<ManifestCudaSampler> samplers;
};

// Fails with a diagnostic naming the first op the CUDA templates cannot run.
mlir::FailureOr<CudaKernelPlan> emitCudaKernels(mlir::ModuleOp module,
                                                const CudaEmitOptions &options = {});

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_CUDA_CUDAEMITTER_H
