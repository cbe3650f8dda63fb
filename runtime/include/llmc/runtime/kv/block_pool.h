// The pool of paged KV-cache blocks: host-side bookkeeping only. A block is
// `block_size` token slots of every layer's K and V cache; the tensors
// themselves belong to a backend, which addresses a token's slot as
// `block_id * block_size + offset` (the `slot_mapping` of @step).
//
// Following vLLM v1 (vllm/v1/core/block_pool.py):
//   - every block has a reference count, the number of sequences using it;
//   - blocks with no reference wait in a free queue in LRU order: a freed
//     block goes to the tail, allocation takes from the head;
//   - a full block can be registered for prefix caching under a hash that
//     chains its parent block's hash and its token ids. A registered block
//     stays findable after it is freed, until allocation takes it from the
//     head of the free queue: then its registration is evicted. `Touch` takes
//     a cached block back (out of the free queue if it was there).
//
// Prefix matches are exact, not probabilistic: the pool keeps the token ids of
// every registered block and a content stamp of it and of its parent. A stamp
// names one exact content chain (a sequence's tokens up to the end of the
// block): a registration whose parent stamp and tokens equal those of a block
// already registered reuses that block's stamp (the same chain, computed
// twice), any other gets a fresh one; stamps are never reused for other
// contents. A lookup must match the tokens and the stamp of the parent that
// the caller matched one level up, so a hash collision can cost a cache hit,
// never give a wrong one, and duplicate blocks are interchangeable.
//
// Fallible calls check every id and count and change nothing on error. Not
// thread-safe: one scheduler thread owns the pool and its KVCacheManager.
#ifndef LLMC_RUNTIME_KV_BLOCK_POOL_H_
#define LLMC_RUNTIME_KV_BLOCK_POOL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llmc {

struct KVCacheBlock {
  int32_t id = 0;
  int32_t ref_count = 0;
  uint64_t hash = 0;  // 0: not a full block registered for prefix caching
};

// The prefix-caching hash of a full block: mixes `parent_hash` (0 for a
// sequence's first block) with the block's token ids (splitmix64-style
// finalizer per token, then the count). Never returns 0.
uint64_t HashBlockTokens(uint64_t parent_hash, absl::Span<const int32_t> tokens);

class BlockPool {
 public:
  // Upper bound on `num_blocks`; `num_blocks * block_size` must also fit the
  // int32 slot ids of @step.
  static constexpr int32_t kMaxBlocks = 1 << 24;

  static absl::StatusOr<std::unique_ptr<BlockPool>> Create(int32_t num_blocks, int32_t block_size);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks with no reference, cached ones included (they can be evicted).
  int32_t num_free_blocks() const { return num_free_; }
  // Fraction of blocks in use (referenced by a sequence), in [0, 1].
  double usage() const;
  // Registered (prefix-cached) blocks, free or not.
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cached_.size()); }
  // Registrations evicted so far by allocation.
  int64_t num_evictions() const { return num_evictions_; }

  // The block `id`, or nullptr when out of range.
  const KVCacheBlock* block(int32_t id) const;

  // Takes `n` blocks from the head of the free queue, evicting their cache
  // registrations; each gets ref_count 1. ResourceExhausted, allocating
  // nothing, when fewer than `n` are free.
  absl::StatusOr<std::vector<int32_t>> Allocate(int32_t n);

  // Drops one reference per listed id (an id may repeat); blocks reaching 0
  // go to the tail of the free queue in list order. Ids out of range or
  // freed more often than they are referenced (a double free) are an error,
  // and then nothing is freed.
  absl::Status Free(absl::Span<const int32_t> ids);

  // Adds one reference per listed id; a free block leaves the free queue.
  // Only a referenced block or a free block that is still cached may be
  // touched (a free block without a registration holds nothing to reuse).
  absl::Status Touch(absl::Span<const int32_t> ids);

  // The cached block holding `tokens` (block_size of them) right after
  // `parent_block` (-1: at the start of a sequence), registered under `hash`
  // (HashBlockTokens of the parent's hash and `tokens`). nullopt when none:
  // also when `parent_block` is not cached itself. Among duplicates, prefers
  // a block in use over a free one.
  std::optional<int32_t> GetCachedBlock(uint64_t hash, int32_t parent_block,
                                        absl::Span<const int32_t> tokens) const;

  // Registers the full, referenced block `block_id`, holding `tokens`
  // (block_size of them) and following `parent_block` in its sequence (-1:
  // first block; else a cached block), for prefix caching. Sets and returns
  // its hash. A block with the same contents may already be registered (two
  // sequences filled the same prefix at once): both stay findable.
  absl::StatusOr<uint64_t> CacheFullBlock(int32_t block_id, int32_t parent_block,
                                          absl::Span<const int32_t> tokens);

  // Content stamp of a cached block (see above; equal stamps mean equal
  // token prefixes); 0 when `id` is out of range or not cached.
  uint64_t cache_stamp(int32_t id) const;
  // Token ids of a cached block; empty when `id` is out of range or not cached.
  absl::Span<const int32_t> cached_tokens(int32_t id) const;

  // OK when `blocks` is still a chain of cached blocks starting a sequence
  // (each registered under the one before it, the first under none) and each
  // still carries the content stamp in `stamps` (nothing was evicted and
  // refilled with other contents since the stamps were read).
  absl::Status CheckCachedChain(absl::Span<const int32_t> blocks,
                                absl::Span<const uint64_t> stamps) const;

  // The free queue, head first. O(num_blocks); for tests and debugging.
  std::vector<int32_t> FreeQueue() const;
  // Checks the pool's internal consistency (free queue links, ref counts,
  // the hash map). O(num_blocks); for tests and debugging.
  absl::Status CheckInvariants() const;

 private:
  BlockPool(int32_t num_blocks, int32_t block_size);

  // Prefix-caching state of one block; stamp 0 when not registered.
  struct CacheEntry {
    uint64_t stamp = 0;
    uint64_t parent_stamp = 0;
  };

  absl::Status CheckId(int32_t id, const char* what) const;
  void PushTail(int32_t id);
  void Unlink(int32_t id);
  void Evict(int32_t id);
  absl::Span<const int32_t> TokensOf(int32_t id) const;
  // A registered block under `hash` with this parent stamp and tokens
  // (preferring one in use), or -1.
  int32_t FindRegistered(uint64_t hash, uint64_t parent_stamp,
                         absl::Span<const int32_t> tokens) const;

  int32_t block_size_;
  std::vector<KVCacheBlock> blocks_;
  std::vector<CacheEntry> cache_;
  std::vector<int32_t> cached_tokens_;  // num_blocks x block_size
  // Doubly linked free queue through block ids; -1 ends it. A block is in the
  // queue exactly when its ref_count is 0.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1;
  int32_t num_free_ = 0;
  std::unordered_multimap<uint64_t, int32_t> cached_;  // hash -> block id
  uint64_t next_stamp_ = 1;
  int64_t num_evictions_ = 0;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_KV_BLOCK_POOL_H_
