// The device sampling kernels (llmc_cuda_sample.cuh), run on the CPU under
// emulation (test/cuda-emu), against the host sampler: row for row the
// same token from the same f32 logits.
//
// Greedy (sample_argmax_rows): random rows with the maximum anywhere
// (first, last, past the first pass of the threads), ties of the maximum
// (the lowest id wins), NaN and +-inf entries (NaN masked, +inf the
// largest float), rows of nothing but -inf and NaN (id 0), vocabularies
// smaller than the block and Llama-3's 128,256.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "llmc/core/artifact/cuda_abi.h"
#include "llmc/runtime/sample/sampler.h"

extern "C" {
int llmc_emu_run(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                 unsigned bz, void** params);
void emu_argmax_256(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_argmax_32(const llmc_cuda_step_info s, const llmc_cuda_args a);
}

namespace llmc {
namespace {

using Entry = void (*)(const llmc_cuda_step_info, const llmc_cuda_args);
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The device's ids for `rows` rows of `vocab` logits, `stride` apart.
std::vector<int> DeviceArgmax(Entry entry, unsigned threads, const std::vector<float>& logits,
                              int rows, int vocab, long long stride) {
  std::vector<int> ids(size_t(rows), -1);
  llmc_cuda_step_info si{};
  llmc_cuda_args a{};
  a.buffers[0] = const_cast<float*>(logits.data());
  a.buffers[1] = ids.data();
  a.buffers[2] = &vocab;
  a.buffers[3] = &stride;
  void* params[2] = {&si, &a};
  EXPECT_EQ(llmc_emu_run(reinterpret_cast<void*>(entry), unsigned(rows), 1, 1, threads, 1, 1, params), 0);
  return ids;
}

// The host sampler's greedy token for each row.
std::vector<int> HostGreedy(const std::vector<float>& logits, int rows, int vocab, long long stride) {
  SamplingParams p;
  p.temperature = 0;
  Sampler sampler(p);
  std::vector<int> ids;
  for (int r = 0; r < rows; ++r)
    ids.push_back(sampler.Sample(std::span<const float>(logits.data() + r * stride, size_t(vocab)), {}));
  return ids;
}

// Rows of random logits, each row with its own twist: the maximum planted
// at a chosen id, tied at several ids, NaN and infinities sprinkled, or
// nothing above -inf.
std::vector<float> TwistedRows(int rows, int vocab, long long stride, std::mt19937& rng) {
  std::vector<float> x(size_t(rows * stride), 12345.0f);  // padding past vocab: never read
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::uniform_int_distribution<int> at(0, vocab - 1);
  for (int r = 0; r < rows; ++r) {
    float* row = x.data() + r * stride;
    for (int i = 0; i < vocab; ++i) row[i] = u(rng);
    switch (r % 8) {
      case 0: row[0] = 20.0f; break;                   // the first id
      case 1: row[vocab - 1] = 20.0f; break;           // the last id
      case 2:                                          // ties: the lowest wins
        for (int k = 0; k < 4; ++k) row[at(rng)] = 20.0f;
        break;
      case 3:                                          // NaN never wins
        for (int k = 0; k < 5; ++k) row[at(rng)] = kNaN;
        break;
      case 4:                                          // +inf as the largest float, ties too
        row[at(rng)] = kInf;
        row[at(rng)] = std::numeric_limits<float>::max();
        break;
      case 5:                                          // nothing above -inf: id 0
        for (int i = 0; i < vocab; ++i) row[i] = (i % 3 == 0) ? kNaN : -kInf;
        break;
      case 6:                                          // masked tokens around the best
        for (int k = 0; k < vocab / 2; ++k) row[at(rng)] = -kInf;
        break;
      default: break;                                  // plain random
    }
  }
  return x;
}

TEST(CudaEmuSample, ArgmaxIsTheHostSamplersGreedy) {
  std::mt19937 rng(2026);
  struct Case {
    Entry entry;
    unsigned threads;
    int vocab, rows;
  };
  const Case cases[] = {
      {emu_argmax_256, 256, 1, 8},     {emu_argmax_256, 256, 37, 16},
      {emu_argmax_256, 256, 1000, 16}, {emu_argmax_32, 32, 1000, 16},
      {emu_argmax_256, 256, 128256, 8},
  };
  for (const Case& c : cases) {
    const long long stride = c.vocab + 3;  // rows need not be packed
    const std::vector<float> x = TwistedRows(c.rows, c.vocab, stride, rng);
    EXPECT_EQ(DeviceArgmax(c.entry, c.threads, x, c.rows, c.vocab, stride),
              HostGreedy(x, c.rows, c.vocab, stride))
        << "vocab " << c.vocab << ", " << c.threads << " threads";
  }
}

}  // namespace
}  // namespace llmc
