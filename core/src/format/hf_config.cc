#include "llmc/core/format/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "json_parse.h"
#include "llmc/core/format/mapped_file.h"
#include "llmc/core/status_macros.h"

namespace llmc {
namespace {

using format_internal::DescribeJson;
using format_internal::ParseJson;
using nlohmann::json;

struct Architecture {
  const char* model_type;
  const char* hf_class;
  int64_t default_max_position;  // transformers' default for the class
};
constexpr Architecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", 2048},
    {"mistral", "MistralForCausalLM", 4096 * 32},
    {"qwen2", "Qwen2ForCausalLM", 32768},
    {"qwen3", "Qwen3ForCausalLM", 32768},
    {"qwen3_moe", "Qwen3MoeForCausalLM", 32768},
    {"mixtral", "MixtralForCausalLM", 4096 * 32},
    {"phi3", "Phi3ForCausalLM", 4096},
    {"gemma2", "Gemma2ForCausalLM", 8192},
    {"gemma3_text", "Gemma3ForCausalLM", 131072},
};

std::string SupportedList(bool classes) {
  std::vector<const char*> names;
  for (const Architecture& a : kArchitectures) names.push_back(classes ? a.hf_class : a.model_type);
  return absl::StrJoin(names, ", ");
}

// Typed access to the fields of one JSON object, with errors of the form
// "<path>: field '<prefix><key>' <why>". A null value counts as absent, as it
// does for transformers' config classes.
class Fields {
 public:
  Fields(const json& object, const std::string& path, std::string prefix = "")
      : object_(object), path_(path), prefix_(std::move(prefix)) {}

  // True even for a null value, which some fields distinguish from absence.
  bool Present(const char* key) const { return object_.contains(key); }

  const json* Get(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::Status Error(const char* key, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": field '", prefix_, key, "' ", why));
  }

  // Each reader leaves `out` unchanged when the field is absent.
  absl::Status Int(const char* key, int64_t& out) const {
    const json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number_integer()) return Error(key, "must be an integer, got " + DescribeJson(*v));
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Error(key, "is too large, got " + DescribeJson(*v));
    out = v->get<int64_t>();
    return absl::OkStatus();
  }
  absl::Status Number(const char* key, double& out) const {
    const json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number()) return Error(key, "must be a number, got " + DescribeJson(*v));
    double d = v->get<double>();
    if (!std::isfinite(d)) return Error(key, "must be finite, got " + DescribeJson(*v));
    out = d;
    return absl::OkStatus();
  }
  absl::Status Bool(const char* key, bool& out) const {
    const json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) return Error(key, "must be true or false, got " + DescribeJson(*v));
    out = v->get<bool>();
    return absl::OkStatus();
  }
  absl::Status String(const char* key, std::string& out) const {
    const json* v = Get(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_string()) return Error(key, "must be a string, got " + DescribeJson(*v));
    out = v->get<std::string>();
    return absl::OkStatus();
  }
  absl::Status Require(const char* key) const {
    return Get(key) != nullptr ? absl::OkStatus() : Error(key, "is required but missing");
  }

 private:
  const json& object_;
  const std::string& path_;
  std::string prefix_;
};

absl::Status Unsupported(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

// model_type decides; architectures, when present, must name that type's
// causal-LM class (a LlamaForSequenceClassification checkpoint has no lm_head).
absl::StatusOr<const Architecture*> ReadArchitecture(const Fields& f, const std::string& path) {
  std::string model_type;
  LLMC_RETURN_IF_ERROR(f.String("model_type", model_type));
  std::vector<std::string> classes;
  if (const json* archs = f.Get("architectures")) {
    if (!archs->is_array())
      return f.Error("architectures", "must be an array of strings, got " + DescribeJson(*archs));
    for (const json& a : *archs) {
      if (!a.is_string())
        return f.Error("architectures", "must be an array of strings, holds " + DescribeJson(a));
      classes.push_back(a.get<std::string>());
    }
  }
  const Architecture* arch = nullptr;
  if (!model_type.empty()) {
    for (const Architecture& a : kArchitectures) {
      if (model_type == a.model_type) arch = &a;
    }
    if (arch == nullptr)
      return Unsupported(path, absl::StrFormat("model_type '%s' is not supported (supported: %s)",
                                               model_type, SupportedList(false)));
  } else if (!classes.empty()) {
    for (const Architecture& a : kArchitectures) {
      if (classes[0] == a.hf_class) arch = &a;
    }
    if (arch == nullptr)
      return Unsupported(path, absl::StrFormat("architecture '%s' is not supported (supported: %s)",
                                               classes[0], SupportedList(true)));
  } else {
    return Unsupported(path, "neither 'model_type' nor 'architectures' says which model this is");
  }
  if (!classes.empty() &&
      std::find(classes.begin(), classes.end(), arch->hf_class) == classes.end())
    return f.Error("architectures",
                   absl::StrFormat("is [%s], but llmc runs model_type '%s' only as %s",
                                   absl::StrJoin(classes, ", "), arch->model_type, arch->hf_class));
  return arch;
}

absl::StatusOr<Activation> ReadActivation(const Fields& f, bool gemma) {
  // Gemma's configs name it hidden_activation (GeGLU by default).
  const char* key = gemma && f.Get("hidden_activation") != nullptr ? "hidden_activation" : "hidden_act";
  std::string act = gemma ? "gelu_pytorch_tanh" : "silu";
  LLMC_RETURN_IF_ERROR(f.String(key, act));
  // transformers' ACT2FN: "swish" is SiLU; "gelu_new" and "gelu_pytorch_tanh"
  // are both the tanh approximation.
  if (act == "silu" || act == "swish") return Activation::kSiLU;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return Activation::kGeluTanh;
  if (act == "gelu") return Activation::kGeluErf;
  return f.Error(key, absl::StrFormat("is '%s'; supported: silu, swish, gelu, "
                                      "gelu_pytorch_tanh, gelu_new",
                                      act));
}

// RoPE base and scaling. transformers 5 moved both into `rope_parameters`
// ({"rope_type": "default", "rope_theta": ...}); older files keep
// `rope_theta` at the top level and `rope_scaling` (null for plain RoPE).
absl::Status ReadRope(const Fields& top, const std::string& path, ModelConfig& c) {
  LLMC_RETURN_IF_ERROR(top.Number("rope_theta", c.rope_theta));
  const char* field = top.Get("rope_parameters") != nullptr ? "rope_parameters" : "rope_scaling";
  const json* params = top.Get(field);
  if (params == nullptr) return absl::OkStatus();
  if (!params->is_object())
    return top.Error(field, "must be an object or null, got " + DescribeJson(*params));
  Fields f(*params, path, absl::StrCat(field, "."));
  LLMC_RETURN_IF_ERROR(f.Number("rope_theta", c.rope_theta));

  // "type" is the older spelling; transformers prefers "rope_type" when both are there.
  const char* type_key = f.Get("rope_type") != nullptr ? "rope_type" : "type";
  std::string type;
  LLMC_RETURN_IF_ERROR(f.String(type_key, type));
  if (type.empty()) return top.Error(field, "has neither 'rope_type' nor 'type'");
  RopeScaling& rs = c.rope_scaling;
  if (type == "default") {
    rs.kind = RopeScaling::Kind::kNone;
    return absl::OkStatus();
  }
  if (type == "linear") {
    rs.kind = RopeScaling::Kind::kLinear;
    LLMC_RETURN_IF_ERROR(f.Require("factor"));
    return f.Number("factor", rs.factor);
  }
  if (type == "llama3") {
    rs.kind = RopeScaling::Kind::kLlama3;
    for (const char* key :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
      LLMC_RETURN_IF_ERROR(f.Require(key));
    }
    LLMC_RETURN_IF_ERROR(f.Number("factor", rs.factor));
    LLMC_RETURN_IF_ERROR(f.Number("low_freq_factor", rs.low_freq_factor));
    LLMC_RETURN_IF_ERROR(f.Number("high_freq_factor", rs.high_freq_factor));
    LLMC_RETURN_IF_ERROR(f.Int("original_max_position_embeddings", rs.original_max_position));
    if (rs.original_max_position <= 0)
      return f.Error("original_max_position_embeddings",
                     absl::StrFormat("must be positive, got %d", rs.original_max_position));
    return absl::OkStatus();
  }
  return f.Error(type_key, absl::StrFormat("is '%s', which llmc does not support "
                                           "(supported: default, linear, llama3)",
                                           type));
}

// Qwen2 slides only layers i >= max_window_layers, and only when
// use_sliding_window is set; newer files spell the per-layer choice out in
// `layer_types`. ModelConfig has one window for all layers, so a mix is an error.
// `layer_types` where the file spells the layers out: per layer, whether it
// attends globally ('full_attention') rather than on the window
// ('sliding_attention'); empty when absent.
absl::StatusOr<std::vector<bool>> ReadLayerTypes(const Fields& f, int64_t layers) {
  std::vector<bool> global;
  const json* types = f.Get("layer_types");
  if (types == nullptr) return global;
  if (!types->is_array() || static_cast<int64_t>(types->size()) != layers)
    return f.Error("layer_types",
                   absl::StrFormat("must be an array of %d strings, one per layer", layers));
  for (const json& t : *types) {
    if (t != "sliding_attention" && t != "full_attention")
      return f.Error("layer_types", "may hold only 'full_attention' and 'sliding_attention', holds " +
                                        DescribeJson(t));
    global.push_back(t == "full_attention");
  }
  return global;
}

absl::Status ReadQwen2Window(const Fields& f, ModelConfig& c) {
  bool use_sliding_window = false;
  LLMC_RETURN_IF_ERROR(f.Bool("use_sliding_window", use_sliding_window));
  c.sliding_window = 0;
  if (!use_sliding_window) return absl::OkStatus();
  // Absent: transformers' default 4096; null: no window after all.
  int64_t window = f.Present("sliding_window") ? 0 : 4096;
  LLMC_RETURN_IF_ERROR(f.Int("sliding_window", window));
  int64_t sliding_layers = 0;
  LLMC_ASSIGN_OR_RETURN(std::vector<bool> global, ReadLayerTypes(f, c.num_layers));
  if (f.Get("layer_types") != nullptr) {
    sliding_layers = std::count(global.begin(), global.end(), false);
  } else {
    int64_t max_window_layers = 28;  // transformers' default
    LLMC_RETURN_IF_ERROR(f.Int("max_window_layers", max_window_layers));
    sliding_layers = c.num_layers - std::clamp<int64_t>(max_window_layers, 0, c.num_layers);
  }
  if (sliding_layers > 0 && sliding_layers < c.num_layers)
    return f.Error(f.Get("layer_types") != nullptr ? "layer_types" : "max_window_layers",
                   absl::StrFormat("puts %d of %d layers on a sliding window and the rest on full "
                                   "attention; llmc needs one kind for all layers",
                                   sliding_layers, c.num_layers));
  if (sliding_layers == c.num_layers) c.sliding_window = window;
  return absl::OkStatus();
}

// Qwen3MoeConfig: every layer sparse (decoder_sparse_step 1, no
// mlp_only_layers), transformers' defaults where a field is absent.
absl::Status ReadQwen3MoeExperts(const Fields& f, ModelConfig& c) {
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.moe_intermediate_size = 768;
  c.norm_topk_prob = false;
  LLMC_RETURN_IF_ERROR(f.Int("num_experts", c.num_experts));
  LLMC_RETURN_IF_ERROR(f.Int("num_experts_per_tok", c.num_experts_per_tok));
  LLMC_RETURN_IF_ERROR(f.Int("moe_intermediate_size", c.moe_intermediate_size));
  LLMC_RETURN_IF_ERROR(f.Bool("norm_topk_prob", c.norm_topk_prob));
  int64_t step = 1;
  LLMC_RETURN_IF_ERROR(f.Int("decoder_sparse_step", step));
  if (step != 1)
    return f.Error("decoder_sparse_step",
                   absl::StrFormat("is %d; llmc needs every layer sparse (1)", step));
  if (const json* dense = f.Get("mlp_only_layers"); dense && !(dense->is_array() && dense->empty()))
    return f.Error("mlp_only_layers",
                   "lists dense layers; llmc needs every layer sparse (an empty list)");
  if (c.num_experts < 1)
    return f.Error("num_experts", absl::StrFormat("must be positive, got %d", c.num_experts));
  return absl::OkStatus();
}

// MixtralConfig: the experts are intermediate_size wide and their weights
// always renormalized.
absl::Status ReadMixtralExperts(const Fields& f, ModelConfig& c) {
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  LLMC_RETURN_IF_ERROR(f.Int("num_local_experts", c.num_experts));
  LLMC_RETURN_IF_ERROR(f.Int("num_experts_per_tok", c.num_experts_per_tok));
  if (c.num_experts < 1)
    return f.Error("num_local_experts", absl::StrFormat("must be positive, got %d", c.num_experts));
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;
  return absl::OkStatus();
}

// Phi3Config: Q/K/V and gate/up fused in the checkpoint (the catalog slices
// them), no biases, a window when sliding_window is set. LongRoPE (the 128k
// models' rope_scaling) and partial rotary (Phi-4-mini) are refused by field.
absl::Status ReadPhi3(const Fields& f, ModelConfig& c) {
  if (c.rope_scaling.kind != RopeScaling::Kind::kNone)
    return f.Error("rope_scaling", absl::StrFormat("is %s; llmc runs Phi-3 with plain RoPE only "
                                                   "(the 4k-context models)",
                                                   ToString(c.rope_scaling.kind)));
  double partial = 1.0;
  LLMC_RETURN_IF_ERROR(f.Number("partial_rotary_factor", partial));
  if (partial != 1.0)
    return f.Error("partial_rotary_factor",
                   absl::StrFormat("is %g; partial rotary embeddings are not supported", partial));
  c.attention_bias = false;
  c.sliding_window = 0;
  return f.Int("sliding_window", c.sliding_window);
}

// Which layers of a Gemma slide: `layer_types` where the file spells them
// out, else every `pattern`-th layer is global. llmc's IR takes a pattern
// (layer i global iff (i + 1) % pattern == 0): a list that fits none is
// refused.
absl::Status ReadGemmaLayers(const Fields& f, int64_t pattern, ModelConfig& c) {
  c.sliding_window_pattern = pattern;
  LLMC_ASSIGN_OR_RETURN(std::vector<bool> global, ReadLayerTypes(f, c.num_layers));
  if (global.empty()) return absl::OkStatus();
  auto first = std::find(global.begin(), global.end(), true);
  if (first == global.end()) {  // every layer slides
    c.sliding_window_pattern = 0;
    return absl::OkStatus();
  }
  c.sliding_window_pattern = (first - global.begin()) + 1;
  if (c.sliding_window_pattern == 1) {  // every layer global, if the rest agree
    c.sliding_window_pattern = 0;
    if (std::find(global.begin(), global.end(), false) == global.end()) {
      c.sliding_window = 0;
      return absl::OkStatus();
    }
    return f.Error("layer_types", "starts with a full-attention layer but has sliding ones; llmc "
                                  "needs every N-th layer global (N = the first global layer + 1)");
  }
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (global[size_t(i)] != ((i + 1) % c.sliding_window_pattern == 0))
      return f.Error("layer_types",
                     absl::StrFormat("has layer %d %s, off the pattern of every %d-th layer global "
                                     "that its first layers set; llmc takes a pattern",
                                     i, global[size_t(i)] ? "global" : "sliding",
                                     c.sliding_window_pattern));
  return absl::OkStatus();
}

// Gemma2Config / Gemma3TextConfig: embeddings scaled by sqrt(hidden), four
// norms a layer (the checkpoint stores each as weight - 1: the catalog adds
// the 1 back), GeGLU, queries scaled by query_pre_attn_scalar, a sliding
// window on all but every 2nd (Gemma 2) or 6th (Gemma 3) layer; Gemma 2
// soft-caps scores and logits, Gemma 3 norms Q and K per head and rotates
// its sliding layers with their own base.
absl::Status ReadGemma(const Fields& f, bool gemma3, ModelConfig& c) {
  bool bias = false;
  LLMC_RETURN_IF_ERROR(f.Bool("attention_bias", bias));
  if (bias) return f.Error("attention_bias", "is true; llmc does not support Gemma with biases");
  c.attention_bias = false;
  c.post_block_norms = true;
  c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
  c.query_pre_attn_scalar = 256;
  LLMC_RETURN_IF_ERROR(f.Number("query_pre_attn_scalar", c.query_pre_attn_scalar));
  c.sliding_window = 4096;
  LLMC_RETURN_IF_ERROR(f.Int("sliding_window", c.sliding_window));
  if (!gemma3) {
    c.attn_logit_softcap = 50.0;
    c.final_logit_softcap = 30.0;
  }
  // Present and null means off, as in transformers.
  LLMC_RETURN_IF_ERROR(f.Number("attn_logit_softcapping", c.attn_logit_softcap));
  LLMC_RETURN_IF_ERROR(f.Number("final_logit_softcapping", c.final_logit_softcap));
  if (f.Present("attn_logit_softcapping") && f.Get("attn_logit_softcapping") == nullptr)
    c.attn_logit_softcap = 0;
  if (f.Present("final_logit_softcapping") && f.Get("final_logit_softcapping") == nullptr)
    c.final_logit_softcap = 0;
  int64_t pattern = gemma3 ? 6 : 2;
  if (gemma3) {
    LLMC_RETURN_IF_ERROR(f.Int("sliding_window_pattern", pattern));
    c.qk_norm = true;
    c.rope_local_theta = 10000.0;
    LLMC_RETURN_IF_ERROR(f.Number("rope_local_base_freq", c.rope_local_theta));
  }
  return ReadGemmaLayers(f, pattern, c);
}

// Llama's and Qwen3's attention_bias biases o_proj as well as Q/K/V.
absl::Status RefuseAttentionBias(const Fields& f, const char* family) {
  bool attention_bias = false;
  LLMC_RETURN_IF_ERROR(f.Bool("attention_bias", attention_bias));
  if (!attention_bias) return absl::OkStatus();
  return f.Error("attention_bias",
                 absl::StrCat("is true; ", family,
                              " then biases o_proj as well as Q/K/V, which llmc does not support"));
}

absl::StatusOr<ModelConfig> MapConfig(const json& j, const std::string& path) {
  Fields f(j, path);
  LLMC_ASSIGN_OR_RETURN(const Architecture* arch, ReadArchitecture(f, path));
  const std::string type = arch->model_type;

  if (const json* q = f.Get("quantization_config")) {
    std::string method = "unknown";
    if (q->is_object() && q->contains("quant_method") && (*q)["quant_method"].is_string())
      method = (*q)["quant_method"].get<std::string>();
    return f.Error("quantization_config",
                   absl::StrFormat("says the checkpoint is pre-quantized (quant_method '%s'); llmc "
                                   "reads unquantized weights and quantizes them itself",
                                   method));
  }

  const bool gemma = type == "gemma2" || type == "gemma3_text";
  ModelConfig c;
  c.architecture = type == "gemma3_text" ? "gemma3" : type;
  c.rope_style = RopeStyle::kHalf;
  c.max_position = arch->default_max_position;
  // transformers' defaults where the class differs from ModelConfig's.
  c.rms_norm_eps = type == "mixtral" || type == "phi3" ? 1e-5 : 1e-6;
  if (type == "mixtral" || type == "gemma3_text") c.rope_theta = 1e6;
  if (gemma) c.tie_word_embeddings = true;
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads"}) {
    LLMC_RETURN_IF_ERROR(f.Require(key));
  }
  LLMC_RETURN_IF_ERROR(f.Int("vocab_size", c.vocab_size));
  LLMC_RETURN_IF_ERROR(f.Int("hidden_size", c.hidden_size));
  LLMC_RETURN_IF_ERROR(f.Int("intermediate_size", c.intermediate_size));
  LLMC_RETURN_IF_ERROR(f.Int("num_hidden_layers", c.num_layers));
  LLMC_RETURN_IF_ERROR(f.Int("num_attention_heads", c.num_heads));
  c.num_kv_heads = c.num_heads;
  LLMC_RETURN_IF_ERROR(f.Int("num_key_value_heads", c.num_kv_heads));
  // Qwen3Config defaults head_dim to 128 and Gemma's configs to 256, not
  // hidden_size / heads (Qwen3MoeConfig has no default: its attention takes
  // hidden / heads).
  const bool qwen3 = type == "qwen3";
  if (qwen3) c.head_dim = 128;
  if (gemma) c.head_dim = 256;
  LLMC_RETURN_IF_ERROR(f.Int("head_dim", c.head_dim));
  if (f.Get("head_dim") == nullptr && c.num_heads > 0 && !qwen3 && !gemma) {
    if (c.hidden_size % c.num_heads != 0)
      return f.Error("head_dim",
                     absl::StrFormat("is absent and hidden_size (%d) is not a multiple of "
                                     "num_attention_heads (%d)",
                                     c.hidden_size, c.num_heads));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  LLMC_RETURN_IF_ERROR(f.Int("max_position_embeddings", c.max_position));
  LLMC_RETURN_IF_ERROR(f.Number("rms_norm_eps", c.rms_norm_eps));
  LLMC_RETURN_IF_ERROR(f.Bool("tie_word_embeddings", c.tie_word_embeddings));
  LLMC_ASSIGN_OR_RETURN(c.activation, ReadActivation(f, gemma));
  LLMC_RETURN_IF_ERROR(ReadRope(f, path, c));

  // Biases and windows differ by class; transformers ignores the fields a
  // class does not define, and so does this.
  if (type == "llama") {
    bool mlp_bias = false;
    LLMC_RETURN_IF_ERROR(f.Bool("mlp_bias", mlp_bias));
    if (mlp_bias) return f.Error("mlp_bias", "is true; llmc does not support MLP biases");
    LLMC_RETURN_IF_ERROR(RefuseAttentionBias(f, "Llama"));
    c.attention_bias = false;
    c.sliding_window = 0;
  } else if (type == "mistral" || type == "mixtral") {
    c.attention_bias = false;
    // Absent means transformers' default (Mistral 4096, Mixtral none); null
    // means full attention.
    c.sliding_window = f.Present("sliding_window") || type == "mixtral" ? 0 : 4096;
    LLMC_RETURN_IF_ERROR(f.Int("sliding_window", c.sliding_window));
  } else if (type == "phi3") {
    LLMC_RETURN_IF_ERROR(ReadPhi3(f, c));
  } else if (gemma) {
    LLMC_RETURN_IF_ERROR(ReadGemma(f, type == "gemma3_text", c));
  } else if (type == "qwen2") {
    c.attention_bias = true;  // Qwen2Attention always biases Q/K/V (not o_proj)
    LLMC_RETURN_IF_ERROR(ReadQwen2Window(f, c));
  } else {  // qwen3, qwen3_moe: Qwen2's window rule, no biases, Q and K normed per head
    LLMC_RETURN_IF_ERROR(RefuseAttentionBias(f, "Qwen3"));
    c.attention_bias = false;
    c.qk_norm = true;
    LLMC_RETURN_IF_ERROR(ReadQwen2Window(f, c));
  }
  if (type == "qwen3_moe") LLMC_RETURN_IF_ERROR(ReadQwen3MoeExperts(f, c));
  if (type == "mixtral") LLMC_RETURN_IF_ERROR(ReadMixtralExperts(f, c));

  if (absl::Status st = ValidateModelConfig(c); !st.ok())
    return absl::Status(st.code(), absl::StrCat(path, ": ", st.message()));
  return c;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHFConfig(std::string_view json_text, const std::string& path) {
  LLMC_ASSIGN_OR_RETURN(json j, ParseJson(json_text, path));
  if (!j.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be a JSON object, got ", DescribeJson(j)));
  // The checks above should leave nothing to throw; this keeps a missed case
  // an error rather than an exception crossing the library boundary.
  try {
    return MapConfig(j, path);
  } catch (const json::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": ", e.what()));
  }
}

absl::StatusOr<ModelConfig> LoadHFConfig(const std::string& folder) {
  std::string path = (std::filesystem::path(folder) / "config.json").string();
  LLMC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  return ParseHFConfig(text, path);
}

}  // namespace llmc
