//===- FusedWeights.h - projections stored inside fused tensors -*- C++ -*-===//
//
// Some checkpoints store sibling projections as one tensor: Phi-3 keeps Q, K
// and V as the rows of `qkv_proj` (GGUF `attn_qkv`) and gate and up as the
// rows of `gate_up_proj` (GGUF `ffn_up`, twice as tall). The IR builder asks
// for each projection on its own, so a catalog answers with a row slice of
// the fused tensor (`llm.weight ... concat [fused] rows [b, e]`); the fuse
// pass joins the slices back into one GEMM, and tensor parallelism slices
// each projection as if it were stored alone.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_FRONTEND_FUSEDWEIGHTS_H
#define LLMC_COMPILER_FRONTEND_FUSEDWEIGHTS_H

#include "WeightCatalog.h"

#include "llmc/core/model_config.h"

#include <optional>

namespace llmc {

// Which fused tensor a projection can live in.
enum class FusedKind { kQKV, kGateUp };

struct FusedRows {
  FusedKind kind;
  int64_t begin, end; // the projection's rows in the fused tensor
  int64_t total;      // the fused tensor's rows
  const char *suffix; // names the slice: "<fused name>.<suffix>"
};

// Where `role`'s rows sit in its fused tensor; nullopt for a role that is
// never fused (norms, the output projection, ...).
std::optional<FusedRows> fusedRows(WeightRole role, const ModelConfig &config);

// `fused` (the catalog's entry for the whole fused tensor) cut to `rows`.
WeightEntry sliceOfFused(const WeightEntry &fused, const FusedRows &rows);

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_FUSEDWEIGHTS_H
