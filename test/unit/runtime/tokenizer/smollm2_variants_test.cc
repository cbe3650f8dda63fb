// llama.cpp as the reference for the tokenizer paths SmolLM2 itself does not
// take: its vocabulary with other pre-tokenizers (gpt-2, llama-bpe, qwen2,
// default) and recast as a SentencePiece model. The variants are built here
// from the GGUF exactly as scripts/gen-tokenizer-goldens.py builds the files
// it runs llama-cpp-python on (see its module doc). The byte-level variants
// are also written as the tokenizer.json Hugging Face would ship for them, so
// that the tokenizer.json loader meets a real 49k vocabulary and its merges.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/format/gguf_builder.h"
#include "absl/strings/str_format.h"
#include "golden_cases.h"
#include "llmc/core/format/gguf.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {
namespace {

using testing::GgufBuilder;

// GPT-2's byte-level character -> byte; -1 for other codepoints.
int ByteOfCodepoint(uint32_t cp) {
  auto kept = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  if (cp < 256) return kept(int(cp)) ? int(cp) : -1;
  int n = 256;
  for (int b = 0; b < 256; ++b)
    if (!kept(b) && uint32_t(n++) == cp) return b;
  return -1;
}

// Strict UTF-8 decoding to codepoints (as Python's bytes.decode); false if invalid.
bool DecodeStrict(const std::string& s, std::vector<uint32_t>* out) {
  for (size_t i = 0; i < s.size();) {
    uint8_t b = uint8_t(s[i]);
    int len = b < 0x80             ? 1
              : (b & 0xE0) == 0xC0 ? 2
              : (b & 0xF0) == 0xE0 ? 3
              : (b & 0xF8) == 0xF0 ? 4
                                   : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      uint8_t c = uint8_t(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out->push_back(cp);
    i += len;
  }
  return true;
}

// The bytes a byte-level token stands for, or false.
bool ByteLevelBytes(const std::string& token, std::string* bytes) {
  std::vector<uint32_t> cps;
  if (!DecodeStrict(token, &cps)) return false;
  for (uint32_t cp : cps) {
    int b = ByteOfCodepoint(cp);
    if (b < 0) return false;
    bytes->push_back(char(b));
  }
  return true;
}

std::string ReplaceSpaces(const std::string& s) {
  std::string out;
  for (char c : s) out += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  return out;
}

// Copies the tokenizer metadata of `base`, minus `skip`ped keys.
void CopyTokenizerKeys(const GgufFile& base, GgufBuilder* b, const std::vector<std::string>& skip) {
  auto skipped = [&](const std::string& k) {
    return std::find(skip.begin(), skip.end(), k) != skip.end();
  };
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.pre"})
    if (!skipped(key)) b->Str(key, *base.GetString(key));
  if (!skipped("tokenizer.ggml.tokens"))
    b->StrArray("tokenizer.ggml.tokens", **base.GetStringArray("tokenizer.ggml.tokens"));
  if (!skipped("tokenizer.ggml.merges"))
    b->StrArray("tokenizer.ggml.merges", **base.GetStringArray("tokenizer.ggml.merges"));
  if (!skipped("tokenizer.ggml.token_type")) {
    const std::vector<int64_t>& types = **base.GetIntArray("tokenizer.ggml.token_type");
    b->Array("tokenizer.ggml.token_type", GgufType::kInt32,
             std::vector<int32_t>(types.begin(), types.end()));
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"})
    if (!skipped(key)) b->U32(key, uint32_t(*base.GetInt(key)));
  for (const char* key : {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix"})
    if (!skipped(key)) b->Bool(key, *base.GetBool(key));
}

// The SentencePiece recast of the vocabulary (gen-tokenizer-goldens.py, spm_variant).
void BuildSpmVariant(const GgufFile& base, GgufBuilder* b) {
  const std::vector<std::string>& tokens = **base.GetStringArray("tokenizer.ggml.tokens");
  const std::vector<int64_t>& types = **base.GetIntArray("tokenizer.ggml.token_type");
  std::vector<std::string> pieces;
  std::vector<int32_t> new_types;
  std::vector<float> scores;
  std::set<std::string> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string piece;
    int32_t type = int32_t(types[i]);
    bool ok = true;
    if (type == 3) {
      piece = tokens[i];
    } else {
      std::string bytes;
      std::vector<uint32_t> cps;
      ok = ByteLevelBytes(tokens[i], &bytes) && DecodeStrict(bytes, &cps);
      piece = ReplaceSpaces(bytes);
    }
    float score = type == 3 ? 0.0f : -float(i);
    if (!ok || seen.count(piece)) piece = absl::StrFormat("[UNUSED_%d]", i), type = 5, score = 0.0f;
    seen.insert(piece);
    pieces.push_back(piece);
    new_types.push_back(type);
    scores.push_back(score);
  }
  for (int byte = 0; byte < 256; ++byte) {
    pieces.push_back(absl::StrFormat("<0x%02X>", byte));
    new_types.push_back(6);
    scores.push_back(0.0f);
  }
  CopyTokenizerKeys(base, b,
                    {"tokenizer.ggml.merges", "tokenizer.ggml.pre",
                     "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.add_bos_token",
                     "tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"});
  b->Str("tokenizer.ggml.model", "llama");
  b->StrArray("tokenizer.ggml.tokens", pieces);
  b->Array("tokenizer.ggml.scores", GgufType::kFloat32, scores);
  b->Array("tokenizer.ggml.token_type", GgufType::kInt32, new_types);
  b->Bool("tokenizer.ggml.add_bos_token", true);
}

class SmolLM2Variants : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    auto gguf = GgufFile::Open(testing::SmolLM2Path());
    if (gguf.ok()) base_ = std::move(*gguf).release();
  }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }
  void SetUp() override {
    if (base_ == nullptr) {
      std::cerr << testing::MissingModelBanner();
      GTEST_SKIP() << "SmolLM2 GGUF not found at " << testing::SmolLM2Path();
    }
  }
  static GgufFile* base_;
};
GgufFile* SmolLM2Variants::base_ = nullptr;

TEST_P(SmolLM2Variants, IdsMatchLlamaCpp) {
  const std::string variant = GetParam();
  GgufBuilder b;
  if (variant == "as-spm") {
    BuildSpmVariant(*base_, &b);
  } else {
    CopyTokenizerKeys(*base_, &b, {"tokenizer.ggml.pre"});
    b.Str("tokenizer.ggml.pre", variant.substr(4));
  }
  std::vector<uint8_t> bytes = b.Build();
  auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), variant + ".gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::vector<testing::GoldenCase> cases =
      testing::LoadGoldenCases("smollm2_" + variant + "_expected.jsonl");
  ASSERT_GE(cases.size(), 300u);
  testing::ExpectIdsMatch(**tok, cases, "SmolLM2 " + variant);
  testing::ExpectDecodeMatches(**tok, cases, "SmolLM2 " + variant);
  // gpt-2, llama-bpe and default clean up spaces when decoding, so text such
  // as "a ?" does not round-trip there (in llama.cpp either).
  if (variant == "pre-qwen2" || variant == "as-spm") {
    EXPECT_GT(testing::ExpectRoundTrips(**tok, cases, "SmolLM2 " + variant), 300);
  }
}

// The tokenizer.json of the vocabulary with the pre-tokenizer `pre` (a
// pre_tokenizer JSON value).
std::string TokenizerJson(const GgufFile& base, const nlohmann::json& pre) {
  using nlohmann::json;
  const std::vector<std::string>& tokens = **base.GetStringArray("tokenizer.ggml.tokens");
  const std::vector<int64_t>& types = **base.GetIntArray("tokenizer.ggml.token_type");
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    if (types[i] == 3) added.push_back({{"id", i}, {"content", tokens[i]}, {"special", true}});
  }
  json j = json::object();
  j["added_tokens"] = added;
  j["pre_tokenizer"] = pre;
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"},
                {"vocab", vocab},
                {"merges", **base.GetStringArray("tokenizer.ggml.merges")}};
  return j.dump();
}

nlohmann::json HfPreTokenizer(const std::string& variant) {
  using nlohmann::json;
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  if (variant == "pre-gpt-2") return byte_level;
  if (variant == "smollm")
    return {{"type", "Sequence"},
            {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}};
  byte_level["use_regex"] = false;
  const char* regex =
      variant == "pre-llama-bpe"
          ? R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"
          : R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", regex}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
}

class SmolLM2TokenizerJson : public SmolLM2Variants {};

TEST_P(SmolLM2TokenizerJson, IdsMatchLlamaCpp) {
  const std::string variant = GetParam();
  auto tok = Tokenizer::FromTokenizerJson(
      TokenizerJson(*base_, HfPreTokenizer(variant)), variant + "/tokenizer.json",
      R"({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": false})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::string golden =
      variant == "smollm" ? "smollm2_expected.jsonl" : "smollm2_" + variant + "_expected.jsonl";
  std::vector<testing::GoldenCase> cases = testing::LoadGoldenCases(golden);
  ASSERT_GE(cases.size(), 300u);
  testing::ExpectIdsMatch(**tok, cases, "SmolLM2 tokenizer.json " + variant);
}

// The SentencePiece recast as a Llama-2-style tokenizer.json: BPE with
// byte_fallback whose merges are every split of each piece into two pieces,
// ordered by the piece's score, as Hugging Face's SentencePiece converter
// writes them.
TEST_F(SmolLM2Variants, SentencePieceTokenizerJsonMatchesLlamaCpp) {
  using nlohmann::json;
  GgufBuilder b;
  BuildSpmVariant(*base_, &b);
  std::vector<uint8_t> bytes = b.Build();
  auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), "as-spm.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const std::vector<std::string>& pieces = **(*gguf)->GetStringArray("tokenizer.ggml.tokens");
  const std::vector<int64_t>& types = **(*gguf)->GetIntArray("tokenizer.ggml.token_type");
  std::map<std::string, size_t> ids;
  for (size_t i = 0; i < pieces.size(); ++i)
    ids.emplace(pieces[i].substr(0, pieces[i].find('\0')), i);
  json vocab = json::object(), added = json::array(), merges = json::array();
  for (const auto& [piece, id] : ids) vocab[piece] = id;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (types[i] == 3) added.push_back({{"id", i}, {"content", pieces[i]}, {"special", true}});
    if (types[i] != 1) continue;
    std::vector<std::pair<size_t, size_t>> splits;
    const std::string& p = pieces[i];
    for (size_t cut = 1; cut < p.size(); ++cut) {
      if ((uint8_t(p[cut]) & 0xC0) == 0x80) continue;  // inside a character
      auto l = ids.find(p.substr(0, cut)), r = ids.find(p.substr(cut));
      if (l != ids.end() && r != ids.end() && types[l->second] == 1 && types[r->second] == 1)
        splits.push_back({l->second, r->second});
    }
    std::sort(splits.begin(), splits.end());
    for (auto [l, r] : splits) merges.push_back(json::array({pieces[l], pieces[r]}));
  }
  std::string sp = "\xE2\x96\x81";
  json j = json::object();
  j["added_tokens"] = added;
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       json::array({json{{"type", "Prepend"}, {"prepend", sp}},
                    json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}})}};
  j["model"] = {{"type", "BPE"}, {"byte_fallback", true}, {"vocab", vocab}, {"merges", merges}};
  auto tok = Tokenizer::FromTokenizerJson(
      j.dump(), "as-spm/tokenizer.json",
      R"({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": true})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  testing::ExpectIdsMatch(**tok, testing::LoadGoldenCases("smollm2_as-spm_expected.jsonl"),
                          "SmolLM2 as-spm tokenizer.json");
}

std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Goldens, SmolLM2Variants,
                         ::testing::Values("pre-gpt-2", "pre-llama-bpe", "pre-qwen2", "pre-default",
                                           "as-spm"),
                         ParamName);
// "smollm": the model's own pre-tokenizer (Digits + ByteLevel).
INSTANTIATE_TEST_SUITE_P(Goldens, SmolLM2TokenizerJson,
                         ::testing::Values("smollm", "pre-gpt-2", "pre-llama-bpe", "pre-qwen2"),
                         ParamName);

}  // namespace
}  // namespace llmc
