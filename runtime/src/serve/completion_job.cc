#include "llmc/runtime/serve/completion_job.h"

#include <cmath>
#include <ctime>
#include <limits>
#include <random>

#include "absl/strings/str_format.h"
#include "llmc/runtime/serve/api_json.h"

namespace llmc::serve {
namespace {

using json = nlohmann::ordered_json;

const char* ApiFinishReason(FinishReason r) {
  switch (r) {
    case FinishReason::kEos:
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "stop";
}

std::string NewId(bool chat) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%s-%016x%04x", chat ? "chatcmpl" : "cmpl", rng(),
                         counter.fetch_add(1) & 0xffff);
}

json Bytes(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(int(c));
  return b;
}

std::string Event(const json& j) { return "data: " + Dump(j) + "\n\n"; }

}  // namespace

void CompletionJob::Start(JobContext ctx, std::shared_ptr<HttpExchange> exchange,
                          CompletionRequest request, std::vector<std::vector<int32_t>> prompts,
                          Clock::time_point arrival) {
  std::shared_ptr<CompletionJob> job(
      new CompletionJob(std::move(ctx), std::move(exchange), std::move(request), arrival));
  // Before submitting: a client already gone must still abort the choices.
  job->ex_->OnCancel([job] { job->Cancel(); });
  job->prompts_ = std::move(prompts);
  job->Submit();
}

CompletionJob::CompletionJob(JobContext ctx, std::shared_ptr<HttpExchange> exchange,
                             CompletionRequest request, Clock::time_point arrival)
    : ctx_(std::move(ctx)),
      ex_(std::move(exchange)),
      req_(std::move(request)),
      arrival_(arrival),
      id_(NewId(req_.chat)),
      created_(int64_t(std::time(nullptr))) {}

void CompletionJob::Submit() {
  std::random_device seeder;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    prompt_tokens_.push_back(int32_t(prompts_[p].size()));
    for (int k = 0; k < req_.n; ++k) {
      Choice c;
      c.index = int(choices_.size());
      c.prompt = int(p);
      choices_.push_back(std::move(c));
    }
  }
  unfinished_ = int(choices_.size());
  // Streams are submitted after choices_ is complete: a wake-up may run
  // Drain before Submit returns.
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (Choice& c : choices_) {
    c.params = req_.params;
    // n samples of one seeded request differ, and repeat (vLLM: seed + index).
    if (req_.seed_given) {
      c.params.seed += uint64_t(c.index);
    } else {
      c.params.seed = (uint64_t(seeder()) << 32) ^ seeder();
    }
  }
  // The prompt's logprobs (echo's, prompt_logprobs'): scored before the
  // generation is submitted, whose prefix cache then holds the prompt.
  const bool echo_logprobs = req_.echo && req_.want_logprobs;
  const bool scored = echo_logprobs || req_.prompt_logprobs >= 0;
  for (Choice& c : choices_) {
    auto wake = [self = shared_from_this()] { self->Wake(); };
    if (!req_.echo && !scored) {
      c.stream = ctx_.loop->Submit(prompts_[size_t(c.prompt)], c.params, std::move(wake));
      continue;
    }
    c.echo_pending = true;
    if (!scored) continue;
    // One score request a prompt: the first of its n choices owns it.
    c.score_owner = c.index - c.index % req_.n;
    if (c.score_owner != c.index) continue;
    ScoreOptions score;
    score.prompt_logprobs = std::max(echo_logprobs ? req_.top_logprobs : 0, req_.prompt_logprobs);
    c.score = ctx_.loop->SubmitScore(prompts_[size_t(c.prompt)], score, std::move(wake));
  }
  // Echoes without a score request go out at once.
  if (req_.echo && !scored) Wake();
}

std::string CompletionJob::PromptText(int prompt) const {
  if (const auto* text = std::get_if<std::string>(&req_.prompts[size_t(prompt)])) return *text;
  return ctx_.tokenizer->Decode(prompts_[size_t(prompt)]);
}

bool CompletionJob::AnswerError(Choice& c, const RequestOutput& out) {
  if (!out.finished || out.reason != FinishReason::kError || stream_begun_ || cancelled_)
    return false;
  ApiError e = EngineError(out.status);
  if (choices_.size() > 1) e.message = absl::StrFormat("choice %d: %s", c.index, e.message);
  ctx_.metrics->CountHttpResponse(e.status);
  ex_->Respond(ErrorResponse(e));
  cancelled_ = true;  // nothing more is sent
  c.finished = true;
  c.finish_reason = "error";
  --unfinished_;
  Cancel();
  return true;
}

void CompletionJob::Echo(Choice& c, std::string& events) {
  if (c.score_owner >= 0 && c.score_owner != c.index) {
    // A sibling: its prompt's logprobs are the owner's, which Drain has
    // just read (it comes first).
    const Choice& owner = choices_[size_t(c.score_owner)];
    if (owner.echo_pending) return;
    if (owner.score_end) {
      RequestOutput ended = *owner.score_end;
      c.echo_pending = false;
      Take(c, ended, events);
      return;
    }
    c.prompt_logprobs = owner.prompt_logprobs;
  }
  while (c.score) {
    std::optional<RequestOutput> out = c.score->TryNext();
    if (!out) return;  // the prompt's logprobs are still coming
    const bool failed = out->finished && (out->reason == FinishReason::kError ||
                                          out->reason == FinishReason::kAbort);
    if (failed) {
      c.score_end = *out;  // its siblings end alike
      c.echo_pending = false;
      c.score.reset();
    }
    if (AnswerError(c, *out)) return;
    // Failed after the stream began, or aborted (the client went away, the
    // server is shutting down): the choice ends here, nothing generated.
    if (failed) {
      RequestOutput ended = std::move(*out);
      Take(c, ended, events);
      return;
    }
    for (SampleResult& r : out->prompt_logprobs) c.prompt_logprobs.push_back(std::move(r));
    if (out->finished) c.score.reset();
  }
  c.echo_pending = false;
  if (req_.echo && req_.want_logprobs) {
    // The first prompt token has no logprob (null); the score gave the rest.
    SampleResult first;
    first.token = prompts_[size_t(c.prompt)].front();
    first.logprob = std::numeric_limits<float>::quiet_NaN();
    c.logprobs.push_back(first);
    c.logprobs.insert(c.logprobs.end(), c.prompt_logprobs.begin(), c.prompt_logprobs.end());
  }
  if (cancelled_) {  // the client went away while its prompt was scored
    c.finished = true;
    --unfinished_;
    c.finish_reason = "abort";
    ctx_.metrics->CountFinished(c.finish_reason);
    return;
  }
  const std::string text = req_.echo ? PromptText(c.prompt) : std::string();
  c.text += text;
  const bool alone = req_.echo_only;
  if (alone) {
    c.finished = true;
    --unfinished_;
    c.finish_reason = "length";
    ctx_.metrics->CountFinished(c.finish_reason);
    ctx_.metrics->ObserveRequestLatency(
        std::chrono::duration<double>(Clock::now() - arrival_).count());
  } else {
    c.stream = ctx_.loop->Submit(prompts_[size_t(c.prompt)], c.params,
                                 [self = shared_from_this()] { self->Wake(); });
  }
  if (req_.echo && req_.stream && !cancelled_)
    events += Chunk(c, text, 0, alone ? "length" : nullptr);
}

void CompletionJob::Wake() {
  if (drain_posted_.exchange(true)) return;
  ex_->Post([self = shared_from_this()] { self->Drain(); });
}

void CompletionJob::Cancel() {
  cancelled_ = true;
  for (Choice& c : choices_) {
    if (c.finished) continue;
    if (c.stream) ctx_.loop->Abort(*c.stream);
    if (c.score) ctx_.loop->Abort(*c.score);
  }
}

void CompletionJob::Drain() {
  drain_posted_ = false;  // before reading: a later output posts again
  if (done_) return;
  std::string events;
  for (Choice& c : choices_) {
    if (c.finished) continue;
    if (c.echo_pending) Echo(c, events);
    if (c.finished || !c.stream) continue;  // stream unset: Submit still running, or echo
    while (!c.finished) {
      std::optional<RequestOutput> out = c.stream->TryNext();
      if (!out) break;
      // An error before anything went out is the whole answer.
      if (AnswerError(c, *out)) break;
      Take(c, *out, events);
    }
  }
  if (req_.stream && !cancelled_ && !events.empty()) {
    if (!stream_begun_) {
      ctx_.metrics->CountHttpResponse(200);
      ex_->BeginStream(200, "text/event-stream", {});
      stream_begun_ = true;
    }
    ex_->Write(std::move(events));
  }
  if (unfinished_ == 0) Finish();
}

void CompletionJob::Take(Choice& c, RequestOutput& out, std::string& events) {
  const Clock::time_point now = Clock::now();
  if (!out.tokens.empty()) {
    const double since = std::chrono::duration<double>(
                             now - (c.tokens.empty() ? arrival_ : c.last_token))
                             .count();
    if (c.tokens.empty()) {
      ctx_.metrics->ObserveTimeToFirstToken(since);
    } else {
      ctx_.metrics->ObserveInterTokenLatency(since);
    }
    c.last_token = now;
  }
  const size_t first_logprob = c.logprobs.size();
  c.tokens.insert(c.tokens.end(), out.tokens.begin(), out.tokens.end());
  c.text += out.text;
  for (SampleResult& r : out.logprobs) c.logprobs.push_back(std::move(r));
  c.usage = out.usage;
  const char* reason = nullptr;
  if (out.finished) {
    c.finished = true;
    --unfinished_;
    c.status = out.status;
    // A client gone first got no finish: the engine may have ended the
    // choice before the abort reached it, but the answer was cut all the
    // same.
    c.finish_reason = cancelled_ ? "abort" : ApiFinishReason(out.reason);
    reason = c.finish_reason.c_str();
    ctx_.metrics->CountFinished(c.finish_reason);
    ctx_.metrics->ObserveRequestLatency(std::chrono::duration<double>(now - arrival_).count());
  }
  if (!req_.stream || cancelled_) return;
  if (out.finished && out.reason == FinishReason::kError) {
    json err = ErrorJson(EngineError(out.status));
    err["error"]["message"] =
        absl::StrFormat("choice %d: %s", c.index, std::string(err["error"]["message"]));
    events += Event(err);
  }
  if (!out.text.empty() || c.logprobs.size() > first_logprob || reason ||
      (req_.chat && !c.role_sent))
    events += Chunk(c, out.text, first_logprob, reason);
  c.role_sent = true;
}

// The logprobs of c.logprobs[first..] in the endpoint's format.
static json LogprobsJson(const Tokenizer& tok, bool chat, const std::vector<SampleResult>& lps,
                         size_t first, int top_n, int* text_offset) {
  auto piece = [&](int32_t id) { return tok.TokenToPiece(id, /*render_special=*/true); };
  if (chat) {
    json content = json::array();
    for (size_t i = first; i < lps.size(); ++i) {
      const std::string p = piece(lps[i].token);
      json top = json::array();
      for (int k = 0; k < top_n && k < int(lps[i].top_logprobs.size()); ++k) {
        const std::string tp = piece(lps[i].top_logprobs[size_t(k)].token);
        top.push_back({{"token", tp}, {"logprob", lps[i].top_logprobs[size_t(k)].logprob}, {"bytes", Bytes(tp)}});
      }
      content.push_back({{"token", p}, {"logprob", lps[i].logprob}, {"bytes", Bytes(p)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (size_t i = first; i < lps.size(); ++i) {
    const std::string p = piece(lps[i].token);
    tokens.push_back(p);
    if (std::isnan(lps[i].logprob)) {  // an echoed prompt's first token
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      offsets.push_back(*text_offset);
      *text_offset += int(p.size());
      continue;
    }
    token_logprobs.push_back(lps[i].logprob);
    json top = json::object();
    top[p] = lps[i].logprob;
    for (int k = 0; k < top_n && k < int(lps[i].top_logprobs.size()); ++k)
      top[piece(lps[i].top_logprobs[size_t(k)].token)] = lps[i].top_logprobs[size_t(k)].logprob;
    top_logprobs.push_back(top);
    offsets.push_back(*text_offset);
    *text_offset += int(p.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

std::string CompletionJob::Chunk(Choice& c, const std::string& text, size_t first_logprob,
                                 const char* finish_reason) {
  json choice = {{"index", c.index}};
  if (req_.chat) {
    json delta = json::object();
    if (!c.role_sent) delta["role"] = "assistant";
    if (!text.empty() || !c.role_sent) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  if (req_.want_logprobs && c.logprobs.size() > first_logprob) {
    choice["logprobs"] = LogprobsJson(*ctx_.tokenizer, req_.chat, c.logprobs, first_logprob,
                                      req_.top_logprobs, &c.text_offset);
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = finish_reason ? json(finish_reason) : json(nullptr);
  json chunk = Envelope(/*chunk=*/true);
  chunk["choices"] = json::array({choice});
  if (req_.include_usage) chunk["usage"] = nullptr;
  return Event(chunk);
}

json CompletionJob::Envelope(bool chunk) const {
  const char* object = !req_.chat ? "text_completion"
                       : chunk    ? "chat.completion.chunk"
                                  : "chat.completion";
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", ctx_.model}};
}

// Prompts count once each (not per choice), as OpenAI and vLLM count them.
json CompletionJob::Usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (int32_t n : prompt_tokens_) prompt += n;
  for (const Choice& c : choices_) {
    completion += int64_t(c.tokens.size());
    cached += c.usage.cached_prompt_tokens;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string CompletionJob::UsageChunk() const {
  json chunk = Envelope(/*chunk=*/true);
  chunk["choices"] = json::array();
  chunk["usage"] = Usage();
  return Event(chunk);
}

std::string CompletionJob::Whole() const {
  json choices = json::array();
  for (const Choice& c : choices_) {
    json choice = {{"index", c.index}};
    if (req_.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    if (req_.want_logprobs) {
      int offset = 0;
      choice["logprobs"] = LogprobsJson(*ctx_.tokenizer, req_.chat, c.logprobs, 0,
                                        req_.top_logprobs, &offset);
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = c.finish_reason;
    if (req_.prompt_logprobs >= 0 && !req_.chat) choice["prompt_logprobs"] = PromptLogprobsJson(c);
    choices.push_back(choice);
  }
  json body = Envelope(/*chunk=*/false);
  body["choices"] = choices;
  // A chat has one prompt: vLLM gives its logprobs beside the choices.
  if (req_.prompt_logprobs >= 0 && req_.chat && !choices_.empty())
    body["prompt_logprobs"] = PromptLogprobsJson(choices_.front());
  body["usage"] = Usage();
  return Dump(body);
}

json CompletionJob::PromptLogprobsJson(const Choice& c) const {
  // vLLM's form: null for the first token, then per position the prompt
  // token and the N best, by id: {logprob, rank, decoded_token}. A rank is
  // the place among the N best (1 the best); a prompt token outside them
  // has none here (null): neither sampler counts the tokens above it.
  const Tokenizer& tok = *ctx_.tokenizer;
  auto entry = [&](int32_t id, float logprob, std::optional<int> rank) {
    return json{{"logprob", std::isnan(logprob) ? json(nullptr) : json(logprob)},
                {"rank", rank ? json(*rank) : json(nullptr)},
                {"decoded_token", tok.TokenToPiece(id, /*render_special=*/true)}};
  };
  json out = json::array({nullptr});
  const int n = req_.prompt_logprobs;
  for (const SampleResult& r : c.prompt_logprobs) {
    json position = json::object();
    std::optional<int> own_rank;
    for (int i = 0; i < n && i < int(r.top_logprobs.size()); ++i)
      if (r.top_logprobs[size_t(i)].token == r.token) own_rank = i + 1;
    position[std::to_string(r.token)] = entry(r.token, r.logprob, own_rank);
    for (int i = 0; i < n && i < int(r.top_logprobs.size()); ++i) {
      const TokenLogprob& t = r.top_logprobs[size_t(i)];
      if (t.token < 0) break;  // fewer tokens above -inf
      position[std::to_string(t.token)] = entry(t.token, t.logprob, i + 1);
    }
    out.push_back(std::move(position));
  }
  return out;
}

void CompletionJob::Finish() {
  done_ = true;
  if (!cancelled_) {
    if (req_.stream) {
      std::string tail;
      if (!stream_begun_) {
        ctx_.metrics->CountHttpResponse(200);
        ex_->BeginStream(200, "text/event-stream", {});
        stream_begun_ = true;
      }
      if (req_.include_usage) tail += UsageChunk();
      tail += "data: [DONE]\n\n";
      ex_->Write(std::move(tail));
      ex_->EndStream();
    } else {
      // A choice that failed fails the whole answer (nothing went out yet).
      const Choice* failed = nullptr;
      for (const Choice& c : choices_)
        if (c.finish_reason == "error" && !failed) failed = &c;
      HttpResponse r;
      if (failed) {
        r = ErrorResponse(EngineError(failed->status));
      } else {
        r.body = Whole();
      }
      ctx_.metrics->CountHttpResponse(r.status);
      ex_->Respond(std::move(r));
    }
  }
  // The streams hold wake-ups that hold this job: let go of them.
  for (Choice& c : choices_) c.stream.reset(), c.score.reset();
  --*ctx_.in_flight;
}

}  // namespace llmc::serve
