#include "llmc/core/model_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llmc {
namespace {

using nlohmann::json;

absl::Status FieldError(const char* field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrFormat("model config: field '%s' %s", field, why));
}

absl::Status RequirePositive(const char* field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return FieldError(field, absl::StrFormat("must be positive, got %d", value));
}

}  // namespace

const char* ToString(RopeScaling::Kind kind) {
  switch (kind) {
    case RopeScaling::Kind::kNone: return "none";
    case RopeScaling::Kind::kLinear: return "linear";
    case RopeScaling::Kind::kLlama3: return "llama3";
  }
  return "?";
}

const char* ToString(RopeStyle style) {
  return style == RopeStyle::kHalf ? "half" : "interleaved";
}

const char* ToString(Activation activation) {
  switch (activation) {
    case Activation::kSiLU: return "silu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kGeluErf: return "gelu";
  }
  return "?";
}

absl::Status ValidateModelConfig(const ModelConfig& c) {
  static constexpr const char* kArchitectures[] = {"llama", "mistral", "qwen2",
                                                   "qwen3", "qwen3_moe", "mixtral", "phi3",
                                                   "gemma2", "gemma3"};
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), c.architecture) ==
      std::end(kArchitectures))
    return FieldError("architecture", absl::StrFormat("is '%s'; supported: %s", c.architecture,
                                                      absl::StrJoin(kArchitectures, ", ")));
  if (c.num_experts < 0)
    return FieldError("num_experts", absl::StrFormat("must not be negative, got %d", c.num_experts));
  if (c.moe()) {
    if (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts)
      return FieldError("num_experts_per_tok",
                        absl::StrFormat("must be in [1, num_experts = %d], got %d", c.num_experts,
                                        c.num_experts_per_tok));
    if (auto st = RequirePositive("moe_intermediate_size", c.moe_intermediate_size); !st.ok())
      return st;
  }
  struct {
    const char* name;
    int64_t value;
  } sizes[] = {{"vocab_size", c.vocab_size},
               {"hidden_size", c.hidden_size},
               {"intermediate_size", c.intermediate_size},
               {"num_hidden_layers", c.num_layers},
               {"num_attention_heads", c.num_heads},
               {"num_key_value_heads", c.num_kv_heads},
               {"head_dim", c.head_dim},
               {"max_position_embeddings", c.max_position}};
  for (const auto& s : sizes) {
    if (auto st = RequirePositive(s.name, s.value); !st.ok()) return st;
  }
  if (c.num_heads % c.num_kv_heads != 0)
    return FieldError("num_key_value_heads",
                      absl::StrFormat("(%d) must divide num_attention_heads (%d)", c.num_kv_heads,
                                      c.num_heads));
  if (c.head_dim % 2 != 0)
    return FieldError("head_dim", absl::StrFormat("must be even for RoPE, got %d", c.head_dim));
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
    return FieldError("rms_norm_eps", absl::StrFormat("must be in (0, 1), got %g", c.rms_norm_eps));
  if (!(c.rope_theta > 0))
    return FieldError("rope_theta", absl::StrFormat("must be positive, got %g", c.rope_theta));
  if (c.rope_scaling.kind != RopeScaling::Kind::kNone && !(c.rope_scaling.factor > 0))
    return FieldError("rope_scaling.factor",
                      absl::StrFormat("must be positive, got %g", c.rope_scaling.factor));
  if (c.rope_scaling.kind == RopeScaling::Kind::kLlama3 &&
      !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor))
    return FieldError("rope_scaling.high_freq_factor", "must exceed low_freq_factor");
  if (c.sliding_window < 0)
    return FieldError("sliding_window", absl::StrFormat("must be >= 0, got %d", c.sliding_window));
  if (c.sliding_window_pattern < 0)
    return FieldError("sliding_window_pattern",
                      absl::StrFormat("must be >= 0, got %d", c.sliding_window_pattern));
  struct {
    const char* name;
    double value;
  } nonnegative[] = {{"rope_local_base_freq", c.rope_local_theta},
                     {"query_pre_attn_scalar", c.query_pre_attn_scalar},
                     {"attn_logit_softcapping", c.attn_logit_softcap},
                     {"final_logit_softcapping", c.final_logit_softcap}};
  for (const auto& f : nonnegative)
    if (!(f.value >= 0))
      return FieldError(f.name, absl::StrFormat("must be >= 0, got %g", f.value));
  if (!(c.embedding_scale > 0))
    return FieldError("embedding_scale",
                      absl::StrFormat("must be positive, got %g", c.embedding_scale));
  return absl::OkStatus();
}

std::string ModelConfigToJson(const ModelConfig& c, int indent) {
  json j = {
      {"architecture", c.architecture},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_style", ToString(c.rope_style)},
      {"rope_scaling",
       {{"type", ToString(c.rope_scaling.kind)},
        {"factor", c.rope_scaling.factor},
        {"low_freq_factor", c.rope_scaling.low_freq_factor},
        {"high_freq_factor", c.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position}}},
      {"hidden_act", ToString(c.activation)},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", c.attention_bias},
      {"qk_norm", c.qk_norm},
      {"num_experts", c.num_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"norm_topk_prob", c.norm_topk_prob},
      {"sliding_window", c.sliding_window},
      {"rope_freq_factors", c.rope_freq_factors},
      {"sliding_window_pattern", c.sliding_window_pattern},
      {"rope_local_base_freq", c.rope_local_theta},
      {"embedding_scale", c.embedding_scale},
      {"post_block_norms", c.post_block_norms},
      {"query_pre_attn_scalar", c.query_pre_attn_scalar},
      {"attn_logit_softcapping", c.attn_logit_softcap},
      {"final_logit_softcapping", c.final_logit_softcap},
  };
  return j.dump(indent);
}

namespace {

// Reads `key` from `obj` into `out` if present; a present value of the wrong
// JSON type is an error naming the key.
template <typename T>
absl::Status ReadField(const json& obj, const char* key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return FieldError(key, "must be a boolean");
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return FieldError(key, "must be an integer");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) return FieldError(key, "must be a number");
  } else {
    if (!it->is_string()) return FieldError(key, "must be a string");
  }
  out = it->get<T>();
  return absl::OkStatus();
}

template <typename Enum, size_t N>
absl::Status ReadEnum(const json& obj, const char* key, const std::pair<const char*, Enum> (&names)[N],
                      Enum& out) {
  std::string text;
  if (auto st = ReadField(obj, key, text); !st.ok() || text.empty()) return st;
  for (const auto& [name, value] : names) {
    if (text == name) {
      out = value;
      return absl::OkStatus();
    }
  }
  return FieldError(key, absl::StrFormat("has unknown value '%s'", text));
}

absl::StatusOr<ModelConfig> ParseConfig(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("model config: expected a JSON object");
  ModelConfig c;
  absl::Status st;
  auto read = [&](const char* key, auto& out) {
    if (st.ok()) st = ReadField(j, key, out);
  };
  read("architecture", c.architecture);
  read("vocab_size", c.vocab_size);
  read("hidden_size", c.hidden_size);
  read("intermediate_size", c.intermediate_size);
  read("num_hidden_layers", c.num_layers);
  read("num_attention_heads", c.num_heads);
  read("num_key_value_heads", c.num_kv_heads);
  read("head_dim", c.head_dim);
  read("max_position_embeddings", c.max_position);
  read("rms_norm_eps", c.rms_norm_eps);
  read("rope_theta", c.rope_theta);
  read("tie_word_embeddings", c.tie_word_embeddings);
  read("attention_bias", c.attention_bias);
  read("qk_norm", c.qk_norm);
  read("num_experts", c.num_experts);
  read("num_experts_per_tok", c.num_experts_per_tok);
  read("moe_intermediate_size", c.moe_intermediate_size);
  read("norm_topk_prob", c.norm_topk_prob);
  read("sliding_window", c.sliding_window);
  read("rope_freq_factors", c.rope_freq_factors);
  read("sliding_window_pattern", c.sliding_window_pattern);
  read("rope_local_base_freq", c.rope_local_theta);
  read("embedding_scale", c.embedding_scale);
  read("post_block_norms", c.post_block_norms);
  read("query_pre_attn_scalar", c.query_pre_attn_scalar);
  read("attn_logit_softcapping", c.attn_logit_softcap);
  read("final_logit_softcapping", c.final_logit_softcap);
  if (!st.ok()) return st;

  static const std::pair<const char*, RopeStyle> kStyles[] = {
      {"half", RopeStyle::kHalf}, {"interleaved", RopeStyle::kInterleaved}};
  static const std::pair<const char*, Activation> kActs[] = {
      {"silu", Activation::kSiLU}, {"gelu_tanh", Activation::kGeluTanh}, {"gelu", Activation::kGeluErf}};
  static const std::pair<const char*, RopeScaling::Kind> kScalings[] = {
      {"none", RopeScaling::Kind::kNone},
      {"linear", RopeScaling::Kind::kLinear},
      {"llama3", RopeScaling::Kind::kLlama3}};
  if (st = ReadEnum(j, "rope_style", kStyles, c.rope_style); !st.ok()) return st;
  if (st = ReadEnum(j, "hidden_act", kActs, c.activation); !st.ok()) return st;
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return FieldError("rope_scaling", "must be an object or null");
    RopeScaling& rs = c.rope_scaling;
    if (st = ReadEnum(*it, "type", kScalings, rs.kind); !st.ok()) return st;
    for (auto [key, out] : {std::pair{"factor", &rs.factor},
                            std::pair{"low_freq_factor", &rs.low_freq_factor},
                            std::pair{"high_freq_factor", &rs.high_freq_factor}}) {
      if (st = ReadField(*it, key, *out); !st.ok()) return st;
    }
    if (st = ReadField(*it, "original_max_position_embeddings", rs.original_max_position); !st.ok())
      return st;
  }
  if (c.head_dim == 0 && c.num_heads > 0) c.head_dim = c.hidden_size / c.num_heads;
  if (c.num_kv_heads == 0) c.num_kv_heads = c.num_heads;
  if (st = ValidateModelConfig(c); !st.ok()) return st;
  return c;
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromJson(const std::string& text) {
  // nlohmann throws on malformed input; keep exceptions inside this library.
  json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("model config: malformed JSON");
  try {
    return ParseConfig(j);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrFormat("model config: %s", e.what()));
  }
}

}  // namespace llmc
