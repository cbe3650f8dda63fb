// llmc CUDA kernel library: the sampler's random numbers.
//
// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011): a counter-based generator, a pure function of a 128-bit
// counter and a 64-bit key. A request's draw for its n-th sampled token is
// the function of (its seed, n), so it does not depend on which other
// requests share its batch, on the order rows are sampled in, or on
// whether the host or a GPU draws it: the host sampler
// (runtime/src/sample/sampler.cc) includes this header too, so both run
// the same code. The test vectors are Random123's (sampler_test.cc).
//
// Self-contained (no other header, no standard library), so that NVRTC,
// the CUDA emulation and the host compile it alike.
#ifndef LLMC_CUDA_PHILOX_CUH_
#define LLMC_CUDA_PHILOX_CUH_

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LLMC_PHILOX_HD __host__ __device__ __forceinline__
#else
#define LLMC_PHILOX_HD inline
#endif

namespace llmc {
namespace philox {

struct u32x4 {
  unsigned int v[4];
};

// The high and low words of a * b.
LLMC_PHILOX_HD void mul_hi_lo(unsigned int a, unsigned int b, unsigned int* hi, unsigned int* lo) {
  const unsigned long long p = static_cast<unsigned long long>(a) * b;
  *hi = static_cast<unsigned int>(p >> 32);
  *lo = static_cast<unsigned int>(p);
}

// Philox-4x32 with 10 rounds: the counter's four words, the key's two.
LLMC_PHILOX_HD u32x4 philox4x32_10(u32x4 ctr, unsigned int k0, unsigned int k1) {
  constexpr unsigned int kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u; // round multipliers
  constexpr unsigned int kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; // key schedule (Weyl)
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    unsigned int hi0, lo0, hi1, lo1;
    mul_hi_lo(kM0, ctr.v[0], &hi0, &lo0);
    mul_hi_lo(kM1, ctr.v[2], &hi1, &lo1);
    ctr = u32x4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// The 64 random bits of draw `index` of stream `seed`: the first two output
// words (low, high) of the counter {index low, index high, 0, 0} under the
// key {seed low, seed high}. The counter's last two words are left for
// other draws of the same token (a second stream, should one be needed).
LLMC_PHILOX_HD unsigned long long draw_bits(unsigned long long seed, unsigned long long index) {
  const u32x4 out = philox4x32_10(
      u32x4{{static_cast<unsigned int>(index), static_cast<unsigned int>(index >> 32), 0u, 0u}},
      static_cast<unsigned int>(seed), static_cast<unsigned int>(seed >> 32));
  return static_cast<unsigned long long>(out.v[1]) << 32 | out.v[0];
}

// [0, 1) from the top 53 bits: exact in a double, the same on every machine.
LLMC_PHILOX_HD double unit_interval(unsigned long long bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// The chunks of contiguous ids a draw over survivors in id order is summed
// and walked by, and a log-softmax's normalizer summed by: one count for
// the host sampler (sampler.h's kDrawChunks, checked against this one in
// sampler.cc) and the device's (llmc_cuda_sample.cuh), so that both add the
// same doubles in the same order.
constexpr int kDrawChunks = 256;

} // namespace philox
} // namespace llmc

#endif // LLMC_CUDA_PHILOX_CUH_
