// llmc CUDA kernel library: gemv.
//
// Decode-time GEMV with fused prologues (RMS norm folded into the loads)
// and epilogue functors.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_GEMV_CUH_
#define LLMC_CUDA_GEMV_CUH_

#include "llmc_cuda_common.cuh"

namespace llmc {
namespace cuda {

//===----------------------------------------------------------------------===//
// Prologues: what a GEMM/GEMV applies to its activation rows as it loads them.
//   kRowScale: x[t, k] is multiplied by a per-row factor computed by
//              `row_scale(x_row)` with a warp (RMS norm: 1/rms(x)),
//   col8(g, c[8]): per-column factors of elements 8g..8g+7 (norm weight).
//===----------------------------------------------------------------------===//
struct no_prologue {
  static constexpr bool kRowScale = false, kColScale = false;
  __device__ void col8(int, float*) const {}
  template <class Act> __device__ float row_scale(const Act*) const { return 1.0f; }
};

// RMS norm of the K-wide row folded into the GEMM: x * w / rms(x).
template <int K, class WFmt = fmt::f32> struct rms_norm_prologue {
  static constexpr bool kRowScale = true, kColScale = true;
  const void* weight;
  float eps;
  __device__ void col8(int g, float c[8]) const { WFmt::decode8(static_cast<const u8*>(weight), g, c); }
  // Called by all 32 lanes of a warp; every lane gets the result.
  template <class Act> __device__ float row_scale(const Act* x) const {
    float ss = 0.0f;
    for (int g = threadIdx.x & 31; g < K / 8; g += 32) {
      float v[8];
      load8(x + 8 * g, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss = fmaf(v[i], v[i], ss);
    }
    return rsqrtf(warp_sum(ss) / static_cast<float>(K) + eps);
  }
};

//===----------------------------------------------------------------------===//
// Epilogues: a functor the emitter generates from ExprEmitter statements.
//   kRows:          weight rows per output column (2 for gate/up "paired")
//   row(n, p):      the weight row of output column n, part p < kRows
//   operator()(t, n, const float (&acc)[kRows]): consume the dot products of
//                   token t (index into the GEMM's rows) and column n.
// The library's own: store (y[t, n] = acc + bias) and silu_mul (paired).
//===----------------------------------------------------------------------===//
template <int N, class Out> struct store_epilogue {
  static constexpr int kRows = 1;
  Out* y;
  __device__ static int row(int n, int) { return n; }
  __device__ void operator()(int t, int n, const float (&acc)[1]) const {
    y[static_cast<i64>(t) * N + n] = from_float<Out>(acc[0]);
  }
};

// Gate rows [0, N), up rows [N, 2N) of one merged weight: y = silu(g) * u.
template <int N, class Out> struct silu_mul_epilogue {
  static constexpr int kRows = 2;
  Out* y;
  __device__ static int row(int n, int p) { return n + p * N; }
  __device__ void operator()(int t, int n, const float (&acc)[2]) const {
    y[static_cast<i64>(t) * N + n] = from_float<Out>(expr::silu(acc[0]) * acc[1]);
  }
};

//===----------------------------------------------------------------------===//
// GEMV for small token counts (decode): one warp per output column, its
// weight row(s) streamed once per MaxT tokens, dequantized on the fly.
// Launch: blockDim = 32 * Warps, gridDim.x = ceil(NOut / Warps).
// `x_rows` maps GEMM row i to activation row (nullptr: identity; lm_head
// passes logits_rows). Weights are [rows, K] in Fmt.
//===----------------------------------------------------------------------===//
template <class Fmt, int NOut, int K, int MaxT, int Warps, class Act, class Pro, class Epi>
__device__ void gemv(int T, const int* x_rows, const Act* __restrict__ x, const void* __restrict__ w,
                     const Pro& pro, const Epi& epi) {
  static_assert(K % 32 == 0, "gemv: K must be a multiple of 32");
  static_assert(Fmt::block_elems == 1 || K % Fmt::block_elems == 0, "gemv: K splits a block");
  constexpr int P = Epi::kRows, G = K / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = blockIdx.x * Warps + warp;
  if (n >= NOut) return; // no block-level synchronization below
  const u8* rows[P];
#pragma unroll
  for (int p = 0; p < P; ++p) rows[p] = weight_row<Fmt>(w, Epi::row(n, p), K);
  for (int t0 = 0; t0 < T; t0 += MaxT) {
    // Each warp computes the prologue's row factors itself (it reads the same
    // rows for its dot products anyway; no shared memory, no barrier).
    float rsc[MaxT];
#pragma unroll
    for (int tt = 0; tt < MaxT; ++tt) {
      rsc[tt] = 1.0f;
      if constexpr (Pro::kRowScale)
        if (t0 + tt < T) rsc[tt] = pro.row_scale(x + static_cast<i64>(x_rows ? x_rows[t0 + tt] : t0 + tt) * K);
    }
    float acc[P][MaxT];
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int tt = 0; tt < MaxT; ++tt) acc[p][tt] = 0.0f;
    // Unrolled so that each lane has several weight loads in flight: one
    // warp per column leaves too few bytes outstanding per SM otherwise.
#pragma unroll 4
    for (int g = lane; g < G; g += 32) {
      float wv[P][8];
#pragma unroll
      for (int p = 0; p < P; ++p) Fmt::decode8(rows[p], g, wv[p]);
      if constexpr (Pro::kColScale) {
        float c[8];
        pro.col8(g, c);
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
          for (int i = 0; i < 8; ++i) wv[p][i] *= c[i];
      }
#pragma unroll
      for (int tt = 0; tt < MaxT; ++tt) {
        const int t = t0 + tt;
        if (t < T) {
          float xv[8];
          load8(x + static_cast<i64>(x_rows ? x_rows[t] : t) * K + 8 * g, xv);
#pragma unroll
          for (int p = 0; p < P; ++p)
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[p][tt] = fmaf(wv[p][i], xv[i], acc[p][tt]);
        }
      }
    }
#pragma unroll
    for (int tt = 0; tt < MaxT; ++tt) {
      float v[P];
#pragma unroll
      for (int p = 0; p < P; ++p) v[p] = warp_sum(acc[p][tt]) * rsc[tt];
      if (lane == (tt & 31) && t0 + tt < T) epi(t0 + tt, n, v);
    }
  }
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_GEMV_CUH_
