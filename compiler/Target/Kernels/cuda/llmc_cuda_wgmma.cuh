// llmc CUDA kernel library: Hopper's warpgroup MMA (wgmma, sm_90a).
//
// wgmma.mma_async: the four warps of a warpgroup (128 threads) multiply a
// 64 x 16 tile of A by a 16 x N tile of B, both read from shared memory
// through matrix descriptors, into f32 accumulators. Where mma.sync m16n8k16
// has every warp load its fragments with ldmatrix and issue 8 x N / 8 small
// products, a warpgroup issues one instruction per 64 x N x 16 that reads
// shared memory itself, asynchronously: the warps go on (decoding the next
// step's weights, in the GEMM) while the tensor cores run, and only wgmma
// reaches Hopper's full tensor rate (mma.sync tops out well below it).
//
// Operands here are K-major tiles of 64-byte rows (32 16-bit elements:
// the GEMM's ring, tile32_slot), which is exactly the 64-byte swizzle's
// canonical layout: chunk c of row r at chunk c ^ (r / 2 % 4) is the
// address-bit swizzle bits [4, 6) ^= bits [7, 9) of a tile whose base is
// 512-byte aligned, rows 64 bytes apart within a group of 8, groups 512
// bytes apart (the descriptor's stride byte offset). The k16 half h of a
// 32-element step starts 32 bytes into the rows: the descriptor's start
// address advances by 32 and the hardware applies the swizzle to the
// resulting addresses, as it does for the rows.
//
// Accumulators: warp w of the group holds rows 16 w .. 16 w + 15 of the 64,
// as mma.sync's m16n8 C fragment repeated along N: register 4 j + e is row
// lane / 4 + 8 (e / 2), column 8 j + 2 (lane % 4) + e % 2.
//
// Under LLMC_CUDA_EMULATE (test/cuda-emu) a thread computes its own
// accumulators from shared memory at the issue, decoding the same
// descriptor bits (stride, swizzle mode) and swizzling the same addresses
// as the hardware, so a layout the descriptor does not describe fails the
// emulated e2e tests.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_WGMMA_CUH_
#define LLMC_CUDA_WGMMA_CUH_

#include "llmc_cuda_mma.cuh"

// Whether this compilation may issue wgmma: sm_90a (NVRTC's compute_90a
// defines the feature macro), or the CPU emulation.
#if defined(LLMC_CUDA_EMULATE) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LLMC_CUDA_HAS_WGMMA 1
#else
#define LLMC_CUDA_HAS_WGMMA 0
#endif

namespace llmc {
namespace cuda {

// The descriptor's fixed half for the tiles above: swizzle mode 2 (64
// bytes) in bits 62-63, stride byte offset 512 >> 4 in bits 32-45, leading
// byte offset 1 (unused by swizzled K-major operands whose k16 slice lies
// within one swizzle row) in bits 16-29. The start address (a shared-window
// offset >> 4, 14 bits) is or-ed in per operand.
constexpr u64 kWgmmaDescSw64 = (u64{2} << 62) | (u64{512 >> 4} << 32) | (u64{1} << 16);

namespace detail {
template <class Act, int N> struct wgmma_op;
#if LLMC_CUDA_HAS_WGMMA && !defined(LLMC_CUDA_EMULATE)
// One instruction per shape; TY is the PTX type of A and B ("f16",
// "bf16"). Scale-d is a predicate that is always true (accumulate: the
// accumulators start at zero), A and B are unscaled and not transposed
// (K-major, the layout above).
#define LLMC_WGMMA_M64N64K16(TY) \
  asm volatile( \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {" \
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31" \
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
      : "l"(a), "l"(b), "r"(1))
#define LLMC_WGMMA_M64N128K16(TY) \
  asm volatile( \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {" \
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
      "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
      "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63" \
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(a), "l"(b), "r"(1))
template <> struct wgmma_op<__half, 64> {
  __device__ static void run(float (&d)[32], u64 a, u64 b) { LLMC_WGMMA_M64N64K16("f16"); }
};
template <> struct wgmma_op<__nv_bfloat16, 64> {
  __device__ static void run(float (&d)[32], u64 a, u64 b) { LLMC_WGMMA_M64N64K16("bf16"); }
};
template <> struct wgmma_op<__half, 128> {
  __device__ static void run(float (&d)[64], u64 a, u64 b) { LLMC_WGMMA_M64N128K16("f16"); }
};
template <> struct wgmma_op<__nv_bfloat16, 128> {
  __device__ static void run(float (&d)[64], u64 a, u64 b) { LLMC_WGMMA_M64N128K16("bf16"); }
};
#undef LLMC_WGMMA_M64N64K16
#undef LLMC_WGMMA_M64N128K16
#endif
} // namespace detail

// An operand tile's descriptor: on the device the low word of the 64-bit
// descriptor, whose high word is kWgmmaDescSw64's (a constant); under the
// emulation the tile's address. Made once from the ring's base
// (make_wgmma_desc) and moved by byte offsets (operator+) that are
// compile-time constants in the GEMM's unrolled steps: so a step's
// descriptors cost an immediate add each, where building one from its
// address (mask, shift, or) took four uniform instructions and the A
// operand's were held in registers and moved to uniform ones every step
// (SASS sm_90a, 8B q4_0 64 x 128 tile: 22 of a step's 141 instructions).
// The start address is the shared-window offset >> 4 in bits 0-13, so an
// offset of a multiple of 16 bytes adds to it without a carry out of the
// field while the tile stays in the 256 KB it spans (shared memory is at
// most 228 KB).
struct wgmma_desc {
#ifdef LLMC_CUDA_EMULATE
  shared_addr at;
  wgmma_desc operator+(int bytes) const { return {at + bytes}; }
#else
  u32 lo;
  __device__ __forceinline__ wgmma_desc operator+(int bytes) const {
    return {lo + static_cast<u32>(bytes >> 4)};
  }
#endif
};
__device__ __forceinline__ wgmma_desc make_wgmma_desc(shared_addr a) {
#ifdef LLMC_CUDA_EMULATE
  return {a};
#else
  return {static_cast<u32>(kWgmmaDescSw64) | ((a & 0x3FFFFu) >> 4)};
#endif
}

// One 64 x N x 16 product into `d` (N / 2 accumulators a thread): A's 64
// rows and B's N rows are the tiles (of the layout above) that `a` and `b`
// describe. Issued asynchronously: `d` is not to be touched before
// wgmma_wait, and the tiles not rewritten.
template <class Act, int N>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], wgmma_desc a, wgmma_desc b) {
  static_assert(N == 64 || N == 128, "wgmma_m64k16: N of 64 or 128");
#ifdef LLMC_CUDA_EMULATE
  llmc_emu::wgmma_m64nNk16(d, N, kWgmmaDescSw64, a.at, b.at, is_same<Act, __nv_bfloat16>::value);
#elif LLMC_CUDA_HAS_WGMMA
  constexpr u64 hi = kWgmmaDescSw64 & ~u64{0xffffffffu};
  detail::wgmma_op<Act, N>::run(d, hi | a.lo, hi | b.lo);
#elif defined(__CUDA_ARCH__)
  // Code generated for an arch without wgmma: ptxas stops on this line,
  // which says why (nvcc's front-end passes never generate it).
  (void)d, (void)a, (void)b;
  asm volatile("llmc_wgmma_tiles_need_sm_90a;");
#endif
}

// Orders the warpgroup's register accesses before the wgmma that follow
// (required before the first, and whenever the accumulators were touched).
__device__ __forceinline__ void wgmma_fence() {
#if LLMC_CUDA_HAS_WGMMA && !defined(LLMC_CUDA_EMULATE)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() {
#if LLMC_CUDA_HAS_WGMMA && !defined(LLMC_CUDA_EMULATE)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups are in flight; `d` is then
// pinned after the wait, so the compiler reads no accumulator before it.
template <int N, int R> __device__ __forceinline__ void wgmma_wait(float (&d)[R]) {
#if LLMC_CUDA_HAS_WGMMA && !defined(LLMC_CUDA_EMULATE)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}
// Makes this thread's generic-proxy writes to shared memory (st.shared,
// cp.async) visible to the async proxy that wgmma reads through; a barrier
// after it extends that to every thread's writes.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if LLMC_CUDA_HAS_WGMMA && !defined(LLMC_CUDA_EMULATE)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_WGMMA_CUH_
