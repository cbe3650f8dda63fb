// llmc host kernel template library.
//
// The host emitter generates, for each kernel of a model, a small C++ function
// that includes this header and calls one of the templates below, instantiated
// with the model's constants (shapes, weight formats, head counts):
//
//   #include "llmc_host_kernels.h"
//   extern "C" void llmc_k12(const llmc_host_args* a) {
//     llmc::host::linear<llmc::host::fmt::q4_1, /*N=*/576, /*K=*/576, /*HasBias=*/false>(
//         a->step, (const float*)a->buffers[0], a->weights[0], nullptr, (float*)a->buffers[1]);
//   }
//
// Self-contained: the C/C++ standard library, <immintrin.h> when the compiler
// targets AVX2 + FMA + F16C (x86-64-v3 or newer), and "host_abi.h" (the
// calling convention, copied next to this file by the emitter). Defining
// LLMC_HOST_FORCE_SCALAR before including it disables every intrinsic; the
// portable fallback computes the same values (up to float summation order).
//
// Conventions:
//  - Activations are row-major [T, features] in f32; accumulation is in f32.
//    Every activation pointer's element type is a deduced template parameter
//    (`Act`), so f16/bf16 activations can be added later without changing
//    call sites; today only `float` is accepted (a static_assert says so).
//  - Weights are `const void*` in a packed format named by a tag type of
//    namespace `fmt` (GGUF block layouts exactly as ggml). Quantized formats
//    are dequantized on the fly; the values are those of ggml's reference
//    dequantizers up to the rounding of one fused multiply-add.
//  - Work is split with the runtime's thread pool through step->parallel_for;
//    a null parallel_for runs everything on the calling thread. Kernels never
//    call parallel_for from inside a chunk and use stack scratch only, except
//    paged_attention's split path, which reuses a buffer owned by the calling
//    thread (grown on demand, kept for the next call).
//
// See README.md next to this file for the list of templates and performance
// notes.
#ifndef LLMC_HOST_KERNELS_H_
#define LLMC_HOST_KERNELS_H_

// The library by topic, in dependency order (each part includes what it needs).
#include "llmc_host_base.h"
#include "llmc_host_simd.h"
#include "llmc_host_formats.h"
#include "llmc_host_gemm.h"
#include "llmc_host_parallel.h"
#include "llmc_host_q8.h"
#include "llmc_host_norms.h"
#include "llmc_host_linear.h"
#include "llmc_host_rope.h"
#include "llmc_host_attention.h"
#include "llmc_host_elementwise.h"
#include "llmc_host_fused.h"
#include "llmc_host_moe.h"

#endif  // LLMC_HOST_KERNELS_H_
