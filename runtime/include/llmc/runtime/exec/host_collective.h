// The collectives of a tensor-parallel step plan (ManifestStep::collective)
// on the host runner's activation buffers, through the world's Communicator.
#ifndef LLMC_RUNTIME_EXEC_HOST_COLLECTIVE_H_
#define LLMC_RUNTIME_EXEC_HOST_COLLECTIVE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/runtime/dist/communicator.h"

namespace llmc {

struct HostCollective {
  enum class Kind { kAllReduceSum, kAllGather };
  Kind kind = Kind::kAllReduceSum;
  float* in = nullptr;
  float* out = nullptr;
  int64_t in_row_elems = 0, out_row_elems = 0;
  bool logits_rows = false;  // rows are the step's logits rows, else its tokens
};

// The collective of `step` over `buffers` (the runner's, by manifest buffer
// index); an error names the step when the manifest asks for something else.
absl::StatusOr<HostCollective> MakeHostCollective(const Manifest& m, size_t step_index,
                                                  std::vector<std::vector<float>>& buffers);

// Runs `c` over `rows` rows. An all-gather collects every rank's rows in
// `scratch`, then lays them side by side in each output row.
absl::Status RunHostCollective(const HostCollective& c, int64_t rows, Communicator& comm,
                               std::vector<float>& scratch);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_HOST_COLLECTIVE_H_
