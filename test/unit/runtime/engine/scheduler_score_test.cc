// Score requests (every token's logits, nothing sampled) and the
// prefill-first policy in the scheduler (scheduler_fixture.h).
#include <gtest/gtest.h>

#include <vector>

#include "llmc/runtime/engine/scheduler.h"
#include "runtime/engine/scheduler_fixture.h"

namespace llmc {
namespace {

using testing::SchedulerTest;
using testing::Tokens;

SchedulerConfig Config(int32_t budget, int32_t max_seqs, int32_t rows) {
  SchedulerConfig c;
  c.max_batch_tokens = budget;
  c.max_seqs = max_seqs;
  c.max_model_len = 1 << 20;
  c.max_logits_rows = rows;
  return c;
}

TEST_F(SchedulerTest, ScoreChunksTakeARowPerTokenAndLeaveTheDecodesTheirs) {
  // 8 rows a step: three decoding requests keep one each, the score request
  // takes the other five.
  Init(/*num_blocks=*/64, /*block_size=*/4, Config(/*budget=*/32, /*max_seqs=*/8, /*rows=*/8));
  for (RequestId id = 0; id < 3; ++id) Add(id, Tokens(3, 10 * int32_t(id)), 30);
  Step();  // the three prompts; each samples its first token
  ASSERT_TRUE(sched_->AddScoreRequest(7, Tokens(40, 500), 0).ok());
  int32_t scored = 0;
  while (sched_->contains(7)) {
    SchedulerOutput out = Step();
    if (HasFailure()) return;
    int32_t decodes = 0;
    for (const ScheduledChunk& c : out.chunks) {
      if (c.id != 7) {
        EXPECT_TRUE(c.sample);
        ++decodes;
        continue;
      }
      EXPECT_TRUE(c.score);
      EXPECT_EQ(c.first_position, scored) << "positions run once, in order";
      EXPECT_LE(c.num_tokens, 5);
      scored += c.num_tokens;
    }
    EXPECT_EQ(decodes, 3) << "a decode lost its step to the score request";
  }
  EXPECT_EQ(scored, 40);
  RunToEnd();
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, ScoreRequestTakesNoPrefixHit) {
  Init(/*num_blocks=*/64, /*block_size=*/4, Config(32, 8, 32));
  Add(0, Tokens(16, 900), 4);
  RunToEnd();
  // The same tokens again: a generating request finds whole blocks cached...
  Add(1, Tokens(16, 900), 2);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].first_position, 12);
  RunToEnd();
  // ...a score request computes every position (it needs their logits).
  ASSERT_TRUE(sched_->AddScoreRequest(2, Tokens(16, 900), 0).ok());
  out = Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].first_position, 0);
  EXPECT_EQ(out.chunks[0].num_tokens, 16);
  EXPECT_FALSE(sched_->contains(2));
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, ScoreDecodeFromRunsOnePositionPerStep) {
  Init(/*num_blocks=*/64, /*block_size=*/4, Config(32, 8, 32));
  ASSERT_TRUE(sched_->AddScoreRequest(0, Tokens(20, 100), /*decode_from=*/12).ok());
  std::vector<std::pair<int32_t, int32_t>> chunks;
  while (sched_->has_unfinished()) {
    SchedulerOutput out = Step();
    if (HasFailure()) return;
    ASSERT_EQ(out.chunks.size(), 1u);
    chunks.push_back({out.chunks[0].first_position, out.chunks[0].num_tokens});
  }
  ASSERT_EQ(chunks.size(), 9u);
  EXPECT_EQ(chunks[0], std::make_pair(0, 12));
  for (int32_t i = 1; i < 9; ++i) EXPECT_EQ(chunks[size_t(i)], std::make_pair(11 + i, 1));
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, ScoreRequestRecomputesFromTheStartAfterAPreemption) {
  // 10 blocks of 4: the score request (24 tokens, 6 blocks) and three
  // decodes that grow into the rest force preemptions.
  Init(/*num_blocks=*/10, /*block_size=*/4, Config(8, 4, 8));
  for (RequestId id = 0; id < 3; ++id) Add(id, Tokens(2, 10 * int32_t(id)), 9);
  ASSERT_TRUE(sched_->AddScoreRequest(3, Tokens(24, 300), 0).ok());
  int32_t next = 0;  // the score request's next position
  while (sched_->has_unfinished()) {
    SchedulerOutput out = Step();
    if (HasFailure()) return;
    for (RequestId p : out.preempted)
      if (p == 3) next = 0;
    for (const ScheduledChunk& c : out.chunks)
      if (c.id == 3) {
        EXPECT_EQ(c.first_position, next);
        next += c.num_tokens;
      }
  }
  EXPECT_EQ(next, 24);
  EXPECT_GT(sched_->stats().num_preemptions, 0) << "the workload should overflow the cache";
  ExpectAllBlocksFree();
}

TEST_F(SchedulerTest, ScoreRequestsAreCheckedWhenAdded) {
  Init(/*num_blocks=*/4, /*block_size=*/4, 512, 8, true, /*max_model_len=*/20);
  EXPECT_EQ(sched_->AddScoreRequest(0, {}, 0).code(), absl::StatusCode::kInvalidArgument);
  absl::Status st = sched_->AddScoreRequest(1, Tokens(21), 0);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("21 tokens to score do not fit the context of 20"),
            std::string::npos)
      << st;
  st = sched_->AddScoreRequest(2, Tokens(17), 0);  // 5 blocks, the cache has 4
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(sched_->AddScoreRequest(3, Tokens(4), -1).code(), absl::StatusCode::kInvalidArgument);
  // The whole cache fits; the id is then taken.
  EXPECT_TRUE(sched_->AddScoreRequest(4, Tokens(16), 0).ok());
  EXPECT_EQ(sched_->AddScoreRequest(4, Tokens(4), 0).code(), absl::StatusCode::kInvalidArgument);
}

// Four prompts of 10 tokens through a budget of 16: decode-first mixes their
// decodes with the later prompts; prefill-first computes every prompt
// before any decode, then decodes all four in lock step.
TEST_F(SchedulerTest, PrefillFirstHoldsTheDecodesUntilThePromptsAreIn) {
  for (bool prefill_first : {false, true}) {
    SCOPED_TRACE(prefill_first ? "prefill first" : "decode first");
    SchedulerConfig c = Config(/*budget=*/16, /*max_seqs=*/8, /*rows=*/8);
    c.prefill_first = prefill_first;
    Init(/*num_blocks=*/64, /*block_size=*/4, c);
    finished_.clear();
    for (RequestId id = 0; id < 4; ++id) Add(id, Tokens(10, 100 * int32_t(id)), 5);
    bool mixed = false;
    while (sched_->has_unfinished()) {
      SchedulerOutput out = Step();
      if (HasFailure()) return;
      int32_t decodes = 0;
      for (const ScheduledChunk& ch : out.chunks) decodes += ch.first_position >= 10;
      mixed |= decodes > 0 && decodes < int32_t(out.chunks.size());
      if (prefill_first && decodes > 0)
        EXPECT_EQ(out.chunks.size(), 4u) << "a decode step without every sequence";
    }
    EXPECT_EQ(mixed, !prefill_first);
    EXPECT_EQ(finished_.size(), 4u);
    ExpectAllBlocksFree();
  }
}

}  // namespace
}  // namespace llmc
