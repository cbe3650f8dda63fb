// Byte-level BPE on a handmade vocabulary: merge order, special tokens,
// fallbacks and decoding, loaded from tokenizer.json and from GGUF.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/format/gguf_builder.h"
#include "llmc/core/format/gguf.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {
namespace {

using Ids = std::vector<int32_t>;

// "Ġ" is the byte-level character of a space.
constexpr char kTinyBpeJson[] = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<|endoftext|>", "special": true},
    {"id": 21, "content": "<tool>", "special": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "ByteLevel"},
  "decoder": {"type": "ByteLevel"},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
    "vocab": {"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "Ġ": 5, "w": 6, "r": 7, "d": 8,
              "he": 9, "ll": 10, "llo": 11, "hello": 12, "Ġw": 13, "or": 14, "Ġwor": 15, "ld": 16,
              "Ġworld": 17, "1": 18, "2": 19, "12": 20},
    "merges": ["h e", "l l", "ll o", "he llo", "Ġ w", "o r", ["Ġw", "or"], "l d", "Ġwor ld", "1 2"]
  }
})";

std::unique_ptr<Tokenizer> TinyBpe() {
  auto t = Tokenizer::FromTokenizerJson(kTinyBpeJson, "tiny/tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(Bpe, MergesApplyInRankOrder) {
  auto tok = TinyBpe();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(tok->pre_tokenizer(), "gpt-2");
  EXPECT_EQ(tok->vocab_size(), 22);
  EXPECT_EQ(tok->Encode("hello world", true, false), (Ids{12, 17}));
  EXPECT_EQ(tok->Encode("llo", true, false), (Ids{11}));
  // "hel": "h e" (rank 0) wins over nothing else; "l" stays.
  EXPECT_EQ(tok->Encode("hel", true, false), (Ids{9, 3}));
  EXPECT_EQ(tok->Encode("12 world", true, false), (Ids{20, 17}));
}

TEST(Bpe, CharactersMissingFromTheVocabularyAreDropped) {
  // llama.cpp emits the single-byte tokens it finds and nothing else.
  auto tok = TinyBpe();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("he!", true, false), (Ids{9}));
  EXPECT_EQ(tok->Encode("", true, true), (Ids{}));
}

TEST(Bpe, SpecialTokensNeedParseSpecialButAddedTokensDoNot) {
  auto tok = TinyBpe();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("hello<|endoftext|>", true, true), (Ids{12, 0}));
  // As plain text: "<|" and "|>" have no tokens here, and "endoftext" keeps
  // only the characters this vocabulary has (e, d, o, e).
  EXPECT_EQ(tok->Encode("hello<|endoftext|>", true, false), (Ids{12, 2, 8, 4, 2}));
  // A non-special added token is split out either way.
  EXPECT_EQ(tok->Encode("hello<tool>world", true, false), (Ids{12, 21, 6, 14, 16}));
}

TEST(Bpe, DecodeMapsBytesBackAndRendersSpecialsOnRequest) {
  auto tok = TinyBpe();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Decode(Ids{12, 17}), "hello world");
  EXPECT_EQ(tok->Decode(Ids{12, 0, 17}), "hello world");
  EXPECT_EQ(tok->Decode(Ids{12, 0, 17}, /*render_special=*/true), "hello<|endoftext|> world");
  EXPECT_EQ(tok->Decode(Ids{12, 21}), "hello<tool>");  // user-defined tokens always render
  EXPECT_EQ(tok->Decode(Ids{12, 99, -1}), "hello");    // out of range: nothing
  EXPECT_EQ(tok->TokenToPiece(5, false), " ");
  EXPECT_EQ(tok->TokenId("Ġworld"), 17);
  EXPECT_EQ(tok->TokenText(17), "Ġworld");
}

TEST(Bpe, ByteLevelTokensCoverEveryByte) {
  // A vocabulary holding all 256 byte characters encodes any input, and
  // decoding gives back the (valid UTF-8) text.
  testing::GgufBuilder b;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  int next = 256;  // GPT-2's mapping: printable Latin-1 is itself, the rest U+0100.. in order
  for (int byte = 0; byte < 256; ++byte) {
    bool self = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
    int cp = self ? byte : next++;
    std::string utf8;
    if (cp < 0x80) {
      utf8.push_back(char(cp));
    } else {
      utf8.push_back(char(0xC0 | (cp >> 6)));
      utf8.push_back(char(0x80 | (cp & 0x3F)));
    }
    tokens.push_back(utf8);
    types.push_back(1);
  }
  b.Str("tokenizer.ggml.model", "gpt2").Str("tokenizer.ggml.pre", "llama-bpe");
  b.StrArray("tokenizer.ggml.tokens", tokens);
  b.Array("tokenizer.ggml.token_type", GgufType::kInt32, types);
  b.StrArray("tokenizer.ggml.merges", {});
  b.U32("tokenizer.ggml.bos_token_id", 'B');  // any id; llama-bpe adds BOS by default
  auto bytes = b.Build();
  auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), "bytes.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE((*tok)->add_bos());
  const std::string text = "caf\xC3\xA9 \xF0\x9F\xA4\x97\n\t1234";
  Ids ids = (*tok)->Encode(text, /*add_bos=*/true, false);
  ASSERT_EQ(ids.size(), text.size() + 1);
  EXPECT_EQ(ids[0], 'B');
  EXPECT_EQ((*tok)->Decode(ids), "B" + text);  // the BOS is a normal token here
  EXPECT_EQ((*tok)->Encode(text, /*add_bos=*/false, false).size(), text.size());
}

TEST(Bpe, GgufPreTokenizerMustBeKnown) {
  testing::GgufBuilder b;
  b.Str("tokenizer.ggml.model", "gpt2").Str("tokenizer.ggml.pre", "klingon");
  b.StrArray("tokenizer.ggml.tokens", {"a", "b"});
  b.StrArray("tokenizer.ggml.merges", {"a b"});
  auto bytes = b.Build();
  auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), "pre.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto tok = Tokenizer::FromGguf(**gguf);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find(
                "pre.gguf: tokenizer.ggml.pre 'klingon' is not a pre-tokenizer llmc knows"),
            std::string::npos)
      << tok.status();
  EXPECT_NE(tok.status().message().find("smollm"), std::string::npos) << tok.status();
}

TEST(Bpe, GgufErrorsNameTheKey) {
  auto load = [](testing::GgufBuilder& b) {
    auto bytes = b.Build();
    auto gguf = GgufFile::ParseBytes(bytes.data(), bytes.size(), "bad.gguf");
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    return Tokenizer::FromGguf(**gguf).status();
  };
  {
    testing::GgufBuilder b;
    b.StrArray("tokenizer.ggml.tokens", {"a"});
    absl::Status st = load(b);
    EXPECT_NE(st.message().find("tokenizer.ggml.model"), std::string::npos) << st;
  }
  {
    testing::GgufBuilder b;
    b.Str("tokenizer.ggml.model", "bert").StrArray("tokenizer.ggml.tokens", {"a"});
    absl::Status st = load(b);
    EXPECT_NE(st.message().find("bad.gguf: tokenizer.ggml.model is 'bert'"), std::string::npos)
        << st;
  }
  {
    testing::GgufBuilder b;
    b.Str("tokenizer.ggml.model", "gpt2").StrArray("tokenizer.ggml.tokens", {"a"});
    absl::Status st = load(b);
    EXPECT_NE(st.message().find("tokenizer.ggml.merges is missing"), std::string::npos) << st;
  }
  {
    testing::GgufBuilder b;
    b.Str("tokenizer.ggml.model", "llama")
        .StrArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    b.Array("tokenizer.ggml.scores", GgufType::kFloat32, std::vector<float>{0.0f});
    absl::Status st = load(b);
    EXPECT_NE(st.message().find("tokenizer.ggml.scores has 1 entries for 3 tokens"),
              std::string::npos)
        << st;
  }
  {
    testing::GgufBuilder b;
    b.Str("tokenizer.ggml.model", "gpt2").StrArray("tokenizer.ggml.tokens", {"a", "a"});
    b.StrArray("tokenizer.ggml.merges", {});
    absl::Status st = load(b);
    EXPECT_NE(st.message().find("duplicate token 'a' has ids 0 and 1"), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace llmc
