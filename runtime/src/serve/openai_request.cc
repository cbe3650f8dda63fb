#include "llmc/runtime/serve/openai_request.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"

namespace llmc::serve {
namespace {

using json = nlohmann::json;
using Error = std::optional<ApiError>;

// Deeper bodies are refused before parsing: no request needs more, and it
// bounds the parser's and the value's recursion.
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxPrompts = 64;

ApiError BadField(const std::string& field, const std::string& why) {
  return {400, absl::StrFormat("'%s' %s", field, why), "invalid_request_error", field};
}

std::string TypeOf(const json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  return "null";
}

// The nesting depth of `body`'s arrays and objects (strings skipped).
int JsonDepth(std::string_view body) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

std::variant<json, ApiError> ParseBody(std::string_view body) {
  if (JsonDepth(body) > kMaxJsonDepth)
    return ApiError{400, absl::StrFormat("request body nests deeper than %d levels", kMaxJsonDepth),
                    "invalid_request_error", ""};
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
    return ApiError{400, absl::StrFormat("request body is not valid JSON: %s", e.what()),
                    "invalid_request_error", ""};
  }
  if (!j.is_object())
    return ApiError{400, absl::StrFormat("request body must be a JSON object, got %s", TypeOf(j)),
                    "invalid_request_error", ""};
  return j;
}

const json* Find(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

Error GetBool(const json& obj, const char* name, bool* out) {
  const json* v = Find(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return BadField(name, "must be a boolean, got " + TypeOf(*v));
  *out = v->get<bool>();
  return std::nullopt;
}

// vLLM's chat_template_kwargs: variables for the model's Jinja template.
// llmc renders built-in templates, so it takes the one they read
// (enable_thinking, Qwen3's) and names any other rather than drop it.
Error GetChatTemplateKwargs(const json& obj, bool* enable_thinking) {
  const json* kw = Find(obj, "chat_template_kwargs");
  if (!kw || kw->is_null()) return std::nullopt;
  if (!kw->is_object())
    return BadField("chat_template_kwargs", "must be an object, got " + TypeOf(*kw));
  for (const auto& [key, value] : kw->items()) {
    const std::string at = "chat_template_kwargs." + key;
    if (key != "enable_thinking")
      return BadField(at, "is not supported (llmc renders built-in chat templates; it takes "
                          "enable_thinking)");
    if (!value.is_boolean()) return BadField(at, "must be a boolean, got " + TypeOf(value));
    *enable_thinking = value.get<bool>();
  }
  return std::nullopt;
}

Error GetString(const json& obj, const char* name, std::string* out) {
  const json* v = Find(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) return BadField(name, "must be a string, got " + TypeOf(*v));
  *out = v->get<std::string>();
  return std::nullopt;
}

// A number in [lo, hi] (lo excluded when lo_open).
Error GetFloat(const json& obj, const char* name, double lo, double hi, bool lo_open, float* out) {
  const json* v = Find(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return BadField(name, "must be a number, got " + TypeOf(*v));
  const double x = v->get<double>();
  if (!(lo_open ? x > lo : x >= lo) || !(x <= hi))
    return BadField(name, absl::StrFormat("must be in %c%g, %g], got %g", lo_open ? '(' : '[', lo,
                                          hi, x));
  *out = static_cast<float>(x);
  return std::nullopt;
}

Error GetInt(const json& obj, const char* name, int64_t lo, int64_t hi, int64_t* out,
             bool* given = nullptr) {
  const json* v = Find(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return BadField(name, "must be an integer, got " + TypeOf(*v));
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
    return BadField(name, absl::StrFormat("must be in [%d, %d], got %d", lo, hi, v->get<uint64_t>()));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) return BadField(name, absl::StrFormat("must be in [%d, %d], got %d", lo, hi, x));
  *out = x;
  if (given) *given = true;
  return std::nullopt;
}

std::variant<std::vector<int32_t>, ApiError> TokenIds(const json& arr, const std::string& field) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      return BadField(absl::StrFormat("%s[%d]", field, i), "must be a token id (a non-negative integer)");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

Error GetPrompts(const json& obj, CompletionRequest& req) {
  const json* p = Find(obj, "prompt");
  if (!p) return BadField("prompt", "is required");
  if (p->is_string()) {
    req.prompts.emplace_back(p->get<std::string>());
    return std::nullopt;
  }
  if (!p->is_array())
    return BadField("prompt", "must be a string, an array of strings or of token ids, got " + TypeOf(*p));
  if (p->empty()) return BadField("prompt", "must not be an empty array");
  if ((*p)[0].is_number()) {  // one prompt as token ids
    auto ids = TokenIds(*p, "prompt");
    if (auto* e = std::get_if<ApiError>(&ids)) return *e;
    req.prompts.emplace_back(std::move(std::get<std::vector<int32_t>>(ids)));
    return std::nullopt;
  }
  if (p->size() > kMaxPrompts)
    return BadField("prompt", absl::StrFormat("holds %d prompts; at most %d", p->size(), kMaxPrompts));
  for (size_t i = 0; i < p->size(); ++i) {
    const json& item = (*p)[i];
    const std::string field = absl::StrFormat("prompt[%d]", i);
    if (item.is_string()) {
      req.prompts.emplace_back(item.get<std::string>());
    } else if (item.is_array()) {
      auto ids = TokenIds(item, field);
      if (auto* e = std::get_if<ApiError>(&ids)) return *e;
      req.prompts.emplace_back(std::move(std::get<std::vector<int32_t>>(ids)));
    } else {
      return BadField(field, "must be a string or an array of token ids, got " + TypeOf(item));
    }
  }
  return std::nullopt;
}

Error GetMessages(const json& obj, std::vector<ChatMessage>& out) {
  const json* m = Find(obj, "messages");
  if (!m) return BadField("messages", "is required");
  if (!m->is_array()) return BadField("messages", "must be an array, got " + TypeOf(*m));
  if (m->empty()) return BadField("messages", "must not be empty");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string at = absl::StrFormat("messages[%d]", i);
    if (!msg.is_object()) return BadField(at, "must be an object, got " + TypeOf(msg));
    ChatMessage cm;
    const json* role = Find(msg, "role");
    if (!role || !role->is_string()) return BadField(at + ".role", "must be a string");
    cm.role = role->get<std::string>();
    if (cm.role == "developer") cm.role = "system";  // OpenAI's newer name
    if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
      return BadField(at + ".role",
                      absl::StrFormat("must be system, developer, user or assistant, got '%s'", cm.role));
    const json* content = Find(msg, "content");
    if (!content) {
      if (cm.role != "assistant") return BadField(at + ".content", "is required");
    } else if (content->is_string()) {
      cm.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t k = 0; k < content->size(); ++k) {
        const json& part = (*content)[k];
        const std::string pat = absl::StrFormat("%s.content[%d]", at, k);
        const json* type = part.is_object() ? Find(part, "type") : nullptr;
        if (!type || !type->is_string() || type->get<std::string>() != "text")
          return BadField(pat, "must be a {\"type\": \"text\"} part (only text is supported)");
        const json* text = Find(part, "text");
        if (!text || !text->is_string()) return BadField(pat + ".text", "must be a string");
        cm.content += text->get<std::string>();
      }
    } else {
      return BadField(at + ".content", "must be a string or an array of text parts, got " + TypeOf(*content));
    }
    out.push_back(std::move(cm));
  }
  return std::nullopt;
}

Error GetStop(const json& obj, std::vector<std::string>& out) {
  const json* s = Find(obj, "stop");
  if (!s) return std::nullopt;
  if (s->is_string()) {
    if (s->get<std::string>().empty()) return BadField("stop", "must not be an empty string");
    out.push_back(s->get<std::string>());
    return std::nullopt;
  }
  if (!s->is_array()) return BadField("stop", "must be a string or an array of strings, got " + TypeOf(*s));
  for (size_t i = 0; i < s->size(); ++i) {
    const json& item = (*s)[i];
    const std::string at = absl::StrFormat("stop[%d]", i);
    if (!item.is_string()) return BadField(at, "must be a string, got " + TypeOf(item));
    if (item.get<std::string>().empty()) return BadField(at, "must not be an empty string");
    out.push_back(item.get<std::string>());
  }
  return std::nullopt;
}

// Known OpenAI fields this server does not implement: refused, not ignored,
// since ignoring them would answer a different question than was asked.
Error Unsupported(const json& obj, const CompletionRequest& req) {
  if (const json* s = Find(obj, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
    return BadField("suffix", "is not supported");
  if (const json* b = Find(obj, "logit_bias"); b && !(b->is_object() && b->empty()))
    return BadField("logit_bias", "is not supported");
  if (const json* b = Find(obj, "best_of"); b && !(b->is_number_integer() && b->get<int64_t>() == req.n))
    return BadField("best_of", "is not supported (other than equal to n)");
  for (const char* name : {"tools", "functions"})
    if (const json* t = Find(obj, name); t && !(t->is_array() && t->empty()))
      return BadField(name, "is not supported");
  if (const json* f = Find(obj, "response_format")) {
    const json* type = f->is_object() ? Find(*f, "type") : nullptr;
    if (!type || *type != "text") return BadField("response_format", "only {\"type\": \"text\"} is supported");
  }
  return std::nullopt;
}

Error ReadCompletion(const json& obj, CompletionRequest& req) {
  if (auto e = GetString(obj, "model", &req.model)) return e;
  if (req.chat) {
    if (auto e = GetMessages(obj, req.messages)) return e;
    if (auto e = GetBool(obj, "add_generation_prompt", &req.add_generation_prompt)) return e;
    if (auto e = GetChatTemplateKwargs(obj, &req.enable_thinking)) return e;
  } else if (auto e = GetPrompts(obj, req)) {
    return e;
  }
  SamplingParams& p = req.params;
  // The OpenAI API's defaults (see the header).
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.repeat_last_n = -1;
  p.max_tokens = req.chat ? -1 : 16;
  if (auto e = GetFloat(obj, "temperature", 0, 2, false, &p.temperature)) return e;
  if (auto e = GetFloat(obj, "top_p", 0, 1, true, &p.top_p)) return e;
  if (auto e = GetFloat(obj, "min_p", 0, 1, false, &p.min_p)) return e;
  if (auto e = GetFloat(obj, "presence_penalty", -2, 2, false, &p.presence_penalty)) return e;
  if (auto e = GetFloat(obj, "frequency_penalty", -2, 2, false, &p.frequency_penalty)) return e;
  if (auto e = GetFloat(obj, "repetition_penalty", 0, 100, true, &p.repetition_penalty)) return e;
  int64_t v = 0;
  bool given = false;
  if (auto e = GetInt(obj, "top_k", -1, std::numeric_limits<int32_t>::max(), &v, &given)) return e;
  if (given) p.top_k = v > 0 ? int(v) : 0;
  const int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  const char* max_tokens_field = "max_tokens";
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    given = false;
    if (auto e = GetInt(obj, name, 0, kMaxInt, &v, &given)) return e;
    if (given) {  // max_completion_tokens, read last, wins
      p.max_tokens = int(v);
      req.max_tokens_given = true;
      max_tokens_field = name;
    }
  }
  if (auto e = GetBool(obj, "echo", &req.echo)) return e;
  if (req.echo && req.chat) return BadField("echo", "is only for /v1/completions");
  if (p.max_tokens == 0) {
    if (!req.echo)
      return BadField(max_tokens_field,
                      "must be at least 1 (0 only with echo: the prompt and its logprobs alone)");
    req.echo_only = true;
    p.max_tokens = 1;  // unused: nothing is generated
  }
  const json* seed = Find(obj, "seed");
  if (seed) {
    if (!seed->is_number_integer()) return BadField("seed", "must be an integer, got " + TypeOf(*seed));
    p.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
    req.seed_given = true;
  }
  given = false;  // still set by max_tokens above
  if (auto e = GetInt(obj, "n", 1, kMaxChoices, &v, &given)) return e;
  req.n = given ? int(v) : 1;
  if (auto e = GetStop(obj, p.stop)) return e;
  if (auto e = GetBool(obj, "ignore_eos", &p.ignore_eos)) return e;
  if (auto e = GetString(obj, "user", &req.user)) return e;
  if (auto e = GetBool(obj, "stream", &req.stream)) return e;
  if (const json* so = Find(obj, "stream_options")) {
    if (!req.stream) return BadField("stream_options", "is only allowed with stream: true");
    if (!so->is_object()) return BadField("stream_options", "must be an object, got " + TypeOf(*so));
    if (const json* iu = Find(*so, "include_usage")) {
      if (!iu->is_boolean())
        return BadField("stream_options.include_usage", "must be a boolean, got " + TypeOf(*iu));
      req.include_usage = iu->get<bool>();
    }
  }
  if (req.chat) {
    bool logprobs = false;
    if (auto e = GetBool(obj, "logprobs", &logprobs)) return e;
    given = false;
    if (auto e = GetInt(obj, "top_logprobs", 0, kMaxLogprobs, &v, &given)) return e;
    if (given && !logprobs) return BadField("top_logprobs", "needs logprobs: true");
    req.want_logprobs = logprobs;
    req.top_logprobs = given ? int(v) : 0;
  } else {
    given = false;
    if (auto e = GetInt(obj, "logprobs", 0, kMaxLogprobs, &v, &given)) return e;
    req.want_logprobs = given;
    req.top_logprobs = given ? int(v) : 0;
  }
  if (req.want_logprobs) p.logprobs = std::max(1, req.top_logprobs);
  given = false;
  if (auto e = GetInt(obj, "prompt_logprobs", 0, kMaxLogprobs, &v, &given)) return e;
  if (given && req.stream) return BadField("prompt_logprobs", "is not supported with stream: true");
  req.prompt_logprobs = given ? int(v) : -1;
  if (auto e = Unsupported(obj, req)) return e;
  // What remains are the engine's own range checks (empty stop strings and
  // the like were refused above with the API's field names).
  if (absl::Status s = p.Validate(); !s.ok())
    return ApiError{400, std::string(s.message()), "invalid_request_error", ""};
  return std::nullopt;
}

}  // namespace

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body, bool chat) {
  auto parsed = ParseBody(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  CompletionRequest req;
  req.chat = chat;
  if (Error e = ReadCompletion(std::get<json>(parsed), req)) return *e;
  return req;
}

std::variant<TokenizeRequest, ApiError> ParseTokenizeRequest(std::string_view body) {
  auto parsed = ParseBody(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& obj = std::get<json>(parsed);
  TokenizeRequest req;
  if (auto e = GetString(obj, "model", &req.model)) return *e;
  if (auto e = GetBool(obj, "add_special_tokens", &req.add_special_tokens)) return *e;
  if (auto e = GetBool(obj, "add_generation_prompt", &req.add_generation_prompt)) return *e;
  if (Find(obj, "messages")) {
    if (auto e = GetMessages(obj, req.messages)) return *e;
    if (auto e = GetChatTemplateKwargs(obj, &req.enable_thinking)) return *e;
  } else {
    std::string prompt;
    if (!Find(obj, "prompt")) return BadField("prompt", "is required (or messages)");
    if (auto e = GetString(obj, "prompt", &prompt)) return *e;
    req.prompt = std::move(prompt);
  }
  return req;
}

std::variant<DetokenizeRequest, ApiError> ParseDetokenizeRequest(std::string_view body) {
  auto parsed = ParseBody(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& obj = std::get<json>(parsed);
  DetokenizeRequest req;
  if (auto e = GetString(obj, "model", &req.model)) return *e;
  const json* t = Find(obj, "tokens");
  if (!t) return BadField("tokens", "is required");
  if (!t->is_array()) return BadField("tokens", "must be an array of token ids, got " + TypeOf(*t));
  auto ids = TokenIds(*t, "tokens");
  if (auto* e = std::get_if<ApiError>(&ids)) return *e;
  req.tokens = std::move(std::get<std::vector<int32_t>>(ids));
  return req;
}

}  // namespace llmc::serve
