// Generator::TimeBatchedDecode: the decode phase of a server with `batch`
// sequences stepping together (one token of each per step), for
// `llmc bench --seqs`. Greedy on every row; nothing is detokenized.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "llmc/runtime/engine/generator.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/sample/sampler.h"

namespace llmc {

absl::StatusOr<double> Generator::TimeBatchedDecode(std::span<const std::vector<int32_t>> prompts,
                                                    int64_t steps,
                                                    std::vector<std::vector<int32_t>>* tokens) {
  const int64_t n = int64_t(prompts.size());
  if (n < 1) return absl::InvalidArgumentError("batched decode: no sequences");
  if (n > runner_->max_batch_tokens() || n > runner_->max_logits())
    return absl::InvalidArgumentError(absl::StrFormat(
        "batched decode: %d sequences do not fit a step of %d tokens (%d logits rows); raise "
        "--batch",
        n, runner_->max_batch_tokens(), runner_->max_logits()));
  // Every sequence's blocks must fit the cache at once.
  int64_t blocks = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return absl::InvalidArgumentError("batched decode: an empty prompt");
    blocks += (int64_t(p.size()) + steps + runner_->block_size() - 1) / runner_->block_size();
  }
  if (blocks > runner_->num_blocks())
    return absl::ResourceExhaustedError(absl::StrFormat(
        "batched decode: %d sequences need %d KV blocks of %d tokens, the cache has %d; raise "
        "--ctx",
        n, blocks, runner_->block_size(), runner_->num_blocks()));

  std::vector<RequestId> ids;
  struct FreeOnExit {
    KVCacheManager* kv;
    std::vector<RequestId>* ids;
    ~FreeOnExit() {
      for (RequestId id : *ids) (void)kv->Free(id);
    }
  } free_on_exit{kv_.get(), &ids};
  const int64_t vocab = runner_->vocab_size();
  auto argmax = [&](const float* row) {
    return GreedyToken(std::span<const float>(row, size_t(vocab)), {});
  };
  // Prefill each sequence on its own (untimed): its last logits give its
  // first decode token.
  std::vector<int32_t> next(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    RequestId id = next_id_++;
    LLMC_RETURN_IF_ERROR(kv_->AddRequest(id));
    ids.push_back(id);
    std::span<const int32_t> p(prompts[size_t(s)]);
    const float* logits = nullptr;
    for (size_t at = 0; at < p.size();) {
      size_t len = std::min(p.size() - at, size_t(runner_->max_batch_tokens()));
      LLMC_ASSIGN_OR_RETURN(logits, Forward(id, p.subspan(at, len), {int32_t(len - 1)}));
      at += len;
    }
    next[size_t(s)] = argmax(logits);
  }
  if (tokens) {
    tokens->assign(size_t(n), {});
    for (int64_t s = 0; s < n; ++s) (*tokens)[size_t(s)].push_back(next[size_t(s)]);
  }

  auto start = std::chrono::steady_clock::now();
  StepBatchBuilder b;
  for (int64_t step = 0; step < steps; ++step) {
    b.Clear();
    for (int64_t s = 0; s < n; ++s) {
      RequestId id = ids[size_t(s)];
      LLMC_ASSIGN_OR_RETURN(int32_t first, kv_->num_tokens(id));
      LLMC_RETURN_IF_ERROR(kv_->AppendTokens(id, absl::MakeConstSpan(&next[size_t(s)], 1)));
      LLMC_ASSIGN_OR_RETURN(std::vector<int32_t> slot, kv_->SlotMapping(id, first, 1));
      LLMC_ASSIGN_OR_RETURN(absl::Span<const int32_t> table, kv_->block_table(id));
      b.AddLogitsRow(b.AddSequence(absl::MakeConstSpan(&next[size_t(s)], 1), first, slot, table));
      b.PickLastRow({});  // only the token comes back (a GPU picks it on the device)
    }
    LLMC_ASSIGN_OR_RETURN(StepOutput out, runner_->Step(b.Finish()));
    std::copy(out.tokens, out.tokens + n, next.begin());
    if (tokens)
      for (int64_t s = 0; s < n; ++s) (*tokens)[size_t(s)].push_back(next[size_t(s)]);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace llmc
