//===- FusedWeights.cpp - projections stored inside fused tensors ---------===//
#include "FusedWeights.h"

namespace llmc {

std::optional<FusedRows> fusedRows(WeightRole role, const ModelConfig &c) {
  const int64_t q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  switch (role) {
  case WeightRole::kQuery: return FusedRows{FusedKind::kQKV, 0, q, q + 2 * kv, "q"};
  case WeightRole::kKey: return FusedRows{FusedKind::kQKV, q, q + kv, q + 2 * kv, "k"};
  case WeightRole::kValue: return FusedRows{FusedKind::kQKV, q + kv, q + 2 * kv, q + 2 * kv, "v"};
  // HF's Phi3MLP: `gate, up = gate_up_proj(x).chunk(2)`; llama.cpp's SwiGLU
  // on the fused ffn_up gates with the first half too.
  case WeightRole::kGate: return FusedRows{FusedKind::kGateUp, 0, inter, 2 * inter, "gate"};
  case WeightRole::kUp: return FusedRows{FusedKind::kGateUp, inter, 2 * inter, 2 * inter, "up"};
  default: return std::nullopt;
  }
}

WeightEntry sliceOfFused(const WeightEntry &fused, const FusedRows &rows) {
  WeightEntry slice{fused.name + "." + rows.suffix, fused.format, fused.group};
  slice.parts = {fused.name};
  slice.rows = {{rows.begin, rows.end}};
  return slice;
}

} // namespace llmc
