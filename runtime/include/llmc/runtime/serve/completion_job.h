// One /v1/completions or /v1/chat/completions request in flight: its choices
// (prompts x n) submitted to the EngineLoop, their outputs turned into
// OpenAI's JSON, streamed as Server-Sent Events or answered whole.
//
// The engine thread only wakes the job (one post to the connection's strand
// however many outputs arrived); the job reads its streams and writes on the
// strand. A client that goes away aborts every unfinished choice, which
// frees their KV blocks in the engine's next step. An error before anything
// was sent is the HTTP answer (400 for a prompt the cache can never hold);
// after the stream began it is an `error` event, and the stream still ends
// with `data: [DONE]`.
#ifndef LLMC_RUNTIME_SERVE_COMPLETION_JOB_H_
#define LLMC_RUNTIME_SERVE_COMPLETION_JOB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llmc/runtime/engine/engine_loop.h"
#include "llmc/runtime/serve/http_server.h"
#include "llmc/runtime/serve/openai_request.h"
#include "llmc/runtime/serve/server_metrics.h"

namespace llmc::serve {

struct JobContext {
  EngineLoop* loop = nullptr;
  ServerMetrics* metrics = nullptr;
  const Tokenizer* tokenizer = nullptr;  // token pieces of logprobs
  std::string model;
  // Decremented when the job's last byte is queued.
  std::shared_ptr<std::atomic<int64_t>> in_flight;
};

class CompletionJob : public std::enable_shared_from_this<CompletionJob> {
 public:
  using Clock = std::chrono::steady_clock;

  // Submits the choices of `request` (`prompts`: its prompts' token ids) and
  // answers `exchange` as they finish. The caller counted the job in
  // ctx.in_flight.
  static void Start(JobContext ctx, std::shared_ptr<HttpExchange> exchange,
                    CompletionRequest request, std::vector<std::vector<int32_t>> prompts,
                    Clock::time_point arrival);

 private:
  struct Choice {
    std::shared_ptr<OutputStream> stream;
    int index = 0;
    int prompt = 0;  // which of the request's prompts
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<SampleResult> logprobs;
    bool finished = false;
    bool role_sent = false;  // chat streams open each choice with its role
    std::string finish_reason;
    absl::Status status;
    RequestUsage usage;
    Clock::time_point last_token{};
    int text_offset = 0;  // completions logprobs: where the next piece starts
    SamplingParams params;  // its generation's (the request's, its own seed)
    // echo: the prompt's text (and, with logprobs, its tokens' logprobs from
    // the score request `score`) goes out first; the generation is
    // submitted after it (none for max_tokens 0). Its blocks stay in the
    // prefix cache, so the generation computes little of the prompt again.
    bool echo_pending = false;
    std::shared_ptr<OutputStream> score;
    // The choice whose `score` scores this choice's prompt: the first
    // choice of each prompt (itself), whose n - 1 siblings take its prompt
    // logprobs (the first `prompt_logprobs` entries of its `logprobs`)
    // rather than scoring the prompt again. -1: no score. With echo the
    // scored logprobs also lead `logprobs`.
    int score_owner = -1;
    // The scored prompt's logprobs, from its second token on (each with
    // the score's N best); siblings copy the owner's.
    std::vector<SampleResult> prompt_logprobs;
    // The owner's score ended without its logprobs (failed, or aborted):
    // how, for its siblings to end alike.
    std::optional<RequestOutput> score_end;
  };

  CompletionJob(JobContext ctx, std::shared_ptr<HttpExchange> exchange, CompletionRequest request,
                Clock::time_point arrival);
  void Submit();
  void Wake();    // any thread
  void Drain();   // strand
  void Cancel();  // strand: the client went away
  // Folds `out` into its choice; streaming, appends its SSE events to `events`.
  void Take(Choice& c, RequestOutput& out, std::string& events);
  // An error output before anything went out is the whole answer: true
  // when `out` was that (the job is cancelled then).
  bool AnswerError(Choice& c, const RequestOutput& out);
  // echo: reads c's score stream; once the prompt's logprobs are in (at
  // once without logprobs), its text goes out and its generation is
  // submitted, or the choice ends (max_tokens 0).
  void Echo(Choice& c, std::string& events);
  // The prompt's text as the request gave it (a text prompt), else decoded.
  std::string PromptText(int prompt) const;
  // One SSE event of choice `c`: `text` and the logprobs from
  // `first_logprob` on (advancing c.text_offset).
  std::string Chunk(Choice& c, const std::string& text, size_t first_logprob,
                    const char* finish_reason);
  // The fields every answer starts with: id, object, created, model.
  nlohmann::ordered_json Envelope(bool chunk) const;
  nlohmann::ordered_json Usage() const;
  std::string UsageChunk() const;
  std::string Whole() const;
  // prompt_logprobs (vLLM's field) of choice `c`'s prompt.
  nlohmann::ordered_json PromptLogprobsJson(const Choice& c) const;
  void Finish();

  JobContext ctx_;
  std::shared_ptr<HttpExchange> ex_;
  CompletionRequest req_;
  Clock::time_point arrival_;
  std::string id_;
  int64_t created_ = 0;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<int32_t> prompt_tokens_;  // per prompt
  std::vector<Choice> choices_;
  std::atomic<bool> drain_posted_{false};
  bool stream_begun_ = false;
  bool cancelled_ = false;
  bool done_ = false;
  int unfinished_ = 0;
};

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_COMPLETION_JOB_H_
