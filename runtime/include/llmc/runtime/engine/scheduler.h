// Which tokens of which requests the next @step computes: iteration-level
// (continuous) batching over the paged KV cache, in the role of vLLM v1's
// scheduler (vllm/v1/core/sched/scheduler.py).
//
// There are no prefill and decode phases. A request has `tokens` (its prompt,
// then every token sampled so far) and `num_computed_tokens`, how many of
// them have their K/V in the cache. Each step has a budget of
// `max_batch_tokens` tokens and `max_seqs` sequences. Schedule():
//
//   1. Running requests first, oldest first: each gets the rest of its
//      tokens (one, when decoding; a chunk of the prompt when a prefill was
//      cut), as far as the budget goes. When the cache has no block for a
//      running request, the newest running request is preempted (its
//      blocks freed, its computed count reset: it is recomputed later, its
//      sampled tokens kept) and put at the head of the waiting queue; a
//      request that is itself the newest preempts itself.
//   2. Then, unless something was preempted, admission from the waiting
//      queue in order while the budget, the sequence cap and the cache
//      allow: the cached prefix of its tokens is looked up (whole blocks,
//      prefix caching), the rest is computed, cut to what the budget leaves
//      (chunked prefill), so that a long prompt never delays the running
//      decodes by more than one budget's worth of tokens. The first request
//      that does not fit the cache stops admission (first come, first
//      served). Full blocks are registered for prefix caching when
//      scheduled, so a request admitted in the same step as the one
//      computing its prefix already reads it (every layer of @step writes
//      the step's K/V before its attention reads any): n requests with one
//      prompt, or many with one system prompt, compute it once.
//
// A request whose prompt plus output can never fit the cache, or the model's
// context, is refused by AddRequest with a clear error; every other request
// eventually runs to its end: a preempted one keeps its place ahead of the
// requests that came after it, and nothing is dropped for lack of blocks.
//
// The engine drives it: Schedule(), run the step, CompleteStep(), then for
// every chunk with `sample` set either AppendToken() (the request goes on)
// or Finish(). Abort is Finish at any time between steps. Not thread-safe:
// one engine thread owns it.
//
// A score request (AddScoreRequest) computes given tokens instead of
// extending them: perplexity, `llmc logits`, `llmc tune`'s prefill steps.
// Every token of its chunks gets a row of logits, which the step's row
// budget (max_logits_rows) bounds; it is never sampled and never takes a
// prefix-cache hit (each position's logits must be computed), and it ends
// once its last token is computed.
//
// Several steps may be in flight (a pipeline's stages each run one):
// Schedule() again before CompleteStep() leaves out the requests of the
// steps in flight, which are neither scheduled nor preempted until their
// step completes; new requests are still admitted. CompleteStep() takes the
// steps in the order they were scheduled, and drops the chunks of requests
// finished meanwhile.
//
// Asynchronous scheduling (SchedulerConfig::async_scheduling, vLLM's
// --async-scheduling): the engine schedules step N+1 while step N runs, so
// that the host's work for it overlaps the device's. A request that
// decodes in N and was added `feedable` is scheduled in N+1 too, on the
// token N samples, which the runner feeds from N's pick without the host
// knowing it (ScheduledChunk::fed; its KV-cache id is unknown until
// AppendToken). That is only when the request can go on after N's token
// (max_new_tokens and the context allow one more), and never at the cost
// of a preemption; a request that stops at N's token anyway (a stop
// string, EOS) has its N+1 chunk dropped by CompleteStep. With
// prefill_first, a prompt whose rest waits for its chunk in flight holds
// the decodes, fed ones too, so that requests added together still decode
// in lock step.
#ifndef LLMC_RUNTIME_ENGINE_SCHEDULER_H_
#define LLMC_RUNTIME_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "llmc/runtime/kv/kv_cache_manager.h"

namespace llmc {

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;  // tokens per step, all requests together
  int32_t max_seqs = 64;           // requests per step (and running at once)
  int32_t max_model_len = 0;       // most tokens (prompt + output) of one request
  // Most tokens of one request's prompt chunk per step (0: the budget's
  // rest), vLLM's long_prefill_token_threshold. A small one bounds what a
  // long prompt adds to the running decodes' step time without shrinking
  // the budget that many short prompts or many decodes share.
  int32_t long_prefill_token_threshold = 0;
  // Rows of logits one step returns (the runner's max_logits; 0: as many as
  // max_batch_tokens). A chunk that samples takes one, a score request's
  // chunk one per token; running requests that sample keep theirs first.
  int32_t max_logits_rows = 0;
  // Prefill first, vLLM v0's policy without chunked prefill: while a prompt
  // is part-computed or a waiting request can be admitted, a step runs only
  // prompt chunks and the running decodes wait. Off (the default, vLLM
  // v1's): decodes first, prompts in the budget they leave. `llmc bench`'s
  // tgN@bB decodes its B sequences in lock step with it.
  bool prefill_first = false;
  // Schedule feedable requests of the step in flight again, on their
  // next token unknown (see above). Only for a runner that feeds tokens.
  bool async_scheduling = false;
};

// The tokens of one request that a step computes: positions
// [first_position, first_position + num_tokens) of its tokens.
struct ScheduledChunk {
  RequestId id = 0;
  int32_t first_position = 0;
  int32_t num_tokens = 0;
  // The chunk ends at the request's last known token: the step's logits of
  // that token give the request's next token.
  bool sample = false;
  // A score request's chunk: every token gets its row of logits (in the
  // chunk's order), and nothing is sampled.
  bool score = false;
  // Asynchronous scheduling: the chunk's one token is the one the step in
  // flight samples for the request, not known yet; the runner feeds it
  // from that step's pick. `sample` is set.
  bool fed = false;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // running requests first, then admitted ones
  std::vector<RequestId> preempted;    // in the order they were preempted
  int32_t num_tokens = 0;              // sum of chunks' num_tokens
  int32_t num_prefix_hit_tokens = 0;   // tokens admitted requests found cached
  bool empty() const { return chunks.empty(); }
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  int64_t computed_tokens = 0;         // tokens run through the model, all steps
  int64_t computed_prompt_tokens = 0;  // of those, prompt positions (recomputes included)
  int64_t prefix_hit_tokens = 0;       // tokens admitted from the prefix cache
  int64_t prompt_tokens = 0;           // prompt tokens of added requests
};

class Scheduler {
 public:
  // `kv` must outlive the scheduler, which is its only user from now on.
  Scheduler(const SchedulerConfig& config, KVCacheManager& kv);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. `max_new_tokens` (-1: up to the context) bounds its
  // output: ResourceExhausted when its prompt plus output could never fit
  // the whole cache (it would wait forever, or preempt everything forever);
  // InvalidArgument when the id is taken, the prompt is empty, or prompt
  // plus output exceed max_model_len. A `feedable` request's tokens are
  // picked by the runner from its logits alone (no host sampling, no
  // penalty window): with async_scheduling it is scheduled on tokens still
  // unknown.
  absl::Status AddRequest(RequestId id, std::vector<int32_t> prompt, int32_t max_new_tokens,
                          bool feedable = false);
  // Queues a score request of `tokens` (at most max_model_len of them).
  // Positions from `decode_from` on (0: none) are computed one per step, as
  // decode steps would compute them.
  absl::Status AddScoreRequest(RequestId id, std::vector<int32_t> tokens, int32_t decode_from);

  absl::StatusOr<SchedulerOutput> Schedule();

  // The step of `out` ran: each chunk's tokens are computed now.
  absl::Status CompleteStep(const SchedulerOutput& out);
  // A token sampled for `id` after its last computed token; the next step
  // computes it (or the step in flight does: a fed chunk).
  absl::Status AppendToken(RequestId id, int32_t token);
  // Ends the request, running or waiting (finished or aborted): frees its
  // blocks and forgets it. NotFound for an unknown id.
  absl::Status Finish(RequestId id);

  bool contains(RequestId id) const { return requests_.count(id) != 0; }
  bool has_unfinished() const { return !requests_.empty(); }
  // Running requests, oldest admission first.
  const std::vector<RequestId>& running() const { return running_; }
  // Prompt and sampled tokens of `id`; empty for an unknown id. Valid until
  // the next non-const call.
  absl::Span<const int32_t> tokens(RequestId id) const;
  int32_t num_prompt_tokens(RequestId id) const;
  int32_t num_computed_tokens(RequestId id) const;
  // Times `id` was preempted.
  int32_t num_preemptions(RequestId id) const;
  // Prompt tokens `id` took from the prefix cache at its (last) admission.
  int32_t num_cached_prompt_tokens(RequestId id) const;
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  const KVCacheManager& kv() const { return kv_; }

  // Checks the scheduler's bookkeeping against the KV cache: every running
  // request holds a sequence covering its computed tokens, no waiting one
  // holds blocks, queues and the request table agree; then the cache's and
  // the pool's own invariants. For tests.
  absl::Status CheckInvariants() const;

 private:
  enum class State { kWaiting, kRunning };
  struct Request {
    std::vector<int32_t> tokens;
    int32_t num_prompt_tokens = 0;
    int32_t num_computed_tokens = 0;
    int32_t num_preemptions = 0;
    int32_t num_cached_prompt_tokens = 0;
    State state = State::kWaiting;
    // Steps not yet completed that compute its tokens: while any, it is
    // never preempted, nor scheduled again but on a fed chunk.
    int32_t steps_in_flight = 0;
    // Where its last scheduled chunk ends: past `tokens` while a fed chunk
    // computes the token its step before samples.
    int32_t scheduled_end = 0;
    bool score = false;       // AddScoreRequest
    int32_t decode_from = 0;  // a score request's first position run alone (0: none)
    int32_t max_new_tokens = -1;  // AddRequest's (-1: up to the context)
    bool feedable = false;        // AddRequest's
    // Tokens left to compute beyond the one a decode step computes: a
    // prompt (or a recompute) still in the works.
    bool has_prompt_work() const {
      return score || int32_t(tokens.size()) - num_computed_tokens > 1;
    }
  };
  // What a step has left as it is filled.
  struct Budget {
    int32_t tokens = 0;
    int32_t rows = 0;  // rows of logits
    // A prefill-first step that runs prompt chunks only (prefill_first).
    bool prompts_only = false;
  };
  // Rows kept for the running requests this step may still schedule that
  // sample (not in flight or fed, not scored; with prompts_only, those with
  // prompt work): score chunks take only the rows beyond them.
  int32_t KeptRows(const Budget& budget) const;
  // Whether `r`, in the one step in flight that samples its next token,
  // may be scheduled on that token now (async_scheduling).
  bool Feeds(const Request& r) const;
  // Schedules `r`'s fed chunk when the cache has a slot without preempting.
  absl::Status ScheduleFed(RequestId id, Request& r, Budget& budget, SchedulerOutput& out);

  // How many of `r`'s tokens from `computed` on a step takes: the budget
  // left, at most long_prefill_token_threshold, and for a score request the
  // free rows and its decode_from.
  int32_t ChunkTokens(const Request& r, int32_t computed, const Budget& budget) const;
  // Schedules the rest of running request `id` into `out`; may preempt
  // newer running requests (or `id` itself). Returns false when `id` was
  // preempted.
  absl::StatusOr<bool> ScheduleRunning(RequestId id, Budget& budget, SchedulerOutput& out);
  // Tries to admit `id`; false when it does not fit the cache now.
  absl::StatusOr<bool> TryAdmit(RequestId id, Budget& budget, SchedulerOutput& out);
  // Admits waiting requests in order while the budget, the sequence cap
  // and the cache allow.
  absl::Status AdmitWaiting(Budget& budget, SchedulerOutput& out);
  // Puts chunk `c` into `out` and takes its tokens and rows from `budget`.
  void AddChunk(const ScheduledChunk& c, Budget& budget, SchedulerOutput& out);
  // Queues request `r`, already checked, as `id`.
  absl::Status Queue(RequestId id, Request r);
  void Preempt(RequestId id, SchedulerOutput& out);
  // The request `id`, or nullptr.
  const Request* Find(RequestId id) const;
  int64_t BlocksFor(int64_t tokens) const;

  SchedulerConfig config_;
  KVCacheManager& kv_;
  std::unordered_map<RequestId, Request> requests_;
  std::vector<RequestId> running_;  // admission order, oldest first
  std::deque<RequestId> waiting_;
  int64_t num_preemptions_ = 0;
  int64_t num_steps_ = 0;
  int64_t computed_tokens_ = 0;
  int64_t computed_prompt_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t prompt_tokens_ = 0;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_ENGINE_SCHEDULER_H_
