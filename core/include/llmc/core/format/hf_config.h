// Reads a Hugging Face `config.json` into ModelConfig.
//
// Supported (model_type / architectures class):
//   llama   / LlamaForCausalLM    Llama 2 and 3.x, SmolLM2, TinyLlama, ...
//   mistral / MistralForCausalLM  `sliding_window` (null: full attention)
//   qwen2   / Qwen2ForCausalLM    Q/K/V bias always; a sliding window only
//                                 when `use_sliding_window` is true
// Absent optional fields take transformers' defaults for that class
// (num_key_value_heads = num_attention_heads, head_dim = hidden_size /
// num_attention_heads, rope_theta 10000, rms_norm_eps 1e-6,
// tie_word_embeddings false, hidden_act silu, ...); a null counts as absent.
// The five size fields (vocab_size, hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads) are required: guessing a 7B
// model's defaults for them would silently build the wrong model.
//
// Integer fields must be JSON integers: 576.0 is rejected rather than
// truncated, as transformers itself would fail on a float layer size.
// RoPE scaling: none/default, linear and llama3 (from `rope_scaling`, or from
// the newer `rope_parameters`); others (yarn, dynamic, longrope, ...) are
// errors naming the type. Checkpoints that llmc cannot run correctly —
// pre-quantized (`quantization_config`), `mlp_bias`, Llama's
// `attention_bias` (which also biases o_proj), Qwen2 layers that mix sliding
// and full attention — are errors rather than silently wrong models.
// rope_style is always kHalf: HF checkpoints rotate (x[i], x[i + d/2]).
//
// Every error starts with the file's path and names the field.
#ifndef LLMC_CORE_FORMAT_HF_CONFIG_H_
#define LLMC_CORE_FORMAT_HF_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "llmc/core/model_config.h"

namespace llmc {

// Maps a Hugging Face config.json onto ModelConfig. `path` names the file in errors.
absl::StatusOr<ModelConfig> ParseHFConfig(std::string_view json_text, const std::string& path);

// Reads <folder>/config.json.
absl::StatusOr<ModelConfig> LoadHFConfig(const std::string& folder);

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_HF_CONFIG_H_
