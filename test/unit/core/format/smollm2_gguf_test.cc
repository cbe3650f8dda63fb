// Reads the real SmolLM2-135M-Instruct Q4_1 GGUF (scripts/fetch-model puts it
// in ~/.cache/llmc/models); skipped, loudly, when it is absent.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/gguf.h"
#include "llmc/core/format/gguf_config.h"
#include "llmc/core/weight_format.h"

namespace llmc {
namespace {

std::string ModelPath() {
  const char* dir = std::getenv("LLMC_MODEL_DIR");
  std::string base = dir != nullptr ? dir
                                    : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") +
                                          "/.cache/llmc/models";
  return base + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class SmolLM2Gguf : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ModelPath();
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0)
      GTEST_SKIP() << "\n*** SKIPPED: " << path_
                   << " not found; run scripts/fetch-model to test against the real GGUF ***";
    auto f = GgufFile::Open(path_);
    ASSERT_TRUE(f.ok()) << f.status();
    file_ = std::move(*f);
  }
  std::string path_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(SmolLM2Gguf, Metadata) {
  EXPECT_EQ(file_->version(), 3u);
  EXPECT_EQ(*file_->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file_->GetInt("llama.block_count"), 30);
  EXPECT_EQ(*file_->GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(*file_->GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*file_->GetInt("llama.vocab_size"), 49152);
  auto tokens = file_->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)->size(), 49152u);
  EXPECT_EQ(*file_->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file_->tensors().size(), 272u);
  const GgufTensorInfo* embd = file_->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->ne, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(file_->FindTensor("output.weight"), nullptr);  // tied
}

TEST_F(SmolLM2Gguf, ModelConfig) {
  auto c = ModelConfigFromGguf(*file_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->max_position, 8192);
  EXPECT_EQ(c->rope_theta, 100000.0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved);
}

TEST_F(SmolLM2Gguf, FirstRowOfEveryTensorDequantizesToFiniteValues) {
  for (const GgufTensorInfo& t : file_->tensors()) {
    auto format = LookupGgmlType(t.ggml_type);
    ASSERT_TRUE(format) << t.name;
    const int64_t row = t.ne[0];
    std::vector<float> out(static_cast<size_t>(row));
    absl::Status st = Dequantize(format->name, file_->TensorData(t), t.byte_size, row, out.data());
    ASSERT_TRUE(st.ok()) << t.name << ": " << st;
    for (int64_t i = 0; i < row; ++i)
      ASSERT_TRUE(std::isfinite(out[i])) << t.name << "[" << i << "]";
  }
}

}  // namespace
}  // namespace llmc
