// The OpenAI API's request bodies (/v1/completions, /v1/chat/completions,
// /tokenize, /detokenize) read into engine parameters. Pure functions of the
// body's bytes: the server calls them, and a fuzz target and the unit tests
// call them alone.
//
// As OpenAI's and vLLM's servers do, unknown fields are ignored; a known
// field of the wrong type or out of range is an ApiError (HTTP 400) naming
// the field, and a known field this server does not implement (best_of !=
// n, suffix, logit_bias, tools; echo on chat) is refused rather than
// ignored.
//
// Sampling defaults are the OpenAI API's, not llama.cpp's CLI ones: an absent
// temperature is 1, top_p 1, top_k and min_p off, no penalties. The
// repetition and frequency/presence penalties look at every previous token
// of the request (prompt and output; repeat_last_n -1).
#ifndef LLMC_RUNTIME_SERVE_OPENAI_REQUEST_H_
#define LLMC_RUNTIME_SERVE_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "llmc/runtime/sample/sampling_params.h"
#include "llmc/runtime/tokenizer/chat_template.h"

namespace llmc::serve {

// An error the API answers with: {"error": {"message", "type", "param",
// "code"}} and `status`.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the field at fault; empty for none
};

// The most choices one request may ask for.
inline constexpr int kMaxChoices = 16;

struct CompletionRequest {
  bool chat = false;
  std::string model;  // empty: the served model
  // /v1/completions: one or more prompts, each text or token ids.
  std::vector<std::variant<std::string, std::vector<int32_t>>> prompts;
  // /v1/chat/completions.
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  // chat_template_kwargs.enable_thinking (vLLM's; Qwen3's template).
  bool enable_thinking = true;
  SamplingParams params;
  // The request gave no max_tokens: the output may run to the context.
  bool max_tokens_given = false;
  bool seed_given = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // The chosen tokens' logprobs were asked for (completions: logprobs given;
  // chat: logprobs true); params.logprobs then holds max(1, top_n).
  bool want_logprobs = false;
  int top_logprobs = 0;
  // /v1/completions' echo: each choice starts with its prompt's text and,
  // with logprobs, the prompt tokens' logprobs (the first token's null),
  // scored by the engine (a score request).
  bool echo = false;
  // echo with max_tokens 0: the prompt (and its logprobs) alone, nothing
  // generated (lm-evaluation-harness's loglikelihood requests);
  // params.max_tokens is then 1 and unused.
  bool echo_only = false;
  // vLLM's prompt_logprobs: each prompt token's logprob (the first's null)
  // and its N best, scored before the generation; -1: not asked. Not with
  // stream (refused).
  int prompt_logprobs = -1;
  std::string user;
};

// `body` as a completion (chat == false) or chat completion request.
std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body, bool chat);

struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;        // text to tokenize
  std::vector<ChatMessage> messages;        // or a conversation, templated
  bool add_special_tokens = true;           // BOS for a prompt
  bool add_generation_prompt = true;        // for messages
  bool enable_thinking = true;              // chat_template_kwargs.enable_thinking
};

std::variant<TokenizeRequest, ApiError> ParseTokenizeRequest(std::string_view body);

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

std::variant<DetokenizeRequest, ApiError> ParseDetokenizeRequest(std::string_view body);

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_OPENAI_REQUEST_H_
