// Time per Sample() call on one row of logits of a Llama-3-sized vocabulary
// (128256), for the sampling settings people use. Not built by default:
//
//   c++ -std=c++20 -O3 -DNDEBUG -I runtime/include bench/sampler_bench.cc \
//       runtime/src/sample/*.cc -labsl_status -labsl_strings \
//       -labsl_str_format_internal -o /tmp/sampler_bench && /tmp/sampler_bench
//
// Prints microseconds per call; no assertions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "llmc/runtime/sample/sampler.h"

namespace {

std::vector<float> Logits(size_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);  // fine for a benchmark
  std::vector<float> logits(vocab);
  for (float& v : logits) v = normal(rng);
  return logits;
}

void Run(const char* name, const llmc::SamplingParams& params) {
  constexpr size_t kVocab = 128256;
  constexpr int kRows = 16;
  constexpr int kCalls = 400;
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < kRows; ++i) rows.push_back(Logits(kVocab, static_cast<uint64_t>(i)));
  std::vector<int32_t> history(512);
  for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>(i * 131 % kVocab);
  llmc::Sampler sampler(params);
  llmc::SampleResult result;
  int64_t checksum = 0;
  for (int i = 0; i < 20; ++i) checksum += sampler.Sample(rows[i % kRows], history, &result);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) checksum += sampler.Sample(rows[i % kRows], history, &result);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-40s %8.1f us/token   (checksum %lld)\n", name, us / kCalls,
              static_cast<long long>(checksum));
}

}  // namespace

int main() {
  {  // the floor: one plain pass over the row
    const std::vector<float> row = Logits(128256, 1);
    float sink = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 400; ++i) sink += *std::max_element(row.begin(), row.end()) + float(i);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-40s %8.1f us/row   (%g)\n", "baseline: std::max_element", us / 400, sink);
  }
  llmc::SamplingParams p;
  Run("defaults (k40 p.95 minp.05 T.8)", p);
  p.repetition_penalty = 1.1f;
  Run("defaults + repetition penalty", p);
  p.logprobs = 5;
  Run("defaults + penalty + 5 logprobs", p);
  llmc::SamplingParams greedy;
  greedy.temperature = 0;
  Run("greedy", greedy);
  llmc::SamplingParams nucleus;
  nucleus.top_k = 0;
  nucleus.min_p = 0;
  nucleus.top_p = 0.9f;
  Run("top-p .9 only (vLLM style)", nucleus);
  nucleus.min_p = 0.05f;
  Run("top-p .9 + min-p .05, no top-k", nucleus);
  llmc::SamplingParams pure;
  pure.top_k = 0;
  pure.top_p = 1;
  pure.min_p = 0;
  pure.temperature = 1;
  Run("pure temperature 1 (full vocab)", pure);
  pure.top_k = 5000;
  Run("top-k 5000 (threshold path)", pure);
  return 0;
}
