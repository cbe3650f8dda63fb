#include "llmc/runtime/kv/kv_cache_manager.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {

absl::StatusOr<KVCacheManager::Sequence*> KVCacheManager::Find(RequestId id, const char* op) {
  auto it = seqs_.find(id);
  if (it == seqs_.end())
    return absl::NotFoundError(
        absl::StrFormat("kv cache: %s: unknown request %d (never added, or freed)", op, id));
  return &it->second;
}

absl::StatusOr<const KVCacheManager::Sequence*> KVCacheManager::Find(RequestId id,
                                                                     const char* op) const {
  return const_cast<KVCacheManager*>(this)->Find(id, op);
}

absl::Status KVCacheManager::AddRequest(RequestId id) {
  if (!seqs_.try_emplace(id).second)
    return absl::AlreadyExistsError(absl::StrFormat("kv cache: request %d exists already", id));
  return absl::OkStatus();
}

ComputedBlocks KVCacheManager::GetComputedBlocks(absl::Span<const int32_t> tokens) const {
  ComputedBlocks out;
  out.num_query_tokens =
      static_cast<int32_t>(std::min<size_t>(tokens.size(), std::numeric_limits<int32_t>::max()));
  if (!options_.enable_prefix_caching || tokens.empty()) return out;
  const size_t bs = pool_.block_size();
  // Whole blocks only, and never the last token: it must be computed again
  // for its logits.
  const size_t max_blocks = (tokens.size() - 1) / bs;
  uint64_t hash = 0;
  int32_t parent = -1;
  for (size_t i = 0; i < max_blocks; ++i) {
    absl::Span<const int32_t> chunk = tokens.subspan(i * bs, bs);
    hash = HashBlockTokens(hash, chunk);
    std::optional<int32_t> block = pool_.GetCachedBlock(hash, parent, chunk);
    if (!block) break;
    out.blocks.push_back(*block);
    out.stamps.push_back(pool_.cache_stamp(*block));
    parent = *block;
  }
  out.num_computed_tokens = static_cast<int32_t>(out.blocks.size() * bs);
  return out;
}

absl::Status KVCacheManager::Reserve(RequestId id, Sequence& seq, int64_t num_new_tokens,
                                     const ComputedBlocks* computed) {
  const int64_t bs = pool_.block_size();
  const bool adopt = computed != nullptr && seq.blocks.empty() && seq.tokens.empty();
  if (computed != nullptr && !adopt && !computed->blocks.empty())
    return absl::FailedPreconditionError(absl::StrFormat(
        "kv cache: request %d already holds tokens; cached blocks apply to a new request only",
        id));
  // The blocks the sequence will start from, and the tokens they hold.
  absl::Span<const int32_t> existing = seq.blocks;
  int64_t base = static_cast<int64_t>(seq.tokens.size());
  int32_t evictable = 0;  // adopted blocks now in the free queue
  if (adopt) {
    if (computed->num_computed_tokens != static_cast<int64_t>(computed->blocks.size()) * bs)
      return absl::InvalidArgumentError(absl::StrFormat(
          "kv cache: request %d: %d computed tokens do not fill its %d cached blocks", id,
          computed->num_computed_tokens, computed->blocks.size()));
    if (computed->num_query_tokens < computed->num_computed_tokens)
      return absl::InvalidArgumentError(
          absl::StrFormat("kv cache: request %d: %d computed tokens out of a %d-token query", id,
                          computed->num_computed_tokens, computed->num_query_tokens));
    LLMC_RETURN_IF_ERROR(pool_.CheckCachedChain(computed->blocks, computed->stamps));
    for (int32_t b : computed->blocks) evictable += pool_.block(b)->ref_count == 0;
    existing = computed->blocks;
    base = computed->num_computed_tokens;
  }
  const int64_t total = base + num_new_tokens;
  const int64_t capacity = static_cast<int64_t>(pool_.num_blocks()) * bs;
  if (total > capacity)
    return absl::ResourceExhaustedError(
        absl::StrFormat("kv cache: request %d doesn't fit: %d tokens, the whole pool holds %d", id,
                        total, capacity));
  const int64_t needed_blocks = (total + bs - 1) / bs;
  const int64_t new_blocks = std::max<int64_t>(0, needed_blocks - existing.size());
  // Copy on write: blocks about to be written that another sequence holds.
  std::vector<size_t> shared;
  if (num_new_tokens > 0) {
    for (size_t i = base / bs; i < existing.size() && static_cast<int64_t>(i) < needed_blocks; ++i)
      if (pool_.block(existing[i])->ref_count > 1) shared.push_back(i);
  }
  const int64_t required = new_blocks + static_cast<int64_t>(shared.size());
  const int64_t available = pool_.num_free_blocks() - evictable;
  if (required > available)
    return absl::ResourceExhaustedError(
        absl::StrFormat("kv cache: request %d doesn't fit: needs %d more blocks, %d free", id,
                        required, available));

  // Commit; nothing below fails once the checks above passed.
  if (adopt) {
    LLMC_RETURN_IF_ERROR(pool_.Touch(computed->blocks));
    seq.blocks = computed->blocks;
    seq.tokens.reserve(computed->num_computed_tokens);
    for (int32_t b : computed->blocks) {
      absl::Span<const int32_t> held = pool_.cached_tokens(b);
      seq.tokens.insert(seq.tokens.end(), held.begin(), held.end());
    }
    seq.num_cached_blocks = static_cast<int32_t>(computed->blocks.size());
    prefix_queries_ += computed->num_query_tokens;
    prefix_hits_ += computed->num_computed_tokens;
  }
  LLMC_ASSIGN_OR_RETURN(std::vector<int32_t> fresh, pool_.Allocate(static_cast<int32_t>(required)));
  size_t next = 0;
  for (size_t i : shared) {
    const int32_t src = seq.blocks[i], dst = fresh[next++];
    if (static_cast<int64_t>(i) * bs < base) {  // holds tokens: the backend copies them
      pending_copies_.emplace_back(src, dst);
      ++num_cow_copies_;
    }
    seq.blocks[i] = dst;
    const int32_t released[] = {src};
    LLMC_RETURN_IF_ERROR(pool_.Free(released));  // still held by its other users
  }
  seq.blocks.insert(seq.blocks.end(), fresh.begin() + next, fresh.end());
  return absl::OkStatus();
}

absl::Status KVCacheManager::AllocateSlots(RequestId id, int32_t num_new_tokens,
                                           const ComputedBlocks& computed) {
  if (num_new_tokens < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("kv cache: request %d: cannot allocate %d new tokens", id, num_new_tokens));
  LLMC_ASSIGN_OR_RETURN(Sequence * seq, Find(id, "allocate slots"));
  return Reserve(id, *seq, num_new_tokens, &computed);
}

absl::Status KVCacheManager::AppendTokens(RequestId id, absl::Span<const int32_t> tokens) {
  LLMC_ASSIGN_OR_RETURN(Sequence * seq, Find(id, "append tokens"));
  if (tokens.empty()) return absl::OkStatus();
  LLMC_RETURN_IF_ERROR(Reserve(id, *seq, static_cast<int64_t>(tokens.size()), nullptr));
  seq->tokens.insert(seq->tokens.end(), tokens.begin(), tokens.end());
  CacheFull(*seq);
  return absl::OkStatus();
}

void KVCacheManager::CacheFull(Sequence& seq) {
  if (!options_.enable_prefix_caching) return;
  const size_t bs = pool_.block_size();
  const size_t full = seq.tokens.size() / bs;
  absl::Span<const int32_t> tokens = seq.tokens;
  for (size_t i = seq.num_cached_blocks; i < full; ++i) {
    const absl::Span<const int32_t> ids = tokens.subspan(i * bs, bs);
    // A token still being sampled: its hash waits for SetToken.
    if (std::find(ids.begin(), ids.end(), kUnknownToken) != ids.end()) return;
    const int32_t block = seq.blocks[i];
    // Shared with a sequence that registered it already (Fork).
    if (pool_.cache_stamp(block) == 0) {
      const int32_t parent = i == 0 ? -1 : seq.blocks[i - 1];
      if (!pool_.CacheFullBlock(block, parent, ids).ok()) return;
    }
    seq.num_cached_blocks = static_cast<int32_t>(i + 1);
  }
}

absl::Status KVCacheManager::SetToken(RequestId id, int32_t position, int32_t token) {
  LLMC_ASSIGN_OR_RETURN(Sequence * seq, Find(id, "set a token"));
  if (position < 0 || size_t(position) >= seq->tokens.size() ||
      seq->tokens[size_t(position)] != kUnknownToken)
    return absl::FailedPreconditionError(absl::StrFormat(
        "kv cache: request %d has no unknown token at position %d", id, position));
  seq->tokens[size_t(position)] = token;
  CacheFull(*seq);
  return absl::OkStatus();
}

absl::Status KVCacheManager::CacheFullBlocks(RequestId id) {
  LLMC_ASSIGN_OR_RETURN(Sequence * seq, Find(id, "cache full blocks"));
  CacheFull(*seq);
  return absl::OkStatus();
}

absl::Status KVCacheManager::Fork(RequestId parent, RequestId child) {
  LLMC_ASSIGN_OR_RETURN(Sequence * from, Find(parent, "fork"));
  if (seqs_.count(child) != 0)
    return absl::AlreadyExistsError(
        absl::StrFormat("kv cache: fork of request %d: request %d exists already", parent, child));
  const size_t bs = pool_.block_size();
  const size_t used = (from->tokens.size() + bs - 1) / bs;  // reservations stay the parent's
  absl::Span<const int32_t> blocks = absl::MakeConstSpan(from->blocks).first(used);
  LLMC_RETURN_IF_ERROR(pool_.Touch(blocks));
  Sequence seq;
  seq.blocks.assign(blocks.begin(), blocks.end());
  seq.tokens = from->tokens;
  seq.num_cached_blocks = std::min(from->num_cached_blocks, static_cast<int32_t>(used));
  seqs_.emplace(child, std::move(seq));  // `from` may dangle from here on
  return absl::OkStatus();
}

absl::Status KVCacheManager::Free(RequestId id) {
  LLMC_ASSIGN_OR_RETURN(Sequence * seq, Find(id, "free"));
  std::vector<int32_t> reversed(seq->blocks.rbegin(), seq->blocks.rend());
  LLMC_RETURN_IF_ERROR(pool_.Free(reversed));
  seqs_.erase(id);
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const int32_t>> KVCacheManager::block_table(RequestId id) const {
  LLMC_ASSIGN_OR_RETURN(const Sequence* seq, Find(id, "block table"));
  return absl::MakeConstSpan(seq->blocks);
}

absl::StatusOr<int32_t> KVCacheManager::num_tokens(RequestId id) const {
  LLMC_ASSIGN_OR_RETURN(const Sequence* seq, Find(id, "num tokens"));
  return static_cast<int32_t>(seq->tokens.size());
}

absl::StatusOr<std::vector<int32_t>> KVCacheManager::SlotMapping(RequestId id,
                                                                 int32_t first_position,
                                                                 int32_t count) const {
  LLMC_ASSIGN_OR_RETURN(const Sequence* seq, Find(id, "slot mapping"));
  const int64_t bs = pool_.block_size();
  const int64_t reserved = static_cast<int64_t>(seq->blocks.size()) * bs;
  if (first_position < 0 || count < 0 || int64_t{first_position} + count > reserved)
    return absl::OutOfRangeError(absl::StrFormat(
        "kv cache: request %d: positions [%d, %d + %d) outside its %d reserved slots", id,
        first_position, first_position, count, reserved));
  std::vector<int32_t> slots(count);
  for (int32_t i = 0; i < count; ++i) {
    const int64_t pos = int64_t{first_position} + i;
    slots[i] = static_cast<int32_t>(seq->blocks[pos / bs] * bs + pos % bs);
  }
  return slots;
}

std::vector<std::pair<int32_t, int32_t>> KVCacheManager::TakePendingCopies() {
  std::vector<std::pair<int32_t, int32_t>> copies;
  copies.swap(pending_copies_);
  return copies;
}

KVCacheStats KVCacheManager::stats() const {
  KVCacheStats s;
  s.num_blocks = pool_.num_blocks();
  s.num_free_blocks = pool_.num_free_blocks();
  s.usage = pool_.usage();
  s.num_requests = num_requests();
  s.prefix_cache_queries = prefix_queries_;
  s.prefix_cache_hits = prefix_hits_;
  s.num_evictions = pool_.num_evictions();
  s.num_cow_copies = num_cow_copies_;
  return s;
}

absl::Status KVCacheManager::CheckInvariants() const {
  LLMC_RETURN_IF_ERROR(pool_.CheckInvariants());
  const int64_t bs = pool_.block_size();
  std::vector<int64_t> refs(pool_.num_blocks(), 0);
  for (const auto& [id, seq] : seqs_) {
    if (static_cast<int64_t>(seq.tokens.size()) > static_cast<int64_t>(seq.blocks.size()) * bs)
      return absl::InternalError(
          absl::StrFormat("kv cache invariant: request %d has %d tokens in %d blocks", id,
                          seq.tokens.size(), seq.blocks.size()));
    if (seq.num_cached_blocks > static_cast<int64_t>(seq.tokens.size()) / bs)
      return absl::InternalError(
          absl::StrFormat("kv cache invariant: request %d: %d cached blocks but %d tokens", id,
                          seq.num_cached_blocks, seq.tokens.size()));
    for (size_t i = 0; i < seq.blocks.size(); ++i) {
      const int32_t b = seq.blocks[i];
      if (pool_.block(b) == nullptr)
        return absl::InternalError(
            absl::StrFormat("kv cache invariant: request %d names block %d", id, b));
      ++refs[b];
      if (static_cast<int64_t>(i) < seq.num_cached_blocks && pool_.cache_stamp(b) == 0)
        return absl::InternalError(absl::StrFormat(
            "kv cache invariant: request %d: block %d (index %d) should be cached", id, b, i));
    }
  }
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (refs[b] != pool_.block(b)->ref_count)
      return absl::InternalError(absl::StrFormat(
          "kv cache invariant: block %d has ref_count %d but %d block-table entries", b,
          pool_.block(b)->ref_count, refs[b]));
  }
  return absl::OkStatus();
}

}  // namespace llmc
