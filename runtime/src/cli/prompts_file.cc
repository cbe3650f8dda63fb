#include "prompts_file.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace llmc::cli {
namespace {

using nlohmann::json;

// Reads one field into `out` when present; the error names the field.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  absl::Status Error(const std::string& field, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s' %s", where_, field, what));
  }

  template <typename T>
  absl::Status Int(const char* field, T* out, int64_t lo, int64_t hi) const {
    auto it = obj_.find(field);
    if (it == obj_.end()) return absl::OkStatus();
    if (!it->is_number_integer())
      return Error(field, absl::StrFormat("must be an integer, got %s", it->dump()));
    const bool too_big = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(hi);
    const int64_t v = too_big ? hi : it->get<int64_t>();
    if (too_big || v < lo || v > hi)
      return Error(field, absl::StrFormat("must be in [%d, %d], got %s", lo, hi, it->dump()));
    *out = T(v);
    return absl::OkStatus();
  }

  absl::Status Float(const char* field, float* out) const {
    auto it = obj_.find(field);
    if (it == obj_.end()) return absl::OkStatus();
    if (!it->is_number())
      return Error(field, absl::StrFormat("must be a number, got %s", it->dump()));
    *out = it->get<float>();
    return absl::OkStatus();
  }

  absl::Status Bool(const char* field, bool* out) const {
    auto it = obj_.find(field);
    if (it == obj_.end()) return absl::OkStatus();
    if (!it->is_boolean())
      return Error(field, absl::StrFormat("must be true or false, got %s", it->dump()));
    *out = it->get<bool>();
    return absl::OkStatus();
  }

  absl::Status Stop(std::vector<std::string>* out) const {
    auto it = obj_.find("stop");
    if (it == obj_.end()) return absl::OkStatus();
    out->clear();
    if (it->is_string()) {
      out->push_back(it->get<std::string>());
      return absl::OkStatus();
    }
    if (!it->is_array()) return Error("stop", "must be a string or a list of strings");
    for (const json& s : *it) {
      if (!s.is_string()) return Error("stop", "must be a string or a list of strings");
      out->push_back(s.get<std::string>());
    }
    return absl::OkStatus();
  }

 private:
  const json& obj_;
  std::string where_;
};

constexpr const char* kFields[] = {"id",
                                   "prompt",
                                   "prompt_token_ids",
                                   "max_tokens",
                                   "temperature",
                                   "top_k",
                                   "top_p",
                                   "min_p",
                                   "repetition_penalty",
                                   "repeat_last_n",
                                   "seed",
                                   "stop",
                                   "ignore_eos",
                                   "logprobs",
                                   "n"};

absl::StatusOr<PromptLine> ParseLine(const std::string& where, const json& obj,
                                     const SamplingParams& defaults) {
  if (!obj.is_object())
    return absl::InvalidArgumentError(absl::StrFormat("%s: expected a JSON object", where));
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* f : kFields) known |= it.key() == f;
    if (!known)
      return absl::InvalidArgumentError(absl::StrFormat("%s: unknown field '%s'", where, it.key()));
  }
  FieldReader r(obj, where);
  PromptLine p;
  p.params = defaults;
  if (auto it = obj.find("id"); it != obj.end()) {
    if (it->is_string())
      p.id = it->get<std::string>();
    else if (it->is_number_integer())
      p.id = it->dump();
    else
      return r.Error("id", "must be a string or an integer");
  }
  auto prompt = obj.find("prompt");
  auto ids = obj.find("prompt_token_ids");
  if ((prompt == obj.end()) == (ids == obj.end()))
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: give exactly one of 'prompt' and 'prompt_token_ids'", where));
  if (prompt != obj.end()) {
    if (!prompt->is_string()) return r.Error("prompt", "must be a string");
    p.text = prompt->get<std::string>();
  } else {
    if (!ids->is_array() || ids->empty())
      return r.Error("prompt_token_ids", "must be a non-empty list");
    for (const json& t : *ids) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        return r.Error("prompt_token_ids", absl::StrFormat("holds %s, not a token id", t.dump()));
      p.token_ids.push_back(t.get<int32_t>());
    }
  }
  SamplingParams& s = p.params;
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  for (absl::Status st :
       {r.Int("max_tokens", &s.max_tokens, -1, kIntMax), r.Float("temperature", &s.temperature),
        r.Int("top_k", &s.top_k, -1, kIntMax), r.Float("top_p", &s.top_p),
        r.Float("min_p", &s.min_p), r.Float("repetition_penalty", &s.repetition_penalty),
        r.Int("repeat_last_n", &s.repeat_last_n, -1, kIntMax),
        r.Int("seed", &s.seed, 0, std::numeric_limits<int64_t>::max()), r.Stop(&s.stop),
        r.Bool("ignore_eos", &s.ignore_eos), r.Int("logprobs", &s.logprobs, 0, kMaxLogprobs),
        r.Int("n", &p.n, 1, 128)})
    if (!st.ok()) return st;
  if (absl::Status st = s.Validate(); !st.ok())
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", where, st.message()));
  return p;
}

}  // namespace

absl::StatusOr<std::vector<PromptLine>> ParsePromptsFile(std::string_view path,
                                                         std::string_view contents,
                                                         const SamplingParams& defaults) {
  std::vector<PromptLine> out;
  int64_t number = 0;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(contents.data(), contents.size()), '\n')) {
    ++number;
    line = absl::StripTrailingAsciiWhitespace(absl::StripLeadingAsciiWhitespace(line));
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrFormat("%s:%d", path, number);
    json obj = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded())
      return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON", where));
    absl::StatusOr<PromptLine> p = ParseLine(where, obj, defaults);
    if (!p.ok()) return p.status();
    p->line = number;
    if (p->id.empty()) p->id = absl::StrFormat("%d", number);
    out.push_back(*std::move(p));
  }
  if (out.empty())
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: no requests (one JSON object per line)", path));
  return out;
}

}  // namespace llmc::cli
