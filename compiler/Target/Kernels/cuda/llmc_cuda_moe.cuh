// llmc CUDA kernel library: moe.
//
// A mixture of SwiGLU experts (llm.moe) in four launches over each token's
// K slots, through a per-token workspace in the runtime's scratch (the
// route launch's split_floats): route (the token's experts and weights),
// up (silu(gate_e x) * up_e x of each slot), down (down_e of each slot),
// combine (the K results weighted, summed in slot order). Only the chosen
// experts' rows are read; a token's result depends on its own route only.
// Each slot reads its expert's rows on its own: a grouped GEMM over the
// tokens sharing an expert (prefill) is to come.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_MOE_CUH_
#define LLMC_CUDA_MOE_CUH_

#include "llmc_cuda_common.cuh"

namespace llmc {
namespace cuda {

// A token's workspace, floats: K expert ids (as int bits), K weights, K x I
// hidden, K x H outputs.
template <int K, int H, int I> struct moe_space {
  static constexpr i64 floats = 2 * K + static_cast<i64>(K) * (I + H);
  float* base;
  __device__ moe_space(float* scratch, int t) : base(scratch + static_cast<i64>(t) * floats) {}
  __device__ int* experts() const { return reinterpret_cast<int*>(base); }
  __device__ float* weights() const { return base + K; }
  __device__ float* hidden(int k) const { return base + 2 * K + static_cast<i64>(k) * I; }
  __device__ float* out(int k) const { return base + 2 * K + static_cast<i64>(K) * I + static_cast<i64>(k) * H; }
};

// One weight row (Cols wide, Fmt) times x (Cols, Act or f32): a warp's dot,
// every lane gets it.
template <class Fmt, int Cols, class X>
__device__ __forceinline__ float moe_row_dot(const u8* row, const X* x) {
  static_assert(Cols % 8 == 0, "moe: rows of whole groups of 8");
  float acc = 0.0f;
  for (int g = threadIdx.x % 32; g < Cols / 8; g += 32) {
    float w[8], v[8];
    Fmt::decode8(row, g, w);
    load8(x + 8 * g, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = fmaf(w[i], v[i], acc);
  }
  return warp_sum(acc);
}

// Launch 1, grid (T), 32 * W threads: the router's E logits (a warp a row),
// then softmax and the top K (the lower index first on ties), weights
// renormalized when Norm.
template <class RFmt, int E, int K, int H, int I, bool Norm, class Act>
__device__ void moe_route(const step_info& s, const Act* x, const void* __restrict__ router,
                          float* scratch) {
  __shared__ float p[E];
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const Act* xt = x + static_cast<i64>(t) * H;
  for (int e = threadIdx.x / 32; e < E; e += blockDim.x / 32) {
    const float v = moe_row_dot<RFmt, H>(weight_row<RFmt>(router, e, H), xt);
    if (threadIdx.x % 32 == 0) p[e] = v;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  float mx = p[0];
  for (int e = 1; e < E; ++e) mx = fmaxf(mx, p[e]);
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += (p[e] = expf(p[e] - mx));
  for (int e = 0; e < E; ++e) p[e] /= sum;
  moe_space<K, H, I> ws(scratch, t);
  float kept = 0.0f;
  for (int k = 0; k < K; ++k) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int j = 0; j < k; ++j) taken |= ws.experts()[j] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;
    }
    ws.experts()[k] = best;
    kept += (ws.weights()[k] = p[best]);
  }
  if (Norm)
    for (int k = 0; k < K; ++k) ws.weights()[k] /= kept;
}

// Launch 2, grid (T, K, cdiv(I, W)), 32 * W threads: rows of the slot's
// expert, a warp each: hidden = silu(gate x) * up x.
template <class GFmt, class UFmt, int K, int H, int I, class Act>
__device__ void moe_up(const step_info& s, const Act* x, const void* __restrict__ gate,
                       const void* __restrict__ up, float* scratch) {
  const int t = blockIdx.x, k = blockIdx.y;
  const int n = blockIdx.z * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= s.num_tokens || n >= I) return;  // whole warps
  moe_space<K, H, I> ws(scratch, t);
  const i64 row = static_cast<i64>(ws.experts()[k]) * I + n;
  const Act* xt = x + static_cast<i64>(t) * H;
  const float g = moe_row_dot<GFmt, H>(weight_row<GFmt>(gate, row, H), xt);
  const float u = moe_row_dot<UFmt, H>(weight_row<UFmt>(up, row, H), xt);
  if (threadIdx.x % 32 == 0) ws.hidden(k)[n] = g / (1.0f + expf(-g)) * u;
}

// Launch 3, grid (T, K, cdiv(H, W)), 32 * W threads: out = down_e hidden.
template <class DFmt, int K, int H, int I>
__device__ void moe_down(const step_info& s, const void* __restrict__ down, float* scratch) {
  const int t = blockIdx.x, k = blockIdx.y;
  const int j = blockIdx.z * (blockDim.x / 32) + threadIdx.x / 32;
  if (t >= s.num_tokens || j >= H) return;
  moe_space<K, H, I> ws(scratch, t);
  const i64 row = static_cast<i64>(ws.experts()[k]) * H + j;
  const float o = moe_row_dot<DFmt, I>(weight_row<DFmt>(down, row, I), ws.hidden(k));
  if (threadIdx.x % 32 == 0) ws.out(k)[j] = o;
}

// Launch 4, grid (T), any threads: y = sum_k w_k out_k, k in order.
template <int K, int H, int I, class Act>
__device__ void moe_combine(const step_info& s, float* scratch, Act* y) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  moe_space<K, H, I> ws(scratch, t);
  for (int j = threadIdx.x; j < H; j += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += ws.weights()[k] * ws.out(k)[j];
    y[static_cast<i64>(t) * H + j] = from_float<Act>(acc);
  }
}

}  // namespace cuda
}  // namespace llmc

#endif  // LLMC_CUDA_MOE_CUH_
