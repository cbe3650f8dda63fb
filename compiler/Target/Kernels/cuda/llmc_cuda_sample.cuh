// llmc CUDA kernel library: sampling on the device.
//
// The device half of the sampler (issue 27: only token ids cross PCIe, not
// a step's logits). Each kernel gives, row for row, the token the host
// sampler (runtime/src/sample/sampler.cc) picks from the same f32 logits.
// So far: greedy picks, which the runtime launches after a step's LM head
// (cuda_abi.h's sampler entries). The random draws will come from
// llmc_cuda_philox.cuh, the host sampler's generator too.
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

// Greedy picks (the ABI's greedy sampler, cuda_abi.h): block p picks the
// token of row picks[p].row of `logits` ([rows, vocab] f32), never one of
// masked[picks[p].mask_begin, + mask_count) (at most MaxMasked), into
// ids[p]. Launch: grid (picks), Threads threads.
template <int Threads, int MaxMasked, class Pick>
__device__ void sample_greedy_picks(const float* __restrict__ logits, int vocab,
                                    const Pick* __restrict__ picks, const int* __restrict__ masked,
                                    int* __restrict__ ids) {
  __shared__ int mask[MaxMasked];
  const Pick p = picks[blockIdx.x];
  const int num_masked = p.mask_count < MaxMasked ? p.mask_count : MaxMasked;
  for (int m = threadIdx.x; m < num_masked; m += Threads) mask[m] = masked[p.mask_begin + m];
  __syncthreads();
  const int id = sample_argmax_block<Threads>(logits + (long long)p.row * vocab, vocab, mask, num_masked);
  if (threadIdx.x == 0) ids[blockIdx.x] = id;
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_SAMPLE_CUH_
