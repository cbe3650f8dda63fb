// Sample() must not allocate once its scratch buffers have grown: this file
// replaces the global operator new of the sample_tests binary to count.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "llmc/runtime/sample/sampler.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// AddressSanitizer brings its own operator new; count only without it.
#if !defined(__SANITIZE_ADDRESS__)
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  std::abort();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#define LLMC_COUNTS_ALLOCATIONS 1
#endif

namespace llmc {
namespace {

TEST(SamplerAllocation, SampleAllocatesNothingOnceWarm) {
#ifndef LLMC_COUNTS_ALLOCATIONS
  GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
#endif
  const long at_start = g_allocations.load();
  const size_t vocab = 32000;
  std::vector<std::vector<float>> rows;
  std::mt19937_64 rng(5);
  for (int r = 0; r < 4; ++r) {
    std::vector<float> row(vocab);
    for (float& v : row) v = static_cast<float>(sample_internal::UnitInterval(rng()) * 10 - 5);
    rows.push_back(std::move(row));
  }
  ASSERT_GT(g_allocations.load(), at_start) << "the counting operator new is not in use";
  std::vector<int32_t> history(300);
  for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>(i * 97 % vocab);

  std::vector<SamplingParams> configs(6);
  configs[0].repetition_penalty = 1.1f;  // defaults + penalty + logprobs
  configs[0].logprobs = 5;
  configs[1].top_k = 0;  // top-p by buckets
  configs[1].top_p = 0.9f;
  configs[1].min_p = 0;
  configs[2].top_k = 4000;     // large-k threshold
  configs[3].temperature = 0;  // greedy
  configs[3].logprobs = 2;
  configs[4].top_k = 0;  // the whole vocabulary
  configs[4].top_p = 1;
  configs[4].min_p = 0;
  configs[5].presence_penalty = 0.5f;  // presence and frequency penalties
  configs[5].frequency_penalty = -0.3f;
  configs[5].repeat_last_n = -1;
  for (size_t c = 0; c < configs.size(); ++c) {
    Sampler sampler(configs[c]);
    SampleResult result;
    for (const auto& row : rows) sampler.Sample(row, history, &result);  // warm up
    const long before = g_allocations.load();
    for (int i = 0; i < 3; ++i) {
      for (const auto& row : rows) sampler.Sample(row, history, &result);
    }
    EXPECT_EQ(g_allocations.load() - before, 0) << "config " << c;
  }
}

}  // namespace
}  // namespace llmc
