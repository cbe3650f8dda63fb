// The scheduler alone (scheduler_fixture.h): budgets, chunked prefill,
// prefix caching, preemption and admission.
#include "llmc/runtime/engine/scheduler.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/engine/scheduler_fixture.h"

namespace llmc {
namespace {

using testing::SchedulerTest;
using testing::Tokens;

TEST_F(SchedulerTest, RandomWorkloadKeepsBudgetCapAndInvariants) {
  Init(/*num_blocks=*/64, /*block_size=*/8, /*budget=*/48, /*max_seqs=*/6);
  std::mt19937 rng(1234);
  RequestId next = 0;
  for (int round = 0; round < 400; ++round) {
    if (rng() % 3 == 0 && next < 120) {
      const int32_t len = 1 + int32_t(rng() % 120);
      Add(next++, Tokens(len, int32_t(rng() % 4) * 1000), 1 + int32_t(rng() % 40));
    }
    if (!sched_->has_unfinished()) continue;
    Step();
    if (HasFailure()) return;
  }
  RunToEnd();
  EXPECT_EQ(finished_.size(), size_t(next));
  EXPECT_GT(sched_->stats().num_preemptions, 0) << "the workload should overflow the cache";
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, LongPromptIsChunkedWhileDecodesKeepStepping) {
  Init(/*num_blocks=*/512, /*block_size=*/16, /*budget=*/256, /*max_seqs=*/16);
  for (RequestId id = 0; id < 8; ++id) Add(id, Tokens(20, 5000 + 100 * int32_t(id)), 1000);
  // Until the eight decode.
  while (sched_->stats().num_running < 8 || sched_->num_computed_tokens(7) < 20) Step();
  Add(100, Tokens(3000), 10);
  int prompt_steps = 0;
  while (sched_->num_computed_tokens(100) < 3000) {
    SchedulerOutput out = Step();
    ASSERT_FALSE(HasFailure());
    std::set<RequestId> decoding;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.id < 8) {
        EXPECT_EQ(c.num_tokens, 1);
        EXPECT_TRUE(c.sample);
        decoding.insert(c.id);
      } else {
        // The prompt takes what the decodes leave.
        EXPECT_EQ(c.num_tokens, std::min(256 - 8, 3000 - c.first_position));
        ++prompt_steps;
      }
    }
    EXPECT_EQ(decoding.size(), 8u) << "every running decode gets its token every step";
  }
  EXPECT_EQ(prompt_steps, (3000 + 247) / 248);
}

TEST_F(SchedulerTest, LongPrefillThresholdCapsEachPromptChunk) {
  Init(/*num_blocks=*/512, /*block_size=*/16, /*budget=*/256, /*max_seqs=*/16);
  SchedulerConfig config = sched_->config();
  config.long_prefill_token_threshold = 24;
  sched_ = std::make_unique<Scheduler>(config, *kv_);
  // Eight short prompts are each cut at 24 tokens too, in one step.
  for (RequestId id = 0; id < 8; ++id) Add(id, Tokens(30, 5000 + 100 * int32_t(id)), 1000);
  SchedulerOutput first = Step();
  ASSERT_EQ(first.chunks.size(), 8u);
  for (const ScheduledChunk& c : first.chunks) EXPECT_EQ(c.num_tokens, 24);
  while (sched_->num_computed_tokens(7) < 30) Step();
  Add(100, Tokens(1000), 10);
  int prompt_steps = 0;
  while (sched_->num_computed_tokens(100) < 1000) {
    SchedulerOutput out = Step();
    ASSERT_FALSE(HasFailure());
    int decoding = 0;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.id < 8) {
        EXPECT_EQ(c.num_tokens, 1);
        ++decoding;
      } else {
        EXPECT_EQ(c.num_tokens, std::min(24, 1000 - c.first_position));
        ++prompt_steps;
      }
    }
    EXPECT_EQ(decoding, 8) << "every running decode gets its token every step";
  }
  EXPECT_EQ(prompt_steps, (1000 + 23) / 24);
}

TEST_F(SchedulerTest, PrefixHitSkipsExactlyTheCachedWholeBlocks) {
  Init(/*num_blocks=*/64, /*block_size=*/16, /*budget=*/512, /*max_seqs=*/8);
  std::vector<int32_t> a = Tokens(50);
  Add(1, a, 2);
  RunToEnd();
  // Shares 40 tokens with `a`: its first two blocks (32 tokens) are cached
  // whole, the third is not (it differs at 40).
  std::vector<int32_t> b(a.begin(), a.begin() + 40);
  for (int i = 0; i < 20; ++i) b.push_back(9000 + i);
  Add(2, b, 2);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].first_position, 32);
  EXPECT_EQ(out.chunks[0].num_tokens, 60 - 32);
  EXPECT_EQ(out.num_prefix_hit_tokens, 32);
  RunToEnd();
  // The same 48 tokens again: three whole blocks are cached, but the last
  // token is always computed for its logits, so the hit stops at two.
  std::vector<int32_t> c(a.begin(), a.begin() + 48);
  Add(3, c, 2);
  out = Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].first_position, 32);
  EXPECT_EQ(out.chunks[0].num_tokens, 16);
  RunToEnd();
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, NoPrefixCacheComputesEverything) {
  Init(64, 16, 512, 8, /*prefix_caching=*/false);
  Add(1, Tokens(50), 2);
  RunToEnd();
  Add(2, Tokens(50), 2);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].first_position, 0);
  EXPECT_EQ(out.num_prefix_hit_tokens, 0);
}

TEST_F(SchedulerTest, SharedPromptIsComputedOnceAcrossSteps) {
  // Eight requests with one 100-token prompt, submitted together, a budget
  // of 64: the later ones read the first one's blocks, some of them written
  // in the very step that admits them, instead of computing them again.
  Init(/*num_blocks=*/128, /*block_size=*/16, /*budget=*/64, /*max_seqs=*/16);
  for (RequestId id = 0; id < 8; ++id) Add(id, Tokens(100), 4);
  RunToEnd();
  // 100 once, then each of the other seven recomputes only what follows the
  // six whole cached blocks (4 tokens), plus 3 decode tokens each.
  const SchedulerStats s = sched_->stats();
  EXPECT_EQ(s.computed_tokens, 100 + 7 * 4 + 8 * 3);
  EXPECT_EQ(s.prefix_hit_tokens, 7 * 96);
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, PreemptsNewestFirstAndReadmitsAheadOfLaterRequests) {
  // 10 blocks of 4 tokens; three requests of 8-token prompts that each want
  // 20 more tokens: 7 blocks each at the end, so they cannot all stay.
  Init(/*num_blocks=*/10, /*block_size=*/4, /*budget=*/64, /*max_seqs=*/8,
       /*prefix_caching=*/false);
  Add(1, Tokens(8, 100), 20);
  Add(2, Tokens(8, 200), 20);
  Add(3, Tokens(8, 300), 20);
  std::vector<RequestId> preempted;
  bool added_late = false;
  while (sched_->has_unfinished()) {
    SchedulerOutput out = Step();
    ASSERT_FALSE(HasFailure());
    for (RequestId id : out.preempted) {
      preempted.push_back(id);
      // Its sampled tokens are kept; only its cache goes.
      EXPECT_GT(int32_t(sched_->tokens(id).size()), 8);
      EXPECT_EQ(sched_->num_computed_tokens(id), 0);
    }
    if (!out.preempted.empty() && !added_late) {
      Add(4, Tokens(8, 400), 2);  // arrives after the preemption
      added_late = true;
    }
    for (const ScheduledChunk& c : out.chunks) {
      if (c.id == 4) {
        // Request 4 may only start once every preempted request is back.
        for (RequestId p : preempted) {
          if (sched_->contains(p)) {
            EXPECT_GT(sched_->num_computed_tokens(p), 0) << p;
          }
        }
      }
    }
  }
  ASSERT_FALSE(preempted.empty());
  EXPECT_EQ(preempted.front(), 3) << "the newest request goes first";
  EXPECT_EQ(std::count(finished_.begin(), finished_.end(), 3), 1);
  EXPECT_EQ(finished_.size(), 4u);
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, AbortAndFinishFreeEveryBlock) {
  Init(/*num_blocks=*/40, /*block_size=*/8, /*budget=*/32, /*max_seqs=*/4);
  for (RequestId id = 0; id < 10; ++id) Add(id, Tokens(30, int32_t(id) * 50), 30);
  for (int i = 0; i < 6; ++i) Step();
  ASSERT_GT(sched_->stats().num_running, 0);
  ASSERT_GT(sched_->stats().num_waiting, 0);
  // Abort running and waiting requests alike.
  for (RequestId id = 0; id < 10; ++id) {
    if (!sched_->contains(id)) continue;
    ASSERT_TRUE(sched_->Finish(id).ok());
    absl::Status inv = sched_->CheckInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
  }
  EXPECT_FALSE(sched_->has_unfinished());
  ExpectAllBlocksFree();
  EXPECT_EQ(sched_->Finish(3).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(sched_->Schedule().value().empty());
}

TEST_F(SchedulerTest, RequestLargerThanTheWholeCacheIsRefusedAtAdmission) {
  Init(/*num_blocks=*/8, /*block_size=*/16, 512, 8, true, /*max_model_len=*/2048);
  absl::Status st = sched_->AddRequest(1, Tokens(100), 100);  // 199 K/V > 128 slots
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("whole cache has 8"), std::string::npos) << st;
  EXPECT_FALSE(sched_->contains(1));
  // Exactly the cache: 100 + 29 tokens store 128 K/V.
  EXPECT_TRUE(sched_->AddRequest(2, Tokens(100), 29).ok());
  EXPECT_EQ(sched_->AddRequest(2, Tokens(10), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->AddRequest(3, {}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sched_->AddRequest(4, Tokens(2048), 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, SequenceCapLimitsAdmission) {
  Init(/*num_blocks=*/256, /*block_size=*/16, /*budget=*/1024, /*max_seqs=*/3);
  for (RequestId id = 0; id < 7; ++id) Add(id, Tokens(10, int32_t(id) * 20), 5);
  SchedulerOutput out = Step();
  EXPECT_EQ(out.chunks.size(), 3u);
  RunToEnd();
  EXPECT_EQ(finished_.size(), 7u);
}

}  // namespace
}  // namespace llmc
