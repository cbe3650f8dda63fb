// Per-sequence KV-cache bookkeeping over a BlockPool: block tables, slot
// mapping, prefix caching and copy-on-write, after vLLM v1's KVCacheManager
// (vllm/v1/core/kv_cache_manager.py).
//
// A sequence (keyed by a request id) holds the token ids whose K/V are stored
// or are being written by the current step (`num_tokens`) and a block table
// with room for at least that many. The engine's step, per request:
//
//   // new (or preempted and resumed) request with prompt P:
//   AddRequest(id);
//   auto hit = GetComputedBlocks(P);           // cached full-block prefix
//   AllocateSlots(id, n, hit);                 // room for hit + n tokens
//   AppendTokens(id, P[hit.num_computed_tokens : +n]);
//   // decode: AppendTokens(id, {sampled_token}) (allocates when needed)
//   SlotMapping(id, first_position, count);    // slots of this step's tokens
//   TakePendingCopies();                       // copy-on-write, see below
//   Free(id);                                  // finished, aborted, preempted
//
// Full blocks are hashed and registered for prefix caching as soon as their
// last token is appended (CacheFullBlocks), i.e. before the step that writes
// them runs, as vLLM does: a request that reuses them in the same step reads
// them after that step's cache write of the same layer.
//
// Copy-on-write: Fork shares a sequence's blocks, its last partial block
// included. Before a token is written into a block that another sequence also
// holds, the writer gets a fresh block and the manager records (src, dst); the
// backend must copy every layer's K and V of block src into dst, in list
// order, before the step's kernels write the cache.
//
// Every call checks its request id and counts and, on error, changes nothing.
// Not thread-safe.
#ifndef LLMC_RUNTIME_KV_KV_CACHE_MANAGER_H_
#define LLMC_RUNTIME_KV_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "llmc/runtime/kv/block_pool.h"

namespace llmc {

using RequestId = int64_t;

// The cached prefix of a token list (GetComputedBlocks), to hand to
// AllocateSlots for a new sequence. Always whole blocks, and never the whole
// list: at least its last token is left to compute, for its logits.
struct ComputedBlocks {
  std::vector<int32_t> blocks;
  int32_t num_computed_tokens = 0;  // blocks.size() * block_size
  int32_t num_query_tokens = 0;     // length of the list looked up (metrics)
  // Content stamps of `blocks` (BlockPool::cache_stamp); AllocateSlots
  // refuses blocks evicted since the lookup.
  std::vector<uint64_t> stamps;
};

struct KVCacheStats {
  int32_t num_blocks = 0;
  int32_t num_free_blocks = 0;
  double usage = 0;  // fraction of blocks in use
  int32_t num_requests = 0;
  // Prefix cache, counted in tokens when AllocateSlots adopts a lookup (so a
  // request retried after "doesn't fit" is counted once).
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int64_t num_evictions = 0;   // cache registrations evicted by allocation
  int64_t num_cow_copies = 0;  // block copies requested by copy-on-write
};

class KVCacheManager {
 public:
  struct Options {
    bool enable_prefix_caching = true;
  };

  // `pool` must outlive the manager; the manager is its only user.
  explicit KVCacheManager(BlockPool& pool) : KVCacheManager(pool, Options()) {}
  KVCacheManager(BlockPool& pool, Options options) : pool_(pool), options_(options) {}
  KVCacheManager(const KVCacheManager&) = delete;
  KVCacheManager& operator=(const KVCacheManager&) = delete;

  // Starts an empty sequence. AlreadyExists when `id` is live; an id may be
  // added again after Free (a preempted request resumes).
  absl::Status AddRequest(RequestId id);

  // The longest prefix of `tokens` held by cached full blocks, capped below
  // tokens.size() (the last token is always recomputed). Changes nothing.
  ComputedBlocks GetComputedBlocks(absl::Span<const int32_t> tokens) const;

  // Reserves slots for `num_new_tokens` tokens after the sequence's
  // num_tokens. On an empty sequence, `computed` (from GetComputedBlocks)
  // becomes its prefix first: its blocks are shared and their tokens count as
  // appended. Gives a shared block about to be written a private copy
  // (pending_copies). ResourceExhausted ("doesn't fit") with nothing changed
  // when the pool lacks free blocks.
  absl::Status AllocateSlots(RequestId id, int32_t num_new_tokens,
                             const ComputedBlocks& computed = {});

  // Appends token ids to the sequence, allocating (and copying on write) as
  // AllocateSlots would, then registers the blocks they fill. A token may
  // be kUnknownToken, one sampled by a step still running (asynchronous
  // scheduling): the block holding it is registered once SetToken makes it
  // known.
  absl::Status AppendTokens(RequestId id, absl::Span<const int32_t> tokens);
  static constexpr int32_t kUnknownToken = -1;
  // Makes the unknown token at `position` of the sequence `token`, then
  // registers the blocks that are full and known now. FailedPrecondition
  // when that token is known already.
  absl::Status SetToken(RequestId id, int32_t position, int32_t token);

  // Registers the sequence's full blocks not registered yet for prefix
  // caching (AppendTokens does this already; a no-op when disabled).
  absl::Status CacheFullBlocks(RequestId id);

  // Starts `child` as a copy of `parent` sharing its blocks (parallel
  // sampling, beam search); reserved slots past parent's tokens stay its own.
  absl::Status Fork(RequestId parent, RequestId child);

  // Ends the sequence and drops its block references, last block first, so
  // that its tail is evicted before its head. NotFound for an unknown id
  // (never added, or freed already).
  absl::Status Free(RequestId id);

  // The sequence's blocks, in order. The span is valid until the next
  // non-const call.
  absl::StatusOr<absl::Span<const int32_t>> block_table(RequestId id) const;
  absl::StatusOr<int32_t> num_tokens(RequestId id) const;
  // Cache slots of positions [first_position, first_position + count): each
  // block * block_size + offset. The positions must lie within the slots
  // reserved for the sequence.
  absl::StatusOr<std::vector<int32_t>> SlotMapping(RequestId id, int32_t first_position,
                                                   int32_t count) const;

  // Block copies (src, dst) the backend must do before the next step writes
  // the cache, oldest first. Take clears them.
  const std::vector<std::pair<int32_t, int32_t>>& pending_copies() const { return pending_copies_; }
  std::vector<std::pair<int32_t, int32_t>> TakePendingCopies();

  bool contains(RequestId id) const { return seqs_.count(id) != 0; }
  int32_t num_requests() const { return static_cast<int32_t>(seqs_.size()); }
  KVCacheStats stats() const;
  const BlockPool& pool() const { return pool_; }

  // Checks that block references add up: each block's ref_count equals the
  // number of block-table entries naming it, every table covers its tokens.
  // O(num_blocks + table sizes); for tests and debugging.
  absl::Status CheckInvariants() const;

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    std::vector<int32_t> tokens;
    // Leading full blocks already registered for prefix caching.
    int32_t num_cached_blocks = 0;
  };

  absl::StatusOr<Sequence*> Find(RequestId id, const char* op);
  absl::StatusOr<const Sequence*> Find(RequestId id, const char* op) const;
  // Makes room for `num_new_tokens` past seq.tokens, adopting `computed`
  // first when given; all or nothing.
  absl::Status Reserve(RequestId id, Sequence& seq, int64_t num_new_tokens,
                       const ComputedBlocks* computed);
  // Registers newly full blocks; stops at the first it cannot register.
  void CacheFull(Sequence& seq);

  BlockPool& pool_;
  Options options_;
  std::unordered_map<RequestId, Sequence> seqs_;
  std::vector<std::pair<int32_t, int32_t>> pending_copies_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t num_cow_copies_ = 0;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_KV_KV_CACHE_MANAGER_H_
