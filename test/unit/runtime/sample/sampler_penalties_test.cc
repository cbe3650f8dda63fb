// The sampler's penalties: repetition (llama.cpp's divide/multiply),
// presence and frequency (OpenAI's), their window, and their order against
// each other and against truncation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "llmc/runtime/sample/sampler.h"
#include "runtime/sample/sampler_test_util.h"

namespace llmc {
namespace {

using namespace sampler_test;  // NOLINT: the shared test helpers

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = Plain();
  p.repetition_penalty = 2.0f;
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  // Tokens 0 and 1 (1 twice: penalized once), 4 (logit 0 stays 0).
  const std::vector<int32_t> previous = {0, 1, 1, 4};
  std::vector<TokenProb> dist;
  Sampler(p).Distribution(logits, previous, &dist);
  const std::vector<double> expected = Softmax({1.0f, -2.0f, 0.5f, 3.0f, 0.0f});
  ASSERT_EQ(dist.size(), 5u);
  for (const TokenProb& t : dist)
    EXPECT_NEAR(t.prob, expected[static_cast<size_t>(t.token)], 1e-6) << t.token;

  // A penalty below 1 boosts: 2.0 / 0.5 = 4, -1.0 * 0.5 = -0.5.
  p.repetition_penalty = 0.5f;
  Sampler(p).Distribution(logits, previous, &dist);
  const std::vector<double> boosted = Softmax({4.0f, -0.5f, 0.5f, 3.0f, 0.0f});
  for (const TokenProb& t : dist)
    EXPECT_NEAR(t.prob, boosted[static_cast<size_t>(t.token)], 1e-6) << t.token;
}

TEST(Sampler, RepetitionPenaltyChangesGreedyChoices) {
  SamplingParams p = Plain(0.0f);
  p.repetition_penalty = 2.0f;
  Sampler sampler(p);
  // Positive: 2.0 / 2 = 1.0 < 1.5.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{0}), 1);
  // Negative: -1.0 * 2 = -2.0 < -1.5.
  EXPECT_EQ(sampler.Sample(std::vector<float>{-1.0f, -1.5f}, std::vector<int32_t>{0}), 1);
  // Not penalized: stays the argmax.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{1}), 0);
  // Ids outside the vocabulary are ignored.
  EXPECT_EQ(sampler.Sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{-1, 2, 1000}), 0);
}

TEST(Sampler, RepetitionPenaltyWindow) {
  // Penalizing token 0 (2.0 → 1.0) makes 1 (1.5) the argmax; token 2 is
  // filler that the penalty cannot lift.
  const std::vector<float> logits = {2.0f, 1.5f, -3.0f};
  const std::vector<int32_t> previous = {0, 2, 2};  // 0 is three tokens back
  SamplingParams p = Plain(0.0f);
  p.repetition_penalty = 2.0f;
  p.repeat_last_n = 2;  // sees {2, 2}
  EXPECT_EQ(Sampler(p).Sample(logits, previous), 0);
  p.repeat_last_n = 3;  // sees 0 too
  EXPECT_EQ(Sampler(p).Sample(logits, previous), 1);
  p.repeat_last_n = 64;  // more than there is
  EXPECT_EQ(Sampler(p).Sample(logits, previous), 1);
  p.repeat_last_n = 1;
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{2, 2, 0}), 1);
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0, 2, 2}), 0);
  p.repeat_last_n = -1;  // the whole history
  std::vector<int32_t> long_history(1000, 2);
  long_history[0] = 0;
  EXPECT_EQ(Sampler(p).Sample(logits, long_history), 1);
  p.repeat_last_n = 0;  // off, as llama.cpp's --repeat-last-n 0
  EXPECT_EQ(Sampler(p).Sample(logits, long_history), 0);
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0}), 0);
}

TEST(Sampler, PenaltyAppliesBeforeTopK) {
  // Token 7 is the best until penalized below 2 and 5.
  std::vector<float> logits(10, 0.0f);
  logits[7] = 3.0f;
  logits[2] = 2.0f;
  logits[5] = 1.9f;
  SamplingParams p = Plain();
  p.top_k = 2;
  p.repetition_penalty = 3.0f;
  std::vector<TokenProb> dist;
  Sampler(p).Distribution(logits, std::vector<int32_t>{7, 7, 9}, &dist);
  EXPECT_EQ(Support(dist), (std::set<int32_t>{2, 5}));
  p.top_k = 0;  // the full-vocabulary path agrees
  p.min_p = 0.9f;
  Sampler(p).Distribution(logits, std::vector<int32_t>{7, 7, 9}, &dist);
  EXPECT_EQ(Support(dist), (std::set<int32_t>{2, 5}));
}

// llama.cpp's llama_sampler_penalties, written out plainly: count each
// in-vocabulary token of the window, then per distinct token the repetition
// penalty, then c * frequency + presence subtracted.
std::vector<float> ReferencePenalized(std::vector<float> logits,
                                      const std::vector<int32_t>& previous,
                                      const SamplingParams& p) {
  if (p.repeat_last_n == 0) return logits;
  const size_t n = p.repeat_last_n < 0
                       ? previous.size()
                       : std::min(previous.size(), static_cast<size_t>(p.repeat_last_n));
  std::map<int32_t, int> counts;
  for (size_t i = previous.size() - n; i < previous.size(); ++i) {
    const int32_t t = previous[i];
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) ++counts[t];
  }
  for (const auto& [t, c] : counts) {
    float& v = logits[static_cast<size_t>(t)];
    if (v <= 0) {
      v *= p.repetition_penalty;
    } else {
      v /= p.repetition_penalty;
    }
    v -= static_cast<float>(c) * p.frequency_penalty +
         static_cast<float>(c > 0) * p.presence_penalty;
  }
  return logits;
}

// The best and second-best ids of `logits` and the gap between them.
struct TopTwo {
  int32_t best;
  int32_t second;
  float gap;
};
TopTwo FindTopTwo(const std::vector<float>& logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  return {ids[0], ids[1],
          logits[static_cast<size_t>(ids[0])] - logits[static_cast<size_t>(ids[1])]};
}

// The n lowest ids that are neither of the top two.
std::vector<int32_t> Others(const TopTwo& top, size_t n) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; ids.size() < n; ++id)
    if (id != top.best && id != top.second) ids.push_back(id);
  return ids;
}

// Random logits whose best two are less than `max_gap` apart, so that a
// penalty within [-2, 2] can reorder them.
std::vector<float> CloseTopTwoLogits(size_t n, uint64_t seed, float max_gap = 1.0f) {
  for (uint64_t s = seed;; ++s) {
    std::vector<float> logits = RandomLogits(n, s);
    const TopTwo top = FindTopTwo(logits);
    if (top.gap > 0.05f && top.gap < max_gap) return logits;
  }
}

void ExpectDistributionIs(Sampler& sampler, const std::vector<float>& logits,
                          const std::vector<int32_t>& previous,
                          const std::vector<float>& expected_logits) {
  std::vector<TokenProb> dist;
  sampler.Distribution(logits, previous, &dist);
  const std::vector<double> expected = Softmax(expected_logits);
  ASSERT_EQ(dist.size(), logits.size());
  for (const TokenProb& t : dist)
    EXPECT_NEAR(t.prob, expected[static_cast<size_t>(t.token)], 1e-6) << "token " << t.token;
}

TEST(Sampler, FrequencyPenaltyScalesWithTheCount) {
  const std::vector<float> logits = CloseTopTwoLogits(50, 101);
  const TopTwo top = FindTopTwo(logits);
  // One occurrence costs gap / 1.5 (the best stays the best), two cost more
  // than the gap (the second takes over).
  SamplingParams p = Plain(0.0f);
  p.frequency_penalty = top.gap / 1.5f;
  Sampler greedy(p);
  EXPECT_EQ(greedy.Sample(logits, {}), top.best);
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.best}), top.best);
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.best, top.best}), top.second);
  const int32_t other = Others(top, 1)[0];
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.best, other, top.best, other}),
            top.second);
  // Ids outside the vocabulary are ignored.
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.best, -1, 50, 1000}), top.best);

  // The exact logits: subtract count * penalty, per token.
  SamplingParams q = Plain();
  q.frequency_penalty = 0.75f;
  const std::vector<int32_t> previous = {3, 3, 3, 9, 3, 11, 11};
  std::vector<float> expected = logits;
  expected[3] -= 4 * 0.75f;
  expected[9] -= 1 * 0.75f;
  expected[11] -= 2 * 0.75f;
  Sampler sampler(q);
  ExpectDistributionIs(sampler, logits, previous, expected);
}

TEST(Sampler, PresencePenaltyAppliesOnceWhateverTheCount) {
  const std::vector<float> logits = CloseTopTwoLogits(50, 202);
  const TopTwo top = FindTopTwo(logits);
  SamplingParams p = Plain(0.0f);
  p.presence_penalty = std::min(2.0f, top.gap * 1.5f);
  Sampler greedy(p);
  EXPECT_EQ(greedy.Sample(logits, {}), top.best);
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.second}), top.best);
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.best}), top.second);
  const std::vector<int32_t> five(5, top.best);
  EXPECT_EQ(greedy.Sample(logits, five), top.second);
  // Penalizing both keeps their order: once each, however often.
  EXPECT_EQ(greedy.Sample(logits, std::vector<int32_t>{top.best, top.best, top.best, top.second}),
            top.best);

  // One occurrence or five: the same distribution, the logit lowered once.
  SamplingParams q = Plain();
  q.presence_penalty = 1.25f;
  std::vector<float> expected = logits;
  expected[static_cast<size_t>(top.best)] -= 1.25f;
  Sampler sampler(q);
  ExpectDistributionIs(sampler, logits, std::vector<int32_t>{top.best}, expected);
  ExpectDistributionIs(sampler, logits, five, expected);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesUseTheRepeatWindow) {
  const std::vector<float> logits = CloseTopTwoLogits(40, 303);
  const TopTwo top = FindTopTwo(logits);
  const std::vector<int32_t> others = Others(top, 2);
  const int32_t other = others[0];
  const int32_t filler = others[1];
  const std::vector<int32_t> previous = {top.best, top.best, top.best, other, filler};
  for (int which = 0; which < 2; ++which) {
    SamplingParams p = Plain(0.0f);
    (which == 0 ? p.presence_penalty : p.frequency_penalty) = 2.0f;
    p.repeat_last_n = 2;  // sees {other, filler}: the best is not penalized
    EXPECT_EQ(Sampler(p).Sample(logits, previous), top.best) << which;
    p.repeat_last_n = 3;  // sees one occurrence of the best
    EXPECT_EQ(Sampler(p).Sample(logits, previous), top.second) << which;
    p.repeat_last_n = 64;  // more than there is
    EXPECT_EQ(Sampler(p).Sample(logits, previous), top.second) << which;
    p.repeat_last_n = -1;  // all of them
    EXPECT_EQ(Sampler(p).Sample(logits, previous), top.second) << which;
    p.repeat_last_n = 0;  // off
    EXPECT_EQ(Sampler(p).Sample(logits, previous), top.best) << which;
  }
  // The frequency penalty counts only the occurrences inside the window.
  SamplingParams q = Plain();
  q.frequency_penalty = 0.5f;
  q.repeat_last_n = 4;
  std::vector<float> expected = logits;
  expected[static_cast<size_t>(top.best)] -= 2 * 0.5f;  // two of its three are inside
  expected[static_cast<size_t>(other)] -= 0.5f;
  expected[static_cast<size_t>(filler)] -= 0.5f;
  Sampler sampler(q);
  ExpectDistributionIs(sampler, logits, previous, expected);
}

TEST(Sampler, NegativePresenceAndFrequencyPenaltiesBoost) {
  const std::vector<float> logits = CloseTopTwoLogits(50, 404);
  const TopTwo top = FindTopTwo(logits);
  SamplingParams p = Plain(0.0f);
  p.presence_penalty = -std::min(2.0f, top.gap * 1.5f);
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{top.second}), top.second);
  p.presence_penalty = 0;
  p.frequency_penalty = -top.gap / 1.5f;  // once: not enough; twice: enough
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{top.second}), top.best);
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{top.second, top.second}), top.second);

  SamplingParams q = Plain();
  q.presence_penalty = -0.5f;
  q.frequency_penalty = -0.25f;
  std::vector<float> expected = logits;
  expected[5] += 3 * 0.25f + 0.5f;
  expected[6] += 1 * 0.25f + 0.5f;
  Sampler sampler(q);
  ExpectDistributionIs(sampler, logits, std::vector<int32_t>{5, 6, 5, 5}, expected);
  // A boost cannot bring back a masked token.
  std::vector<float> masked = logits;
  masked[5] = kNegInf;
  q.presence_penalty = -2.0f;
  q.frequency_penalty = -2.0f;
  q.temperature = 0;
  EXPECT_NE(Sampler(q).Sample(masked, std::vector<int32_t>{5, 5, 5, 5}), 5);
}

TEST(Sampler, RepetitionPenaltyComesBeforePresenceAndFrequency) {
  // llama.cpp's order: scale by the repetition penalty, then subtract.
  // Subtracting first would give (2 - 0.5 - 0.25) / 2 = 0.625 for token 0
  // and (-1 - 0.5 - 0.5) * 2 = -4 for token 1.
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  SamplingParams p = Plain();
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.5f;
  // 0 once, 1 twice, 4 (logit 0: multiplied, stays 0) once.
  const std::vector<int32_t> previous = {0, 1, 1, 4};
  const std::vector<float> expected = {
      2.0f / 2 - 1 * 0.5f - 0.25f,   // 0.25
      -1.0f * 2 - 2 * 0.5f - 0.25f,  // -3.25
      0.5f,
      3.0f,
      0.0f - 1 * 0.5f - 0.25f,  // -0.75
  };
  Sampler sampler(p);
  ExpectDistributionIs(sampler, logits, previous, expected);

  // Greedy choices that only the right order gives. Positive logit:
  // 4 / 2 - 0.5 = 1.5 < 1.6 (subtracting first: (4 - 0.5) / 2 = 1.75 > 1.6).
  SamplingParams g = Plain(0.0f);
  g.repetition_penalty = 2.0f;
  g.presence_penalty = 0.5f;
  EXPECT_EQ(Sampler(g).Sample(std::vector<float>{4.0f, 1.6f}, std::vector<int32_t>{0}), 1);
  // Negative logit: -1 * 2 - 0.3 = -2.3 > -2.4 (subtracting first:
  // (-1 - 0.3) * 2 = -2.6 < -2.4).
  g.presence_penalty = 0.3f;
  EXPECT_EQ(Sampler(g).Sample(std::vector<float>{-1.0f, -2.4f}, std::vector<int32_t>{0}), 0);
}

TEST(Sampler, PenaltiesMatchLlamaCppsOnRandomInputs) {
  std::mt19937_64 rng(2024);
  const size_t vocab = 64;
  const float repetition[] = {1.0f, 1.3f, 0.7f};
  const float presence[] = {0.0f, 0.6f, -1.1f, 2.0f};
  const float frequency[] = {0.0f, 0.35f, -0.8f, -2.0f};
  const int windows[] = {-1, 0, 1, 5, 64};
  int cases = 0;
  for (float rep : repetition) {
    for (float pres : presence) {
      for (float freq : frequency) {
        for (int window : windows) {
          const std::vector<float> logits = RandomLogits(vocab, rng());
          std::vector<int32_t> previous(rng() % 40);
          for (int32_t& t : previous)  // a few out of range; repeats likely
            t = static_cast<int32_t>(rng() % (vocab / 2 + 4)) - 2;
          SamplingParams p = Plain();
          p.repetition_penalty = rep;
          p.presence_penalty = pres;
          p.frequency_penalty = freq;
          p.repeat_last_n = window;
          const std::vector<float> expected = ReferencePenalized(logits, previous, p);
          Sampler sampler(p);
          ExpectDistributionIs(sampler, logits, previous, expected);
          p.temperature = 0;
          EXPECT_EQ(Sampler(p).Sample(logits, previous), Argmax(expected))
              << "rep " << rep << " presence " << pres << " frequency " << freq << " window "
              << window;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 3 * 4 * 4 * 5);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesApplyBeforeTopK) {
  std::vector<float> logits = RandomLogits(1000, 505, 1.0f);
  logits[7] = 3.0f;
  logits[2] = 2.5f;
  logits[5] = 2.4f;
  SamplingParams p = Plain();
  p.top_k = 2;
  p.frequency_penalty = 0.4f;  // 7: 3.0 - 3 * 0.4 = 1.8
  std::vector<TokenProb> dist;
  Sampler(p).Distribution(logits, std::vector<int32_t>{7, 7, 9, 7}, &dist);
  EXPECT_EQ(Support(dist), (std::set<int32_t>{2, 5}));
  p.top_k = 0;  // the full-vocabulary path agrees
  p.min_p = 0.85f;
  Sampler(p).Distribution(logits, std::vector<int32_t>{7, 7, 9, 7}, &dist);
  EXPECT_EQ(Support(dist), (std::set<int32_t>{2, 5}));
}

}  // namespace
}  // namespace llmc
