#include "llmc/runtime/engine/scheduler.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {

Scheduler::Scheduler(const SchedulerConfig& config, KVCacheManager& kv)
    : config_(config), kv_(kv) {}

int64_t Scheduler::BlocksFor(int64_t tokens) const {
  const int64_t bs = kv_.pool().block_size();
  return (tokens + bs - 1) / bs;
}

absl::Status Scheduler::AddRequest(RequestId id, std::vector<int32_t> prompt,
                                   int32_t max_new_tokens, bool feedable) {
  if (requests_.count(id) != 0)
    return absl::InvalidArgumentError(absl::StrFormat("request %d: the id is in use", id));
  if (prompt.empty())
    return absl::InvalidArgumentError(absl::StrFormat("request %d: the prompt has no tokens", id));
  const int64_t prompt_len = int64_t(prompt.size());
  if (prompt_len >= config_.max_model_len)
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: the prompt has %d tokens but the context holds %d (one is needed for the "
        "output)",
        id, prompt_len, config_.max_model_len));
  // The K/V a whole run stores: every token but the last sampled one.
  // max_tokens -1 runs to the end of the context.
  const int64_t total = max_new_tokens < 0 ? config_.max_model_len : prompt_len + max_new_tokens;
  const int64_t blocks = BlocksFor(std::max<int64_t>(total - 1, prompt_len));
  const int64_t bs = kv_.pool().block_size();
  if (blocks > kv_.pool().num_blocks())
    return absl::ResourceExhaustedError(absl::StrFormat(
        "request %d: a %d-token prompt with up to %d tokens of output needs %d KV-cache blocks of "
        "%d tokens, and the whole cache has %d (%d tokens); lower max_tokens or raise "
        "--kv-cache-size",
        id, prompt_len, total - prompt_len, blocks, bs, kv_.pool().num_blocks(),
        int64_t(kv_.pool().num_blocks()) * bs));
  if (total > config_.max_model_len)
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: a %d-token prompt with up to %d tokens of output exceeds the context of %d "
        "tokens; lower max_tokens",
        id, prompt_len, total - prompt_len, config_.max_model_len));
  Request r;
  r.tokens = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.feedable = feedable;
  return Queue(id, std::move(r));
}

absl::Status Scheduler::AddScoreRequest(RequestId id, std::vector<int32_t> tokens,
                                        int32_t decode_from) {
  if (requests_.count(id) != 0)
    return absl::InvalidArgumentError(absl::StrFormat("request %d: the id is in use", id));
  if (tokens.empty())
    return absl::InvalidArgumentError(absl::StrFormat("request %d: no tokens to score", id));
  const int64_t n = int64_t(tokens.size());
  if (n > config_.max_model_len)
    return absl::InvalidArgumentError(absl::StrFormat(
        "request %d: %d tokens to score do not fit the context of %d", id, n,
        config_.max_model_len));
  if (BlocksFor(n) > kv_.pool().num_blocks())
    return absl::ResourceExhaustedError(absl::StrFormat(
        "request %d: %d tokens to score need %d KV-cache blocks of %d tokens, and the whole "
        "cache has %d; raise --kv-cache-size",
        id, n, BlocksFor(n), kv_.pool().block_size(), kv_.pool().num_blocks()));
  if (decode_from < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("request %d: decode_from %d is negative", id, decode_from));
  Request r;
  r.tokens = std::move(tokens);
  r.score = true;
  r.decode_from = decode_from;
  return Queue(id, std::move(r));
}

absl::Status Scheduler::Queue(RequestId id, Request r) {
  r.num_prompt_tokens = int32_t(r.tokens.size());
  prompt_tokens_ += r.num_prompt_tokens;
  requests_.emplace(id, std::move(r));
  waiting_.push_back(id);
  return absl::OkStatus();
}

void Scheduler::Preempt(RequestId id, SchedulerOutput& out) {
  Request& r = requests_.at(id);
  (void)kv_.Free(id);  // the sequence exists: every running request has one
  r.num_computed_tokens = 0;
  r.scheduled_end = 0;
  r.state = State::kWaiting;
  ++r.num_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  waiting_.push_front(id);
  out.preempted.push_back(id);
  ++num_preemptions_;
}

int32_t Scheduler::ChunkTokens(const Request& r, int32_t computed, const Budget& budget) const {
  int32_t n = int32_t(r.tokens.size()) - computed;
  const int32_t threshold = config_.long_prefill_token_threshold;
  if (threshold > 0) n = std::min(n, threshold);
  if (r.score) {
    if (r.decode_from > 0) n = computed >= r.decode_from ? 1 : std::min(n, r.decode_from - computed);
    n = std::min(n, budget.rows - KeptRows(budget));
  }
  return std::min(n, budget.tokens);
}

int32_t Scheduler::KeptRows(const Budget& budget) const {
  int32_t kept = 0;
  for (RequestId id : running_) {
    const Request& r = requests_.at(id);
    kept += !r.score && (r.steps_in_flight == 0 || Feeds(r)) &&
            (!budget.prompts_only || r.has_prompt_work());
  }
  return kept;
}

bool Scheduler::Feeds(const Request& r) const {
  const int32_t known = int32_t(r.tokens.size());
  // After the token in flight the request needs one more: its output and
  // the context allow it (else it ends at that token).
  return config_.async_scheduling && r.feedable && r.steps_in_flight == 1 &&
         r.scheduled_end == known && known + 2 <= config_.max_model_len &&
         (r.max_new_tokens < 0 || known + 2 - r.num_prompt_tokens <= r.max_new_tokens);
}

absl::Status Scheduler::ScheduleFed(RequestId id, Request& r, Budget& budget,
                                    SchedulerOutput& out) {
  if (budget.tokens < 1 || budget.rows < 1) return absl::OkStatus();
  const int32_t unknown = KVCacheManager::kUnknownToken;
  absl::Status st = kv_.AppendTokens(id, absl::MakeConstSpan(&unknown, 1));
  // No free block: it waits for its step rather than preempt for a token
  // that may never be needed.
  if (absl::IsResourceExhausted(st)) return absl::OkStatus();
  LLMC_RETURN_IF_ERROR(st);
  ++r.steps_in_flight;
  ScheduledChunk c{id, r.scheduled_end, 1, true, false};
  c.fed = true;
  ++r.scheduled_end;
  AddChunk(c, budget, out);
  return absl::OkStatus();
}

void Scheduler::AddChunk(const ScheduledChunk& c, Budget& budget, SchedulerOutput& out) {
  out.chunks.push_back(c);
  out.num_tokens += c.num_tokens;
  budget.tokens -= c.num_tokens;
  budget.rows -= c.score ? c.num_tokens : int32_t(c.sample);
}

absl::StatusOr<bool> Scheduler::ScheduleRunning(RequestId id, Budget& budget,
                                                SchedulerOutput& out) {
  Request& r = requests_.at(id);
  // A step in flight computes its next tokens (or samples the one it needs;
  // then, scheduling asynchronously, this step may go on from it).
  if (r.steps_in_flight > 0) {
    // A fed chunk decodes: never in a prefill-first step of prompts.
    if (Feeds(r) && !budget.prompts_only) LLMC_RETURN_IF_ERROR(ScheduleFed(id, r, budget, out));
    return true;
  }
  const int32_t known = int32_t(r.tokens.size());
  const int32_t n = ChunkTokens(r, r.num_computed_tokens, budget);
  if (n <= 0) return true;
  const bool sample = !r.score && r.num_computed_tokens + n == known;
  if (sample && budget.rows < 1) return true;  // max_seqs above the rows: wait for one
  absl::Span<const int32_t> chunk = absl::MakeConstSpan(r.tokens).subspan(r.num_computed_tokens, n);
  for (;;) {
    absl::Status st = kv_.AppendTokens(id, chunk);
    if (st.ok()) break;
    if (!absl::IsResourceExhausted(st)) return st;
    // Out of blocks: recompute the newest request later rather than fail;
    // never one whose step is in flight (it writes those blocks). `id`
    // itself is not in flight, so there is always one.
    auto victim = std::find_if(running_.rbegin(), running_.rend(),
                               [&](RequestId v) { return requests_.at(v).steps_in_flight == 0; });
    const RequestId preempted = *victim;
    Preempt(preempted, out);
    if (preempted == id) return false;
  }
  ++r.steps_in_flight;
  r.scheduled_end = r.num_computed_tokens + n;
  AddChunk({id, r.num_computed_tokens, n, sample, r.score}, budget, out);
  return true;
}

absl::StatusOr<bool> Scheduler::TryAdmit(RequestId id, Budget& budget, SchedulerOutput& out) {
  Request& r = requests_.at(id);
  LLMC_RETURN_IF_ERROR(kv_.AddRequest(id));
  const absl::Span<const int32_t> tokens = r.tokens;
  // The hit may include blocks that this very step writes (another
  // request's prompt chunk, registered when scheduled): every layer of @step
  // writes the whole step's K/V before its attention reads any, so they are
  // there when this request reads them. A score request takes none: it
  // needs every position's logits.
  const ComputedBlocks hit = r.score ? ComputedBlocks{} : kv_.GetComputedBlocks(tokens);
  const int32_t known = int32_t(tokens.size());
  const int32_t n = ChunkTokens(r, hit.num_computed_tokens, budget);
  absl::Status st = n > 0 ? kv_.AllocateSlots(id, n, hit)
                          : absl::ResourceExhaustedError("no room in this step");
  if (st.ok()) st = kv_.AppendTokens(id, tokens.subspan(hit.num_computed_tokens, n));
  if (!st.ok()) {
    LLMC_RETURN_IF_ERROR(kv_.Free(id));
    if (absl::IsResourceExhausted(st)) return false;
    return st;
  }
  r.num_computed_tokens = hit.num_computed_tokens;
  r.num_cached_prompt_tokens = std::min(hit.num_computed_tokens, r.num_prompt_tokens);
  r.state = State::kRunning;
  ++r.steps_in_flight;
  r.scheduled_end = hit.num_computed_tokens + n;
  running_.push_back(id);
  out.num_prefix_hit_tokens += hit.num_computed_tokens;
  prefix_hit_tokens_ += hit.num_computed_tokens;
  AddChunk({id, hit.num_computed_tokens, n, !r.score && hit.num_computed_tokens + n == known,
            r.score},
           budget, out);
  return true;
}

absl::Status Scheduler::AdmitWaiting(Budget& budget, SchedulerOutput& out) {
  // Each admitted request may take a row; a score request takes at least one.
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (budget.tokens <= 0 || budget.rows - KeptRows(budget) < 1 ||
        int32_t(running_.size()) >= config_.max_seqs)
      break;
    LLMC_ASSIGN_OR_RETURN(bool admitted, TryAdmit(*it, budget, out));
    if (!admitted) break;  // first come, first served: no overtaking
    it = waiting_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<SchedulerOutput> Scheduler::Schedule() {
  SchedulerOutput out;
  Budget budget;
  budget.tokens = config_.max_batch_tokens;
  budget.rows = config_.max_logits_rows > 0 ? config_.max_logits_rows : config_.max_batch_tokens;
  if (config_.prefill_first) {
    budget.prompts_only = true;
    // Prompts first: the part-computed ones, then admissions. The decodes
    // wait for a step with none of them.
    for (size_t i = 0; i < running_.size() && budget.tokens > 0; ++i) {
      if (!requests_.at(running_[i]).has_prompt_work()) continue;
      LLMC_ASSIGN_OR_RETURN(bool kept, ScheduleRunning(running_[i], budget, out));
      if (!kept) break;
    }
    if (out.preempted.empty()) LLMC_RETURN_IF_ERROR(AdmitWaiting(budget, out));
    // A prompt whose rest waits for its chunk in flight holds the decodes
    // too (scheduling asynchronously): none of them runs before it is in.
    const bool prompt_in_flight = std::any_of(running_.begin(), running_.end(), [&](RequestId id) {
      const Request& r = requests_.at(id);
      return r.steps_in_flight > 0 && r.scheduled_end < int32_t(r.tokens.size());
    });
    budget.prompts_only = !out.chunks.empty() || !out.preempted.empty() || prompt_in_flight;
  }
  if (!budget.prompts_only) {
    for (size_t i = 0; i < running_.size() && budget.tokens > 0; ++i) {
      LLMC_ASSIGN_OR_RETURN(bool kept, ScheduleRunning(running_[i], budget, out));
      if (!kept) break;  // it was the newest: nothing runs after it
    }
    // After a preemption the cache is full: admitting now would only
    // preempt again next step.
    if (out.preempted.empty()) LLMC_RETURN_IF_ERROR(AdmitWaiting(budget, out));
  }
  // Nothing running and the head of the queue does not fit an empty cache:
  // AddRequest refuses such requests, so this is a bug; say so rather than
  // spin.
  if (out.chunks.empty() && out.preempted.empty() && running_.empty() && !waiting_.empty())
    return absl::InternalError(absl::StrFormat(
        "scheduler: request %d cannot be scheduled although nothing else runs (%d of %d KV "
        "blocks free)",
        waiting_.front(), kv_.pool().num_free_blocks(), kv_.pool().num_blocks()));
  return out;
}

absl::Status Scheduler::CompleteStep(const SchedulerOutput& out) {
  // A request finished (aborted) while its step was in flight is gone: its
  // chunk is dropped. One still here must be where the step left it.
  for (const ScheduledChunk& c : out.chunks) {
    auto it = requests_.find(c.id);
    if (it != requests_.end() && (it->second.state != State::kRunning ||
                                  it->second.steps_in_flight == 0 ||
                                  it->second.num_computed_tokens != c.first_position))
      return absl::FailedPreconditionError(absl::StrFormat(
          "scheduler: the step's chunk of request %d no longer matches it (preempted or "
          "completed twice?)",
          c.id));
  }
  for (const ScheduledChunk& c : out.chunks) {
    auto it = requests_.find(c.id);
    if (it == requests_.end()) continue;
    Request& r = it->second;
    --r.steps_in_flight;
    r.num_computed_tokens += c.num_tokens;
    computed_tokens_ += c.num_tokens;
    computed_prompt_tokens_ += std::max(
        0, std::min(c.first_position + c.num_tokens, r.num_prompt_tokens) - c.first_position);
  }
  ++num_steps_;
  return absl::OkStatus();
}

absl::Status Scheduler::AppendToken(RequestId id, int32_t token) {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return absl::NotFoundError(absl::StrFormat("scheduler: unknown request %d", id));
  Request& r = it->second;
  if (r.state != State::kRunning || r.num_computed_tokens != int32_t(r.tokens.size()))
    return absl::FailedPreconditionError(absl::StrFormat(
        "scheduler: request %d has tokens still to compute; a sampled token comes after all of "
        "them",
        id));
  r.tokens.push_back(token);
  // A fed chunk in flight computes it: its K/V slot waits for the id.
  if (r.scheduled_end >= int32_t(r.tokens.size()))
    return kv_.SetToken(id, int32_t(r.tokens.size()) - 1, token);
  return absl::OkStatus();
}

absl::Status Scheduler::Finish(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end())
    return absl::NotFoundError(absl::StrFormat("scheduler: unknown request %d", id));
  if (it->second.state == State::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
    LLMC_RETURN_IF_ERROR(kv_.Free(id));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  requests_.erase(it);
  return absl::OkStatus();
}

const Scheduler::Request* Scheduler::Find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

absl::Span<const int32_t> Scheduler::tokens(RequestId id) const {
  const Request* r = Find(id);
  return r ? absl::MakeConstSpan(r->tokens) : absl::Span<const int32_t>();
}
int32_t Scheduler::num_prompt_tokens(RequestId id) const {
  const Request* r = Find(id);
  return r ? r->num_prompt_tokens : 0;
}
int32_t Scheduler::num_computed_tokens(RequestId id) const {
  const Request* r = Find(id);
  return r ? r->num_computed_tokens : 0;
}
int32_t Scheduler::num_preemptions(RequestId id) const {
  const Request* r = Find(id);
  return r ? r->num_preemptions : 0;
}
int32_t Scheduler::num_cached_prompt_tokens(RequestId id) const {
  const Request* r = Find(id);
  return r ? r->num_cached_prompt_tokens : 0;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = int32_t(running_.size());
  s.num_waiting = int32_t(waiting_.size());
  s.num_preemptions = num_preemptions_;
  s.num_steps = num_steps_;
  s.computed_tokens = computed_tokens_;
  s.computed_prompt_tokens = computed_prompt_tokens_;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  s.prompt_tokens = prompt_tokens_;
  return s;
}

absl::Status Scheduler::CheckInvariants() const {
  auto fail = [](std::string message) { return absl::InternalError(std::move(message)); };
  if (int32_t(running_.size()) > config_.max_seqs)
    return fail(absl::StrFormat("scheduler: %d running requests, the cap is %d", running_.size(),
                                config_.max_seqs));
  if (running_.size() + waiting_.size() != requests_.size())
    return fail(absl::StrFormat("scheduler: %d running + %d waiting, %d known", running_.size(),
                                waiting_.size(), requests_.size()));
  std::unordered_set<RequestId> seen;
  for (RequestId id : running_) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.state != State::kRunning || !seen.insert(id).second)
      return fail(
          absl::StrFormat("scheduler: running request %d is unknown, waiting or listed twice", id));
    auto held = kv_.num_tokens(id);
    if (!held.ok())
      return fail(absl::StrFormat("scheduler: running request %d holds no KV sequence", id));
    const Request& r = it->second;
    if (*held < r.num_computed_tokens ||
        *held > std::max(int32_t(r.tokens.size()), r.scheduled_end))
      return fail(
          absl::StrFormat("scheduler: request %d has %d computed of %d tokens, its KV sequence %d",
                          id, r.num_computed_tokens, r.tokens.size(), *held));
  }
  for (RequestId id : waiting_) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.state != State::kWaiting || !seen.insert(id).second)
      return fail(
          absl::StrFormat("scheduler: waiting request %d is unknown, running or listed twice", id));
    if (kv_.contains(id) || it->second.num_computed_tokens != 0)
      return fail(absl::StrFormat("scheduler: waiting request %d holds KV-cache blocks", id));
    if (it->second.steps_in_flight != 0)
      return fail(absl::StrFormat("scheduler: waiting request %d is in a step in flight", id));
  }
  if (kv_.num_requests() != int32_t(running_.size()))
    return fail(absl::StrFormat("scheduler: the KV cache has %d sequences for %d running requests",
                                kv_.num_requests(), running_.size()));
  LLMC_RETURN_IF_ERROR(kv_.CheckInvariants());
  return kv_.pool().CheckInvariants();
}

}  // namespace llmc
