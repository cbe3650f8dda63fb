#include "llmc/core/format/hf_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>

#include "safetensors_writer.h"

namespace llmc {
namespace {

const std::string kConfigDir = std::string(LLMC_TEST_DATA_DIR) + "/hf_configs/";

// Parses one of the real-world configs in test/data/hf_configs.
absl::StatusOr<ModelConfig> ParseDataFile(const std::string& name) {
  std::string path = kConfigDir + name;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseHFConfig(text.str(), path);
}

template <typename T>
void ExpectError(const absl::StatusOr<T>& result, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(result.ok()) << "expected an error mentioning " << *parts.begin();
  std::string message(result.status().message());
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

// A small valid Llama config as key -> raw JSON value, for tests to edit.
using Fields = std::map<std::string, std::string>;
Fields SmallLlama() {
  return {{"model_type", "\"llama\""},  {"architectures", "[\"LlamaForCausalLM\"]"},
          {"vocab_size", "1000"},       {"hidden_size", "64"},
          {"intermediate_size", "128"}, {"num_hidden_layers", "2"},
          {"num_attention_heads", "4"}, {"num_key_value_heads", "2"}};
}
std::string ToJson(const Fields& fields) {
  std::string text = "{";
  for (const auto& [key, value] : fields) {
    if (text.size() > 1) text += ",";
    text += "\"" + key + "\":" + value;
  }
  return text + "}";
}
absl::StatusOr<ModelConfig> ParseFields(const Fields& fields) {
  return ParseHFConfig(ToJson(fields), "cfg/config.json");
}
Fields With(Fields fields, const std::string& key, const std::string& value) {
  fields[key] = value;
  return fields;
}
Fields Without(Fields fields, const std::string& key) {
  fields.erase(key);
  return fields;
}

TEST(HFConfig, SmolLM2_135M) {
  auto c = ParseDataFile("smollm2-135m.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->max_position, 8192);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 100000.0);  // written as the integer 100000
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kNone);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  EXPECT_EQ(c->activation, Activation::kSiLU);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(HFConfig, Llama31_8B) {
  auto c = ParseDataFile("llama-3.1-8b.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->num_layers, 32);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->max_position, 131072);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
}

TEST(HFConfig, Mistral7B_v01) {
  auto c = ParseDataFile("mistral-7b-v0.1.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "mistral");
  EXPECT_EQ(c->vocab_size, 32000);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->max_position, 32768);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(HFConfig, Qwen2_05B) {
  auto c = ParseDataFile("qwen2-0.5b.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->hidden_size, 896);
  EXPECT_EQ(c->intermediate_size, 4864);
  EXPECT_EQ(c->num_layers, 24);
  EXPECT_EQ(c->num_heads, 14);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);  // use_sliding_window is false
}

TEST(HFConfig, Qwen3_06B) {
  auto c = ParseDataFile("qwen3-0.6b.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->intermediate_size, 3072);
  EXPECT_EQ(c->num_layers, 28);
  EXPECT_EQ(c->num_heads, 16);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);  // 16 x 128 = 2048 query features over a hidden size of 1024
  EXPECT_EQ(c->max_position, 40960);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(HFConfig, Qwen3DefaultsAndErrors) {
  Fields f = With(With(SmallLlama(), "model_type", "\"qwen3\""), "architectures",
                  "[\"Qwen3ForCausalLM\"]");
  // Qwen3Config's head_dim defaults to 128, not hidden_size / heads.
  auto c = ParseFields(f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->max_position, 32768);
  EXPECT_TRUE(c->qk_norm);
  // The other families never norm per head.
  auto llama = ParseFields(SmallLlama());
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_FALSE(llama->qk_norm);
  // Qwen2's window rule.
  c = ParseFields(With(With(With(f, "use_sliding_window", "true"), "sliding_window", "64"),
                       "max_window_layers", "0"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 64);
  // With attention_bias Qwen3 biases o_proj too, which llmc does not run.
  ExpectError(ParseFields(With(f, "attention_bias", "true")),
              {"cfg/config.json", "field 'attention_bias'", "Qwen3", "o_proj"});
}

TEST(HFConfig, Qwen3MoeAndMixtralExperts) {
  // Qwen3-30B-A3B's MoE fields.
  Fields q = With(With(SmallLlama(), "model_type", "\"qwen3_moe\""), "architectures",
                  "[\"Qwen3MoeForCausalLM\"]");
  q = With(With(With(With(q, "num_experts", "128"), "num_experts_per_tok", "8"),
                "moe_intermediate_size", "768"),
           "norm_topk_prob", "true");
  auto c = ParseFields(With(q, "mlp_only_layers", "[]"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen3_moe");
  EXPECT_EQ(c->num_experts, 128);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->moe_intermediate_size, 768);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->head_dim, 16);  // no head_dim: hidden / heads, unlike dense Qwen3
  // transformers' default: no renormalization.
  c = ParseFields(Without(q, "norm_topk_prob"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->norm_topk_prob);
  ExpectError(ParseFields(With(q, "mlp_only_layers", "[0]")),
              {"cfg/config.json", "field 'mlp_only_layers'"});
  ExpectError(ParseFields(With(q, "decoder_sparse_step", "2")),
              {"cfg/config.json", "field 'decoder_sparse_step'", "is 2"});
  ExpectError(ParseFields(With(q, "num_experts_per_tok", "200")),
              {"cfg/config.json", "num_experts_per_tok", "200"});
  // Mixtral: experts as wide as intermediate_size, always renormalized, no
  // window by default.
  Fields m = With(With(SmallLlama(), "model_type", "\"mixtral\""), "architectures",
                  "[\"MixtralForCausalLM\"]");
  c = ParseFields(With(With(m, "num_local_experts", "8"), "num_experts_per_tok", "2"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "mixtral");
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->num_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 128);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
}

TEST(HFConfig, Phi3) {
  Fields f = With(With(SmallLlama(), "model_type", "\"phi3\""), "architectures",
                  "[\"Phi3ForCausalLM\"]");
  auto c = ParseFields(With(f, "sliding_window", "2047"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->sliding_window, 2047);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);  // Phi3Config's default
  EXPECT_EQ(c->max_position, 4096);
  c = ParseFields(With(f, "sliding_window", "null"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  // The 128k models (LongRoPE) and Phi-4-mini's partial rotary are refused
  // by field.
  ExpectError(ParseFields(With(f, "rope_scaling",
                               "{\"type\": \"longrope\", \"long_factor\": [1], "
                               "\"short_factor\": [1]}")),
              {"cfg/config.json", "rope_scaling.type", "longrope"});
  ExpectError(ParseFields(With(f, "partial_rotary_factor", "0.75")),
              {"cfg/config.json", "field 'partial_rotary_factor'", "0.75"});
}

TEST(HFConfig, Gemma2And3) {
  Fields g2 = With(With(SmallLlama(), "model_type", "\"gemma2\""), "architectures",
                   "[\"Gemma2ForCausalLM\"]");
  auto c = ParseFields(g2);
  ASSERT_TRUE(c.ok()) << c.status();
  // Gemma2Config's defaults: head_dim 256, tied, soft-caps 50 / 30, a window
  // of 4096 on even layers, GeGLU (hidden_activation), sqrt(hidden) scale.
  EXPECT_EQ(c->architecture, "gemma2");
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 30.0);
  EXPECT_DOUBLE_EQ(c->query_pre_attn_scalar, 256);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_TRUE(c->sliding_layer(0));
  EXPECT_FALSE(c->sliding_layer(1));
  EXPECT_EQ(c->activation, Activation::kGeluTanh);
  EXPECT_DOUBLE_EQ(c->embedding_scale, 8.0);
  EXPECT_TRUE(c->post_block_norms);
  // Null caps are off.
  c = ParseFields(With(g2, "final_logit_softcapping", "null"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 0);
  ExpectError(ParseFields(With(g2, "hidden_activation", "\"relu\"")),
              {"cfg/config.json", "field 'hidden_activation'", "relu"});

  Fields g3 = With(With(SmallLlama(), "model_type", "\"gemma3_text\""), "architectures",
                   "[\"Gemma3ForCausalLM\"]");
  g3 = With(With(g3, "num_hidden_layers", "6"), "head_dim", "16");
  c = ParseFields(g3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "gemma3");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 0);
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 0);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c->rope_local_theta, 10000.0);
  EXPECT_EQ(c->sliding_window_pattern, 6);
  EXPECT_TRUE(c->sliding_layer(4));
  EXPECT_FALSE(c->sliding_layer(5));
  // layer_types, where the file spells the layers out, gives the pattern.
  const std::string sliding = "\"sliding_attention\"", full = "\"full_attention\"";
  c = ParseFields(With(g3, "layer_types", "[" + sliding + "," + sliding + "," + full + "," +
                                              sliding + "," + sliding + "," + full + "]"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window_pattern, 3);
  // A list off every pattern is refused by field.
  ExpectError(ParseFields(With(g3, "layer_types", "[" + sliding + "," + full + "," + sliding +
                                                      "," + sliding + "," + full + "," +
                                                      sliding + "]")),
              {"cfg/config.json", "field 'layer_types'", "layer 3"});
  // Gemma 3's image-text checkpoints are another class.
  ExpectError(ParseFields(With(g3, "architectures", "[\"Gemma3ForConditionalGeneration\"]")),
              {"cfg/config.json", "architectures"});
}

TEST(HFConfig, TinyLlama_11B) {
  auto c = ParseDataFile("tinyllama-1.1b-chat-v1.0.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->vocab_size, 32000);
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->intermediate_size, 5632);
  EXPECT_EQ(c->num_layers, 22);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->max_position, 2048);
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(HFConfig, DefaultsFollowTransformers) {
  Fields f = Without(Without(SmallLlama(), "num_key_value_heads"), "architectures");
  auto c = ParseFields(f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 4);  // = num_attention_heads
  EXPECT_EQ(c->head_dim, 16);     // = hidden_size / num_attention_heads
  EXPECT_EQ(c->max_position, 2048);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->activation, Activation::kSiLU);
  // null means "use the default", as in transformers.
  c = ParseFields(With(With(f, "num_key_value_heads", "null"), "head_dim", "null"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 16);
}

TEST(HFConfig, ExplicitHeadDimAndGelu) {
  auto c = ParseFields(
      With(With(SmallLlama(), "head_dim", "32"), "hidden_act", "\"gelu_pytorch_tanh\""));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->q_size(), 128);
  EXPECT_EQ(c->activation, Activation::kGeluTanh);
  c = ParseFields(With(SmallLlama(), "hidden_act", "\"gelu\""));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->activation, Activation::kGeluErf);
}

TEST(HFConfig, ArchitectureFromClassWhenModelTypeIsAbsent) {
  auto c = ParseFields(
      With(Without(SmallLlama(), "model_type"), "architectures", "[\"MistralForCausalLM\"]"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "mistral");
  EXPECT_EQ(c->sliding_window, 4096);  // MistralConfig's default
}

TEST(HFConfig, LinearRopeScalingWithLegacyTypeKey) {
  auto c = ParseFields(With(SmallLlama(), "rope_scaling", R"({"type":"linear","factor":4.0})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 4.0);
  c = ParseFields(With(SmallLlama(), "rope_scaling", R"({"rope_type":"default"})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kNone);
}

TEST(HFConfig, RopeParametersOfTransformers5) {
  auto c = ParseFields(
      With(SmallLlama(), "rope_parameters",
           R"({"rope_type":"llama3","rope_theta":500000.0,"factor":32.0,"low_freq_factor":1.0,)"
           R"("high_freq_factor":4.0,"original_max_position_embeddings":8192})"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 32.0);
}

TEST(HFConfig, MistralSlidingWindowMayBeNull) {
  Fields f = With(With(SmallLlama(), "model_type", "\"mistral\""), "architectures",
                  "[\"MistralForCausalLM\"]");
  auto c = ParseFields(With(f, "sliding_window", "null"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  c = ParseFields(With(f, "sliding_window", "128"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 128);
}

TEST(HFConfig, Qwen2SlidingWindow) {
  Fields f = With(With(SmallLlama(), "model_type", "\"qwen2\""), "architectures",
                  "[\"Qwen2ForCausalLM\"]");
  f = With(With(f, "sliding_window", "256"), "max_window_layers", "0");
  // Ignored unless use_sliding_window is set.
  auto c = ParseFields(f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_TRUE(c->attention_bias);
  f = With(f, "use_sliding_window", "true");
  c = ParseFields(f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 256);
  // max_window_layers >= num_hidden_layers: no layer slides.
  c = ParseFields(With(f, "max_window_layers", "2"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  // Half and half cannot be expressed.
  ExpectError(ParseFields(With(f, "max_window_layers", "1")),
              {"cfg/config.json", "field 'max_window_layers'", "1 of 2 layers"});
  ExpectError(ParseFields(With(f, "layer_types", R"(["full_attention","sliding_attention"])")),
              {"cfg/config.json", "field 'layer_types'"});
}

TEST(HFConfig, LoadsConfigJsonFromFolder) {
  test::TempFolder dir;
  dir.Write("config.json", ToJson(SmallLlama()));
  auto c = LoadHFConfig(dir.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 64);
  ExpectError(LoadHFConfig(dir.File("missing")), {"missing/config.json"});
}

TEST(HFConfig, ErrorUnsupportedModelType) {
  ExpectError(
      ParseFields(With(Without(SmallLlama(), "architectures"), "model_type", "\"gpt_neox\"")),
      {"cfg/config.json", "model_type 'gpt_neox'", "llama, mistral, qwen2, qwen3, qwen3_moe, mixtral"});
  ExpectError(ParseFields(Without(With(SmallLlama(), "architectures", "[\"GPTNeoXForCausalLM\"]"),
                                  "model_type")),
              {"cfg/config.json", "'GPTNeoXForCausalLM'", "LlamaForCausalLM"});
  ExpectError(ParseFields(Without(Without(SmallLlama(), "architectures"), "model_type")),
              {"cfg/config.json", "model_type"});
}

TEST(HFConfig, ErrorArchitectureNotACausalLM) {
  ExpectError(
      ParseFields(With(SmallLlama(), "architectures", "[\"LlamaForSequenceClassification\"]")),
      {"cfg/config.json", "field 'architectures'", "LlamaForSequenceClassification"});
}

TEST(HFConfig, ErrorUnsupportedRopeScaling) {
  ExpectError(ParseFields(With(
                  SmallLlama(), "rope_scaling",
                  R"({"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768})")),
              {"cfg/config.json", "field 'rope_scaling.rope_type'", "'yarn'", "linear, llama3"});
  ExpectError(ParseFields(With(SmallLlama(), "rope_scaling", R"({"type":"dynamic","factor":2.0})")),
              {"cfg/config.json", "field 'rope_scaling.type'", "'dynamic'"});
  ExpectError(ParseFields(With(SmallLlama(), "rope_scaling", R"({"factor":2.0})")),
              {"cfg/config.json", "field 'rope_scaling'", "rope_type"});
  ExpectError(
      ParseFields(With(SmallLlama(), "rope_scaling", R"({"rope_type":"llama3","factor":8.0})")),
      {"cfg/config.json", "field 'rope_scaling.low_freq_factor'", "missing"});
  ExpectError(ParseFields(With(SmallLlama(), "rope_scaling", R"({"rope_type":"linear"})")),
              {"cfg/config.json", "field 'rope_scaling.factor'", "missing"});
}

TEST(HFConfig, ErrorBadTypes) {
  ExpectError(ParseFields(With(SmallLlama(), "hidden_size", "\"64\"")),
              {"cfg/config.json", "field 'hidden_size'", "must be an integer", "a string"});
  ExpectError(ParseFields(With(SmallLlama(), "hidden_size", "64.0")),
              {"cfg/config.json", "field 'hidden_size'", "must be an integer", "64.0"});
  ExpectError(ParseFields(With(SmallLlama(), "tie_word_embeddings", "\"yes\"")),
              {"cfg/config.json", "field 'tie_word_embeddings'", "true or false"});
  ExpectError(ParseFields(With(SmallLlama(), "rope_theta", "\"1e4\"")),
              {"cfg/config.json", "field 'rope_theta'", "must be a number"});
  ExpectError(ParseFields(With(SmallLlama(), "rope_scaling", "3")),
              {"cfg/config.json", "field 'rope_scaling'", "object or null"});
  ExpectError(ParseFields(With(SmallLlama(), "model_type", "7")),
              {"cfg/config.json", "field 'model_type'", "must be a string"});
  ExpectError(ParseFields(With(SmallLlama(), "architectures", "\"LlamaForCausalLM\"")),
              {"cfg/config.json", "field 'architectures'", "array"});
  ExpectError(ParseFields(With(SmallLlama(), "vocab_size", "18446744073709551615")),
              {"cfg/config.json", "field 'vocab_size'", "too large"});
}

TEST(HFConfig, ErrorMissingRequiredFields) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads"}) {
    ExpectError(ParseFields(Without(SmallLlama(), key)),
                {"cfg/config.json", std::string("field '") + key + "'", "required"});
  }
}

TEST(HFConfig, ErrorUnsupportedFeatures) {
  ExpectError(ParseFields(With(SmallLlama(), "hidden_act", "\"relu\"")),
              {"cfg/config.json", "field 'hidden_act'", "'relu'"});
  ExpectError(ParseFields(With(SmallLlama(), "mlp_bias", "true")),
              {"cfg/config.json", "field 'mlp_bias'"});
  ExpectError(ParseFields(With(SmallLlama(), "attention_bias", "true")),
              {"cfg/config.json", "field 'attention_bias'", "o_proj"});
  ExpectError(
      ParseFields(With(SmallLlama(), "quantization_config", R"({"quant_method":"gptq","bits":4})")),
      {"cfg/config.json", "field 'quantization_config'", "'gptq'"});
}

TEST(HFConfig, ErrorInconsistentSizesNameTheField) {
  ExpectError(ParseFields(With(SmallLlama(), "num_key_value_heads", "3")),
              {"cfg/config.json: model config: field 'num_key_value_heads'"});
  ExpectError(ParseFields(With(SmallLlama(), "num_hidden_layers", "-1")),
              {"cfg/config.json", "field 'num_hidden_layers'", "positive"});
  ExpectError(ParseFields(With(SmallLlama(), "num_attention_heads", "5")),
              {"cfg/config.json", "field 'head_dim'", "not a multiple"});
}

TEST(HFConfig, ErrorNotJsonOrNotAnObject) {
  ExpectError(ParseHFConfig("{\"model_type\": ", "cfg/config.json"),
              {"cfg/config.json", "invalid JSON"});
  ExpectError(ParseHFConfig("[1]", "cfg/config.json"), {"cfg/config.json", "JSON object"});
  ExpectError(ParseHFConfig("", "cfg/config.json"), {"cfg/config.json", "invalid JSON"});
}

}  // namespace
}  // namespace llmc
