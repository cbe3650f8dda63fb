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
#include "llmc_cuda_dot_q8.cuh"

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
  __device__ float scale_of_sumsq(float) const { return 1.0f; }
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
    return scale_of_sumsq(warp_sum(ss));
  }
  // The row factor from the row's sum of squares (gemv_q8 sums over a block).
  __device__ float scale_of_sumsq(float ss) const { return rsqrtf(ss / static_cast<float>(K) + eps); }
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


//===----------------------------------------------------------------------===//
// GEMV on int8 dot products for the GGUF block formats (decode; the
// variant "dp4a" of the IR's kernel attribute). A block of Warps warps:
//  1. stages the activation rows of up to MaxT tokens in shared memory,
//     the prologue applied (RMS norm: one block-wide sum of squares per
//     token) and quantized per 32 elements to int8 (x ~ dx * xq, s = dx *
//     sum xq), once for all the block's columns (gemv_q8); or copies them
//     there, quantized once for the whole launch by gemv_q8_operand
//     (gemv_q8_staged: several tokens, where quantizing in every block
//     was over half of the block's instructions);
//  2. each warp then computes Rows weight rows (Rows / Epi::kRows output
//     columns): lane l takes chunks l, l + 32, ... of every row (Dot::load:
//     8- or 16-byte loads, all rows' loads of a trip in flight together)
//     and reduces them against the staged activations (Dot::dot: dp4a).
// Tokens beyond MaxT run in further passes over the weights (T <= the
// GEMV threshold; MaxT is chosen so the staging fits in shared memory).
// Launch: blockDim = 32 * Warps, gridDim.x = cdiv(NOut, Warps * Rows / kRows).
//===----------------------------------------------------------------------===//

// Bytes of one quantized row as gemv_q8_operand writes it: K int8, then
// K / 32 float2 {dx, dx * sum of the block's int8}, padded to 16 bytes.
template <int K> __host__ __device__ constexpr int q8_row_bytes() { return (K + K / 4 + 15) / 16 * 16; }

namespace detail {
// Row xr, the prologue applied, quantized per 32 elements into q (K / 4
// words) and s (K / 32 pairs). Called by all NT threads of the block; every
// loop has the same trip count in all of them (shuffles and barriers
// inside), and is unrolled (a compile-time trip count), so that the GEMV's
// only loop in the SASS is its weight loop, which the performance model
// counts.
template <int K, int NT, class Act, class Pro>
__device__ __forceinline__ void q8_quantize_row(const Act* __restrict__ xr, const Pro& pro,
                                                float* red, int* q, float2* sc) {
  constexpr int G = K / 8;
  const int tid = threadIdx.x;
  float rsc = 1.0f;
  if constexpr (Pro::kRowScale) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < (G + NT - 1) / NT; ++i) {
      const int g = i * NT + tid;
      if (g < G) {
        float v[8];
        load8(xr + 8 * g, v);
#pragma unroll
        for (int e = 0; e < 8; ++e) ss = fmaf(v[e], v[e], ss);
      }
    }
    rsc = pro.scale_of_sumsq(block_sum(ss, red));
  }
  // Four consecutive threads quantize one 32-element block.
#pragma unroll
  for (int g0 = 0; g0 < G; g0 += NT) {
    const int g = g0 + tid;
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (g < G) {
      load8(xr + 8 * g, v);
      float c[8];
      if constexpr (Pro::kColScale) pro.col8(g, c);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] *= Pro::kColScale ? c[i] * rsc : rsc;
    }
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const float dx = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    // Round to nearest even by adding 1.5 * 2^23 (|v * inv| <= 127): the
    // integer lands in the low mantissa bits, one FFMA instead of a
    // quarter-rate float-to-int conversion.
    int qi[8], sum = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      qi[i] = __float_as_int(fmaf(v[i], inv, 12582912.0f)) - 0x4B400000;
      sum += qi[i];
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (g < G) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        q[2 * g + h] = static_cast<int>((static_cast<u32>(qi[4 * h]) & 0xffu) |
                                        ((static_cast<u32>(qi[4 * h + 1]) & 0xffu) << 8) |
                                        ((static_cast<u32>(qi[4 * h + 2]) & 0xffu) << 16) |
                                        (static_cast<u32>(qi[4 * h + 3]) << 24));
      if ((tid & 3) == 0) sc[g >> 2] = make_float2(dx, dx * static_cast<float>(sum));
    }
  }
}

// Phase 2 of a pass: tokens t0 .. t0 + nt - 1, staged in sxq / sxs, against
// this warp's weight rows.
template <class Dot, int NOut, int K, int MaxT, int Rows, class Epi>
__device__ __forceinline__ void gemv_q8_dots(int t0, int nt, int n0, const u8* const (&rows)[Rows],
                                             const int (*sxq)[K / 4], const float2 (*sxs)[K / 32],
                                             const Epi& epi) {
  constexpr int P = Epi::kRows, Cols = Rows / P, CPR = K / Dot::kElems;
  const int lane = threadIdx.x & 31;
  float acc[Rows][MaxT];
#pragma unroll
  for (int r = 0; r < Rows; ++r)
#pragma unroll
    for (int tt = 0; tt < MaxT; ++tt) acc[r][tt] = 0.0f;
  for (int c = lane; c < CPR; c += 32) {
    u32 wv[Rows][Dot::kWords];
#pragma unroll
    for (int r = 0; r < Rows; ++r) Dot::load(rows[r], c, wv[r]);
#pragma unroll
    for (int tt = 0; tt < MaxT; ++tt) {
      if (tt < nt) {
        const int* xq = &sxq[tt][c * (Dot::kElems / 4)];
        const float2* xs = &sxs[tt][c * (Dot::kElems / 32)];
#pragma unroll
        for (int r = 0; r < Rows; ++r) acc[r][tt] += Dot::dot(wv[r], c, xq, xs);
      }
    }
  }
#pragma unroll
  for (int tt = 0; tt < MaxT; ++tt)
#pragma unroll
    for (int j = 0; j < Cols; ++j) {
      float v[P];
#pragma unroll
      for (int p = 0; p < P; ++p) v[p] = warp_sum(acc[j * P + p][tt]);
      if (lane == ((j * MaxT + tt) & 31) && tt < nt && n0 + j < NOut) epi(t0 + tt, n0 + j, v);
    }
}

// This warp's weight rows (past the last column: a valid row, its result
// dropped).
template <class Fmt, int NOut, int K, int Rows, class Epi>
__device__ __forceinline__ void gemv_q8_rows(const void* w, int n0, const u8* (&rows)[Rows]) {
  constexpr int P = Epi::kRows, Cols = Rows / P;
#pragma unroll
  for (int j = 0; j < Cols; ++j)
#pragma unroll
    for (int p = 0; p < P; ++p)
      rows[j * P + p] = weight_row<Fmt>(w, Epi::row(n0 + j < NOut ? n0 + j : NOut - 1, p), K);
}
} // namespace detail

template <class Dot, int NOut, int K, int MaxT, int Warps, int Rows, class Act, class Pro, class Epi>
__device__ void gemv_q8(int T, const int* x_rows, const Act* __restrict__ x, const void* __restrict__ w,
                        const Pro& pro, const Epi& epi) {
  static_assert(Rows % Epi::kRows == 0, "gemv_q8: Rows must hold whole output columns");
  static_assert(K % Dot::kElems == 0, "gemv_q8: K must be a multiple of the chunk");
  __shared__ __align__(16) int sxq[MaxT][K / 4];
  __shared__ float2 sxs[MaxT][K / 32];
  __shared__ float red[32];
  const int warp = threadIdx.x >> 5;
  const int n0 = (blockIdx.x * Warps + warp) * (Rows / Epi::kRows);
  const u8* rows[Rows];
  detail::gemv_q8_rows<typename Dot::Fmt, NOut, K, Rows, Epi>(w, n0, rows);
  for (int t0 = 0; t0 < T; t0 += MaxT) {
    const int nt = T - t0 < MaxT ? T - t0 : MaxT;
    for (int tt = 0; tt < nt; ++tt)
      detail::q8_quantize_row<K, 32 * Warps>(
          x + static_cast<i64>(x_rows ? x_rows[t0 + tt] : t0 + tt) * K, pro, red, sxq[tt], sxs[tt]);
    __syncthreads();
    detail::gemv_q8_dots<Dot, NOut, K, MaxT, Rows>(t0, nt, n0, rows, sxq, sxs, epi);
    __syncthreads();  // the next pass restages
  }
}

// The activation rows of a several-token GEMV, the prologue applied and
// quantized as gemv_q8 stages them, once for all its blocks: row t (x_rows
// gathers it) to xq + t * q8_row_bytes<K>(). Grid (rows), blockDim
// Threads: the GEMV's (32 * Warps), so that the RMS norm's sum of squares
// adds in the order gemv_q8 adds it for one token (the same bits at 1 and
// at several tokens a step).
template <int K, int Threads, class Act, class Pro>
__device__ void gemv_q8_operand(int rows, const int* x_rows, const Act* __restrict__ x,
                                const Pro& pro, void* __restrict__ xq) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "gemv_q8_operand: whole warps");
  __shared__ float red[32];
  const int t = blockIdx.x;
  if (t >= rows) return;
  u8* out = static_cast<u8*>(xq) + static_cast<i64>(t) * q8_row_bytes<K>();
  detail::q8_quantize_row<K, Threads>(x + static_cast<i64>(x_rows ? x_rows[t] : t) * K, pro, red,
                                      reinterpret_cast<int*>(out), reinterpret_cast<float2*>(out + K));
}

// gemv_q8 on rows gemv_q8_operand quantized (xq): each pass copies its
// tokens' rows into shared memory (16-byte loads) instead of quantizing
// them in every block.
template <class Dot, int NOut, int K, int MaxT, int Warps, int Rows, class Epi>
__device__ void gemv_q8_staged(int T, const void* __restrict__ xq, const void* __restrict__ w,
                               const Epi& epi) {
  static_assert(Rows % Epi::kRows == 0, "gemv_q8_staged: Rows must hold whole output columns");
  static_assert(K % Dot::kElems == 0 && K % 64 == 0,
                "gemv_q8_staged: K must be a multiple of the chunk and of 64 (16-byte scale rows)");
  constexpr int QV = K / 16, SV = K / 64, NT = 32 * Warps; // 16-byte vectors of a row's parts
  __shared__ __align__(16) int sxq[MaxT][K / 4];
  __shared__ __align__(16) float2 sxs[MaxT][K / 32];
  const int tid = threadIdx.x, warp = tid >> 5;
  const int n0 = (blockIdx.x * Warps + warp) * (Rows / Epi::kRows);
  const u8* rows[Rows];
  detail::gemv_q8_rows<typename Dot::Fmt, NOut, K, Rows, Epi>(w, n0, rows);
  for (int t0 = 0; t0 < T; t0 += MaxT) {
    const int nt = T - t0 < MaxT ? T - t0 : MaxT;
    // Unrolled over MaxT (no loop in the SASS but the weight loop's, which
    // the performance model counts).
#pragma unroll
    for (int tt = 0; tt < MaxT; ++tt) {
      if (tt >= nt) break;
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const u8*>(xq) +
                                                        static_cast<i64>(t0 + tt) * q8_row_bytes<K>());
#pragma unroll
      for (int i = 0; i < (QV + SV + NT - 1) / NT; ++i) {
        const int v = i * NT + tid;
        if (v < QV)
          reinterpret_cast<uint4*>(sxq[tt])[v] = src[v];
        else if (v < QV + SV)
          reinterpret_cast<uint4*>(sxs[tt])[v - QV] = src[v];
      }
    }
    __syncthreads();
    detail::gemv_q8_dots<Dot, NOut, K, MaxT, Rows>(t0, nt, n0, rows, sxq, sxs, epi);
    __syncthreads();  // the next pass restages
  }
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_GEMV_CUH_
