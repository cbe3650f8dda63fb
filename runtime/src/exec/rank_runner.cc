#include "llmc/runtime/exec/rank_runner.h"

#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {
namespace {

// The header that precedes each step: what follows, in int32s.
struct WireHeader {
  int64_t kind;  // kStep or kStop
  int64_t tokens, seqs, logits, max_blocks, table_entries;
};
constexpr int64_t kStep = 0x6c6c6d6373746570;  // "llmcstep"
constexpr int64_t kStop = 0x6c6c6d6373746f70;  // "llmcstop"

// The arrays of a batch, in wire order (const or not, as the batch is).
template <typename Batch>
auto Arrays(Batch& b) {
  return std::array{&b.tokens,       &b.positions,    &b.query_starts, &b.context_lens,
                    &b.block_tables, &b.slot_mapping, &b.logits_rows};
}

}  // namespace

// Each step goes to every other rank on its own (sends that return before
// they arrive), not as a broadcast: a broadcast would hold the leader until
// the slowest rank joins it, and a pipeline's last stage is still busy with
// the step before.
absl::Status SendToFollowers(const void* data, int64_t bytes, Communicator& comm) {
  for (int r = 1; r < comm.size(); ++r)
    LLMC_RETURN_IF_ERROR(comm.Send(data, bytes, r, Communicator::Channel::kSteps));
  return absl::OkStatus();
}

absl::Status SendBatch(const StepBatch* batch, Communicator& comm) {
  WireHeader h{kStop, 0, 0, 0, 0, 0};
  if (batch != nullptr)
    h = {kStep,
         batch->num_tokens(),
         batch->num_seqs(),
         int64_t(batch->logits_rows.size()),
         batch->max_blocks,
         int64_t(batch->block_tables.size())};
  LLMC_RETURN_IF_ERROR(SendToFollowers(&h, sizeof(h), comm));
  if (batch == nullptr) return comm.Flush();  // the stop arrives before the world ends
  std::vector<int32_t> payload;
  for (const std::vector<int32_t>* a : Arrays(*batch))
    payload.insert(payload.end(), a->begin(), a->end());
  return SendToFollowers(payload.data(), int64_t(payload.size() * sizeof(int32_t)), comm);
}

absl::StatusOr<bool> ReceiveBatch(StepBatch& batch, Communicator& comm) {
  WireHeader h{};
  LLMC_RETURN_IF_ERROR(comm.WaitForRecv(&h, sizeof(h), 0, Communicator::Channel::kSteps));
  if (h.kind == kStop) return false;
  const int64_t limit = int64_t(1) << 28;
  if (h.kind != kStep || h.tokens < 0 || h.seqs < 0 || h.logits < 0 || h.max_blocks < 0 ||
      h.table_entries < 0 || h.tokens > limit || h.seqs > limit || h.logits > limit ||
      h.table_entries > limit)
    return absl::DataLossError("follower: the leader's step header is garbled");
  batch.tokens.resize(size_t(h.tokens));
  batch.positions.resize(size_t(h.tokens));
  batch.query_starts.resize(size_t(h.seqs + 1));
  batch.context_lens.resize(size_t(h.seqs));
  batch.block_tables.resize(size_t(h.table_entries));
  batch.max_blocks = h.max_blocks;
  batch.slot_mapping.resize(size_t(h.tokens));
  batch.logits_rows.resize(size_t(h.logits));
  size_t total = 0;
  for (std::vector<int32_t>* a : Arrays(batch)) total += a->size();
  std::vector<int32_t> payload(total);
  LLMC_RETURN_IF_ERROR(comm.Recv(payload.data(), int64_t(total * sizeof(int32_t)), 0,
                                 Communicator::Channel::kSteps));
  size_t at = 0;
  for (std::vector<int32_t>* a : Arrays(batch)) {
    std::memcpy(a->data(), payload.data() + at, a->size() * sizeof(int32_t));
    at += a->size();
  }
  return true;
}

LeaderRunner::~LeaderRunner() {
  if (!failed_) (void)SendBatch(nullptr, *comm_);
}

absl::Status LeaderRunner::Submit(StepAccess key, const StepBatch& batch) {
  if (failed_) return absl::UnavailableError("the other ranks are gone (an earlier step failed)");
  // A batch the runner would refuse never reaches the followers.
  LLMC_RETURN_IF_ERROR(ValidateStepBatch(
      batch, {max_batch_tokens(), max_logits(), num_blocks(), block_size(), vocab_size()}));
  if (absl::Status st = SendBatch(&batch, *comm_); !st.ok()) {
    failed_ = true;
    return st;
  }
  return inner_->Submit(key, batch);
}

absl::StatusOr<StepOutput> LeaderRunner::Step(StepAccess key, const StepBatch& batch) {
  LLMC_RETURN_IF_ERROR(Submit(key, batch));
  return Collect(key);
}

absl::Status RunFollowerRank(StepRunner& runner, Communicator& comm) {
  StepBatch batch;
  for (;;) {
    LLMC_ASSIGN_OR_RETURN(bool step, ReceiveBatch(batch, comm));
    if (!step) return absl::OkStatus();
    absl::StatusOr<StepOutput> logits = runner.Step(StepAccess(), batch);
    if (!logits.ok())
      return absl::Status(logits.status().code(),
                          absl::StrFormat("rank %d: %s", comm.rank(), logits.status().message()));
  }
}

}  // namespace llmc
