#include "llmc/runtime/exec/host_collective.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {

absl::StatusOr<HostCollective> MakeHostCollective(const Manifest& m, size_t step_index,
                                                  std::vector<std::vector<float>>& buffers,
                                                  int tp_rank) {
  const ManifestStep& s = m.steps[step_index];
  auto fail = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrFormat("step %d (%s): %s", step_index, s.collective, why));
  };
  HostCollective c;
  if (s.collective == "send" || s.collective == "recv") {
    // The manifest's checks hold: one buffer of token rows, a neighbour stage.
    const bool send = s.collective == "send";
    if (s.buffers.size() != 1 || m.mesh.pp < 2) return fail("is not a pipeline transfer");
    c.kind = send ? HostCollective::Kind::kSend : HostCollective::Kind::kRecv;
    (send ? c.in : c.out) = buffers[size_t(s.buffers[0])].data();
    c.in_row_elems = s.in_row_elems;
    c.out_row_elems = s.out_row_elems;
    c.peer_rank = int(s.peer * m.mesh.tp + tp_rank);
    return c;
  }
  if (s.collective == "all_reduce_sum")
    c.kind = HostCollective::Kind::kAllReduceSum;
  else if (s.collective == "all_gather")
    c.kind = HostCollective::Kind::kAllGather;
  else
    return fail("not a collective the host runner knows");
  if (s.buffers.size() != 2) return fail("needs an input and an output buffer");
  const ManifestBuffer& in = m.buffers[size_t(s.buffers[0])];
  const ManifestBuffer& out = m.buffers[size_t(s.buffers[1])];
  c.in = buffers[size_t(s.buffers[0])].data();
  c.out = buffers[size_t(s.buffers[1])].data();
  c.in_row_elems = s.in_row_elems;
  c.out_row_elems = s.out_row_elems;
  c.logits_rows = out.rows == "logits";
  // Rows are packed at the value's width, within the buffer's widest row.
  if (in.rows != out.rows) return fail("its input and output rows differ in kind");
  if (c.in_row_elems <= 0 || c.out_row_elems <= 0 ||
      c.in_row_elems * int64_t(sizeof(float)) > in.row_bytes ||
      c.out_row_elems * int64_t(sizeof(float)) > out.row_bytes)
    return fail(absl::StrFormat("row widths %d -> %d do not fit its buffers (%d and %d bytes)",
                                c.in_row_elems, c.out_row_elems, in.row_bytes, out.row_bytes));
  if (c.kind == HostCollective::Kind::kAllReduceSum && c.in_row_elems != c.out_row_elems)
    return fail("an all-reduce keeps the row width");
  return c;
}

absl::Status RunHostCollective(const HostCollective& c, int64_t rows,
                               const HostCollectiveComms& comms, std::vector<float>& scratch) {
  if (c.kind == HostCollective::Kind::kSend || c.kind == HostCollective::Kind::kRecv) {
    if (comms.world == nullptr)
      return absl::FailedPreconditionError("a pipeline transfer without a world to send in");
    if (c.kind == HostCollective::Kind::kSend)
      return comms.world->Send(c.in, rows * c.in_row_elems * int64_t(sizeof(float)), c.peer_rank,
                               Communicator::Channel::kActivations);
    return comms.world->Recv(c.out, rows * c.out_row_elems * int64_t(sizeof(float)), c.peer_rank,
                             Communicator::Channel::kActivations);
  }
  if (comms.group == nullptr)
    return absl::FailedPreconditionError("a collective without a tensor-parallel group");
  Communicator& comm = *comms.group;
  if (c.kind == HostCollective::Kind::kAllReduceSum) {
    const int64_t count = rows * c.in_row_elems;
    if (c.out != c.in) std::memcpy(c.out, c.in, size_t(count) * sizeof(float));
    return comm.AllReduceSum(c.out, count);
  }
  // All-gather: rank-major [ranks][rows][piece] in scratch, then each output
  // row is the ranks' pieces side by side, cut to the output's width.
  const int64_t piece = c.in_row_elems, ranks = comm.size();
  if (piece * ranks < c.out_row_elems)
    return absl::FailedPreconditionError(
        absl::StrFormat("all_gather: %d ranks of %d columns cannot fill rows of %d", ranks, piece,
                        c.out_row_elems));
  scratch.resize(size_t(ranks * rows * piece));
  LLMC_RETURN_IF_ERROR(comm.AllGather(c.in, scratch.data(), rows * piece));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < ranks; ++k) {
      const int64_t first = k * piece;
      const int64_t n = std::min(piece, c.out_row_elems - first);
      if (n <= 0) break;
      std::memcpy(c.out + r * c.out_row_elems + first, scratch.data() + (k * rows + r) * piece,
                  size_t(n) * sizeof(float));
    }
  return absl::OkStatus();
}

}  // namespace llmc
