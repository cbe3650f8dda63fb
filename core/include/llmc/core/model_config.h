// The architecture-level description of a decoder-only transformer, shared by
// the compiler (the frontend fills it from config.json or GGUF metadata and the
// IR builder reads it) and the runtime (the artifact manifest carries it).
// Lives in core/, which both halves stand on and which includes neither.
#ifndef LLMC_CORE_MODEL_CONFIG_H_
#define LLMC_CORE_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llmc {

// RoPE frequency scaling (HF `rope_scaling`).
struct RopeScaling {
  enum class Kind { kNone, kLinear, kLlama3 };
  Kind kind = Kind::kNone;
  double factor = 1.0;
  // llama3 only.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

// How RoPE pairs dimensions: `kHalf` rotates (x[i], x[i + d/2]) as HF
// transformers does; `kInterleaved` rotates (x[2i], x[2i+1]) as GGML's normal
// mode does on GGUF Llama weights (whose Q/K rows were permuted on export).
enum class RopeStyle { kHalf, kInterleaved };

enum class Activation { kSiLU, kGeluTanh, kGeluErf };

struct ModelConfig {
  std::string architecture = "llama";  // llama | mistral | qwen2 | qwen3 | qwen3_moe | mixtral | phi3 | gemma2 | gemma3
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // explicit; hidden_size / num_heads when absent
  int64_t max_position = 2048;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeStyle rope_style = RopeStyle::kHalf;
  Activation activation = Activation::kSiLU;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Q/K/V projections carry a bias (Qwen2)
  // Each head of Q and K is RMS-normalized (one weight of head_dim for all
  // heads, the model's rms_norm_eps) after its projection, before RoPE
  // (Qwen3's q_norm / k_norm).
  bool qk_norm = false;
  // Mixture of experts (0: a dense MLP). Every layer's MLP routes each token
  // to the num_experts_per_tok experts of highest softmax(router logits) and
  // sums their SwiGLU MLPs (moe_intermediate_size wide) weighted by those
  // probabilities, renormalized to sum 1 when norm_topk_prob.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t sliding_window = 0;   // 0: full attention
  // Which layers slide: with a pattern N > 1, layer i attends globally iff
  // (i + 1) % N == 0 (Gemma 2: 2, Gemma 3: 6); otherwise every layer does.
  int64_t sliding_window_pattern = 0;
  // RoPE base of the sliding layers, which Gemma 3 rotates unscaled; 0: the
  // layers share rope_theta and rope_scaling.
  double rope_local_theta = 0;
  // Gemma: the embedding rows are multiplied by this (sqrt(hidden_size)).
  double embedding_scale = 1.0;
  // Gemma 2/3: each block's output is RMS-normed before it joins the
  // residual (post_attention_norm, post_ffw_norm).
  bool post_block_norms = false;
  // Attention scores are scaled by 1/sqrt(query_pre_attn_scalar); 0: by
  // 1/sqrt(head_dim).
  double query_pre_attn_scalar = 0;
  // Soft-capping x -> cap * tanh(x / cap) of the attention scores and of the
  // final logits (Gemma 2); 0: none.
  double attn_logit_softcap = 0;
  double final_logit_softcap = 0;
  // RoPE frequencies are divided by per-pair factors stored as a weight
  // (GGUF's `rope_freqs.weight`, how llama.cpp stores Llama 3.1 scaling).
  bool rope_freq_factors = false;

  bool moe() const { return num_experts > 0; }
  bool sliding_layer(int64_t layer) const {
    return sliding_window > 0 &&
           (sliding_window_pattern <= 1 || (layer + 1) % sliding_window_pattern != 0);
  }
  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
};

// Checks that the fields are consistent (positive sizes, heads divide, ...).
// The error names the field at fault.
absl::Status ValidateModelConfig(const ModelConfig& config);

// JSON form used by the artifact manifest and `llmc inspect`.
std::string ModelConfigToJson(const ModelConfig& config, int indent = 2);
absl::StatusOr<ModelConfig> ModelConfigFromJson(const std::string& json);

const char* ToString(RopeScaling::Kind kind);
const char* ToString(RopeStyle style);
const char* ToString(Activation activation);

}  // namespace llmc

#endif  // LLMC_CORE_MODEL_CONFIG_H_
