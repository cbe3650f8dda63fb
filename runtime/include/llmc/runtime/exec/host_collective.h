// The collectives of a partitioned step plan (ManifestStep::collective) on
// the host runner's activation buffers: the tensor-parallel group's
// all-reduces and all-gathers, and the hidden state's send and receive
// between pipeline stages.
#ifndef LLMC_RUNTIME_EXEC_HOST_COLLECTIVE_H_
#define LLMC_RUNTIME_EXEC_HOST_COLLECTIVE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/runtime/dist/communicator.h"

namespace llmc {

struct HostCollective {
  enum class Kind { kAllReduceSum, kAllGather, kSend, kRecv };
  Kind kind = Kind::kAllReduceSum;
  float* in = nullptr;   // kSend: the rows sent
  float* out = nullptr;  // kRecv: where they arrive
  int64_t in_row_elems = 0, out_row_elems = 0;
  bool logits_rows = false;  // rows are the step's logits rows, else its tokens
  int peer_rank = -1;        // kSend, kRecv: the other stage's rank in the world
};

// Who a step's collectives go through: the tensor-parallel group of this
// rank's stage, and the whole world (pipeline stages; null without them).
struct HostCollectiveComms {
  Communicator* group = nullptr;
  Communicator* world = nullptr;
};

// The collective of `step` over `buffers` (the runner's, by manifest buffer
// index); an error names the step when the manifest asks for something else.
// A send or recv's peer is the same TP rank (`tp_rank`) of the peer stage.
absl::StatusOr<HostCollective> MakeHostCollective(const Manifest& m, size_t step_index,
                                                  std::vector<std::vector<float>>& buffers,
                                                  int tp_rank = 0);

// Runs `c` over `rows` rows. An all-gather collects every rank's rows in
// `scratch`, then lays them side by side in each output row.
absl::Status RunHostCollective(const HostCollective& c, int64_t rows,
                               const HostCollectiveComms& comms, std::vector<float>& scratch);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_HOST_COLLECTIVE_H_
