#include "llmc/core/model_config.h"

#include <gtest/gtest.h>

namespace llmc {
namespace {

ModelConfig Valid() {
  ModelConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  return c;
}

void ExpectFieldError(const ModelConfig& c, const std::string& field) {
  absl::Status st = ValidateModelConfig(c);
  ASSERT_FALSE(st.ok()) << "expected an error naming " << field;
  EXPECT_NE(st.message().find("'" + field + "'"), std::string::npos) << st;
}

TEST(ModelConfig, ValidConfigPasses) { EXPECT_TRUE(ValidateModelConfig(Valid()).ok()); }

TEST(ModelConfig, ErrorsNameTheField) {
  ModelConfig c = Valid();
  c.num_kv_heads = 3;
  ExpectFieldError(c, "num_key_value_heads");
  c = Valid();
  c.vocab_size = 0;
  ExpectFieldError(c, "vocab_size");
  c = Valid();
  c.head_dim = 15;
  ExpectFieldError(c, "head_dim");
  c = Valid();
  c.rms_norm_eps = 0;
  ExpectFieldError(c, "rms_norm_eps");
  c = Valid();
  c.architecture = "gpt_neox";
  ExpectFieldError(c, "architecture");
  c = Valid();
  c.rope_scaling.kind = RopeScaling::Kind::kLlama3;
  c.rope_scaling.low_freq_factor = 4;
  c.rope_scaling.high_freq_factor = 1;
  ExpectFieldError(c, "rope_scaling.high_freq_factor");
}

TEST(ModelConfig, JsonRoundTrip) {
  ModelConfig c = Valid();
  c.architecture = "qwen2";
  c.attention_bias = true;
  c.rope_theta = 1e6;
  c.rope_style = RopeStyle::kInterleaved;
  c.activation = Activation::kGeluTanh;
  c.rope_scaling.kind = RopeScaling::Kind::kLlama3;
  c.rope_scaling.factor = 8;
  c.sliding_window = 4096;
  absl::StatusOr<ModelConfig> back = ModelConfigFromJson(ModelConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ModelConfigToJson(*back), ModelConfigToJson(c));
  EXPECT_EQ(back->architecture, "qwen2");
  EXPECT_EQ(back->rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(back->rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_EQ(back->sliding_window, 4096);
  EXPECT_FALSE(back->qk_norm);
  c.architecture = "qwen3";
  c.qk_norm = true;
  back = ModelConfigFromJson(ModelConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->architecture, "qwen3");
  EXPECT_TRUE(back->qk_norm);
  c.architecture = "qwen3_moe";
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.moe_intermediate_size = 768;
  c.norm_topk_prob = false;
  back = ModelConfigFromJson(ModelConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->num_experts, 128);
  EXPECT_EQ(back->num_experts_per_tok, 8);
  EXPECT_EQ(back->moe_intermediate_size, 768);
  EXPECT_FALSE(back->norm_topk_prob);
}

TEST(ModelConfig, ExpertFieldsAreChecked) {
  ModelConfig c = Valid();
  c.architecture = "mixtral";
  c.num_experts = 8;
  c.num_experts_per_tok = 9;
  c.moe_intermediate_size = 32;
  ExpectFieldError(c, "num_experts_per_tok");
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 0;
  ExpectFieldError(c, "moe_intermediate_size");
  c.moe_intermediate_size = 32;
  EXPECT_TRUE(ValidateModelConfig(c).ok());
}

TEST(ModelConfig, JsonDefaultsHeadDimAndKvHeads) {
  absl::StatusOr<ModelConfig> c = ModelConfigFromJson(
      R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 8})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->num_kv_heads, 8);
}

TEST(ModelConfig, JsonErrors) {
  EXPECT_NE(ModelConfigFromJson("{").status().message().find("malformed JSON"), std::string::npos);
  EXPECT_NE(ModelConfigFromJson("[1]").status().message().find("JSON object"), std::string::npos);
  absl::Status st = ModelConfigFromJson(R"({"hidden_size": "big"})").status();
  EXPECT_NE(st.message().find("'hidden_size' must be an integer"), std::string::npos) << st;
  st = ModelConfigFromJson(R"({"hidden_act": "relu"})").status();
  EXPECT_NE(st.message().find("'hidden_act' has unknown value 'relu'"), std::string::npos) << st;
  st = ModelConfigFromJson(R"({"rope_scaling": {"type": "yarn"}})").status();
  EXPECT_NE(st.message().find("'type' has unknown value 'yarn'"), std::string::npos) << st;
}

}  // namespace
}  // namespace llmc
