// Generator::TimeBatchedDecode: the decode phase of a server with `batch`
// sequences stepping together (one token of each per step), for
// `llmc bench --seqs`, through the engine as a server runs it. The engine
// schedules prefill first, so every prompt is computed (untimed) before the
// first decode step; the timed steps then each hold one token of every
// sequence. Greedy, end-of-generation ids masked; the text is detokenized
// as a server's is.
#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/engine/generator.h"

namespace llmc {

absl::StatusOr<double> Generator::TimeBatchedDecode(std::span<const std::vector<int32_t>> prompts,
                                                    int64_t steps,
                                                    std::vector<std::vector<int32_t>>* tokens) {
  const int64_t n = int64_t(prompts.size());
  const StepRunner& runner = engine_->runner();
  if (n < 1) return absl::InvalidArgumentError("batched decode: no sequences");
  if (steps < 1) return absl::InvalidArgumentError("batched decode: no steps to time");
  if (n > runner.max_batch_tokens() || n > runner.max_logits())
    return absl::InvalidArgumentError(absl::StrFormat(
        "batched decode: %d sequences do not fit a step of %d tokens (%d logits rows); raise "
        "--batch",
        n, runner.max_batch_tokens(), runner.max_logits()));
  // Every sequence's blocks must fit the cache at once.
  int64_t blocks = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return absl::InvalidArgumentError("batched decode: an empty prompt");
    blocks += (int64_t(p.size()) + steps + runner.block_size() - 1) / runner.block_size();
  }
  if (blocks > runner.num_blocks())
    return absl::ResourceExhaustedError(absl::StrFormat(
        "batched decode: %d sequences need %d KV blocks of %d tokens, the cache has %d; raise "
        "--ctx",
        n, blocks, runner.block_size(), runner.num_blocks()));

  SamplingParams params;
  params.temperature = 0;
  params.ignore_eos = true;
  // The first token comes from the prefill: steps + 1 tokens take exactly
  // `steps` decode steps.
  params.max_tokens = int32_t(steps + 1);
  std::vector<RequestId> ids;
  std::unordered_map<RequestId, size_t> index;
  for (const auto& p : prompts) {
    absl::StatusOr<RequestId> id = engine_->AddRequest(p, params);
    if (!id.ok()) {
      Drain(ids);
      return id.status();
    }
    index[*id] = ids.size();
    ids.push_back(*id);
  }
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  int64_t with_first = 0;  // sequences whose prefill gave their first token
  int64_t timed_steps = 0;
  double seconds = 0;
  auto fail = [&](absl::Status st) {
    Drain(ids);
    return st;
  };
  while (engine_->has_unfinished()) {
    // Once every prompt is in, each step decodes: it is timed.
    const bool decoding = with_first == n;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<RequestOutput>> outs = engine_->Step();
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!outs.ok()) return fail(outs.status());
    if (decoding) {
      const SchedulerOutput& s = engine_->last_schedule();
      if (int64_t(s.chunks.size()) != n || s.num_tokens != n)
        return fail(absl::InternalError(absl::StrFormat(
            "batched decode: decode step %d ran %d tokens of %d sequences, not one token of each "
            "of the %d (preempted for want of KV-cache blocks?)",
            timed_steps, s.num_tokens, s.chunks.size(), n)));
      seconds += took;
      ++timed_steps;
    }
    for (const RequestOutput& o : *outs) {
      if (o.reason == FinishReason::kError) return fail(o.status);
      std::vector<int32_t>& t = out[index.at(o.id)];
      if (t.empty() && !o.tokens.empty()) ++with_first;
      t.insert(t.end(), o.tokens.begin(), o.tokens.end());
    }
  }
  if (timed_steps != steps)
    return absl::InternalError(absl::StrFormat(
        "batched decode: %d decode steps ran, %d were asked for", timed_steps, steps));
  if (tokens) *tokens = std::move(out);
  return seconds;
}

}  // namespace llmc
