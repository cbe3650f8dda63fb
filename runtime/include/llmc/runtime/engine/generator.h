// Single-sequence generation and scoring over a compiled artifact: the
// tokenizer, the step runner (host or CUDA), the paged KV cache (a block pool and its
// manager, used even for one sequence) and the sampler, wired together.
// Many requests at once, continuously batched, go through the Engine
// (engine.h) instead.
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
#include "llmc/runtime/engine/loaded_model.h"
#include "llmc/runtime/exec/backend.h"
#include "llmc/runtime/exec/step_runner.h"
#include "llmc/runtime/kv/block_pool.h"
#include "llmc/runtime/kv/kv_cache_manager.h"
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
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const std::string& artifact_dir,
                                                           const GeneratorOptions& options);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Artifact& artifact() const { return *artifact_; }
  StepRunner& runner() { return *runner_; }
  // Longest sequence (prompt + output) the KV cache and the model take.
  int64_t max_context() const;

  // Generates a continuation of `prompt`; `on_text` receives the output as it
  // becomes safe to show (whole UTF-8 characters, never part of a stop string).
  // The text is detokenized incrementally (a few tokens per step, not the
  // whole output again), as the continuation of the prompt's text.
  // params.ignore_eos masks the end-of-generation tokens out of every
  // sampling step, as llama.cpp's --ignore-eos does, so generation runs to
  // max_tokens (or the end of the context); stop strings still apply.
  absl::StatusOr<GenerationResult> Generate(std::span<const int32_t> prompt,
                                            const SamplingParams& params,
                                            const std::function<void(std::string_view)>& on_text);

  // Teacher forcing: runs `tokens` through the model as one sequence from an
  // empty cache and calls on_logits(i, row) with the logits that predict
  // tokens[i + 1]. The first `prefill` tokens (all when 0) run in chunks of
  // the runner's batch size; each later one runs as a single decode step.
  absl::Status Score(std::span<const int32_t> tokens, int64_t prefill,
                     const std::function<void(int64_t, std::span<const float>)>& on_logits);
  absl::Status Score(std::span<const int32_t> tokens,
                     const std::function<void(int64_t, std::span<const float>)>& on_logits) {
    return Score(tokens, 0, on_logits);
  }

  // The decode phase of a server (batched_decode.cc): one sequence per
  // prompt, each prefilled on its own (untimed), then `steps` steps that run
  // the next token of every sequence together, greedy. Returns the seconds of
  // those steps. Fails when the sequences do not fit one step or the cache.
  // `tokens`, when given, receives each sequence's greedy tokens (the one
  // its prefill predicts, then one per step): what Generate() would give.
  absl::StatusOr<double> TimeBatchedDecode(std::span<const std::vector<int32_t>> prompts,
                                           int64_t steps,
                                           std::vector<std::vector<int32_t>>* tokens = nullptr);

 private:
  Generator() = default;
  // Runs `tokens` (appended to sequence `id`) and returns the logits of the
  // rows in `rows` (indices into `tokens`).
  absl::StatusOr<const float*> Forward(RequestId id, std::span<const int32_t> tokens,
                                       const std::vector<int32_t>& rows);

  std::unique_ptr<Artifact> artifact_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
  RequestId next_id_ = 0;
  std::vector<int32_t> eos_ids_;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_ENGINE_GENERATOR_H_
