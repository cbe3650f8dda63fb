#include "llmc/core/format/gguf_config.h"

#include <cmath>
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {
namespace {

constexpr const char* kSupported = "llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3";

// Reads `<arch>.<suffix>` keys and names them in errors.
class KeyReader {
 public:
  KeyReader(const GgufFile& gguf, std::string arch) : gguf_(gguf), arch_(std::move(arch)) {}

  std::string Key(std::string_view suffix) const { return absl::StrFormat("%s.%s", arch_, suffix); }
  bool Has(std::string_view suffix) const { return gguf_.Find(Key(suffix)) != nullptr; }

  absl::Status Error(std::string_view suffix, const std::string& why) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: key '%s' %s", gguf_.path(), Key(suffix), why));
  }

  // A required positive integer.
  absl::StatusOr<int64_t> Positive(std::string_view suffix) const {
    LLMC_ASSIGN_OR_RETURN(int64_t v, gguf_.GetInt(Key(suffix)));
    if (v <= 0) return Error(suffix, absl::StrFormat("must be positive, got %d", v));
    return v;
  }

  // An optional positive integer.
  absl::StatusOr<int64_t> Positive(std::string_view suffix, int64_t fallback) const {
    if (!Has(suffix)) return fallback;
    return Positive(suffix);
  }

  absl::StatusOr<double> Float(std::string_view suffix, double fallback) const {
    if (!Has(suffix)) return fallback;
    return gguf_.GetFloat(Key(suffix));
  }

 private:
  const GgufFile& gguf_;
  std::string arch_;
};

// llama.cpp's reading of RoPE scaling: the type defaults to "linear" and the
// factor (`rope.scaling.factor`, or the older `rope.scale_linear`) to none;
// a factor of 0 or 1 means no scaling.
absl::StatusOr<RopeScaling> ReadRopeScaling(const GgufFile& gguf, const KeyReader& keys) {
  RopeScaling scaling;
  const char* factor_key =
      keys.Has("rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear";
  LLMC_ASSIGN_OR_RETURN(double factor, keys.Float(factor_key, 0.0));
  std::string type = "linear";
  if (keys.Has("rope.scaling.type")) {
    LLMC_ASSIGN_OR_RETURN(type, gguf.GetString(keys.Key("rope.scaling.type")));
  }
  if (type == "none" || factor == 0.0 || factor == 1.0) return scaling;
  if (type != "linear")
    return keys.Error("rope.scaling.type",
                      absl::StrFormat("is '%s' (factor %g), which llmc does not support "
                                      "(supported: none, linear)",
                                      type, factor));
  if (!(factor > 0))
    return keys.Error(factor_key, absl::StrFormat("must be positive, got %g", factor));
  scaling.kind = RopeScaling::Kind::kLinear;
  scaling.factor = factor;
  return scaling;
}

// llama.cpp's mixture-of-experts keys: expert_count and expert_used_count;
// the experts' width is expert_feed_forward_length where the arch has one
// (qwen3moe), else feed_forward_length (Mixtral as `llama`). llama.cpp
// renormalizes the chosen experts' weights for both; what it has no graph
// for here (shared experts, non-softmax gating) is refused by key.
absl::Status ReadExperts(const GgufFile& gguf, const KeyReader& keys, const std::string& arch,
                         ModelConfig& c) {
  if (!keys.Has("expert_count")) {
    if (arch == "qwen3moe") return keys.Error("expert_count", "is missing");
    return absl::OkStatus();
  }
  LLMC_ASSIGN_OR_RETURN(int64_t experts, gguf.GetInt(keys.Key("expert_count")));
  if (experts == 0 && arch != "qwen3moe") return absl::OkStatus();  // a dense llama
  if (experts < 1)
    return keys.Error("expert_count", absl::StrFormat("must be positive, got %d", experts));
  c.num_experts = experts;
  LLMC_ASSIGN_OR_RETURN(c.num_experts_per_tok, keys.Positive("expert_used_count"));
  if (c.num_experts_per_tok > c.num_experts)
    return keys.Error("expert_used_count",
                      absl::StrFormat("is %d, more than the %d experts", c.num_experts_per_tok,
                                      c.num_experts));
  if (arch == "qwen3moe") {
    LLMC_ASSIGN_OR_RETURN(c.moe_intermediate_size, keys.Positive("expert_feed_forward_length"));
  } else {
    c.moe_intermediate_size = c.intermediate_size;
  }
  c.norm_topk_prob = true;
  if (keys.Has("expert_shared_count")) {
    LLMC_ASSIGN_OR_RETURN(int64_t shared, gguf.GetInt(keys.Key("expert_shared_count")));
    if (shared != 0)
      return keys.Error("expert_shared_count",
                        absl::StrFormat("is %d; llmc does not run shared experts yet", shared));
  }
  if (keys.Has("expert_gating_func")) {
    LLMC_ASSIGN_OR_RETURN(int64_t gating, gguf.GetInt(keys.Key("expert_gating_func")));
    if (gating != 1)  // LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX
      return keys.Error("expert_gating_func",
                        absl::StrFormat("is %d; llmc routes by softmax (1) only", gating));
  }
  return absl::OkStatus();
}

// llama.cpp's Gemma graphs: embeddings times sqrt(n_embd), four norms a layer
// (the converter stored them as 1 + w), GeGLU, a window on all layers but
// every 2nd (gemma2) or 6th (gemma3), which rotate with base 10000 unscaled
// (gemma3, or rope.freq_base_swa); Gemma 2 soft-caps scores and logits by
// key. Queries scale by
// 1/sqrt(head size), by 1/sqrt(n_embd / n_head) in the 27B models (46
// layers for gemma2, 62 for gemma3), as llama.cpp decides by model size.
absl::Status ReadGemma(const KeyReader& keys, const std::string& arch, ModelConfig& c) {
  c.post_block_norms = true;
  c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
  c.activation = Activation::kGeluTanh;
  const bool big = c.num_layers == (arch == "gemma2" ? 46 : 62);
  c.query_pre_attn_scalar = big ? static_cast<double>(c.hidden_size / c.num_heads)
                                : static_cast<double>(c.head_dim);
  const int64_t pattern = arch == "gemma2" ? 2 : 6;
  LLMC_ASSIGN_OR_RETURN(c.sliding_window_pattern,
                        keys.Positive("attention.sliding_window_pattern", pattern));
  if (arch == "gemma2") {
    // llama.cpp's defaults for the keys a converter left out: a window of
    // 4096, caps of 50 and 30, the sliding layers on the global base.
    if (!keys.Has("attention.sliding_window")) c.sliding_window = 4096;
    LLMC_ASSIGN_OR_RETURN(c.attn_logit_softcap, keys.Float("attn_logit_softcapping", 50.0));
    LLMC_ASSIGN_OR_RETURN(c.final_logit_softcap, keys.Float("final_logit_softcapping", 30.0));
    LLMC_ASSIGN_OR_RETURN(c.rope_local_theta, keys.Float("rope.freq_base_swa", 0.0));
    return absl::OkStatus();
  }
  // Gemma 3: without a window (or with 0) every layer is global, as llama.cpp
  // reads it; no cap on the scores, one on the logits where a key sets it.
  LLMC_ASSIGN_OR_RETURN(c.rope_local_theta, keys.Float("rope.freq_base_swa", 10000.0));
  LLMC_ASSIGN_OR_RETURN(c.final_logit_softcap, keys.Float("final_logit_softcapping", 0.0));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf) {
  const std::string& path = gguf.path();
  LLMC_ASSIGN_OR_RETURN(std::string arch, gguf.GetString("general.architecture"));
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" &&
      arch != "phi3" && arch != "gemma2" && arch != "gemma3")
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key 'general.architecture' is '%s', which llmc does not support (supported: %s)", path,
        arch, kSupported));
  KeyReader keys(gguf, arch);

  ModelConfig c;
  c.architecture = arch;
  LLMC_ASSIGN_OR_RETURN(c.num_layers, keys.Positive("block_count"));
  LLMC_ASSIGN_OR_RETURN(c.max_position, keys.Positive("context_length"));
  LLMC_ASSIGN_OR_RETURN(c.hidden_size, keys.Positive("embedding_length"));
  LLMC_ASSIGN_OR_RETURN(c.intermediate_size, keys.Positive("feed_forward_length"));
  LLMC_ASSIGN_OR_RETURN(c.num_heads, keys.Positive("attention.head_count"));
  LLMC_ASSIGN_OR_RETURN(c.num_kv_heads, keys.Positive("attention.head_count_kv", c.num_heads));
  LLMC_ASSIGN_OR_RETURN(c.rms_norm_eps,
                        gguf.GetFloat(keys.Key("attention.layer_norm_rms_epsilon")));
  LLMC_ASSIGN_OR_RETURN(c.rope_theta, keys.Float("rope.freq_base", 10000.0));
  if (c.hidden_size % c.num_heads != 0 && !keys.Has("attention.key_length"))
    return keys.Error("attention.head_count",
                      absl::StrFormat("(%d) does not divide %s (%d) and %s is absent", c.num_heads,
                                      keys.Key("embedding_length"), c.hidden_size,
                                      keys.Key("attention.key_length")));
  LLMC_ASSIGN_OR_RETURN(c.head_dim,
                        keys.Positive("attention.key_length", c.hidden_size / c.num_heads));
  // llmc's attention uses one head size for K and V and rotates whole heads.
  LLMC_ASSIGN_OR_RETURN(int64_t value_length, keys.Positive("attention.value_length", c.head_dim));
  if (value_length != c.head_dim)
    return keys.Error("attention.value_length",
                      absl::StrFormat("is %d but the key length is %d; llmc needs them equal",
                                      value_length, c.head_dim));
  LLMC_ASSIGN_OR_RETURN(int64_t rope_dims, keys.Positive("rope.dimension_count", c.head_dim));
  if (rope_dims != c.head_dim)
    return keys.Error("rope.dimension_count",
                      absl::StrFormat("is %d but the head size is %d; partial rotary embeddings "
                                      "are not supported",
                                      rope_dims, c.head_dim));
  LLMC_ASSIGN_OR_RETURN(c.rope_scaling, ReadRopeScaling(gguf, keys));
  // Phi-3's 128k models carry LongRoPE as per-pair factor tensors.
  for (const char* name : {"rope_factors_long.weight", "blk.0.rope_factors_long.weight"})
    if (gguf.FindTensor(name) != nullptr)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' says the model uses LongRoPE (Phi-3 128k), which llmc does not "
          "support",
          path, name));
  // Llama 3.1-style frequency factors live in a tensor, not in metadata; the
  // IR's rope op takes them as a weight.
  c.rope_freq_factors = gguf.FindTensor("rope_freqs.weight") != nullptr;
  if (keys.Has("attention.sliding_window")) {  // 0: full attention
    LLMC_ASSIGN_OR_RETURN(c.sliding_window, gguf.GetInt(keys.Key("attention.sliding_window")));
    if (c.sliding_window < 0)
      return keys.Error("attention.sliding_window",
                        absl::StrFormat("must not be negative, got %d", c.sliding_window));
  }

  if (keys.Has("vocab_size")) {
    LLMC_ASSIGN_OR_RETURN(c.vocab_size, keys.Positive("vocab_size"));
  } else if (gguf.Find("tokenizer.ggml.tokens") != nullptr) {
    LLMC_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens,
                          gguf.GetStringArray("tokenizer.ggml.tokens"));
    c.vocab_size = static_cast<int64_t>(tokens->size());
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: no vocabulary size: neither key '%s' nor 'tokenizer.ggml.tokens' "
                        "is present",
                        path, keys.Key("vocab_size")));
  }

  c.tie_word_embeddings = gguf.FindTensor("output.weight") == nullptr;
  c.attention_bias = arch == "qwen2" || gguf.FindTensor("blk.0.attn_q.bias") != nullptr;
  // llama.cpp's qwen3 graphs always norm Q and K per head (attn_q_norm,
  // attn_k_norm); the IR builder reports them missing by name.
  c.qk_norm = arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3";
  if (arch == "gemma2" || arch == "gemma3") LLMC_RETURN_IF_ERROR(ReadGemma(keys, arch, c));
  LLMC_RETURN_IF_ERROR(ReadExperts(gguf, keys, arch, c));
  // ModelConfig names the families as transformers does.
  if (arch == "qwen3moe") c.architecture = "qwen3_moe";
  if (arch == "llama" && c.moe()) c.architecture = "mixtral";
  // llama.cpp's converter permutes Llama's (and Mixtral's) Q/K rows so that
  // GGML's normal (interleaved) rope applies; the Qwens use NEOX
  // (half-split) rope unpermuted.
  c.rope_style = arch == "llama" ? RopeStyle::kInterleaved : RopeStyle::kHalf;
  if (arch != "gemma2" && arch != "gemma3") c.activation = Activation::kSiLU;

  if (absl::Status st = ValidateModelConfig(c); !st.ok())
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", path, st.message()));
  return c;
}

}  // namespace llmc
