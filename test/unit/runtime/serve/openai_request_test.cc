#include "llmc/runtime/serve/openai_request.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace llmc::serve {
namespace {

CompletionRequest MustParse(std::string_view body, bool chat) {
  auto r = ParseCompletionRequest(body, chat);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error for " << body << ": " << e->message << " (param "
                  << e->param << ")";
    return {};
  }
  return std::get<CompletionRequest>(std::move(r));
}

ApiError MustFail(std::string_view body, bool chat) {
  auto r = ParseCompletionRequest(body, chat);
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "expected an error for " << body;
    return {};
  }
  return std::get<ApiError>(std::move(r));
}

// A 400 whose param is `field` and whose message names it.
void ExpectFieldError(std::string_view body, bool chat, const std::string& field) {
  SCOPED_TRACE(std::string(body));
  ApiError e = MustFail(body, chat);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, field);
  EXPECT_NE(e.message.find(field), std::string::npos) << e.message;
}

// A 400 with a message containing `part` (whole-body errors name no field).
void ExpectBodyError(std::string_view body, bool chat, const std::string& part) {
  SCOPED_TRACE(std::string(body));
  ApiError e = MustFail(body, chat);
  EXPECT_EQ(e.status, 400);
  EXPECT_FALSE(e.message.empty());
  EXPECT_NE(e.message.find(part), std::string::npos) << e.message;
}

std::vector<int32_t> Ids(std::initializer_list<int32_t> ids) { return ids; }

TEST(ParseCompletionRequest, FullCompletionsBody) {
  CompletionRequest r = MustParse(R"({
    "model": "tiny", "prompt": "Once upon", "max_tokens": 32, "temperature": 0.5,
    "top_p": 0.9, "top_k": 7, "min_p": 0.1, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "repetition_penalty": 1.1, "seed": 42,
    "stop": ["\n\n", "END"], "n": 3, "logprobs": 5, "ignore_eos": true,
    "user": "alice", "stream": true, "stream_options": {"include_usage": true}
  })", false);
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "Once upon");
  EXPECT_TRUE(r.messages.empty());
  const SamplingParams& p = r.params;
  EXPECT_EQ(p.max_tokens, 32);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 7);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.repeat_last_n, -1);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_EQ(p.logprobs, 5);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(r.user, "alice");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(p.Validate().ok());
}

TEST(ParseCompletionRequest, CompletionsDefaults) {
  CompletionRequest r = MustParse(R"({"prompt": "hi"})", false);
  const SamplingParams& p = r.params;
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_FLOAT_EQ(p.min_p, 0.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.0f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.0f);
  EXPECT_EQ(p.repeat_last_n, -1);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_FALSE(r.max_tokens_given);
  EXPECT_FALSE(r.seed_given);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_EQ(p.logprobs, 0);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_FALSE(r.want_logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_TRUE(r.model.empty());
  EXPECT_TRUE(r.user.empty());
  EXPECT_TRUE(p.Validate().ok());
}

TEST(ParseCompletionRequest, ChatDefaultsToNoMaxTokens) {
  CompletionRequest r = MustParse(R"({"messages": [{"role": "user", "content": "hi"}]})", true);
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.params.max_tokens, -1);
  EXPECT_FALSE(r.max_tokens_given);
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_TRUE(r.prompts.empty());
}

TEST(ParseCompletionRequest, NullFieldsAreAbsent) {
  CompletionRequest r =
      MustParse(R"({"prompt": "hi", "temperature": null, "stop": null, "n": null})", false);
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_TRUE(r.params.stop.empty());
  EXPECT_EQ(r.n, 1);
}

TEST(ParseCompletionRequest, PromptAsTokenIds) {
  CompletionRequest r = MustParse(R"({"prompt": [1, 2, 2147483647]})", false);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(r.prompts[0]), Ids({1, 2, 2147483647}));
}

TEST(ParseCompletionRequest, PromptAsListOfStringsAndTokenLists) {
  CompletionRequest r = MustParse(R"({"prompt": ["a", "b", [5, 6]]})", false);
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "a");
  EXPECT_EQ(std::get<std::string>(r.prompts[1]), "b");
  EXPECT_EQ(std::get<std::vector<int32_t>>(r.prompts[2]), Ids({5, 6}));
}

TEST(ParseCompletionRequest, PromptErrors) {
  ExpectFieldError(R"({})", false, "prompt");
  ExpectFieldError(R"({"prompt": null})", false, "prompt");
  ExpectFieldError(R"({"prompt": 5})", false, "prompt");
  ExpectFieldError(R"({"prompt": []})", false, "prompt");
  ExpectFieldError(R"({"prompt": [1, -2]})", false, "prompt[1]");
  ExpectFieldError(R"({"prompt": [1, 2147483648]})", false, "prompt[1]");
  ExpectFieldError(R"({"prompt": [1, 2.5]})", false, "prompt[1]");
  ExpectFieldError(R"({"prompt": ["a", 3]})", false, "prompt[1]");
  ExpectFieldError(R"({"prompt": ["a", ["x"]]})", false, "prompt[1][0]");
  std::string many = R"({"prompt": [)";
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + "\"p\"";
  many += "]}";
  ExpectFieldError(many, false, "prompt");
}

TEST(ParseCompletionRequest, MaxCompletionTokensWinsOverMaxTokens) {
  CompletionRequest r =
      MustParse(R"({"prompt": "x", "max_tokens": 10, "max_completion_tokens": 20})", false);
  EXPECT_EQ(r.params.max_tokens, 20);
  EXPECT_TRUE(r.max_tokens_given);
  r = MustParse(R"({"prompt": "x", "max_completion_tokens": 7})", false);
  EXPECT_EQ(r.params.max_tokens, 7);
  r = MustParse(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 9})", true);
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_TRUE(r.max_tokens_given);
}

// Regression (found by openai_request_fuzzer): n was read with the flag
// max_tokens had set, so a request with max_tokens and no n got max_tokens
// choices.
TEST(ParseCompletionRequest, NDefaultsToOneWhateverMaxTokens) {
  EXPECT_EQ(MustParse(R"({"prompt": "x", "max_tokens": 64})", false).n, 1);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "max_completion_tokens": 5})", false).n, 1);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "max_tokens": 3, "top_k": 9})", false).n, 1);
  EXPECT_EQ(
      MustParse(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 100})", true).n,
      1);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "max_tokens": 64, "n": 2})", false).n, 2);
  // best_of is compared with the real n.
  ExpectFieldError(R"({"prompt": "x", "max_tokens": 4, "best_of": 4})", false, "best_of");
}

TEST(ParseCompletionRequest, TopKMinusOneAndZeroMeanOff) {
  EXPECT_EQ(MustParse(R"({"prompt": "x", "top_k": -1})", false).params.top_k, 0);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "top_k": 0})", false).params.top_k, 0);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "top_k": 50})", false).params.top_k, 50);
  ExpectFieldError(R"({"prompt": "x", "top_k": -2})", false, "top_k");
  ExpectFieldError(R"({"prompt": "x", "top_k": 1.5})", false, "top_k");
}

TEST(ParseCompletionRequest, SeedTakesLargeUnsignedAndNegative) {
  CompletionRequest r = MustParse(R"({"prompt": "x", "seed": 18446744073709551615})", false);
  EXPECT_EQ(r.params.seed, UINT64_MAX);
  EXPECT_TRUE(r.seed_given);
  r = MustParse(R"({"prompt": "x", "seed": 9223372036854775808})", false);
  EXPECT_EQ(r.params.seed, uint64_t{1} << 63);
  r = MustParse(R"({"prompt": "x", "seed": -1})", false);
  EXPECT_EQ(r.params.seed, UINT64_MAX);
  r = MustParse(R"({"prompt": "x", "seed": 0})", false);
  EXPECT_EQ(r.params.seed, 0u);
  EXPECT_TRUE(r.seed_given);
  ExpectFieldError(R"({"prompt": "x", "seed": 1.5})", false, "seed");
  ExpectFieldError(R"({"prompt": "x", "seed": "7"})", false, "seed");
}

TEST(ParseCompletionRequest, StopAsString) {
  CompletionRequest r = MustParse(R"({"prompt": "x", "stop": "###"})", false);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"###"});
  r = MustParse(R"({"prompt": "x", "stop": []})", false);
  EXPECT_TRUE(r.params.stop.empty());
}

TEST(ParseCompletionRequest, TemperatureZeroAndBoundaries) {
  EXPECT_FLOAT_EQ(MustParse(R"({"prompt": "x", "temperature": 0})", false).params.temperature, 0);
  EXPECT_FLOAT_EQ(MustParse(R"({"prompt": "x", "temperature": 2})", false).params.temperature, 2);
  EXPECT_FLOAT_EQ(MustParse(R"({"prompt": "x", "top_p": 1})", false).params.top_p, 1);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "n": 16})", false).n, 16);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "logprobs": 20})", false).params.logprobs, 20);
}

TEST(ParseCompletionRequest, CompletionsLogprobsZeroStillWantsChosenToken) {
  CompletionRequest r = MustParse(R"({"prompt": "x", "logprobs": 0})", false);
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_EQ(r.params.logprobs, 1);
}

TEST(ParseCompletionRequest, ChatMessages) {
  CompletionRequest r = MustParse(R"({
    "model": "m",
    "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "Hello, "},
                                   {"type": "text", "text": "world"}]},
      {"role": "assistant"},
      {"role": "assistant", "content": null, "name": "bot"},
      {"role": "user", "content": "again"}
    ],
    "add_generation_prompt": false
  })", true);
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "be brief");
  EXPECT_EQ(r.messages[1].role, "system");
  EXPECT_EQ(r.messages[2].role, "user");
  EXPECT_EQ(r.messages[2].content, "Hello, world");
  EXPECT_EQ(r.messages[3].role, "assistant");
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_EQ(r.messages[4].role, "assistant");
  EXPECT_EQ(r.messages[5].content, "again");
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.enable_thinking);
  EXPECT_EQ(r.model, "m");
}

TEST(ParseCompletionRequest, ChatTemplateKwargs) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  CompletionRequest r =
      MustParse("{" + msgs + R"(, "chat_template_kwargs": {"enable_thinking": false}})", true);
  EXPECT_FALSE(r.enable_thinking);
  // Variables of a Jinja template llmc does not run are named, not dropped.
  ExpectFieldError("{" + msgs + R"(, "chat_template_kwargs": {"tools_mode": 1}})", true,
                   "chat_template_kwargs.tools_mode");
  ExpectFieldError("{" + msgs + R"(, "chat_template_kwargs": {"enable_thinking": "no"}})", true,
                   "chat_template_kwargs.enable_thinking");
  ExpectFieldError("{" + msgs + R"(, "chat_template_kwargs": [1]})", true,
                   "chat_template_kwargs");
}

TEST(ParseCompletionRequest, ChatLogprobs) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  CompletionRequest r = MustParse("{" + msgs + R"(, "logprobs": true, "top_logprobs": 3})", true);
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.params.logprobs, 3);
  r = MustParse("{" + msgs + R"(, "logprobs": true})", true);
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_EQ(r.params.logprobs, 1);
  r = MustParse("{" + msgs + R"(, "logprobs": false})", true);
  EXPECT_FALSE(r.want_logprobs);
  EXPECT_EQ(r.params.logprobs, 0);
  ExpectFieldError("{" + msgs + R"(, "top_logprobs": 2})", true, "top_logprobs");
  ExpectFieldError("{" + msgs + R"(, "logprobs": false, "top_logprobs": 2})", true, "top_logprobs");
  ExpectFieldError("{" + msgs + R"(, "logprobs": true, "top_logprobs": 21})", true,
                   "top_logprobs");
  ExpectFieldError("{" + msgs + R"(, "logprobs": 5})", true, "logprobs");
}

TEST(ParseCompletionRequest, UnknownFieldsAreIgnored) {
  CompletionRequest r = MustParse(
      R"({"prompt": "x", "whatever": {"deep": [1, 2, 3]}, "guided_json": null, "x-y": 5,
          "suffix": "", "logit_bias": {}, "tools": [], "response_format": {"type": "text"},
          "echo": false, "best_of": 1})",
      false);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "x");
}

TEST(ParseCompletionRequest, WrongTypes) {
  ExpectFieldError(R"({"prompt": "x", "temperature": "hot"})", false, "temperature");
  ExpectFieldError(R"({"prompt": "x", "n": 2.5})", false, "n");
  ExpectFieldError(R"({"prompt": "x", "stop": 3})", false, "stop");
  ExpectFieldError(R"({"prompt": "x", "stop": ["a", 3]})", false, "stop[1]");
  ExpectFieldError(R"({"prompt": "x", "model": 1})", false, "model");
  ExpectFieldError(R"({"prompt": "x", "stream": "yes"})", false, "stream");
  ExpectFieldError(R"({"prompt": "x", "ignore_eos": 1})", false, "ignore_eos");
  ExpectFieldError(R"({"prompt": "x", "user": []})", false, "user");
  ExpectFieldError(R"({"prompt": "x", "max_tokens": "10"})", false, "max_tokens");
  ExpectFieldError(R"({"prompt": "x", "top_p": true})", false, "top_p");
  ExpectFieldError(R"({"prompt": "x", "logprobs": true})", false, "logprobs");
  ExpectFieldError(R"({"prompt": "x", "stream": true, "stream_options": 1})", false,
                   "stream_options");
  ExpectFieldError(R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
                   false, "stream_options.include_usage");
  ExpectFieldError(R"({"messages": {"role": "user"}})", true, "messages");
  ExpectFieldError(R"({"messages": [{"role": 5, "content": "x"}]})", true, "messages[0].role");
  ExpectFieldError(R"({"messages": [{"role": "tool", "content": "x"}]})", true,
                   "messages[0].role");
  ExpectFieldError(R"({"messages": [{"content": "x"}]})", true, "messages[0].role");
  ExpectFieldError(R"({"messages": ["hi"]})", true, "messages[0]");
  ExpectFieldError(R"({"messages": [{"role": "user", "content": 5}]})", true,
                   "messages[0].content");
  ExpectFieldError(R"({"messages": [{"role": "user"}]})", true, "messages[0].content");
  ExpectFieldError(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true,
                   "messages[0].content[0]");
  ExpectFieldError(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})",
                   true, "messages[0].content[0].text");
  ExpectFieldError(
      R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": 1})", true,
      "add_generation_prompt");
}

TEST(ParseCompletionRequest, OutOfRange) {
  ExpectFieldError(R"({"prompt": "x", "temperature": 3})", false, "temperature");
  ExpectFieldError(R"({"prompt": "x", "temperature": -0.1})", false, "temperature");
  ExpectFieldError(R"({"prompt": "x", "top_p": 0})", false, "top_p");
  ExpectFieldError(R"({"prompt": "x", "top_p": 1.01})", false, "top_p");
  ExpectFieldError(R"({"prompt": "x", "min_p": 1.5})", false, "min_p");
  ExpectFieldError(R"({"prompt": "x", "n": 0})", false, "n");
  ExpectFieldError(R"({"prompt": "x", "n": 17})", false, "n");
  ExpectFieldError(R"({"prompt": "x", "n": 18446744073709551615})", false, "n");
  ExpectFieldError(R"({"prompt": "x", "logprobs": 21})", false, "logprobs");
  ExpectFieldError(R"({"prompt": "x", "logprobs": -1})", false, "logprobs");
  ExpectFieldError(R"({"prompt": "x", "presence_penalty": 2.5})", false, "presence_penalty");
  ExpectFieldError(R"({"prompt": "x", "frequency_penalty": -3})", false, "frequency_penalty");
  ExpectFieldError(R"({"prompt": "x", "repetition_penalty": 0})", false, "repetition_penalty");
  ExpectFieldError(R"({"prompt": "x", "max_tokens": 0})", false, "max_tokens");
  ExpectFieldError(R"({"prompt": "x", "max_tokens": -1})", false, "max_tokens");
  ExpectFieldError(R"({"prompt": "x", "max_tokens": 2147483648})", false, "max_tokens");
  ExpectFieldError(R"({"prompt": "x", "max_completion_tokens": 0})", false,
                   "max_completion_tokens");
}

TEST(ParseCompletionRequest, MissingPromptOrMessages) {
  ExpectFieldError(R"({"model": "m"})", false, "prompt");
  ExpectFieldError(R"({"model": "m", "prompt": "x"})", true, "messages");
  ExpectFieldError(R"({"messages": []})", true, "messages");
}

TEST(ParseCompletionRequest, StreamOptionsNeedStream) {
  ExpectFieldError(R"({"prompt": "x", "stream_options": {"include_usage": true}})", false,
                   "stream_options");
  ExpectFieldError(R"({"prompt": "x", "stream": false, "stream_options": {}})", false,
                   "stream_options");
  CompletionRequest r =
      MustParse(R"({"prompt": "x", "stream": true, "stream_options": {}})", false);
  EXPECT_FALSE(r.include_usage);
}

TEST(ParseCompletionRequest, EchoIsForCompletionsAndAllowsNoOutput) {
  CompletionRequest r =
      MustParse(R"({"prompt": "x", "echo": true, "max_tokens": 0, "logprobs": 1})", false);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.echo_only);
  EXPECT_TRUE(r.params.Validate().ok());
  EXPECT_TRUE(r.want_logprobs);
  r = MustParse(R"({"prompt": "x", "echo": true})", false);
  EXPECT_FALSE(r.echo_only);
  EXPECT_EQ(r.params.max_tokens, 16);
  ExpectFieldError(R"({"prompt": "x", "max_tokens": 0})", false, "max_tokens");
  ExpectFieldError(R"({"prompt": "x", "max_completion_tokens": 0})", false,
                   "max_completion_tokens");
  ExpectFieldError(R"({"prompt": "x", "echo": true, "max_tokens": -1})", false, "max_tokens");
  ExpectFieldError(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", true,
                   "echo");
  ExpectFieldError(R"({"prompt": "x", "echo": 1})", false, "echo");
}

TEST(ParseCompletionRequest, PromptLogprobsAsVllmTakesThem) {
  EXPECT_EQ(MustParse(R"({"prompt": "x"})", false).prompt_logprobs, -1);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "prompt_logprobs": null})", false).prompt_logprobs, -1);
  EXPECT_EQ(MustParse(R"({"prompt": "x", "prompt_logprobs": 0})", false).prompt_logprobs, 0);
  CompletionRequest r = MustParse(
      R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 5})", true);
  EXPECT_EQ(r.prompt_logprobs, 5);
  EXPECT_FALSE(r.want_logprobs);  // the output's logprobs are another field
  ExpectFieldError(R"({"prompt": "x", "prompt_logprobs": -1})", false, "prompt_logprobs");
  ExpectFieldError(R"({"prompt": "x", "prompt_logprobs": 21})", false, "prompt_logprobs");
  ExpectFieldError(R"({"prompt": "x", "prompt_logprobs": true})", false, "prompt_logprobs");
  ExpectFieldError(R"({"prompt": "x", "prompt_logprobs": 2, "stream": true})", false,
                   "prompt_logprobs");
}

TEST(ParseCompletionRequest, UnsupportedFieldsAreRefused) {
  ExpectFieldError(R"({"prompt": "x", "logit_bias": {"50256": -100}})", false, "logit_bias");
  ExpectFieldError(R"({"prompt": "x", "best_of": 2})", false, "best_of");
  ExpectFieldError(R"({"prompt": "x", "n": 2, "best_of": 3})", false, "best_of");
  ExpectFieldError(R"({"prompt": "x", "suffix": "tail"})", false, "suffix");
  ExpectFieldError(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})", true,
                   "tools");
  ExpectFieldError(R"({"prompt": "x", "response_format": {"type": "json_object"}})", false,
                   "response_format");
  // best_of equal to n is what n already does.
  EXPECT_EQ(MustParse(R"({"prompt": "x", "n": 2, "best_of": 2})", false).n, 2);
}

TEST(ParseCompletionRequest, EmptyStopString) {
  ExpectFieldError(R"({"prompt": "x", "stop": ""})", false, "stop");
  ExpectFieldError(R"({"prompt": "x", "stop": ["a", ""]})", false, "stop[1]");
}

TEST(ParseCompletionRequest, InvalidJson) {
  ExpectBodyError(R"({"prompt": "x",)", false, "not valid JSON");
  ExpectBodyError("", false, "not valid JSON");
  ExpectBodyError("{'prompt': 'x'}", false, "not valid JSON");
  ExpectBodyError(R"({"prompt": "x"} trailing)", false, "not valid JSON");
}

TEST(ParseCompletionRequest, InvalidUtf8InString) {
  ExpectBodyError("{\"prompt\": \"a\xff" "b\"}", false, "not valid JSON");
  ExpectBodyError("{\"prompt\": \"\xc3\"}", false, "not valid JSON");  // truncated sequence
  ExpectBodyError("{\"messages\": [{\"role\": \"user\", \"content\": \"\xed\xa0\x80\"}]}", true,
                  "not valid JSON");  // a UTF-16 surrogate
}

TEST(ParseCompletionRequest, NonObjectBody) {
  ExpectBodyError(R"(["prompt"])", false, "must be a JSON object");
  ExpectBodyError(R"("prompt")", false, "must be a JSON object");
  ExpectBodyError("42", true, "must be a JSON object");
  ExpectBodyError("null", true, "must be a JSON object");
}

TEST(ParseCompletionRequest, NestingDeeperThan64) {
  // 64 levels (the body's object included) pass...
  std::string ok = R"({"prompt": "x", "extra": )" + std::string(63, '[') + std::string(63, ']') + "}";
  MustParse(ok, false);
  // ...65 do not, even in an ignored field.
  std::string deep = R"({"prompt": "x", "extra": )" + std::string(64, '[') + std::string(64, ']') + "}";
  ExpectBodyError(deep, false, "deeper than 64");
  // Brackets inside strings do not count.
  std::string in_string = R"({"prompt": ")" + std::string(100, '[') + R"(\"{"})";
  CompletionRequest r = MustParse(in_string, false);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), std::string(100, '[') + "\"{");
}

// A number too large for a double is refused as a bad body, not thrown.
TEST(ParseCompletionRequest, NumberOverflowIsAnError) {
  ExpectBodyError(R"({"prompt": "x", "temperature": 1e400})", false, "not valid JSON");
  ExpectBodyError(R"({"prompt": "x", "whatever": -1e999})", false, "not valid JSON");
}

TEST(ParseCompletionRequest, ValuesThatRoundToZeroAsFloat) {
  // In range as doubles, 0 as floats: refused by the engine's own check.
  auto r = ParseCompletionRequest(R"({"prompt": "x", "top_p": 1e-300})", false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  EXPECT_NE(std::get<ApiError>(r).message.find("top_p"), std::string::npos);
}

TEST(ParseTokenizeRequest, Prompt) {
  auto r = ParseTokenizeRequest(R"({"model": "m", "prompt": "hello", "add_special_tokens": false})");
  ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(r));
  const auto& t = std::get<TokenizeRequest>(r);
  EXPECT_EQ(t.model, "m");
  ASSERT_TRUE(t.prompt.has_value());
  EXPECT_EQ(*t.prompt, "hello");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_TRUE(t.add_generation_prompt);
  EXPECT_TRUE(t.messages.empty());
}

TEST(ParseTokenizeRequest, Messages) {
  auto r = ParseTokenizeRequest(
      R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false})");
  ASSERT_TRUE(std::holds_alternative<TokenizeRequest>(r));
  const auto& t = std::get<TokenizeRequest>(r);
  EXPECT_FALSE(t.prompt.has_value());
  ASSERT_EQ(t.messages.size(), 1u);
  EXPECT_EQ(t.messages[0].role, "user");
  EXPECT_EQ(t.messages[0].content, "hi");
  EXPECT_FALSE(t.add_generation_prompt);
  EXPECT_TRUE(t.add_special_tokens);
}

void ExpectTokenizeError(std::string_view body, const std::string& field) {
  SCOPED_TRACE(std::string(body));
  auto r = ParseTokenizeRequest(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  const ApiError& e = std::get<ApiError>(r);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, field);
  EXPECT_FALSE(e.message.empty());
  if (!field.empty()) {
    EXPECT_NE(e.message.find(field), std::string::npos) << e.message;
  }
}

TEST(ParseTokenizeRequest, Errors) {
  ExpectTokenizeError(R"({})", "prompt");
  ExpectTokenizeError(R"({"prompt": 5})", "prompt");
  ExpectTokenizeError(R"({"prompt": "x", "add_special_tokens": "no"})", "add_special_tokens");
  ExpectTokenizeError(R"({"prompt": "x", "model": 3})", "model");
  ExpectTokenizeError(R"({"messages": "hi"})", "messages");
  ExpectTokenizeError(R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role");
  ExpectTokenizeError("[1]", "");
  ExpectTokenizeError("{", "");
  ExpectTokenizeError("{\"prompt\": \"\xff\"}", "");
}

TEST(ParseDetokenizeRequest, Tokens) {
  auto r = ParseDetokenizeRequest(R"({"model": "m", "tokens": [0, 1, 2147483647]})");
  ASSERT_TRUE(std::holds_alternative<DetokenizeRequest>(r));
  const auto& d = std::get<DetokenizeRequest>(r);
  EXPECT_EQ(d.model, "m");
  EXPECT_EQ(d.tokens, Ids({0, 1, 2147483647}));
  r = ParseDetokenizeRequest(R"({"tokens": []})");
  ASSERT_TRUE(std::holds_alternative<DetokenizeRequest>(r));
  EXPECT_TRUE(std::get<DetokenizeRequest>(r).tokens.empty());
}

TEST(ParseDetokenizeRequest, Errors) {
  auto expect = [](std::string_view body, const std::string& field) {
    SCOPED_TRACE(std::string(body));
    auto r = ParseDetokenizeRequest(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    const ApiError& e = std::get<ApiError>(r);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, field);
    EXPECT_FALSE(e.message.empty());
    if (!field.empty()) {
      EXPECT_NE(e.message.find(field), std::string::npos) << e.message;
    }
  };
  expect(R"({})", "tokens");
  expect(R"({"tokens": "1 2"})", "tokens");
  expect(R"({"tokens": [1, -1]})", "tokens[1]");
  expect(R"({"tokens": [1, "2"]})", "tokens[1]");
  expect(R"({"tokens": [4294967296]})", "tokens[0]");
  expect(R"({"tokens": [1], "model": false})", "model");
  expect("true", "");
  expect("{\"tokens\": [1e999]}", "");
}

}  // namespace
}  // namespace llmc::serve
