#include "llmc/runtime/engine/engine.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/exec/kv_sizing.h"

namespace llmc {
namespace {

// A pick's logprob entries (StepOutput::logprobs: the token's, then the N
// best, token -1 past the last) as the sampler's result.
void ToSampleResult(int32_t token, const PickLogprob* entries, int32_t n, SampleResult* out) {
  out->token = token;
  out->logprob = entries[0].logprob;
  out->top_logprobs.clear();
  for (int32_t i = 1; i <= n; ++i)
    if (entries[i].token >= 0) out->top_logprobs.push_back({entries[i].token, entries[i].logprob});
}

using Clock = std::chrono::steady_clock;

// The host's and the runner's shares of one Engine::Step() call, however it
// returns (EngineStats::host_seconds, runner_seconds).
struct StepTimer {
  EngineStats& stats;
  Clock::time_point start = Clock::now();
  double in_runner = 0;
  ~StepTimer() {
    const double all = std::chrono::duration<double>(Clock::now() - start).count();
    stats.runner_seconds += in_runner;
    stats.host_seconds += all - in_runner;
  }
  // Runs `call` (the runner's Submit or Collect), timed as the runner's.
  template <class F>
  auto Runner(F call) {
    const Clock::time_point t = Clock::now();
    auto r = call();
    in_runner += std::chrono::duration<double>(Clock::now() - t).count();
    return r;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(LoadedModel model,
                                                       const EngineOptions& options) {
  if (options.max_seqs < 1)
    return absl::InvalidArgumentError(
        absl::StrFormat("--max-seqs must be at least 1, got %d", options.max_seqs));
  auto e = std::unique_ptr<Engine>(new Engine());
  e->model_ = std::move(model);
  e->options_ = options;
  StepRunner& runner = *e->model_.runner;
  LLMC_ASSIGN_OR_RETURN(
      e->pool_, BlockPool::Create(int32_t(runner.num_blocks()), int32_t(runner.block_size())));
  KVCacheManager::Options kv;
  kv.enable_prefix_caching = options.enable_prefix_caching;
  e->kv_ = std::make_unique<KVCacheManager>(*e->pool_, kv);
  SchedulerConfig config;
  config.max_batch_tokens = int32_t(runner.max_batch_tokens());
  // Every request in a step may want its logits.
  config.max_seqs = std::min<int32_t>(options.max_seqs, int32_t(runner.max_logits()));
  config.long_prefill_token_threshold = options.long_prefill_token_threshold;
  config.max_model_len =
      int32_t(std::min<int64_t>(e->model_.max_position, runner.num_blocks() * runner.block_size()));
  config.max_logits_rows = int32_t(runner.max_logits());
  config.prefill_first = options.prefill_first;
  config.async_scheduling = options.async_scheduling && runner.feeds_tokens() &&
                            runner.max_steps_in_flight() >= 2 && options.max_steps_in_flight != 1;
  e->scheduler_ = std::make_unique<Scheduler>(config, *e->kv_);
  return e;
}

std::string Engine::KvCacheSummary() const {
  const StepRunner& r = *model_.runner;
  return absl::StrFormat("KV cache: %d blocks of %d tokens (%d tokens, %s), prefix caching %s",
                         r.num_blocks(), r.block_size(), r.num_blocks() * r.block_size(),
                         FormatBytes(r.kv_cache_bytes()),
                         options_.enable_prefix_caching ? "on" : "off");
}

absl::Status Engine::CheckTokenIds(const std::vector<int32_t>& tokens, const char* what) const {
  const int64_t vocab = model_.runner->vocab_size();
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s token %d is %d, outside the vocabulary [0, %d)", what, i, tokens[i], vocab));
  return absl::OkStatus();
}

absl::StatusOr<RequestId> Engine::AddScoreRequest(std::vector<int32_t> tokens,
                                                  const ScoreOptions& options) {
  LLMC_RETURN_IF_ERROR(CheckTokenIds(tokens, "scored"));
  if (options.prompt_logprobs < -1 || options.prompt_logprobs > kMaxLogprobs)
    return absl::InvalidArgumentError(absl::StrFormat(
        "prompt_logprobs %d: -1 (raw logits) or 0 to %d", options.prompt_logprobs, kMaxLogprobs));
  const RequestId id = next_id_;
  const int32_t n = int32_t(tokens.size());
  LLMC_RETURN_IF_ERROR(scheduler_->AddScoreRequest(id, std::move(tokens), options.decode_from));
  ++next_id_;
  SamplingParams none;
  none.max_tokens = 0;
  none.logprobs = std::max(options.prompt_logprobs, 0);
  auto live = std::unique_ptr<Live>(
      new Live{none, Sampler(none, &scratch_), StopChecker(none, model_.eos_ids),
               IncrementalDetokenizer(*model_.tokenizer, {}), RequestUsage{}, false});
  live->score = true;
  live->prompt_logprobs = options.prompt_logprobs;
  live->runner_picks = options_.runner_picks && options.prompt_logprobs >= 0;
  live->usage.prompt_tokens = n;
  live_.emplace(id, std::move(live));
  ++stats_.requests_added;
  return id;
}

absl::StatusOr<RequestId> Engine::AddRequest(std::vector<int32_t> prompt,
                                             const SamplingParams& params) {
  LLMC_RETURN_IF_ERROR(params.Validate());
  LLMC_RETURN_IF_ERROR(CheckTokenIds(prompt, "prompt"));
  const int64_t vocab = model_.runner->vocab_size();
  const RequestId id = next_id_;
  std::vector<int32_t> context = prompt;  // the detokenizer's, before the scheduler takes it
  const int32_t max_new = params.max_tokens < 0 ? -1 : params.max_tokens;
  // What a runner's pick (StepBatch::picks) gives: the token this
  // request's sampler would give, the end-of-generation ids masked with
  // ignore_eos (a step whose penalty window holds more distinct tokens than
  // a pick takes samples here: BuildBatch).
  const bool runner_picks =
      options_.runner_picks && params.logprobs <= kMaxPickLogprobs &&
      PickSupports(params.temperature, params.top_k, vocab) &&
      (!params.ignore_eos || int64_t(model_.eos_ids.size()) <= kMaxPickMaskedIds);
  const bool penalized = params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                         params.frequency_penalty != 0.0f;
  const bool feedable = runner_picks && !penalized;
  LLMC_RETURN_IF_ERROR(scheduler_->AddRequest(id, std::move(prompt), max_new, feedable));
  ++next_id_;
  auto live = std::unique_ptr<Live>(
      new Live{params, Sampler(params, &scratch_), StopChecker(params, model_.eos_ids),
               IncrementalDetokenizer(*model_.tokenizer, context), RequestUsage{}, false});
  live->runner_picks = runner_picks;
  live->feedable = feedable;
  live->usage.prompt_tokens = int32_t(context.size());
  live_.emplace(id, std::move(live));
  ++stats_.requests_added;
  return id;
}

void Engine::EndRequest(RequestId id, FinishReason reason, absl::Status status,
                        std::vector<RequestOutput>& outputs) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  Live& r = *it->second;
  r.stop.Finish(reason);
  RequestOutput out;
  out.id = id;
  out.text = std::string(r.stop.TakeReady());
  out.finished = true;
  out.reason = reason;
  out.status = std::move(status);
  out.usage = r.usage;
  out.usage.num_preemptions = scheduler_->num_preemptions(id);
  outputs.push_back(std::move(out));
  (void)scheduler_->Finish(id);  // known: live and scheduled requests are the same set
  live_.erase(it);
  ++stats_.requests_finished;
}

absl::Status Engine::Abort(RequestId id) {
  if (live_.count(id) == 0)
    return absl::NotFoundError(absl::StrFormat("request %d is not running or queued", id));
  EndRequest(id, FinishReason::kAbort, absl::OkStatus(), pending_);
  return absl::OkStatus();
}

int32_t Engine::ScoreRows(const ScheduledChunk& c, const Live& r) const {
  if (r.prompt_logprobs < 0) return c.num_tokens;
  const int32_t last = int32_t(scheduler_->tokens(c.id).size()) - 1;  // no next token
  return std::clamp(last - c.first_position, 0, c.num_tokens);
}

absl::Status Engine::BuildBatch(InFlight& step) {
  batch_.Clear();
  std::vector<bool>* picked = &step.picked;
  // A fed chunk's token: the id the runner writes over it (TokenFeed).
  static constexpr int32_t kFedPlaceholder = 0;
  for (const ScheduledChunk& c : step.schedule.chunks) {
    LLMC_ASSIGN_OR_RETURN(std::vector<int32_t> slots,
                          kv_->SlotMapping(c.id, c.first_position, c.num_tokens));
    LLMC_ASSIGN_OR_RETURN(absl::Span<const int32_t> table, kv_->block_table(c.id));
    const int32_t row = batch_.AddSequence(
        c.fed ? absl::MakeConstSpan(&kFedPlaceholder, 1)
              : scheduler_->tokens(c.id).subspan(c.first_position, c.num_tokens),
        c.first_position, slots, table);
    if (c.fed) {  // its token is the pick of the step in flight before it
      const Live& r = *live_.at(c.id);
      if (in_flight_.empty() || r.pick < 0 || r.pick_step != in_flight_.back().number)
        return absl::InternalError(absl::StrFormat(
            "engine: request %d is fed from a step in flight that does not pick its token", c.id));
      batch_.FeedToken(row, r.pick);
      ++stats_.fed_tokens;
    }
    if (c.score) {  // every position's logits, or its next token's logprobs
      const Live& r = *live_.at(c.id);
      const int32_t rows = ScoreRows(c, r);
      const absl::Span<const int32_t> tokens = scheduler_->tokens(c.id);
      for (int32_t i = 0; i < rows; ++i) {
        batch_.AddLogitsRow(row + i);
        if (!r.runner_picks) continue;
        RowPick pick;
        pick.forced = tokens[size_t(c.first_position + i + 1)];
        pick.logprobs = r.prompt_logprobs;
        batch_.PickLastRow({}, pick, {});
      }
      step.scores.push_back({rows, r.runner_picks});
      continue;
    }
    if (!c.sample) continue;
    batch_.AddLogitsRow(row + c.num_tokens - 1);
    Live& r = *live_.at(c.id);
    const SamplingParams& sp = r.params;
    penalties_.clear();
    if (r.runner_picks && (sp.repetition_penalty != 1.0f || sp.presence_penalty != 0.0f ||
                           sp.frequency_penalty != 0.0f)) {
      // The window the request's sampler would penalize: the context so far.
      absl::Span<const int32_t> context = scheduler_->tokens(c.id);
      PenaltyWindow(std::span<const int32_t>(context.data(), context.size()), sp.repeat_last_n,
                    model_.runner->vocab_size(), &window_);
      for (const auto& [token, count] : window_) penalties_.push_back({token, count});
    }
    const bool picks = r.runner_picks && int64_t(penalties_.size()) <= kMaxPickPenalties;
    picked->push_back(picks);
    if (!picks) continue;
    r.pick = int32_t(batch_.batch().picks.size());
    r.pick_step = step.number;
    RowPick pick;
    pick.repetition_penalty = sp.repetition_penalty;
    pick.presence_penalty = sp.presence_penalty;
    pick.frequency_penalty = sp.frequency_penalty;
    pick.temperature = sp.temperature;
    pick.top_k = sp.top_k;
    pick.top_p = sp.top_p;
    pick.min_p = sp.min_p;
    pick.logprobs = sp.logprobs;
    pick.seed = sp.seed;
    // The token's index in the output: the draw counter its sampler would
    // use (one Sample() a token); a fed chunk's comes after the token in
    // flight.
    pick.draw = uint64_t(c.first_position + c.num_tokens - r.usage.prompt_tokens);
    batch_.PickLastRow(sp.ignore_eos ? absl::Span<const int32_t>(model_.eos_ids)
                                     : absl::Span<const int32_t>(),
                       pick, penalties_);
  }
  // A step of prefill chunks only still asks for one row, never read: a
  // @step computes at least one row of logits (a launch with a zero grid is
  // an error on a GPU).
  if (batch_.batch().logits_rows.empty())
    batch_.AddLogitsRow(int32_t(batch_.batch().tokens.size()) - 1);
  batch_.Finish();
  return absl::OkStatus();
}

absl::Status Engine::SampleNext(RequestId id, const float* logits, const int32_t* picked,
                                const PickLogprob* picked_logprobs,
                                std::vector<RequestOutput>& outputs) {
  Live& r = *live_.at(id);
  if (!r.admitted) {
    r.admitted = true;
    r.usage.cached_prompt_tokens = scheduler_->num_cached_prompt_tokens(id);
  }
  absl::Span<const int32_t> context = scheduler_->tokens(id);
  SampleResult sampled;
  const bool want_logprobs = r.params.logprobs > 0;
  int32_t token = -1;
  if (picked != nullptr) {
    token = *picked;
    if (want_logprobs) ToSampleResult(token, picked_logprobs, r.params.logprobs, &sampled);
  } else {
    const std::span<const float> row =
        MaskTokens(std::span<const float>(logits, size_t(model_.runner->vocab_size())),
                   r.params.ignore_eos ? std::span<const int32_t>(model_.eos_ids)
                                       : std::span<const int32_t>(),
                   &masked_);
    // The draw of the token's index in the output, whichever side sampled
    // the request's earlier tokens.
    r.sampler.SetDrawIndex(uint64_t(r.usage.completion_tokens));
    token = r.sampler.Sample(row, std::span<const int32_t>(context.data(), context.size()),
                             want_logprobs ? &sampled : nullptr);
  }
  ++r.usage.completion_tokens;
  ++stats_.output_tokens;
  FinishReason reason = r.stop.AppendToken(token, r.detok.Append(token));
  // The context is full once the new token would need a slot past it.
  if (reason == FinishReason::kNone && int64_t(context.size()) + 1 >= max_model_len()) {
    r.stop.Finish(FinishReason::kLength);
    reason = FinishReason::kLength;
  }
  RequestOutput out;
  out.id = id;
  out.tokens.push_back(token);
  out.text = std::string(r.stop.TakeReady());
  if (want_logprobs) out.logprobs.push_back(std::move(sampled));
  out.usage = r.usage;
  out.usage.num_preemptions = scheduler_->num_preemptions(id);
  if (reason == FinishReason::kNone) {
    outputs.push_back(std::move(out));
    return scheduler_->AppendToken(id, token);
  }
  out.finished = true;
  out.reason = reason;
  outputs.push_back(std::move(out));
  live_.erase(id);
  ++stats_.requests_finished;
  return scheduler_->Finish(id);
}

void Engine::PromptLogprobs(const ScheduledChunk& c, Live& r, int32_t rows, const float* logits,
                            const PickLogprob* picked, const int32_t* logprob_begin,
                            std::vector<SampleResult>* out) {
  const int64_t vocab = model_.runner->vocab_size();
  const absl::Span<const int32_t> tokens = scheduler_->tokens(c.id);
  out->resize(size_t(rows));
  for (int32_t i = 0; i < rows; ++i) {
    const int32_t next = tokens[size_t(c.first_position + i + 1)];
    if (picked != nullptr)
      ToSampleResult(next, picked + logprob_begin[i], r.prompt_logprobs, &(*out)[size_t(i)]);
    else
      r.sampler.TokenLogprobs(std::span<const float>(logits + i * vocab, size_t(vocab)), next,
                              &(*out)[size_t(i)]);
  }
}

absl::Status Engine::EmitScore(const ScheduledChunk& c, const float* logits,
                               std::vector<SampleResult> logprobs,
                               std::vector<RequestOutput>& outputs) {
  Live& r = *live_.at(c.id);
  r.admitted = true;
  const int64_t vocab = model_.runner->vocab_size();
  const int32_t rows = ScoreRows(c, r);
  const int32_t end = c.first_position + c.num_tokens;
  // A score request preempted and recomputed gives its earlier positions
  // again (the same values); they went out already.
  const int32_t skip = std::clamp(r.rows_out - c.first_position, 0, rows);
  const bool finished = end == int32_t(scheduler_->tokens(c.id).size());
  r.rows_out = std::max(r.rows_out, end);
  if (skip == rows && !finished) return absl::OkStatus();
  RequestOutput out;
  out.id = c.id;
  out.score_first = c.first_position + skip;
  if (r.prompt_logprobs < 0)
    out.logits.assign(logits + int64_t(skip) * vocab, logits + int64_t(rows) * vocab);
  else
    out.prompt_logprobs.assign(std::make_move_iterator(logprobs.begin() + skip),
                               std::make_move_iterator(logprobs.end()));
  out.usage = r.usage;
  out.usage.num_preemptions = scheduler_->num_preemptions(c.id);
  if (!finished) {
    outputs.push_back(std::move(out));
    return absl::OkStatus();
  }
  out.finished = true;
  out.reason = FinishReason::kLength;
  outputs.push_back(std::move(out));
  live_.erase(c.id);
  ++stats_.requests_finished;
  return scheduler_->Finish(c.id);
}

void Engine::CountKvWaste() {
  const int64_t bs = pool_->block_size();
  stats_.kv_slots_allocated += int64_t(pool_->num_blocks() - pool_->num_free_blocks()) * bs;
  for (RequestId id : scheduler_->running()) {
    auto table = kv_->block_table(id);
    auto held = kv_->num_tokens(id);
    if (table.ok() && held.ok()) stats_.kv_slots_wasted += int64_t(table->size()) * bs - *held;
  }
}

void Engine::FailStep(const SchedulerOutput& step, const absl::Status& status,
                      std::vector<RequestOutput>& outputs) {
  // The step's requests cannot go on (their cache is half written); the
  // others can.
  for (const ScheduledChunk& c : step.chunks)
    EndRequest(c.id, FinishReason::kError,
               absl::Status(status.code(), absl::StrFormat("request %d: the step failed: %s", c.id,
                                                           status.message())),
               outputs);
}

int64_t Engine::StepsInFlight() const {
  const StepRunner& runner = *model_.runner;
  int64_t depth = runner.max_steps_in_flight();
  if (options_.max_steps_in_flight > 0)
    depth = std::min<int64_t>(depth, options_.max_steps_in_flight);
  // A pipeline's stages each run a step of other requests.
  if (!runner.feeds_tokens()) return depth;
  // One device: a second step in flight pays only when it goes on from the
  // first's tokens, every running request's.
  if (!scheduler_->config().async_scheduling) return 1;
  for (RequestId id : scheduler_->running()) {
    auto it = live_.find(id);
    if (it != live_.end() && !it->second->score && !it->second->feedable) return 1;
  }
  return depth;
}

absl::StatusOr<std::vector<RequestOutput>> Engine::Step() {
  StepTimer timer{stats_};
  std::vector<RequestOutput> outputs = std::move(pending_);
  pending_.clear();
  // Keep the runner's steps in flight: a pipeline's stages each run one of
  // other requests; scheduling asynchronously, the step after the one
  // running goes on from its tokens.
  while (int64_t(in_flight_.size()) < StepsInFlight()) {
    LLMC_ASSIGN_OR_RETURN(SchedulerOutput next, scheduler_->Schedule());
    if (next.empty()) break;
    if (!kv_->pending_copies().empty())
      return absl::InternalError(
          "engine: the KV cache asks for block copies (copy on write), which no runner does yet");
    InFlight step;
    step.number = steps_built_++;
    step.schedule = std::move(next);
    LLMC_RETURN_IF_ERROR(BuildBatch(step));
    for (const RowPick& p : batch_.batch().picks) step.logprob_begin.push_back(p.logprob_begin);
    stats_.step_tokens_max = std::max<int64_t>(stats_.step_tokens_max, step.schedule.num_tokens);
    CountKvWaste();
    if (absl::Status st =
            timer.Runner([&] { return model_.runner->Submit(StepAccess(), batch_.batch()); });
        !st.ok()) {
      FailStep(step.schedule, st, outputs);
      break;
    }
    stats_.steps_ahead += !in_flight_.empty();
    in_flight_.push_back(std::move(step));
  }
  if (in_flight_.empty()) return outputs;
  InFlight step = std::move(in_flight_.front());
  in_flight_.pop_front();
  last_ = std::move(step.schedule);
  absl::StatusOr<StepOutput> result =
      timer.Runner([&] { return model_.runner->Collect(StepAccess()); });
  ++stats_.steps;
  if (!result.ok()) {
    FailStep(last_, result.status(), outputs);
    return outputs;
  }
  LLMC_RETURN_IF_ERROR(scheduler_->CompleteStep(last_));
  const int64_t vocab = model_.runner->vocab_size();
  size_t row = 0, sampled = 0, pick = 0, scored = 0;
  for (const ScheduledChunk& c : last_.chunks) {
    if (c.score) {
      const InFlight::ScoreRows rows = step.scores[scored++];
      auto it = live_.find(c.id);
      if (it != live_.end()) {
        std::vector<SampleResult> logprobs;
        if (it->second->prompt_logprobs >= 0)
          PromptLogprobs(c, *it->second, rows.rows, result->logits + int64_t(row) * vocab,
                         rows.picked ? result->logprobs : nullptr,
                         rows.picked ? step.logprob_begin.data() + pick : nullptr, &logprobs);
        LLMC_RETURN_IF_ERROR(
            EmitScore(c, result->logits + int64_t(row) * vocab, std::move(logprobs), outputs));
      }
      row += size_t(rows.rows);
      if (rows.picked) pick += size_t(rows.rows);
      continue;
    }
    if (!c.sample) continue;
    const bool picked = step.picked[sampled++];
    // A request aborted while its step was in flight has no next token.
    if (live_.count(c.id) != 0)
      LLMC_RETURN_IF_ERROR(SampleNext(
          c.id, result->logits + int64_t(row) * vocab, picked ? result->tokens + pick : nullptr,
          picked ? result->logprobs + step.logprob_begin[pick] : nullptr, outputs));
    ++row;
    pick += picked;
  }
  if (options_.check_invariants) LLMC_RETURN_IF_ERROR(scheduler_->CheckInvariants());
  return outputs;
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.scheduler = scheduler_->stats();
  s.kv = kv_->stats();
  return s;
}

}  // namespace llmc
