//===- HFWeightNames.h - Hugging Face tensor names --------------*- C++ -*-===//
#ifndef LLMC_COMPILER_FRONTEND_HFWEIGHTNAMES_H
#define LLMC_COMPILER_FRONTEND_HFWEIGHTNAMES_H

#include "FusedWeights.h"
#include "WeightCatalog.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace llmc {

// The tensor name of `role` in `layer` in a Hugging Face Llama-family
// checkpoint, e.g. "model.layers.3.self_attn.q_proj.weight".
// The tensor of `role` in `layer` of a checkpoint of `architecture` (a
// ModelConfig's): the mixture-of-experts roles are named per family. For a
// stacked experts role, a name for the stack (no stored tensor has it).
std::string hfWeightName(WeightRole role, int layer, llvm::StringRef architecture = "llama");

// Expert `expert`'s tensor of a stacked experts role.
// Phi-3's fused projections: self_attn.qkv_proj and mlp.gate_up_proj.
std::string hfFusedName(FusedKind kind, int layer);

std::string hfExpertName(WeightRole role, int layer, int expert, llvm::StringRef architecture);

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_HFWEIGHTNAMES_H
