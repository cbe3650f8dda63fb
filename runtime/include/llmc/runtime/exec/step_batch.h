// The inputs of one execution of @step: a flattened ragged batch, exactly the
// argument list of docs/architecture.md. The engine fills it from the
// scheduler's decision and the KV-cache manager's block tables.
#ifndef LLMC_RUNTIME_EXEC_STEP_BATCH_H_
#define LLMC_RUNTIME_EXEC_STEP_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace llmc {

// A logits row whose token the runner picks itself, so that the token id is
// all of the row that leaves it (a GPU runner's logits stay on the device).
// The pick is the host Sampler's choice (sampler.h), penalties included:
// greedy at temperature 0 (the argmax, ties to the lowest id, NaN masked
// and +inf the largest float), else a draw of Philox-4x32-10 at (seed,
// draw) after top-k, top-p and min-p. A top-k below the vocabulary must
// be at most kMaxPickTopK (PickSupports); top-p without one looks among
// the kMaxPickTopK best (the host sampler's kTopPCandidates).
struct RowPick {
  int32_t row = 0;  // an index into logits_rows
  // masked_ids[mask_begin, mask_begin + mask_count) never win (-inf), as
  // --ignore-eos masks the end-of-generation tokens.
  int32_t mask_begin = 0;
  int32_t mask_count = 0;
  int32_t top_k = 0;
  float temperature = 0;
  float top_p = 1;
  float min_p = 0;
  // The raw log-softmax's N best and the token's own (sampler.h's
  // SampleResult): 1 + logprobs entries of StepOutput::logprobs from
  // logprob_begin (PickLastRow numbers them). 0: none.
  int32_t logprobs = 0;
  int32_t logprob_begin = 0;
  // The penalties (sampling_params.h): penalties[penalty_begin, +
  // penalty_count) are the distinct tokens of the request's window and
  // their counts (PenaltyWindow, sampler.h), ascending by token.
  int32_t penalty_begin = 0;
  int32_t penalty_count = 0;
  float repetition_penalty = 1;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  // >= 0: the token is given (a score request's next prompt token): the
  // runner makes no choice and returns it, with its logprob and the
  // `logprobs` best (1 + logprobs entries, even at 0). -1: a pick.
  int32_t forced = -1;
  uint64_t seed = 0;
  uint64_t draw = 0;  // the token's index in the request's output
};

// The most ids one pick may mask (a GPU runner keeps them in shared memory).
inline constexpr int32_t kMaxPickMaskedIds = 64;
// The largest top-k of a pick (a GPU runner sorts the survivors in shared
// memory).
inline constexpr int32_t kMaxPickTopK = 1024;
// The most logprobs a pick may ask (kMaxLogprobs of sampling_params.h).
inline constexpr int32_t kMaxPickLogprobs = 20;
// The most penalized tokens of a pick (a GPU runner keeps their raw logits
// in shared memory).
inline constexpr int32_t kMaxPickPenalties = 1024;

// A token of the step whose id is a pick of the step submitted just before
// it (asynchronous scheduling: the step was scheduled while that one ran,
// so the id was not on the host yet). The runner writes that step's picked
// id number `pick` (an index into its picks) over tokens[token] before the
// step runs; StepRunner::feeds_tokens says whether a runner does.
struct TokenFeed {
  int32_t token = 0;
  int32_t pick = 0;
};

// A token of a pick's penalty window and how often it occurs there.
struct PickPenalty {
  int32_t token = 0;
  int32_t count = 0;
};

// StepOutput::logprobs entries of a pick: its token's and its N best.
inline int32_t PickLogprobEntries(const RowPick& p) {
  return p.logprobs > 0 || p.forced >= 0 ? 1 + p.logprobs : 0;
}

// Whether a pick with these parameters is one a runner makes, over a
// vocabulary of `vocab`: greedy, or a draw with top-k up to kMaxPickTopK
// or none (with any top-p and min-p).
bool PickSupports(float temperature, int32_t top_k, int64_t vocab);

struct StepBatch {
  std::vector<int32_t> tokens;        // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> query_starts;  // [S + 1]
  std::vector<int32_t> context_lens;  // [S]
  std::vector<int32_t> block_tables;  // [S * max_blocks], row-major
  int64_t max_blocks = 0;
  std::vector<int32_t> slot_mapping;  // [T]
  std::vector<int32_t> logits_rows;   // rows of `tokens` whose logits are wanted
  // Rows whose token the runner picks (ascending, distinct rows); the others
  // come back as logits. See RowPick.
  std::vector<RowPick> picks;
  std::vector<int32_t> masked_ids;  // what picks mask, by range
  std::vector<PickPenalty> penalties;  // what picks penalize, by range
  // Tokens whose ids come from the step before (ascending, distinct
  // tokens); `tokens` holds a placeholder id there. See TokenFeed.
  std::vector<TokenFeed> feeds;

  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_seqs() const { return int64_t(context_lens.size()); }
  // StepOutput::logprobs entries of all the picks.
  int64_t num_logprob_entries() const {
    return picks.empty() ? 0 : picks.back().logprob_begin + PickLogprobEntries(picks.back());
  }
};

// Fills a StepBatch sequence by sequence, as the engine, the generator and
// the batched-decode benchmark all do: Clear(), AddSequence() per sequence,
// then Finish(), which lays the block tables out as [S, max_blocks] (a
// shorter table padded with its first block, never read: a sequence reads
// only its context's blocks).
class StepBatchBuilder {
 public:
  void Clear();
  // Tokens at positions [first, first + tokens.size()) of a sequence whose
  // context ends with them, their cache slots and the sequence's block
  // table (which must stay valid until Finish). Returns the batch row of
  // its first token.
  int32_t AddSequence(absl::Span<const int32_t> tokens, int32_t first,
                      absl::Span<const int32_t> slots, absl::Span<const int32_t> table);
  void AddLogitsRow(int32_t row) { batch_.logits_rows.push_back(row); }
  // Has the runner pick the token of the last logits row added, with
  // `pick`'s parameters (its row and its ranges are filled in here), never
  // choosing one of `masked`, penalizing `penalties` (distinct tokens,
  // ascending) with pick's penalties.
  void PickLastRow(absl::Span<const int32_t> masked, RowPick pick = {},
                   absl::Span<const PickPenalty> penalties = {});
  // The id of the batch's token `token` is pick `pick` of the step before
  // (TokenFeed); calls ascend by token.
  void FeedToken(int32_t token, int32_t pick) { batch_.feeds.push_back({token, pick}); }
  const StepBatch& Finish();
  const StepBatch& batch() const { return batch_; }

 private:
  StepBatch batch_;
  std::vector<absl::Span<const int32_t>> tables_;
};

// What a runner was sized for; a batch must fit it.
struct StepLimits {
  int64_t max_batch_tokens = 0;
  int64_t max_logits = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t vocab_size = 0;
};

// Checks every count, index and id of `batch` against `limits` before any of
// them reaches a kernel: InvalidArgument "step batch: ..." naming the problem.
absl::Status ValidateStepBatch(const StepBatch& batch, const StepLimits& limits);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_STEP_BATCH_H_
