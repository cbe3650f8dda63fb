// Streaming detokenization: the pieces IncrementalDetokenizer hands out,
// concatenated, equal the full Decode() of the same tokens, for characters
// split across byte-level BPE tokens and SentencePiece <0xXX> byte tokens,
// with a window that stays small however long the output gets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "golden_cases.h"
#include "llmc/core/format/gguf.h"
#include "llmc/runtime/tokenizer/incremental_detokenizer.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

constexpr char kSp[] = "\xE2\x96\x81";  // ▁

// GPT-2's byte -> character map, as UTF-8: printable Latin-1 bytes stand for
// themselves, the others for U+0100 upwards.
std::string ByteChar(int b) {
  static std::vector<int> map = [] {
    std::vector<int> m(256, -1);
    int next = 256;
    for (int i = 0; i < 256; ++i)
      m[i] = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174 ? i : -1;
    for (int i = 0; i < 256; ++i)
      if (m[i] < 0) m[i] = next++;
    return m;
  }();
  int cp = map[b];
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// Byte-level BPE: <|endoftext|> (0), one token per byte (1 + b), then a few
// words; no merges (decoding needs none).
constexpr int32_t kWords = 257;
const std::vector<std::string> kBpeWords = {"Ġhello", "Ġworld", "Ġ.", "Ġ,", "!", "ĠcafÃ©"};
std::unique_ptr<Tokenizer> ByteBpe() {
  json vocab = json::object();
  vocab["<|endoftext|>"] = 0;
  for (int b = 0; b < 256; ++b) vocab[ByteChar(b)] = 1 + b;
  for (size_t i = 0; i < kBpeWords.size(); ++i) vocab[kBpeWords[i]] = kWords + int(i);
  json j = {{"version", "1.0"},
            {"added_tokens", json::array({{{"id", 0}, {"content", "<|endoftext|>"}, {"special", true}}})},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", json::array()}}}};
  auto t = Tokenizer::FromTokenizerJson(j.dump(), "bytes/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// SentencePiece with byte fallback (Llama 2's shape): <unk> <s> </s>, the
// 256 <0xXX> tokens (3 + b), then words.
const std::vector<std::string> kSpmWords = {std::string(kSp) + "hello", std::string(kSp) + "world",
                                            kSp, "lo", std::string(kSp) + "caf\xC3\xA9"};
std::unique_ptr<Tokenizer> ByteFallbackSpm() {
  json vocab = json::object();
  std::vector<std::string> specials = {"<unk>", "<s>", "</s>"};
  for (int i = 0; i < 3; ++i) vocab[specials[size_t(i)]] = i;
  for (int b = 0; b < 256; ++b) vocab[absl::StrFormat("<0x%02X>", b)] = 3 + b;
  for (size_t i = 0; i < kSpmWords.size(); ++i) vocab[kSpmWords[i]] = kWords + 2 + int(i);
  json added = json::array();
  for (int id : {0, 1, 2}) added.push_back({{"id", id}, {"content", specials[size_t(id)]}, {"special", true}});
  json prepend = {{"type", "Prepend"}, {"prepend", kSp}};
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}};
  json j = {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({prepend, replace})}}},
            {"pre_tokenizer", nullptr},
            {"decoder", {{"type", "Sequence"},
                         {"decoders", json::array({json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}}})}}},
            {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true},
                       {"vocab", vocab}, {"merges", json::array()}}}};
  auto t = Tokenizer::FromTokenizerJson(j.dump(), "spm/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

struct Streamed {
  std::vector<std::string> pieces;
  std::string text;
  size_t max_window = 0;
};
Streamed Stream(const Tokenizer& tok, const Ids& context, const Ids& out) {
  Streamed s;
  IncrementalDetokenizer detok(tok, context);
  for (int32_t id : out) {
    s.pieces.emplace_back(detok.Append(id));
    s.text += s.pieces.back();
    s.max_window = std::max(s.max_window, detok.window_size());
  }
  return s;
}

// What streaming must produce: the decode of context + output past the
// context's decode, up to the last whole character.
std::string Expected(const Tokenizer& tok, const Ids& context, const Ids& out) {
  Ids all = context;
  all.insert(all.end(), out.begin(), out.end());
  std::string full = tok.Decode(all), head = tok.Decode(context);
  EXPECT_EQ(full.substr(0, head.size()), head);
  size_t ready = CompleteUtf8Prefix(full);
  return ready > head.size() ? full.substr(head.size(), ready - head.size()) : "";
}

Ids BpeBytes(std::string_view text) {
  Ids ids;
  for (unsigned char c : text) ids.push_back(1 + int32_t(c));
  return ids;
}

TEST(IncrementalDetokenizer, ByteLevelBpeHoldsSplitCharactersBack) {
  auto tok = ByteBpe();
  ASSERT_NE(tok, nullptr);
  // "é" (C3 A9), "€" (E2 82 AC), "😀" (F0 9F 98 80), one byte token each.
  Ids out = BpeBytes("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  Streamed s = Stream(*tok, {}, out);
  EXPECT_EQ(s.pieces, (std::vector<std::string>{"a", "", "\xC3\xA9", "", "", "\xE2\x82\xAC", "",
                                                "", "", "\xF0\x9F\x98\x80"}));
  EXPECT_EQ(s.text, tok->Decode(out));
}

TEST(IncrementalDetokenizer, SentencePieceByteFallbackAndLeadingSpace) {
  auto tok = ByteFallbackSpm();
  ASSERT_NE(tok, nullptr);
  auto word = [](int i) { return kWords + 2 + i; };
  auto byte = [](unsigned char b) { return 3 + int32_t(b); };
  // "▁hello ▁world € 😀 ▁café" with € and 😀 as byte tokens.
  Ids out = {word(0), word(1), byte(0xE2), byte(0x82), byte(0xAC), word(2),
             byte(0xF0), byte(0x9F), byte(0x98), byte(0x80), word(4)};
  // From an empty context the first token's space goes, as in Decode().
  Streamed s = Stream(*tok, {}, out);
  EXPECT_EQ(s.text, tok->Decode(out));
  EXPECT_EQ(s.text, "hello world\xE2\x82\xAC \xF0\x9F\x98\x80 caf\xC3\xA9");
  EXPECT_EQ(s.pieces[2], "");
  EXPECT_EQ(s.pieces[4], "\xE2\x82\xAC");
  // After a prompt the first output token keeps its space: the text
  // continues the prompt's.
  Ids prompt = {1, word(0)};
  Ids rest(out.begin() + 1, out.end());
  Streamed c = Stream(*tok, prompt, rest);
  EXPECT_EQ(c.text, " world\xE2\x82\xAC \xF0\x9F\x98\x80 caf\xC3\xA9");
  EXPECT_EQ(c.text, Expected(*tok, prompt, rest));
}

TEST(IncrementalDetokenizer, RandomSequencesMatchTheFullDecode) {
  auto bpe = ByteBpe();
  auto spm = ByteFallbackSpm();
  ASSERT_NE(bpe, nullptr);
  ASSERT_NE(spm, nullptr);
  std::mt19937_64 rng(7);
  // Pieces of whole and split characters, words, control tokens, invalid
  // bytes. (No token ending in a space: llama.cpp's clean-up may remove such
  // a space once "." follows, after it was streamed; see the header.)
  std::vector<std::string> texts = {"a", "b", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                    "\xF0\x9F", "\x98\x80", "\xE2", "\x82\xAC", "\xFF", "\x80"};
  for (int round = 0; round < 200; ++round) {
    Ids bpe_ids, spm_ids;
    int n = 1 + int(rng() % 40);
    for (int i = 0; i < n; ++i) {
      uint64_t pick = rng() % (texts.size() + 3);
      if (pick < texts.size()) {
        Ids b = BpeBytes(texts[pick]);
        bpe_ids.insert(bpe_ids.end(), b.begin(), b.end());
        for (unsigned char c : texts[pick]) spm_ids.push_back(3 + int32_t(c));
      } else if (pick == texts.size()) {
        bpe_ids.push_back(0), spm_ids.push_back(2);  // control: renders nothing
      } else {
        int w = int(pick - texts.size() - 1);
        bpe_ids.push_back(kWords + w), spm_ids.push_back(kWords + 2 + w);
      }
    }
    size_t cut = rng() % (bpe_ids.size() + 1);
    Ids bc(bpe_ids.begin(), bpe_ids.begin() + std::ptrdiff_t(cut)), bo(bpe_ids.begin() + std::ptrdiff_t(cut), bpe_ids.end());
    EXPECT_EQ(Stream(*bpe, bc, bo).text, Expected(*bpe, bc, bo)) << "round " << round;
    cut = rng() % (spm_ids.size() + 1);
    Ids sc(spm_ids.begin(), spm_ids.begin() + std::ptrdiff_t(cut)), so(spm_ids.begin() + std::ptrdiff_t(cut), spm_ids.end());
    EXPECT_EQ(Stream(*spm, sc, so).text, Expected(*spm, sc, so)) << "round " << round;
  }
}

TEST(IncrementalDetokenizer, WindowStaysSmallOverALongOutput) {
  // The point of streaming incrementally: each token decodes a few tokens,
  // not the whole output so far.
  auto tok = ByteBpe();
  ASSERT_NE(tok, nullptr);
  Ids out;
  for (int i = 0; i < 2000; ++i) {
    if (i % 3 == 2) {
      Ids b = BpeBytes("\xE2\x82\xAC");
      out.insert(out.end(), b.begin(), b.end());
    } else {
      out.push_back(kWords + i % 2);
    }
  }
  Streamed s = Stream(*tok, BpeBytes("prompt text"), out);
  EXPECT_EQ(s.text, tok->Decode(out));
  EXPECT_LE(s.max_window, 8u);
}

TEST(IncrementalDetokenizer, SmolLM2MultilingualText) {
  auto gguf = GgufFile::Open(testing::SmolLM2Path());
  if (!gguf.ok()) GTEST_SKIP() << "SmolLM2 GGUF not found at " << testing::SmolLM2Path();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::string text =
      "Na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE5\xA4\xA7"
      "\xE3\x81\x8D\xE3\x81\x84 \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok. Don't, "
      "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82!";
  Ids prompt = (*tok)->Encode("Say it:", true, false);
  Ids out = (*tok)->Encode(text, false, false);
  Streamed s = Stream(**tok, prompt, out);
  EXPECT_EQ(s.text, Expected(**tok, prompt, out));
  EXPECT_EQ(s.text, (*tok)->Decode(out));
  for (const std::string& p : s.pieces) EXPECT_EQ(CompleteUtf8Prefix(p), p.size());
  // Some character really was split across tokens.
  size_t empty = 0;
  for (const std::string& p : s.pieces) empty += p.empty();
  EXPECT_GT(empty, 0u);
}

}  // namespace
}  // namespace llmc
