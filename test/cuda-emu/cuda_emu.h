// CUDA emulation on the CPU, for checking generated CUDA kernels end to end
// on machines without a GPU.
//
// Force-included (-include cuda_emu.h -DLLMC_CUDA_EMULATE) when a host C++
// compiler builds an artifact's kernels/cuda/src/kernels.cu into a shared
// object: the CUDA keywords become plain C++, threadIdx & co. read the
// current emulated thread, and __syncthreads / warp shuffles / mma.sync are
// cooperative points (ldmatrix too) of a fiber scheduler (cuda_emu.cc) that runs every
// thread of a block as a fiber, warps in lock step at each shuffle. The fake
// CUDA driver (test/unit/runtime/cuda/fake) runs a launch through
// llmc_emu_launch when it was given such an object (FAKE_CUDA_KERNELS).
//
// What this checks: the generated source, the kernel templates' arithmetic
// and indexing, and the runtime's bindings and grids, with the real host
// float semantics of every operation. What it cannot: timing, the GPU memory
// model (races that only show with real concurrency), ptxas code generation.
#ifndef LLMC_TEST_CUDA_EMU_H_
#define LLMC_TEST_CUDA_EMU_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <cmath>

// The toolkit's headers first (host mode), then the keywords they define
// are replaced by their meaning on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_types.h>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __restrict__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// One block runs at a time on one CPU thread, so a function's static is the
// block's shared memory.
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

namespace llmc_emu {

struct ThreadIds {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
// The running fiber's ids.
const ThreadIds& self();
// Every live thread of the block arrives before any continues.
void sync_block();
// The 32 lanes of the calling thread's warp exchange one 8-byte value each:
// returns the value lane `src` gave.
uint64_t exchange(uint64_t value, int src);
// Whether any lane of the warp passed a nonzero value (all 32 lanes take
// part, as __any_sync with a full mask requires).
bool vote_any(bool pred);
// mma.sync.m16n8k16.row.col with f32 accumulators over the warp's
// fragments (PTX's register layout); `bf16` picks the input type.
void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16);
// ldmatrix.sync.aligned.m8n8.x4.b16: every lane gives the address of one
// 16-byte row; lane l receives 4 bytes of row l / 4 of each matrix.
void ldmatrix_x4(uint32_t (&r)[4], const void* row);
// The .trans form: lane l receives the 16-bit elements l / 4 of rows
// 2 (l % 4) and 2 (l % 4) + 1 of each matrix.
void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row);
// movmatrix.sync.aligned.m8n8.trans.b16: lane 4 r + c holds elements
// (r, 2c), (r, 2c + 1) of an 8x8 matrix; it receives those of the transpose.
uint32_t movmatrix_trans(uint32_t x);
// wgmma.mma_async m64nNk16 with f32 accumulators, A and B K-major in
// shared memory: the calling thread's N / 2 accumulators of the
// warpgroup's 64 x N product (warp w % 4 of the group: rows 16 w .., the
// m16n8 C layout repeated along N) += A[64 x 16] B[N x 16]^T, read at once.
// `desc_hi` is the descriptors' fixed half (stride byte offset, swizzle
// mode; llmc_cuda_wgmma.cuh), decoded as the hardware does; `a` and `b`
// the operands' start addresses, the address bits the swizzle mixes taken
// from them. Aborts on a layout it does not model (no swizzle).
void wgmma_m64nNk16(float* d, int n, uint64_t desc_hi, const void* a, const void* b, bool bf16);

template <class T> T shfl(T v, int src) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  bits = exchange(bits, src & 31);
  T out;
  memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace llmc_emu

#define threadIdx (llmc_emu::self().thread)
#define blockIdx (llmc_emu::self().block)
#define blockDim (llmc_emu::self().block_dim)
#define gridDim (llmc_emu::self().grid_dim)

inline void __syncthreads() { llmc_emu::sync_block(); }
template <class T> T __shfl_sync(unsigned, T v, int src) { return llmc_emu::shfl(v, src); }
inline int __any_sync(unsigned, int pred) { return llmc_emu::vote_any(pred != 0); }
template <class T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return llmc_emu::shfl(v, int(threadIdx.x & 31) ^ mask);
}

// Blocks run one after another on one CPU thread: a ticket is a plain add,
// a fence has nothing to order, and an L2 load is a load.
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline void __threadfence() {}
template <class T> T __ldcg(const T* p) { return *p; }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// Rounded op by op: what a kernel writes to keep the compiler from fusing a
// multiply and an add (an ISO C++ build fuses nothing anyway).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

#endif  // LLMC_TEST_CUDA_EMU_H_
