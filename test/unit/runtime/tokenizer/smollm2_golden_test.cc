// The SmolLM2 GGUF's tokenizer against llama.cpp's ids for every string of
// test/data/tokenizer/corpus.jsonl (goldens from
// scripts/gen-tokenizer-goldens.py, which runs llama-cpp-python). Skips, loudly,
// when the model file is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "golden_cases.h"
#include "llmc/core/format/gguf.h"
#include "llmc/runtime/tokenizer/chat_template.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {
namespace {

using testing::GoldenCase;

class SmolLM2Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::SmolLM2Path();
    if (!std::filesystem::exists(path)) return;
    auto gguf = GgufFile::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    auto tok = Tokenizer::FromGguf(**gguf);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok).release();
    chat_template_ = (*gguf)->GetString("tokenizer.chat_template").value_or("");
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) {
      std::cerr << testing::MissingModelBanner();
      GTEST_SKIP() << "SmolLM2 GGUF not found at " << testing::SmolLM2Path();
    }
  }
  static Tokenizer* tokenizer_;
  static std::string chat_template_;
};

Tokenizer* SmolLM2Golden::tokenizer_ = nullptr;
std::string SmolLM2Golden::chat_template_;

TEST_F(SmolLM2Golden, VocabularyFacts) {
  EXPECT_EQ(tokenizer_->vocab_size(), 49152);
  EXPECT_EQ(tokenizer_->kind(), TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(tokenizer_->pre_tokenizer(), "smollm");
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_FALSE(tokenizer_->add_bos());
  EXPECT_EQ(tokenizer_->TokenId("<|im_end|>"), 2);
  EXPECT_TRUE(tokenizer_->IsEndOfGeneration(2));
  EXPECT_TRUE(tokenizer_->IsEndOfGeneration(0));  // <|endoftext|>
  EXPECT_FALSE(tokenizer_->IsEndOfGeneration(1));
}

TEST_F(SmolLM2Golden, IdsMatchLlamaCpp) {
  std::vector<GoldenCase> cases = testing::LoadGoldenCases("smollm2_expected.jsonl");
  ASSERT_GE(cases.size(), 300u);
  int identical = testing::ExpectIdsMatch(*tokenizer_, cases, "SmolLM2");
  RecordProperty("identical", identical);
  RecordProperty("total", int(2 * cases.size()));
}

TEST_F(SmolLM2Golden, DecodeRoundTripsWhereLlamaCppDoes) {
  std::vector<GoldenCase> cases = testing::LoadGoldenCases("smollm2_expected.jsonl");
  EXPECT_GT(testing::ExpectRoundTrips(*tokenizer_, cases, "SmolLM2"), 600);
  testing::ExpectDecodeMatches(*tokenizer_, cases, "SmolLM2");
}

TEST_F(SmolLM2Golden, ChatTemplateInsertsSmolLMSystemPrompt) {
  auto tmpl = DetectChatTemplate(chat_template_);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->kind, ChatTemplateKind::kChatML);
  EXPECT_EQ(tmpl->default_system_prompt,
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  std::vector<ChatMessage> chat = {{"user", "Hi!"}};
  std::string text = ApplyChatTemplate(*tmpl, chat, /*add_generation_prompt=*/true);
  EXPECT_EQ(text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  std::vector<int32_t> ids = tokenizer_->Encode(text, /*add_bos=*/true, /*parse_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);  // <|im_start|>
  EXPECT_EQ(tokenizer_->Decode(ids, /*render_special=*/true), text);
}

}  // namespace
}  // namespace llmc
