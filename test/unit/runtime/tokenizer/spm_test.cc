// SentencePiece-style tokenization on a handmade vocabulary with byte
// fallback: score-ordered merges, the ▁ prefix, <0xXX> tokens, and the same
// vocabulary loaded from GGUF and from a Llama-2-style tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/format/gguf_builder.h"
#include "absl/strings/str_format.h"
#include "llmc/core/format/gguf.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {
namespace {

using Ids = std::vector<int32_t>;

constexpr char kSp[] = "\xE2\x96\x81";  // ▁

struct Piece {
  std::string text;
  float score;
};

// Normal pieces after <unk> <s> </s> and the 256 byte tokens (ids 259..).
// Higher score merges first.
std::vector<Piece> NormalPieces() {
  std::string s = kSp;
  return {{s, -10},        {"h", -11},  {"e", -12},          {"l", -13},    {"o", -14},
          {"w", -15},      {"r", -16},  {"d", -17},          {s + "h", -1}, {"ll", -2},
          {s + "he", -3},  {"llo", -4}, {s + "hello", -5},   {s + "w", -6}, {"or", -7},
          {s + "wor", -8}, {"ld", -9},  {s + "world", -9.5f}};
}
constexpr int32_t kFirstNormal = 259;
int32_t IdOf(const std::string& text) {
  std::vector<Piece> p = NormalPieces();
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i].text == text) return kFirstNormal + int32_t(i);
  return -1;
}
int32_t ByteId(uint8_t b) { return 3 + b; }

std::vector<std::string> AllTokens() {
  std::vector<std::string> t = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) t.push_back(absl::StrFormat("<0x%02X>", b));
  for (const Piece& p : NormalPieces()) t.push_back(p.text);
  return t;
}

std::unique_ptr<Tokenizer> GgufSpm(bool add_space_prefix = true) {
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) scores.push_back(0), types.push_back(6);
  for (const Piece& p : NormalPieces()) scores.push_back(p.score), types.push_back(1);
  testing::GgufBuilder b;
  b.Str("tokenizer.ggml.model", "llama").StrArray("tokenizer.ggml.tokens", AllTokens());
  b.Array("tokenizer.ggml.scores", GgufType::kFloat32, scores);
  b.Array("tokenizer.ggml.token_type", GgufType::kInt32, types);
  b.U32("tokenizer.ggml.bos_token_id", 1).U32("tokenizer.ggml.eos_token_id", 2);
  b.U32("tokenizer.ggml.unknown_token_id", 0);
  if (!add_space_prefix) b.Bool("tokenizer.ggml.add_space_prefix", false);
  auto bytes = b.Build();
  auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), "spm.gguf");
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**gguf);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

// The same vocabulary as Llama 2's tokenizer.json shapes it: BPE with
// byte_fallback, merges in the order of the GGUF scores.
std::string HfSpmJson() {
  using nlohmann::json;
  json vocab = json::object();
  std::vector<std::string> tokens = AllTokens();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  std::string s = kSp;
  json merges = {s + " h", "l l", s + "h e",  "ll o", s + "he llo",
                 s + " w", "o r", s + "w or", "l d",  s + "wor ld"};
  json j = json::object();
  j["version"] = "1.0";
  j["added_tokens"] = json::array();
  for (int id : {0, 1, 2})
    j["added_tokens"].push_back({{"id", id}, {"content", tokens[id]}, {"special", true}});
  json prepend = {{"type", "Prepend"}, {"prepend", s}};
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", s}};
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({prepend, replace})}};
  j["pre_tokenizer"] = nullptr;
  json bos = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  json seq = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", json::array({bos, seq})}};
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders", json::array({json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}})}};
  j["model"] = {{"type", "BPE"},
                {"unk_token", "<unk>"},
                {"byte_fallback", true},
                {"vocab", vocab},
                {"merges", merges}};
  return j.dump();
}

TEST(Spm, MergesFollowScoresWithSpacePrefix) {
  auto tok = GgufSpm();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), TokenizerKind::kSentencePiece);
  EXPECT_TRUE(tok->add_bos());
  std::string s = kSp;
  EXPECT_EQ(tok->Encode("hello world", /*add_bos=*/true, false),
            (Ids{1, IdOf(s + "hello"), IdOf(s + "world")}));
  EXPECT_EQ(tok->Encode("hello world", /*add_bos=*/false, false),
            (Ids{IdOf(s + "hello"), IdOf(s + "world")}));
  EXPECT_EQ(tok->Encode("", true, false), (Ids{1}));
}

TEST(Spm, UnknownCharactersFallBackToByteTokens) {
  auto tok = GgufSpm();
  ASSERT_NE(tok, nullptr);
  // "i" and "€" (E2 82 AC) are not pieces.
  EXPECT_EQ(
      tok->Encode("hi\xE2\x82\xAC", false, false),
      (Ids{IdOf(std::string(kSp) + "h"), ByteId('i'), ByteId(0xE2), ByteId(0x82), ByteId(0xAC)}));
  EXPECT_EQ(tok->Decode(tok->Encode("hi\xE2\x82\xAC", true, false)), "hi\xE2\x82\xAC");
}

TEST(Spm, WithoutSpacePrefix) {
  auto tok = GgufSpm(/*add_space_prefix=*/false);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("hello", false, false), (Ids{IdOf("h"), IdOf("e"), IdOf("llo")}));
  EXPECT_EQ(tok->Decode(Ids{IdOf("h"), IdOf("e"), IdOf("llo")}), "hello");
}

TEST(Spm, SpecialTokensRestartTheSpacePrefix) {
  auto tok = GgufSpm();
  ASSERT_NE(tok, nullptr);
  std::string s = kSp;
  EXPECT_EQ(tok->Encode("<s>hello</s>", false, /*parse_special=*/true),
            (Ids{1, IdOf(s + "hello"), 2}));
  Ids plain = tok->Encode("<s>hello</s>", false, /*parse_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(tok->Decode(plain), "<s>hello</s>");
}

TEST(Spm, DecodeDropsThePrefixSpaceOnce) {
  auto tok = GgufSpm();
  ASSERT_NE(tok, nullptr);
  std::string s = kSp;
  Ids ids = {1, IdOf(s + "hello"), IdOf(s + "world"), 2};
  EXPECT_EQ(tok->Decode(ids), "hello world");
  EXPECT_EQ(tok->Decode(ids, /*render_special=*/true), "<s> hello world</s>");
  EXPECT_EQ(tok->Decode(Ids{ByteId('\n')}), "\n");
}

TEST(Spm, MissingByteTokensBecomeUnk) {
  testing::GgufBuilder b;
  b.Str("tokenizer.ggml.model", "llama")
      .StrArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", kSp, "a"});
  auto bytes = b.Build();
  auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), "nobytes.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->Encode("ab", false, false), (Ids{3, 4, 0}));
}

TEST(Spm, TokenizerJsonGivesTheSameIdsAsGguf) {
  auto gguf = GgufSpm();
  ASSERT_NE(gguf, nullptr);
  auto hf = Tokenizer::FromTokenizerJson(HfSpmJson(), "llama2/tokenizer.json");
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->kind(), TokenizerKind::kSentencePiece);
  EXPECT_EQ((*hf)->bos_id(), 1);
  EXPECT_EQ((*hf)->eos_id(), 2);
  EXPECT_TRUE((*hf)->add_bos());
  for (const char* text :
       {"hello world", "hi\xE2\x82\xAC", "  hello  world ", "<s>hello</s>", "wor ld\nhello", ""}) {
    for (bool special : {false, true}) {
      EXPECT_EQ((*hf)->Encode(text, true, special), gguf->Encode(text, true, special))
          << "text '" << text << "' parse_special=" << special;
    }
  }
}

}  // namespace
}  // namespace llmc
