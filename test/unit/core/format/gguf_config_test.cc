#include "llmc/core/format/gguf_config.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "gguf_builder.h"

namespace llmc {
namespace {

using testing::GgufBuilder;

constexpr uint32_t kF32 = 0;

// The required keys of a small Llama (SmolLM2-like: u32 integers, f32 eps),
// a 10-token vocabulary and a token embedding; `skip` leaves keys out so a
// test can drop or replace them.
GgufBuilder Model(const std::string& arch, const std::set<std::string>& skip = {}) {
  GgufBuilder b;
  auto has = [&](const std::string& k) { return skip.count(k) == 0; };
  if (has("general.architecture")) b.Str("general.architecture", arch);
  if (has("block_count")) b.U32(arch + ".block_count", 2);
  if (has("context_length")) b.U32(arch + ".context_length", 2048);
  if (has("embedding_length")) b.U32(arch + ".embedding_length", 64);
  if (has("feed_forward_length")) b.U32(arch + ".feed_forward_length", 128);
  if (has("attention.head_count")) b.U32(arch + ".attention.head_count", 4);
  if (has("attention.layer_norm_rms_epsilon"))
    b.F32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  if (has("tokenizer.ggml.tokens"))
    b.StrArray("tokenizer.ggml.tokens", {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
  if (has("token_embd.weight")) b.Tensor("token_embd.weight", {64, 10}, kF32);
  return b;
}

absl::StatusOr<ModelConfig> Config(const GgufBuilder& b) {
  std::vector<uint8_t> bytes = b.Build();
  auto file = GgufFile::ParseBytes(bytes.data(), bytes.size(), "test.gguf");
  if (!file.ok()) return file.status();
  return ModelConfigFromGguf(**file);
}

std::string ConfigError(const GgufBuilder& b) {
  auto c = Config(b);
  EXPECT_FALSE(c.ok()) << "config accepted";
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(GgufConfig, LlamaWithDefaults) {
  auto c = Config(Model("llama"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->max_position, 2048);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->intermediate_size, 128);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 4);  // head_count_kv defaults to head_count
  EXPECT_EQ(c->head_dim, 16);     // embedding_length / head_count
  EXPECT_EQ(c->vocab_size, 10);   // from tokenizer.ggml.tokens
  EXPECT_FLOAT_EQ(static_cast<float>(c->rms_norm_eps), 1e-5f);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kNone);
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(c->activation, Activation::kSiLU);
  EXPECT_TRUE(c->tie_word_embeddings);  // no output.weight
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->sliding_window, 0);
}

TEST(GgufConfig, LlamaWithEveryOptionalKey) {
  auto b = Model("llama");
  b.U32("llama.attention.head_count_kv", 2)
      .F32("llama.rope.freq_base", 500000.0f)
      .U32("llama.attention.key_length", 32)
      .U32("llama.attention.value_length", 32)
      .U32("llama.rope.dimension_count", 32)
      .Str("llama.rope.scaling.type", "linear")
      .F32("llama.rope.scaling.factor", 4.0f)
      .U32("llama.attention.sliding_window", 4096)
      .U32("llama.vocab_size", 12)  // wins over the token list
      .Tensor("output.weight", {64, 10}, kF32)
      .Tensor("blk.0.attn_q.bias", {64}, kF32);
  auto c = Config(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 4.0);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->vocab_size, 12);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_TRUE(c->attention_bias);
}

TEST(GgufConfig, AcceptsAnyIntegerAndFloatWidths) {
  auto b = Model("llama", {"block_count", "attention.layer_norm_rms_epsilon"});
  b.I64("llama.block_count", 3).F64("llama.attention.layer_norm_rms_epsilon", 1e-6);
  auto c = Config(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
}

TEST(GgufConfig, Qwen2) {
  auto b = Model("qwen2");
  b.U32("qwen2.attention.head_count_kv", 1).F32("qwen2.rope.freq_base", 1000000.0f);
  auto c = Config(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);  // NEOX rope
  EXPECT_TRUE(c->attention_bias);              // Qwen2 always has Q/K/V biases
  EXPECT_EQ(c->num_kv_heads, 1);
  EXPECT_EQ(c->rope_theta, 1e6);
}

TEST(GgufConfig, Qwen3) {
  auto b = Model("qwen3");
  // Heads wider than embedding_length / head_count, as Qwen3-0.6B's.
  b.U32("qwen3.attention.key_length", 32).U32("qwen3.attention.value_length", 32);
  b.U32("qwen3.rope.dimension_count", 32);
  auto c = Config(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);  // NEOX rope, rows unpermuted
  EXPECT_TRUE(c->qk_norm);                     // attn_q_norm / attn_k_norm
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->q_size(), 128);
  // Only qwen3 norms per head.
  auto llama = Config(Model("llama"));
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_FALSE(llama->qk_norm);
}

TEST(GgufConfig, Phi3) {
  // NEOX rope on unpermuted rows; a window of 0 (llama.cpp's converter
  // writes it) is full attention. The fused tensors are the catalog's.
  auto b = Model("phi3");
  b.U32("phi3.attention.sliding_window", 0);
  auto c = Config(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->activation, Activation::kSiLU);
  // The 128k models' LongRoPE factors are refused by tensor.
  auto longrope = Model("phi3");
  longrope.Tensor("rope_factors_long.weight", {8}, kF32);
  EXPECT_EQ(ConfigError(longrope),
            "test.gguf: tensor 'rope_factors_long.weight' says the model uses LongRoPE (Phi-3 "
            "128k), which llmc does not support");
}

TEST(GgufConfig, Gemma2And3) {
  auto b = Model("gemma2");
  b.U32("gemma2.attention.key_length", 32).U32("gemma2.attention.value_length", 32);
  b.U32("gemma2.rope.dimension_count", 32).U32("gemma2.attention.sliding_window", 4096);
  b.F32("gemma2.attn_logit_softcapping", 50.0f).F32("gemma2.final_logit_softcapping", 30.0f);
  auto c = Config(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "gemma2");
  EXPECT_EQ(c->activation, Activation::kGeluTanh);
  EXPECT_DOUBLE_EQ(c->embedding_scale, 8.0);  // sqrt(64)
  EXPECT_TRUE(c->post_block_norms);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_DOUBLE_EQ(c->query_pre_attn_scalar, 32);  // the head size, as llama.cpp scales
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 30.0);
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->sliding_window_pattern, 2);
  EXPECT_TRUE(c->sliding_layer(0));
  EXPECT_FALSE(c->sliding_layer(1));
  EXPECT_TRUE(c->tie_word_embeddings);
  // Gemma 3: per-head Q/K norms, no caps, every 6th layer global; the local
  // base and the pattern from their keys where a converter wrote them.
  auto g3 = Model("gemma3");
  g3.U32("gemma3.attention.sliding_window", 512).F32("gemma3.rope.freq_base", 1e6f);
  c = Config(g3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qk_norm);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 0);
  EXPECT_EQ(c->sliding_window_pattern, 6);
  EXPECT_DOUBLE_EQ(c->rope_local_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_TRUE(c->sliding_layer(4));
  EXPECT_FALSE(c->sliding_layer(5));
  g3.U32("gemma3.attention.sliding_window_pattern", 3).F32("gemma3.rope.freq_base_swa", 5000.0f);
  c = Config(g3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window_pattern, 3);
  EXPECT_DOUBLE_EQ(c->rope_local_theta, 5000.0);
  // Without a window key every Gemma 3 layer is global, as llama.cpp reads it.
  c = Config(Model("gemma3"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_FALSE(c->sliding_layer(0));
  // Gemma 2 without its optional keys takes llama.cpp's defaults: a window of
  // 4096, caps of 50 and 30.
  auto bare = Model("gemma2");
  c = Config(bare);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_DOUBLE_EQ(c->attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c->final_logit_softcap, 30.0);
  EXPECT_DOUBLE_EQ(c->rope_local_theta, 0);  // the sliding layers share rope_theta
}

TEST(GgufConfig, MixturesOfExperts) {
  // Qwen3-MoE: its own expert width; llama.cpp renormalizes.
  auto q = Model("qwen3moe");
  q.U32("qwen3moe.expert_count", 8).U32("qwen3moe.expert_used_count", 2);
  q.U32("qwen3moe.expert_feed_forward_length", 96);
  auto c = Config(q);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen3_moe");
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->num_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 96);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_EQ(c->rope_style, RopeStyle::kHalf);
  // Mixtral is llama with experts: feed_forward_length is theirs, rows permuted.
  auto m = Model("llama");
  m.U32("llama.expert_count", 4).U32("llama.expert_used_count", 2);
  c = Config(m);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "mixtral");
  EXPECT_EQ(c->moe_intermediate_size, c->intermediate_size);
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved);
  EXPECT_FALSE(c->qk_norm);
  // What llmc cannot run is named by key.
  auto too_many = Model("llama");
  too_many.U32("llama.expert_count", 4).U32("llama.expert_used_count", 5);
  EXPECT_EQ(ConfigError(too_many),
            "test.gguf: key 'llama.expert_used_count' is 5, more than the 4 experts");
  auto shared = Model("llama");
  shared.U32("llama.expert_count", 4).U32("llama.expert_used_count", 2);
  shared.U32("llama.expert_shared_count", 1);
  EXPECT_EQ(ConfigError(shared),
            "test.gguf: key 'llama.expert_shared_count' is 1; llmc does not run shared experts yet");
  auto sigmoid = Model("llama");
  sigmoid.U32("llama.expert_count", 4).U32("llama.expert_used_count", 2);
  sigmoid.U32("llama.expert_gating_func", 2);
  EXPECT_EQ(ConfigError(sigmoid),
            "test.gguf: key 'llama.expert_gating_func' is 2; llmc routes by softmax (1) only");
  auto no_width = Model("qwen3moe");
  no_width.U32("qwen3moe.expert_count", 8).U32("qwen3moe.expert_used_count", 2);
  EXPECT_EQ(ConfigError(no_width),
            "test.gguf: key 'qwen3moe.expert_feed_forward_length' is missing");
}

TEST(GgufConfig, RopeScalingFollowsLlamaCpp) {
  // The older key name, and the type defaulting to linear.
  auto old_key = Model("llama");
  old_key.F32("llama.rope.scale_linear", 2.0f);
  auto c = Config(old_key);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 2.0);
  // "none", or a factor of 1, means no scaling whatever the type.
  auto none = Model("llama");
  none.Str("llama.rope.scaling.type", "none").F32("llama.rope.scaling.factor", 8.0f);
  ASSERT_TRUE(Config(none).ok());
  EXPECT_EQ(Config(none)->rope_scaling.kind, RopeScaling::Kind::kNone);
  auto unit = Model("llama");
  unit.Str("llama.rope.scaling.type", "yarn").F32("llama.rope.scaling.factor", 1.0f);
  ASSERT_TRUE(Config(unit).ok());
  // Other kinds are refused rather than silently ignored.
  auto yarn = Model("llama");
  yarn.Str("llama.rope.scaling.type", "yarn").F32("llama.rope.scaling.factor", 4.0f);
  EXPECT_EQ(ConfigError(yarn),
            "test.gguf: key 'llama.rope.scaling.type' is 'yarn' (factor 4), which llmc does not "
            "support (supported: none, linear)");
  auto negative = Model("llama");
  negative.F32("llama.rope.scaling.factor", -2.0f);
  EXPECT_EQ(ConfigError(negative),
            "test.gguf: key 'llama.rope.scaling.factor' must be positive, got -2");
  auto wrong_type = Model("llama");
  wrong_type.U32("llama.rope.scaling.type", 1).F32("llama.rope.scaling.factor", 2.0f);
  EXPECT_EQ(ConfigError(wrong_type),
            "test.gguf: key 'llama.rope.scaling.type' has type uint32, expected string");
}

TEST(GgufConfig, RejectsUnsupportedArchitectures) {
  EXPECT_EQ(ConfigError(Model("gpt2")),
            "test.gguf: key 'general.architecture' is 'gpt2', which llmc does not support "
            "(supported: llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3)");
  EXPECT_EQ(ConfigError(Model("llama", {"general.architecture"})),
            "test.gguf: key 'general.architecture' is missing");
}

TEST(GgufConfig, MissingRequiredKeysAreNamed) {
  for (const char* key :
       {"block_count", "context_length", "embedding_length", "feed_forward_length",
        "attention.head_count", "attention.layer_norm_rms_epsilon"}) {
    EXPECT_EQ(ConfigError(Model("qwen2", {key})),
              std::string("test.gguf: key 'qwen2.") + key + "' is missing");
  }
  EXPECT_EQ(ConfigError(Model("llama", {"tokenizer.ggml.tokens"})),
            "test.gguf: no vocabulary size: neither key 'llama.vocab_size' nor "
            "'tokenizer.ggml.tokens' is present");
}

TEST(GgufConfig, BadValuesAreNamed) {
  auto b = Model("llama", {"block_count"});
  b.Str("llama.block_count", "two");
  EXPECT_EQ(ConfigError(b),
            "test.gguf: key 'llama.block_count' has type string, expected an integer");
  auto zero = Model("llama", {"attention.head_count"});
  zero.U32("llama.attention.head_count", 0);
  EXPECT_EQ(ConfigError(zero),
            "test.gguf: key 'llama.attention.head_count' must be positive, got 0");
  auto negative = Model("llama");
  negative.I32("llama.attention.sliding_window", -1);
  EXPECT_EQ(ConfigError(negative),
            "test.gguf: key 'llama.attention.sliding_window' must not be negative, got -1");
  auto per_layer = Model("llama");
  per_layer.Array<uint32_t>("llama.attention.head_count_kv", GgufType::kUint32, {2, 2});
  EXPECT_EQ(ConfigError(per_layer),
            "test.gguf: key 'llama.attention.head_count_kv' has type array of uint32, expected an "
            "integer");
  auto tokens = Model("llama", {"tokenizer.ggml.tokens"});
  tokens.Array<int32_t>("tokenizer.ggml.tokens", GgufType::kInt32, {1, 2});
  EXPECT_EQ(ConfigError(tokens),
            "test.gguf: key 'tokenizer.ggml.tokens' has type array of int32, expected array of "
            "string");
}

TEST(GgufConfig, RejectsShapesLlmcCannotRun) {
  auto indivisible = Model("llama", {"attention.head_count"});
  indivisible.U32("llama.attention.head_count", 5);
  EXPECT_EQ(ConfigError(indivisible),
            "test.gguf: key 'llama.attention.head_count' (5) does not divide "
            "llama.embedding_length (64) and llama.attention.key_length is absent");
  auto value_length = Model("llama");
  value_length.U32("llama.attention.value_length", 8);
  EXPECT_EQ(ConfigError(value_length),
            "test.gguf: key 'llama.attention.value_length' is 8 but the key length is 16; llmc "
            "needs them equal");
  auto partial_rope = Model("llama");
  partial_rope.U32("llama.rope.dimension_count", 8);
  EXPECT_EQ(ConfigError(partial_rope),
            "test.gguf: key 'llama.rope.dimension_count' is 8 but the head size is 16; partial "
            "rotary embeddings are not supported");
}

TEST(GgufConfig, RopeFreqsTensorSetsFreqFactors) {
  auto without = Model("llama");
  auto plain = Config(without);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->rope_freq_factors);
  auto freqs = Model("llama");
  freqs.Tensor("rope_freqs.weight", {8}, kF32);
  auto config = Config(freqs);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->rope_freq_factors);
}

TEST(GgufConfig, ValidationErrorsNameTheFile) {
  auto b = Model("llama");
  b.U32("llama.attention.head_count_kv", 3);  // does not divide 4 heads
  std::string msg = ConfigError(b);
  EXPECT_EQ(msg.rfind("test.gguf: model config: field 'num_key_value_heads'", 0), 0u) << msg;
  auto odd = Model("llama");
  odd.U32("llama.attention.key_length", 15).U32("llama.rope.dimension_count", 15);
  msg = ConfigError(odd);
  EXPECT_EQ(msg.rfind("test.gguf: model config: field 'head_dim'", 0), 0u) << msg;
}

TEST(GgufConfig, FuzzSeedModels) {
  // Tiny models written by scripts/gen-gguf-fuzz-seeds.py.
  const std::string dir = std::string(LLMC_TEST_DATA_DIR) + "/../fuzz/corpus/gguf/";
  auto llama = GgufFile::Open(dir + "llama_tiny.gguf");
  ASSERT_TRUE(llama.ok()) << llama.status();
  auto c = ModelConfigFromGguf(**llama);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 8);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_TRUE(c->tie_word_embeddings);
  auto qwen = GgufFile::Open(dir + "qwen2_tiny_untied.gguf");
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  c = ModelConfigFromGguf(**qwen);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 128);
  auto scaled = GgufFile::Open(dir + "llama_rope_linear.gguf");
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  c = ModelConfigFromGguf(**scaled);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(c->head_dim, 8);
}

}  // namespace
}  // namespace llmc
