// The device sampling kernels (llmc_cuda_sample.cuh), run on the CPU under
// emulation (test/cuda-emu), against the host sampler: row for row the
// same token from the same f32 logits.
//
// Greedy picks (sample_greedy_picks, the ABI's greedy sampler): random
// rows with the maximum anywhere (first, last, past the first pass of the
// threads), ties of the maximum (the lowest id wins), NaN and +-inf entries
// (NaN masked, +inf the largest float), rows of nothing but -inf and NaN
// (id 0), masked ids (the row's best among them), picks in any order and
// not of every row, vocabularies smaller than the block and Llama-3's
// 128,256.
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
void emu_greedy_256(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_greedy_32(const llmc_cuda_step_info s, const llmc_cuda_args a);
}

namespace llmc {
namespace {

using Entry = void (*)(const llmc_cuda_step_info, const llmc_cuda_args);
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The device's ids for `picks` of `rows` rows of `vocab` logits.
std::vector<int> DevicePicks(Entry entry, unsigned threads, const std::vector<float>& logits,
                             int vocab, const std::vector<llmc_cuda_pick>& picks,
                             const std::vector<int>& masked) {
  std::vector<int> ids(picks.size(), -1);
  llmc_cuda_step_info si{};
  si.num_logits = int(picks.size());
  llmc_cuda_args a{};
  a.buffers[0] = const_cast<float*>(logits.data());
  a.buffers[1] = const_cast<llmc_cuda_pick*>(picks.data());
  a.buffers[2] = const_cast<int*>(masked.data());
  a.buffers[3] = ids.data();
  a.buffers[4] = &vocab;
  void* params[2] = {&si, &a};
  EXPECT_EQ(llmc_emu_run(reinterpret_cast<void*>(entry), unsigned(picks.size()), 1, 1, threads, 1,
                         1, params),
            0);
  return ids;
}

// The host sampler's greedy token for each pick: its masked ids set to
// -inf (MaskTokens), then Sample() with temperature 0.
std::vector<int> HostGreedy(const std::vector<float>& logits, int vocab,
                            const std::vector<llmc_cuda_pick>& picks,
                            const std::vector<int>& masked) {
  SamplingParams p;
  p.temperature = 0;
  Sampler sampler(p);
  std::vector<int> ids;
  std::vector<float> scratch;
  for (const llmc_cuda_pick& k : picks) {
    const std::span<const float> row(logits.data() + size_t(k.row) * size_t(vocab), size_t(vocab));
    const std::span<const int32_t> mask(masked.data() + k.mask_begin, size_t(k.mask_count));
    const int token = sampler.Sample(MaskTokens(row, mask, &scratch), {});
    EXPECT_EQ(token, GreedyToken(row, mask)) << "row " << k.row;
    ids.push_back(token);
  }
  return ids;
}

// Rows of random logits, each row with its own twist: the maximum planted
// at a chosen id, tied at several ids, NaN and infinities sprinkled, or
// nothing above -inf.
std::vector<float> TwistedRows(int rows, int vocab, std::mt19937& rng) {
  const size_t stride = size_t(vocab);
  std::vector<float> x(size_t(rows) * stride);
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

// Picks of every other row, last row first; every third pick masks a few
// ids, the row's own best among them, so the masked best must lose.
void MakePicks(const std::vector<float>& x, int rows, int vocab, std::mt19937& rng,
               std::vector<llmc_cuda_pick>* picks, std::vector<int>* masked) {
  std::uniform_int_distribution<int> at(0, vocab - 1);
  for (int r = rows - 1; r >= 0; r -= 2) {
    llmc_cuda_pick k{r, int(masked->size()), 0};
    if (picks->size() % 3 == 1) {
      const std::span<const float> row(x.data() + size_t(r) * size_t(vocab), size_t(vocab));
      masked->push_back(GreedyToken(row, {}));
      for (int m = 0; m < 4; ++m) masked->push_back(at(rng));
      k.mask_count = 5;
    }
    picks->push_back(k);
  }
}

TEST(CudaEmuSample, GreedyPicksAreTheHostSamplersGreedy) {
  std::mt19937 rng(2026);
  struct Case {
    Entry entry;
    unsigned threads;
    int vocab, rows;
  };
  const Case cases[] = {
      {emu_greedy_256, 256, 1, 8},     {emu_greedy_256, 256, 37, 16},
      {emu_greedy_256, 256, 1000, 16}, {emu_greedy_32, 32, 1000, 16},
      {emu_greedy_256, 256, 128256, 8},
  };
  int masked_best_moved = 0;
  for (const Case& c : cases) {
    const std::vector<float> x = TwistedRows(c.rows, c.vocab, rng);
    std::vector<llmc_cuda_pick> picks;
    std::vector<int> masked;
    MakePicks(x, c.rows, c.vocab, rng, &picks, &masked);
    const std::vector<int> device = DevicePicks(c.entry, c.threads, x, c.vocab, picks, masked);
    EXPECT_EQ(device, HostGreedy(x, c.vocab, picks, masked))
        << "vocab " << c.vocab << ", " << c.threads << " threads";
    for (size_t j = 0; j < picks.size(); ++j)
      if (picks[j].mask_count > 0 && c.vocab > 1)
        masked_best_moved += device[j] != masked[size_t(picks[j].mask_begin)];
  }
  EXPECT_GT(masked_best_moved, 5) << "the masks never moved a pick off its row's best";
}

}  // namespace
}  // namespace llmc
