// The scheduler alone, driven by a fake runner (SchedulerTest::Step): each
// step "computes" the scheduled chunks and samples a token from a hash of
// the request's tokens, and ends score requests once their last token is
// computed. Every step checks the token budget, the row budget, the
// sequence cap and the scheduler's, the KV cache's and the block pool's
// invariants.
#ifndef LLMC_TEST_UNIT_RUNTIME_ENGINE_SCHEDULER_FIXTURE_H_
#define LLMC_TEST_UNIT_RUNTIME_ENGINE_SCHEDULER_FIXTURE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "llmc/runtime/engine/scheduler.h"

namespace llmc::testing {

inline std::vector<int32_t> Tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> v(size_t(n), 0);
  std::iota(v.begin(), v.end(), first);
  return v;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int32_t num_blocks, int32_t block_size, int32_t budget, int32_t max_seqs,
            bool prefix_caching = true, int32_t max_model_len = 1 << 20) {
    SchedulerConfig config;
    config.max_batch_tokens = budget;
    config.max_seqs = max_seqs;
    config.max_model_len = max_model_len;
    Init(num_blocks, block_size, config, prefix_caching);
  }
  void Init(int32_t num_blocks, int32_t block_size, const SchedulerConfig& config,
            bool prefix_caching = true) {
    auto pool = BlockPool::Create(num_blocks, block_size);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(pool).value();
    KVCacheManager::Options kv;
    kv.enable_prefix_caching = prefix_caching;
    kv_ = std::make_unique<KVCacheManager>(*pool_, kv);
    sched_ = std::make_unique<Scheduler>(config, *kv_);
  }

  void Add(RequestId id, std::vector<int32_t> prompt, int32_t max_new) {
    ASSERT_TRUE(sched_->AddRequest(id, std::move(prompt), max_new).ok());
    max_new_[id] = max_new;
  }

  // One step: schedule, check the limits and the invariants, "run" it, then
  // sample for each chunk that asks (finishing requests at max_new tokens).
  SchedulerOutput Step() {
    auto out = sched_->Schedule();
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    const SchedulerConfig& c = sched_->config();
    EXPECT_LE(out->num_tokens, c.max_batch_tokens);
    EXPECT_LE(int32_t(out->chunks.size()), c.max_seqs);
    int32_t sum = 0, rows = 0;
    std::set<RequestId> ids;
    for (const ScheduledChunk& ch : out->chunks) {
      sum += ch.num_tokens;
      rows += ch.score ? ch.num_tokens : int32_t(ch.sample);
      EXPECT_FALSE(ch.score && ch.sample) << "a score chunk samples, request " << ch.id;
      EXPECT_GT(ch.num_tokens, 0);
      EXPECT_TRUE(ids.insert(ch.id).second) << "request " << ch.id << " twice in one step";
      // The chunk's slots exist: the KV cache holds exactly its tokens now.
      auto held = kv_->num_tokens(ch.id);
      EXPECT_TRUE(held.ok());
      if (held.ok()) {
        EXPECT_EQ(*held, ch.first_position + ch.num_tokens);
      }
    }
    EXPECT_EQ(sum, out->num_tokens);
    EXPECT_LE(rows, c.max_logits_rows > 0 ? c.max_logits_rows : c.max_batch_tokens);
    absl::Status inv = sched_->CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
    EXPECT_TRUE(sched_->CompleteStep(*out).ok());
    for (const ScheduledChunk& ch : out->chunks) {
      if (ch.score && ch.first_position + ch.num_tokens == int32_t(sched_->tokens(ch.id).size())) {
        EXPECT_TRUE(sched_->Finish(ch.id).ok());
        finished_.push_back(ch.id);
      }
      if (!ch.sample) continue;
      auto t = sched_->tokens(ch.id);
      const int32_t produced = int32_t(t.size()) - sched_->num_prompt_tokens(ch.id);
      const int32_t token = int32_t((t.size() * 7919 + uint64_t(t.back()) * 31) % 1000);
      if (produced + 1 >= max_new_[ch.id]) {
        EXPECT_TRUE(sched_->Finish(ch.id).ok());
        finished_.push_back(ch.id);
      } else {
        EXPECT_TRUE(sched_->AppendToken(ch.id, token).ok());
      }
    }
    inv = sched_->CheckInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
    return *std::move(out);
  }

  void RunToEnd(int max_steps = 100000) {
    for (int i = 0; i < max_steps && sched_->has_unfinished(); ++i) {
      SchedulerOutput out = Step();
      if (HasFailure()) return;
      ASSERT_FALSE(out.empty()) << "a step with nothing to do while requests remain";
    }
    ASSERT_FALSE(sched_->has_unfinished());
  }

  void ExpectAllBlocksFree() {
    EXPECT_EQ(pool_->num_free_blocks(), pool_->num_blocks());
    EXPECT_EQ(kv_->num_requests(), 0);
    EXPECT_TRUE(pool_->CheckInvariants().ok());
  }

  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::map<RequestId, int32_t> max_new_;
  std::vector<RequestId> finished_;
};

}  // namespace llmc::testing

#endif  // LLMC_TEST_UNIT_RUNTIME_ENGINE_SCHEDULER_FIXTURE_H_
