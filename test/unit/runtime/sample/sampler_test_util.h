// Helpers shared by the sampler's tests (sampler_test.cc,
// sampler_penalties_test.cc): reference softmax and entropy, portable random
// logits, and frequency checks of many draws.
#ifndef LLMC_TEST_UNIT_RUNTIME_SAMPLE_SAMPLER_TEST_UTIL_H_
#define LLMC_TEST_UNIT_RUNTIME_SAMPLE_SAMPLER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "llmc/runtime/sample/sampler.h"

namespace llmc::sampler_test {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Temperature 1 and no truncation: the draw follows softmax(logits).
inline SamplingParams Plain(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repetition_penalty = 1.0f;
  return p;
}

inline std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : kNegInf);
  return logits;
}

// Portable pseudo-random logits in [-scale, scale).
inline std::vector<float> RandomLogits(size_t n, uint64_t seed, float scale = 5.0f) {
  std::mt19937_64 rng(seed);
  std::vector<float> logits(n);
  for (float& v : logits)
    v = static_cast<float>((sample_internal::UnitInterval(rng()) * 2 - 1) * scale);
  return logits;
}

inline std::vector<double> Softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = -std::numeric_limits<double>::infinity();
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  std::vector<double> p;
  double sum = 0;
  for (float v : logits) {
    p.push_back(std::exp((v - max) / temperature));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  return p;
}

inline double Entropy(const std::vector<TokenProb>& dist) {
  double h = 0;
  for (const TokenProb& t : dist)
    if (t.prob > 0) h -= t.prob * std::log(t.prob);
  return h;
}

inline int32_t Argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

inline std::map<int32_t, int> Histogram(Sampler& sampler, const std::vector<float>& logits,
                                        int draws) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.Sample(logits, {})];
  return counts;
}

// Only ids of `expected` appear; each count is within 3 sigma of its
// binomial mean; and the chi-square statistic is below its 0.1% critical
// value.
inline void ExpectFrequencies(const std::map<int32_t, int>& counts,
                              const std::map<int32_t, double>& expected, int draws) {
  for (const auto& [id, count] : counts)
    EXPECT_TRUE(expected.count(id)) << "token " << id << " drawn " << count << " times";
  double chi2 = 0;
  for (const auto& [id, p] : expected) {
    const auto it = counts.find(id);
    const double count = it == counts.end() ? 0 : it->second;
    const double mean = draws * p;
    const double sigma = std::sqrt(draws * p * (1 - p));
    EXPECT_LE(std::abs(count - mean), 3 * sigma + 1e-9)
        << "token " << id << ": " << count << " draws, expected " << mean;
    chi2 += (count - mean) * (count - mean) / mean;
  }
  // chi-square critical values at p = 0.001 for 1..6 degrees of freedom.
  const double critical[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46};
  const size_t df = expected.size() - 1;
  if (df >= 1 && df <= 6) {
    EXPECT_LT(chi2, critical[df - 1]);
  }
}

inline std::set<int32_t> Support(const std::vector<TokenProb>& dist) {
  std::set<int32_t> ids;
  for (const TokenProb& t : dist) ids.insert(t.token);
  return ids;
}

// ids 0..4 with probabilities .05 .30 .10 .40 .15: by rank 3, 1, 4, 2, 0.
inline const std::vector<double> kFive = {0.05, 0.30, 0.10, 0.40, 0.15};

}  // namespace llmc::sampler_test

#endif  // LLMC_TEST_UNIT_RUNTIME_SAMPLE_SAMPLER_TEST_UTIL_H_
