//===- BuiltinModels.h - synthetic models built into llmc -------*- C++ -*-===//
//
// Model shapes that need no files, for the demo, the IR tests and timing
// (with `llmc compile --dummy-weights`, whose artifacts have the runtime
// generate their weights). Their weights are named as in Hugging Face
// checkpoints and stored as f32, or with --dummy-weights the matrices in the
// format it names (norms and biases stay f32).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_FRONTEND_BUILTINMODELS_H
#define LLMC_COMPILER_FRONTEND_BUILTINMODELS_H

#include "WeightCatalog.h"

#include "llmc/core/model_config.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace llmc {

struct BuiltinModel {
  const char *name;
  const char *description;
  ModelConfig config;
};

llvm::ArrayRef<BuiltinModel> builtinModels();
const BuiltinModel *findBuiltinModel(llvm::StringRef name);

// Every weight a config needs, under its Hugging Face name, in `format`.
class HFNamedCatalog : public WeightCatalog {
public:
  HFNamedCatalog(const ModelConfig &config, llm::WeightFormat format)
      : config(config), format(format) {}
  absl::StatusOr<std::optional<WeightEntry>>
  find(WeightRole role, int layer, llvm::ArrayRef<int64_t> shape) const override;
  std::string describe(WeightRole role, int layer) const override;

private:
  ModelConfig config;
  llm::WeightFormat format;
};

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_BUILTINMODELS_H
