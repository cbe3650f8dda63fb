// llmc CUDA kernel library: sampling on the device.
//
// The device half of the sampler (issue 27: only token ids cross PCIe, not
// a step's logits). Each kernel gives, row for row, the token the host
// sampler (runtime/src/sample/sampler.cc) picks from the same f32 logits.
// The runtime launches them after a step's LM head (cuda_abi.h's sampler
// entry), one block a pick: the repetition, presence and frequency
// penalties first, then greedy, or seeded draws with temperature, top-k (up
// to MaxTopK), top-p over the top-k and min-p, or temperature and min-p over
// the whole vocabulary; and the logprobs a pick asks for. A draw's random
// number comes from llmc_cuda_philox.cuh, the host sampler's generator, and
// every sum runs in the host's order, so a seeded request gives the same
// tokens on either side, up to last-bit differences of expf and logf
// between the GPU's and the C library's.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_SAMPLE_CUH_
#define LLMC_CUDA_SAMPLE_CUH_

#include "llmc_cuda_common.cuh"
#include "llmc_cuda_philox.cuh"

namespace llmc {
namespace cuda {

namespace detail {
// A logit as the host sampler reads it: NaN is masked (-inf), +inf the
// largest float, so that a row's best is a number.
__device__ __forceinline__ float sample_clean(float v) {
  if (v != v) return -__int_as_float(0x7f800000);
  return fminf(v, 3.402823466e38f);
}
// (value, id) with the higher value first, then the lower id: the host's
// greedy order (a strict total order, so any reduction tree agrees).
__device__ __forceinline__ bool sample_better(float v, int id, float bv, int bid) {
  return v > bv || (v == bv && id < bid);
}
// The warp's best (value, id) in every lane.
__device__ __forceinline__ void sample_warp_best(float& bv, int& bid) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oid = __shfl_xor_sync(0xffffffffu, bid, o);
    if (sample_better(ov, oid, bv, bid)) bv = ov, bid = oid;
  }
}
} // namespace detail

// The best (value, id) of one row of `vocab` f32 logits, in thread 0 of
// the block (Threads of them: whole warps, up to 1024): the host sampler's
// greedy choice (GreedyToken). Ties go to the lowest id, NaN is never
// chosen unless nothing else is, the `num_masked` ids of `masked` (shared
// memory) count as -inf, and a row of nothing above -inf gives 0 (every id
// ties). Each thread scans ids tid, tid + Threads, ... (coalesced), then the
// block reduces (value, id) pairs in that order.
template <int Threads>
__device__ int sample_argmax_block(const float* __restrict__ x, int vocab, const int* masked,
                                   int num_masked) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "sample_argmax_block: whole warps, at most 1024");
  __shared__ float best_v[Threads / 32];
  __shared__ int best_id[Threads / 32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float bv = -__int_as_float(0x7f800000);
  int bid = 0x7fffffff;
  for (int i = tid; i < vocab; i += Threads) {
    float v = detail::sample_clean(x[i]);
    for (int m = 0; m < num_masked; ++m)
      if (masked[m] == i) v = -__int_as_float(0x7f800000);
    if (detail::sample_better(v, i, bv, bid)) bv = v, bid = i;
  }
  detail::sample_warp_best(bv, bid);
  if (lane == 0) best_v[warp] = bv, best_id[warp] = bid;
  __syncthreads();
  if (warp == 0) {
    bv = lane < Threads / 32 ? best_v[lane] : -__int_as_float(0x7f800000);
    bid = lane < Threads / 32 ? best_id[lane] : 0x7fffffff;
    detail::sample_warp_best(bv, bid);
  }
  return bid;
}

namespace detail {
// The order-preserving key of a cleaned logit: a larger logit has a larger
// key; -0 and +0, which compare equal, share one.
__device__ __forceinline__ unsigned sample_key(float v) {
  const unsigned u = __float_as_uint(v + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// Logit i of a row as the host sampler sees it: cleaned, and -inf for a
// masked id.
__device__ __forceinline__ float sample_value(const float* x, int i, const int* masked,
                                              int num_masked) {
  for (int m = 0; m < num_masked; ++m)
    if (masked[m] == i) return -__int_as_float(0x7f800000);
  return sample_clean(x[i]);
}
// Exclusive prefix sum of one int a thread, in thread order; `scan` is
// Threads + 1 ints of shared memory, scan[Threads] the total afterwards.
// Thread 0 adds up: a few hundred adds, outside every loop over the row.
template <int Threads>
__device__ int sample_block_scan(int x, int* scan) {
  scan[threadIdx.x] = x;
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int t = 0; t < Threads; ++t) {
      const int v = scan[t];
      scan[t] = run;
      run += v;
    }
    scan[Threads] = run;
  }
  __syncthreads();
  return scan[threadIdx.x];
}
// The largest logit of a row as sample_value reads it (all threads get
// it; -inf when nothing is above).
template <int Threads>
__device__ float sample_row_max(const float* x, int vocab, const int* masked, int num_masked) {
  __shared__ float scratch[Threads / 32];
  float v = -__int_as_float(0x7f800000);
  for (int i = threadIdx.x; i < vocab; i += Threads) v = fmaxf(v, sample_value(x, i, masked, num_masked));
  v = warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < Threads / 32; ++w) v = fmaxf(v, scratch[w]);
  return v;
}

// The chunks a draw over survivors in id order is summed and walked by,
// and a log-softmax's normalizer summed by, one thread each: the host
// sampler's count (llmc_cuda_philox.cuh).
constexpr int kSampleChunks = philox::kDrawChunks;

struct sample_cand {
  float v;
  int id;
};
__device__ __forceinline__ bool sample_cand_better(const sample_cand& a, const sample_cand& b) {
  return sample_better(a.v, a.id, b.v, b.id);
}

// The host's draw over top-k survivors sorted best first (Sampler::Prepare
// and Sample with `sorted`), one thread: top-p's prefix, min-p's prefix,
// then the weights' running sum against u times their total. Every float
// op and double sum in the host's order. top-p's mass is the survivors'
// (vocab_mass < 0), or the whole vocabulary's (top-p without top-k, the
// survivors its kTopPCandidates best: sample_vocab_mass).
template <class Pick>
__device__ int sample_sorted_draw(const sample_cand* cand, int n, const Pick& p, double u,
                                  double vocab_mass = -1.0) {
  if (n == 0) return 0;
  const float max_logit = cand[0].v;
  if (p.top_p < 1.0f && n > 1) {
    double mass = vocab_mass;
    if (mass < 0) {
      mass = 0;
      for (int i = 0; i < n; ++i) mass += (double)expf(cand[i].v - max_logit);
    }
    const double target = (double)p.top_p * mass;
    double cum = 0;
    for (int i = 0; i < n; ++i) {
      cum += (double)expf(cand[i].v - max_logit);
      if (cum >= target) {
        n = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0) {  // sorted: the survivors are a prefix
    const float threshold = max_logit + logf(p.min_p);
    int keep = 0;
    while (keep < n && !(cand[keep].v < threshold)) ++keep;
    n = keep;
  }
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += (double)expf((cand[i].v - max_logit) / p.temperature);
  if (!(sum > 0)) return 0;
  const double target = u * sum;
  double acc = 0;
  int token = 0;
  for (int i = 0; i < n; ++i) {
    const double w = (double)expf((cand[i].v - max_logit) / p.temperature);
    if (w <= 0) continue;
    acc += w;
    token = cand[i].id;  // the last positive one if rounding leaves acc short
    if (target < acc) break;
  }
  return token;
}

// The k best tokens above -inf (1 <= k <= MaxTopK), best first, into
// `cand` (MaxTopK entries of shared memory); returns how many (fewer than
// k where fewer are above -inf) to every thread. The k-th best key by a
// radix select (4 passes of 8 bits, histograms in shared memory), the
// survivors gathered in id order (all keys above it, and the lowest ids of
// the keys equal to it, as the host's heap keeps), sorted by a bitonic
// sort.
template <int Threads, int MaxTopK>
__device__ int sample_select_top(const float* x, int vocab, const int* masked, int num_masked,
                                 int k, sample_cand* cand) {
  static_assert((MaxTopK & (MaxTopK - 1)) == 0, "sample_select_top: MaxTopK a power of 2");
  __shared__ int hist[256];
  __shared__ int scan[Threads + 1];
  __shared__ unsigned select[2];  // the key prefix so far; ranks still wanted
  const int tid = threadIdx.x;
  k = k < MaxTopK ? k : MaxTopK;
  // Each thread's ids: one contiguous run, so the gather below keeps id order.
  const int run = (vocab + Threads - 1) / Threads;
  const int lo = tid * run < vocab ? tid * run : vocab;
  const int hi = lo + run < vocab ? lo + run : vocab;
  int mine = 0;
  for (int i = lo; i < hi; ++i) mine += sample_value(x, i, masked, num_masked) != -__int_as_float(0x7f800000);
  sample_block_scan<Threads>(mine, scan);
  const int candidates = scan[Threads];
  __syncthreads();
  const bool all = candidates <= k;
  unsigned kth = 0;
  int ties = 0;
  if (!all) {
    if (tid == 0) select[0] = 0, select[1] = unsigned(k);
    unsigned covered = 0;  // the key bits select[0] has settled
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = tid; b < 256; b += Threads) hist[b] = 0;
      __syncthreads();
      const unsigned prefix = select[0];
      for (int i = lo; i < hi; ++i) {
        const float v = sample_value(x, i, masked, num_masked);
        if (v == -__int_as_float(0x7f800000)) continue;
        const unsigned key = sample_key(v);
        if ((key & covered) == prefix) atomicAdd(&hist[(key >> shift) & 255], 1);
      }
      __syncthreads();
      if (tid == 0) {
        unsigned want = select[1], above = 0;
        int b = 255;
        for (; b > 0 && above + unsigned(hist[b]) < want; --b) above += unsigned(hist[b]);
        select[0] = prefix | (unsigned(b) << shift);
        select[1] = want - above;
      }
      covered |= 255u << shift;
      __syncthreads();
    }
    kth = select[0];
    ties = int(select[1]);
  }
  // Gather: this thread's keys above the k-th, and its ties while the
  // lowest-id ties still want some.
  int above = 0, tied = 0;
  for (int i = lo; i < hi; ++i) {
    const float v = sample_value(x, i, masked, num_masked);
    if (v == -__int_as_float(0x7f800000)) continue;
    const unsigned key = sample_key(v);
    above += all || key > kth;
    tied += !all && key == kth;
  }
  const int ties_before = sample_block_scan<Threads>(tied, scan);
  __syncthreads();
  int take_ties = ties - ties_before;
  take_ties = take_ties < 0 ? 0 : (take_ties > tied ? tied : take_ties);
  int at = sample_block_scan<Threads>(above + take_ties, scan);
  const int n = scan[Threads];
  for (int i = lo; i < hi; ++i) {
    const float v = sample_value(x, i, masked, num_masked);
    if (v == -__int_as_float(0x7f800000)) continue;
    const unsigned key = sample_key(v);
    bool keep = all || key > kth;
    if (!keep && key == kth && take_ties > 0) keep = true, --take_ties;
    if (keep) cand[at++] = sample_cand{v, i};
  }
  // Bitonic sort of the survivors, best first; the padding sorts last.
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + tid; i < size; i += Threads) cand[i] = sample_cand{-__int_as_float(0x7f800000), 0x7fffffff};
  __syncthreads();
  for (int span = 2; span <= size; span <<= 1) {
    for (int stride = span >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < size; i += Threads) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const sample_cand a = cand[i], b = cand[j];
        const bool best_first = (i & span) == 0;
        if (best_first ? sample_cand_better(b, a) : sample_cand_better(a, b)) cand[i] = b, cand[j] = a;
      }
      __syncthreads();
    }
  }
  return n;
}

// The host's chunked order of a sum over the vocabulary (sampler.h's
// kDrawChunks): part[c] = weight(i) summed over chunk c's ids in order, one
// thread a chunk (no barrier: the caller's hands part[] on), and the
// chunks' total in order, by one thread. Rolled: unrolled, ptxas for sm_80
// keeps all 256 partials in registers and spills them.
template <int Threads, class Weight>
__device__ void sample_chunk_parts(int vocab, const Weight& weight, double* part) {
  const int chunk = (vocab + kSampleChunks - 1) / kSampleChunks;
  for (int c = threadIdx.x; c < kSampleChunks; c += Threads) {
    double s = 0;
    const int end = (c + 1) * chunk < vocab ? (c + 1) * chunk : vocab;
    for (int i = c * chunk; i < end; ++i) s += weight(i);
    part[c] = s;
  }
}
__device__ inline double sample_parts_total(const double* part) {
  double sum = 0;
#pragma unroll 1
  for (int c = 0; c < kSampleChunks; ++c) sum += part[c];
  return sum;
}

// exp(v - max_logit) over the whole vocabulary (masked ids and -inf add
// 0), summed by the host's chunks (Sampler::VocabMass). The result in
// thread 0.
template <int Threads>
__device__ double sample_vocab_mass(const float* x, int vocab, const int* masked, int num_masked,
                                    float max_logit) {
  __shared__ double part[kSampleChunks];
  sample_chunk_parts<Threads>(
      vocab, [&](int i) { return (double)expf(sample_value(x, i, masked, num_masked) - max_logit); },
      part);
  __syncthreads();
  return threadIdx.x == 0 ? sample_parts_total(part) : 0.0;
}

// Temperature and min-p over the whole vocabulary (no top-k, no top-p): the
// survivors in id order, summed and walked by 256 chunks of the vocabulary
// as the host sampler does (sampler.h's kDrawChunks), one thread a chunk;
// thread 0 finds the chunk and walks it. Returns the token in thread 0.
template <int Threads, class Pick>
__device__ int sample_chunked(const float* x, int vocab, const int* masked, int num_masked,
                              const Pick& p, double u) {
  __shared__ double part[kSampleChunks];
  const float max_logit = sample_row_max<Threads>(x, vocab, masked, num_masked);
  if (max_logit == -__int_as_float(0x7f800000)) return 0;  // nothing to draw
  const bool min_p = p.min_p > 0;
  const float threshold = min_p ? max_logit + logf(p.min_p) : 0.0f;
  const int chunk = (vocab + kSampleChunks - 1) / kSampleChunks;
  // The weight of id i, or 0 for one that does not survive.
  auto weight = [&](int i) -> double {
    const float v = sample_value(x, i, masked, num_masked);
    if (v == -__int_as_float(0x7f800000) || (min_p && v < threshold)) return 0.0;
    return (double)expf((v - max_logit) / p.temperature);
  };
  sample_chunk_parts<Threads>(vocab, weight, part);
  __syncthreads();
  if (threadIdx.x != 0) return 0;
  const double sum = sample_parts_total(part);
  if (!(sum > 0)) return 0;
  const double target = u * sum;
  // The chunk the target falls in (past every chunk by rounding: the last
  // with weight), then the survivor in it.
  int c = 0;
  double acc = 0, before = 0;
#pragma unroll 1
  for (int k = 0; k < kSampleChunks; ++k) {
    if (part[k] <= 0) continue;
    c = k;
    before = acc;
    if (target < acc + part[k]) break;
    acc += part[k];
  }
  const double left = target - before;
  const int end = (c + 1) * chunk < vocab ? (c + 1) * chunk : vocab;
  double run = 0;
  int token = 0;
  for (int i = c * chunk; i < end; ++i) {
    const double w = weight(i);
    if (w <= 0) continue;
    run += w;
    token = i;
    if (left < run) break;
  }
  return token;
}
// The raw log-softmax's logprobs of a pick (Sampler::ComputeLogprobs):
// out[0] the token's, out[1..n] the n best tokens above -inf, best first
// (token -1 past the last), by thread 0. The normalizer sums exp by the
// chunks of a draw, one thread a chunk, as the host does. `cand`: MaxTopK
// entries of shared memory.
template <int Threads, int MaxTopK, class Logprob>
__device__ void sample_logprobs(const float* x, int vocab, const int* masked, int num_masked,
                                int token, int n, sample_cand* cand, Logprob* out) {
  __shared__ double part[kSampleChunks];
  const float max_logit = sample_row_max<Threads>(x, vocab, masked, num_masked);
  if (max_logit == -__int_as_float(0x7f800000)) {  // everything masked: no distribution
    if (threadIdx.x == 0) {
      out[0].token = token, out[0].logprob = -__int_as_float(0x7f800000);
      for (int i = 1; i <= n; ++i) out[i].token = -1, out[i].logprob = 0;
    }
    return;
  }
  sample_chunk_parts<Threads>(
      vocab, [&](int i) { return (double)expf(sample_value(x, i, masked, num_masked) - max_logit); },
      part);
  // The select's barriers also hand part[] to thread 0; without a select (a
  // forced pick's lone logprob) a barrier of its own does.
  int best = 0;
  if (n > 0)
    best = sample_select_top<Threads, MaxTopK>(x, vocab, masked, num_masked, n, cand);
  else
    __syncthreads();
  if (threadIdx.x != 0) return;
  const double sum = sample_parts_total(part);
  const double log_z = (double)max_logit + log(sum);
  out[0].token = token;
  out[0].logprob = (float)((double)sample_value(x, token, masked, num_masked) - log_z);
  for (int i = 0; i < n; ++i) {
    out[1 + i].token = i < best ? cand[i].id : -1;
    out[1 + i].logprob = i < best ? (float)((double)cand[i].v - log_z) : 0.0f;
  }
}
} // namespace detail

// The ABI's sampler (cuda_abi.h): block p picks the token of row
// picks[p].row of `logits` ([rows, vocab] f32) into ids[p], never one of
// masked[picks[p].mask_begin, + mask_count) (at most MaxMasked), after the
// penalties of penalties[penalty_begin, + penalty_count) (at most
// MaxPenalties distinct tokens; the row keeps them): greedy at
// temperature 0, else a seeded draw (Philox at (seed, draw)) with top-k up
// to MaxTopK (and top-p, min-p over its survivors), top-p without top-k
// over the MaxTopK best (the host's kTopPCandidates) with the whole
// vocabulary's mass, or temperature and min-p alone; then,
// when the pick asks (at most MaxLogprobs), its logprobs into
// lps[picks[p].logprob_begin ...]. Every choice and logprob is the host
// sampler's (sampler.h) from the same logits. Launch: grid (picks), Threads
// threads.
template <int Threads, int MaxMasked, int MaxTopK, int MaxLogprobs, int MaxPenalties, class Pick,
          class Logprob, class Penalty>
__device__ void sample_picks(float* logits, int vocab, const Pick* __restrict__ picks,
                             const int* __restrict__ masked, int* __restrict__ ids,
                             Logprob* __restrict__ lps, const Penalty* __restrict__ penalties) {
  static_assert(MaxLogprobs <= MaxTopK, "sample_picks: the logprobs' best come from the top-k select");
  __shared__ int mask[MaxMasked];
  __shared__ detail::sample_cand cand[MaxTopK];
  __shared__ float raw[MaxPenalties];
  __shared__ int chosen;
  const Pick p = picks[blockIdx.x];
  const int num_masked = p.mask_count < MaxMasked ? p.mask_count : MaxMasked;
  for (int m = threadIdx.x; m < num_masked; m += Threads) mask[m] = masked[p.mask_begin + m];
  float* x = logits + (long long)p.row * vocab;
  // The penalties, in place in the row (each pick has a row of its own),
  // the raw logits kept in `raw` and put back once the token is chosen.
  // The host's float arithmetic, rounded op by op (no fused multiply-add).
  const int num_penalized = p.penalty_count < MaxPenalties ? p.penalty_count : MaxPenalties;
  for (int j = threadIdx.x; j < num_penalized; j += Threads) {
    const Penalty e = penalties[p.penalty_begin + j];
    const float v = x[e.token];
    raw[j] = v;
    float c = detail::sample_clean(v);
    c = c > 0 ? c / p.repetition_penalty : c * p.repetition_penalty;
    c = __fsub_rn(c, __fadd_rn(__fmul_rn((float)e.count, p.frequency_penalty), p.presence_penalty));
    x[e.token] = detail::sample_clean(c);
  }
  __syncthreads();
  int id;
  if (p.forced >= 0) {  // a scored prompt's next token: only its logprob
    id = p.forced;
  } else if (!(p.temperature > 0)) {
    id = sample_argmax_block<Threads>(x, vocab, mask, num_masked);
  } else {
    const double u = philox::unit_interval(philox::draw_bits(p.seed, p.draw));
    if (p.top_k > 0 && p.top_k < vocab) {
      const int n = detail::sample_select_top<Threads, MaxTopK>(x, vocab, mask, num_masked, p.top_k, cand);
      id = threadIdx.x == 0 ? detail::sample_sorted_draw(cand, n, p, u) : 0;
    } else if (p.top_p < 1.0f) {
      const int k = vocab < MaxTopK ? vocab : MaxTopK;
      const int n = detail::sample_select_top<Threads, MaxTopK>(x, vocab, mask, num_masked, k, cand);
      // The best logit (the select's first) for the mass; none above -inf: token 0.
      const double mass =
          n > 0 ? detail::sample_vocab_mass<Threads>(x, vocab, mask, num_masked, cand[0].v) : 0.0;
      id = threadIdx.x == 0 ? detail::sample_sorted_draw(cand, n, p, u, mass) : 0;
    } else {
      id = detail::sample_chunked<Threads>(x, vocab, mask, num_masked, p, u);
    }
  }
  // The raw logits go back (the logprobs are the raw log-softmax's).
  if (num_penalized > 0) {  // the same for the whole block
    __syncthreads();
    for (int j = threadIdx.x; j < num_penalized; j += Threads)
      x[penalties[p.penalty_begin + j].token] = raw[j];
  }
  if (p.logprobs > 0 || p.forced >= 0) {  // the same for the whole block
    if (threadIdx.x == 0) chosen = id;
    __syncthreads();
    id = chosen;
    const int n = p.logprobs < MaxLogprobs ? p.logprobs : MaxLogprobs;
    detail::sample_logprobs<Threads, MaxTopK>(x, vocab, mask, num_masked, id, n, cand,
                                              lps + p.logprob_begin);
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = id;
}

// The token feed (cuda_abi.h): tokens[feeds[i].token] = picked[feeds[i].pick]
// for i < count, one thread a feed. A step scheduled while the step before
// ran takes the tokens that step picked from here, without a round trip
// through the host. Launch: grid (cdiv(count, blockDim.x)).
template <class Feed>
__device__ void feed_tokens(int* __restrict__ tokens, const Feed* __restrict__ feeds, int count,
                            const int* __restrict__ picked) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) tokens[feeds[i].token] = picked[feeds[i].pick];
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_SAMPLE_CUH_
