//===- HFWeightNames.cpp - Hugging Face tensor names ----------------------===//
#include "HFWeightNames.h"

namespace llmc {

namespace {

// Mixtral keeps its experts in block_sparse_moe with w1/w3/w2 for
// gate/up/down; Qwen3-MoE in mlp with the dense names.
bool mixtral(llvm::StringRef architecture) { return architecture == "mixtral"; }

bool gemma(llvm::StringRef architecture) { return architecture.starts_with("gemma"); }

std::string expertProjection(WeightRole role, bool mixtral) {
  switch (role) {
  case WeightRole::kGateExperts: return mixtral ? "w1" : "gate_proj";
  case WeightRole::kUpExperts: return mixtral ? "w3" : "up_proj";
  default: return mixtral ? "w2" : "down_proj";
  }
}

} // namespace

std::string hfExpertName(WeightRole role, int layer, int expert, llvm::StringRef architecture) {
  bool m = mixtral(architecture);
  return "model.layers." + std::to_string(layer) + (m ? ".block_sparse_moe" : ".mlp") +
         ".experts." + std::to_string(expert) + "." + expertProjection(role, m) + ".weight";
}

std::string hfFusedName(FusedKind kind, int layer) {
  return "model.layers." + std::to_string(layer) +
         (kind == FusedKind::kQKV ? ".self_attn.qkv_proj.weight" : ".mlp.gate_up_proj.weight");
}

std::string hfWeightName(WeightRole role, int layer, llvm::StringRef architecture) {
  std::string l = "model.layers." + std::to_string(layer) + ".";
  std::string moe = l + (mixtral(architecture) ? "block_sparse_moe." : "mlp.");
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
  // Gemma's four norms: its post_attention_layernorm follows the attention,
  // and pre_feedforward_layernorm is what Llama calls post_attention_layernorm.
  case WeightRole::kMlpNorm:
    return l + (gemma(architecture) ? "pre_feedforward_layernorm.weight"
                                    : "post_attention_layernorm.weight");
  case WeightRole::kPostAttnNorm: return l + "post_attention_layernorm.weight";
  case WeightRole::kPostMlpNorm: return l + "post_feedforward_layernorm.weight";
  case WeightRole::kGate: return l + "mlp.gate_proj.weight";
  case WeightRole::kUp: return l + "mlp.up_proj.weight";
  case WeightRole::kDown: return l + "mlp.down_proj.weight";
  case WeightRole::kRouter: return moe + "gate.weight";
  case WeightRole::kGateExperts:
  case WeightRole::kUpExperts:
  case WeightRole::kDownExperts:
    return moe + "experts." + expertProjection(role, mixtral(architecture)) + ".weight";
  case WeightRole::kFinalNorm: return "model.norm.weight";
  case WeightRole::kLMHead: return "lm_head.weight";
  // HF checkpoints express RoPE scaling in config.json, never as a tensor.
  case WeightRole::kRopeFreqFactors: return "rope_freqs";
  }
  return "";
}

} // namespace llmc
