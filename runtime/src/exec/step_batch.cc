// StepBatch validation, shared by every runner (the host and the CUDA one
// take the same batches and must refuse the same ones).
#include "llmc/runtime/exec/step_batch.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace llmc {

absl::Status ValidateStepBatch(const StepBatch& b, const StepLimits& limits) {
  int64_t t = b.num_tokens(), s = b.num_seqs();
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("step batch: " + why); };
  if (t <= 0 || t > limits.max_batch_tokens)
    return bad(absl::StrFormat("%d tokens; the runner takes 1 to %d", t, limits.max_batch_tokens));
  if (int64_t(b.positions.size()) != t || int64_t(b.slot_mapping.size()) != t)
    return bad("positions and slot_mapping must have one entry per token");
  if (int64_t(b.query_starts.size()) != s + 1 || b.query_starts.front() != 0 ||
      b.query_starts.back() != t)
    return bad("query_starts must run from 0 to the token count, one entry per sequence + 1");
  if (int64_t(b.block_tables.size()) != s * b.max_blocks)
    return bad("block_tables must hold max_blocks entries per sequence");
  int64_t rows = int64_t(b.logits_rows.size());
  if (rows <= 0 || rows > limits.max_logits) return bad("logits_rows count out of range");
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= t) return bad(absl::StrFormat("logits row %d is not a token of the step", r));
  int64_t slots = limits.num_blocks * limits.block_size;
  for (int32_t slot : b.slot_mapping)
    if (slot < 0 || slot >= slots) return bad(absl::StrFormat("slot %d is outside the KV cache", slot));
  for (int32_t block : b.block_tables)
    if (block < -1 || block >= limits.num_blocks)
      return bad(absl::StrFormat("block %d is outside the KV cache", block));
  for (int64_t i = 0; i < s; ++i) {
    int32_t begin = b.query_starts[size_t(i)], end = b.query_starts[size_t(i + 1)];
    if (end < begin) return bad("query_starts must not decrease");
    int64_t ctx = b.context_lens[size_t(i)];
    if (ctx < end - begin || ctx > b.max_blocks * limits.block_size)
      return bad(absl::StrFormat("sequence %d: context length %d does not fit its block table", i, ctx));
    for (int32_t j = begin; j < end; ++j)
      if (b.positions[size_t(j)] < 0 || b.positions[size_t(j)] >= ctx)
        return bad(absl::StrFormat("token %d: position %d outside its context of %d", j,
                                   b.positions[size_t(j)], ctx));
  }
  for (int32_t tok : b.tokens)
    if (tok < 0 || tok >= limits.vocab_size)
      return bad(absl::StrFormat("token id %d outside the vocabulary", tok));
  for (size_t j = 0; j < b.picks.size(); ++j) {
    const RowPick& p = b.picks[j];
    if (p.row < 0 || p.row >= rows)
      return bad(absl::StrFormat("pick %d: row %d is not one of the %d logits rows", j, p.row, rows));
    if (j > 0 && p.row <= b.picks[j - 1].row)
      return bad(absl::StrFormat("pick %d: rows must ascend, row %d follows row %d", j, p.row,
                                 b.picks[j - 1].row));
    if (p.mask_count < 0 || p.mask_count > kMaxPickMaskedIds || p.mask_begin < 0 ||
        int64_t(p.mask_begin) + p.mask_count > int64_t(b.masked_ids.size()))
      return bad(absl::StrFormat(
          "pick %d: masked ids [%d, +%d) are not within the %d given (at most %d a pick)", j,
          p.mask_begin, p.mask_count, b.masked_ids.size(), kMaxPickMaskedIds));
    if (!(p.temperature >= 0 && p.temperature <= 1e30f) || !(p.top_p > 0 && p.top_p <= 1) ||
        !(p.min_p >= 0 && p.min_p <= 1))
      return bad(absl::StrFormat(
          "pick %d: temperature %g, top_p %g, min_p %g out of range (>= 0, (0, 1], [0, 1])", j,
          p.temperature, p.top_p, p.min_p));
    const int32_t begin = j == 0 ? 0
                                 : b.picks[j - 1].logprob_begin + PickLogprobEntries(b.picks[j - 1]);
    if (p.logprobs < 0 || p.logprobs > kMaxPickLogprobs || p.logprob_begin != begin)
      return bad(absl::StrFormat(
          "pick %d: %d logprobs from entry %d; a pick asks 0 to %d, after the picks before it "
          "(entry %d)",
          j, p.logprobs, p.logprob_begin, kMaxPickLogprobs, begin));
    if (p.penalty_count < 0 || p.penalty_count > kMaxPickPenalties || p.penalty_begin < 0 ||
        int64_t(p.penalty_begin) + p.penalty_count > int64_t(b.penalties.size()))
      return bad(absl::StrFormat(
          "pick %d: penalized tokens [%d, +%d) are not within the %d given (at most %d a pick)",
          j, p.penalty_begin, p.penalty_count, b.penalties.size(), kMaxPickPenalties));
    for (int32_t k = p.penalty_begin; k < p.penalty_begin + p.penalty_count; ++k) {
      const PickPenalty& e = b.penalties[size_t(k)];
      if (e.token < 0 || e.token >= limits.vocab_size || e.count < 1 ||
          (k > p.penalty_begin && e.token <= b.penalties[size_t(k - 1)].token))
        return bad(absl::StrFormat(
            "pick %d: penalized token %d (count %d): tokens must be in the vocabulary, "
            "ascending, each counted at least once",
            j, e.token, e.count));
    }
    if (!(p.repetition_penalty > 0 && p.repetition_penalty <= 1e30f) ||
        !(std::abs(p.presence_penalty) <= 1e30f) || !(std::abs(p.frequency_penalty) <= 1e30f))
      return bad(absl::StrFormat("pick %d: penalties %g, %g, %g are not finite (repetition > 0)",
                                 j, p.repetition_penalty, p.presence_penalty,
                                 p.frequency_penalty));
    if (p.forced < -1 || p.forced >= limits.vocab_size)
      return bad(absl::StrFormat("pick %d: forced token %d outside the vocabulary", j, p.forced));
    if (!PickSupports(p.temperature, p.top_k, limits.vocab_size))
      return bad(absl::StrFormat(
          "pick %d: top_k %d is not a pick a runner makes (1 to %d, or the vocabulary's %d and "
          "up: none)",
          j, p.top_k, kMaxPickTopK, limits.vocab_size));
  }
  for (size_t j = 0; j < b.feeds.size(); ++j) {
    const TokenFeed& f = b.feeds[j];
    if (f.token < 0 || f.token >= t || f.pick < 0 || (j > 0 && f.token <= b.feeds[j - 1].token))
      return bad(absl::StrFormat(
          "feed %d: token %d from pick %d; tokens must be the step's (0 to %d), ascending, and "
          "picks not negative",
          j, f.token, f.pick, t - 1));
  }
  for (int32_t id : b.masked_ids)
    if (id < 0 || id >= limits.vocab_size)
      return bad(absl::StrFormat("masked token id %d outside the vocabulary", id));
  return absl::OkStatus();
}

void StepBatchBuilder::Clear() {
  batch_.tokens.clear();
  batch_.positions.clear();
  batch_.query_starts.assign(1, 0);
  batch_.context_lens.clear();
  batch_.block_tables.clear();
  batch_.max_blocks = 0;
  batch_.slot_mapping.clear();
  batch_.logits_rows.clear();
  batch_.picks.clear();
  batch_.masked_ids.clear();
  batch_.penalties.clear();
  batch_.feeds.clear();
  tables_.clear();
}

void StepBatchBuilder::PickLastRow(absl::Span<const int32_t> masked, RowPick pick,
                                   absl::Span<const PickPenalty> penalties) {
  StepBatch& b = batch_;
  pick.row = int32_t(b.logits_rows.size()) - 1;
  pick.mask_count = int32_t(masked.size());
  pick.logprob_begin = int32_t(b.num_logprob_entries());
  pick.penalty_begin = int32_t(b.penalties.size());
  pick.penalty_count = int32_t(penalties.size());
  b.penalties.insert(b.penalties.end(), penalties.begin(), penalties.end());
  // Picks that mask the same ids (every ignore_eos request: the model's
  // end-of-generation ids) share the range at the end of masked_ids.
  const auto tail = int32_t(b.masked_ids.size()) - pick.mask_count;
  if (pick.mask_count == 0 ||
      (tail >= 0 && absl::MakeConstSpan(b.masked_ids).subspan(size_t(tail)) == masked)) {
    pick.mask_begin = pick.mask_count == 0 ? 0 : tail;
  } else {
    pick.mask_begin = int32_t(b.masked_ids.size());
    b.masked_ids.insert(b.masked_ids.end(), masked.begin(), masked.end());
  }
  b.picks.push_back(pick);
}

bool PickSupports(float temperature, int32_t top_k, int64_t vocab) {
  return !(temperature > 0) || !(top_k > 0 && top_k < vocab) || top_k <= kMaxPickTopK;
}

int32_t StepBatchBuilder::AddSequence(absl::Span<const int32_t> tokens, int32_t first,
                                      absl::Span<const int32_t> slots,
                                      absl::Span<const int32_t> table) {
  StepBatch& b = batch_;
  const int32_t row = int32_t(b.tokens.size());
  b.tokens.insert(b.tokens.end(), tokens.begin(), tokens.end());
  for (size_t i = 0; i < tokens.size(); ++i) b.positions.push_back(first + int32_t(i));
  b.query_starts.push_back(int32_t(b.tokens.size()));
  b.context_lens.push_back(first + int32_t(tokens.size()));
  b.slot_mapping.insert(b.slot_mapping.end(), slots.begin(), slots.end());
  tables_.push_back(table);
  b.max_blocks = std::max<int64_t>(b.max_blocks, int64_t(table.size()));
  return row;
}

const StepBatch& StepBatchBuilder::Finish() {
  StepBatch& b = batch_;
  b.block_tables.clear();
  for (absl::Span<const int32_t> t : tables_) {
    b.block_tables.insert(b.block_tables.end(), t.begin(), t.end());
    if (!t.empty())
      b.block_tables.insert(b.block_tables.end(), size_t(b.max_blocks) - t.size(), t[0]);
  }
  return b;
}

}  // namespace llmc
