// llmc CUDA kernel template library.
//
// The one header every generated CUDA kernel includes (the CUDA twin of
// ../host/llmc_host_kernels.h). The CUDA emitter writes, per kernel of the
// model, an `extern "C" __global__` function that calls one `__device__`
// template below, instantiated with the model's constants and with the
// fused prologue/epilogue functors it generated from the shared expression
// emitter (compiler/Target/Common/ExprEmitter). NVRTC compiles the result for
// each requested sm_XX; see README.md for the list, the layouts and what is
// verified only by compilation.
//
// NVRTC-compilable: no host standard headers. Needs cuda_fp16.h/cuda_bf16.h
// from the toolkit (`--include-path=<cuda>/include`), nothing else.
// Requires sm_80 or later (mma.sync m16n8k16 with bf16).
#ifndef LLMC_CUDA_KERNELS_CUH_
#define LLMC_CUDA_KERNELS_CUH_

// The library by topic (each part includes what it needs).
#include "llmc_cuda_common.cuh"
#include "llmc_cuda_gemv.cuh"
#include "llmc_cuda_gemm.cuh"
#include "llmc_cuda_norm_rope.cuh"
#include "llmc_cuda_attention.cuh"
#include "llmc_cuda_moe.cuh"
#include "llmc_cuda_sample.cuh"

#endif // LLMC_CUDA_KERNELS_CUH_
