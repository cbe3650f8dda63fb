// llmc CUDA kernel library: attention.
//
// Paged attention: flash-decoding (splits + reduce) for short queries and
// flash-attention prefill on tensor cores.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_ATTENTION_CUH_
#define LLMC_CUDA_ATTENTION_CUH_

#include "llmc_cuda_gemm.cuh"

namespace llmc {
namespace cuda {

//===----------------------------------------------------------------------===//
// Paged attention, flash-decoding style. Token t of sequence s (found from
// query_starts) attends to cache positions first .. last, last =
// min(positions[t], context_lens[s] - 1), first = 0 or last - window + 1.
// The cache must already hold this step's K/V (rope_qkv_cache_write or
// kv_cache_write run first).
//
// paged_attention_decode: grid (splits, KvHeads, T), blockDim 32 * Warps.
// The len = last - first + 1 keys of token t are cut into n splits of `keys`
// keys each (the last one shorter), from len and the grid's splits C =
// gridDim.x:
//   MaxSplits == 0: n = cdiv(len, SplitKeys) splits of SplitKeys keys while
//                   that is at most C, else C splits of cdiv(len, C);
//   MaxSplits > 0:  n = min(cdiv(len, SplitKeys), MaxSplits, C),
//                   keys = cdiv(len, n) (n splits exactly, as SplitKeys >=
//                   MaxSplits): short contexts get one block per 64 keys
//                   (SplitKeys 64), long ones MaxSplits blocks whose share
//                   grows with the context, so the partials stay few.
// The runtime launches C = cdiv(longest context, SplitKeys) (the grid caps
// it at MaxSplits), or fewer where the step's tokens and kv heads give
// blocks enough to fill the GPU without splitting (SelectLaunches,
// kAttentionFillBlocksPerSm in runtime/exec/cuda_step_plan.h): a
// split costs the block's setup, its partials and its share of the merge,
// which at 256 sequences of 256 keys were most of the kernel's
// instructions. So a token's splits depend on its batch where the batch is
// large, as its GEMMs' summation order already does. Blocks past a token's
// n write empty partials (m = -1e30, l = 0, o = 0), which the merge takes
// as exact zeros.
// Block (split, g, t) covers keys [first + split * keys, ... + keys) for the
// G = Heads / KvHeads query heads sharing kv head g (each K/V row read once),
// in rounds of 32 keys per warp dealt out 8 at a time (lanes 8j .. 8j + 7 of
// warp w: keys round + (j * Warps + w) * 8 + 0..7, so that even 8 keys spread
// over all warps). Scores: lane = key (its whole K row, Q from shared
// memory, no shuffles); online softmax in base 2 (m per warp, l per lane),
// the probabilities through shared memory; P V: LPK lanes (HeadDim / 8
// rounded up to a power of two) share a key, 8 dims each, so each 16-byte
// load of V serves KPP = 32 / LPK keys, all of a round's V loads issued at
// once. The warps merge in shared memory. With gridDim.x == 1 the block
// writes `out` directly. Otherwise each block writes its partial state
// (unnormalized o and (m, l), attn_scratch below) and takes a ticket; the
// last block of (g, t) to finish merges all splits in split order (the
// order flash-decoding's separate reduction used, so the result is the same
// whoever finishes last) and writes `out`: no second launch.
//===----------------------------------------------------------------------===//

// The split attention's part of the runtime's f32 scratch (a.scratch, sized
// by the runtime's AttentionScratchFloats): a 4-float header, one ticket
// counter per (token, head) rounded up to 4, then the partials
// o [T, Heads, splits, HeadDim] and (m, l) [T, Heads, splits, 2]. The cache
// write that runs before each attention launch zeroes the counters
// (attn_counters_clear), so they never carry over from another step, layer
// or scratch layout.
struct attn_scratch {
  int* counters;
  float* part_o;
  float* part_ml;
};
template <int Heads, int HeadDim>
__device__ __forceinline__ attn_scratch attn_scratch_of(float* scratch, int tokens, int splits) {
  attn_scratch a;
  a.counters = reinterpret_cast<int*>(scratch + 4);
  a.part_o = scratch + 4 + ((static_cast<i64>(tokens) * Heads + 3) & ~static_cast<i64>(3));
  a.part_ml = a.part_o + static_cast<i64>(tokens) * Heads * splits * HeadDim;
  return a;
}
// Zeroes token blockIdx.x's Heads ticket counters; one block per token (any
// blockIdx.y) does it.
template <int Heads>
__device__ __forceinline__ void attn_counters_clear(float* scratch) {
  if (blockIdx.y != 0) return;
  int* c = reinterpret_cast<int*>(scratch + 4) + static_cast<i64>(blockIdx.x) * Heads;
  for (int i = threadIdx.x; i < Heads; i += blockDim.x) c[i] = 0;
}

__device__ __forceinline__ int seq_of_token(const step_info& s, int t) {
  // A decode step's token t is sequence t's one query: two independent
  // loads say so, where the search below is a chain of log2(S) dependent
  // ones that every block waits through before its first K/V load.
  if (t < s.num_seqs && s.query_starts[t] == t && s.query_starts[t + 1] == t + 1) return t;
  int lo = 0, hi = s.num_seqs - 1; // largest seq with query_starts[seq] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (s.query_starts[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Where token t's keys lie and how they split (see above).
struct decode_split {
  int seq, first, last; // keys first .. last (none when last < first)
  int n, keys;          // n splits of `keys` keys
};
template <int SplitKeys, int MaxSplits>
__device__ __forceinline__ decode_split decode_split_of(const step_info& s, int t, int window) {
  static_assert(SplitKeys > 0 && MaxSplits >= 0, "paged_attention: SplitKeys > 0, MaxSplits >= 0");
  static_assert(MaxSplits <= SplitKeys, "paged_attention: MaxSplits <= SplitKeys (n splits exactly)");
  decode_split d;
  d.seq = seq_of_token(s, t);
  d.last = min(s.positions[t], s.context_lens[d.seq] - 1);
  d.first = window > 0 ? max(0, d.last - window + 1) : 0;
  const int len = max(0, d.last - d.first + 1);
  const int want = (len + SplitKeys - 1) / SplitKeys, grid = static_cast<int>(gridDim.x);
  if (MaxSplits == 0 && want <= grid) {
    d.keys = SplitKeys;
    d.n = want;
  } else {
    d.n = min(want, MaxSplits > 0 ? min(MaxSplits, grid) : grid);
    d.keys = d.n > 0 ? (len + d.n - 1) / d.n : SplitKeys;
  }
  return d;
}

namespace detail {
// Gemma 2's soft-capping of an attention score: cap * tanh(x / cap), in the
// units the caller's scores are in (a cap scaled alike). tanhf, not the
// approximate tanh.approx.f32: the cap sits in the exponent of the softmax.
__device__ __forceinline__ float soft_cap(float x, float cap) { return cap * tanhf(x / cap); }

// 8 activations as loaded (16 bytes of half/bf16, 32 of float), converted
// to floats where they are used.
template <class Act> struct raw8 {
  static constexpr int W = static_cast<int>(sizeof(Act)) / 2; // uint4 words
  uint4 w[W];
  __device__ __forceinline__ void load(const Act* p) {
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = reinterpret_cast<const uint4*>(p)[i];
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = make_uint4(0, 0, 0, 0);
  }
};
__device__ __forceinline__ void cvt8(const raw8<float>& r, float v[8]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    v[4 * i] = __uint_as_float(r.w[i].x);
    v[4 * i + 1] = __uint_as_float(r.w[i].y);
    v[4 * i + 2] = __uint_as_float(r.w[i].z);
    v[4 * i + 3] = __uint_as_float(r.w[i].w);
  }
}
__device__ __forceinline__ void cvt8(const raw8<__half>& r, float v[8]) {
  const u32 w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { v[2 * i] = lo_f16(w[i]); v[2 * i + 1] = hi_f16(w[i]); }
}
__device__ __forceinline__ void cvt8(const raw8<__nv_bfloat16>& r, float v[8]) {
  const u32 w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { v[2 * i] = lo_bf16(w[i]); v[2 * i + 1] = hi_bf16(w[i]); }
}
// 2^x for the softmax: ex2.approx.ftz (relative error 2^-22, 0 for -inf),
// one instruction instead of exp2f's range checks around it.
__device__ __forceinline__ float fast_exp2(float x) {
#ifdef LLMC_CUDA_EMULATE
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
// __syncwarp for shared memory passed between a warp's lanes (the CPU
// emulation runs a warp's lanes up to its next shuffle, which orders them).
__device__ __forceinline__ void syncwarp() {
#ifndef LLMC_CUDA_EMULATE
  __syncwarp();
#endif
}
__host__ __device__ constexpr int pow2_at_least(int n) { return n <= 1 ? 1 : 2 * pow2_at_least((n + 1) / 2); }
} // namespace detail

namespace detail {
// The end of a decode block: the warps' states (max m, sum l and
// unnormalized o per query head, in shared memory) merged into the block's;
// with one split that is the output, otherwise the block's partial goes to
// the scratch and the last block of (kv head, token) to finish, by ticket,
// merges all splits in split order.
template <int Heads, int HeadDim, int G, int Warps, class Act>
__device__ void decode_merge(const float (&sm)[Warps][G], const float (&sl)[Warps][G],
                             const float (&so)[Warps][G][HeadDim], Act* __restrict__ out,
                             attn_scratch scratch, int t, int head0, int split) {
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
    const int head = head0 + h;
    if (splits == 1) {
      out[(static_cast<i64>(t) * Heads + head) * HeadDim + d] = from_float<Act>(L > 0.0f ? O / L : 0.0f);
    } else {
      const i64 ps = (static_cast<i64>(t) * Heads + head) * splits + split;
      scratch.part_o[ps * HeadDim + d] = O;
      if (d == 0) { scratch.part_ml[2 * ps] = M; scratch.part_ml[2 * ps + 1] = L; }
    }
  }
  if (splits == 1) return;
  // The last block of (g, t) merges the splits: each thread makes its
  // partials visible device-wide before thread 0 takes the ticket (the
  // counter of token t's head head0), and the last block reads them from L2
  // (__ldcg), never from a stale L1 line.
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicAdd(scratch.counters + static_cast<i64>(t) * Heads + head0, 1) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = threadIdx.x; i < G * HeadDim; i += blockDim.x) {
    const int head = head0 + i / HeadDim, d = i % HeadDim;
    const i64 base = (static_cast<i64>(t) * Heads + head) * splits;
    float M = -1e30f;
    for (int sp = 0; sp < splits; ++sp) M = fmaxf(M, __ldcg(scratch.part_ml + 2 * (base + sp)));
    float L = 0.0f, O = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
      const float f = exp2f(__ldcg(scratch.part_ml + 2 * (base + sp)) - M);
      L = fmaf(__ldcg(scratch.part_ml + 2 * (base + sp) + 1), f, L);
      O = fmaf(__ldcg(scratch.part_o + (base + sp) * HeadDim + d), f, O);
    }
    out[(static_cast<i64>(t) * Heads + head) * HeadDim + d] = from_float<Act>(L > 0.0f ? O / L : 0.0f);
  }
}
} // namespace detail

template <int Heads, int KvHeads, int HeadDim, class Act, int SplitKeys, int Warps, int MaxSplits = 0>
__device__ void paged_attention_decode(const step_info& s, const Act* __restrict__ q,
                                       const Act* __restrict__ kcache, const Act* __restrict__ vcache,
                                       Act* __restrict__ out, attn_scratch scratch, float scale,
                                       int window, float softcap = 0.0f) {
  static_assert(Heads % KvHeads == 0, "paged_attention: Heads must be a multiple of KvHeads");
  static_assert((HeadDim % 32 == 0 || (HeadDim < 32 && HeadDim % 8 == 0)) && HeadDim <= 256,
                "paged_attention: HeadDim 8, 16, 24 or a multiple of 32 up to 256");
  // Scores: lane = key. P V: LPK lanes per key, 8 dims each, KPP keys per pass.
  constexpr int G = Heads / KvHeads, KW = KvHeads * HeadDim;
  constexpr int LPK = detail::pow2_at_least((HeadDim + 7) / 8), KPP = 32 / LPK, NP = 32 / KPP;
  static_assert(LPK <= 32, "paged_attention: lane layout");
  __shared__ float qs[G][HeadDim];
  __shared__ float sp[Warps][32][G]; // a round's probabilities, [key lane][head]
  __shared__ float sm[Warps][G], sl[Warps][G];
  __shared__ float so[Warps][G][HeadDim];
  const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
  const int head0 = kvh * G; // the block's first query head
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sub = lane / LPK, d0 = (lane % LPK) * 8;
  const bool dims = d0 < HeadDim; // lanes past HeadDim (HeadDim 24, 96, ...) hold no dims
  const decode_split ds = decode_split_of<SplitKeys, MaxSplits>(s, t, window);
  const int k0 = ds.first + split * ds.keys;
  const int k1 = split < ds.n ? min(ds.last + 1, k0 + ds.keys) : k0;
  const float qscale = scale * 1.4426950408889634f; // softmax in base 2
  for (int i = threadIdx.x; i < G * HeadDim; i += blockDim.x)
    qs[i / HeadDim][i % HeadDim] =
        to_float(q[static_cast<i64>(t) * Heads * HeadDim + head0 * HeadDim + i]) * qscale;
  __syncthreads();
  const int* btab = s.block_tables + static_cast<i64>(ds.seq) * s.max_blocks;

  float m[G], l[G], o[G][8]; // m: the warp's; l: this lane's keys; o: this lane group's keys
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = -1e30f;
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) o[h][i] = 0.0f;
  }
  // Rounds of 32 keys per warp, dealt out 8 at a time: lanes 8j .. 8j + 7 of
  // warp w take keys round + (j * Warps + w) * 8 + 0..7, so that a short
  // range spreads over the warps; a warp's keys rise with its lanes.
  for (int r0 = k0; r0 < k1; r0 += Warps * 32) {
    if (r0 + warp * 8 >= k1) break; // warp-uniform: no key of this warp left
    const int key = r0 + ((lane >> 3) * Warps + warp) * 8 + (lane & 7);
    const bool valid = key < k1;
    const int slot = valid ? btab[key / s.block_size] * s.block_size + key % s.block_size : -1;
    float sc[G];
#pragma unroll
    for (int h = 0; h < G; ++h) sc[h] = 0.0f;
    if (valid) {
      const Act* kr = kcache + static_cast<i64>(slot) * KW + kvh * HeadDim;
#pragma unroll 4
      for (int d = 0; d < HeadDim; d += 8) {
        float kv[8];
        load8(kr + d, kv);
#pragma unroll
        for (int h = 0; h < G; ++h)
#pragma unroll
          for (int i = 0; i < 8; ++i) sc[h] = fmaf(qs[h][d + i], kv[i], sc[h]);
      }
      // q carries scale * log2(e): cap at softcap * log2(e).
      if (softcap > 0.0f)
#pragma unroll
        for (int h = 0; h < G; ++h) sc[h] = detail::soft_cap(sc[h], softcap * 1.4426950408889634f);
    } else {
#pragma unroll
      for (int h = 0; h < G; ++h) sc[h] = -__int_as_float(0x7f800000); // -inf
    }
    // Online softmax (m shared by the warp, l per lane).
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const float mn = fmaxf(m[h], warp_max(sc[h]));
      const float corr = detail::fast_exp2(m[h] - mn);
      const float p = detail::fast_exp2(sc[h] - mn); // 0 for masked keys
      m[h] = mn;
      l[h] = l[h] * corr + p;
      sp[warp][lane][h] = p;
#pragma unroll
      for (int i = 0; i < 8; ++i) o[h][i] *= corr;
    }
    detail::syncwarp();
    // P V: pass j holds lanes j * KPP + sub's keys; the nv valid lanes are a
    // prefix (8 per lane octet, warp-uniform count).
    int nv = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) nv += max(0, min(8, k1 - (r0 + (j * Warps + warp) * 8)));
    detail::raw8<Act> vr[NP];
#pragma unroll
    for (int j = 0; j < NP; ++j) {
      const int vs = __shfl_sync(0xffffffffu, slot, j * KPP + sub);
      if (j * KPP < nv && vs >= 0 && dims)
        vr[j].load(vcache + static_cast<i64>(vs) * KW + kvh * HeadDim + d0);
      else
        vr[j].zero();
    }
#pragma unroll
    for (int j = 0; j < NP; ++j) {
      if (j * KPP < nv) {
        float vf[8];
        detail::cvt8(vr[j], vf);
#pragma unroll
        for (int h = 0; h < G; ++h) {
          const float p = sp[warp][j * KPP + sub][h];
#pragma unroll
          for (int i = 0; i < 8; ++i) o[h][i] = fmaf(p, vf[i], o[h][i]);
        }
      }
    }
    detail::syncwarp(); // sp is rewritten next round
  }
  // Sum l over the warp and o over the lane groups, then merge the warps.
#pragma unroll
  for (int h = 0; h < G; ++h) {
    l[h] = warp_sum(l[h]);
#pragma unroll
    for (int x = LPK; x < 32; x <<= 1)
#pragma unroll
      for (int i = 0; i < 8; ++i) o[h][i] += __shfl_xor_sync(0xffffffffu, o[h][i], x);
    if (lane == 0) { sm[warp][h] = m[h]; sl[warp][h] = l[h]; }
    if (sub == 0 && dims)
#pragma unroll
      for (int i = 0; i < 8; ++i) so[warp][h][d0 + i] = o[h][i];
  }
  detail::decode_merge<Heads, HeadDim, G, Warps>(sm, sl, so, out, scratch, t, head0, split);
}

//===----------------------------------------------------------------------===//
// paged_attention_decode_mma: the same blocks, splits and merge as
// paged_attention_decode, with the keys on tensor cores. The G query heads
// of the block's kv head are the rows of the mma (rows G .. 15 zero), so
// each K/V element is multiplied by all G heads in one instruction instead
// of G FFMAs: the same bytes with about half the instructions per key (22
// in the SASS loop at 32/8 x 128, against about 40).
//
// Each warp takes 16 keys at a time (warp w: keys k0 + 16 (i Warps + w) +
// 0..15), straight from global memory into registers, no shared memory:
// lane (g, c) loads 16 bytes of keys g and g + 8 at dims 32 j + 8 c .. + 7
// for every 32-dim slice j, of K and of V.
// - S = Q K^T: the mma's k index runs over the dims in the order the lanes
//   hold them (the sum does not care), with Q's A fragments loaded in the
//   same order, so K's 16 bytes are B fragments as they are.
// - O += P V: P is S's C fragments (as in the prefill kernel); V's B
//   fragments need pairs of keys, so each 8x8 block (8 keys, the 8 dims
//   word w of 4 lanes hold) is transposed in registers (movmatrix). Lane
//   (g, c) then accumulates O[head g and g + 8][32 j + 8 c + 2 w + 0..1].
// The online softmax rescales lazily, as the prefill kernel does. Keys
// past the block's range load the range's last row and are masked.
// Needs 16-bit activations, HeadDim a multiple of 32 up to 128, G <= 16.
//===----------------------------------------------------------------------===//
template <int Heads, int KvHeads, int HeadDim, class Act, int SplitKeys, int Warps, int MaxSplits = 0>
__device__ void paged_attention_decode_mma(const step_info& s, const Act* __restrict__ q,
                                           const Act* __restrict__ kcache,
                                           const Act* __restrict__ vcache, Act* __restrict__ out,
                                           attn_scratch scratch, float scale, int window,
                                           float softcap = 0.0f) {
  static_assert(is_same<Act, __half>::value || is_same<Act, __nv_bfloat16>::value,
                "paged_attention_decode_mma: activations must be half or bf16");
  static_assert(HeadDim % 32 == 0 && HeadDim <= 128,
                "paged_attention_decode_mma: HeadDim a multiple of 32 up to 128");
  static_assert(Heads % KvHeads == 0 && Heads / KvHeads <= 16,
                "paged_attention_decode_mma: at most 16 query heads per kv head");
  constexpr int G = Heads / KvHeads, KW = KvHeads * HeadDim, D = HeadDim, J = D / 32;
  __shared__ float sm[Warps][G], sl[Warps][G];
  __shared__ float so[Warps][G][D];
  const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z;
  const int head0 = kvh * G;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, c4 = lane & 3;
  const decode_split ds = decode_split_of<SplitKeys, MaxSplits>(s, t, window);
  const int k0 = ds.first + split * ds.keys;
  const int k1 = split < ds.n ? min(ds.last + 1, k0 + ds.keys) : k0;
  const float qscale = scale * 1.4426950408889634f; // softmax in base 2
  const int* btab = s.block_tables + static_cast<i64>(ds.seq) * s.max_blocks;

  // Q's A fragments: rows gid and gid + 8 (heads head0 + gid, + 8; zeros
  // past G), k in the dims' lane order: step (j, u) holds dims
  // 32 j + 8 c4 + 4 u + 0..3, a0/a1 the first pair, a2/a3 the second.
  u32 qa[J][2][4];
  for (int j = 0; j < J; ++j) {
    uint4 r[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    for (int h = 0; h < 2; ++h)
      if (gid + 8 * h < G)
        r[h] = *reinterpret_cast<const uint4*>(
            q + (static_cast<i64>(t) * Heads + head0 + gid + 8 * h) * D + 32 * j + 8 * c4);
    qa[j][0][0] = r[0].x, qa[j][0][1] = r[1].x, qa[j][0][2] = r[0].y, qa[j][0][3] = r[1].y;
    qa[j][1][0] = r[0].z, qa[j][1][1] = r[1].z, qa[j][1][2] = r[0].w, qa[j][1][3] = r[1].w;
  }
  float m[2] = {-1e30f, -1e30f}, l[2] = {0.0f, 0.0f};
  float o[J][4][4]; // [slice][word][C fragment]
  for (int j = 0; j < J; ++j)
    for (int w = 0; w < 4; ++w)
      for (int i = 0; i < 4; ++i) o[j][w][i] = 0.0f;

  for (int key0 = k0 + warp * 16; key0 < k1; key0 += Warps * 16) {
    uint4 kx[2][J], vx[2][J]; // keys key0 + gid and key0 + 8 + gid
    for (int h = 0; h < 2; ++h) {
      const int key = min(key0 + 8 * h + gid, k1 - 1);
      const i64 row = (static_cast<i64>(btab[key / s.block_size]) * s.block_size +
                       key % s.block_size) * KW + kvh * D + 8 * c4;
      for (int j = 0; j < J; ++j) {
        kx[h][j] = *reinterpret_cast<const uint4*>(kcache + row + 32 * j);
        vx[h][j] = *reinterpret_cast<const uint4*>(vcache + row + 32 * j);
      }
    }
    // S = Q K^T: sc[h] covers keys key0 + 8 h + 0..7 (C fragment columns).
    float sc[2][4];
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 4; ++i) sc[h][i] = 0.0f;
      for (int j = 0; j < J; ++j) {
        const u32 b0[2] = {kx[h][j].x, kx[h][j].y}, b1[2] = {kx[h][j].z, kx[h][j].w};
        detail::mma_op<Act>::run(sc[h], qa[j][0], b0);
        detail::mma_op<Act>::run(sc[h], qa[j][1], b1);
      }
    }
    // Raw scores, scaled in the exponent: cap them at softcap / scale.
    if (softcap > 0.0f)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i) sc[h][i] = detail::soft_cap(sc[h][i], softcap / scale);
    if (key0 + 15 >= k1) // warp-uniform: the range ends in these 16 keys
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i)
          if (key0 + 8 * h + 2 * c4 + (i & 1) >= k1) sc[h][i] = -__int_as_float(0x7f800000);
    // Online softmax of rows gid (r 0) and gid + 8 (r 1), lazily rescaled.
    float corr[2] = {1.0f, 1.0f};
    bool moved = false;
    for (int r = 0; r < 2; ++r) {
      float mx = fmaxf(fmaxf(sc[0][2 * r], sc[0][2 * r + 1]), fmaxf(sc[1][2 * r], sc[1][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mt = mx * qscale;
      if (mt > m[r] + 8.0f) {
        corr[r] = detail::fast_exp2(m[r] - mt);
        m[r] = mt;
        l[r] *= corr[r];
        moved = true;
      }
    }
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) {
        sc[h][i] = detail::fast_exp2(sc[h][i] * qscale - m[i >> 1]);
        l[i >> 1] += sc[h][i];
      }
    if (__any_sync(0xffffffffu, moved))
      for (int j = 0; j < J; ++j)
        for (int w = 0; w < 4; ++w)
          for (int i = 0; i < 4; ++i) o[j][w][i] *= corr[i >> 1];
    // O += P V, word w of each slice: 8 keys x 8 dims per register, transposed.
    const u32 pa[4] = {pack2<Act>(sc[0][0], sc[0][1]), pack2<Act>(sc[0][2], sc[0][3]),
                       pack2<Act>(sc[1][0], sc[1][1]), pack2<Act>(sc[1][2], sc[1][3])};
    for (int j = 0; j < J; ++j) {
      const u32 v0[4] = {vx[0][j].x, vx[0][j].y, vx[0][j].z, vx[0][j].w};
      const u32 v1[4] = {vx[1][j].x, vx[1][j].y, vx[1][j].z, vx[1][j].w};
      for (int w = 0; w < 4; ++w) {
        const u32 b[2] = {movmatrix_trans(v0[w]), movmatrix_trans(v1[w])};
        detail::mma_op<Act>::run(o[j][w], pa, b);
      }
    }
  }
  // The warp's state into shared memory: l summed over the row's 4 lanes;
  // lane (gid, c4) holds dims 32 j + 8 c4 + 2 w + 0..1 of rows gid, gid + 8.
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int h = gid + 8 * r;
    if (h >= G) continue;
    if (c4 == 0) {
      sm[warp][h] = m[r];
      sl[warp][h] = l[r];
    }
    for (int j = 0; j < J; ++j)
      for (int w = 0; w < 4; ++w) {
        so[warp][h][32 * j + 8 * c4 + 2 * w] = o[j][w][2 * r];
        so[warp][h][32 * j + 8 * c4 + 2 * w + 1] = o[j][w][2 * r + 1];
      }
  }
  detail::decode_merge<Heads, HeadDim, G, Warps>(sm, sl, so, out, scratch, t, head0, split);
}

//===----------------------------------------------------------------------===//
// Paged attention for prefill, FlashAttention-2 style: a block holds
// BM = 16 * Warps query rows of one sequence and one head in registers (16
// per warp, as mma.sync A fragments) and streams the keys they may see
// through shared memory, BN = 64 at a time: S = Q K^T and O += P V on tensor
// cores (m16n8k16, f32 accumulators), the online softmax in base 2 between
// them. GQA: head h reads kv head h / (Heads / KvHeads).
//
// Full and masked tiles run in two loops (FA2's masking steps): a tile
// every row of the block sees whole (inside every row's causal bound and
// window) needs no mask and no per-warp test, so the first loop, over the
// full tiles, has neither; the second takes the tiles that cross a row's
// bounds (for a causal prefill from position 0, the BM / BN + 1 or fewer
// tiles at the diagonal; with a window, those at its start too), masks
// them, and lets a warp whose 16 rows see none of a tile's keys skip its
// math. The block's key range is the union of its rows'.
//
// The loads overlap the math with one buffer each for K and V (FA2's
// order): V(i) is fetched by cp.async while S(i) is computed, K(i+1) while
// the softmax and P V(i) run; two barriers per tile. Each thread copies
// CPT 16-byte chunks of one key row (TPR threads a row), so it finds its
// row in the paged cache itself, a tile ahead: one block-table load and
// no shared offsets. B fragments come from shared memory by ldmatrix (K)
// and ldmatrix.trans (V, kept [key][dim] as the cache holds it). The rows
// are padded to D + 8 elements, an odd number of 16-byte chunks, so the
// eight rows of every ldmatrix phase fall in distinct bank groups.
//
// Launch: grid (Heads, cdiv(Q, BM), S) for Q the longest query of the step,
// blockDim 32 * Warps. The query tiles run in reverse (blockIdx.y 0 is the
// last tile, which sees the most keys), so the longest blocks start first,
// and the heads of one kv head run side by side and share its K/V in L2.
// Blocks past their sequence's query exit at once.
//===----------------------------------------------------------------------===//
namespace detail {
// Threads per K/V row of a prefill tile: the largest power of two that
// divides the row's chunks and leaves every row a thread.
__host__ __device__ constexpr int prefill_threads_per_row(int chunks, int threads, int rows) {
  int t = 1;
  while (chunks % (2 * t) == 0 && 2 * t * rows <= threads) t *= 2;
  return t;
}
} // namespace detail

template <int Heads, int KvHeads, int HeadDim, class Act, int Warps>
__device__ void paged_attention_prefill(const step_info& s, const Act* __restrict__ q,
                                        const Act* __restrict__ kcache,
                                        const Act* __restrict__ vcache, Act* __restrict__ out,
                                        float scale, int window, float softcap = 0.0f) {
  static_assert(is_same<Act, __half>::value || is_same<Act, __nv_bfloat16>::value,
                "paged_attention_prefill: activations must be half or bf16");
  static_assert(HeadDim % 16 == 0 && HeadDim <= 128,
                "paged_attention_prefill: HeadDim a multiple of 16 up to 128");
  static_assert(Heads % KvHeads == 0, "paged_attention_prefill: Heads must be a multiple of KvHeads");
  static_assert(Warps >= 2 && Warps <= 16, "paged_attention_prefill: 2 to 16 warps");
  constexpr int BM = 16 * Warps, BN = 64, D = HeadDim, KW = KvHeads * HeadDim, G = Heads / KvHeads;
  constexpr int Threads = 32 * Warps, LD = D + 8;
  constexpr int KD = D / 16, NT = BN / 8, ND = D / 8;
  constexpr int CPR = D / 8, TPR = detail::prefill_threads_per_row(CPR, Threads, BN),
                CPT = CPR / TPR;
  __shared__ __align__(16) Act Ks[BN * LD]; // [key][dim]
  __shared__ __align__(16) Act Vs[BN * LD]; // [key][dim]
  __shared__ int bounds[Warps][4];
  const int seq = blockIdx.z, head = blockIdx.x, kvh = head / G;
  const int qs0 = s.query_starts[seq], qlen = s.query_starts[seq + 1] - qs0;
  const int m0 = (gridDim.y - 1 - blockIdx.y) * BM;
  if (m0 >= qlen) return;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, t4 = lane & 3;
  const int ctx = s.context_lens[seq];
  const int* btab = s.block_tables + static_cast<i64>(seq) * s.max_blocks;

  // This thread's two rows (C fragment rows gid and gid + 8 of its warp):
  // keys first .. last; rows past the query see none.
  int row[2], last[2], first[2];
  for (int i = 0; i < 2; ++i) {
    row[i] = m0 + warp * 16 + gid + 8 * i;
    last[i] = row[i] < qlen ? min(s.positions[qs0 + row[i]], ctx - 1) : -1;
    first[i] = row[i] < qlen && window > 0 ? max(0, last[i] - window + 1) : 0;
  }
  // The warp's key range (the union of its rows': wfirst .. wlast), and the
  // keys all of its rows see (the intersection, over the rows of the query
  // only: wsee_from .. wsee_to), then the block's.
  constexpr int kNone = 1 << 30;
  int wfirst = min(row[0] < qlen ? first[0] : kNone, row[1] < qlen ? first[1] : kNone);
  int wlast = max(last[0], last[1]);
  int wsee_from = max(row[0] < qlen ? first[0] : -1, row[1] < qlen ? first[1] : -1);
  int wsee_to = min(row[0] < qlen ? last[0] : kNone, row[1] < qlen ? last[1] : kNone);
  for (int o = 16; o > 0; o >>= 1) {
    wfirst = min(wfirst, __shfl_xor_sync(0xffffffffu, wfirst, o));
    wlast = max(wlast, __shfl_xor_sync(0xffffffffu, wlast, o));
    wsee_from = max(wsee_from, __shfl_xor_sync(0xffffffffu, wsee_from, o));
    wsee_to = min(wsee_to, __shfl_xor_sync(0xffffffffu, wsee_to, o));
  }
  if (lane == 0) {
    bounds[warp][0] = wfirst;
    bounds[warp][1] = wlast;
    bounds[warp][2] = wsee_from;
    bounds[warp][3] = wsee_to;
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
  __syncthreads();
  int klo = kNone, khi = -1, see_from = -1, see_to = kNone;
  for (int w = 0; w < Warps; ++w) {
    klo = min(klo, bounds[w][0]);
    khi = max(khi, bounds[w][1]);
    see_from = max(see_from, bounds[w][2]);
    see_to = min(see_to, bounds[w][3]);
  }
  const int tiles = khi >= klo ? (khi - klo) / BN + 1 : 0;
  // Full tiles: klo + j * BN >= see_from and klo + j * BN + BN - 1 <= see_to,
  // j in [jf0, jf1). They run first, then the masked ones in key order.
  const int jf0 = min(tiles, (see_from - klo + BN - 1) / BN);
  const int jf1 = max(jf0, see_to - klo - BN + 1 >= 0 ? (see_to - klo - BN + 1) / BN + 1 : 0);
  const int nfull = jf1 - jf0;
  auto tile_key = [&](int i) {
    const int mi = i - nfull;
    return klo + (i < nfull ? jf0 + i : mi < jf0 ? mi : mi + nfull) * BN;
  };

  // This thread's part of a tile's K or V rows: chunks j, j + TPR, ... of
  // row krow (j = tid % TPR), so that the TPR threads of a row copy TPR
  // adjacent chunks per cp.async (whole 32-byte sectors). Its cache
  // element is found a tile ahead: block table and block_size division, by
  // a float reciprocal corrected to exact (exact for keys below 2^24: the
  // float key is exact, the product at most one off). Keys past khi load
  // key khi's row again: every row masks them (last <= khi), so their
  // probabilities are exact zeros and their finite values never count.
  const int krow = tid / TPR, ch0 = (tid % TPR) * 8;
  const bool loads = krow < BN;
  const int bs = s.block_size;
  const float rbs = 1.0f / float(bs);
  auto cache_elem = [&](int i) -> i64 {
    const int key = min(tile_key(i) + krow, khi);
    int b = static_cast<int>(float(key) * rbs), r = key - b * bs;
    if (r < 0) {
      --b;
      r += bs;
    } else if (r >= bs) {
      ++b;
      r -= bs;
    }
    return (static_cast<i64>(btab[b]) * bs + r) * KW + kvh * D + ch0;
  };
  const int kslot = min(krow, BN - 1) * LD + ch0;
  const shared_addr kdst = to_shared(Ks + kslot), vdst = to_shared(Vs + kslot);
  auto load = [&](shared_addr dst, const Act* src) {
    if (loads)
      for (int c = 0; c < CPT; ++c) cp_async16(dst + c * TPR * 16, src + c * TPR * 8, true);
    cp_async_commit();
  };

  const float qscale = scale * 1.4426950408889634f; // softmax in base 2
  float m[2] = {-1e30f, -1e30f}, l[2] = {0.0f, 0.0f};
  float o[ND][4];
  for (int n = 0; n < ND; ++n)
    for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
  // ldmatrix lane addresses (elements): K rows for key octet pairs, V rows
  // for 16-key steps of dim octet pairs.
  const int kaddr = ((lane >> 4) * 8 + (lane & 7)) * LD + ((lane >> 3) & 1) * 8;
  const int vaddr = (((lane >> 3) & 1) * 8 + (lane & 7)) * LD + (lane >> 4) * 8;

  i64 elem = 0;
  if (tiles > 0) {
    elem = loads ? cache_elem(0) : 0;
    load(kdst, kcache + elem);
  }
  // One tile, the it-th of the order above; `masked` on the second loop.
  // It is a constant at each call: the lambda is inlined into both loops
  // and each copy specialized (the SASS has the two loops, 519 and 644
  // instructions at D = 128).
  auto tile = [&](int it, bool masked) {
    const int kt = tile_key(it);
    cp_async_wait<0>();
    __syncthreads(); // K(i) is in; every warp is past P V(i-1) and the V(i-1) load
    load(vdst, vcache + elem);
    if (loads && it + 1 < tiles) elem = cache_elem(it + 1);
    // Whether any of this warp's rows sees a key of the tile (warp-uniform;
    // in a full tile, every row of the query does).
    const bool active = !masked || (kt <= wlast && kt + BN - 1 >= wfirst);
    float sc[NT][4];
    if (active) {
      // S = Q K^T: sc[n] covers keys kt + 8n .. 8n + 7.
      for (int n = 0; n < NT; ++n)
        for (int i = 0; i < 4; ++i) sc[n][i] = 0.0f;
      for (int kk = 0; kk < KD; ++kk)
        for (int n = 0; n < NT; n += 2) {
          u32 b[4];
          ldmatrix_x4(b, Ks + kaddr + n * 8 * LD + kk * 16);
          const u32 b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          detail::mma_op<Act>::run(sc[n], qa[kk], b0);
          detail::mma_op<Act>::run(sc[n + 1], qa[kk], b1);
        }
      // Raw scores, scaled in the exponent: cap them at softcap / scale.
      if (softcap > 0.0f)
        for (int n = 0; n < NT; ++n)
          for (int i = 0; i < 4; ++i) sc[n][i] = detail::soft_cap(sc[n][i], softcap / scale);
    }
    cp_async_wait<0>();
    __syncthreads(); // V(i) is in; K(i) is consumed
    if (it + 1 < tiles) load(kdst, kcache + elem);
    if (!active) return;
    // Masks, only where a key of the tile is outside one of the two rows.
    if (masked && (kt + BN - 1 > min(last[0], last[1]) || kt < max(first[0], first[1])))
      for (int n = 0; n < NT; ++n)
        for (int i = 0; i < 4; ++i) {
          const int r = i >> 1, key = kt + n * 8 + t4 * 2 + (i & 1);
          if (key > last[r] || key < first[r]) sc[n][i] = -__int_as_float(0x7f800000);
        }
    // The online softmax of both rows, the scale folded into the exponent
    // (scale > 0: the maximum of the raw scores is the maximum). A row's
    // reference maximum m moves only when the tile's exceeds it by more than
    // 8 (FlashAttention-4's lazy rescaling): l and O share m, so the result
    // is the same, and probabilities up to 2^8 lose nothing in f32 or in the
    // 16-bit P. O's rescale (4 * ND multiplies) then runs only in the tiles
    // where a row of the warp moved, in practice the first few.
    const float ninf = -__int_as_float(0x7f800000);
    float mx[2] = {ninf, ninf}; // a row masked so far keeps m = -1e30
    for (int n = 0; n < NT; ++n)
      for (int i = 0; i < 4; ++i) mx[i >> 1] = fmaxf(mx[i >> 1], sc[n][i]);
    float corr[2] = {1.0f, 1.0f};
    bool moved = false;
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float mt = mx[r] * qscale;
      if (mt > m[r] + 8.0f) {
        corr[r] = detail::fast_exp2(m[r] - mt);
        m[r] = mt;
        l[r] *= corr[r]; // this thread's share of the row sum; summed at the end
        moved = true;
      }
    }
    for (int n = 0; n < NT; ++n)
      for (int i = 0; i < 4; ++i) {
        sc[n][i] = detail::fast_exp2(sc[n][i] * qscale - m[i >> 1]);
        l[i >> 1] += sc[n][i];
      }
    if (__any_sync(0xffffffffu, moved))
      for (int n = 0; n < ND; ++n)
        for (int i = 0; i < 4; ++i) o[n][i] *= corr[i >> 1];
    // O += P V: the C fragments of two key octets are the A fragment of 16 keys.
    for (int kk = 0; kk < BN / 16; ++kk) {
      const u32 pa[4] = {pack2<Act>(sc[2 * kk][0], sc[2 * kk][1]),
                         pack2<Act>(sc[2 * kk][2], sc[2 * kk][3]),
                         pack2<Act>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                         pack2<Act>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
      for (int n = 0; n < ND; n += 2) {
        u32 b[4];
        ldmatrix_x4_trans(b, Vs + vaddr + kk * 16 * LD + n * 8);
        const u32 b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        detail::mma_op<Act>::run(o[n], pa, b0);
        detail::mma_op<Act>::run(o[n + 1], pa, b1);
      }
    }
  };
  for (int i = 0; i < nfull; ++i) tile(i, false);
  for (int i = nfull; i < tiles; ++i) tile(i, true);

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

#endif // LLMC_CUDA_ATTENTION_CUH_
