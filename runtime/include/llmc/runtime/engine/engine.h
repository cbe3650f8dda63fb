// The serving engine: many requests on one model, continuously batched.
//
// It owns the step runner, the KV cache (block pool and manager), the
// scheduler (scheduler.h) and every request's state: its sampler, with its
// own SamplingParams and seed; its stop checker; its incremental
// detokenizer; its usage counts. Each Step() runs one @step over the ragged
// batch the scheduler chose (prefill chunks and decode tokens of different
// requests together) and returns, per request that produced something, the
// new tokens and the text that became safe to show, and the finished
// requests with their reason.
//
// Every request ends in exactly one finished output: by its stop rules,
// Abort(), or an error (the step that computed it failed: reason kError with
// the status). A request the cache could never hold is refused by
// AddRequest. Not thread-safe: one thread calls everything; EngineLoop
// (engine_loop.h) is that thread for a server.
//
// n completions of one prompt are n requests: with prefix caching they
// share the prompt's whole blocks (the scheduler computes them once).
#ifndef LLMC_RUNTIME_ENGINE_ENGINE_H_
#define LLMC_RUNTIME_ENGINE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/runtime/engine/loaded_model.h"
#include "llmc/runtime/engine/scheduler.h"
#include "llmc/runtime/exec/step_batch.h"
#include "llmc/runtime/kv/block_pool.h"
#include "llmc/runtime/kv/kv_cache_manager.h"
#include "llmc/runtime/sample/sampler.h"
#include "llmc/runtime/sample/sampling_params.h"
#include "llmc/runtime/sample/stop_checker.h"
#include "llmc/runtime/tokenizer/incremental_detokenizer.h"

namespace llmc {

struct EngineOptions {
  // Requests in one step, and running at once (vLLM's --max-num-seqs). The
  // token budget of a step is the runner's max_batch_tokens.
  int32_t max_seqs = 64;
  // Most tokens of one prompt chunk per step (0: the budget's rest); see
  // SchedulerConfig.
  int32_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = true;
  // Pool invariants checked after every step (tests; O(blocks) a step).
  bool check_invariants = false;
  // Most steps in flight at once: 0 for as many as the runner takes (a
  // pipeline's stages), 1 to run one step at a time (to measure what the
  // overlap gains).
  int32_t max_steps_in_flight = 0;
  // The runner picks the tokens of requests itself (StepBatch::picks,
  // PickSupports: greedy, or a draw with a top-k up to 1,024 or none; their
  // penalties and logprobs too; a GPU on the device), so only their ids
  // and logprobs leave it;
  // false samples every row here from its logits (tests compare the two).
  bool runner_picks = true;
  // SchedulerConfig::prefill_first: a step runs prompt chunks only while
  // there are any, so that requests added together decode in lock step
  // (`llmc bench`'s tgN@bB).
  bool prefill_first = false;
  // Asynchronous scheduling (vLLM's --async-scheduling), where the runner
  // feeds tokens (StepRunner::feeds_tokens: a GPU with the artifact's token
  // feed): step N+1 is scheduled, built and submitted while step N runs,
  // its decoding requests going on from the tokens N picks on the device
  // (SchedulerConfig::async_scheduling), so that the host's work per step
  // overlaps the device's instead of adding to it. Steps run one at a time
  // while a running request's tokens need the host (sampled there, or
  // penalized: its window would hold the unknown token).
  bool async_scheduling = true;
};

// A score request (Engine::AddScoreRequest).
struct ScoreOptions {
  // Positions from here on (0: none) run one per step, as decode steps run
  // them (`llmc logits --prefill`).
  int32_t decode_from = 0;
  // -1: every position's raw logits (RequestOutput::logits): `llmc logits`,
  // and the only path that copies logits off a GPU. N in [0, 20]: every
  // position's next token's logprob with the N best
  // (RequestOutput::prompt_logprobs), which the runner computes (a GPU's
  // device sampler, as forced picks): perplexity, OpenAI's prompt_logprobs.
  int32_t prompt_logprobs = -1;
};

struct RequestUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // taken from the prefix cache at first admission
  int32_t num_preemptions = 0;
};

// What one step produced for one request.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // new tokens (the final one included when it ended the text)
  std::string text;             // new text, whole UTF-8 characters, never part of a stop string
  // One per new token when the request asked for logprobs.
  std::vector<SampleResult> logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  absl::Status status;  // not OK only with reason kError
  RequestUsage usage;   // counts so far; final when finished
  // A score request's (AddScoreRequest) positions from score_first on,
  // each exactly once over its outputs, in order:
  // - raw logits, f32 [rows, vocab]: row i holds the logits position
  //   score_first + i gives (they predict the token after it);
  // - or prompt logprobs: entry i is the logprob of the token after
  //   position score_first + i (and the N best); the last position has no
  //   next token and no entry.
  int32_t score_first = 0;
  std::vector<float> logits;
  std::vector<SampleResult> prompt_logprobs;
};

struct EngineStats {
  SchedulerStats scheduler;
  KVCacheStats kv;
  int64_t requests_added = 0;
  int64_t requests_finished = 0;  // by any reason, aborts and errors included
  int64_t output_tokens = 0;
  int64_t step_tokens_max = 0;  // largest step, in tokens
  // KV-cache slots allocated to live requests but holding no token (the
  // partly filled last block of each), summed over steps, and all slots in
  // use, summed likewise: waste = wasted / allocated.
  int64_t kv_slots_wasted = 0;
  int64_t kv_slots_allocated = 0;
  // Wall time of Step() calls: inside the runner's Submit and Collect (the
  // step itself; on a GPU its kernels, which Collect waits for), and the
  // rest (scheduling, batch building, host sampling, detokenizing: the
  // host's share of the critical path while steps run one at a time).
  double runner_seconds = 0;
  double host_seconds = 0;
  int64_t steps = 0;  // Step() calls that collected a step
  // Asynchronous scheduling: steps submitted while another ran, and the
  // tokens fed on the device (ScheduledChunk::fed).
  int64_t steps_ahead = 0;
  int64_t fed_tokens = 0;
};

class Engine {
 public:
  // On a loaded model (LoadModel; the commands load theirs with
  // cli/rank_entry.h, tests put a fake runner together).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(LoadedModel model,
                                                        const EngineOptions& options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; returns its id. InvalidArgument for bad params or an
  // empty or too long prompt, ResourceExhausted when the whole KV cache
  // could not hold it; the message names the request's sizes.
  absl::StatusOr<RequestId> AddRequest(std::vector<int32_t> prompt, const SamplingParams& params);

  // Queues a score request: `tokens` run through the model (teacher
  // forcing) and every position's logits, or its next token's logprobs
  // (ScoreOptions), come back in its outputs as the steps compute them;
  // nothing is sampled, and it finishes (reason kLength) with its last
  // position. A chunk's rows share a step's logits rows (the runner's
  // max_logits) with the other requests. InvalidArgument for ids outside
  // the vocabulary, more tokens than the context holds or bad options.
  absl::StatusOr<RequestId> AddScoreRequest(std::vector<int32_t> tokens,
                                            const ScoreOptions& options = {});

  // Ends a queued or running request; its final output (reason kAbort, with
  // the text held back so far) comes with the next Step(). NotFound for an
  // unknown or finished id.
  absl::Status Abort(RequestId id);

  // Runs one step (nothing when no request is left) and returns what it
  // produced, with the outputs of aborted requests. An error means the
  // engine itself is broken (a scheduler invariant); a failed @step fails
  // only its requests (kError outputs) and the engine goes on. On a runner
  // with several steps in flight (pipeline stages), it first submits steps
  // of requests not in flight until the runner is full, then collects the
  // oldest: its outputs are that step's.
  absl::StatusOr<std::vector<RequestOutput>> Step();

  bool has_unfinished() const {
    return scheduler_->has_unfinished() || !pending_.empty() || !in_flight_.empty();
  }
  int32_t num_unfinished() const { return int32_t(live_.size()); }
  EngineStats stats() const;
  // The step whose outputs the last Step() returned.
  const SchedulerOutput& last_schedule() const { return last_; }

  const Tokenizer& tokenizer() const { return *model_.tokenizer; }
  StepRunner& runner() { return *model_.runner; }
  const Artifact* artifact() const { return model_.artifact.get(); }
  // Longest request (prompt + output).
  int32_t max_model_len() const { return scheduler_->config().max_model_len; }
  // One line: "KV cache: 1024 blocks of 16 tokens (16384 tokens, 384.0 MiB),
  // prefix caching on".
  std::string KvCacheSummary() const;

 private:
  Engine() = default;
  struct Live {
    SamplingParams params;
    Sampler sampler;
    StopChecker stop;
    IncrementalDetokenizer detok;
    RequestUsage usage;
    bool admitted = false;
    bool runner_picks = false;  // the runner picks its tokens (EngineOptions::runner_picks)
    bool score = false;         // AddScoreRequest
    // The runner picks its every token from the logits alone (no host
    // sampling, no penalty window): the scheduler may schedule it on a
    // token not known yet (Scheduler::AddRequest's feedable).
    bool feedable = false;
    int32_t prompt_logprobs = -1;  // a score request's ScoreOptions::prompt_logprobs
    int32_t rows_out = 0;       // a score request's positions that went out
    // Its runner pick in the step built last that picked its token: the
    // index into that step's picks and the step's number (InFlight::number).
    // The step after it feeds from there.
    int32_t pick = -1;
    int64_t pick_step = -1;
  };
  // A step submitted to the runner: what was scheduled, and which of its
  // sampled chunks the runner picks (in the chunks' order).
  struct InFlight {
    SchedulerOutput schedule;
    std::vector<bool> picked;            // per sampled chunk
    std::vector<int32_t> logprob_begin;  // per pick: its first StepOutput::logprobs entry
    // Per score chunk: its logits rows, and whether the runner picked them
    // (prompt logprobs as forced picks).
    struct ScoreRows {
      int32_t rows = 0;
      bool picked = false;
    };
    std::vector<ScoreRows> scores;
    int64_t number = 0;  // steps built before it
  };
  // Steps to keep in flight now (see EngineOptions::async_scheduling).
  int64_t StepsInFlight() const;

  // InvalidArgument unless every token id is in the vocabulary.
  absl::Status CheckTokenIds(const std::vector<int32_t>& tokens, const char* what) const;
  // The step of `step.schedule` into batch_; step's picked and scores.
  absl::Status BuildBatch(InFlight& step);
  // Rows of logits score chunk `c` takes: one per position, or with
  // prompt logprobs one per position that has a next token.
  int32_t ScoreRows(const ScheduledChunk& c, const Live& r) const;
  // The prompt logprobs of score chunk `c`'s `rows` positions: the
  // runner's (`picked`: from the StepOutput::logprobs entries of each of
  // its picks, which start at `logprob_begin`) or, when the runner returned
  // the rows' logits, the request's sampler's from them.
  void PromptLogprobs(const ScheduledChunk& c, Live& r, int32_t rows, const float* logits,
                      const PickLogprob* picked, const int32_t* logprob_begin,
                      std::vector<SampleResult>* out);
  // Score chunk `c` ran: its positions' rows (from `logits`) or prompt
  // logprobs (`logprobs`, one per row) go out, the positions a recompute
  // after a preemption repeats left out; the request ends with its last
  // position.
  absl::Status EmitScore(const ScheduledChunk& c, const float* logits,
                         std::vector<SampleResult> logprobs, std::vector<RequestOutput>& outputs);
  // Request `id`'s next token: sampled here from `row` when `picked` is
  // null, else *picked (and its logprobs, when asked, from
  // `picked_logprobs`); then appended, detokenized and stop-checked into a
  // new output.
  absl::Status SampleNext(RequestId id, const float* row, const int32_t* picked,
                          const PickLogprob* picked_logprobs,
                          std::vector<RequestOutput>& outputs);
  // Ends `id` with an output carrying `reason` (and `status` for kError).
  void EndRequest(RequestId id, FinishReason reason, absl::Status status,
                  std::vector<RequestOutput>& outputs);
  void CountKvWaste();
  // Ends every request of `step` with kError: its @step failed.
  void FailStep(const SchedulerOutput& step, const absl::Status& status,
                std::vector<RequestOutput>& outputs);

  LoadedModel model_;
  EngineOptions options_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<Live>> live_;
  std::vector<RequestOutput> pending_;  // aborted since the last step
  SchedulerOutput last_;
  // Steps submitted to the runner and not yet collected, oldest first (at
  // most runner.max_steps_in_flight(): one, or a pipeline's stages).
  std::deque<InFlight> in_flight_;
  StepBatchBuilder batch_;
  SamplerScratch scratch_;
  std::vector<float> masked_;
  std::vector<std::pair<int32_t, int32_t>> window_;  // BuildBatch's, reused
  std::vector<PickPenalty> penalties_;
  RequestId next_id_ = 0;
  int64_t steps_built_ = 0;  // InFlight::number of the next step
  EngineStats stats_;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_ENGINE_ENGINE_H_
