//===- HFWeightNames.cpp - Hugging Face tensor names ----------------------===//
#include "HFWeightNames.h"

namespace llmc {

std::string hfWeightName(WeightRole role, int layer) {
  std::string l = "model.layers." + std::to_string(layer) + ".";
  switch (role) {
  case WeightRole::kTokenEmbedding: return "model.embed_tokens.weight";
  case WeightRole::kAttnNorm: return l + "input_layernorm.weight";
  case WeightRole::kQuery: return l + "self_attn.q_proj.weight";
  case WeightRole::kKey: return l + "self_attn.k_proj.weight";
  case WeightRole::kValue: return l + "self_attn.v_proj.weight";
  case WeightRole::kQueryBias: return l + "self_attn.q_proj.bias";
  case WeightRole::kKeyBias: return l + "self_attn.k_proj.bias";
  case WeightRole::kValueBias: return l + "self_attn.v_proj.bias";
  case WeightRole::kQueryNorm: return l + "self_attn.q_norm.weight";
  case WeightRole::kKeyNorm: return l + "self_attn.k_norm.weight";
  case WeightRole::kAttnOutput: return l + "self_attn.o_proj.weight";
  case WeightRole::kMlpNorm: return l + "post_attention_layernorm.weight";
  case WeightRole::kGate: return l + "mlp.gate_proj.weight";
  case WeightRole::kUp: return l + "mlp.up_proj.weight";
  case WeightRole::kDown: return l + "mlp.down_proj.weight";
  case WeightRole::kFinalNorm: return "model.norm.weight";
  case WeightRole::kLMHead: return "lm_head.weight";
  // HF checkpoints express RoPE scaling in config.json, never as a tensor.
  case WeightRole::kRopeFreqFactors: return "rope_freqs";
  }
  return "";
}

} // namespace llmc
