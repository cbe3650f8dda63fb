// llmc CUDA kernel library: tensor-core and async-copy primitives.
//
// mma.sync m16n8k16 (f32 accumulators), ldmatrix, cp.async and an L2
// prefetch, each with its CPU emulation (test/cuda-emu) beside the PTX, and
// the swizzled layout of the 32-element-wide shared-memory tiles that the
// GEMMs stage their operands in.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_MMA_CUH_
#define LLMC_CUDA_MMA_CUH_

#include "llmc_cuda_common.cuh"

namespace llmc {
namespace cuda {
namespace detail {

template <class Act> struct mma_op;
template <> struct mma_op<__half> {
  __device__ static void run(float (&c)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef LLMC_CUDA_EMULATE // test/cuda-emu: the warp's fragments combined on the CPU
    llmc_emu::mma_m16n8k16(c, a, b, /*bf16=*/false);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};
template <> struct mma_op<__nv_bfloat16> {
  __device__ static void run(float (&c)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef LLMC_CUDA_EMULATE // test/cuda-emu: the warp's fragments combined on the CPU
    llmc_emu::mma_m16n8k16(c, a, b, /*bf16=*/true);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

} // namespace detail

#ifndef LLMC_CUDA_EMULATE
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
#endif

// The value itself, opaque to the optimizer: ptxas then keeps it in a
// register across a loop instead of recomputing it from the thread index at
// every trip (which it prefers for addresses, at several instructions each).
__device__ __forceinline__ u32 opaque(u32 v) {
#ifndef LLMC_CUDA_EMULATE
  asm volatile("mov.b32 %0, %0;" : "+r"(v));
#endif
  return v;
}
template <class T> __device__ __forceinline__ const T* opaque(const T* p) {
#ifndef LLMC_CUDA_EMULATE
  asm volatile("mov.b64 %0, %0;" : "+l"(p));
#endif
  return p;
}

// A shared-memory address kept as such: 32 bits on the device, so that a
// loop adds a stage's offset to it and the fragments' constant offsets fold
// into the instructions' immediates (from generic pointers ptxas recomputes
// the whole address per ldmatrix); the pointer itself under emulation.
#ifdef LLMC_CUDA_EMULATE
using shared_addr = unsigned char*;
inline shared_addr to_shared(void* p) { return static_cast<unsigned char*>(p); }
inline shared_addr opaque(shared_addr a) { return a; }
#else
using shared_addr = u32;
__device__ __forceinline__ shared_addr to_shared(const void* p) { return smem_addr(p); }
#endif

// 16 bytes from global to shared memory without passing through registers;
// `valid` false writes zeros (src is then not read). Completes at
// cp_async_wait.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#ifdef LLMC_CUDA_EMULATE
  if (valid)
    memcpy(dst, src, 16);
  else
    memset(dst, 0, 16);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#endif
}
__device__ __forceinline__ void cp_async16(shared_addr dst, const void* src, bool valid) {
#ifdef LLMC_CUDA_EMULATE
  cp_async16(static_cast<void*>(dst), src, valid);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#endif
}
// Closes the group of this thread's cp.async issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#ifndef LLMC_CUDA_EMULATE
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are in flight.
// Other threads' copies are visible only after a __syncthreads as well.
template <int N> __device__ __forceinline__ void cp_async_wait() {
#ifndef LLMC_CUDA_EMULATE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Four 8x8 matrices of 16-bit elements from shared memory: lane l gives the
// address of row l % 8 of matrix l / 8 (16 contiguous bytes); r[j] receives
// elements (l / 4, 2 (l % 4)) and the next of matrix j, the mma operand
// layout.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* p) {
#ifdef LLMC_CUDA_EMULATE
  llmc_emu::ldmatrix_x4(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], shared_addr a) {
#ifdef LLMC_CUDA_EMULATE
  llmc_emu::ldmatrix_x4(r, a);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#endif
}

// The same four matrices transposed: r[j] receives elements (2 (l % 4), l / 4)
// and (2 (l % 4) + 1, l / 4) of matrix j. From a [k][n] tile (rows of n) this
// gives the B operand of mma.sync (pairs along k), as from a [n][k] tile
// without .trans.
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], const void* p) {
#ifdef LLMC_CUDA_EMULATE
  llmc_emu::ldmatrix_x4_trans(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

// An 8x8 matrix of 16-bit elements transposed in registers: lane 4 r + c
// holds elements (r, 2c) and (r, 2c + 1) before and after. Row r of the
// input (16 bytes across 4 lanes) becomes column r, so a register pair of
// two keys' rows turns into the mma B layout (pairs along the keys).
__device__ __forceinline__ u32 movmatrix_trans(u32 x) {
#ifdef LLMC_CUDA_EMULATE
  return llmc_emu::movmatrix_trans(x);
#else
  u32 y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
#endif
}

// Brings the line holding p into L2, so that a later load of it waits for
// L2 rather than DRAM.
__device__ __forceinline__ void prefetch_l2(const void* p) {
#ifdef LLMC_CUDA_EMULATE
  (void)p;
#else
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
#endif
}

// A tile of rows of 32 16-bit elements (64 bytes, four 16-byte chunks) in
// shared memory: chunk c of row r sits at 16-byte slot 4 r + (c ^ (r/2 % 4)).
// Eight consecutive rows at one chunk then fall in eight different 16-byte
// bank groups, so each ldmatrix phase and each 16-byte store is free of bank
// conflicts, with no padding.
__device__ __forceinline__ int tile32_slot(int row, int chunk) {
  return row * 4 + (chunk ^ ((row >> 1) & 3));
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_MMA_CUH_
