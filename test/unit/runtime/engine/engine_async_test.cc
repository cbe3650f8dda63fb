// Asynchronous scheduling (EngineOptions::async_scheduling) on a fake
// runner that feeds tokens as a GPU runner does (fake_model.h): step N+1 is
// scheduled while N is in flight, its decoding requests going on from N's
// picks, and every request still gets the tokens and logprobs it gets
// alone, through chunking, prefix hits, preemption, EOS and aborts.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "llmc/runtime/engine/engine.h"
#include "runtime/engine/fake_model.h"

namespace llmc {
namespace {

using testing::FakeModel;
using testing::FakeModelOptions;
using testing::FakeRunner;

struct Result {
  std::vector<int32_t> tokens;
  std::vector<SampleResult> logprobs;
  int finished = 0;
  FinishReason reason = FinishReason::kNone;
};

struct EngineRun {
  std::vector<Result> results;
  EngineStats stats;
  int64_t max_in_flight = 0;
  int64_t feeds = 0;  // StepBatch feeds the runner took
};

// Runs `reqs` through one engine on a fake runner, all added at once; the
// request `abort_index` (if any) is aborted after `abort_after` Step calls.
EngineRun RunAll(const std::vector<std::vector<int32_t>>& prompts,
           const std::vector<SamplingParams>& params, const FakeModelOptions& model,
           EngineOptions options, int abort_index = -1, int abort_after = 0) {
  options.check_invariants = true;
  EngineRun run;
  FakeRunner* runner = nullptr;
  auto engine = Engine::Create(FakeModel(model, &runner), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  std::map<RequestId, size_t> index;
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = (*engine)->AddRequest(prompts[i], params[i]);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return run;
    index[*id] = i;
    ids.push_back(*id);
  }
  run.results.resize(prompts.size());
  for (int step = 0; (*engine)->has_unfinished() && step < 100000; ++step) {
    if (step == abort_after && abort_index >= 0) {
      EXPECT_TRUE((*engine)->Abort(ids[size_t(abort_index)]).ok());
    }
    auto outs = (*engine)->Step();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok()) break;
    for (RequestOutput& o : *outs) {
      Result& r = run.results[index.at(o.id)];
      EXPECT_EQ(r.finished, 0) << "output after the finished one, request " << o.id;
      r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
      r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      if (o.finished) {
        ++r.finished;
        r.reason = o.reason;
      }
    }
  }
  EXPECT_FALSE((*engine)->has_unfinished());
  run.stats = (*engine)->stats();
  run.max_in_flight = runner->max_in_flight_seen_;
  run.feeds = runner->feeds_seen_;
  return run;
}

// Greedy and seeded draws (top-k, min-p), some with logprobs, some ending
// at EOS, prompts sharing prefixes.
void MixedRequests(int n, uint32_t seed, std::vector<std::vector<int32_t>>* prompts,
                   std::vector<SamplingParams>* params) {
  std::mt19937 rng(seed);
  const std::vector<int32_t> shared = {5, 6, 7, 8, 9, 10, 11, 12};
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = i % 4 == 0 ? shared : std::vector<int32_t>{};
    const int len = 1 + int(rng() % 40);
    for (int t = 0; t < len; ++t) p.push_back(2 + int32_t(rng() % 22));
    prompts->push_back(std::move(p));
    SamplingParams sp;
    sp.max_tokens = 1 + int(rng() % 30);
    sp.temperature = i % 2 ? 0.f : 0.9f;
    sp.top_k = 0;  // the defaults' top-p would be without top-k here (24 tokens)
    sp.top_p = 1.f;
    if (i % 6 == 2) sp.top_k = 5, sp.min_p = 0.05f;
    if (i % 5 == 1) sp.logprobs = 3;
    sp.seed = 300 + uint64_t(i);
    sp.ignore_eos = i % 3 == 0;
    params->push_back(sp);
  }
}

FakeModelOptions AsyncModel() {
  FakeModelOptions m;
  m.num_blocks = 56;  // below what they need at once: preemptions
  m.block_size = 4;
  m.max_batch_tokens = 24;
  m.steps_in_flight = 2;
  m.feeds = true;
  return m;
}

void ExpectSameResults(const EngineRun& got, const EngineRun& want) {
  ASSERT_EQ(got.results.size(), want.results.size());
  for (size_t i = 0; i < want.results.size(); ++i) {
    const Result &a = got.results[i], &b = want.results[i];
    EXPECT_EQ(a.finished, 1) << i;
    EXPECT_EQ(a.tokens, b.tokens) << "request " << i;
    EXPECT_EQ(a.reason, b.reason) << "request " << i;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << i;
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      EXPECT_EQ(a.logprobs[t].token, b.logprobs[t].token) << i;
      EXPECT_EQ(a.logprobs[t].logprob, b.logprobs[t].logprob) << i;
      EXPECT_EQ(a.logprobs[t].top_logprobs.size(), b.logprobs[t].top_logprobs.size()) << i;
    }
  }
}

TEST(EngineAsyncTest, FedStepsGiveTheTokensOfOneStepAtATime) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  MixedRequests(40, 21, &prompts, &params);
  EngineOptions o;
  o.max_seqs = 12;
  EngineOptions sync = o;
  sync.async_scheduling = false;
  const EngineRun one = RunAll(prompts, params, AsyncModel(), sync);
  const EngineRun fed = RunAll(prompts, params, AsyncModel(), o);
  ExpectSameResults(fed, one);
  EXPECT_EQ(one.max_in_flight, 1);
  EXPECT_EQ(one.feeds, 0);
  EXPECT_EQ(fed.max_in_flight, 2);
  EXPECT_GT(fed.stats.fed_tokens, 100);
  EXPECT_EQ(fed.feeds, fed.stats.fed_tokens);
  EXPECT_GT(fed.stats.steps_ahead, fed.stats.steps / 2);
  EXPECT_GT(fed.stats.scheduler.num_preemptions, 0);
  EXPECT_GT(fed.stats.scheduler.prefix_hit_tokens, 0);
}

// Without a runner that feeds, or with async scheduling off, a second step
// in flight would only split the batch: one step at a time.
TEST(EngineAsyncTest, NoFeedingRunnerRunsOneStepAtATime) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  MixedRequests(8, 3, &prompts, &params);
  FakeModelOptions m = AsyncModel();
  EngineOptions o;
  o.max_steps_in_flight = 1;
  const EngineRun capped = RunAll(prompts, params, m, o);
  EXPECT_EQ(capped.max_in_flight, 1);
  EXPECT_EQ(capped.stats.fed_tokens, 0);
}

// A request whose tokens need the host (penalties: the window would hold
// the unknown token; top-p alone: sampled here) holds the engine to one
// step at a time while it runs; the others are fed before and after.
TEST(EngineAsyncTest, RequestsSampledOnTheHostRunOneStepAtATime) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  MixedRequests(12, 5, &prompts, &params);
  for (SamplingParams& p : params) p.repetition_penalty = 1.2f;
  EngineOptions o;
  o.max_seqs = 12;
  const EngineRun penalized = RunAll(prompts, params, AsyncModel(), o);
  EXPECT_EQ(penalized.stats.fed_tokens, 0);
  EXPECT_EQ(penalized.max_in_flight, 1);

  // One such request among fed ones: the same tokens as one step at a time.
  params.clear();
  prompts.clear();
  MixedRequests(12, 5, &prompts, &params);
  params[4].top_p = 0.8f;  // top-p without top-k: the host samples it
  params[4].max_tokens = 4;
  EngineOptions sync = o;
  sync.async_scheduling = false;
  const EngineRun mixed = RunAll(prompts, params, AsyncModel(), o);
  ExpectSameResults(mixed, RunAll(prompts, params, AsyncModel(), sync));
  EXPECT_GT(mixed.stats.fed_tokens, 0);
}

// A fed chunk is scheduled only when the request can go on after the token
// in flight: with no EOS and no preemption, exactly the tokens of one step
// at a time are computed (none past max_tokens), and every decode token
// after the first of each request is fed.
TEST(EngineAsyncTest, NoTokenIsComputedPastMaxTokens) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  MixedRequests(16, 9, &prompts, &params);
  int64_t needed = 0, decodes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].ignore_eos = true;
    prompts[i].insert(prompts[i].begin(), int32_t(2 + i));  // no prefix hits
    needed += int64_t(prompts[i].size()) + params[i].max_tokens - 1;
    decodes += params[i].max_tokens - 1;
  }
  FakeModelOptions big = AsyncModel();
  big.num_blocks = 512;
  big.max_batch_tokens = 64;
  EngineOptions o;
  o.max_seqs = 16;
  const EngineRun fed = RunAll(prompts, params, big, o);
  EXPECT_EQ(fed.stats.scheduler.computed_tokens, needed);
  EXPECT_EQ(fed.stats.scheduler.num_preemptions, 0);
  EXPECT_GT(fed.stats.fed_tokens, decodes / 2);
  EXPECT_LE(fed.stats.fed_tokens, decodes);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(int(fed.results[i].tokens.size()), params[i].max_tokens) << i;
}

// A request aborted while its fed chunk is in flight ends once, with
// kAbort; the others get their tokens.
TEST(EngineAsyncTest, AbortWhileFedEndsOnce) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  MixedRequests(10, 17, &prompts, &params);
  for (SamplingParams& p : params) p.ignore_eos = true, p.max_tokens = 20;
  EngineOptions o;
  o.max_seqs = 12;
  EngineOptions sync = o;
  sync.async_scheduling = false;
  const EngineRun want = RunAll(prompts, params, AsyncModel(), sync);
  for (int after : {3, 6, 9}) {
    const EngineRun got = RunAll(prompts, params, AsyncModel(), o, /*abort_index=*/1, after);
    EXPECT_GT(got.stats.fed_tokens, 0);
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(got.results[i].finished, 1) << i;
      if (i == 1) {
        EXPECT_EQ(got.results[i].reason, FinishReason::kAbort);
        continue;
      }
      EXPECT_EQ(got.results[i].tokens, want.results[i].tokens)
          << "abort after " << after << ", request " << i;
    }
  }
}

}  // namespace
}  // namespace llmc
