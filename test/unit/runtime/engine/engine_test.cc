// The Engine on a fake model (fake_model.h): whatever the batching, chunking,
// prefix caching and preemption, each request gets the tokens it gets
// alone; every request ends in exactly one finished output; aborts and
// failed steps end only their requests and free their blocks.
#include "llmc/runtime/engine/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "runtime/engine/fake_model.h"

namespace llmc {
namespace {

using testing::FakeModel;
using testing::FakeModelOptions;
using testing::FakeRunner;

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  int finished = 0;
  RequestOutput final;
};

struct Req {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

// Runs `reqs` through one engine, all submitted at once.
std::vector<Result> RunAll(const std::vector<Req>& reqs, const FakeModelOptions& model,
                           EngineOptions options, EngineStats* stats = nullptr,
                           int64_t* max_in_flight = nullptr, int64_t* picks = nullptr) {
  options.check_invariants = true;
  FakeRunner* runner = nullptr;  // owned by the engine: read before it goes
  auto engine = Engine::Create(FakeModel(model, &runner), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = (*engine)->AddRequest(reqs[i].prompt, reqs[i].params);
    EXPECT_TRUE(id.ok()) << id.status();
    if (id.ok()) index[*id] = i;
  }
  std::vector<Result> results(reqs.size());
  for (int step = 0; (*engine)->has_unfinished() && step < 100000; ++step) {
    auto outs = (*engine)->Step();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok()) break;
    for (RequestOutput& o : *outs) {
      Result& r = results[index.at(o.id)];
      EXPECT_EQ(r.finished, 0) << "output after the finished one, request " << o.id;
      r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
      r.text += o.text;
      if (o.finished) {
        ++r.finished;
        r.final = o;
      }
    }
  }
  EXPECT_FALSE((*engine)->has_unfinished());
  if (stats) *stats = (*engine)->stats();
  if (max_in_flight) *max_in_flight = runner->max_in_flight_seen_;
  if (picks) *picks = runner->picks_seen_;
  return results;
}

std::vector<Req> MixedRequests(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Req> reqs;
  for (int i = 0; i < n; ++i) {
    Req r;
    const int len = 1 + int(rng() % 90);
    for (int t = 0; t < len; ++t) r.prompt.push_back(2 + int32_t(rng() % 22));
    r.params.max_tokens = 1 + int(rng() % 30);
    r.params.temperature = i % 2 ? 0.f : 0.9f;
    r.params.top_k = 0;
    r.params.top_p = 1.f;
    r.params.min_p = 0.f;
    r.params.seed = 100 + uint64_t(i);
    r.params.ignore_eos = i % 3 == 0;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

// Each request run alone, in a cache that holds it whole.
std::vector<Result> RunEachAlone(const std::vector<Req>& reqs) {
  FakeModelOptions big;
  big.num_blocks = 2048;
  big.max_batch_tokens = 256;
  EngineOptions alone_opts;
  alone_opts.max_seqs = 1;
  std::vector<Result> alone;
  for (const Req& r : reqs) alone.push_back(RunAll({r}, big, alone_opts)[0]);
  return alone;
}

TEST(EngineTest, BatchedChunkedPreemptedRequestsGetTheirAloneTokens) {
  const std::vector<Req> reqs = MixedRequests(40, 7);
  const std::vector<Result> alone = RunEachAlone(reqs);

  // A small budget (chunking), a cache far below what they need
  // (preemption), prefix caching on.
  FakeModelOptions small;
  small.num_blocks = 40;
  small.block_size = 4;
  small.max_batch_tokens = 24;
  EngineOptions batched_opts;
  batched_opts.max_seqs = 12;
  EngineStats stats;
  std::vector<Result> batched = RunAll(reqs, small, batched_opts, &stats);
  ASSERT_EQ(batched.size(), reqs.size());
  EXPECT_GT(stats.scheduler.num_preemptions, 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(batched[i].finished, 1) << i;
    EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(batched[i].text, alone[i].text) << "request " << i;
    EXPECT_EQ(batched[i].final.reason, alone[i].final.reason) << i;
    EXPECT_EQ(batched[i].final.usage.completion_tokens, int(batched[i].tokens.size()));
  }
}

// Requests have their tokens (and logprobs) picked by the runner
// (StepBatch::picks: greedy, and seeded draws with top-k, top-p, both or
// neither; penalties over their window too; the fake leaves NaN in those
// rows' logits, as a GPU copies none back): the same tokens, text and
// logprobs as sampling every row here, one pick per token of exactly those
// requests.
TEST(EngineTest, RunnerPicksGiveTheHostSamplersTokens) {
  std::vector<Req> reqs = MixedRequests(48, 13);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SamplingParams& p = reqs[i].params;
    if (i % 8 == 1) p.logprobs = 2;               // logprobs: picked with them
    if (i % 8 == 3) p.repetition_penalty = 1.3f, p.presence_penalty = 0.5f;  // penalties: picked
    if (i % 8 == 5) p.frequency_penalty = 0.7f, p.repeat_last_n = -1;       // the whole context
    if (i % 8 == 4) p.top_k = 5, p.top_p = 0.8f, p.min_p = 0.1f;  // top-k, top-p, min-p: picked
    if (i % 8 == 6) p.top_p = 0.8f;               // top-p without top-k: picked
  }
  FakeModelOptions small;
  small.num_blocks = 40;
  small.block_size = 4;
  small.max_batch_tokens = 24;
  EngineOptions o;
  o.max_seqs = 12;
  int64_t picks = -1, host_picks = -1;
  EngineOptions host = o;
  host.runner_picks = false;
  const std::vector<Result> on_host = RunAll(reqs, small, host, nullptr, nullptr, &host_picks);
  const std::vector<Result> picked = RunAll(reqs, small, o, nullptr, nullptr, &picks);
  ASSERT_EQ(picked.size(), reqs.size());
  int64_t eligible = 0, sampled_picks = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(picked[i].tokens, on_host[i].tokens) << "request " << i;
    EXPECT_EQ(picked[i].text, on_host[i].text) << "request " << i;
    const SamplingParams& p = reqs[i].params;
    if (PickSupports(p.temperature, p.top_k, testing::kFakeVocab)) {
      eligible += int64_t(picked[i].tokens.size());
      if (p.temperature > 0) sampled_picks += int64_t(picked[i].tokens.size());
    }
    // Logprobs come with every token of a request that asked, as the
    // sampler gives them.
    if (p.logprobs == 0) continue;
    ASSERT_EQ(picked[i].final.logprobs.size(), 1u) << i;
    ASSERT_EQ(on_host[i].final.logprobs.size(), 1u) << i;
    const SampleResult &a = picked[i].final.logprobs[0], &b = on_host[i].final.logprobs[0];
    EXPECT_EQ(a.token, b.token) << i;
    EXPECT_EQ(a.logprob, b.logprob) << i;
    ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size()) << i;
    for (size_t t = 0; t < a.top_logprobs.size(); ++t) {
      EXPECT_EQ(a.top_logprobs[t].token, b.top_logprobs[t].token) << i;
      EXPECT_EQ(a.top_logprobs[t].logprob, b.top_logprobs[t].logprob) << i;
    }
  }
  EXPECT_EQ(host_picks, 0);
  EXPECT_GT(sampled_picks, 40);
  EXPECT_EQ(picks, eligible);
}

// A runner with several steps in flight (pipeline stages): the engine
// keeps it full with steps of disjoint requests, and every request still
// gets its alone tokens, through chunking, prefix hits and preemptions.
TEST(EngineTest, StepsInFlightGiveTheAloneTokens) {
  const std::vector<Req> reqs = MixedRequests(40, 11);
  const std::vector<Result> alone = RunEachAlone(reqs);
  for (int64_t depth : {2, 3}) {
    FakeModelOptions small;
    small.num_blocks = 48;
    small.max_batch_tokens = 24;
    small.steps_in_flight = depth;
    EngineOptions batched_opts;
    batched_opts.max_seqs = 12;
    EngineStats stats;
    int64_t max_in_flight = 0;
    std::vector<Result> batched = RunAll(reqs, small, batched_opts, &stats, &max_in_flight);
    ASSERT_EQ(batched.size(), reqs.size());
    EXPECT_GT(stats.scheduler.num_preemptions, 0) << "depth " << depth;
    EXPECT_EQ(max_in_flight, depth);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(batched[i].finished, 1) << i;
      EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "depth " << depth << ", request " << i;
      EXPECT_EQ(batched[i].final.reason, alone[i].final.reason) << i;
    }
  }
}

// A request aborted while its step is in flight ends once, with kAbort;
// the step's other requests go on.
TEST(EngineTest, AbortWhileInFlightEndsOnce) {
  FakeModelOptions m;
  m.steps_in_flight = 2;
  m.max_batch_tokens = 8;
  EngineOptions o;
  o.check_invariants = true;
  FakeRunner* runner = nullptr;
  auto engine = Engine::Create(FakeModel(m, &runner), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 20;
  p.ignore_eos = true;
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    // No shared prefix: each prompt's 5 tokens are computed.
    auto id = (*engine)->AddRequest({int32_t(2 + i), 3, 4, 5, 6}, p);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  std::map<RequestId, int> finished;
  std::map<RequestId, FinishReason> reason;
  auto step = [&] {
    auto outs = (*engine)->Step();
    ASSERT_TRUE(outs.ok()) << outs.status();
    for (const RequestOutput& out : *outs)
      if (out.finished) {
        ++finished[out.id];
        reason[out.id] = out.reason;
      }
  };
  // Two steps of 8 tokens submitted: request 0 and a chunk of request 1,
  // then (1 being in flight) request 2 and a chunk of 3; the first collected.
  step();
  ASSERT_TRUE((*engine)->Abort(ids[2]).ok());  // in the step still in flight
  while ((*engine)->has_unfinished()) step();
  for (RequestId id : ids) EXPECT_EQ(finished[id], 1) << id;
  EXPECT_EQ(reason[ids[2]], FinishReason::kAbort);
  for (size_t i : {0, 1, 3}) {
    EXPECT_NE(reason[ids[i]], FinishReason::kAbort) << i;
    EXPECT_NE(reason[ids[i]], FinishReason::kError) << i;
  }
  EXPECT_EQ(runner->max_in_flight_seen_, 2);
}

TEST(EngineTest, SharedPromptIsComputedOnceAndGivesTheSameTokens) {
  std::vector<Req> reqs;
  std::vector<int32_t> system;
  for (int i = 0; i < 200; ++i) system.push_back(2 + (i * 7) % 22);
  for (int i = 0; i < 16; ++i) {
    Req r;
    r.prompt = system;
    r.prompt.push_back(2 + i);
    r.params.temperature = 0;
    r.params.max_tokens = 5;
    r.params.ignore_eos = true;
    reqs.push_back(r);
  }
  FakeModelOptions m;
  m.num_blocks = 1024;
  m.block_size = 16;
  m.max_batch_tokens = 64;
  EngineStats with, without;
  EngineOptions on;
  on.max_seqs = 16;
  EngineOptions off = on;
  off.enable_prefix_caching = false;
  std::vector<Result> a = RunAll(reqs, m, on, &with);
  std::vector<Result> b = RunAll(reqs, m, off, &without);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << i;
  EXPECT_EQ(without.scheduler.computed_prompt_tokens, 16 * 201);
  // The 192 tokens of whole blocks once, then each request's last 9.
  EXPECT_EQ(with.scheduler.computed_prompt_tokens, 201 + 15 * 9);
  EXPECT_EQ(a[5].final.usage.cached_prompt_tokens, 192);
}

TEST(EngineTest, AbortEndsOnlyThatRequestAndFreesItsBlocks) {
  FakeModelOptions m;
  EngineOptions o;
  o.check_invariants = true;
  auto engine = Engine::Create(FakeModel(m), o);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 50;
  p.ignore_eos = true;
  auto a = e.AddRequest({2, 3, 4, 5, 6, 7}, p);
  auto b = e.AddRequest({8, 9, 10}, p);
  auto c = e.AddRequest({11, 12}, p);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.Step().ok());
  ASSERT_TRUE(e.Abort(*b).ok());
  EXPECT_EQ(e.Abort(*b).code(), absl::StatusCode::kNotFound);
  auto outs = e.Step();
  ASSERT_TRUE(outs.ok());
  int finished_b = 0;
  for (const RequestOutput& out : *outs) {
    if (out.id == *b) {
      EXPECT_TRUE(out.finished);
      EXPECT_EQ(out.reason, FinishReason::kAbort);
      ++finished_b;
    } else {
      EXPECT_FALSE(out.finished);
    }
  }
  EXPECT_EQ(finished_b, 1);
  while (e.has_unfinished()) ASSERT_TRUE(e.Step().ok());
  const EngineStats s = e.stats();
  EXPECT_EQ(s.kv.num_free_blocks, s.kv.num_blocks);
  EXPECT_EQ(s.requests_finished, 3);
}

TEST(EngineTest, FailedStepEndsItsRequestsWithTheErrorAndTheEngineGoesOn) {
  FakeModelOptions m;
  FakeRunner* runner = nullptr;
  EngineOptions o;
  o.check_invariants = true;
  auto engine = Engine::Create(FakeModel(m, &runner), o);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 4;
  p.ignore_eos = true;
  auto a = e.AddRequest({2, 3, 4}, p);
  ASSERT_TRUE(a.ok());
  runner->fail_at_step_ = 2;
  ASSERT_TRUE(e.Step().ok());
  auto outs = e.Step();
  ASSERT_TRUE(outs.ok());
  ASSERT_EQ(outs->size(), 1u);
  EXPECT_EQ((*outs)[0].reason, FinishReason::kError);
  EXPECT_NE((*outs)[0].status.message().find("injected failure"), std::string::npos);
  EXPECT_FALSE(e.has_unfinished());
  // A later request runs normally.
  auto b = e.AddRequest({2, 3, 4}, p);
  ASSERT_TRUE(b.ok());
  int tokens = 0;
  while (e.has_unfinished()) {
    auto more = e.Step();
    ASSERT_TRUE(more.ok());
    for (const RequestOutput& out : *more) tokens += int(out.tokens.size());
  }
  EXPECT_EQ(tokens, 4);
  EXPECT_EQ(e.stats().kv.num_free_blocks, e.stats().kv.num_blocks);
}

TEST(EngineTest, RefusesWhatCanNeverFitWithClearErrors) {
  FakeModelOptions m;
  m.num_blocks = 8;
  m.block_size = 4;  // 32 slots
  auto engine = Engine::Create(FakeModel(m), EngineOptions());
  ASSERT_TRUE(engine.ok());
  SamplingParams p;
  p.max_tokens = 10;
  std::vector<int32_t> long_prompt(30, 5);
  auto r = (*engine)->AddRequest(long_prompt, p);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("whole cache has 8"), std::string::npos) << r.status();
  EXPECT_EQ((*engine)->AddRequest({}, p).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*engine)->AddRequest({99}, p).status().code(), absl::StatusCode::kInvalidArgument);
  p.top_p = 2;
  EXPECT_EQ((*engine)->AddRequest({3}, p).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*engine)->has_unfinished());
}

TEST(EngineTest, MaxTokensMinusOneEndsAtTheContext) {
  FakeModelOptions m;
  m.num_blocks = 16;
  m.block_size = 4;
  m.max_position = 40;
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = -1;
  p.ignore_eos = true;
  std::vector<Result> r = RunAll({{{2, 3, 4, 5, 6}, p}}, m, EngineOptions());
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].final.reason, FinishReason::kLength);
  EXPECT_EQ(int(r[0].tokens.size()), 40 - 5);
}

}  // namespace
}  // namespace llmc
