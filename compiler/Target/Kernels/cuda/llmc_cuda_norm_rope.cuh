// llmc CUDA kernel library: norm_rope.
//
// Per-token kernels: embedding, RMS norm, RoPE and the KV-cache writes
// (with the RoPEs llmc-place-rope put in the attention's group).
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_NORM_ROPE_CUH_
#define LLMC_CUDA_NORM_ROPE_CUH_

#include "llmc_cuda_common.cuh"

namespace llmc {
namespace cuda {

//===----------------------------------------------------------------------===//
// Embedding: out[t] = table[tokens[t]] * scale (ids outside [0, Vocab) give
// zeros; Gemma scales by sqrt(Hidden)).
// Launch: grid (T, Y), any multiple of 32 threads. The row's groups of 8
// elements are dealt over the Y blocks of a token (a decode step's one token
// would otherwise be one block's chain of loads), each stored in 16 bytes.
//===----------------------------------------------------------------------===//
template <class Fmt, int Vocab, int Hidden, class Act>
__device__ void embed(const step_info& s, const void* __restrict__ table, Act* __restrict__ out,
                      float scale = 1.0f) {
  static_assert(Hidden % 32 == 0, "embed: Hidden must be a multiple of 32");
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int id = s.tokens[t];
  const bool ok = id >= 0 && id < Vocab;
  const u8* row = weight_row<Fmt>(table, ok ? id : 0, Hidden);
  for (int g = blockIdx.y * blockDim.x + threadIdx.x; g < Hidden / 8; g += blockDim.x * gridDim.y) {
    float v[8];
    Fmt::decode8(row, g, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = ok ? v[i] * scale : 0.0f;
    store8(out + static_cast<i64>(t) * Hidden + 8 * g, v);
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
// Per-head RMS norm (Qwen3's of Q and K): x, out [T, Heads * HeadDim], each
// head normalized on its own with one weight of HeadDim for all heads. One
// warp a head, its sum reduced by shuffles: grid (T, cdiv(Heads, warps a
// block)), any multiple of 32 threads. In place allowed.
//===----------------------------------------------------------------------===//
template <int Heads, int HeadDim, class WFmt, class Act>
__device__ void rms_norm_heads(int T, const Act* x, const void* __restrict__ weight, Act* out,
                               float eps) {
  static_assert(HeadDim % 8 == 0, "rms_norm_heads: HeadDim must be a multiple of 8");
  const int t = blockIdx.x;
  const int h = blockIdx.y * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (t >= T || h >= Heads) return;  // whole warps: the shuffles below see all 32 lanes
  constexpr int G = HeadDim / 8, PerLane = (G + 31) / 32;
  const i64 at = (static_cast<i64>(t) * Heads + h) * HeadDim;
  float v[PerLane][8];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < PerLane; ++j) {
    const int g = lane + 32 * j;
    if (g < G) {
      load8(x + at + 8 * g, v[j]);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss = fmaf(v[j][i], v[j][i], ss);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / static_cast<float>(HeadDim) + eps);
#pragma unroll
  for (int j = 0; j < PerLane; ++j) {
    const int g = lane + 32 * j;
    if (g < G) {
      float c[8];
      WFmt::decode8(static_cast<const u8*>(weight), g, c);
#pragma unroll
      for (int i = 0; i < 8; ++i) out[at + 8 * g + i] = from_float<Act>(v[j][i] * inv * c[i]);
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

// The launches below: grid (T, Y), any Y >= 1 and any multiple of 32 threads.
// The rotation pairs of token t (head-major) are dealt out over the Y blocks
// of its row, one per thread where Y * blockDim covers them (the emitter's
// choice: a token's RoPE then takes one inverse frequency, one sincos and
// one load per thread, all in parallel); with Y = 1 a block loops over them.
// LLMC_ROPE_FOR_PAIRS(i, n): this thread's indices i < n of token blockIdx.x.
#define LLMC_ROPE_FOR_PAIRS(i, count)                                                     \
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < (count); i += gridDim.y * blockDim.x)

// x, out: [T, Heads * HeadDim]; out == x allowed. Grid (T, Y).
// Freq: `const double*` (a table) or rope_freqs.
template <int Heads, int HeadDim, rope_style Style, class Act, class Freq>
__device__ void rope(const step_info& s, const Act* x, Act* out, const Freq inv_freq) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int pos = s.positions[t];
  constexpr int Half = HeadDim / 2;
  LLMC_ROPE_FOR_PAIRS(i, Heads * Half) {
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
// Cache: [num_blocks, block_size, KvHeads, HeadDim]. Grid (T, Y).
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
  LLMC_ROPE_FOR_PAIRS(i, (Heads + KvHeads) * Half) {
    const int h = i / Half, j = i % Half;
    if (h >= Heads && slot < 0) break; // K pairs come last
    float c, sn;
    rope_cs(pos, inv_freq[j], c, sn);
    const int ia = h * HeadDim + rope_pair<HeadDim, Style>::a(j);
    const int ib = h * HeadDim + rope_pair<HeadDim, Style>::b(j);
    const float a = to_float(row[ia]), b = to_float(row[ib]);
    const Act ra = from_float<Act>(a * c - b * sn), rb = from_float<Act>(b * c + a * sn);
    if (h < Heads) {
      q_out[static_cast<i64>(t) * Heads * HeadDim + ia] = ra;
      q_out[static_cast<i64>(t) * Heads * HeadDim + ib] = rb;
    } else {
      const i64 base = static_cast<i64>(slot) * KvHeads * HeadDim - Heads * HeadDim;
      kcache[base + ia] = ra;
      kcache[base + ib] = rb;
    }
  }
  if (slot >= 0)
    LLMC_ROPE_FOR_PAIRS(i, KvHeads * HeadDim)
      vcache[static_cast<i64>(slot) * KvHeads * HeadDim + i] = row[(Heads + KvHeads) * HeadDim + i];
}

// The rotations of a fused QKV GEMM taken over by attention: Q [T, Heads *
// HeadDim] rotated in place, K [T, KvHeads * HeadDim] rotated into the cache
// slot slot_mapping[t], V copied there (negative slots: skipped). The values
// are those of rope() then kv_cache_write(), in one launch instead of three.
// Grid (T, Y): the emitter takes Y = cdiv((Heads + KvHeads) * HeadDim / 2,
// blockDim), one pair (and at most one V element) per thread.
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
  LLMC_ROPE_FOR_PAIRS(i, (Heads + KvHeads) * Half) {
    const int h = i / Half, j = i % Half;
    const int ia = rope_pair<HeadDim, Style>::a(j), ib = rope_pair<HeadDim, Style>::b(j);
    float c, sn;
    if (h < Heads) {
      Act* row = q + static_cast<i64>(t) * Heads * HeadDim + h * HeadDim;
      const float a = to_float(row[ia]), b = to_float(row[ib]);
      rope_cs(pos, freq_q[j], c, sn);
      row[ia] = from_float<Act>(a * c - b * sn);
      row[ib] = from_float<Act>(b * c + a * sn);
    } else if (slot >= 0) {
      const int kh = h - Heads;
      const Act* src = k + static_cast<i64>(t) * KW + kh * HeadDim;
      Act* dst = kcache + static_cast<i64>(slot) * KW + kh * HeadDim;
      const float a = to_float(src[ia]), b = to_float(src[ib]);
      rope_cs(pos, freq_k[j], c, sn);
      dst[ia] = from_float<Act>(a * c - b * sn);
      dst[ib] = from_float<Act>(b * c + a * sn);
    }
  }
  if (slot >= 0)
    LLMC_ROPE_FOR_PAIRS(i, KW) vcache[static_cast<i64>(slot) * KW + i] = v[static_cast<i64>(t) * KW + i];
}

// K and V rows [T, KvHeads * HeadDim] into the cache (no RoPE). Grid (T, Y).
template <int KvHeads, int HeadDim, class Act>
__device__ void kv_cache_write(const step_info& s, const Act* __restrict__ k, const Act* __restrict__ v,
                               Act* __restrict__ kcache, Act* __restrict__ vcache) {
  const int t = blockIdx.x;
  if (t >= s.num_tokens) return;
  const int slot = s.slot_mapping[t];
  if (slot < 0) return;
  constexpr int W = KvHeads * HeadDim;
  LLMC_ROPE_FOR_PAIRS(i, W) {
    kcache[static_cast<i64>(slot) * W + i] = k[static_cast<i64>(t) * W + i];
    vcache[static_cast<i64>(slot) * W + i] = v[static_cast<i64>(t) * W + i];
  }
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_NORM_ROPE_CUH_
