//===- GGUFWeightNames.h - GGUF tensor names --------------------*- C++ -*-===//
#ifndef LLMC_COMPILER_FRONTEND_GGUFWEIGHTNAMES_H
#define LLMC_COMPILER_FRONTEND_GGUFWEIGHTNAMES_H

#include "FusedWeights.h"
#include "WeightCatalog.h"

#include <string>

namespace llmc {

// The tensor name of `role` in `layer` in a llama.cpp GGUF file, e.g.
// "blk.3.attn_q.weight".
std::string ggufWeightName(WeightRole role, int layer);

// llama.cpp's names for fused projections (Phi-3): attn_qkv, and ffn_up
// twice as tall for gate and up.
std::string ggufFusedName(FusedKind kind, int layer);

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_GGUFWEIGHTNAMES_H
