// Score requests through the Engine, and the Generator as the engine's thin
// client, on the fake model (fake_model.h), whose logits are a function of
// each row's whole context read back through the KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "llmc/runtime/engine/engine.h"
#include "llmc/runtime/engine/generator.h"
#include "runtime/engine/fake_model.h"

namespace llmc {
namespace {

using testing::FakeModel;
using testing::FakeModelOptions;
using testing::kFakeVocab;

std::vector<int32_t> RandomTokens(std::mt19937& rng, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(2 + int32_t(rng() % 22));
  return t;
}

// Every position's row of a score request, [tokens, vocab], or its prompt
// logprobs (ScoreOptions), checking that each position comes once and in
// order; the other requests run alongside.
struct Scored {
  std::vector<float> rows;
  std::vector<SampleResult> logprobs;
  int64_t preemptions = 0;
};
Scored RunScore(const std::vector<int32_t>& tokens, ScoreOptions score,
                const FakeModelOptions& model, const std::vector<std::vector<int32_t>>& others,
                int64_t steps_in_flight = 1, bool runner_picks = true) {
  FakeModelOptions m = model;
  m.steps_in_flight = steps_in_flight;
  EngineOptions options;
  options.check_invariants = true;
  options.runner_picks = runner_picks;
  auto engine = Engine::Create(FakeModel(m), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  Engine& e = **engine;
  SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 11;
  sampled.max_tokens = 25;
  for (size_t i = 0; i < others.size() / 2; ++i) EXPECT_TRUE(e.AddRequest(others[i], sampled).ok());
  auto id = e.AddScoreRequest(tokens, score);
  EXPECT_TRUE(id.ok()) << id.status();
  for (size_t i = others.size() / 2; i < others.size(); ++i)
    EXPECT_TRUE(e.AddRequest(others[i], sampled).ok());
  Scored s;
  int finished = 0;
  while (e.has_unfinished()) {
    auto outs = e.Step();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok()) break;
    for (const RequestOutput& o : *outs) {
      if (o.id != *id) {
        EXPECT_TRUE(o.logits.empty());
        continue;
      }
      EXPECT_EQ(finished, 0) << "an output after the finished one";
      EXPECT_TRUE(o.tokens.empty());
      EXPECT_EQ(int64_t(o.score_first),
                score.prompt_logprobs < 0 ? int64_t(s.rows.size()) / kFakeVocab
                                          : int64_t(s.logprobs.size()))
          << "positions skipped or repeated";
      s.rows.insert(s.rows.end(), o.logits.begin(), o.logits.end());
      s.logprobs.insert(s.logprobs.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
      if (o.finished) {
        ++finished;
        EXPECT_EQ(o.reason, FinishReason::kLength);
        EXPECT_EQ(o.usage.prompt_tokens, int32_t(tokens.size()));
        EXPECT_EQ(o.usage.completion_tokens, 0);
      }
    }
  }
  EXPECT_EQ(finished, 1);
  if (score.prompt_logprobs < 0)
    EXPECT_EQ(s.rows.size(), tokens.size() * kFakeVocab);
  else
    EXPECT_EQ(s.logprobs.size(), tokens.size() - 1);
  s.preemptions = e.stats().scheduler.num_preemptions;
  return s;
}

TEST(EngineScoreTest, ScoreRowsAreTheRowsGreedyGenerationPicksFrom) {
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = RandomTokens(rng, 7);
  auto engine = Engine::Create(FakeModel({}), EngineOptions{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.ignore_eos = true;
  greedy.max_tokens = 12;
  ASSERT_TRUE((*engine)->AddRequest(prompt, greedy).ok());
  std::vector<int32_t> generated;
  while ((*engine)->has_unfinished()) {
    auto outs = (*engine)->Step();
    ASSERT_TRUE(outs.ok()) << outs.status();
    for (const RequestOutput& o : *outs)
      generated.insert(generated.end(), o.tokens.begin(), o.tokens.end());
  }
  ASSERT_EQ(generated.size(), 12u);
  // The prompt and all but the last generated token, scored: the row of
  // each position from the prompt's last on predicts the next generated
  // token (EOS masked, as ignore_eos masks it).
  std::vector<int32_t> text = prompt;
  text.insert(text.end(), generated.begin(), generated.end() - 1);
  Scored s = RunScore(text, {}, {}, {});
  for (size_t j = 0; j < generated.size(); ++j) {
    const float* row = s.rows.data() + (prompt.size() - 1 + j) * kFakeVocab;
    int32_t best = -1;
    for (int32_t v = 0; v < kFakeVocab; ++v)
      if (v != testing::kFakeEos && (best < 0 || row[v] > row[best])) best = v;
    EXPECT_EQ(best, generated[j]) << "generated token " << j;
  }
}

TEST(EngineScoreTest, ScoreRowsDoNotDependOnTheBatchChunksOrPreemptions) {
  std::mt19937 rng(17);
  const std::vector<int32_t> tokens = RandomTokens(rng, 60);
  FakeModelOptions roomy;
  roomy.num_blocks = 256;
  const Scored alone = RunScore(tokens, {}, roomy, {});
  std::vector<std::vector<int32_t>> others;
  for (int i = 0; i < 12; ++i) others.push_back(RandomTokens(rng, 1 + int(rng() % 30)));
  // A cache of 40 blocks of 4 tokens: the 60 scored tokens take 15 of them,
  // and the others grow into the rest.
  FakeModelOptions tight;
  tight.num_blocks = 40;
  for (int64_t in_flight : {1, 2}) {
    for (int32_t decode_from : {0, 45}) {
      SCOPED_TRACE(::testing::Message() << in_flight << " steps in flight, decode_from "
                                        << decode_from);
      ScoreOptions score;
      score.decode_from = decode_from;
      const Scored mixed = RunScore(tokens, score, tight, others, in_flight);
      EXPECT_TRUE(mixed.rows == alone.rows) << "the rows differ from the request's alone";
      if (in_flight == 1 && decode_from == 0) EXPECT_GT(mixed.preemptions, 0);
    }
  }
}

// Prompt logprobs: the runner's (forced picks, the fake runner's
// PickOnHost) and the engine's from raw rows (runner_picks off) are the
// host sampler's TokenLogprobs of the raw score rows, to the bit, and a
// float64 log-softmax's within 1e-5; alone or batched with preemptions.
TEST(EngineScoreTest, PromptLogprobsAreTheLogSoftmaxOfTheScoreRows) {
  std::mt19937 rng(31);
  const std::vector<int32_t> tokens = RandomTokens(rng, 50);
  FakeModelOptions roomy;
  roomy.num_blocks = 256;
  const Scored raw = RunScore(tokens, {}, roomy, {});
  std::vector<std::vector<int32_t>> others;
  for (int i = 0; i < 10; ++i) others.push_back(RandomTokens(rng, 1 + int(rng() % 30)));
  FakeModelOptions tight;
  tight.num_blocks = 36;
  for (bool runner_picks : {true, false}) {
    for (int32_t top_n : {0, 3}) {
      SCOPED_TRACE(::testing::Message() << "runner picks " << runner_picks << ", top " << top_n);
      ScoreOptions score;
      score.prompt_logprobs = top_n;
      const Scored alone = RunScore(tokens, score, roomy, {}, 1, runner_picks);
      const Scored mixed = RunScore(tokens, score, tight, others, 1, runner_picks);
      EXPECT_GT(mixed.preemptions, 0);
      ASSERT_EQ(alone.logprobs.size(), tokens.size() - 1);
      ASSERT_EQ(mixed.logprobs.size(), tokens.size() - 1);
      SamplingParams p;
      p.logprobs = top_n;
      Sampler sampler(p);
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        const std::span<const float> row(raw.rows.data() + i * kFakeVocab, kFakeVocab);
        SampleResult want;
        sampler.TokenLogprobs(row, tokens[i + 1], &want);
        for (const Scored* got : {&alone, &mixed}) {
          const SampleResult& r = got->logprobs[i];
          EXPECT_EQ(r.token, tokens[i + 1]) << "position " << i;
          EXPECT_EQ(r.logprob, want.logprob) << "position " << i;
          ASSERT_EQ(r.top_logprobs.size(), size_t(top_n));
          for (int k = 0; k < top_n; ++k) {
            EXPECT_EQ(r.top_logprobs[size_t(k)].token, want.top_logprobs[size_t(k)].token);
            EXPECT_EQ(r.top_logprobs[size_t(k)].logprob, want.top_logprobs[size_t(k)].logprob);
          }
        }
        double top = -1e300, z = 0;
        for (float v : row) top = std::max(top, double(v));
        for (float v : row) z += std::exp(double(v) - top);
        EXPECT_NEAR(alone.logprobs[i].logprob, double(row[size_t(tokens[i + 1])]) - top - std::log(z),
                    1e-5);
      }
    }
  }
}

TEST(EngineScoreTest, BadScoreRequestsAreRefused) {
  FakeModelOptions small;
  small.num_blocks = 4;  // 16 tokens
  auto engine = Engine::Create(FakeModel(small), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  auto bad = (*engine)->AddScoreRequest({2, 3, kFakeVocab});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("scored token 2 is 24, outside the vocabulary [0, 24)"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ((*engine)->AddScoreRequest(std::vector<int32_t>(17, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ScoreOptions too_many;
  too_many.prompt_logprobs = 21;
  EXPECT_EQ((*engine)->AddScoreRequest({2, 3}, too_many).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*engine)->has_unfinished());
}

TEST(GeneratorTest, BatchedDecodeRunsInLockStepAndGivesTheAloneTokens) {
  auto gen = Generator::Create(FakeModel({}));
  ASSERT_TRUE(gen.ok()) << gen.status();
  std::mt19937 rng(23);
  std::vector<std::vector<int32_t>> prompts;
  // 6 prompts of 70 tokens in all, through steps of 32: the prompts take
  // several steps, which prefill-first keeps apart from the decodes.
  for (int n : {1, 20, 9, 14, 3, 23}) prompts.push_back(RandomTokens(rng, n));
  std::vector<std::vector<int32_t>> batched;
  auto seconds = (*gen)->TimeBatchedDecode(prompts, 10, &batched);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GT(*seconds, 0);
  ASSERT_EQ(batched.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.ignore_eos = true;
    greedy.max_tokens = 11;
    auto alone = (*gen)->Generate(prompts[i], greedy, nullptr);
    ASSERT_TRUE(alone.ok()) << alone.status();
    EXPECT_EQ(alone->tokens, batched[i]) << "sequence " << i;
  }
  // Too many sequences for a step's 16 logits rows.
  std::vector<std::vector<int32_t>> many(17, std::vector<int32_t>{2, 3});
  EXPECT_EQ((*gen)->TimeBatchedDecode(many, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GeneratorTest, ScoreGivesEveryPositionOnceWhateverThePrefill) {
  auto gen = Generator::Create(FakeModel({}));
  ASSERT_TRUE(gen.ok()) << gen.status();
  std::mt19937 rng(29);
  const std::vector<int32_t> tokens = RandomTokens(rng, 40);
  std::vector<std::vector<float>> by_prefill;
  for (int64_t prefill : {0, 5, 39}) {
    std::vector<float> rows;
    int64_t next = 0;
    ASSERT_TRUE((*gen)
                    ->Score(tokens, prefill,
                            [&](int64_t i, std::span<const float> row) {
                              EXPECT_EQ(i, next++);
                              rows.insert(rows.end(), row.begin(), row.end());
                            })
                    .ok());
    EXPECT_EQ(next, 40);
    by_prefill.push_back(std::move(rows));
  }
  EXPECT_TRUE(by_prefill[0] == by_prefill[1]);
  EXPECT_TRUE(by_prefill[0] == by_prefill[2]);
  // Prompt logprobs: positions 0 to 38, each the sampler's of its row.
  int64_t next = 0;
  Sampler sampler(SamplingParams{});
  ASSERT_TRUE((*gen)
                  ->PromptLogprobs(tokens, 0,
                                   [&](int64_t i, const SampleResult& r) {
                                     ASSERT_EQ(i, next++);
                                     SampleResult want;
                                     sampler.TokenLogprobs(
                                         std::span<const float>(
                                             by_prefill[0].data() + size_t(i) * kFakeVocab,
                                             kFakeVocab),
                                         tokens[size_t(i + 1)], &want);
                                     EXPECT_EQ(r.token, tokens[size_t(i + 1)]);
                                     EXPECT_EQ(r.logprob, want.logprob);
                                   })
                  .ok());
  EXPECT_EQ(next, 39);
  // A generation after the scores starts from an empty engine.
  SamplingParams p;
  p.max_tokens = 3;
  auto out = (*gen)->Generate(tokens, p, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens.size(), 3u);
}

TEST(GeneratorTest, GenerationEndsAtTheContextWhateverMaxTokensAsks) {
  FakeModelOptions m;
  m.max_position = 12;
  auto gen = Generator::Create(FakeModel(m));
  ASSERT_TRUE(gen.ok()) << gen.status();
  SamplingParams p;
  p.ignore_eos = true;
  p.max_tokens = 100;
  auto out = (*gen)->Generate(std::vector<int32_t>{2, 3, 4, 5}, p, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens.size(), 8u);
  EXPECT_EQ(out->reason, FinishReason::kLength);
  auto full = (*gen)->Generate(std::vector<int32_t>(12, 2), p, nullptr);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(full.status().message().find("the prompt has 12 tokens but the context holds 12"),
            std::string::npos)
      << full.status();
}

}  // namespace
}  // namespace llmc
