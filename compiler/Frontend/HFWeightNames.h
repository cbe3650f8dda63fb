//===- HFWeightNames.h - Hugging Face tensor names --------------*- C++ -*-===//
#ifndef LLMC_COMPILER_FRONTEND_HFWEIGHTNAMES_H
#define LLMC_COMPILER_FRONTEND_HFWEIGHTNAMES_H

#include "WeightCatalog.h"

#include <string>

namespace llmc {

// The tensor name of `role` in `layer` in a Hugging Face Llama-family
// checkpoint, e.g. "model.layers.3.self_attn.q_proj.weight".
std::string hfWeightName(WeightRole role, int layer);

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_HFWEIGHTNAMES_H
