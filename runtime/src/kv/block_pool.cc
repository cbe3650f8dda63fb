#include "llmc/runtime/kv/block_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {
namespace {

constexpr int32_t kMaxBlockSize = 1 << 16;

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Calls fn(id, count) for each distinct id of `ids`, ascending.
template <typename Fn>
void ForEachDistinct(absl::Span<const int32_t> ids, Fn fn) {
  std::vector<int32_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    fn(sorted[i], static_cast<int64_t>(j - i));
    i = j;
  }
}

absl::Status Broken(const std::string& what) {
  return absl::InternalError(absl::StrCat("block pool invariant: ", what));
}

}  // namespace

uint64_t HashBlockTokens(uint64_t parent_hash, absl::Span<const int32_t> tokens) {
  constexpr uint64_t kSeed = 0x6c6c6d632d6b7631ULL;    // "llmc-kv1"
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // 2^64 / phi
  uint64_t h = Mix64(parent_hash ^ kSeed);
  for (int32_t token : tokens) h = Mix64(h ^ (static_cast<uint32_t>(token) + kGolden));
  h = Mix64(h ^ (tokens.size() * kGolden));
  return h == 0 ? kSeed : h;  // 0 means "not hashed"
}

absl::StatusOr<std::unique_ptr<BlockPool>> BlockPool::Create(int32_t num_blocks,
                                                             int32_t block_size) {
  if (num_blocks < 1 || num_blocks > kMaxBlocks)
    return absl::InvalidArgumentError(absl::StrFormat(
        "block pool: num_blocks must be in [1, %d], got %d", kMaxBlocks, num_blocks));
  if (block_size < 1 || block_size > kMaxBlockSize)
    return absl::InvalidArgumentError(absl::StrFormat(
        "block pool: block_size must be in [1, %d], got %d", kMaxBlockSize, block_size));
  if (int64_t{num_blocks} * block_size > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(
        absl::StrFormat("block pool: %d blocks of %d slots exceed the int32 slot ids of the step",
                        num_blocks, block_size));
  return std::unique_ptr<BlockPool>(new BlockPool(num_blocks, block_size));
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      blocks_(num_blocks),
      cache_(num_blocks),
      cached_tokens_(static_cast<size_t>(num_blocks) * block_size),
      prev_(num_blocks, -1),
      next_(num_blocks, -1) {
  for (int32_t id = 0; id < num_blocks; ++id) {
    blocks_[id].id = id;
    PushTail(id);
  }
}

double BlockPool::usage() const {
  return 1.0 - static_cast<double>(num_free_) / static_cast<double>(blocks_.size());
}

const KVCacheBlock* BlockPool::block(int32_t id) const {
  if (id < 0 || id >= num_blocks()) return nullptr;
  return &blocks_[id];
}

absl::Status BlockPool::CheckId(int32_t id, const char* what) const {
  if (id >= 0 && id < num_blocks()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("block pool: %s: block id %d out of range [0, %d)", what, id, num_blocks()));
}

void BlockPool::PushTail(int32_t id) {
  prev_[id] = tail_;
  next_[id] = -1;
  if (tail_ >= 0) {
    next_[tail_] = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  ++num_free_;
}

void BlockPool::Unlink(int32_t id) {
  if (prev_[id] >= 0) {
    next_[prev_[id]] = next_[id];
  } else {
    head_ = next_[id];
  }
  if (next_[id] >= 0) {
    prev_[next_[id]] = prev_[id];
  } else {
    tail_ = prev_[id];
  }
  prev_[id] = next_[id] = -1;
  --num_free_;
}

void BlockPool::Evict(int32_t id) {
  auto [first, last] = cached_.equal_range(blocks_[id].hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == id) {
      cached_.erase(it);
      break;
    }
  }
  blocks_[id].hash = 0;
  cache_[id] = CacheEntry();
  ++num_evictions_;
}

absl::Span<const int32_t> BlockPool::TokensOf(int32_t id) const {
  return absl::MakeConstSpan(cached_tokens_)
      .subspan(static_cast<size_t>(id) * block_size_, block_size_);
}

absl::StatusOr<std::vector<int32_t>> BlockPool::Allocate(int32_t n) {
  if (n < 0)
    return absl::InvalidArgumentError(absl::StrFormat("block pool: cannot allocate %d blocks", n));
  if (n > num_free_)
    return absl::ResourceExhaustedError(
        absl::StrFormat("block pool: need %d blocks, %d of %d free", n, num_free_, num_blocks()));
  std::vector<int32_t> ids;
  ids.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    int32_t id = head_;
    Unlink(id);
    if (blocks_[id].hash != 0) Evict(id);
    blocks_[id].ref_count = 1;
    ids.push_back(id);
  }
  return ids;
}

absl::Status BlockPool::Free(absl::Span<const int32_t> ids) {
  for (int32_t id : ids) LLMC_RETURN_IF_ERROR(CheckId(id, "free"));
  absl::Status status;
  ForEachDistinct(ids, [&](int32_t id, int64_t count) {
    if (status.ok() && count > blocks_[id].ref_count)
      status = absl::FailedPreconditionError(absl::StrFormat(
          "block pool: block %d freed %d time(s) but holds %d reference(s) (double free)", id,
          count, blocks_[id].ref_count));
  });
  LLMC_RETURN_IF_ERROR(status);
  for (int32_t id : ids) {
    if (--blocks_[id].ref_count == 0) PushTail(id);
  }
  return absl::OkStatus();
}

absl::Status BlockPool::Touch(absl::Span<const int32_t> ids) {
  for (int32_t id : ids) LLMC_RETURN_IF_ERROR(CheckId(id, "touch"));
  absl::Status status;
  ForEachDistinct(ids, [&](int32_t id, int64_t count) {
    if (!status.ok()) return;
    const KVCacheBlock& b = blocks_[id];
    if (b.ref_count == 0 && b.hash == 0)
      status = absl::FailedPreconditionError(absl::StrFormat(
          "block pool: block %d is free and not cached; allocate blocks instead", id));
    else if (count > std::numeric_limits<int32_t>::max() - b.ref_count)
      status = absl::ResourceExhaustedError(
          absl::StrFormat("block pool: block %d reference count overflows", id));
  });
  LLMC_RETURN_IF_ERROR(status);
  for (int32_t id : ids) {
    if (blocks_[id].ref_count++ == 0) Unlink(id);
  }
  return absl::OkStatus();
}

int32_t BlockPool::FindRegistered(uint64_t hash, uint64_t parent_stamp,
                                  absl::Span<const int32_t> tokens) const {
  int32_t found = -1;
  auto [first, last] = cached_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const int32_t id = it->second;
    if (cache_[id].parent_stamp != parent_stamp) continue;
    absl::Span<const int32_t> held = TokensOf(id);
    if (!std::equal(held.begin(), held.end(), tokens.begin(), tokens.end())) continue;
    if (blocks_[id].ref_count > 0) return id;
    if (found < 0) found = id;
  }
  return found;
}

std::optional<int32_t> BlockPool::GetCachedBlock(uint64_t hash, int32_t parent_block,
                                                 absl::Span<const int32_t> tokens) const {
  if (hash == 0 || tokens.size() != static_cast<size_t>(block_size_)) return std::nullopt;
  uint64_t parent_stamp = 0;
  if (parent_block != -1) {
    parent_stamp = cache_stamp(parent_block);
    if (parent_stamp == 0) return std::nullopt;
  }
  const int32_t id = FindRegistered(hash, parent_stamp, tokens);
  if (id < 0) return std::nullopt;
  return id;
}

absl::StatusOr<uint64_t> BlockPool::CacheFullBlock(int32_t block_id, int32_t parent_block,
                                                   absl::Span<const int32_t> tokens) {
  LLMC_RETURN_IF_ERROR(CheckId(block_id, "cache"));
  KVCacheBlock& b = blocks_[block_id];
  if (b.ref_count == 0)
    return absl::FailedPreconditionError(
        absl::StrFormat("block pool: cannot cache block %d: it is free", block_id));
  if (b.hash != 0)
    return absl::FailedPreconditionError(
        absl::StrFormat("block pool: block %d is cached already", block_id));
  if (tokens.size() != static_cast<size_t>(block_size_))
    return absl::InvalidArgumentError(
        absl::StrFormat("block pool: cannot cache block %d: %d tokens, a full block has %d",
                        block_id, tokens.size(), block_size_));
  uint64_t parent_hash = 0, parent_stamp = 0;
  if (parent_block != -1) {
    LLMC_RETURN_IF_ERROR(CheckId(parent_block, "cache (parent)"));
    if (blocks_[parent_block].hash == 0)
      return absl::FailedPreconditionError(
          absl::StrFormat("block pool: cannot cache block %d: its parent block %d is not cached",
                          block_id, parent_block));
    parent_hash = blocks_[parent_block].hash;
    parent_stamp = cache_[parent_block].stamp;
  }
  b.hash = HashBlockTokens(parent_hash, tokens);
  // The same content chain registered already (by a sequence that computed
  // the same prefix): share its stamp, so that children found through either
  // block match.
  const int32_t twin = FindRegistered(b.hash, parent_stamp, tokens);
  cache_[block_id] = CacheEntry{twin >= 0 ? cache_[twin].stamp : next_stamp_++, parent_stamp};
  std::copy(tokens.begin(), tokens.end(),
            cached_tokens_.begin() + static_cast<size_t>(block_id) * block_size_);
  cached_.emplace(b.hash, block_id);
  return b.hash;
}

uint64_t BlockPool::cache_stamp(int32_t id) const {
  if (id < 0 || id >= num_blocks()) return 0;
  return cache_[id].stamp;
}

absl::Span<const int32_t> BlockPool::cached_tokens(int32_t id) const {
  if (cache_stamp(id) == 0) return {};
  return TokensOf(id);
}

absl::Status BlockPool::CheckCachedChain(absl::Span<const int32_t> blocks,
                                         absl::Span<const uint64_t> stamps) const {
  if (blocks.size() != stamps.size())
    return absl::InvalidArgumentError(absl::StrFormat(
        "block pool: cached prefix has %d blocks but %d stamps", blocks.size(), stamps.size()));
  uint64_t parent_stamp = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    LLMC_RETURN_IF_ERROR(CheckId(blocks[i], "cached prefix"));
    const CacheEntry& e = cache_[blocks[i]];
    if (stamps[i] == 0 || e.stamp != stamps[i] || e.parent_stamp != parent_stamp)
      return absl::FailedPreconditionError(absl::StrFormat(
          "block pool: block %d (block %d of a cached prefix) was evicted since the lookup; "
          "look the prefix up again",
          blocks[i], i));
    parent_stamp = e.stamp;
  }
  return absl::OkStatus();
}

std::vector<int32_t> BlockPool::FreeQueue() const {
  std::vector<int32_t> ids;
  for (int32_t id = head_; id >= 0 && ids.size() <= blocks_.size(); id = next_[id])
    ids.push_back(id);
  return ids;
}

absl::Status BlockPool::CheckInvariants() const {
  std::vector<char> queued(blocks_.size(), 0);
  int32_t count = 0, prev = -1;
  for (int32_t id = head_; id != -1; id = next_[id]) {
    if (id < 0 || id >= num_blocks())
      return Broken(absl::StrFormat("free queue links to block %d", id));
    if (queued[id]) return Broken(absl::StrFormat("block %d is in the free queue twice", id));
    if (prev_[id] != prev)
      return Broken(absl::StrFormat("block %d: back link %d, expected %d", id, prev_[id], prev));
    queued[id] = 1;
    ++count;
    prev = id;
  }
  if (tail_ != prev)
    return Broken(absl::StrFormat("free queue tail %d, last block %d", tail_, prev));
  if (count != num_free_)
    return Broken(absl::StrFormat("free queue holds %d blocks, count says %d", count, num_free_));
  std::vector<int32_t> map_entries(blocks_.size(), 0);
  for (const auto& [hash, id] : cached_) {
    if (id < 0 || id >= num_blocks()) return Broken(absl::StrFormat("hash map names block %d", id));
    if (blocks_[id].hash != hash)
      return Broken(absl::StrFormat("block %d mapped under a hash it does not have", id));
    ++map_entries[id];
  }
  for (int32_t id = 0; id < num_blocks(); ++id) {
    const KVCacheBlock& b = blocks_[id];
    if (b.id != id) return Broken(absl::StrFormat("block %d has id %d", id, b.id));
    if (b.ref_count < 0)
      return Broken(absl::StrFormat("block %d has ref_count %d", id, b.ref_count));
    if ((b.ref_count == 0) != (queued[id] != 0))
      return Broken(absl::StrFormat("block %d has ref_count %d but is %sin the free queue", id,
                                    b.ref_count, queued[id] ? "" : "not "));
    bool cached = b.hash != 0;
    if (map_entries[id] != (cached ? 1 : 0))
      return Broken(absl::StrFormat("block %d (hash %x) has %d hash map entries", id, b.hash,
                                    map_entries[id]));
    if (cached != (cache_[id].stamp != 0))
      return Broken(absl::StrFormat("block %d: hash and stamp disagree", id));
    if (cached && (cache_[id].stamp >= next_stamp_ || cache_[id].parent_stamp >= cache_[id].stamp))
      return Broken(absl::StrFormat("block %d: bad stamps", id));
  }
  return absl::OkStatus();
}

}  // namespace llmc
