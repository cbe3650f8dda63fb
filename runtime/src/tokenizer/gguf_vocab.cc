// Tokenizer::FromGguf: the vocabulary from GGUF's tokenizer.ggml.* metadata,
// with llama.cpp's defaults for whatever the file leaves out.
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "llmc/core/format/gguf.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/tokenizer/tokenizer.h"
#include "pre_configs.h"
#include "vocab.h"

namespace llmc {

using tokenizer_internal::AttrFromGgufTokenType;
using tokenizer_internal::MergeKey;
using tokenizer_internal::Vocab;
using tokenizer_internal::VocabModel;

namespace {

constexpr char kModelKey[] = "tokenizer.ggml.model";
constexpr char kPreKey[] = "tokenizer.ggml.pre";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
constexpr char kScoresKey[] = "tokenizer.ggml.scores";
constexpr char kTokenTypeKey[] = "tokenizer.ggml.token_type";
constexpr char kMergesKey[] = "tokenizer.ggml.merges";

absl::Status FieldError(const GgufFile& gguf, std::string_view key, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s %s", gguf.path(), std::string(key), why));
}

// An optional integer key holding a token id; ids outside the vocabulary
// keep the default (llama.cpp warns and does the same).
absl::Status ReadTokenId(const GgufFile& gguf, std::string_view key, int64_t vocab_size,
                         int32_t* id) {
  if (gguf.Find(key) == nullptr) return absl::OkStatus();
  LLMC_ASSIGN_OR_RETURN(int64_t v, gguf.GetInt(key));
  if (v >= 0 && v < vocab_size) *id = int32_t(v);
  return absl::OkStatus();
}

absl::Status ReadBool(const GgufFile& gguf, std::string_view key, bool* out) {
  if (gguf.Find(key) == nullptr) return absl::OkStatus();
  LLMC_ASSIGN_OR_RETURN(*out, gguf.GetBool(key));
  return absl::OkStatus();
}

absl::Status ReadScores(const GgufFile& gguf, size_t n, Vocab* v) {
  const GgufValue* value = gguf.Find(kScoresKey);
  if (value == nullptr) return absl::OkStatus();
  // llama.cpp accepts float32 or int32 scores.
  if (value->type == GgufType::kArray && value->array_type != GgufType::kFloat32 &&
      value->array_type != GgufType::kFloat64) {
    LLMC_ASSIGN_OR_RETURN(const std::vector<int64_t>* ints, gguf.GetIntArray(kScoresKey));
    if (ints->size() < n)
      return FieldError(gguf, kScoresKey,
                        absl::StrFormat("has %d entries for %d tokens", ints->size(), n));
    v->scores.assign(ints->begin(), ints->begin() + n);
    return absl::OkStatus();
  }
  LLMC_ASSIGN_OR_RETURN(const std::vector<double>* floats, gguf.GetFloatArray(kScoresKey));
  if (floats->size() < n)
    return FieldError(gguf, kScoresKey,
                      absl::StrFormat("has %d entries for %d tokens", floats->size(), n));
  v->scores.reserve(n);
  for (size_t i = 0; i < n; ++i) v->scores.push_back(float((*floats)[i]));
  return absl::OkStatus();
}

absl::Status ReadMerges(const GgufFile& gguf, Vocab* v) {
  if (gguf.Find(kMergesKey) == nullptr)
    return FieldError(gguf, kMergesKey, "is missing (a gpt2 tokenizer needs merges)");
  LLMC_ASSIGN_OR_RETURN(const std::vector<std::string>* merges, gguf.GetStringArray(kMergesKey));
  v->merge_ranks.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const std::string& m = (*merges)[rank];
    // "left right"; the separator is the first space after the first byte,
    // so that a left part " " (a literal space token) still splits.
    size_t space = m.find(' ', 1);
    if (space == std::string::npos) continue;  // llama.cpp keeps such lines as an unusable pair
    std::string_view merge = m;
    v->merge_ranks.emplace(MergeKey(merge.substr(0, space), merge.substr(space + 1)),
                           int32_t(rank));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  auto v = std::make_unique<Vocab>();
  v->source = gguf.path();

  LLMC_ASSIGN_OR_RETURN(std::string model, gguf.GetString(kModelKey));
  if (model == "gpt2") {
    v->model = VocabModel::kBpe;
    v->bos_id = v->eos_id = 11;  // llama.cpp's defaults for gpt2 files, overridden below
    v->clean_spaces = true;
  } else if (model == "llama") {
    v->model = VocabModel::kSpm;
    v->bos_id = 1, v->eos_id = 2, v->unk_id = 0;
    v->add_bos = true;
    v->add_space_prefix = true;
  } else {
    return FieldError(
        gguf, kModelKey,
        absl::StrFormat(
            "is '%s'; llmc supports 'gpt2' (byte-level BPE) and 'llama' (SentencePiece)", model));
  }

  LLMC_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens, gguf.GetStringArray(kTokensKey));
  const size_t n = tokens->size();
  v->tokens.reserve(n);
  // llama.cpp reads token texts as C strings: a text with a NUL byte ends
  // there (and an empty one is renamed by FinalizeVocab). Same here, so that
  // such tokens match what llama.cpp matches.
  for (const std::string& t : *tokens) v->tokens.push_back(t.substr(0, t.find('\0')));
  LLMC_RETURN_IF_ERROR(ReadScores(gguf, n, v.get()));
  if (gguf.Find(kTokenTypeKey) != nullptr) {
    LLMC_ASSIGN_OR_RETURN(const std::vector<int64_t>* types, gguf.GetIntArray(kTokenTypeKey));
    if (types->size() < n)
      return FieldError(gguf, kTokenTypeKey,
                        absl::StrFormat("has %d entries for %d tokens", types->size(), n));
    v->attrs.reserve(n);
    for (size_t i = 0; i < n; ++i) v->attrs.push_back(AttrFromGgufTokenType((*types)[i]));
  }

  if (v->model == VocabModel::kBpe) {
    LLMC_RETURN_IF_ERROR(ReadMerges(gguf, v.get()));
    if (gguf.Find(kPreKey) != nullptr) {
      LLMC_ASSIGN_OR_RETURN(v->pre_name, gguf.GetString(kPreKey));
    }
    const tokenizer_internal::PreTokenizerConfig* pre =
        tokenizer_internal::FindPreTokenizerConfig(v->pre_name);
    if (pre == nullptr) {
      return FieldError(gguf, kPreKey,
                        absl::StrFormat("'%s' is not a pre-tokenizer llmc knows (known: %s)",
                                        v->pre_name, tokenizer_internal::KnownPreTokenizerNames()));
    }
    v->pre = pre->pre;
    v->ignore_merges = pre->ignore_merges;
    v->add_bos = pre->add_bos;
    v->clean_spaces = pre->clean_spaces;
    if (v->pre_name.empty()) v->pre_name = "default";
  }
  LLMC_RETURN_IF_ERROR(ReadBool(gguf, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix));

  const int64_t size = int64_t(n);
  LLMC_RETURN_IF_ERROR(ReadTokenId(gguf, "tokenizer.ggml.bos_token_id", size, &v->bos_id));
  LLMC_RETURN_IF_ERROR(ReadTokenId(gguf, "tokenizer.ggml.eos_token_id", size, &v->eos_id));
  LLMC_RETURN_IF_ERROR(ReadTokenId(gguf, "tokenizer.ggml.unknown_token_id", size, &v->unk_id));
  LLMC_RETURN_IF_ERROR(ReadBool(gguf, "tokenizer.ggml.add_bos_token", &v->add_bos));
  LLMC_RETURN_IF_ERROR(ReadBool(gguf, "tokenizer.ggml.add_eos_token", &v->add_eos));
  if (gguf.Find("tokenizer.chat_template") != nullptr) {
    LLMC_ASSIGN_OR_RETURN(v->chat_template, gguf.GetString("tokenizer.chat_template"));
  }
  return Create(std::move(v));
}

}  // namespace llmc
