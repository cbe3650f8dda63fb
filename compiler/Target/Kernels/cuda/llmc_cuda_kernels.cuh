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
    for (int i = 0; i < 8; ++i) a[static_cast<i64>(t) * K + 8 * g + i] = from_float<Act>(v[i] * r * c[i]);
  }
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

//===----------------------------------------------------------------------===//
// Embedding: out[t] = table[tokens[t]] (ids outside [0, Vocab) give zeros).
// Launch: one block per token, any multiple of 32 threads.
//===----------------------------------------------------------------------===//
template <class Fmt, int Vocab, int Hidden, class Act>
__device__ void embed(const step_info& s, const void* __restrict__ table, Act* __restrict__ out) {
  static_assert(Hidden % 32 == 0, "embed: Hidden must be a multiple of 32");
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int id = s.tokens[t];
  const bool ok = id >= 0 && id < Vocab;
  const u8* row = weight_row<Fmt>(table, ok ? id : 0, Hidden);
  for (int g = threadIdx.x; g < Hidden / 8; g += blockDim.x) {
    float v[8];
    Fmt::decode8(row, g, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[static_cast<i64>(t) * Hidden + 8 * g + i] = from_float<Act>(ok ? v[i] : 0.0f);
  }
}

//===----------------------------------------------------------------------===//
// RMS norm: out[t] = x[t] / rms(x[t]) * w. One block per token (Threads a
// multiple of 32). In place allowed. WFmt: f32, f16 or bf16.
//===----------------------------------------------------------------------===//
template <int Hidden, class WFmt, class Act, int Threads>
__device__ void rms_norm(int T, const Act* x, const void* __restrict__ weight, Act* out, float eps) {
  static_assert(Hidden % 8 == 0, "rms_norm: Hidden must be a multiple of 8");
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  if (t >= T) return;
  constexpr int G = Hidden / 8, PerThread = (G + Threads - 1) / Threads;
  const Act* xr = x + static_cast<i64>(t) * Hidden;
  float v[PerThread][8];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < PerThread; ++j) {
    const int g = threadIdx.x + j * Threads;
    if (g < G) {
      load8(xr + 8 * g, v[j]);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss = fmaf(v[j][i], v[j][i], ss);
    }
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(Hidden) + eps);
  Act* yr = out + static_cast<i64>(t) * Hidden;
#pragma unroll
  for (int j = 0; j < PerThread; ++j) {
    const int g = threadIdx.x + j * Threads;
    if (g < G) {
      float c[8];
      WFmt::decode8(static_cast<const u8*>(weight), g, c);
#pragma unroll
      for (int i = 0; i < 8; ++i) yr[8 * g + i] = from_float<Act>(v[j][i] * inv * c[i]);
    }
  }
}

//===----------------------------------------------------------------------===//
// RoPE. `inv_freq` holds HeadDim/2 inverse frequencies in double (the
// emitter writes them into the generated source as a __device__ array,
// scaling and freq_factors applied, exactly as the host's rope_inv_freq);
// angles and their sine/cosine are computed in double and rounded once.
// half style: pair (i, i + HeadDim/2); interleaved: (2i, 2i + 1).
//===----------------------------------------------------------------------===//
enum class rope_style { half, interleaved };

template <int HeadDim, rope_style Style> struct rope_pair {
  __device__ static int a(int i) { return Style == rope_style::half ? i : 2 * i; }
  __device__ static int b(int i) { return Style == rope_style::half ? i + HeadDim / 2 : 2 * i + 1; }
};

__device__ __forceinline__ void rope_cs(int pos, double inv_freq, float& c, float& s) {
  double sd, cd;
  sincos(static_cast<double>(pos) * inv_freq, &sd, &cd);
  c = static_cast<float>(cd);
  s = static_cast<float>(sd);
}

// Inverse frequencies computed where they are used, from the op's
// attributes, exactly as the host's rope_inv_freq (kind: 0 none, 1 linear,
// 2 llama3; freq_factors: a weight, or nullptr). Generated kernels pass this;
// `inv_freq[j]` below takes it or a table of doubles alike.
struct rope_freqs {
  double theta;
  int head_dim;
  int kind;
  double factor, low_freq_factor, high_freq_factor;
  int original_max_position;
  const float* freq_factors;
  __device__ double operator[](int i) const {
    double f = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (kind == 1) {
      f /= factor;
    } else if (kind == 2) { // Hugging Face's _compute_llama3_parameters
      const double old_ctx = static_cast<double>(original_max_position);
      const double low_wavelen = old_ctx / low_freq_factor, high_wavelen = old_ctx / high_freq_factor;
      const double wavelen = 2.0 * 3.14159265358979323846 / f;
      if (wavelen > low_wavelen) {
        f /= factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
        f = (1.0 - smooth) * f / factor + smooth * f;
      }
    }
    if (freq_factors != nullptr) f /= static_cast<double>(freq_factors[i]);
    return f;
  }
};

// x, out: [T, Heads * HeadDim]; out == x allowed. One block per token.
// Freq: `const double*` (a table) or rope_freqs.
template <int Heads, int HeadDim, rope_style Style, class Act, class Freq>
__device__ void rope(const step_info& s, const Act* x, Act* out, const Freq inv_freq) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int pos = s.positions[t];
  constexpr int Half = HeadDim / 2;
  for (int i = threadIdx.x; i < Heads * Half; i += blockDim.x) {
    const int h = i / Half, j = i % Half;
    float c, sn;
    rope_cs(pos, inv_freq[j], c, sn);
    const i64 base = static_cast<i64>(t) * Heads * HeadDim + h * HeadDim;
    const float a = to_float(x[base + rope_pair<HeadDim, Style>::a(j)]);
    const float b = to_float(x[base + rope_pair<HeadDim, Style>::b(j)]);
    out[base + rope_pair<HeadDim, Style>::a(j)] = from_float<Act>(a * c - b * sn);
    out[base + rope_pair<HeadDim, Style>::b(j)] = from_float<Act>(b * c + a * sn);
  }
}

// The fused QKV tail: qkv [T, (Heads + 2 KvHeads) * HeadDim] (Q, K, V of the
// merged projection); rotates Q into q_out [T, Heads * HeadDim], rotates K and
// writes it and V to the cache slot slot_mapping[t] (negative: skipped).
// Cache: [num_blocks, block_size, KvHeads, HeadDim]. One block per token.
template <int Heads, int KvHeads, int HeadDim, rope_style Style, class Act, class Freq>
__device__ void rope_qkv_cache_write(const step_info& s, const Act* __restrict__ qkv,
                                     Act* __restrict__ q_out, Act* __restrict__ kcache,
                                     Act* __restrict__ vcache, const Freq inv_freq) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int pos = s.positions[t];
  const int slot = s.slot_mapping[t];
  constexpr int Half = HeadDim / 2, W = (Heads + 2 * KvHeads) * HeadDim;
  const Act* row = qkv + static_cast<i64>(t) * W;
  for (int i = threadIdx.x; i < (Heads + KvHeads) * Half; i += blockDim.x) {
    const int h = i / Half, j = i % Half;
    float c, sn;
    rope_cs(pos, inv_freq[j], c, sn);
    const int ia = h * HeadDim + rope_pair<HeadDim, Style>::a(j);
    const int ib = h * HeadDim + rope_pair<HeadDim, Style>::b(j);
    const float a = to_float(row[ia]), b = to_float(row[ib]);
    const Act ra = from_float<Act>(a * c - b * sn), rb = from_float<Act>(b * c + a * sn);
    if (h < Heads) {
      q_out[static_cast<i64>(t) * Heads * HeadDim + ia] = ra;
      q_out[static_cast<i64>(t) * Heads * HeadDim + ib] = rb;
    } else if (slot >= 0) {
      const i64 base = static_cast<i64>(slot) * KvHeads * HeadDim - Heads * HeadDim;
      kcache[base + ia] = ra;
      kcache[base + ib] = rb;
    }
  }
  if (slot >= 0)
    for (int i = threadIdx.x; i < KvHeads * HeadDim; i += blockDim.x)
      vcache[static_cast<i64>(slot) * KvHeads * HeadDim + i] = row[(Heads + KvHeads) * HeadDim + i];
}

// The rotations of a fused QKV GEMM taken over by attention: Q [T, Heads *
// HeadDim] rotated in place, K [T, KvHeads * HeadDim] rotated into the cache
// slot slot_mapping[t], V copied there (negative slots: skipped). The values
// are those of rope() then kv_cache_write(), in one launch instead of three.
// One block per token.
template <int Heads, int KvHeads, int HeadDim, rope_style Style, class Act, class FreqQ,
          class FreqK>
__device__ void rope_kv_cache_write(const step_info& s, Act* q, const Act* __restrict__ k,
                                    const Act* __restrict__ v, Act* __restrict__ kcache,
                                    Act* __restrict__ vcache, const FreqQ freq_q,
                                    const FreqK freq_k) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int pos = s.positions[t];
  const int slot = s.slot_mapping[t];
  constexpr int Half = HeadDim / 2, KW = KvHeads * HeadDim;
  for (int i = threadIdx.x; i < (Heads + KvHeads) * Half; i += blockDim.x) {
    const int h = i / Half, j = i % Half;
    const int ia = rope_pair<HeadDim, Style>::a(j), ib = rope_pair<HeadDim, Style>::b(j);
    float c, sn;
    if (h < Heads) {
      rope_cs(pos, freq_q[j], c, sn);
      Act* row = q + static_cast<i64>(t) * Heads * HeadDim + h * HeadDim;
      const float a = to_float(row[ia]), b = to_float(row[ib]);
      row[ia] = from_float<Act>(a * c - b * sn);
      row[ib] = from_float<Act>(b * c + a * sn);
    } else if (slot >= 0) {
      rope_cs(pos, freq_k[j], c, sn);
      const int kh = h - Heads;
      const Act* src = k + static_cast<i64>(t) * KW + kh * HeadDim;
      Act* dst = kcache + static_cast<i64>(slot) * KW + kh * HeadDim;
      const float a = to_float(src[ia]), b = to_float(src[ib]);
      dst[ia] = from_float<Act>(a * c - b * sn);
      dst[ib] = from_float<Act>(b * c + a * sn);
    }
  }
  if (slot >= 0)
    for (int i = threadIdx.x; i < KW; i += blockDim.x)
      vcache[static_cast<i64>(slot) * KW + i] = v[static_cast<i64>(t) * KW + i];
}

// K and V rows [T, KvHeads * HeadDim] into the cache (no RoPE).
template <int KvHeads, int HeadDim, class Act>
__device__ void kv_cache_write(const step_info& s, const Act* __restrict__ k, const Act* __restrict__ v,
                               Act* __restrict__ kcache, Act* __restrict__ vcache) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int slot = s.slot_mapping[t];
  if (slot < 0) return;
  constexpr int W = KvHeads * HeadDim;
  for (int i = threadIdx.x; i < W; i += blockDim.x) {
    kcache[static_cast<i64>(slot) * W + i] = k[static_cast<i64>(t) * W + i];
    vcache[static_cast<i64>(slot) * W + i] = v[static_cast<i64>(t) * W + i];
  }
}

//===----------------------------------------------------------------------===//
// Paged attention, flash-decoding style. Token t of sequence s (found from
// query_starts) attends to cache positions first .. last, last =
// min(positions[t], context_lens[s] - 1), first = 0 or last - window + 1.
// The cache must already hold this step's K/V (rope_qkv_cache_write or
// kv_cache_write run first).
//
// paged_attention_decode: grid (splits, KvHeads, T), blockDim 32 * Warps.
// Block (split, g, t) covers keys [first + split * SplitKeys, ...+SplitKeys)
// for the Heads / KvHeads query heads sharing kv head g (each K/V row read
// once), in chunks of 32 keys per warp: lane = key for the scores, lane =
// HeadDim / 32 dims for the V accumulation; online softmax in base 2.
// With gridDim.x == 1 it writes `out` directly; otherwise it writes partial
// states (unnormalized o [T, Heads, splits, HeadDim], (m, l) [T, Heads,
// splits, 2]) that paged_attention_reduce merges.
//===----------------------------------------------------------------------===//
__device__ __forceinline__ int seq_of_token(const step_info& s, int t) {
  int lo = 0, hi = s.num_seqs - 1; // largest seq with query_starts[seq] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (s.query_starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

template <int Heads, int KvHeads, int HeadDim, class Act, int SplitKeys, int Warps>
__device__ void paged_attention_decode(const step_info& s, const Act* __restrict__ q,
                                       const Act* __restrict__ kcache, const Act* __restrict__ vcache,
                                       Act* __restrict__ out, float* __restrict__ part_o,
                                       float* __restrict__ part_ml, float scale, int window) {
  static_assert(Heads % KvHeads == 0, "paged_attention: Heads must be a multiple of KvHeads");
  static_assert((HeadDim % 32 == 0 || (HeadDim < 32 && HeadDim % 8 == 0)) && HeadDim <= 256,
                "paged_attention: HeadDim 8, 16, 24 or a multiple of 32 up to 256");
  static_assert(SplitKeys % (32 * Warps) == 0, "paged_attention: SplitKeys must fill the warps");
  // R dims of V per lane; below 32 dims, lanes >= HeadDim hold no V dims.
  constexpr int G = Heads / KvHeads, R = HeadDim >= 32 ? HeadDim / 32 : 1, KW = KvHeads * HeadDim;
  __shared__ float qs[G][HeadDim];
  __shared__ float sm[Warps][G], sl[Warps][G];
  __shared__ float so[Warps][G][HeadDim];
  const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int seq = seq_of_token(s, t);
  const int last = min(s.positions[t], s.context_lens[seq] - 1);
  const int first = window > 0 ? max(0, last - window + 1) : 0;
  const int k0 = first + split * SplitKeys;
  const int k1 = min(last + 1, k0 + SplitKeys);
  const float qscale = scale * 1.4426950408889634f; // softmax in base 2
  for (int i = threadIdx.x; i < G * HeadDim; i += blockDim.x)
    qs[i / HeadDim][i % HeadDim] =
        to_float(q[static_cast<i64>(t) * Heads * HeadDim + (kvh * G) * HeadDim + i]) * qscale;
  __syncthreads();
  const int* btab = s.block_tables + static_cast<i64>(seq) * s.max_blocks;

  float m[G], l[G], o[G][R];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = -1e30f;
    l[h] = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) o[h][r] = 0.0f;
  }
  for (int c0 = k0 + warp * 32; c0 < k1; c0 += 32 * Warps) {
    const int key = c0 + lane;
    const bool valid = key < k1;
    i64 rowoff = 0;
    float sc[G];
#pragma unroll
    for (int h = 0; h < G; ++h) sc[h] = -__int_as_float(0x7f800000); // -inf
    if (valid) {
      const int blk = btab[key / s.block_size];
      rowoff = (static_cast<i64>(blk) * s.block_size + key % s.block_size) * KW + kvh * HeadDim;
#pragma unroll
      for (int h = 0; h < G; ++h) sc[h] = 0.0f;
      for (int d = 0; d < HeadDim; d += 8) {
        float kv[8];
        load8(kcache + rowoff + d, kv);
#pragma unroll
        for (int h = 0; h < G; ++h)
#pragma unroll
          for (int i = 0; i < 8; ++i) sc[h] = fmaf(qs[h][d + i], kv[i], sc[h]);
      }
    }
    float p[G];
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const float mn = fmaxf(m[h], warp_max(sc[h]));
      const float corr = exp2f(m[h] - mn);
      p[h] = exp2f(sc[h] - mn);
      l[h] = l[h] * corr + warp_sum(p[h]);
      m[h] = mn;
#pragma unroll
      for (int r = 0; r < R; ++r) o[h][r] *= corr;
    }
    const int nk = min(32, k1 - c0);
    for (int j = 0; j < nk; ++j) {
      const i64 off = __shfl_sync(0xffffffffu, rowoff, j);
      float vv[R];
#pragma unroll
      for (int r = 0; r < R; ++r) vv[r] = lane * R < HeadDim ? to_float(vcache[off + lane * R + r]) : 0.0f;
#pragma unroll
      for (int h = 0; h < G; ++h) {
        const float pj = __shfl_sync(0xffffffffu, p[h], j);
#pragma unroll
        for (int r = 0; r < R; ++r) o[h][r] = fmaf(pj, vv[r], o[h][r]);
      }
    }
  }
  // Merge the warps.
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (lane == 0) { sm[warp][h] = m[h]; sl[warp][h] = l[h]; }
    if (lane * R < HeadDim)
#pragma unroll
      for (int r = 0; r < R; ++r) so[warp][h][lane * R + r] = o[h][r];
  }
  __syncthreads();
  const int splits = gridDim.x;
  for (int i = threadIdx.x; i < G * HeadDim; i += blockDim.x) {
    const int h = i / HeadDim, d = i % HeadDim;
    float M = -1e30f;
#pragma unroll
    for (int w = 0; w < Warps; ++w) M = fmaxf(M, sm[w][h]);
    float L = 0.0f, O = 0.0f;
#pragma unroll
    for (int w = 0; w < Warps; ++w) {
      const float f = exp2f(sm[w][h] - M);
      L = fmaf(sl[w][h], f, L);
      O = fmaf(so[w][h][d], f, O);
    }
    const int head = kvh * G + h;
    if (splits == 1) {
      out[(static_cast<i64>(t) * Heads + head) * HeadDim + d] = from_float<Act>(L > 0.0f ? O / L : 0.0f);
    } else {
      const i64 ps = (static_cast<i64>(t) * Heads + head) * splits + split;
      part_o[ps * HeadDim + d] = O;
      if (d == 0) { part_ml[2 * ps] = M; part_ml[2 * ps + 1] = L; }
    }
  }
}

// Merges the splits: grid (Heads, T), blockDim HeadDim (or any, looping).
template <int Heads, int HeadDim, class Act>
__device__ void paged_attention_reduce(int splits, const float* __restrict__ part_o,
                                       const float* __restrict__ part_ml, Act* __restrict__ out) {
  const int head = blockIdx.x, t = blockIdx.y;
  const i64 base = (static_cast<i64>(t) * Heads + head) * splits;
  float M = -1e30f;
  for (int sp = 0; sp < splits; ++sp) M = fmaxf(M, part_ml[2 * (base + sp)]);
  for (int d = threadIdx.x; d < HeadDim; d += blockDim.x) {
    float L = 0.0f, O = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
      const float f = exp2f(part_ml[2 * (base + sp)] - M);
      L = fmaf(part_ml[2 * (base + sp) + 1], f, L);
      O = fmaf(part_o[(base + sp) * HeadDim + d], f, O);
    }
    out[(static_cast<i64>(t) * Heads + head) * HeadDim + d] = from_float<Act>(L > 0.0f ? O / L : 0.0f);
  }
}


//===----------------------------------------------------------------------===//
// Paged attention for prefill, flash-attention style (FlashAttention-2's
// loop order): a block holds 64 query rows of one sequence and one head in
// registers (16 per warp, as mma.sync A fragments) and streams the keys it
// may see through shared memory 64 at a time: S = Q K^T and O += P V on
// tensor cores (m16n8k16, f32 accumulators), online softmax in base 2 in
// between, causal and sliding-window masks per row. Each K/V tile is read
// once per 64 query rows instead of once per row as in the decode kernel.
// GQA: head h reads kv head h / (Heads / KvHeads).
//
// Launch: grid (cdiv(Q, 64), Heads, S) for Q the longest query of the step,
// blockDim 128. Blocks past their sequence's query exit at once.
//===----------------------------------------------------------------------===//
template <int Heads, int KvHeads, int HeadDim, class Act>
__device__ void paged_attention_prefill(const step_info& s, const Act* __restrict__ q,
                                        const Act* __restrict__ kcache,
                                        const Act* __restrict__ vcache, Act* __restrict__ out,
                                        float scale, int window) {
  static_assert(is_same<Act, __half>::value || is_same<Act, __nv_bfloat16>::value,
                "paged_attention_prefill: activations must be half or bf16");
  static_assert(HeadDim % 16 == 0 && HeadDim <= 128,
                "paged_attention_prefill: HeadDim a multiple of 16 up to 128");
  static_assert(Heads % KvHeads == 0, "paged_attention_prefill: Heads must be a multiple of KvHeads");
  constexpr int BM = 64, BN = 64, D = HeadDim, KW = KvHeads * HeadDim, G = Heads / KvHeads;
  constexpr int LDK = D + 8, LDV = BN + 8; // padded rows (16-byte aligned, fewer bank conflicts)
  constexpr int KD = D / 16, NT = BN / 8, ND = D / 8;
  __shared__ __align__(16) Act Ks[BN * LDK]; // [key][dim]
  __shared__ __align__(16) Act Vt[D * LDV];  // [dim][key]: B fragments of P V are pairs of keys
  __shared__ i64 rowoff[BN];
  __shared__ int range[2];
  const int seq = blockIdx.z, head = blockIdx.y, kvh = head / G;
  const int qs0 = s.query_starts[seq], qlen = s.query_starts[seq + 1] - qs0;
  const int m0 = blockIdx.x * BM;
  if (m0 >= qlen) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, t4 = lane & 3;
  const int ctx = s.context_lens[seq];
  const int* btab = s.block_tables + static_cast<i64>(seq) * s.max_blocks;

  // The keys this block may see: up to the last of its rows' positions,
  // from the first any row's window reaches.
  if (tid == 0) {
    int lo = 1 << 30, hi = -1;
    for (int r = m0; r < min(qlen, m0 + BM); ++r) {
      const int last = min(s.positions[qs0 + r], ctx - 1);
      hi = max(hi, last);
      lo = min(lo, window > 0 ? max(0, last - window + 1) : 0);
    }
    range[0] = lo;
    range[1] = hi;
  }
  // This thread's two rows (C fragment rows gid and gid + 8 of its warp).
  int row[2], last[2], first[2];
  for (int i = 0; i < 2; ++i) {
    row[i] = m0 + warp * 16 + gid + 8 * i;
    last[i] = row[i] < qlen ? min(s.positions[qs0 + row[i]], ctx - 1) : -1;
    first[i] = window > 0 ? max(0, last[i] - window + 1) : 0;
  }
  // Q as A fragments, straight from global memory (zeros past the query).
  u32 qa[KD][4];
  const u32 zero = 0;
  for (int kk = 0; kk < KD; ++kk)
    for (int i = 0; i < 4; ++i) {
      const int r = row[i & 1], c = kk * 16 + (i >> 1) * 8 + t4 * 2;
      qa[kk][i] = r < qlen ? *reinterpret_cast<const u32*>(
                                 q + (static_cast<i64>(qs0 + r) * Heads + head) * D + c)
                           : zero;
    }
  const float qscale = scale * 1.4426950408889634f; // softmax in base 2
  float m[2] = {-1e30f, -1e30f}, l[2] = {0.0f, 0.0f};
  float o[ND][4];
  for (int n = 0; n < ND; ++n)
    for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
  __syncthreads();
  const int klo = range[0], khi = range[1];

  for (int kt = klo; kt <= khi; kt += BN) {
    __syncthreads(); // the previous tile is consumed
    if (tid < BN) {
      const int key = kt + tid;
      rowoff[tid] = key <= khi ? (static_cast<i64>(btab[key / s.block_size]) * s.block_size +
                                  key % s.block_size) * KW + kvh * D
                               : -1;
    }
    __syncthreads();
    // K: consecutive threads read one key's row (coalesced), stored as is.
    for (int i = tid; i < BN * (D / 8); i += blockDim.x) {
      const int r = i / (D / 8), c = (i % (D / 8)) * 8;
      uint4 kv = make_uint4(0, 0, 0, 0); // 8 elements, raw
      if (rowoff[r] >= 0) kv = *reinterpret_cast<const uint4*>(kcache + rowoff[r] + c);
      *reinterpret_cast<uint4*>(Ks + r * LDK + c) = kv;
    }
    // V: consecutive threads take consecutive keys of one 8-dim slice, so
    // that the transposed stores of a warp fill one Vt row (no bank
    // conflicts; 8 threads per key row would all hit one bank).
    for (int i = tid; i < BN * (D / 8); i += blockDim.x) {
      const int r = i % BN, c = (i / BN) * 8;
      uint4 vv = make_uint4(0, 0, 0, 0);
      if (rowoff[r] >= 0) vv = *reinterpret_cast<const uint4*>(vcache + rowoff[r] + c);
      const Act* ve = reinterpret_cast<const Act*>(&vv);
      for (int j = 0; j < 8; ++j) Vt[(c + j) * LDV + r] = ve[j];
    }
    __syncthreads();

    // S = Q K^T: sc[j] covers keys kt + 8j .. 8j + 7.
    float sc[NT][4];
    for (int j = 0; j < NT; ++j) {
      for (int i = 0; i < 4; ++i) sc[j][i] = 0.0f;
      for (int kk = 0; kk < KD; ++kk) {
        const Act* kr = Ks + (j * 8 + gid) * LDK + kk * 16 + t4 * 2;
        const u32 b[2] = {*reinterpret_cast<const u32*>(kr), *reinterpret_cast<const u32*>(kr + 8)};
        detail::mma_op<Act>::run(sc[j], qa[kk], b);
      }
    }
    // Masks, then the online softmax of both rows.
    float mx[2] = {-1e30f, -1e30f};
    for (int j = 0; j < NT; ++j)
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1, key = kt + j * 8 + t4 * 2 + (i & 1);
        sc[j][i] = key <= last[r] && key >= first[r] ? sc[j][i] * qscale
                                                     : -__int_as_float(0x7f800000);
        mx[r] = fmaxf(mx[r], sc[j][i]);
      }
    float corr[2];
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float mn = fmaxf(m[r], mx[r]);
      corr[r] = exp2f(m[r] - mn);
      m[r] = mn;
      l[r] *= corr[r]; // this thread's share of the row sum; summed at the end
    }
    for (int j = 0; j < NT; ++j)
      for (int i = 0; i < 4; ++i) {
        sc[j][i] = exp2f(sc[j][i] - m[i >> 1]);
        l[i >> 1] += sc[j][i];
      }
    for (int n = 0; n < ND; ++n)
      for (int i = 0; i < 4; ++i) o[n][i] *= corr[i >> 1];
    // O += P V: the C fragments of two key octets are the A fragment of 16 keys.
    for (int kk = 0; kk < BN / 16; ++kk) {
      const u32 pa[4] = {pack2<Act>(sc[2 * kk][0], sc[2 * kk][1]),
                         pack2<Act>(sc[2 * kk][2], sc[2 * kk][3]),
                         pack2<Act>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                         pack2<Act>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
      for (int n = 0; n < ND; ++n) {
        const Act* vr = Vt + (n * 8 + gid) * LDV + kk * 16 + t4 * 2;
        const u32 b[2] = {*reinterpret_cast<const u32*>(vr), *reinterpret_cast<const u32*>(vr + 8)};
        detail::mma_op<Act>::run(o[n], pa, b);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  for (int r = 0; r < 2; ++r) {
    if (row[r] >= qlen) continue;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    Act* orow = out + (static_cast<i64>(qs0 + row[r]) * Heads + head) * D;
    for (int n = 0; n < ND; ++n)
      *reinterpret_cast<u32*>(orow + n * 8 + t4 * 2) =
          pack2<Act>(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
  }
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_KERNELS_CUH_
