#include "llmc/runtime/serve/api_server.h"

#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "llmc/runtime/serve/api_json.h"
#include "llmc/runtime/serve/chat_page.h"
#include "llmc/runtime/serve/completion_job.h"
#include "llmc/runtime/serve/openai_request.h"

namespace llmc::serve {
namespace {

using json = nlohmann::ordered_json;

HttpResponse JsonResponse(const json& j) {
  HttpResponse r;
  r.body = Dump(j);
  return r;
}

// Compares without an early exit, so the time taken does not tell how much
// of a guessed key was right.
bool SameKey(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

}  // namespace

ApiServer::ApiServer(EngineLoop& loop, ApiServerOptions options)
    : loop_(loop),
      options_(std::move(options)),
      metrics_(options_.model_name),
      in_flight_(std::make_shared<std::atomic<int64_t>>(0)),
      created_(int64_t(std::time(nullptr))) {}

ApiServer::~ApiServer() = default;

bool ApiServer::Authorized(const HttpRequest& req) const {
  if (options_.api_key.empty()) return true;
  std::string_view auth = req.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() < kBearer.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(auth.data(), kBearer.size()),
                              absl::string_view(kBearer.data(), kBearer.size())))
    return false;
  auth.remove_prefix(kBearer.size());
  return SameKey(auth, options_.api_key);
}

void ApiServer::Reply(const std::shared_ptr<HttpExchange>& ex, HttpResponse response) {
  metrics_.CountHttpResponse(response.status);
  ex->Respond(std::move(response));
}

void ApiServer::Fail(const std::shared_ptr<HttpExchange>& ex, const ApiError& error,
                     HttpHeaders headers) {
  HttpResponse r = ErrorResponse(error);
  r.headers = std::move(headers);
  Reply(ex, std::move(r));
}

bool ApiServer::CheckModel(const std::shared_ptr<HttpExchange>& ex, const std::string& model) {
  if (model.empty() || model == options_.model_name) return true;
  Fail(ex, {404,
            absl::StrFormat("The model `%s` does not exist; this server serves `%s`.", model,
                            options_.model_name),
            "NotFoundError", "model"});
  return false;
}

void ApiServer::Handle(std::shared_ptr<HttpExchange> ex) {
  const HttpRequest& req = ex->request();
  auto reply = [&](HttpResponse r) { Reply(ex, std::move(r)); };
  auto error = [&](int status, std::string message, std::string type = "invalid_request_error") {
    Fail(ex, {status, std::move(message), std::move(type), ""});
  };
  const std::string& path = req.path;
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  if (path == "/health") {
    if (draining_) return error(503, "the server is shutting down", "service_unavailable");
    return reply(JsonResponse({{"status", "ok"}}));
  }
  if (path == "/" && get) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = ChatPageHtml();
    return reply(std::move(r));
  }
  if (!Authorized(req)) {
    HttpResponse r = ErrorResponse(
        {401, "a valid API key is required: send it as 'Authorization: Bearer KEY'",
         "authentication_error", ""});
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return reply(std::move(r));
  }
  struct Route {
    const char* path;
    bool post;
    void (ApiServer::*fn)(const std::shared_ptr<HttpExchange>&);
  };
  static const Route kRoutes[] = {
      {"/v1/models", false, &ApiServer::Models},
      {"/metrics", false, &ApiServer::Metrics},
      {"/tokenize", true, &ApiServer::Tokenize},
      {"/detokenize", true, &ApiServer::Detokenize},
  };
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return error(405, absl::StrFormat("%s takes POST, not %s", path, req.method));
    return Completion(ex, path == "/v1/chat/completions");
  }
  for (const Route& r : kRoutes) {
    if (path != r.path) continue;
    if (r.post ? !post : !get)
      return error(405, absl::StrFormat("%s takes %s, not %s", path, r.post ? "POST" : "GET",
                                        req.method));
    return (this->*r.fn)(ex);
  }
  error(404, absl::StrFormat("no such endpoint: %s %s", req.method, path), "NotFoundError");
}

void ApiServer::Completion(const std::shared_ptr<HttpExchange>& ex, bool chat) {
  const auto arrival = CompletionJob::Clock::now();
  auto reject = [&](const ApiError& e, HttpHeaders headers = {}) { Fail(ex, e, std::move(headers)); };
  if (draining_) return reject({503, "the server is shutting down", "service_unavailable", ""});
  auto parsed = ParseCompletionRequest(ex->request().body, chat);
  if (auto* e = std::get_if<ApiError>(&parsed)) return reject(*e);
  CompletionRequest& req = std::get<CompletionRequest>(parsed);
  if (!CheckModel(ex, req.model)) return;

  const Tokenizer& tok = loop_.tokenizer();
  std::vector<std::vector<int32_t>> prompts;
  if (chat) {
    if (!options_.chat_template.ok())
      return reject({400, std::string(options_.chat_template.status().message()),
                     "invalid_request_error", "messages"});
    const ChatTemplate& tmpl = *options_.chat_template;
    const std::string text =
        ApplyChatTemplate(tmpl, req.messages, req.add_generation_prompt, req.enable_thinking);
    // As `llmc run --chat`: the template may have written BOS already.
    prompts.push_back(tok.Encode(text, tmpl.bos_token.empty(), /*parse_special=*/true));
  } else {
    for (size_t i = 0; i < req.prompts.size(); ++i) {
      if (auto* text = std::get_if<std::string>(&req.prompts[i])) {
        // As `llmc run -p`: BOS when the tokenizer adds one, specials as text.
        prompts.push_back(tok.Encode(*text, /*add_bos=*/true, /*parse_special=*/false));
      } else {
        std::vector<int32_t>& ids = std::get<std::vector<int32_t>>(req.prompts[i]);
        for (size_t k = 0; k < ids.size(); ++k)
          if (ids[k] >= tok.vocab_size())
            return reject({400,
                           absl::StrFormat("prompt token %d is not in the vocabulary (%d tokens)",
                                           ids[k], tok.vocab_size()),
                           "invalid_request_error", absl::StrFormat("prompt[%d]", k)});
        prompts.push_back(std::move(ids));
      }
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    // Checked here, not by the engine, to say it the API's way.
    const int64_t len = int64_t(prompts[i].size());
    const int64_t max_len = loop_.max_model_len();
    if (len == 0)
      return reject({400, "the prompt is empty (and the tokenizer adds no BOS)",
                     "invalid_request_error", chat ? "messages" : "prompt"});
    if (len >= max_len || (req.max_tokens_given && len + req.params.max_tokens > max_len))
      return reject(
          {400,
           absl::StrFormat("this model's maximum context length is %d tokens; the request has "
                           "%d prompt tokens%s",
                           max_len, len,
                           req.max_tokens_given
                               ? absl::StrFormat(" and asks for %d more", req.params.max_tokens)
                               : ""),
           "invalid_request_error", req.max_tokens_given ? "max_tokens" : (chat ? "messages" : "prompt")});
  }
  const int64_t choices = int64_t(prompts.size()) * req.n;
  if (loop_.num_waiting() + choices > options_.max_queue)
    return reject({429,
                   absl::StrFormat("the server is at capacity: %d requests are waiting (at most "
                                   "%d); retry later",
                                   loop_.num_waiting(), options_.max_queue),
                   "rate_limit_exceeded", ""},
                  {{"Retry-After", "1"}});
  ++*in_flight_;
  JobContext ctx{&loop_, &metrics_, &tok, options_.model_name, in_flight_};
  CompletionJob::Start(std::move(ctx), ex, std::move(req), std::move(prompts), arrival);
}

void ApiServer::Tokenize(const std::shared_ptr<HttpExchange>& ex) {
  auto parsed = ParseTokenizeRequest(ex->request().body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Fail(ex, *e);
  TokenizeRequest& req = std::get<TokenizeRequest>(parsed);
  if (!CheckModel(ex, req.model)) return;
  const Tokenizer& tok = loop_.tokenizer();
  std::vector<int32_t> ids;
  if (req.prompt) {
    ids = tok.Encode(*req.prompt, req.add_special_tokens, /*parse_special=*/false);
  } else {
    if (!options_.chat_template.ok())
      return Fail(ex, {400, std::string(options_.chat_template.status().message()),
                       "invalid_request_error", "messages"});
    const ChatTemplate& tmpl = *options_.chat_template;
    ids = tok.Encode(
        ApplyChatTemplate(tmpl, req.messages, req.add_generation_prompt, req.enable_thinking),
        tmpl.bos_token.empty(), /*parse_special=*/true);
  }
  Reply(ex, JsonResponse(
                {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", loop_.max_model_len()}}));
}

void ApiServer::Detokenize(const std::shared_ptr<HttpExchange>& ex) {
  auto parsed = ParseDetokenizeRequest(ex->request().body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return Fail(ex, *e);
  DetokenizeRequest& req = std::get<DetokenizeRequest>(parsed);
  if (!CheckModel(ex, req.model)) return;
  const Tokenizer& tok = loop_.tokenizer();
  for (size_t i = 0; i < req.tokens.size(); ++i)
    if (req.tokens[i] >= tok.vocab_size())
      return Fail(ex, {400,
                       absl::StrFormat("token %d is not in the vocabulary (%d tokens)",
                                       req.tokens[i], tok.vocab_size()),
                       "invalid_request_error", absl::StrFormat("tokens[%d]", i)});
  Reply(ex, JsonResponse({{"prompt", tok.Decode(req.tokens)}}));
}

void ApiServer::Models(const std::shared_ptr<HttpExchange>& ex) {
  json model = {{"id", options_.model_name},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "llmc"},
                {"max_model_len", loop_.max_model_len()}};
  Reply(ex, JsonResponse({{"object", "list"}, {"data", json::array({model})}}));
}

void ApiServer::Metrics(const std::shared_ptr<HttpExchange>& ex) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.Render(loop_.stats(), loop_.num_waiting(), connections_ ? connections_() : 0);
  Reply(ex, std::move(r));
}

}  // namespace llmc::serve
