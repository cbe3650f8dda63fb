#include "llmc/runtime/tokenizer/tokenizer.h"

#include <utility>

#include "llmc/core/status_macros.h"
#include "merges.h"
#include "special_tokens.h"
#include "unicode.h"
#include "vocab.h"

namespace llmc {

using tokenizer_internal::BpeEncodeWord;
using tokenizer_internal::ByteLevelEncode;
using tokenizer_internal::Fragment;
using tokenizer_internal::SpmEncode;
using tokenizer_internal::Vocab;
using tokenizer_internal::VocabModel;

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // ▁

std::string EscapeSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// llama.cpp's clean_spaces passes over decoded text (from the tokenizers'
// clean_up_tokenization): " ?" " !" " ." " ," lose the space, " ' " loses
// both spaces, and " 's" " 'm" " 're" " 've" lose the space. Each pass
// compacts the buffer in place and reads the characters it has not yet
// overwritten, exactly as llama.cpp's loops do, so odd inputs such as
// "a ' ' b" come out the same.
std::string CleanSpaces(std::string s) {
  auto space_before = [](const std::string& t, size_t i) { return t[i - 1] == ' '; };
  // Pass 1: punctuation.
  size_t n = s.size(), total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    char x = s[i];
    if (space_before(s, i) && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    s[total++] = x;
  }
  // Pass 2: a lone apostrophe between spaces.
  n = total, total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    char x = s[i];
    if (x == '\'' && i + 1 < n && space_before(s, i) && s[i + 1] == ' ') {
      --total;
      s[++i] = '\0';  // the space after is skipped (and no longer reads as one)
    }
    s[total++] = x;
  }
  // Pass 3: contractions.
  n = total, total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    char x = s[i];
    if (space_before(s, i) && x == '\'' && i + 1 < n) {
      char a = s[i + 1];
      bool b_re_ve = i + 2 < n && ((a == 'r' && s[i + 2] == 'e') || (a == 'v' && s[i + 2] == 'e'));
      if (a == 's' || a == 'm' || b_re_ve) --total;
    }
    s[total++] = x;
  }
  s.resize(total);
  return s;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Vocab> vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(std::unique_ptr<Vocab> vocab) {
  LLMC_RETURN_IF_ERROR(tokenizer_internal::FinalizeVocab(vocab.get()));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(vocab)));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Vocab& v = *vocab_;
  std::vector<int32_t> out;
  if (add_bos && v.add_bos) out.push_back(v.bos_id);
  // SentencePiece prefixes a space to the text and to text after a special token.
  bool after_special = true;
  for (const Fragment& f : tokenizer_internal::SplitSpecialTokens(v, text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (v.model == VocabModel::kSpm) {
      std::string escaped =
          v.add_space_prefix && after_special ? std::string(kSpmSpace) : std::string();
      escaped += EscapeSpaces(f.text);
      SpmEncode(v, escaped, &out);
    } else {
      for (const std::string& word : PreTokenize(v.pre, f.text))
        BpeEncodeWord(v, ByteLevelEncode(word), &out);
    }
    after_special = false;
  }
  if (add_bos && v.add_eos) out.push_back(v.eos_id);
  return out;
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  const Vocab& v = *vocab_;
  if (id < 0 || id >= v.size()) return "";
  using tokenizer_internal::kAttrControl;
  using tokenizer_internal::kAttrUnknown;
  if (!render_special && (v.attrs[id] & (kAttrControl | kAttrUnknown))) return "";
  return v.pieces[id];
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids, bool render_special) const {
  const Vocab& v = *vocab_;
  std::string out;
  // The space SentencePiece encoding put in front of the text is dropped
  // from the first token that renders text. (llama.cpp drops it from the
  // first token only, so an unrendered BOS would keep it; this way
  // Decode(Encode(s, add_bos=true, ..)) gives back s.)
  bool strip_space = v.add_space_prefix;
  for (int32_t id : ids) {
    std::string piece = TokenToPiece(id, render_special);
    if (strip_space && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip_space = false;
    }
    out += piece;
  }
  return v.clean_spaces ? CleanSpaces(std::move(out)) : out;
}

int32_t Tokenizer::TokenId(std::string_view text) const { return vocab_->Find(text); }

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < vocab_->size() ? vocab_->tokens[id] : kEmpty;
}

int32_t Tokenizer::bos_id() const { return vocab_->bos_id; }
int32_t Tokenizer::eos_id() const { return vocab_->eos_id; }
bool Tokenizer::add_bos() const { return vocab_->add_bos; }
bool Tokenizer::IsEndOfGeneration(int32_t id) const { return vocab_->eog_ids.contains(id); }
int64_t Tokenizer::vocab_size() const { return vocab_->size(); }
const std::string& Tokenizer::chat_template() const { return vocab_->chat_template; }
const std::string& Tokenizer::pre_tokenizer() const { return vocab_->pre_name; }

TokenizerKind Tokenizer::kind() const {
  return vocab_->model == VocabModel::kSpm ? TokenizerKind::kSentencePiece
                                           : TokenizerKind::kByteLevelBpe;
}

}  // namespace llmc
