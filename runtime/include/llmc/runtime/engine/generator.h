// One sequence at a time over a compiled artifact, for the commands that
// are not servers (`llmc run -p`, `perplexity`, `logits`, `bench`, `tune`):
// generation, scoring, and a lock-step batched decode, each a thin client
// of one Engine (engine.h), which alone drives the step runner. Prefix
// caching is off (a benchmark's repeated prompt is computed each time) and
// the engine schedules prefill first (TimeBatchedDecode's lock step).
#ifndef LLMC_RUNTIME_ENGINE_GENERATOR_H_
#define LLMC_RUNTIME_ENGINE_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/engine/engine.h"
#include "llmc/runtime/engine/loaded_model.h"
#include "llmc/runtime/exec/step_runner.h"
#include "llmc/runtime/sample/sampling_params.h"
#include "llmc/runtime/sample/stop_checker.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {

using GeneratorOptions = LoadOptions;

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (EOS included when it ended the text)
  std::string text;             // the output text, cut before a matched stop string
  FinishReason reason = FinishReason::kNone;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

class Generator {
 public:
  // On a loaded model (see Engine::Create).
  static absl::StatusOr<std::unique_ptr<Generator>> Create(LoadedModel model);

  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }
  // The artifact; only for a Generator made from an artifact directory.
  const Artifact& artifact() const { return *engine_->artifact(); }
  // For what the runner reports (its vocabulary, where it runs, CUDA's
  // GEMM policy and kernel times); the engine alone runs its steps.
  StepRunner& runner() { return engine_->runner(); }
  // Longest sequence (prompt + output) the KV cache and the model take.
  int64_t max_context() const { return engine_->max_model_len(); }

  // Generates a continuation of `prompt`; `on_text` receives the output as it
  // becomes safe to show (whole UTF-8 characters, never part of a stop string).
  // params.ignore_eos masks the end-of-generation tokens out of every
  // sampling step, as llama.cpp's --ignore-eos does, so generation runs to
  // max_tokens (or the end of the context); stop strings still apply.
  // prefill_seconds runs to the first token, decode_seconds from there.
  absl::StatusOr<GenerationResult> Generate(std::span<const int32_t> prompt,
                                            const SamplingParams& params,
                                            const std::function<void(std::string_view)>& on_text);

  // Teacher forcing (an engine score request): runs `tokens` through the
  // model as one sequence from an empty cache and calls on_logits(i, row)
  // with the logits that predict tokens[i + 1], in order. The first
  // `prefill` tokens (all when 0) run in chunks of the step's budget; each
  // later one runs as a single decode step.
  absl::Status Score(std::span<const int32_t> tokens, int64_t prefill,
                     const std::function<void(int64_t, std::span<const float>)>& on_logits);
  absl::Status Score(std::span<const int32_t> tokens,
                     const std::function<void(int64_t, std::span<const float>)>& on_logits) {
    return Score(tokens, 0, on_logits);
  }

  // Prompt logprobs (a score request with ScoreOptions::prompt_logprobs =
  // top_n): calls on_logprob(i, r) with the logprob of tokens[i + 1] after
  // tokens[0..i] and the top_n best, for i from 0 to size - 2, in order.
  // The runner computes them (a GPU on the device): no logits leave it.
  absl::Status PromptLogprobs(
      std::span<const int32_t> tokens, int32_t top_n,
      const std::function<void(int64_t, const SampleResult&)>& on_logprob);

  // The decode phase of a server (batched_decode.cc): one greedy request
  // per prompt (end-of-generation ids masked), prefilled first (untimed),
  // then `steps` engine steps that each run the next token of every
  // sequence. Returns the seconds of those steps. Fails when the sequences
  // do not fit one step or the cache, or the steps were not in lock step.
  // `tokens`, when given, receives each sequence's tokens (the one its
  // prefill gives, then one per step): what Generate() would give.
  absl::StatusOr<double> TimeBatchedDecode(std::span<const std::vector<int32_t>> prompts,
                                           int64_t steps,
                                           std::vector<std::vector<int32_t>>* tokens = nullptr);

 private:
  Generator() = default;
  // Ends requests `ids` (after an error) and runs the engine until it holds
  // none, so that the next call starts from an empty one.
  void Drain(std::span<const RequestId> ids);
  // Runs a score request of `tokens` to its end, handing each output to
  // `on_output`.
  absl::Status RunScore(std::span<const int32_t> tokens, const ScoreOptions& options,
                        const std::function<void(const RequestOutput&)>& on_output);

  std::unique_ptr<Engine> engine_;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_ENGINE_GENERATOR_H_
