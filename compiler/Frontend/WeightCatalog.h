//===- WeightCatalog.h - where the IR builder finds weights -----*- C++ -*-===//
//
// The IR builder asks for weights by role and layer; the catalog answers with
// the weight's name in the store and its storage format. Hugging Face folders,
// GGUF files and the built-in synthetic models each provide one, so the
// builder never knows file-format naming schemes.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_FRONTEND_WEIGHTCATALOG_H
#define LLMC_COMPILER_FRONTEND_WEIGHTCATALOG_H

#include "llmc/Dialect/LLM/IR/LLMTypes.h"

#include "absl/status/statusor.h"
#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

enum class WeightRole {
  kTokenEmbedding,
  kAttnNorm,
  kQuery,
  kKey,
  kValue,
  kQueryBias,
  kKeyBias,
  kValueBias,
  kQueryNorm, // per-head RMSNorm of Q and K (Qwen3), [head_dim]
  kKeyNorm,
  kAttnOutput,
  kMlpNorm,
  // Gemma 2/3's norms of each block's output, before the residual add.
  kPostAttnNorm,
  kPostMlpNorm,
  kGate,
  kUp,
  kDown,
  // Mixture of experts: the router [experts, hidden] and each projection's
  // experts stacked row after row ([experts * moe_intermediate, hidden] for
  // gate and up, [experts * hidden, moe_intermediate] for down).
  kRouter,
  kGateExperts,
  kUpExperts,
  kDownExperts,
  kFinalNorm,
  kLMHead,
  kRopeFreqFactors,
};

const char *toString(WeightRole role);

// The experts of a projection, stacked.
inline bool isExpertsRole(WeightRole role) {
  return role == WeightRole::kGateExperts || role == WeightRole::kUpExperts ||
         role == WeightRole::kDownExperts;
}

struct WeightEntry {
  std::string name;
  llm::WeightFormat format;
  int64_t group = 0;
  // Stored tensors whose rows make this weight, one after the other (a Hugging
  // Face checkpoint's experts, one tensor each); empty: `name` is stored.
  std::vector<std::string> parts = {};
  // With `parts`, the rows [begin, end) each part contributes, when a part
  // gives only some of its rows (a slice of a fused tensor); empty: all.
  std::vector<std::pair<int64_t, int64_t>> rows = {};
  // Added to every element as the artifact is packed (Gemma's Hugging Face
  // norms store weight - 1); 0: none.
  double offset = 0;
};

class WeightCatalog {
public:
  virtual ~WeightCatalog() = default;
  // The weight playing `role` in `layer` (-1 for model-level weights), or
  // nullopt if the model has none. `shape` is the logical shape the model
  // config implies ([out, in] for projections); a weight that exists with
  // another shape or an unusable type is an error naming the file and tensor.
  virtual absl::StatusOr<std::optional<WeightEntry>>
  find(WeightRole role, int layer, llvm::ArrayRef<int64_t> shape) const = 0;
  // Where the weight was looked for, for messages about a missing weight,
  // e.g. "tensor 'blk.1.ffn_up.weight' in model.gguf".
  virtual std::string describe(WeightRole role, int layer) const = 0;
};

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_WEIGHTCATALOG_H
