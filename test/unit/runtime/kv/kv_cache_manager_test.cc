#include "llmc/runtime/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace llmc {
namespace {

using ::absl::StatusCode;
using Copies = std::vector<std::pair<int32_t, int32_t>>;

std::vector<int32_t> Tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<int32_t> Vec(absl::StatusOr<absl::Span<const int32_t>> span) {
  EXPECT_TRUE(span.ok()) << span.status();
  if (!span.ok()) return {};
  return std::vector<int32_t>(span->begin(), span->end());
}

class KVCacheManagerTest : public ::testing::Test {
 protected:
  void Init(int32_t num_blocks, int32_t block_size, bool prefix_caching = true) {
    auto pool = BlockPool::Create(num_blocks, block_size);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = std::move(pool).value();
    KVCacheManager::Options options;
    options.enable_prefix_caching = prefix_caching;
    kv_ = std::make_unique<KVCacheManager>(*pool_, options);
  }
  // Adds `id` with `tokens`, reusing the cached prefix; returns the hit.
  ComputedBlocks Start(RequestId id, const std::vector<int32_t>& tokens) {
    EXPECT_TRUE(kv_->AddRequest(id).ok());
    ComputedBlocks hit = kv_->GetComputedBlocks(tokens);
    const int32_t n = static_cast<int32_t>(tokens.size()) - hit.num_computed_tokens;
    absl::Status s = kv_->AllocateSlots(id, n, hit);
    EXPECT_TRUE(s.ok()) << s;
    s = kv_->AppendTokens(id, absl::MakeConstSpan(tokens).subspan(hit.num_computed_tokens));
    EXPECT_TRUE(s.ok()) << s;
    return hit;
  }
  void ExpectConsistent() {
    absl::Status s = kv_->CheckInvariants();
    EXPECT_TRUE(s.ok()) << s;
  }
  int32_t Ref(int32_t block) { return pool_->block(block)->ref_count; }

  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
};

TEST_F(KVCacheManagerTest, UnknownRequestsAreErrors) {
  Init(4, 2);
  const std::vector<int32_t> one = {1};
  EXPECT_EQ(kv_->AllocateSlots(7, 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->AppendTokens(7, one).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->CacheFullBlocks(7).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->Free(7).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->Fork(7, 8).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->block_table(7).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->num_tokens(7).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->SlotMapping(7, 0, 1).status().code(), StatusCode::kNotFound);
  EXPECT_NE(kv_->Free(7).message().find("unknown request 7"), std::string::npos);
  EXPECT_EQ(pool_->num_free_blocks(), 4);
  EXPECT_EQ(kv_->num_requests(), 0);
}

TEST_F(KVCacheManagerTest, AddTwiceFreeTwiceAllocateAfterFree) {
  Init(4, 2);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  EXPECT_EQ(kv_->AddRequest(1).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(3)).ok());
  EXPECT_EQ(pool_->num_free_blocks(), 2);
  ASSERT_TRUE(kv_->Free(1).ok());
  EXPECT_EQ(pool_->num_free_blocks(), 4);
  EXPECT_EQ(kv_->Free(1).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->AllocateSlots(1, 2).code(), StatusCode::kNotFound);
  EXPECT_EQ(kv_->AppendTokens(1, Tokens(1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(pool_->num_free_blocks(), 4);
  // A preempted request comes back by being added again.
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  EXPECT_EQ(*kv_->num_tokens(1), 0);
  EXPECT_TRUE(Vec(kv_->block_table(1)).empty());
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, NegativeCountsAreErrors) {
  Init(4, 2);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  EXPECT_EQ(kv_->AllocateSlots(1, -1).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(3)).ok());
  EXPECT_EQ(kv_->SlotMapping(1, -1, 1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(kv_->SlotMapping(1, 0, -1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(kv_->SlotMapping(1, 2, 3).status().code(), StatusCode::kOutOfRange);  // 4 slots
  EXPECT_TRUE(kv_->SlotMapping(1, 0, 4).ok());  // the reserved 4th slot is addressable
  EXPECT_TRUE(kv_->SlotMapping(1, 4, 0).ok());
}

class BlockSizeTest : public KVCacheManagerTest, public ::testing::WithParamInterface<int32_t> {};

TEST_P(BlockSizeTest, TablesAndSlotsForUnevenCounts) {
  const int32_t bs = GetParam();
  Init(256, bs, /*prefix_caching=*/false);
  RequestId id = 0;
  for (int32_t n : {1, 2, 5, 17, 33, 50}) {
    ++id;
    ASSERT_TRUE(kv_->AddRequest(id).ok());
    const int32_t free_before = pool_->num_free_blocks();
    ASSERT_TRUE(kv_->AllocateSlots(id, n).ok()) << "n=" << n;
    std::vector<int32_t> table = Vec(kv_->block_table(id));
    const int32_t expected_blocks = (n + bs - 1) / bs;
    EXPECT_EQ(static_cast<int32_t>(table.size()), expected_blocks) << "n=" << n;
    EXPECT_EQ(pool_->num_free_blocks(), free_before - expected_blocks);
    EXPECT_EQ(*kv_->num_tokens(id), 0);  // reserved, not appended
    ASSERT_TRUE(kv_->AppendTokens(id, Tokens(n)).ok());
    EXPECT_EQ(*kv_->num_tokens(id), n);
    EXPECT_EQ(Vec(kv_->block_table(id)), table) << "appending within reserved slots";
    auto slots = kv_->SlotMapping(id, 0, n);
    ASSERT_TRUE(slots.ok());
    for (int32_t p = 0; p < n; ++p)
      EXPECT_EQ((*slots)[p], table[p / bs] * bs + p % bs) << "n=" << n << " p=" << p;
    // Decode: one more token allocates a block exactly at a boundary.
    ASSERT_TRUE(kv_->AppendTokens(id, {7}).ok());
    EXPECT_EQ(static_cast<int32_t>(Vec(kv_->block_table(id)).size()), (n + 1 + bs - 1) / bs);
    ExpectConsistent();
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, BlockSizeTest, ::testing::Values(1, 3, 16));

TEST_F(KVCacheManagerTest, SlotMappingValues) {
  Init(4, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(8)).ok());  // blocks 0, 1
  ASSERT_TRUE(kv_->AddRequest(2).ok());
  ASSERT_TRUE(kv_->AppendTokens(2, Tokens(1)).ok());  // block 2
  ASSERT_TRUE(kv_->Free(1).ok());                     // queue: 3, 1, 0
  ASSERT_TRUE(kv_->AddRequest(3).ok());
  ASSERT_TRUE(kv_->AppendTokens(3, Tokens(9, 500)).ok());
  EXPECT_EQ(Vec(kv_->block_table(3)), (std::vector<int32_t>{3, 1, 0}));
  EXPECT_EQ(*kv_->SlotMapping(3, 0, 9), (std::vector<int32_t>{12, 13, 14, 15, 4, 5, 6, 7, 0}));
  EXPECT_EQ(*kv_->SlotMapping(3, 6, 3), (std::vector<int32_t>{6, 7, 0}));
  EXPECT_EQ(*kv_->SlotMapping(2, 0, 1), (std::vector<int32_t>{8}));
}

TEST_F(KVCacheManagerTest, AllocateSlotsReservesAheadOnly) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AllocateSlots(1, 5).ok());
  EXPECT_EQ(Vec(kv_->block_table(1)).size(), 2u);
  ASSERT_TRUE(kv_->AllocateSlots(1, 3).ok());  // already room for 3
  EXPECT_EQ(Vec(kv_->block_table(1)).size(), 2u);
  ASSERT_TRUE(kv_->AllocateSlots(1, 0).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(6)).ok());
  ASSERT_TRUE(kv_->AllocateSlots(1, 3).ok());  // 9 tokens: 3 blocks
  EXPECT_EQ(Vec(kv_->block_table(1)).size(), 3u);
  EXPECT_EQ(pool_->num_free_blocks(), 5);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, DoesntFitLeavesEverythingUnchanged) {
  Init(4, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(10)).ok());  // 3 blocks
  const std::vector<int32_t> table1 = Vec(kv_->block_table(1));
  ASSERT_TRUE(kv_->AddRequest(2).ok());
  absl::Status s = kv_->AllocateSlots(2, 8);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("doesn't fit"), std::string::npos) << s;
  EXPECT_TRUE(Vec(kv_->block_table(2)).empty());
  EXPECT_EQ(pool_->num_free_blocks(), 1);
  // Appending past what is left fails whole: request 1 keeps its 10 tokens.
  EXPECT_EQ(kv_->AppendTokens(1, Tokens(7)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(*kv_->num_tokens(1), 10);
  EXPECT_EQ(Vec(kv_->block_table(1)), table1);
  // More than the whole pool could ever hold.
  EXPECT_EQ(kv_->AllocateSlots(2, 17).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(kv_->AllocateSlots(2, 2147483647).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(kv_->AppendTokens(1, Tokens(6)).ok());  // exactly fills the pool
  EXPECT_EQ(pool_->num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(kv_->stats().usage, 1.0);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, FullBlocksAreHashedPartialOnesNot) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(6)).ok());
  std::vector<int32_t> table = Vec(kv_->block_table(1));
  const std::vector<int32_t> tokens = Tokens(6);
  const uint64_t h0 = HashBlockTokens(0, absl::MakeConstSpan(tokens).first(4));
  EXPECT_EQ(pool_->block(table[0])->hash, h0);
  EXPECT_EQ(pool_->block(table[1])->hash, 0u);
  ASSERT_TRUE(kv_->AppendTokens(1, {106, 107}).ok());
  EXPECT_EQ(pool_->block(table[1])->hash, HashBlockTokens(h0, Tokens(4, 104)));
  EXPECT_EQ(pool_->num_cached_blocks(), 2);
}

// A token still being sampled (asynchronous scheduling) fills its block
// without registering it: its hash would be the placeholder's. SetToken
// registers it under the real id, and refuses a token known already.
TEST_F(KVCacheManagerTest, UnknownTokenDefersItsBlocksHash) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(7)).ok());
  const int32_t unknown = KVCacheManager::kUnknownToken;
  ASSERT_TRUE(kv_->AppendTokens(1, absl::MakeConstSpan(&unknown, 1)).ok());
  const std::vector<int32_t> table = Vec(kv_->block_table(1));
  EXPECT_EQ(pool_->block(table[1])->hash, 0u);
  EXPECT_EQ(pool_->num_cached_blocks(), 1);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(9)).num_computed_tokens, 4);
  EXPECT_EQ(kv_->SetToken(1, 6, 5).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(kv_->SetToken(1, 8, 5).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(kv_->SetToken(1, 7, 107).ok());
  EXPECT_EQ(pool_->num_cached_blocks(), 2);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(9)).num_computed_tokens, 8);
  EXPECT_EQ(kv_->SetToken(1, 7, 107).code(), StatusCode::kFailedPrecondition);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, PrefixCachingCanBeDisabled) {
  Init(8, 2, /*prefix_caching=*/false);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(7)).ok());
  EXPECT_EQ(pool_->num_cached_blocks(), 0);
  ComputedBlocks hit = kv_->GetComputedBlocks(Tokens(7));
  EXPECT_TRUE(hit.blocks.empty());
  EXPECT_EQ(hit.num_computed_tokens, 0);
}

TEST_F(KVCacheManagerTest, SharedPrefixIsSharedAndSurvivesTheOtherFree) {
  Init(8, 4);
  const std::vector<int32_t> prompt = Tokens(10);
  EXPECT_EQ(Start(1, prompt).num_computed_tokens, 0);
  const std::vector<int32_t> table1 = Vec(kv_->block_table(1));
  ASSERT_EQ(table1.size(), 3u);

  ComputedBlocks hit = Start(2, prompt);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(hit.blocks, (std::vector<int32_t>{table1[0], table1[1]}));
  const std::vector<int32_t> table2 = Vec(kv_->block_table(2));
  ASSERT_EQ(table2.size(), 3u);
  EXPECT_EQ(table2[0], table1[0]);
  EXPECT_EQ(table2[1], table1[1]);
  EXPECT_NE(table2[2], table1[2]);  // the partial block is each one's own
  EXPECT_EQ(Ref(table1[0]), 2);
  EXPECT_EQ(Ref(table1[1]), 2);
  EXPECT_EQ(Ref(table1[2]), 1);
  EXPECT_EQ(*kv_->num_tokens(2), 10);
  EXPECT_EQ(pool_->num_free_blocks(), 4);
  ExpectConsistent();

  ASSERT_TRUE(kv_->Free(1).ok());
  EXPECT_EQ(Ref(table1[0]), 1);
  EXPECT_EQ(Ref(table1[1]), 1);
  EXPECT_EQ(Ref(table1[2]), 0);
  EXPECT_EQ(Vec(kv_->block_table(2)), table2);
  EXPECT_EQ(pool_->num_free_blocks(), 5);
  // The survivor keeps decoding into its own block.
  ASSERT_TRUE(kv_->AppendTokens(2, {1, 2, 3}).ok());
  EXPECT_EQ(Vec(kv_->block_table(2)).size(), 4u);
  EXPECT_TRUE(kv_->TakePendingCopies().empty());
  ExpectConsistent();

  KVCacheStats stats = kv_->stats();
  EXPECT_EQ(stats.prefix_cache_queries, 20);
  EXPECT_EQ(stats.prefix_cache_hits, 8);
  EXPECT_EQ(stats.num_requests, 1);
}

TEST_F(KVCacheManagerTest, LastTokenIsAlwaysRecomputed) {
  Init(16, 4);
  Start(1, Tokens(12));  // three full blocks cached
  EXPECT_EQ(pool_->num_cached_blocks(), 3);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(12)).num_computed_tokens, 8);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(13)).num_computed_tokens, 12);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(9)).num_computed_tokens, 8);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(8)).num_computed_tokens, 4);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(4)).num_computed_tokens, 0);
  EXPECT_EQ(kv_->GetComputedBlocks(Tokens(1)).num_computed_tokens, 0);
  EXPECT_EQ(kv_->GetComputedBlocks({}).num_computed_tokens, 0);
  // A divergent token ends the match at its block.
  std::vector<int32_t> other = Tokens(13);
  other[5] = -1;
  EXPECT_EQ(kv_->GetComputedBlocks(other).num_computed_tokens, 4);
  other[0] = -1;
  EXPECT_EQ(kv_->GetComputedBlocks(other).num_computed_tokens, 0);

  // The whole-prompt hit recomputes its last block into a fresh block.
  ComputedBlocks hit = Start(2, Tokens(12));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(*kv_->num_tokens(2), 12);
  EXPECT_NE(Vec(kv_->block_table(2))[2], Vec(kv_->block_table(1))[2]);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, BlockSizeOneHitsAllButTheLastToken) {
  Init(16, 1);
  Start(1, Tokens(5));
  ComputedBlocks hit = kv_->GetComputedBlocks(Tokens(5));
  EXPECT_EQ(hit.num_computed_tokens, 4);
  const std::vector<int32_t> table = Vec(kv_->block_table(1));
  EXPECT_EQ(hit.blocks, std::vector<int32_t>(table.begin(), table.begin() + 4));
}

TEST_F(KVCacheManagerTest, PrefixHitAfterFreeUntilEvictedTailFirst) {
  Init(4, 4);
  const std::vector<int32_t> prompt = Tokens(9);
  Start(1, prompt);
  const std::vector<int32_t> table = Vec(kv_->block_table(1));
  EXPECT_EQ(table, (std::vector<int32_t>{0, 1, 2}));
  ASSERT_TRUE(kv_->Free(1).ok());
  // Reverse order: the sequence's tail sits nearest the head.
  EXPECT_EQ(pool_->FreeQueue(), (std::vector<int32_t>{3, 2, 1, 0}));
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).num_computed_tokens, 8);

  RequestId other = 10;
  auto take_one = [&] {
    ASSERT_TRUE(kv_->AddRequest(++other).ok());
    ASSERT_TRUE(kv_->AppendTokens(other, {static_cast<int32_t>(other)}).ok());
  };
  take_one();  // block 3, never used
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).num_computed_tokens, 8);
  take_one();  // block 2, the partial tail: not cached
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).num_computed_tokens, 8);
  EXPECT_EQ(kv_->stats().num_evictions, 0);
  take_one();  // block 1: its registration is evicted
  ComputedBlocks hit = kv_->GetComputedBlocks(prompt);
  EXPECT_EQ(hit.num_computed_tokens, 4);
  EXPECT_EQ(hit.blocks, (std::vector<int32_t>{0}));
  EXPECT_EQ(kv_->stats().num_evictions, 1);
  take_one();  // block 0
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).num_computed_tokens, 0);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, AdoptingFreeCachedBlocksCountsThemAgainstTheFreePool) {
  Init(3, 2);
  const std::vector<int32_t> prompt = Tokens(5);
  // Blocks 0, 1 (cached) and 2.
  Start(1, prompt);
  ASSERT_TRUE(kv_->Free(1).ok());  // queue: 2, 1, 0
  ASSERT_TRUE(kv_->AddRequest(2).ok());
  ASSERT_TRUE(kv_->AppendTokens(2, {9}).ok());  // takes block 2
  ASSERT_TRUE(kv_->AddRequest(3).ok());
  ComputedBlocks hit = kv_->GetComputedBlocks(prompt);
  ASSERT_EQ(hit.num_computed_tokens, 4);
  // Two free blocks, both the hit itself: no room for the fifth token.
  EXPECT_EQ(kv_->AllocateSlots(3, 1, hit).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool_->num_free_blocks(), 2);
  EXPECT_EQ(*kv_->num_tokens(3), 0);
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).blocks, hit.blocks);  // nothing evicted
  // Room for exactly the cached tokens (no new token) does fit.
  ASSERT_TRUE(kv_->AllocateSlots(3, 0, hit).ok());
  EXPECT_EQ(*kv_->num_tokens(3), 4);
  EXPECT_EQ(pool_->num_free_blocks(), 0);
  // A failed attempt is not counted in the hit rate; the adoption is.
  EXPECT_EQ(kv_->stats().prefix_cache_queries, 5 + 5);
  EXPECT_EQ(kv_->stats().prefix_cache_hits, 0 + 4);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, StaleOrForgedComputedBlocksAreRefused) {
  Init(4, 2);
  const std::vector<int32_t> prompt = Tokens(5);
  // Blocks 0, 1 (cached) and 2.
  Start(1, prompt);
  ASSERT_TRUE(kv_->Free(1).ok());  // queue: 3, 2, 1, 0
  ComputedBlocks hit = kv_->GetComputedBlocks(prompt);
  ASSERT_EQ(hit.blocks, (std::vector<int32_t>{0, 1}));

  ComputedBlocks forged = hit;
  forged.num_computed_tokens = 3;
  ASSERT_TRUE(kv_->AddRequest(2).ok());
  EXPECT_EQ(kv_->AllocateSlots(2, 1, forged).code(), StatusCode::kInvalidArgument);
  forged = hit;
  forged.num_query_tokens = 2;
  EXPECT_EQ(kv_->AllocateSlots(2, 1, forged).code(), StatusCode::kInvalidArgument);
  forged = hit;
  forged.stamps[1] += 1000;
  EXPECT_EQ(kv_->AllocateSlots(2, 1, forged).code(), StatusCode::kFailedPrecondition);
  forged = hit;
  forged.blocks = {1, 0};
  EXPECT_EQ(kv_->AllocateSlots(2, 1, forged).code(), StatusCode::kFailedPrecondition);

  // Evict block 1 between lookup and allocation.
  ASSERT_TRUE(kv_->AddRequest(3).ok());
  ASSERT_TRUE(kv_->AppendTokens(3, Tokens(5, 900)).ok());  // blocks 3, 2, 1
  absl::Status s = kv_->AllocateSlots(2, 1, hit);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(*kv_->num_tokens(2), 0);
  EXPECT_EQ(Ref(0), 0);
  ExpectConsistent();

  // Cached blocks only go to a new request.
  ComputedBlocks hit3 = kv_->GetComputedBlocks(Tokens(5, 900));
  ASSERT_FALSE(hit3.blocks.empty());
  EXPECT_EQ(kv_->AllocateSlots(3, 1, hit3).code(), StatusCode::kFailedPrecondition);
}

TEST_F(KVCacheManagerTest, SamePromptTwiceBeforeEitherIsCached) {
  Init(8, 2);
  const std::vector<int32_t> prompt = Tokens(5);
  ComputedBlocks miss1 = kv_->GetComputedBlocks(prompt);
  ComputedBlocks miss2 = kv_->GetComputedBlocks(prompt);
  for (RequestId id : {1, 2}) {
    ASSERT_TRUE(kv_->AddRequest(id).ok());
    ASSERT_TRUE(kv_->AllocateSlots(id, 5, id == 1 ? miss1 : miss2).ok());
    ASSERT_TRUE(kv_->AppendTokens(id, prompt).ok());
  }
  EXPECT_EQ(pool_->num_cached_blocks(), 4);  // two copies of two blocks
  ASSERT_TRUE(kv_->Free(1).ok());
  ComputedBlocks hit = kv_->GetComputedBlocks(prompt);
  EXPECT_EQ(hit.num_computed_tokens, 4);
  ASSERT_TRUE(kv_->Free(2).ok());
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).num_computed_tokens, 4);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, CopyOnWriteOfASharedPartialBlock) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(6)).ok());
  const std::vector<int32_t> table1 = Vec(kv_->block_table(1));
  ASSERT_TRUE(kv_->Fork(1, 2).ok());
  EXPECT_EQ(Vec(kv_->block_table(2)), table1);
  EXPECT_EQ(*kv_->num_tokens(2), 6);
  EXPECT_EQ(Ref(table1[0]), 2);
  EXPECT_EQ(Ref(table1[1]), 2);
  EXPECT_EQ(kv_->Fork(1, 2).code(), StatusCode::kAlreadyExists);
  ExpectConsistent();

  ASSERT_TRUE(kv_->AppendTokens(2, {42}).ok());
  const std::vector<int32_t> table2 = Vec(kv_->block_table(2));
  ASSERT_EQ(table2.size(), 2u);
  EXPECT_EQ(table2[0], table1[0]);  // full block: still shared
  EXPECT_NE(table2[1], table1[1]);
  EXPECT_EQ(kv_->pending_copies(), (Copies{{table1[1], table2[1]}}));
  EXPECT_EQ(Ref(table1[1]), 1);
  EXPECT_EQ(Ref(table2[1]), 1);
  EXPECT_EQ(Vec(kv_->block_table(1)), table1);
  EXPECT_EQ(*kv_->SlotMapping(2, 6, 1), (std::vector<int32_t>{table2[1] * 4 + 2}));

  // The other one now owns its block alone: no second copy.
  ASSERT_TRUE(kv_->AppendTokens(1, {43}).ok());
  EXPECT_EQ(Vec(kv_->block_table(1)), table1);
  EXPECT_EQ(kv_->TakePendingCopies(), (Copies{{table1[1], table2[1]}}));
  EXPECT_TRUE(kv_->pending_copies().empty());
  EXPECT_EQ(kv_->stats().num_cow_copies, 1);
  ExpectConsistent();

  ASSERT_TRUE(kv_->Free(1).ok());
  EXPECT_EQ(Ref(table1[0]), 1);
  ASSERT_TRUE(kv_->Free(2).ok());
  EXPECT_EQ(pool_->num_free_blocks(), 8);
}

TEST_F(KVCacheManagerTest, CopyOnWriteThroughAllocateSlots) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(3)).ok());
  ASSERT_TRUE(kv_->Fork(1, 2).ok());
  ASSERT_TRUE(kv_->AllocateSlots(2, 0).ok());  // nothing written: no copy
  EXPECT_TRUE(kv_->pending_copies().empty());
  ASSERT_TRUE(kv_->AllocateSlots(2, 3).ok());  // 6 tokens: copy + 1 new block
  const std::vector<int32_t> t1 = Vec(kv_->block_table(1)), t2 = Vec(kv_->block_table(2));
  ASSERT_EQ(t2.size(), 2u);
  EXPECT_EQ(kv_->pending_copies(), (Copies{{t1[0], t2[0]}}));
  // Already private when the tokens arrive: no second copy.
  ASSERT_TRUE(kv_->AppendTokens(2, {1, 2, 3}).ok());
  EXPECT_EQ(kv_->pending_copies().size(), 1u);
  EXPECT_EQ(Vec(kv_->block_table(2)), t2);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, CopyOnWriteThatDoesntFitChangesNothing) {
  Init(2, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(5)).ok());  // both blocks
  ASSERT_TRUE(kv_->Fork(1, 2).ok());
  EXPECT_EQ(kv_->AppendTokens(2, {1}).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Vec(kv_->block_table(2)), Vec(kv_->block_table(1)));
  EXPECT_EQ(*kv_->num_tokens(2), 5);
  EXPECT_TRUE(kv_->pending_copies().empty());
  // Once the parent is gone the child writes in place.
  ASSERT_TRUE(kv_->Free(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(2, {1}).ok());
  EXPECT_TRUE(kv_->pending_copies().empty());
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, ForkAtABlockBoundaryCopiesNothing) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(8)).ok());
  ASSERT_TRUE(kv_->Fork(1, 2).ok());
  ASSERT_TRUE(kv_->AppendTokens(2, {1}).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, {2}).ok());
  EXPECT_TRUE(kv_->pending_copies().empty());
  EXPECT_NE(Vec(kv_->block_table(1))[2], Vec(kv_->block_table(2))[2]);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, ForkLeavesReservationsToTheParent) {
  Init(8, 4);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AllocateSlots(1, 12).ok());  // 3 blocks
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(3)).ok());
  ASSERT_TRUE(kv_->Fork(1, 2).ok());
  const std::vector<int32_t> t1 = Vec(kv_->block_table(1));
  EXPECT_EQ(Vec(kv_->block_table(2)), (std::vector<int32_t>{t1[0]}));
  EXPECT_EQ(Ref(t1[0]), 2);
  EXPECT_EQ(Ref(t1[1]), 1);
  // The parent writes into its shared first block: it is the one to copy.
  ASSERT_TRUE(kv_->AppendTokens(1, {7}).ok());
  const std::vector<int32_t> t1_after = Vec(kv_->block_table(1));
  EXPECT_NE(t1_after[0], t1[0]);
  EXPECT_EQ(t1_after[1], t1[1]);
  EXPECT_EQ(kv_->pending_copies(), (Copies{{t1[0], t1_after[0]}}));
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, ForkSharesCachedBlocksWithoutReRegistering) {
  Init(8, 2);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(3)).ok());
  ASSERT_TRUE(kv_->Fork(1, 2).ok());
  ASSERT_TRUE(kv_->AppendTokens(2, {7, 8, 9}).ok());  // fills the copied block and one more
  ASSERT_TRUE(kv_->AppendTokens(1, {7}).ok());
  EXPECT_EQ(pool_->num_cached_blocks(), 1 + 2 + 1);
  ASSERT_TRUE(kv_->CacheFullBlocks(2).ok());  // idempotent
  EXPECT_EQ(pool_->num_cached_blocks(), 4);
  std::vector<int32_t> prompt = Tokens(3);
  prompt.insert(prompt.end(), {7, 8, 9, 0});
  EXPECT_EQ(kv_->GetComputedBlocks(prompt).num_computed_tokens, 6);
  ExpectConsistent();
}

TEST_F(KVCacheManagerTest, FreeReleasesInReverseOrder) {
  Init(6, 2);
  ASSERT_TRUE(kv_->AddRequest(1).ok());
  ASSERT_TRUE(kv_->AppendTokens(1, Tokens(5)).ok());  // 0, 1, 2
  ASSERT_TRUE(kv_->AddRequest(2).ok());
  ASSERT_TRUE(kv_->AppendTokens(2, Tokens(2)).ok());  // 3
  ASSERT_TRUE(kv_->Free(1).ok());
  EXPECT_EQ(pool_->FreeQueue(), (std::vector<int32_t>{4, 5, 2, 1, 0}));
  ASSERT_TRUE(kv_->Free(2).ok());
  EXPECT_EQ(pool_->FreeQueue(), (std::vector<int32_t>{4, 5, 2, 1, 0, 3}));
  EXPECT_EQ(kv_->num_requests(), 0);
}

TEST_F(KVCacheManagerTest, StatsTrackUsage) {
  Init(10, 4);
  EXPECT_DOUBLE_EQ(kv_->stats().usage, 0.0);
  Start(1, Tokens(9));
  KVCacheStats stats = kv_->stats();
  EXPECT_EQ(stats.num_blocks, 10);
  EXPECT_EQ(stats.num_free_blocks, 7);
  EXPECT_DOUBLE_EQ(stats.usage, 0.3);
  EXPECT_EQ(stats.num_requests, 1);
  EXPECT_EQ(stats.prefix_cache_queries, 9);
  EXPECT_EQ(stats.prefix_cache_hits, 0);
}

}  // namespace
}  // namespace llmc
