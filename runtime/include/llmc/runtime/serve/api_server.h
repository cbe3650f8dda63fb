// The OpenAI-compatible API on an EngineLoop: routes each HTTP exchange to
// its endpoint.
//
//   POST /v1/completions, /v1/chat/completions   CompletionJob (streamed or whole)
//   GET  /v1/models                             the one served model
//   POST /tokenize, /detokenize                 the model's tokenizer
//   GET  /health                                200, or 503 while draining
//   GET  /metrics                               Prometheus text
//   GET  /                                      the chat page
//
// With an API key, every endpoint but /health and the static chat page
// (which holds nothing; it asks for the key and sends it) needs
// `Authorization: Bearer KEY`. Errors are OpenAI's JSON: {"error":
// {"message", "type", "param", "code"}}.
#ifndef LLMC_RUNTIME_SERVE_API_SERVER_H_
#define LLMC_RUNTIME_SERVE_API_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "llmc/runtime/engine/engine_loop.h"
#include "llmc/runtime/serve/http_server.h"
#include "llmc/runtime/serve/openai_request.h"
#include "llmc/runtime/serve/server_metrics.h"
#include "llmc/runtime/tokenizer/chat_template.h"

namespace llmc::serve {

struct ApiServerOptions {
  std::string model_name;
  std::string api_key;  // empty: no authentication
  // Requests (choices) waiting to run beyond which new ones get 429.
  int64_t max_queue = 1024;
  // The model's chat template, or why there is none (chat requests then get
  // 400 with that message).
  absl::StatusOr<ChatTemplate> chat_template = absl::NotFoundError("no chat template");
};

class ApiServer {
 public:
  ApiServer(EngineLoop& loop, ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // The HttpServer's handler.
  void Handle(std::shared_ptr<HttpExchange> exchange);

  // Completions in flight (from admission to their last byte queued).
  int64_t in_flight() const { return in_flight_->load(); }
  // From now on completions get 503 and /health says 503: the server drains.
  void StopAdmitting() { draining_ = true; }
  // For /metrics' connection gauge.
  void SetConnectionCounter(std::function<int64_t()> fn) { connections_ = std::move(fn); }
  ServerMetrics& metrics() { return metrics_; }

 private:
  void Completion(const std::shared_ptr<HttpExchange>& ex, bool chat);
  void Tokenize(const std::shared_ptr<HttpExchange>& ex);
  void Detokenize(const std::shared_ptr<HttpExchange>& ex);
  void Models(const std::shared_ptr<HttpExchange>& ex);
  void Metrics(const std::shared_ptr<HttpExchange>& ex);
  bool Authorized(const HttpRequest& req) const;
  // Every answer goes through these two, which count it for /metrics.
  void Reply(const std::shared_ptr<HttpExchange>& ex, HttpResponse response);
  void Fail(const std::shared_ptr<HttpExchange>& ex, const ApiError& error,
            HttpHeaders headers = {});
  // True when `model` is empty or ours; otherwise answers 404 naming both.
  bool CheckModel(const std::shared_ptr<HttpExchange>& ex, const std::string& model);

  EngineLoop& loop_;
  ApiServerOptions options_;
  ServerMetrics metrics_;
  std::shared_ptr<std::atomic<int64_t>> in_flight_;
  std::atomic<bool> draining_{false};
  std::function<int64_t()> connections_;
  const int64_t created_;
};

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_API_SERVER_H_
