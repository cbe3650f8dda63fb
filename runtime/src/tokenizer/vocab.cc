#include "vocab.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/strings/str_format.h"
#include "unicode.h"

namespace llmc::tokenizer_internal {
namespace {

// Tokens llama.cpp treats as end of generation (and therefore as control
// tokens, whatever type the file gives them): llama-vocab.cpp's name list.
constexpr std::string_view kEndOfGenerationNames[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜>
    "[e~[",
};

// Fill-in-the-middle markers, likewise forced to control.
constexpr std::string_view kFillInTheMiddleNames[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>",      "\xE2\x96\x81<PRE>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>",      "\xE2\x96\x81<SUF>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>",      "\xE2\x96\x81<MID>",
    "<|fim_pad|>",    "<fim-pad>",    "<fim_pad>",    "<PAD>",      "<|fim_repo|>",
    "<|repo_name|>",  "<fim-repo>",   "<REPO>",       "<reponame>", "<|file_sep|>",
};

bool IsOneOf(std::string_view text, const auto& names) {
  return std::find(std::begin(names), std::end(names), text) != std::end(names);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xXX>" token text.
std::optional<uint8_t> ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  int hi = HexDigit(text[3]), lo = HexDigit(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return uint8_t(hi * 16 + lo);
}

// Byte-level BPE token text -> raw bytes. A codepoint outside the byte
// mapping is kept visible the way llama.cpp's llama_decode_text marks it.
std::string DecodeByteLevel(const std::string& text) {
  std::string out;
  for (uint32_t cp : DecodeUtf8(text)) {
    if (std::optional<uint8_t> b = CodepointToByte(cp)) {
      out.push_back(char(*b));
      continue;
    }
    std::string utf8;
    AppendUtf8(cp, &utf8);
    out += "[UNK_BYTE_0x";
    for (char c : utf8) out += absl::StrFormat("%02x", uint8_t(c));
    out += text + "]";
  }
  return out;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(from, start)) != std::string_view::npos;
       start = pos + from.size()) {
    out.append(s.substr(start, pos - start));
    out.append(to);
  }
  out.append(s.substr(start));
  return out;
}

// What token `id` decodes to when special tokens are rendered.
std::string RenderPiece(const Vocab& v, int32_t id) {
  const std::string& text = v.tokens[id];
  const uint32_t attr = v.attrs[id];
  if (attr & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    return v.model == VocabModel::kBpe ? DecodeByteLevel(text)
                                       : ReplaceAll(text, "\xE2\x96\x81", " ");
  }
  if (attr & kAttrByte) {
    if (std::optional<uint8_t> b = ParseByteToken(text)) return std::string(1, char(*b));
  }
  return "";  // unused / undefined tokens decode to nothing
}

}  // namespace

uint32_t AttrFromGgufTokenType(int64_t type) {
  switch (GgufTokenType(type)) {
    case GgufTokenType::kNormal:
      return kAttrNormal;
    case GgufTokenType::kUnknown:
      return kAttrUnknown;
    case GgufTokenType::kControl:
      return kAttrControl;
    case GgufTokenType::kUserDefined:
      return kAttrUserDefined;
    case GgufTokenType::kUnused:
      return kAttrUnused;
    case GgufTokenType::kByte:
      return kAttrByte;
    case GgufTokenType::kUndefined:
      break;
  }
  return kAttrUndefined;
}

std::string MergeKey(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(4 + left.size() + right.size());
  const uint32_t n = uint32_t(left.size());
  key.append(reinterpret_cast<const char*>(&n), sizeof(n));
  key.append(left);
  key.append(right);
  return key;
}

int32_t Vocab::Find(std::string_view text) const {
  auto it = token_to_id.find(text);
  return it == token_to_id.end() ? -1 : it->second;
}

int32_t Vocab::ByteToken(uint8_t byte) const {
  if (model == VocabModel::kBpe) {
    std::string utf8;
    AppendUtf8(ByteToCodepoint(byte), &utf8);
    return Find(utf8);
  }
  int32_t id = Find(absl::StrFormat("<0x%02X>", byte));
  return id >= 0 ? id : Find(std::string(1, char(byte)));
}

absl::Status FinalizeVocab(Vocab* v) {
  const size_t n = v->tokens.size();
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", v->source, why));
  };
  if (n == 0) return fail("the vocabulary is empty");
  if (n > size_t(INT32_MAX)) return fail("the vocabulary has more than 2^31 tokens");
  if (v->scores.empty()) v->scores.assign(n, 0.0f);
  if (v->attrs.empty()) v->attrs.assign(n, kAttrNormal);
  if (v->scores.size() != n || v->attrs.size() != n)
    return fail("scores or token types do not match the tokens");

  v->token_to_id.clear();
  v->token_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp renames empty tokens rather than refusing the file.
    if (v->tokens[i].empty()) v->tokens[i] = absl::StrFormat("[EMPTY_%d]", i);
    auto [it, inserted] = v->token_to_id.emplace(v->tokens[i], int32_t(i));
    if (!inserted)
      return fail(
          absl::StrFormat("duplicate token '%s' has ids %d and %d", v->tokens[i], it->second, i));
  }
  for (int32_t* id : {&v->bos_id, &v->eos_id, &v->unk_id}) {
    if (*id >= int64_t(n)) *id = -1;  // out of range: disabled, as llama.cpp does
  }
  if (v->add_bos && v->bos_id < 0) return fail("the model adds BOS but has no BOS token");
  if (v->add_eos && v->eos_id < 0) return fail("the model adds EOS but has no EOS token");

  v->eog_ids.clear();
  if (v->eos_id >= 0) v->eog_ids.insert(v->eos_id);
  for (size_t i = 0; i < n; ++i) {
    const bool eog = IsOneOf(v->tokens[i], kEndOfGenerationNames);
    if (eog) v->eog_ids.insert(int32_t(i));
    if (eog || IsOneOf(v->tokens[i], kFillInTheMiddleNames)) v->attrs[i] |= kAttrControl;
  }

  v->special_tokens.clear();
  for (size_t i = 0; i < n; ++i) {
    if (v->attrs[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v->special_tokens.push_back(int32_t(i));
  }
  // Longest first, so that a special token containing another wins.
  std::stable_sort(v->special_tokens.begin(), v->special_tokens.end(),
                   [&](int32_t a, int32_t b) { return v->tokens[a].size() > v->tokens[b].size(); });

  v->pieces.resize(n);
  for (size_t i = 0; i < n; ++i) v->pieces[i] = RenderPiece(*v, int32_t(i));
  return absl::OkStatus();
}

}  // namespace llmc::tokenizer_internal
