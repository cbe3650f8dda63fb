// Randomized operations over many requests, checking after every one that
// the bookkeeping adds up and that a simulated backend, which writes each
// appended token id into its slot and performs the pending copies, reads
// every live sequence back intact (so shared prefixes and copy-on-write are
// checked by their effect, not only by their counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "llmc/runtime/kv/kv_cache_manager.h"

namespace llmc {
namespace {

using ::absl::StatusCode;

class Stress {
 public:
  Stress(int32_t block_size, int32_t num_blocks, uint64_t seed) : bs_(block_size), rng_(seed) {
    pool_ = std::move(BlockPool::Create(num_blocks, block_size)).value();
    kv_ = std::make_unique<KVCacheManager>(*pool_);
    slots_.assign(static_cast<size_t>(num_blocks) * block_size, -1);
    for (auto& base : bases_) {
      base.resize(64);
      for (int32_t& t : base) t = Rand(0, 7);
    }
  }

  void Run(int num_ops) {
    for (int op = 0; op < num_ops; ++op) {
      const int kind = Rand(0, 99);
      if (kind < 20 || live_.empty()) {
        NewRequest();
      } else if (kind < 50) {
        Append();
      } else if (kind < 60) {
        Reserve();
      } else if (kind < 68) {
        Fork();
      } else if (kind < 90) {
        FreeOne();
      } else {
        Misuse();
      }
      Check(op);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  int64_t exhausted = 0, hits = 0, forks = 0;
  KVCacheStats stats() const { return kv_->stats(); }

 private:
  int32_t Rand(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  RequestId PickLive() {
    auto it = live_.begin();
    std::advance(it, Rand(0, static_cast<int32_t>(live_.size()) - 1));
    return it->first;
  }
  std::vector<int32_t> Table(RequestId id) {
    auto table = kv_->block_table(id);
    EXPECT_TRUE(table.ok()) << table.status();
    return table.ok() ? std::vector<int32_t>(table->begin(), table->end()) : std::vector<int32_t>();
  }

  // The backend's side: copies first, then the step's writes.
  void ApplyCopies() {
    for (auto [src, dst] : kv_->TakePendingCopies()) {
      ASSERT_NE(src, dst);
      std::copy_n(slots_.begin() + src * bs_, bs_, slots_.begin() + dst * bs_);
    }
  }
  void Write(RequestId id, int32_t first, const std::vector<int32_t>& tokens) {
    auto slots = kv_->SlotMapping(id, first, static_cast<int32_t>(tokens.size()));
    ASSERT_TRUE(slots.ok()) << slots.status();
    for (size_t i = 0; i < tokens.size(); ++i) slots_[(*slots)[i]] = tokens[i];
  }

  void NewRequest() {
    const RequestId id = next_id_++;
    // A prefix of one of a few shared prompts, then a few random tokens.
    const auto& base = bases_[Rand(0, 3)];
    std::vector<int32_t> prompt(base.begin(), base.begin() + Rand(0, 48));
    for (int32_t n = Rand(prompt.empty() ? 1 : 0, 12); n > 0; --n) prompt.push_back(Rand(0, 7));
    ASSERT_TRUE(kv_->AddRequest(id).ok());
    ComputedBlocks hit = kv_->GetComputedBlocks(prompt);
    ASSERT_EQ(hit.num_computed_tokens % bs_, 0);
    ASSERT_LT(hit.num_computed_tokens, static_cast<int32_t>(prompt.size()));
    // The cached blocks hold exactly the prompt's tokens.
    for (size_t b = 0; b < hit.blocks.size(); ++b)
      for (int32_t i = 0; i < bs_; ++i)
        ASSERT_EQ(slots_[hit.blocks[b] * bs_ + i], prompt[b * bs_ + i]) << "stale cache hit";
    const int32_t free_before = pool_->num_free_blocks();
    const int32_t n = static_cast<int32_t>(prompt.size()) - hit.num_computed_tokens;
    absl::Status s = kv_->AllocateSlots(id, n, hit);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
      ASSERT_EQ(pool_->num_free_blocks(), free_before);
      ASSERT_EQ(*kv_->num_tokens(id), 0);
      ASSERT_TRUE(Table(id).empty());
      ASSERT_TRUE(kv_->Free(id).ok());  // dropped; tried again later as a new id
      ++exhausted;
      return;
    }
    hits += hit.num_computed_tokens;
    std::vector<int32_t> rest(prompt.begin() + hit.num_computed_tokens, prompt.end());
    const int32_t reserved = static_cast<int32_t>(Table(id).size());
    ASSERT_TRUE(kv_->AppendTokens(id, rest).ok());
    ASSERT_EQ(static_cast<int32_t>(Table(id).size()), reserved) << "slots were reserved";
    ApplyCopies();
    Write(id, hit.num_computed_tokens, rest);
    live_[id] = prompt;
  }

  void Append() {
    const RequestId id = PickLive();
    std::vector<int32_t> tokens(Rand(1, bs_ + 2));
    for (int32_t& t : tokens) t = Rand(0, 7);
    const std::vector<int32_t> table = Table(id);
    const int32_t free_before = pool_->num_free_blocks();
    absl::Status s = kv_->AppendTokens(id, tokens);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
      ASSERT_EQ(Table(id), table);
      ASSERT_EQ(pool_->num_free_blocks(), free_before);
      ASSERT_TRUE(kv_->pending_copies().empty());
      ++exhausted;
      return;
    }
    ApplyCopies();
    std::vector<int32_t>& model = live_[id];
    Write(id, static_cast<int32_t>(model.size()), tokens);
    model.insert(model.end(), tokens.begin(), tokens.end());
  }

  void Reserve() {
    const RequestId id = PickLive();
    const std::vector<int32_t> table = Table(id);
    absl::Status s = kv_->AllocateSlots(id, Rand(0, 2 * bs_));
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
      ASSERT_EQ(Table(id), table);
      ++exhausted;
      return;
    }
    ApplyCopies();  // may copy on write ahead of the tokens
  }

  void Fork() {
    const RequestId parent = PickLive(), child = next_id_++;
    ASSERT_TRUE(kv_->Fork(parent, child).ok());
    ASSERT_EQ(kv_->Fork(parent, child).code(), StatusCode::kAlreadyExists);
    live_[child] = live_[parent];
    ++forks;
  }

  void FreeOne() {
    const RequestId id = PickLive();
    ASSERT_TRUE(kv_->Free(id).ok());
    live_.erase(id);
    freed_.push_back(id);
  }

  void Misuse() {
    const RequestId id = freed_.empty() || Rand(0, 1)
                             ? next_id_ + 1000
                             : freed_[Rand(0, static_cast<int32_t>(freed_.size()) - 1)];
    const int32_t free_before = pool_->num_free_blocks();
    const std::vector<int32_t> one = {1};
    ASSERT_EQ(kv_->Free(id).code(), StatusCode::kNotFound);
    ASSERT_EQ(kv_->AllocateSlots(id, 1).code(), StatusCode::kNotFound);
    ASSERT_EQ(kv_->AppendTokens(id, one).code(), StatusCode::kNotFound);
    ASSERT_EQ(kv_->block_table(id).status().code(), StatusCode::kNotFound);
    ASSERT_EQ(pool_->num_free_blocks(), free_before);
    if (!live_.empty()) {
      const RequestId any = PickLive();
      ASSERT_EQ(kv_->AddRequest(any).code(), StatusCode::kAlreadyExists);
      ASSERT_EQ(kv_->AllocateSlots(any, -1).code(), StatusCode::kInvalidArgument);
      const int32_t past = static_cast<int32_t>(Table(any).size()) * bs_;
      ASSERT_EQ(kv_->SlotMapping(any, past, 1).status().code(), StatusCode::kOutOfRange);
    }
  }

  void Check(int op) {
    SCOPED_TRACE(::testing::Message() << "block_size " << bs_ << ", after op " << op);
    const int32_t num_blocks = pool_->num_blocks();
    std::vector<int32_t> refs(num_blocks, 0);
    int64_t table_entries = 0;
    for (const auto& [id, model] : live_) {
      const std::vector<int32_t> table = Table(id);
      for (int32_t b : table) {
        ASSERT_GE(b, 0);
        ASSERT_LT(b, num_blocks);
        ++refs[b];
      }
      table_entries += static_cast<int64_t>(table.size());
      ASSERT_EQ(*kv_->num_tokens(id), static_cast<int32_t>(model.size()));
      ASSERT_GE(static_cast<int64_t>(table.size()) * bs_, static_cast<int64_t>(model.size()));
      // The simulated cache reads each sequence back.
      auto slots = kv_->SlotMapping(id, 0, static_cast<int32_t>(model.size()));
      ASSERT_TRUE(slots.ok());
      for (size_t p = 0; p < model.size(); ++p)
        ASSERT_EQ(slots_[(*slots)[p]], model[p]) << "request " << id << " position " << p;
    }
    int64_t ref_sum = 0;
    int32_t used = 0;
    for (int32_t b = 0; b < num_blocks; ++b) {
      ASSERT_EQ(pool_->block(b)->ref_count, refs[b]) << "block " << b;
      ref_sum += pool_->block(b)->ref_count;
      used += pool_->block(b)->ref_count > 0;
    }
    ASSERT_EQ(ref_sum, table_entries);
    ASSERT_EQ(pool_->num_free_blocks() + used, num_blocks);
    const std::vector<int32_t> queue = pool_->FreeQueue();
    ASSERT_EQ(static_cast<int32_t>(queue.size()), pool_->num_free_blocks());
    ASSERT_EQ(std::set<int32_t>(queue.begin(), queue.end()).size(), queue.size())
        << "a block twice in the free queue";
    for (int32_t b : queue) ASSERT_EQ(pool_->block(b)->ref_count, 0);
    ASSERT_EQ(kv_->num_requests(), static_cast<int32_t>(live_.size()));
    absl::Status s = kv_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }

  const int32_t bs_;
  std::mt19937_64 rng_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
  std::vector<int32_t> slots_;  // simulated cache: token id per slot
  std::vector<int32_t> bases_[4];
  std::map<RequestId, std::vector<int32_t>> live_;
  std::vector<RequestId> freed_;
  RequestId next_id_ = 1;
};

class KVStressTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(KVStressTest, RandomOpsKeepInvariants) {
  const int32_t bs = GetParam();
  for (uint64_t seed : {1, 2}) {
    Stress stress(bs, /*num_blocks=*/480 / bs, seed * 7919 + bs);
    stress.Run(2500);
    if (HasFatalFailure()) return;
    // The run exercised what it is meant to check.
    KVCacheStats stats = stress.stats();
    EXPECT_GT(stress.exhausted, 0) << "seed " << seed;
    EXPECT_GT(stress.hits, 0) << "seed " << seed;
    EXPECT_GT(stress.forks, 0) << "seed " << seed;
    EXPECT_GT(stats.num_evictions, 0) << "seed " << seed;
    // With one token per block no block is ever shared part-filled.
    if (bs > 1) {
      EXPECT_GT(stats.num_cow_copies, 0) << "seed " << seed;
    }
    EXPECT_EQ(stats.prefix_cache_hits, stress.hits);
  }
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, KVStressTest, ::testing::Values(1, 3, 16));

}  // namespace
}  // namespace llmc
