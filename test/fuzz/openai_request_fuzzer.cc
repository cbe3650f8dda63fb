// libFuzzer target: the OpenAI request-body parsers (/v1/completions,
// /v1/chat/completions, /tokenize, /detokenize) on arbitrary bytes must
// return a request or an ApiError, never crash, throw, hang or leak. A
// request they return is one the engine takes (valid sampling params, 1..16
// choices, a prompt or messages, token ids >= 0); an error is a 400 with a
// message, and its JSON answer (ErrorResponse, as the server sends it) is
// valid JSON even when the message quotes invalid UTF-8 from the body.
//
// Seeds: test/fuzz/corpus/openai_request/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "llmc/runtime/serve/api_json.h"
#include "llmc/runtime/serve/openai_request.h"

namespace {

using llmc::serve::ApiError;

// Aborts, naming the broken invariant, when `cond` is false.
#define Check(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                    \
      std::abort();                                                     \
    }                                                                   \
  } while (0)

void CheckError(const ApiError& e) {
  Check(e.status == 400);
  Check(!e.message.empty());
  Check(!e.type.empty());
  const llmc::serve::HttpResponse res = llmc::serve::ErrorResponse(e);
  Check(res.status == 400);
  const auto j = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  Check(j.is_object() && j.contains("error") && j["error"]["message"].is_string());
}

void CheckMessages(const std::vector<llmc::ChatMessage>& messages) {
  for (const auto& m : messages)
    Check(m.role == "system" || m.role == "user" || m.role == "assistant");
}

void CheckCompletion(std::string_view body, bool chat) {
  auto r = llmc::serve::ParseCompletionRequest(body, chat);
  if (const auto* e = std::get_if<ApiError>(&r)) {
    CheckError(*e);
    return;
  }
  const auto& req = std::get<llmc::serve::CompletionRequest>(r);
  Check(req.chat == chat);
  Check(req.params.Validate().ok());
  Check(req.n >= 1 && req.n <= llmc::serve::kMaxChoices);
  Check(req.top_logprobs >= 0 && req.top_logprobs <= llmc::kMaxLogprobs);
  Check(req.params.logprobs == (req.want_logprobs ? std::max(1, req.top_logprobs) : 0));
  Check(req.params.max_tokens == -1 || req.params.max_tokens >= 1);
  if (!req.max_tokens_given) Check(req.params.max_tokens == (chat ? -1 : 16));
  for (const std::string& s : req.params.stop) Check(!s.empty());
  Check(!req.include_usage || req.stream);
  Check(!req.echo_only || req.echo);
  Check(!req.echo || !chat);
  if (chat) {
    Check(!req.messages.empty() && req.prompts.empty());
    CheckMessages(req.messages);
  } else {
    Check(!req.prompts.empty() && req.messages.empty());
    for (const auto& p : req.prompts) {
      if (const auto* ids = std::get_if<std::vector<int32_t>>(&p)) {
        for (int32_t id : *ids) Check(id >= 0);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  CheckCompletion(body, /*chat=*/false);
  CheckCompletion(body, /*chat=*/true);

  auto t = llmc::serve::ParseTokenizeRequest(body);
  if (const auto* e = std::get_if<ApiError>(&t)) {
    CheckError(*e);
  } else {
    const auto& req = std::get<llmc::serve::TokenizeRequest>(t);
    Check(req.prompt.has_value() != !req.messages.empty());
    CheckMessages(req.messages);
  }

  auto d = llmc::serve::ParseDetokenizeRequest(body);
  if (const auto* e = std::get_if<ApiError>(&d)) {
    CheckError(*e);
  } else {
    for (int32_t id : std::get<llmc::serve::DetokenizeRequest>(d).tokens) Check(id >= 0);
  }
  return 0;
}
