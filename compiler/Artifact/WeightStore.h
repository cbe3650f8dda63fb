//===- WeightStore.h - the bytes behind each llm.weight --------*- C++ -*-===//
//
// The IR names weights; the store produces their bytes when the artifact is
// packed. A plain `llm.weight "x"` is the imported tensor as it is (a view
// into the mmap'd file). Weights that passes derived are materialized here:
// `concat [...]` joins the rows of stored tensors (merged projections), and
// `from "fmt"` converts a stored tensor into the weight type's format (the
// quantize pass), and `shard <...>` takes one tensor-parallel rank's slice
// (the partition pass). Nothing is materialized before it is packed, and each
// derived weight is built once.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_ARTIFACT_WEIGHTSTORE_H
#define LLMC_COMPILER_ARTIFACT_WEIGHTSTORE_H

#include "Frontend/ModelImporter.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

class WeightStore {
public:
  struct Bytes {
    const uint8_t *data = nullptr;
    uint64_t size = 0;
  };

  explicit WeightStore(const ImportedModel &model) : model(model) {}

  // The bytes of `op`'s weight in the format of its type, for tensor-parallel
  // rank `rank` when the op is split (`shard`; see WeightSlice.h). The memory
  // lives as long as the store. Errors name the weight and the tensor at fault.
  absl::StatusOr<Bytes> materialize(llm::WeightOp op, int64_t rank = 0);

private:
  absl::StatusOr<Bytes> stored(const std::string &name) const;

  const ImportedModel &model;
  // Derived weights, kept alive until the store goes.
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned;
};

} // namespace llmc

#endif // LLMC_COMPILER_ARTIFACT_WEIGHTSTORE_H
