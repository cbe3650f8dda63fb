#include "llmc/runtime/kv/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

namespace llmc {
namespace {

using ::absl::StatusCode;

std::unique_ptr<BlockPool> MakePool(int32_t num_blocks, int32_t block_size) {
  auto pool = BlockPool::Create(num_blocks, block_size);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? std::move(pool).value() : nullptr;
}

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

TEST(BlockPool, CreateRejectsBadSizes) {
  EXPECT_EQ(BlockPool::Create(0, 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create(-3, 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create(8, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create(BlockPool::kMaxBlocks + 1, 1).status().code(),
            StatusCode::kInvalidArgument);
  // 2^24 blocks of 256 slots overflow int32 slot ids.
  auto too_many_slots = BlockPool::Create(BlockPool::kMaxBlocks, 256);
  EXPECT_EQ(too_many_slots.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many_slots.status().message().find("int32"), std::string::npos);
  EXPECT_TRUE(BlockPool::Create(1, 1).ok());
}

TEST(BlockPool, StartsAllFreeInIdOrder) {
  auto pool = MakePool(5, 4);
  EXPECT_EQ(pool->num_blocks(), 5);
  EXPECT_EQ(pool->block_size(), 4);
  EXPECT_EQ(pool->num_free_blocks(), 5);
  EXPECT_DOUBLE_EQ(pool->usage(), 0.0);
  EXPECT_EQ(pool->FreeQueue(), Range(0, 5));
  for (int32_t id = 0; id < 5; ++id) {
    ASSERT_NE(pool->block(id), nullptr);
    EXPECT_EQ(pool->block(id)->id, id);
    EXPECT_EQ(pool->block(id)->ref_count, 0);
    EXPECT_EQ(pool->block(id)->hash, 0u);
  }
  EXPECT_EQ(pool->block(-1), nullptr);
  EXPECT_EQ(pool->block(5), nullptr);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, AllocatesFromHeadAndFreesToTail) {
  auto pool = MakePool(4, 2);
  auto first = pool->Allocate(2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool->block(0)->ref_count, 1);
  EXPECT_EQ(pool->num_free_blocks(), 2);
  EXPECT_DOUBLE_EQ(pool->usage(), 0.5);

  ASSERT_TRUE(pool->Free({1}).ok());
  EXPECT_EQ(pool->FreeQueue(), (std::vector<int32_t>{2, 3, 1}));
  ASSERT_TRUE(pool->Free({0}).ok());
  EXPECT_EQ(pool->FreeQueue(), (std::vector<int32_t>{2, 3, 1, 0}));

  // Reuse follows the queue: never-used blocks first, then in freeing order.
  auto again = pool->Allocate(3);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(pool->FreeQueue(), (std::vector<int32_t>{0}));
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, FreeKeepsListOrder) {
  auto pool = MakePool(4, 1);
  ASSERT_TRUE(pool->Allocate(4).ok());
  ASSERT_TRUE(pool->Free({3, 1, 2, 0}).ok());
  EXPECT_EQ(pool->FreeQueue(), (std::vector<int32_t>{3, 1, 2, 0}));
  auto ids = pool->Allocate(2);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{3, 1}));
}

TEST(BlockPool, ExhaustionAllocatesNothing) {
  auto pool = MakePool(4, 2);
  ASSERT_TRUE(pool->Allocate(1).ok());
  std::vector<int32_t> queue = pool->FreeQueue();
  auto too_many = pool->Allocate(4);
  EXPECT_EQ(too_many.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->num_free_blocks(), 3);
  EXPECT_EQ(pool->FreeQueue(), queue);
  for (int32_t id : queue) EXPECT_EQ(pool->block(id)->ref_count, 0);
  // Exactly what is left still works.
  EXPECT_TRUE(pool->Allocate(3).ok());
  EXPECT_EQ(pool->Allocate(1).status().code(), StatusCode::kResourceExhausted);
  EXPECT_DOUBLE_EQ(pool->usage(), 1.0);
}

TEST(BlockPool, AllocateZeroAndNegative) {
  auto pool = MakePool(2, 2);
  auto none = pool->Allocate(0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(pool->Allocate(-1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->num_free_blocks(), 2);
}

TEST(BlockPool, DoubleFreeIsAnErrorAndChangesNothing) {
  auto pool = MakePool(3, 2);
  ASSERT_TRUE(pool->Allocate(2).ok());  // 0, 1
  ASSERT_TRUE(pool->Free({0}).ok());
  EXPECT_EQ(pool->Free({0}).code(), StatusCode::kFailedPrecondition);
  // Block 1 once too often in one call: nothing is freed, not even block 1.
  EXPECT_EQ(pool->Free({1, 1}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool->block(1)->ref_count, 1);
  // An id out of range anywhere in the list rejects the whole list.
  EXPECT_EQ(pool->Free({1, 7}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->Free({-1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->block(1)->ref_count, 1);
  EXPECT_EQ(pool->num_free_blocks(), 2);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, TouchCountsReferences) {
  auto pool = MakePool(3, 2);
  ASSERT_TRUE(pool->Allocate(1).ok());  // 0
  ASSERT_TRUE(pool->Touch({0, 0}).ok());
  EXPECT_EQ(pool->block(0)->ref_count, 3);
  ASSERT_TRUE(pool->Free({0, 0}).ok());
  EXPECT_EQ(pool->block(0)->ref_count, 1);
  EXPECT_EQ(pool->num_free_blocks(), 2);
  // A free block that caches nothing cannot be touched.
  EXPECT_EQ(pool->Touch({1}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool->Touch({0, 9}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->block(0)->ref_count, 1);
  EXPECT_EQ(pool->block(1)->ref_count, 0);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, CachedBlockStaysFindableUntilReallocated) {
  auto pool = MakePool(3, 2);
  const std::vector<int32_t> tokens = {7, 8};
  auto ids = pool->Allocate(1);
  ASSERT_TRUE(ids.ok());
  const int32_t b = (*ids)[0];
  auto hash = pool->CacheFullBlock(b, -1, tokens);
  ASSERT_TRUE(hash.ok()) << hash.status();
  EXPECT_EQ(*hash, HashBlockTokens(0, tokens));
  EXPECT_EQ(pool->block(b)->hash, *hash);
  EXPECT_EQ(pool->GetCachedBlock(*hash, -1, tokens), b);
  EXPECT_EQ(pool->num_cached_blocks(), 1);

  ASSERT_TRUE(pool->Free({b}).ok());  // queue: 1, 2, 0
  EXPECT_EQ(pool->GetCachedBlock(*hash, -1, tokens), b);
  EXPECT_EQ(std::vector<int32_t>(pool->cached_tokens(b).begin(), pool->cached_tokens(b).end()),
            tokens);

  ASSERT_TRUE(pool->Allocate(2).ok());  // 1, 2: the cached block survives
  EXPECT_EQ(pool->GetCachedBlock(*hash, -1, tokens), b);
  EXPECT_EQ(pool->num_evictions(), 0);

  // Taking it back keeps its hash; freeing it puts it back at the tail.
  ASSERT_TRUE(pool->Touch({b}).ok());
  EXPECT_EQ(pool->num_free_blocks(), 0);
  EXPECT_EQ(pool->block(b)->hash, *hash);
  ASSERT_TRUE(pool->Free({b}).ok());

  auto realloc = pool->Allocate(1);
  ASSERT_TRUE(realloc.ok());
  EXPECT_EQ((*realloc)[0], b);
  EXPECT_EQ(pool->block(b)->hash, 0u);
  EXPECT_EQ(pool->GetCachedBlock(*hash, -1, tokens), std::nullopt);
  EXPECT_TRUE(pool->cached_tokens(b).empty());
  EXPECT_EQ(pool->num_cached_blocks(), 0);
  EXPECT_EQ(pool->num_evictions(), 1);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, LookupComparesTokensNotJustTheHash) {
  auto pool = MakePool(2, 3);
  auto ids = pool->Allocate(1);
  ASSERT_TRUE(ids.ok());
  auto hash = pool->CacheFullBlock((*ids)[0], -1, std::vector<int32_t>{1, 2, 3});
  ASSERT_TRUE(hash.ok());
  // As if other tokens collided on the same hash: no hit.
  EXPECT_EQ(pool->GetCachedBlock(*hash, -1, std::vector<int32_t>{1, 2, 4}), std::nullopt);
  EXPECT_EQ(pool->GetCachedBlock(*hash, -1, std::vector<int32_t>{1, 2}), std::nullopt);
  EXPECT_EQ(pool->GetCachedBlock(*hash + 1, -1, std::vector<int32_t>{1, 2, 3}), std::nullopt);
  EXPECT_EQ(pool->GetCachedBlock(0, -1, std::vector<int32_t>{1, 2, 3}), std::nullopt);
}

TEST(BlockPool, LookupFollowsTheParentRegistration) {
  auto pool = MakePool(4, 1);
  auto ids = pool->Allocate(3);
  ASSERT_TRUE(ids.ok());
  const int32_t a = (*ids)[0], child = (*ids)[1], other = (*ids)[2];
  ASSERT_TRUE(pool->CacheFullBlock(a, -1, std::vector<int32_t>{5}).ok());
  auto child_hash = pool->CacheFullBlock(child, a, std::vector<int32_t>{6});
  ASSERT_TRUE(child_hash.ok());
  EXPECT_EQ(*child_hash,
            HashBlockTokens(HashBlockTokens(0, std::vector<int32_t>{5}), std::vector<int32_t>{6}));
  EXPECT_EQ(pool->GetCachedBlock(*child_hash, a, std::vector<int32_t>{6}), child);
  // Same hash and tokens, but looked up under another parent (as if the
  // hash collided), or at the start.
  ASSERT_TRUE(pool->CacheFullBlock(other, -1, std::vector<int32_t>{9}).ok());
  EXPECT_EQ(pool->GetCachedBlock(*child_hash, other, std::vector<int32_t>{6}), std::nullopt);
  EXPECT_EQ(pool->GetCachedBlock(*child_hash, -1, std::vector<int32_t>{6}), std::nullopt);
  // A parent with the same contents is as good as the original.
  auto twin = pool->Allocate(1);
  ASSERT_TRUE(twin.ok());
  ASSERT_TRUE(pool->CacheFullBlock((*twin)[0], -1, std::vector<int32_t>{5}).ok());
  EXPECT_EQ(pool->cache_stamp((*twin)[0]), pool->cache_stamp(a));
  EXPECT_EQ(pool->GetCachedBlock(*child_hash, (*twin)[0], std::vector<int32_t>{6}), child);
  // Parent out of range or not cached.
  EXPECT_EQ(pool->GetCachedBlock(*child_hash, 99, std::vector<int32_t>{6}), std::nullopt);
}

TEST(BlockPool, ChildrenFollowTheParentRegistrationNotItsId) {
  auto pool = MakePool(3, 1);
  auto ids = pool->Allocate(2);
  ASSERT_TRUE(ids.ok());
  const int32_t parent = (*ids)[0], child = (*ids)[1];
  ASSERT_TRUE(pool->CacheFullBlock(parent, -1, std::vector<int32_t>{1}).ok());
  auto child_hash = pool->CacheFullBlock(child, parent, std::vector<int32_t>{2});
  ASSERT_TRUE(child_hash.ok());
  // The parent is freed, evicted and refilled with other tokens while the
  // child stays held and registered.
  ASSERT_TRUE(pool->Free({parent}).ok());  // queue: 2, parent
  auto again = pool->Allocate(2);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ((*again)[1], parent);
  ASSERT_TRUE(pool->CacheFullBlock(parent, -1, std::vector<int32_t>{9}).ok());
  // A lookup of "{9}, {2}" whose hash collided with the child's: the block
  // id matches, the registration does not, so no (wrong) hit.
  EXPECT_EQ(pool->GetCachedBlock(*child_hash, parent, std::vector<int32_t>{2}), std::nullopt);
  EXPECT_EQ(pool->block(child)->hash, *child_hash);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, DuplicateContentsBothRegistered) {
  auto pool = MakePool(3, 2);
  auto ids = pool->Allocate(2);
  ASSERT_TRUE(ids.ok());
  const std::vector<int32_t> tokens = {4, 4};
  auto h0 = pool->CacheFullBlock((*ids)[0], -1, tokens);
  auto h1 = pool->CacheFullBlock((*ids)[1], -1, tokens);
  ASSERT_TRUE(h0.ok() && h1.ok());
  EXPECT_EQ(*h0, *h1);
  EXPECT_EQ(pool->num_cached_blocks(), 2);
  // The same content chain: one stamp, so children hang off either.
  EXPECT_EQ(pool->cache_stamp((*ids)[0]), pool->cache_stamp((*ids)[1]));
  ASSERT_TRUE(pool->Free({(*ids)[0], (*ids)[1]}).ok());  // queue: 2, ids[0], ids[1]
  ASSERT_TRUE(pool->Allocate(2).ok());                   // evicts ids[0]
  EXPECT_EQ(pool->GetCachedBlock(*h0, -1, tokens), (*ids)[1]);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, CacheFullBlockErrors) {
  auto pool = MakePool(4, 2);
  auto ids = pool->Allocate(2);
  ASSERT_TRUE(ids.ok());
  const std::vector<int32_t> two = {1, 2};
  EXPECT_EQ(pool->CacheFullBlock(3, -1, two).status().code(), StatusCode::kFailedPrecondition)
      << "free block";
  EXPECT_EQ(pool->CacheFullBlock(9, -1, two).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->CacheFullBlock(0, -1, std::vector<int32_t>{1}).status().code(),
            StatusCode::kInvalidArgument)
      << "partial block";
  EXPECT_EQ(pool->CacheFullBlock(1, 0, two).status().code(), StatusCode::kFailedPrecondition)
      << "parent not cached";
  EXPECT_EQ(pool->CacheFullBlock(1, 42, two).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(pool->CacheFullBlock(0, -1, two).ok());
  EXPECT_EQ(pool->CacheFullBlock(0, -1, two).status().code(), StatusCode::kFailedPrecondition)
      << "cached twice";
  EXPECT_EQ(pool->num_cached_blocks(), 1);
  EXPECT_EQ(pool->block(1)->hash, 0u);
  EXPECT_TRUE(pool->CheckInvariants().ok());
}

TEST(BlockPool, CheckCachedChainDetectsEviction) {
  auto pool = MakePool(3, 1);
  auto ids = pool->Allocate(2);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(pool->CacheFullBlock(0, -1, std::vector<int32_t>{1}).ok());
  ASSERT_TRUE(pool->CacheFullBlock(1, 0, std::vector<int32_t>{2}).ok());
  std::vector<int32_t> chain = {0, 1};
  std::vector<uint64_t> stamps = {pool->cache_stamp(0), pool->cache_stamp(1)};
  EXPECT_TRUE(pool->CheckCachedChain(chain, stamps).ok());
  EXPECT_EQ(pool->CheckCachedChain(chain, {stamps[0]}).code(), StatusCode::kInvalidArgument);
  // Not a chain in this order.
  EXPECT_EQ(pool->CheckCachedChain({1, 0}, {stamps[1], stamps[0]}).code(),
            StatusCode::kFailedPrecondition);
  // Evict block 1 (free both, block 2 goes first, then 1).
  ASSERT_TRUE(pool->Free({1, 0}).ok());  // queue: 2, 1, 0
  ASSERT_TRUE(pool->Allocate(2).ok());
  EXPECT_EQ(pool->CheckCachedChain(chain, stamps).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(pool->CheckCachedChain({0}, {stamps[0]}).ok());
}

TEST(BlockHash, DeterministicNonZeroAndSensitive) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  EXPECT_EQ(HashBlockTokens(0, a), HashBlockTokens(0, a));
  EXPECT_NE(HashBlockTokens(0, a), 0u);
  EXPECT_NE(HashBlockTokens(0, a), HashBlockTokens(1, a));
  EXPECT_NE(HashBlockTokens(0, a), HashBlockTokens(0, std::vector<int32_t>{1, 2, 4, 3}));
  EXPECT_NE(HashBlockTokens(0, a), HashBlockTokens(0, std::vector<int32_t>{1, 2, 3}));
  EXPECT_NE(HashBlockTokens(0, std::vector<int32_t>{0}), HashBlockTokens(0, {}));
  EXPECT_NE(HashBlockTokens(0, std::vector<int32_t>{-1}),
            HashBlockTokens(0, std::vector<int32_t>{0x7fffffff}));
}

TEST(BlockHash, NoCollisionsAmongNearbyInputs) {
  // Single-token changes, small parents: 64-bit hashes must all differ, and
  // their low bits (what a hash table uses) must spread.
  std::set<uint64_t> seen;
  std::set<uint64_t> low_bits;
  for (int32_t parent = 0; parent < 16; ++parent) {
    for (int32_t t = 0; t < 1000; ++t) {
      uint64_t h = HashBlockTokens(parent, std::vector<int32_t>{t, 0, 0, 0});
      seen.insert(h);
      low_bits.insert(h & 0xfff);
    }
  }
  EXPECT_EQ(seen.size(), 16000u);
  EXPECT_GT(low_bits.size(), 4000u * 0.95);  // 4096 buckets, 16000 balls
}

}  // namespace
}  // namespace llmc
