#include "llmc/runtime/engine/generator.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "llmc/runtime/sample/sampler.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/tokenizer/incremental_detokenizer.h"

namespace llmc {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const std::string& dir,
                                                             const GeneratorOptions& options) {
  auto g = std::unique_ptr<Generator>(new Generator());
  LLMC_ASSIGN_OR_RETURN(LoadedModel model, LoadModel(dir, options));
  g->artifact_ = std::move(model.artifact);
  g->tokenizer_ = std::move(model.tokenizer);
  g->runner_ = std::move(model.runner);
  g->eos_ids_ = std::move(model.eos_ids);
  LLMC_ASSIGN_OR_RETURN(g->pool_, BlockPool::Create(int32_t(g->runner_->num_blocks()),
                                                    int32_t(g->runner_->block_size())));
  KVCacheManager::Options kv;
  kv.enable_prefix_caching = false;  // one sequence at a time: nothing to share
  g->kv_ = std::make_unique<KVCacheManager>(*g->pool_, kv);
  return g;
}

int64_t Generator::max_context() const {
  return std::min(artifact_->manifest().model.max_position,
                  runner_->num_blocks() * runner_->block_size());
}

absl::StatusOr<const float*> Generator::Forward(RequestId id, std::span<const int32_t> tokens,
                                                const std::vector<int32_t>& rows) {
  LLMC_ASSIGN_OR_RETURN(int32_t first, kv_->num_tokens(id));
  LLMC_RETURN_IF_ERROR(kv_->AppendTokens(id, absl::MakeConstSpan(tokens.data(), tokens.size())));
  const int32_t n = int32_t(tokens.size());
  LLMC_ASSIGN_OR_RETURN(std::vector<int32_t> slots, kv_->SlotMapping(id, first, n));
  LLMC_ASSIGN_OR_RETURN(absl::Span<const int32_t> table, kv_->block_table(id));
  StepBatchBuilder b;
  b.Clear();
  b.AddSequence(absl::MakeConstSpan(tokens.data(), tokens.size()), first, slots, table);
  for (int32_t r : rows) b.AddLogitsRow(r);
  LLMC_ASSIGN_OR_RETURN(StepOutput out, runner_->Step(b.Finish()));
  return out.logits;
}

absl::StatusOr<GenerationResult> Generator::Generate(
    std::span<const int32_t> prompt, const SamplingParams& params,
    const std::function<void(std::string_view)>& on_text) {
  LLMC_RETURN_IF_ERROR(params.Validate());
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  int64_t limit = max_context();
  if (int64_t(prompt.size()) >= limit)
    return absl::InvalidArgumentError(absl::StrFormat(
        "the prompt has %d tokens but the context holds %d (model max_position %d, KV cache "
        "%d blocks of %d)",
        prompt.size(), limit, artifact_->manifest().model.max_position, runner_->num_blocks(),
        runner_->block_size()));

  RequestId id = next_id_++;
  LLMC_RETURN_IF_ERROR(kv_->AddRequest(id));
  struct FreeOnExit {
    KVCacheManager* kv;
    RequestId id;
    ~FreeOnExit() { (void)kv->Free(id); }
  } free_on_exit{kv_.get(), id};

  GenerationResult result;
  result.prompt_tokens = int64_t(prompt.size());
  Sampler sampler(params);
  StopChecker stop(params, eos_ids_);
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  int64_t vocab = runner_->vocab_size();
  int64_t chunk = runner_->max_batch_tokens();

  // Prefill in chunks; only the last chunk's last row needs logits.
  auto start = std::chrono::steady_clock::now();
  const float* logits = nullptr;
  for (size_t at = 0; at < prompt.size(); at += size_t(chunk)) {
    size_t n = std::min(prompt.size() - at, size_t(chunk));
    LLMC_ASSIGN_OR_RETURN(logits, Forward(id, prompt.subspan(at, n), {int32_t(n - 1)}));
  }
  result.prefill_seconds = Seconds(start);

  start = std::chrono::steady_clock::now();
  // The prompt is the detokenizer's context, so the output's text continues
  // the prompt's (a SentencePiece model keeps the first token's space).
  IncrementalDetokenizer detok(*tokenizer_, absl::MakeConstSpan(prompt.data(), prompt.size()));
  std::vector<float> masked;  // the logits with the end-of-generation tokens masked out
  for (;;) {
    std::span<const float> row =
        MaskTokens(std::span<const float>(logits, size_t(vocab)),
                   params.ignore_eos ? std::span<const int32_t>(eos_ids_) : std::span<const int32_t>(),
                   &masked);
    int32_t token = sampler.Sample(row, context);
    result.tokens.push_back(token);
    context.push_back(token);
    FinishReason reason = stop.AppendToken(token, detok.Append(token));
    if (reason == FinishReason::kNone && int64_t(context.size()) >= limit) {
      stop.Finish(FinishReason::kLength);
      reason = FinishReason::kLength;
    }
    if (std::string_view out = stop.TakeReady(); !out.empty() && on_text) on_text(out);
    if (reason != FinishReason::kNone) break;
    LLMC_ASSIGN_OR_RETURN(logits, Forward(id, std::span<const int32_t>(&context.back(), 1), {0}));
  }
  result.decode_seconds = Seconds(start);
  result.reason = stop.finish_reason();
  result.text = std::string(stop.text());
  return result;
}

absl::Status Generator::Score(std::span<const int32_t> tokens, int64_t prefill,
                              const std::function<void(int64_t, std::span<const float>)>& on_logits) {
  if (int64_t(tokens.size()) > max_context())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d tokens do not fit the context of %d", tokens.size(), max_context()));
  RequestId id = next_id_++;
  LLMC_RETURN_IF_ERROR(kv_->AddRequest(id));
  struct FreeOnExit {
    KVCacheManager* kv;
    RequestId id;
    ~FreeOnExit() { (void)kv->Free(id); }
  } free_on_exit{kv_.get(), id};
  int64_t vocab = runner_->vocab_size();
  int64_t chunk = std::min(runner_->max_batch_tokens(), runner_->max_logits());
  if (prefill <= 0 || prefill > int64_t(tokens.size())) prefill = int64_t(tokens.size());
  for (size_t at = 0; at < tokens.size();) {
    size_t n = at < size_t(prefill) ? std::min(size_t(prefill) - at, size_t(chunk)) : 1;
    std::vector<int32_t> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = int32_t(i);
    LLMC_ASSIGN_OR_RETURN(const float* logits, Forward(id, tokens.subspan(at, n), rows));
    for (size_t i = 0; i < n; ++i)
      on_logits(int64_t(at + i), std::span<const float>(logits + i * size_t(vocab), size_t(vocab)));
    at += n;
  }
  return absl::OkStatus();
}

}  // namespace llmc
