// llmc CUDA kernel library: gemm.
//
// Prefill GEMM on tensor cores (mma.sync m16n8k16) and the operand and
// epilogue halves around a cuBLASLt GEMM.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_GEMM_CUH_
#define LLMC_CUDA_GEMM_CUH_

#include "llmc_cuda_gemv.cuh"

namespace llmc {
namespace cuda {

//===----------------------------------------------------------------------===//
// Tensor-core GEMM for prefill: y[t, n] = sum_k x[t, k] w[n, k], 64 tokens x
// 64 weight rows per block of 4 warps (2 x 2, 32 x 32 each), K in steps of 32
// (one GGUF block per row), mma.sync.m16n8k16 with Act (half or bf16) inputs
// and f32 accumulators. The weight tile is dequantized into shared memory as
// Act; the activation tile goes through the prologue on its way in. With a
// paired epilogue (kRows = P) a block covers 64 / P output columns.
// Launch: blockDim = 128, grid = (ceil(NOut / (64 / P)), ceil(T / 64)).
//===----------------------------------------------------------------------===//
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

template <class Fmt, int NOut, int K, class Act, class Pro, class Epi>
__device__ void gemm_mma(int T, const int* x_rows, const Act* __restrict__ x,
                         const void* __restrict__ w, const Pro& pro, const Epi& epi) {
  static_assert(is_same<Act, __half>::value || is_same<Act, __nv_bfloat16>::value,
                "gemm_mma: activations must be half or bf16 (f32 activations use gemv)");
  static_assert(K % 32 == 0, "gemm_mma: K must be a multiple of 32");
  static_assert(Fmt::block_elems == 1 || K % Fmt::block_elems == 0, "gemm_mma: K splits a block");
  constexpr int BM = 64, BN = 64, BK = 32, LDS = BK / 2 + 4; // row stride in u32 (80 bytes)
  constexpr int P = Epi::kRows, BNO = BN / P, LDC = BN + 4;
  static_assert(BN % P == 0, "gemm_mma: kRows must divide 64");
  __shared__ __align__(16) u32 As[BM * LDS];
  __shared__ __align__(16) u32 Ws[BN * LDS];
  __shared__ float Cs[BM * LDC];
  __shared__ float rs[BM];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int gid = lane >> 2, t4 = lane & 3, wm = warp >> 1, wn = warp & 1;
  const int n0 = blockIdx.x * BNO, t0 = blockIdx.y * BM;

  if constexpr (Pro::kRowScale) {
    for (int r = warp; r < BM; r += 4) {
      const int t = t0 + r;
      float s = 0.0f;
      if (t < T) s = pro.row_scale(x + static_cast<i64>(x_rows ? x_rows[t] : t) * K);
      if (lane == 0) rs[r] = s;
    }
    __syncthreads();
  }
  // This thread's rows of the tiles: activation row tid / 2 (16 elements at
  // (tid & 1) * 16), weight row tid / 2 likewise.
  const int ar = tid >> 1, ah = tid & 1;
  const int at = t0 + ar;
  const Act* xrow = at < T ? x + static_cast<i64>(x_rows ? x_rows[at] : at) * K : nullptr;
  const int wj = ar % BNO, wp = ar / BNO;
  const bool wvalid = n0 + wj < NOut;
  const u8* wrow = weight_row<Fmt>(w, wvalid ? Epi::row(n0 + wj, wp) : 0, K);

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int g = (k0 >> 3) + ah * 2 + h; // 8-group index along K
      float v[8];
      if (xrow) {
        load8(xrow + 8 * g, v);
        if constexpr (Pro::kColScale) {
          float c[8];
          pro.col8(g, c);
#pragma unroll
          for (int i = 0; i < 8; ++i) v[i] *= c[i];
        }
        if constexpr (Pro::kRowScale) {
#pragma unroll
          for (int i = 0; i < 8; ++i) v[i] *= rs[ar];
        }
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = 0.0f;
      }
      uint4 pa = make_uint4(pack2<Act>(v[0], v[1]), pack2<Act>(v[2], v[3]), pack2<Act>(v[4], v[5]),
                            pack2<Act>(v[6], v[7]));
      *reinterpret_cast<uint4*>(&As[ar * LDS + (ah * 2 + h) * 4]) = pa;
      if (wvalid) {
        Fmt::decode8(wrow, g, v);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = 0.0f;
      }
      uint4 pw = make_uint4(pack2<Act>(v[0], v[1]), pack2<Act>(v[2], v[3]), pack2<Act>(v[4], v[5]),
                            pack2<Act>(v[6], v[7]));
      *reinterpret_cast<uint4*>(&Ws[ar * LDS + (ah * 2 + h) * 4]) = pw;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK / 2; kk += 8) { // two k16 steps, in u32 units
      u32 a[2][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm * 32 + mi * 16 + gid;
        a[mi][0] = As[r * LDS + kk + t4];
        a[mi][1] = As[(r + 8) * LDS + kk + t4];
        a[mi][2] = As[r * LDS + kk + 4 + t4];
        a[mi][3] = As[(r + 8) * LDS + kk + 4 + t4];
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int c = wn * 32 + ni * 8 + gid;
        b[ni][0] = Ws[c * LDS + kk + t4];
        b[ni][1] = Ws[c * LDS + kk + 4 + t4];
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) detail::mma_op<Act>::run(acc[mi][ni], a[mi], b[ni]);
    }
    __syncthreads();
  }
  // Stage the tile so that the epilogue sees all kRows parts of a column.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int r = wm * 32 + mi * 16 + gid, c = wn * 32 + ni * 8 + t4 * 2;
      Cs[r * LDC + c] = acc[mi][ni][0];
      Cs[r * LDC + c + 1] = acc[mi][ni][1];
      Cs[(r + 8) * LDC + c] = acc[mi][ni][2];
      Cs[(r + 8) * LDC + c + 1] = acc[mi][ni][3];
    }
  __syncthreads();
  for (int i = tid; i < BM * BNO; i += 128) {
    const int r = i / BNO, j = i % BNO;
    if (t0 + r < T && n0 + j < NOut) {
      float v[P];
#pragma unroll
      for (int p = 0; p < P; ++p) v[p] = Cs[r * LDC + p * BNO + j];
      epi(t0 + r, n0 + j, v);
    }
  }
}

//===----------------------------------------------------------------------===//
// The two halves of a GEMM that cuBLASLt computes (manifest `gemm`):
// gemm_operand writes the A operand, the activation rows with the prologue
// applied (and gathered through x_rows); gemm_epilogue hands the f32
// products D [rows, NW] to the epilogue functor as the GEMV/GEMM would.
// gemm_operand: grid (rows), any blockDim multiple of 32.
// gemm_epilogue: grid (cdiv(Columns, blockDim), rows).
//===----------------------------------------------------------------------===//
template <int K, class Act, class Pro>
__device__ void gemm_operand(int rows, const int* x_rows, const Act* __restrict__ x, const Pro& pro,
                             Act* __restrict__ a) {
  static_assert(K % 8 == 0, "gemm_operand: K must be a multiple of 8");
  const int t = blockIdx.x;
  if (t >= rows) return;
  const Act* xr = x + static_cast<i64>(x_rows ? x_rows[t] : t) * K;
  __shared__ float row_scale;
  if constexpr (Pro::kRowScale) {
    if (threadIdx.x < 32) {
      const float r = pro.row_scale(xr);
      if (threadIdx.x == 0) row_scale = r;
    }
  } else if (threadIdx.x == 0) {
    row_scale = 1.0f;
  }
  __syncthreads();
  const float r = row_scale;
  for (int g = threadIdx.x; g < K / 8; g += blockDim.x) {
    float v[8], c[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    load8(xr + 8 * g, v);
    if constexpr (Pro::kColScale) pro.col8(g, c);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= r * c[i];
    store8(a + static_cast<i64>(t) * K + 8 * g, v);
  }
}

// A quantized weight [N, K] as rows of Act, cuBLASLt's B operand: one group
// of 8 elements per thread, decoded as the GEMMs decode it and stored in 16
// bytes. Grid cdiv(N * K / 8, blockDim) (at most 2^31 - 1 blocks).
template <class Fmt, int N, int K, class Act>
__device__ void dequantize_weight(const void* __restrict__ w, Act* __restrict__ out) {
  static_assert(K % 8 == 0, "dequantize_weight: K must be a multiple of 8");
  const i64 g = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= static_cast<i64>(N) * (K / 8)) return;
  const i64 n = g / (K / 8);
  const int c = static_cast<int>(g % (K / 8));
  float v[8];
  Fmt::decode8(weight_row<Fmt>(w, n, K), c, v);
  store8(out + n * K + 8 * c, v);
}

template <int Columns, int NW, class Epi>
__device__ void gemm_epilogue(int rows, const float* __restrict__ d, const Epi& epi) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (n >= Columns || t >= rows) return;
  float acc[Epi::kRows];
#pragma unroll
  for (int p = 0; p < Epi::kRows; ++p) acc[p] = d[static_cast<i64>(t) * NW + Epi::row(n, p)];
  epi(t, n, acc);
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_GEMM_CUH_
