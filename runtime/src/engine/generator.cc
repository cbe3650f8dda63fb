#include "llmc/runtime/engine/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// One sequence at a time, or a batched decode's sequences all in one step
// (the engine's max_seqs is capped by the runner's logits rows).
EngineOptions GeneratorEngineOptions() {
  EngineOptions o;
  o.max_seqs = std::numeric_limits<int32_t>::max();
  o.enable_prefix_caching = false;
  o.prefill_first = true;
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(LoadedModel model) {
  auto g = std::unique_ptr<Generator>(new Generator());
  LLMC_ASSIGN_OR_RETURN(g->engine_, Engine::Create(std::move(model), GeneratorEngineOptions()));
  return g;
}

void Generator::Drain(std::span<const RequestId> ids) {
  // Aborting ends a queued or running request (NotFound: it had ended); one
  // whose step is in flight ends when that step is collected.
  for (RequestId id : ids) (void)engine_->Abort(id);
  while (engine_->has_unfinished())
    if (!engine_->Step().ok()) return;  // the engine itself is broken
}

absl::StatusOr<GenerationResult> Generator::Generate(
    std::span<const int32_t> prompt, const SamplingParams& params,
    const std::function<void(std::string_view)>& on_text) {
  LLMC_RETURN_IF_ERROR(params.Validate());
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  const int64_t limit = max_context();
  const StepRunner& r = engine_->runner();
  if (int64_t(prompt.size()) >= limit)
    return absl::InvalidArgumentError(absl::StrFormat(
        "the prompt has %d tokens but the context holds %d (model max_position %d, KV cache "
        "%d blocks of %d)",
        prompt.size(), limit, engine_->artifact() ? engine_->artifact()->manifest().model.max_position
                                                   : limit,
        r.num_blocks(), r.block_size()));
  // Generation ends at the end of the context (reason kLength) whatever
  // max_tokens asks.
  SamplingParams p = params;
  const int32_t room = int32_t(limit - int64_t(prompt.size()));
  if (p.max_tokens < 0 || p.max_tokens > room) p.max_tokens = room;
  LLMC_ASSIGN_OR_RETURN(RequestId id,
                        engine_->AddRequest(std::vector<int32_t>(prompt.begin(), prompt.end()), p));
  GenerationResult result;
  result.prompt_tokens = int64_t(prompt.size());
  auto start = std::chrono::steady_clock::now();
  for (bool first = true; engine_->has_unfinished();) {
    absl::StatusOr<std::vector<RequestOutput>> outs = engine_->Step();
    if (!outs.ok()) {
      Drain({&id, 1});
      return outs.status();
    }
    for (RequestOutput& o : *outs) {
      if (o.id != id) continue;
      if (first && !o.tokens.empty()) {
        first = false;
        result.prefill_seconds = Seconds(start);
        start = std::chrono::steady_clock::now();
      }
      result.tokens.insert(result.tokens.end(), o.tokens.begin(), o.tokens.end());
      result.text += o.text;
      if (!o.text.empty() && on_text) on_text(o.text);
      if (!o.finished) continue;
      if (o.reason == FinishReason::kError) return o.status;
      result.reason = o.reason;
    }
  }
  result.decode_seconds = Seconds(start);
  return result;
}

absl::Status Generator::RunScore(std::span<const int32_t> tokens, const ScoreOptions& options,
                                 const std::function<void(const RequestOutput&)>& on_output) {
  if (int64_t(tokens.size()) > max_context())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d tokens do not fit the context of %d", tokens.size(), max_context()));
  LLMC_ASSIGN_OR_RETURN(
      RequestId id,
      engine_->AddScoreRequest(std::vector<int32_t>(tokens.begin(), tokens.end()), options));
  while (engine_->has_unfinished()) {
    absl::StatusOr<std::vector<RequestOutput>> outs = engine_->Step();
    if (!outs.ok()) {
      Drain({&id, 1});
      return outs.status();
    }
    for (const RequestOutput& o : *outs) {
      if (o.id != id) continue;
      if (o.reason == FinishReason::kError) return o.status;
      on_output(o);
    }
  }
  return absl::OkStatus();
}

absl::Status Generator::Score(std::span<const int32_t> tokens, int64_t prefill,
                              const std::function<void(int64_t, std::span<const float>)>& on_logits) {
  ScoreOptions options;
  options.decode_from = prefill <= 0 || prefill >= int64_t(tokens.size()) ? 0 : int32_t(prefill);
  const size_t vocab = size_t(engine_->runner().vocab_size());
  return RunScore(tokens, options, [&](const RequestOutput& o) {
    for (size_t i = 0; i * vocab < o.logits.size(); ++i)
      on_logits(int64_t(o.score_first) + int64_t(i),
                std::span<const float>(o.logits.data() + i * vocab, vocab));
  });
}

absl::Status Generator::PromptLogprobs(
    std::span<const int32_t> tokens, int32_t top_n,
    const std::function<void(int64_t, const SampleResult&)>& on_logprob) {
  ScoreOptions options;
  options.prompt_logprobs = top_n;
  return RunScore(tokens, options, [&](const RequestOutput& o) {
    for (size_t i = 0; i < o.prompt_logprobs.size(); ++i)
      on_logprob(int64_t(o.score_first) + int64_t(i), o.prompt_logprobs[i]);
  });
}

}  // namespace llmc
