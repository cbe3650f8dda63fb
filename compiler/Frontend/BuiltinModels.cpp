//===- BuiltinModels.cpp - synthetic models built into llmc ---------------===//
#include "BuiltinModels.h"

#include "HFWeightNames.h"

namespace llmc {
namespace {

ModelConfig tinyLlama() {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 256;
  c.hidden_size = 64;
  c.intermediate_size = 160;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position = 512;
  c.tie_word_embeddings = true;
  return c;
}

ModelConfig tinyQwen2() {
  ModelConfig c = tinyLlama();
  c.architecture = "qwen2";
  c.vocab_size = 300;
  c.attention_bias = true;
  c.tie_word_embeddings = false;
  c.rope_theta = 1000000.0;
  c.rms_norm_eps = 1e-6;
  return c;
}

// Qwen3's layer on the tiny shape: Q and K normed per head, no biases, and
// heads wider than hidden_size / num_heads (as Qwen3-0.6B's 16 x 128 over a
// hidden size of 1024).
ModelConfig tinyQwen3() {
  ModelConfig c = tinyLlama();
  c.architecture = "qwen3";
  c.vocab_size = 300;
  c.head_dim = 32;
  c.qk_norm = true;
  c.tie_word_embeddings = false;
  c.rope_theta = 1000000.0;
  c.rms_norm_eps = 1e-6;
  return c;
}

// Qwen3-MoE's layer on the tiny shape: 8 experts of 32, 2 per token.
ModelConfig tinyQwen3Moe() {
  ModelConfig c = tinyQwen3();
  c.architecture = "qwen3_moe";
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 32;
  c.norm_topk_prob = true;
  return c;
}

// Phi-3's layer on the tiny shape: Q/K/V and gate/up each one stored tensor.
ModelConfig tinyPhi3() {
  ModelConfig c = tinyLlama();
  c.architecture = "phi3";
  c.vocab_size = 320;
  c.num_kv_heads = 4;
  c.tie_word_embeddings = false;
  return c;
}

// Gemma 2's layer on the tiny shape: scaled embeddings, four norms a layer,
// GeGLU, soft-capped scores and logits, layer 0 on a window of 16 keys.
ModelConfig tinyGemma2() {
  ModelConfig c = tinyLlama();
  c.architecture = "gemma2";
  c.vocab_size = 320;
  c.activation = Activation::kGeluTanh;
  c.rms_norm_eps = 1e-6;
  c.embedding_scale = 8.0; // sqrt(64)
  c.post_block_norms = true;
  c.query_pre_attn_scalar = 16;
  c.sliding_window = 16;
  c.sliding_window_pattern = 2;
  c.attn_logit_softcap = 50.0;
  c.final_logit_softcap = 30.0;
  return c;
}

// Gemma 3's: no soft-caps; Q/K norm per head; the sliding layer rotates
// with base 10000, the global one with 1e6.
ModelConfig tinyGemma3() {
  ModelConfig c = tinyGemma2();
  c.architecture = "gemma3";
  c.attn_logit_softcap = 0;
  c.final_logit_softcap = 0;
  c.qk_norm = true;
  c.rope_theta = 1000000.0;
  c.rope_local_theta = 10000.0;
  return c;
}

// SmolLM2-135M's shape (config.json of HuggingFaceTB/SmolLM2-135M).
ModelConfig smollm2Shape() {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.max_position = 8192;
  c.rope_theta = 100000.0;
  c.tie_word_embeddings = true;
  return c;
}

// Llama-3-8B's shape (config.json of meta-llama/Meta-Llama-3-8B): for timing
// an 8B model with --dummy-weights, whose artifact carries no weights.
ModelConfig llama3_8bShape() {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position = 8192;
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = false;
  return c;
}

const BuiltinModel kModels[] = {
    {"tiny-llama", "2 layers, hidden 64, GQA 4/2 heads, tied embeddings", tinyLlama()},
    {"tiny-qwen2", "2 layers, hidden 64, QKV bias, untied embeddings, vocab 300", tinyQwen2()},
    {"tiny-qwen3", "2 layers, hidden 64, 4/2 heads of 32, Q/K norm per head, untied, vocab 300",
     tinyQwen3()},
    {"tiny-qwen3-moe", "tiny-qwen3 with a mixture of 8 experts of 32, 2 per token",
     tinyQwen3Moe()},
    {"tiny-phi3", "2 layers, hidden 64, 4 heads, fused QKV and gate/up, untied, vocab 320",
     tinyPhi3()},
    {"tiny-gemma2",
     "2 layers, hidden 64, GQA 4/2, GeGLU, post-norms, soft-caps, layer 0 on a window of 16",
     tinyGemma2()},
    {"tiny-gemma3", "tiny-gemma2 without soft-caps, with Q/K norms and a local RoPE base",
     tinyGemma3()},
    {"smollm2-135m-shape", "SmolLM2-135M's shape: 30 layers, hidden 576, 9/3 heads",
     smollm2Shape()},
    {"llama3-8b-shape",
     "Llama-3-8B's shape: 32 layers, hidden 4096, MLP 14336, 32/8 heads, vocab 128256",
     llama3_8bShape()},
};

} // namespace

llvm::ArrayRef<BuiltinModel> builtinModels() { return kModels; }

const BuiltinModel *findBuiltinModel(llvm::StringRef name) {
  for (const BuiltinModel &m : kModels)
    if (name == m.name)
      return &m;
  return nullptr;
}

absl::StatusOr<std::optional<WeightEntry>>
HFNamedCatalog::find(WeightRole role, int layer, llvm::ArrayRef<int64_t>) const {
  bool isBias = role == WeightRole::kQueryBias || role == WeightRole::kKeyBias ||
                role == WeightRole::kValueBias;
  if (isBias && !config.attention_bias)
    return std::nullopt;
  bool isHeadNorm = role == WeightRole::kQueryNorm || role == WeightRole::kKeyNorm;
  if (isHeadNorm && !config.qk_norm)
    return std::nullopt;
  if (role == WeightRole::kLMHead && config.tie_word_embeddings)
    return std::nullopt;
  bool postNorm = role == WeightRole::kPostAttnNorm || role == WeightRole::kPostMlpNorm;
  if (postNorm && !config.post_block_norms)
    return std::nullopt;
  // Norms and biases stay in f32 whatever the matrices are stored in.
  bool moeRole = role == WeightRole::kRouter || isExpertsRole(role);
  if (moeRole != config.moe() && (moeRole || role == WeightRole::kGate ||
                                  role == WeightRole::kUp || role == WeightRole::kDown))
    return std::nullopt;
  bool vector = isBias || isHeadNorm || postNorm || role == WeightRole::kAttnNorm ||
                role == WeightRole::kMlpNorm || role == WeightRole::kFinalNorm ||
                role == WeightRole::kRouter;
  if (std::optional<FusedRows> rows = fusedRows(role, config);
      rows && config.architecture == "phi3")
    return sliceOfFused(WeightEntry{hfFusedName(rows->kind, layer), format}, *rows);
  return WeightEntry{hfWeightName(role, layer, config.architecture),
                     vector ? llm::WeightFormat::f32 : format};
}

std::string HFNamedCatalog::describe(WeightRole role, int layer) const {
  return "tensor '" + hfWeightName(role, layer, config.architecture) + "' of the built-in model";
}

} // namespace llmc
