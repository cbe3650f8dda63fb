//===- GGUFWeightNames.cpp - GGUF tensor names ----------------------------===//
#include "GGUFWeightNames.h"

namespace llmc {

std::string ggufWeightName(WeightRole role, int layer) {
  std::string l = "blk." + std::to_string(layer) + ".";
  switch (role) {
  case WeightRole::kTokenEmbedding: return "token_embd.weight";
  case WeightRole::kAttnNorm: return l + "attn_norm.weight";
  case WeightRole::kQuery: return l + "attn_q.weight";
  case WeightRole::kKey: return l + "attn_k.weight";
  case WeightRole::kValue: return l + "attn_v.weight";
  case WeightRole::kQueryBias: return l + "attn_q.bias";
  case WeightRole::kKeyBias: return l + "attn_k.bias";
  case WeightRole::kValueBias: return l + "attn_v.bias";
  case WeightRole::kQueryNorm: return l + "attn_q_norm.weight";
  case WeightRole::kKeyNorm: return l + "attn_k_norm.weight";
  case WeightRole::kAttnOutput: return l + "attn_output.weight";
  case WeightRole::kMlpNorm: return l + "ffn_norm.weight";
  case WeightRole::kPostAttnNorm: return l + "post_attention_norm.weight";
  case WeightRole::kPostMlpNorm: return l + "post_ffw_norm.weight";
  case WeightRole::kGate: return l + "ffn_gate.weight";
  case WeightRole::kUp: return l + "ffn_up.weight";
  case WeightRole::kDown: return l + "ffn_down.weight";
  case WeightRole::kRouter: return l + "ffn_gate_inp.weight";
  case WeightRole::kGateExperts: return l + "ffn_gate_exps.weight";
  case WeightRole::kUpExperts: return l + "ffn_up_exps.weight";
  case WeightRole::kDownExperts: return l + "ffn_down_exps.weight";
  case WeightRole::kFinalNorm: return "output_norm.weight";
  case WeightRole::kLMHead: return "output.weight";
  case WeightRole::kRopeFreqFactors: return "rope_freqs.weight";
  }
  return "";
}

std::string ggufFusedName(FusedKind kind, int layer) {
  std::string l = "blk." + std::to_string(layer) + ".";
  return l + (kind == FusedKind::kQKV ? "attn_qkv.weight" : "ffn_up.weight");
}

} // namespace llmc
