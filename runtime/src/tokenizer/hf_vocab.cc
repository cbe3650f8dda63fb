// Tokenizer::FromTokenizerJson / FromHFFolder: the vocabulary from a Hugging
// Face tokenizer.json (model.type BPE) and tokenizer_config.json.
//
// Two shapes of BPE tokenizer.json are recognised and mapped onto the
// algorithms llama.cpp would use after conversion to GGUF:
//   - byte-level (a ByteLevel pre-tokenizer, maybe after Digits or a Split
//     regex): BPE by merge rank, with the splitter matching the pre-tokenizer;
//   - SentencePiece-style (byte_fallback, spaces replaced by ▁ in the
//     normalizer or a Metaspace pre-tokenizer; Llama 2, TinyLlama): the SPM
//     algorithm, each token scored by the rank of the first merge that builds
//     it, so that the SPM bigram order is the BPE merge order.
// Anything else is refused with an error naming the file and the field.
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "llmc/core/format/mapped_file.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/tokenizer/tokenizer.h"
#include "pre_configs.h"
#include "vocab.h"

namespace llmc {

using nlohmann::json;
using tokenizer_internal::Vocab;
using tokenizer_internal::VocabModel;

namespace {

// More ids than any real vocabulary; bounds the token table a file can make
// us allocate.
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

constexpr std::string_view kMetaSpace = "\xE2\x96\x81";  // ▁

// The Split regexes of the Llama 3 and Qwen2 tokenizer.json files, and the
// case-expanded spelling llama.cpp uses for the same expressions.
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3RegexExpanded =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2RegexExpanded =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string Describe(const json& j) {
  switch (j.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    case json::value_t::discarded:
      return "nothing";
    default:
      return "a number";
  }
}

// Typed access to one JSON file; every error names the file and the field.
class JsonFile {
 public:
  explicit JsonFile(std::string name) : name_(std::move(name)) {}

  absl::StatusOr<json> Parse(std::string_view text) const {
    // nlohmann reports syntax errors by exception; keep them in here.
    try {
      return json::parse(text.begin(), text.end());
    } catch (const json::exception& e) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: not valid JSON: %s", name_, e.what()));
    }
  }

  absl::Status Error(std::string_view field, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s %s", name_, std::string(field), why));
  }
  absl::Status WrongType(std::string_view field, const char* want, const json& got) const {
    return Error(field, absl::StrFormat("must be %s, got %s", want, Describe(got)));
  }

  // The member `key` of `obj`, or nullptr when absent or null.
  static const json* Member(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  absl::StatusOr<const json*> Object(const json& obj, const char* key, std::string_view field,
                                     bool required) const {
    const json* j = Member(obj, key);
    if (j == nullptr)
      return required ? Error(field, "is missing") : absl::StatusOr<const json*>(nullptr);
    if (!j->is_object()) return WrongType(field, "an object", *j);
    return j;
  }

  absl::Status OptionalBool(const json& obj, const char* key, std::string_view field,
                            bool* out) const {
    const json* j = Member(obj, key);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_boolean()) return WrongType(field, "a boolean", *j);
    *out = j->get<bool>();
    return absl::OkStatus();
  }

  absl::Status OptionalString(const json& obj, const char* key, std::string_view field,
                              std::string* out) const {
    const json* j = Member(obj, key);
    if (j == nullptr) return absl::OkStatus();
    if (!j->is_string()) return WrongType(field, "a string", *j);
    *out = j->get<std::string>();
    return absl::OkStatus();
  }

  absl::StatusOr<int32_t> TokenId(const json& j, std::string_view field) const {
    if (!j.is_number_integer()) return WrongType(field, "an integer token id", j);
    int64_t id = j.is_number_unsigned()
                     ? int64_t(std::min<uint64_t>(j.get<uint64_t>(), uint64_t(kMaxTokenId) + 1))
                     : j.get<int64_t>();
    if (id < 0 || id > kMaxTokenId)
      return Error(field, absl::StrFormat("is %d, outside 0..%d", id, kMaxTokenId));
    return int32_t(id);
  }

  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// The components of a normalizer / pre-tokenizer / decoder / post-processor,
// flattening one level of "Sequence".
std::vector<const json*> Components(const json* j, const char* list_key) {
  std::vector<const json*> out;
  if (j == nullptr || !j->is_object()) return out;
  const json* type = JsonFile::Member(*j, "type");
  const json* list = JsonFile::Member(*j, list_key);
  if (type != nullptr && *type == "Sequence" && list != nullptr && list->is_array()) {
    for (const json& c : *list)
      if (c.is_object()) out.push_back(&c);
  } else {
    out.push_back(j);
  }
  return out;
}

bool IsType(const json* j, std::string_view type) {
  const json* t = j ? JsonFile::Member(*j, "type") : nullptr;
  return t != nullptr && t->is_string() && t->get_ref<const std::string&>() == type;
}

bool AnyOfType(const std::vector<const json*>& components, std::string_view type) {
  for (const json* c : components)
    if (IsType(c, type)) return true;
  return false;
}

std::string StringOr(const json* obj, const char* key, std::string fallback) {
  const json* j = obj ? JsonFile::Member(*obj, key) : nullptr;
  return j != nullptr && j->is_string() ? j->get<std::string>() : fallback;
}

bool BoolOr(const json* obj, const char* key, bool fallback) {
  const json* j = obj ? JsonFile::Member(*obj, key) : nullptr;
  return j != nullptr && j->is_boolean() ? j->get<bool>() : fallback;
}

// The name (a pre_configs.cc key) of the byte-level pre-tokenizer chain.
absl::StatusOr<std::string> ByteLevelPreTokenizer(const JsonFile& file, const json* pre) {
  if (pre == nullptr)
    return file.Error("pre_tokenizer", "is missing (a byte-level BPE tokenizer needs one)");
  bool digits = false;
  std::string split;  // the recognised Split regex family
  bool byte_level = false, byte_level_regex = true;
  for (const json* c : Components(pre, "pretokenizers")) {
    std::string type = StringOr(c, "type", "");
    if (type == "ByteLevel") {
      byte_level = true;
      byte_level_regex = BoolOr(c, "use_regex", true);
      if (BoolOr(c, "add_prefix_space", false))
        return file.Error("pre_tokenizer.add_prefix_space",
                          "is true; llmc (like llama.cpp) does not support it");
    } else if (type == "Digits") {
      if (!BoolOr(c, "individual_digits", false))
        return file.Error("pre_tokenizer Digits.individual_digits",
                          "must be true (llmc supports isolated digits only)");
      digits = true;
    } else if (type == "Split") {
      const json* pattern = JsonFile::Member(*c, "pattern");
      std::string regex = StringOr(pattern, "Regex", "");
      if (regex == kLlama3Regex || regex == kLlama3RegexExpanded) {
        split = "llama-bpe";
      } else if (regex == kQwen2Regex || regex == kQwen2RegexExpanded) {
        split = "qwen2";
      } else {
        return file.Error(
            "pre_tokenizer Split.pattern.Regex",
            absl::StrFormat("'%s' is not a regex llmc knows (Llama 3's or Qwen2's)", regex));
      }
      if (StringOr(c, "behavior", "Isolated") != "Isolated" || BoolOr(c, "invert", false))
        return file.Error("pre_tokenizer Split.behavior", "must be Isolated and not inverted");
    } else {
      return file.Error(
          "pre_tokenizer.type",
          absl::StrFormat("'%s' is not supported in a byte-level BPE tokenizer", type));
    }
  }
  if (!byte_level) return file.Error("pre_tokenizer", "has no ByteLevel step");
  if (!split.empty() && !digits && !byte_level_regex) return split;
  if (split.empty() && byte_level_regex) return std::string(digits ? "smollm" : "gpt-2");
  return file.Error("pre_tokenizer",
                    "combines Split/Digits/ByteLevel in a way llmc does not support");
}

// BOS/EOS and the chat template from tokenizer_config.json.
struct ConfigFields {
  std::string bos_token, eos_token, chat_template;
  bool has_add_bos = false, add_bos = false, add_eos = false;
};

// A special-token field: "text", {"content": "text", ...}, or null.
absl::Status TokenText(const JsonFile& file, const json& config, const char* key,
                       std::string* out) {
  const json* j = JsonFile::Member(config, key);
  if (j == nullptr) return absl::OkStatus();
  if (j->is_object()) j = JsonFile::Member(*j, "content");
  if (j == nullptr || !j->is_string())
    return file.Error(key, "must be a string or an object with a string \"content\"");
  *out = j->get<std::string>();
  return absl::OkStatus();
}

absl::StatusOr<ConfigFields> ParseConfig(const JsonFile& file, std::string_view text) {
  ConfigFields f;
  LLMC_ASSIGN_OR_RETURN(json config, file.Parse(text));
  if (!config.is_object()) return file.WrongType("(top level)", "an object", config);
  LLMC_RETURN_IF_ERROR(TokenText(file, config, "bos_token", &f.bos_token));
  LLMC_RETURN_IF_ERROR(TokenText(file, config, "eos_token", &f.eos_token));
  if (const json* j = JsonFile::Member(config, "add_bos_token")) {
    if (!j->is_boolean()) return file.WrongType("add_bos_token", "a boolean", *j);
    f.has_add_bos = true;
    f.add_bos = j->get<bool>();
  }
  LLMC_RETURN_IF_ERROR(file.OptionalBool(config, "add_eos_token", "add_eos_token", &f.add_eos));
  if (const json* t = JsonFile::Member(config, "chat_template")) {
    if (t->is_string()) {
      f.chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      // Named templates: take "default", else the first.
      for (const json& entry : *t) {
        std::string name = StringOr(&entry, "name", "");
        if (name == "default" || f.chat_template.empty())
          f.chat_template = StringOr(&entry, "template", "");
      }
    } else {
      return file.WrongType("chat_template", "a string or a list of named templates", *t);
    }
  }
  return f;
}

// The special token a TemplateProcessing post-processor puts first, if any
// (how tokenizer.json alone says "add BOS").
std::string TemplateBos(const json* post_processor) {
  for (const json* c : Components(post_processor, "processors")) {
    if (!IsType(c, "TemplateProcessing")) continue;
    const json* single = JsonFile::Member(*c, "single");
    if (single == nullptr || !single->is_array() || single->empty()) continue;
    const json* special = JsonFile::Member((*single)[0], "SpecialToken");
    return StringOr(special, "id", "");
  }
  return "";
}

absl::Status ReadVocab(const JsonFile& file, const json& model, const json& root, Vocab* v) {
  LLMC_ASSIGN_OR_RETURN(const json* vocab,
                        file.Object(model, "vocab", "model.vocab", /*required=*/true));
  struct Entry {
    std::string text;
    uint32_t attr;
  };
  std::vector<std::pair<int32_t, Entry>> entries;
  entries.reserve(vocab->size());
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    LLMC_ASSIGN_OR_RETURN(
        int32_t id, file.TokenId(it.value(), absl::StrFormat("model.vocab[\"%s\"]", it.key())));
    entries.push_back({id, {it.key(), tokenizer_internal::kAttrNormal}});
    max_id = std::max<int64_t>(max_id, id);
  }
  if (const json* added = JsonFile::Member(root, "added_tokens")) {
    if (!added->is_array()) return file.WrongType("added_tokens", "an array", *added);
    for (size_t i = 0; i < added->size(); ++i) {
      const json& t = (*added)[i];
      std::string field = absl::StrFormat("added_tokens[%d]", i);
      if (!t.is_object()) return file.WrongType(field, "an object", t);
      const json* id_json = JsonFile::Member(t, "id");
      if (id_json == nullptr) return file.Error(field + ".id", "is missing");
      LLMC_ASSIGN_OR_RETURN(int32_t id, file.TokenId(*id_json, field + ".id"));
      Entry e;
      LLMC_RETURN_IF_ERROR(file.OptionalString(t, "content", field + ".content", &e.text));
      if (e.text.empty()) return file.Error(field + ".content", "is missing or empty");
      bool special = false, lstrip = false, rstrip = false;
      LLMC_RETURN_IF_ERROR(file.OptionalBool(t, "special", field + ".special", &special));
      LLMC_RETURN_IF_ERROR(file.OptionalBool(t, "lstrip", field + ".lstrip", &lstrip));
      LLMC_RETURN_IF_ERROR(file.OptionalBool(t, "rstrip", field + ".rstrip", &rstrip));
      // Special added tokens are control tokens (split out only with
      // parse_special); the others are user-defined (always split out).
      e.attr = special ? tokenizer_internal::kAttrControl : tokenizer_internal::kAttrUserDefined;
      if (lstrip) e.attr |= tokenizer_internal::kAttrLstrip;
      if (rstrip) e.attr |= tokenizer_internal::kAttrRstrip;
      entries.push_back({id, std::move(e)});
      max_id = std::max<int64_t>(max_id, id);
    }
  }
  if (max_id < 0) return file.Error("model.vocab", "is empty");
  // Real vocabularies are dense; a stray huge id must not make us allocate
  // millions of placeholder tokens.
  const int64_t limit =
      std::max<int64_t>(2 * int64_t(entries.size()), int64_t(entries.size()) + 65536);
  if (max_id >= limit) {
    return file.Error("model.vocab",
                      absl::StrFormat("has token id %d but only %d entries; ids must be dense",
                                      max_id, entries.size()));
  }
  v->tokens.assign(size_t(max_id) + 1, "");
  v->attrs.assign(size_t(max_id) + 1, tokenizer_internal::kAttrUnused);
  std::vector<bool> from_added(v->tokens.size(), false);
  for (auto& [id, e] : entries) {
    const bool added = e.attr != tokenizer_internal::kAttrNormal;
    if (!v->tokens[id].empty() && v->tokens[id] != e.text) {
      return file.Error(
          added ? "added_tokens" : "model.vocab",
          absl::StrFormat("gives id %d to both '%s' and '%s'", id, v->tokens[id], e.text));
    }
    if (!v->tokens[id].empty() && from_added[id] && !added) continue;  // an added token's flags win
    v->tokens[id] = std::move(e.text);
    v->attrs[id] = e.attr;
    from_added[id] = added;
  }
  // Ids no entry names: placeholders, as llama.cpp's converter writes them.
  for (size_t id = 0; id < v->tokens.size(); ++id)
    if (v->tokens[id].empty()) v->tokens[id] = absl::StrFormat("[PAD%d]", id);
  return absl::OkStatus();
}

// Merges as (left, right) pairs in rank order: "left right" strings or
// ["left", "right"] arrays.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadMerges(const JsonFile& file,
                                                                            const json& model) {
  std::vector<std::pair<std::string, std::string>> merges;
  const json* list = JsonFile::Member(model, "merges");
  if (list == nullptr) return merges;
  if (!list->is_array()) return file.WrongType("model.merges", "an array", *list);
  merges.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const json& m = (*list)[i];
    std::string field = absl::StrFormat("model.merges[%d]", i);
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ', 1);
      if (space == std::string::npos)
        return file.Error(field, absl::StrFormat("'%s' is not \"left right\"", s));
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return file.WrongType(field, "a \"left right\" string or a [left, right] pair", m);
    }
  }
  return merges;
}

bool IsByteToken(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// Whether the normalizer / pre-tokenizer make this a SentencePiece-style
// tokenizer, and whether they put a ▁ in front of the text.
struct SpmShape {
  bool spm = false;
  bool prefix = false;
};

SpmShape DetectSpm(const json* normalizer, const json* pre, const json& model) {
  SpmShape s;
  s.spm = BoolOr(&model, "byte_fallback", false);
  for (const json* c : Components(normalizer, "normalizers")) {
    if (IsType(c, "Replace") && StringOr(c, "content", "") == kMetaSpace) s.spm = true;
    if (IsType(c, "Prepend") && StringOr(c, "prepend", "") == kMetaSpace) s.prefix = true;
  }
  for (const json* c : Components(pre, "pretokenizers")) {
    if (!IsType(c, "Metaspace")) continue;
    s.spm = true;
    std::string scheme =
        StringOr(c, "prepend_scheme", BoolOr(c, "add_prefix_space", true) ? "always" : "never");
    if (scheme != "never") s.prefix = true;
  }
  return s;
}

using Merges = std::vector<std::pair<std::string, std::string>>;

// Byte-level BPE: the splitter the pre-tokenizer maps to, merges by rank.
absl::Status SetUpByteLevel(const JsonFile& file, const json* pre, const json& model,
                            const Merges& merges, Vocab* v) {
  v->model = VocabModel::kBpe;
  LLMC_ASSIGN_OR_RETURN(v->pre_name, ByteLevelPreTokenizer(file, pre));
  const tokenizer_internal::PreTokenizerConfig* config =
      tokenizer_internal::FindPreTokenizerConfig(v->pre_name);
  v->pre = config->pre;
  v->ignore_merges = BoolOr(&model, "ignore_merges", config->ignore_merges);
  v->add_bos = config->add_bos;
  v->clean_spaces = config->clean_spaces;
  v->merge_ranks.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank)
    v->merge_ranks.emplace(tokenizer_internal::MergeKey(merges[rank].first, merges[rank].second),
                           int32_t(rank));
  return absl::OkStatus();
}

// SentencePiece-style: each token scored by minus the rank of the first merge
// that builds it, so that SPM's highest-score-first order is BPE's merge
// order; tokens no merge builds come last.
void SetUpSentencePiece(const SpmShape& spm, const json& model, const Merges& merges, Vocab* v) {
  v->model = VocabModel::kSpm;
  v->add_space_prefix = spm.prefix;
  v->add_bos = true;
  v->scores.assign(v->tokens.size(), std::numeric_limits<float>::lowest());
  tokenizer_internal::StringMap<int32_t> ids;
  for (size_t i = 0; i < v->tokens.size(); ++i) ids.emplace(v->tokens[i], int32_t(i));
  for (size_t rank = merges.size(); rank-- > 0;) {
    auto it = ids.find(merges[rank].first + merges[rank].second);
    if (it != ids.end()) v->scores[it->second] = -float(rank);
  }
  if (BoolOr(&model, "byte_fallback", false)) {
    for (size_t i = 0; i < v->tokens.size(); ++i)
      if (v->attrs[i] == tokenizer_internal::kAttrNormal && IsByteToken(v->tokens[i]))
        v->attrs[i] = tokenizer_internal::kAttrByte;
  }
}

// The vocabulary of a tokenizer.json (+ tokenizer_config.json text, may be
// empty), not yet finalized.
absl::StatusOr<std::unique_ptr<Vocab>> BuildVocab(std::string_view json_text,
                                                  const std::string& name,
                                                  std::string_view config_json) {
  JsonFile file(name);
  LLMC_ASSIGN_OR_RETURN(json root, file.Parse(json_text));
  if (!root.is_object()) return file.WrongType("(top level)", "an object", root);
  LLMC_ASSIGN_OR_RETURN(const json* model, file.Object(root, "model", "model", /*required=*/true));
  std::string type = "BPE";
  LLMC_RETURN_IF_ERROR(file.OptionalString(*model, "type", "model.type", &type));
  if (type != "BPE")
    return file.Error("model.type",
                      absl::StrFormat("is '%s'; llmc supports BPE tokenizers only", type));

  auto v = std::make_unique<Vocab>();
  v->source = name;
  LLMC_RETURN_IF_ERROR(ReadVocab(file, *model, root, v.get()));
  LLMC_ASSIGN_OR_RETURN(auto merges, ReadMerges(file, *model));

  const json* normalizer = JsonFile::Member(root, "normalizer");
  const json* pre = JsonFile::Member(root, "pre_tokenizer");
  const json* decoder = JsonFile::Member(root, "decoder");
  const bool byte_level = AnyOfType(Components(pre, "pretokenizers"), "ByteLevel") ||
                          AnyOfType(Components(decoder, "decoders"), "ByteLevel");
  const SpmShape spm = DetectSpm(normalizer, pre, *model);

  std::string unk_token;
  if (const json* unk = JsonFile::Member(*model, "unk_token"); unk != nullptr && unk->is_string())
    unk_token = unk->get<std::string>();

  if (byte_level) {
    LLMC_RETURN_IF_ERROR(SetUpByteLevel(file, pre, *model, merges, v.get()));
  } else if (spm.spm) {
    SetUpSentencePiece(spm, *model, merges, v.get());
  } else {
    return file.Error(
        "pre_tokenizer",
        "is neither byte-level (ByteLevel) nor SentencePiece-style (byte_fallback, Metaspace or a "
        "▁ normalizer); llmc cannot tokenize like this model");
  }

  ConfigFields config;
  const std::string config_name = name.substr(0, name.rfind('/') + 1) + "tokenizer_config.json";
  if (!config_json.empty()) {
    LLMC_ASSIGN_OR_RETURN(config, ParseConfig(JsonFile(config_name), config_json));
  }
  // Without a config, take what the post-processor adds, then the usual names.
  std::string template_bos = TemplateBos(JsonFile::Member(root, "post_processor"));
  std::string bos = !config.bos_token.empty() ? config.bos_token : template_bos;
  std::string eos = config.eos_token;
  if (v->model == VocabModel::kSpm) {
    if (bos.empty()) bos = "<s>";
    if (eos.empty()) eos = "</s>";
  }
  auto lookup = [&](const std::string& text, const char* field, int32_t* id) -> absl::Status {
    if (text.empty()) return absl::OkStatus();
    for (size_t i = 0; i < v->tokens.size(); ++i) {
      if (v->tokens[i] == text) {
        *id = int32_t(i);
        return absl::OkStatus();
      }
    }
    // Only a configured token that is missing is an error; guessed names may be absent.
    if (field != nullptr)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s '%s' is not in the vocabulary", config_name, field, text));
    return absl::OkStatus();
  };
  LLMC_RETURN_IF_ERROR(lookup(bos, config.bos_token.empty() ? nullptr : "bos_token", &v->bos_id));
  LLMC_RETURN_IF_ERROR(lookup(eos, config.eos_token.empty() ? nullptr : "eos_token", &v->eos_id));
  LLMC_RETURN_IF_ERROR(lookup(unk_token, nullptr, &v->unk_id));
  if (v->unk_id >= 0 && v->model == VocabModel::kSpm)
    v->attrs[v->unk_id] = tokenizer_internal::kAttrUnknown;

  if (config.has_add_bos) {
    v->add_bos = config.add_bos;
  } else if (!template_bos.empty()) {
    v->add_bos = true;
  }
  if (v->bos_id < 0) v->add_bos = false;
  v->add_eos = config.add_eos && v->eos_id >= 0;
  v->chat_template = config.chat_template;
  return v;
}

// The file's bytes; NotFound when it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  LLMC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromTokenizerJson(
    std::string_view json_text, const std::string& name, std::string_view config_json) {
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Vocab> vocab, BuildVocab(json_text, name, config_json));
  return Create(std::move(vocab));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHFFolder(const std::string& folder) {
  std::string dir = folder.empty() || folder.back() == '/' ? folder : folder + "/";
  LLMC_ASSIGN_OR_RETURN(std::string tokenizer_json, ReadFile(dir + "tokenizer.json"));
  std::string config_json;
  if (auto config = ReadFile(dir + "tokenizer_config.json"); config.ok()) {
    config_json = std::move(*config);
  } else if (!absl::IsNotFound(config.status())) {
    return config.status();
  }
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Vocab> vocab,
                        BuildVocab(tokenizer_json, dir + "tokenizer.json", config_json));
  // Newer repositories keep the template in its own file.
  if (vocab->chat_template.empty()) {
    if (auto jinja = ReadFile(dir + "chat_template.jinja"); jinja.ok())
      vocab->chat_template = std::move(*jinja);
  }
  return Create(std::move(vocab));
}

}  // namespace llmc
