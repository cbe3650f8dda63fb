// The scheduler with several steps in flight (a pipeline's stages each run
// one): a second Schedule() before the first step completes takes only the
// requests not in flight, never preempts one whose step is in flight (that
// step writes its blocks), and CompleteStep drops the chunks of requests
// finished meanwhile. Invariants are checked after every call.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "llmc/runtime/engine/scheduler.h"

namespace llmc {
namespace {

std::vector<int32_t> Prompt(int32_t n, int32_t first) {
  std::vector<int32_t> v(size_t(n), 0);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::set<RequestId> Ids(const SchedulerOutput& out) {
  std::set<RequestId> ids;
  for (const ScheduledChunk& c : out.chunks) ids.insert(c.id);
  return ids;
}

class SchedulerInFlightTest : public ::testing::Test {
 protected:
  void Init(int32_t num_blocks, int32_t budget, bool async = false, bool prefill_first = false) {
    auto pool = BlockPool::Create(num_blocks, 4);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(pool).value();
    kv_ = std::make_unique<KVCacheManager>(*pool_, KVCacheManager::Options{});
    SchedulerConfig config;
    config.max_batch_tokens = budget;
    config.max_seqs = 16;
    config.max_model_len = 1 << 10;
    config.async_scheduling = async;
    config.prefill_first = prefill_first;
    sched_ = std::make_unique<Scheduler>(config, *kv_);
  }
  SchedulerOutput Schedule() {
    auto out = sched_->Schedule();
    EXPECT_TRUE(out.ok()) << out.status();
    absl::Status inv = sched_->CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
    return out.ok() ? *out : SchedulerOutput{};
  }
  // Completes `out` and appends a token to each request it samples for.
  void Complete(const SchedulerOutput& out) {
    ASSERT_TRUE(sched_->CompleteStep(out).ok());
    for (const ScheduledChunk& c : out.chunks)
      if (c.sample && sched_->contains(c.id)) ASSERT_TRUE(sched_->AppendToken(c.id, 7).ok());
    absl::Status inv = sched_->CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
  }

  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(SchedulerInFlightTest, StepsInFlightTakeDisjointRequests) {
  Init(/*num_blocks=*/64, /*budget=*/16);
  for (RequestId id = 0; id < 4; ++id)
    ASSERT_TRUE(sched_->AddRequest(id, Prompt(8, 100 * int32_t(id)), 4).ok());
  // The budget admits two 8-token prompts per step.
  const SchedulerOutput a = Schedule();
  EXPECT_EQ(Ids(a), (std::set<RequestId>{0, 1}));
  const SchedulerOutput b = Schedule();  // a is in flight
  EXPECT_EQ(Ids(b), (std::set<RequestId>{2, 3}));
  // Everything is in flight: nothing to schedule, and that is no error.
  EXPECT_TRUE(Schedule().empty());
  Complete(a);
  // a's requests decode on; b's are still in flight.
  const SchedulerOutput c = Schedule();
  EXPECT_EQ(Ids(c), (std::set<RequestId>{0, 1}));
  for (const ScheduledChunk& ch : c.chunks) EXPECT_EQ(ch.num_tokens, 1);
  Complete(b);
  Complete(c);
  EXPECT_EQ(sched_->num_computed_tokens(0), 9);
  EXPECT_EQ(sched_->num_computed_tokens(2), 8);
}

TEST_F(SchedulerInFlightTest, PreemptionSparesRequestsInFlight) {
  // 6 blocks of 4 tokens. Request 0 (newest-first order would pick it last)
  // takes 3 blocks and is in flight; request 1, admitted after it, grows
  // past the rest: the victim must be request 1 itself, not request 0.
  Init(/*num_blocks=*/6, /*budget=*/64);
  ASSERT_TRUE(sched_->AddRequest(0, Prompt(12, 0), 8).ok());
  const SchedulerOutput a = Schedule();
  ASSERT_EQ(Ids(a), (std::set<RequestId>{0}));
  ASSERT_TRUE(sched_->AddRequest(1, Prompt(12, 500), 8).ok());
  const SchedulerOutput b = Schedule();
  ASSERT_EQ(Ids(b), (std::set<RequestId>{1}));
  Complete(b);  // request 1 holds 12 tokens and has sampled a 13th: 6 blocks taken
  // Request 1's next token needs a 7th block while request 0 is in flight.
  const SchedulerOutput c = Schedule();
  EXPECT_TRUE(c.chunks.empty());
  EXPECT_EQ(c.preempted, (std::vector<RequestId>{1}));
  EXPECT_EQ(sched_->num_preemptions(0), 0);
  Complete(a);
  EXPECT_EQ(sched_->num_computed_tokens(0), 12);
}

TEST_F(SchedulerInFlightTest, ARequestFinishedInFlightIsDroppedAtCompletion) {
  Init(/*num_blocks=*/16, /*budget=*/64);
  ASSERT_TRUE(sched_->AddRequest(0, Prompt(5, 0), 4).ok());
  ASSERT_TRUE(sched_->AddRequest(1, Prompt(6, 50), 4).ok());
  const SchedulerOutput a = Schedule();
  ASSERT_EQ(Ids(a), (std::set<RequestId>{0, 1}));
  ASSERT_TRUE(sched_->Finish(0).ok());  // aborted while its step runs
  Complete(a);
  EXPECT_FALSE(sched_->contains(0));
  EXPECT_EQ(sched_->num_computed_tokens(1), 6);
  // Completing a step twice is a bug, said so.
  EXPECT_FALSE(sched_->CompleteStep(a).ok());
}

// Asynchronous scheduling: a feedable request decoding in the step in
// flight is scheduled again on the token that step samples (a fed chunk
// one past its known tokens), and only while max_new_tokens leaves room for
// a token after that one.
TEST_F(SchedulerInFlightTest, AFeedableRequestInFlightGetsAFedChunk) {
  Init(/*num_blocks=*/16, /*budget=*/64, /*async=*/true);
  ASSERT_TRUE(sched_->AddRequest(0, Prompt(5, 0), 3, /*feedable=*/true).ok());
  ASSERT_TRUE(sched_->AddRequest(1, Prompt(6, 50), 3, /*feedable=*/false).ok());
  const SchedulerOutput a = Schedule();  // both prompts
  const SchedulerOutput b = Schedule();  // a in flight: 0 fed at position 5
  ASSERT_EQ(b.chunks.size(), 1u);
  EXPECT_EQ(b.chunks[0].id, 0);
  EXPECT_TRUE(b.chunks[0].fed && b.chunks[0].sample);
  EXPECT_EQ(b.chunks[0].first_position, 5);
  EXPECT_TRUE(Schedule().empty());  // 0 is fed already, 1 is not feedable
  Complete(a);                      // token 5 of each known
  const SchedulerOutput c = Schedule();  // 0 fed again (its third token), 1 decodes
  EXPECT_EQ(Ids(c), (std::set<RequestId>{0, 1}));
  for (const ScheduledChunk& ch : c.chunks) EXPECT_EQ(ch.fed, ch.id == 0);
  Complete(b);
  Complete(c);
  EXPECT_EQ(sched_->tokens(0).size(), 8u);  // 5 + 3: max_new_tokens reached
  // No fed chunk past max_new_tokens: request 0's last token came from c.
  const SchedulerOutput d = Schedule();
  EXPECT_EQ(Ids(d), (std::set<RequestId>{0, 1}));
  const SchedulerOutput e = Schedule();
  EXPECT_TRUE(e.empty()) << "a chunk for a token past max_new_tokens";
}

// Prefill first and asynchronous: a prompt whose rest waits for its chunk
// in flight holds every decode, fed ones too (requests added together
// decode in lock step, as `llmc bench`'s tgN@bB needs).
TEST_F(SchedulerInFlightTest, PrefillFirstHoldsFedDecodesWhileAPromptIsInFlight) {
  Init(/*num_blocks=*/32, /*budget=*/12, /*async=*/true, /*prefill_first=*/true);
  ASSERT_TRUE(sched_->AddRequest(0, Prompt(4, 0), 8, true).ok());
  ASSERT_TRUE(sched_->AddRequest(1, Prompt(14, 50), 8, true).ok());
  const SchedulerOutput a = Schedule();  // 0 whole, 8 of 1's 14
  ASSERT_EQ(Ids(a), (std::set<RequestId>{0, 1}));
  EXPECT_TRUE(Schedule().empty()) << "request 0 decodes before request 1's prompt is in";
  Complete(a);
  const SchedulerOutput b = Schedule();  // the rest of 1's prompt alone
  ASSERT_EQ(Ids(b), (std::set<RequestId>{1}));
  const SchedulerOutput c = Schedule();  // 1's prompt is complete in b: both decode
  EXPECT_EQ(Ids(c), (std::set<RequestId>{0, 1}));
  for (const ScheduledChunk& ch : c.chunks) EXPECT_EQ(ch.fed, ch.id == 1);
  Complete(b);
  Complete(c);
}

}  // namespace
}  // namespace llmc
