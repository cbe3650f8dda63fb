// llmc CUDA kernel library: common.
//
// What every kernel shares: the expression emitter's elementwise functions
// (llmc::expr), the step description, packing and weight-row helpers, and
// warp/block reductions.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_COMMON_CUH_
#define LLMC_CUDA_COMMON_CUH_

#include "llmc_cuda_formats.cuh"

namespace llmc {
//===----------------------------------------------------------------------===//
// Elementwise functions for the shared expression emitter (`auto eN = ...;`).
//===----------------------------------------------------------------------===//
namespace expr {
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  const float k = 0.7978845608028654f; // sqrt(2/pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
// 0.5 x erfc(-x/sqrt2): full relative accuracy for negative x (as the host).
__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * erfcf(-x * 0.7071067811865476f);
}
} // namespace expr
namespace cuda {


template <class A, class B> struct is_same { static constexpr bool value = false; };
template <class A> struct is_same<A, A> { static constexpr bool value = true; };

// Per-step metadata, passed by value to every kernel (the @step arguments of
// docs/architecture.md; device pointers). Mirrors llmc_host_step_info.
struct step_info {
  int num_tokens;          // T
  int num_seqs;            // S
  int num_logits;          // rows of logits_rows
  int max_blocks;          // columns of block_tables
  int block_size;          // tokens per KV block
  const int* tokens;       // [T]
  const int* positions;    // [T]
  const int* query_starts; // [S + 1]
  const int* context_lens; // [S]
  const int* block_tables; // [S, max_blocks]
  const int* slot_mapping; // [T]
  const int* logits_rows;  // [num_logits]
};

// Two floats as the 32-bit register of an mma operand pair (low = first).
template <class Act> __device__ __forceinline__ u32 pack2(float a, float b);
template <> __device__ __forceinline__ u32 pack2<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const u32*>(&h);
}
template <> __device__ __forceinline__ u32 pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const u32*>(&h);
}

template <class Fmt> __device__ __forceinline__ const u8* weight_row(const void* w, i64 n, int K) {
  return static_cast<const u8*>(w) + n * Fmt::row_bytes(K);
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over the block (blockDim.x a multiple of 32, at most 1024); all threads
// get the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// Programmatic dependent launch (sm_90+). Every generated entry calls
// grid_dependency_begin() first: it lets the next kernel on the stream be
// placed now (its blocks then wait in their own begin), and waits until the
// kernel before this one has finished and its memory is visible, before any
// load of what that kernel wrote or any store over what it reads. Launched
// without the PDL attribute (the runtime's default) both are no-ops: the
// stream already serializes. Weights, which no kernel writes, could be
// prefetched before the wait; nothing does that yet.
__device__ __forceinline__ void grid_dependency_begin() {
#if !defined(LLMC_CUDA_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_COMMON_CUH_
