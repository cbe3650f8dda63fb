#include "llmc/runtime/exec/pipeline_runner.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {

std::vector<MicroBatch> SplitStepBatch(const StepBatch& b, int64_t parts) {
  const int64_t tokens = b.num_tokens();
  parts = std::max<int64_t>(1, std::min(parts, tokens));
  std::vector<MicroBatch> out;
  out.resize(size_t(parts));
  for (int64_t p = 0; p < parts; ++p) {
    // Tokens [begin, end): the p-th of `parts` near-equal ranges.
    const int64_t begin = tokens * p / parts, end = tokens * (p + 1) / parts;
    StepBatch& m = out[size_t(p)].batch;
    m.max_blocks = b.max_blocks;
    m.query_starts.push_back(0);
    for (int64_t s = 0; s < b.num_seqs(); ++s) {
      const int64_t first = b.query_starts[size_t(s)], last = b.query_starts[size_t(s) + 1];
      const int64_t from = std::max(first, begin), to = std::min(last, end);
      if (from >= to) continue;
      // The sequence's context ends at its last token in this part.
      m.context_lens.push_back(int32_t(b.context_lens[size_t(s)] - (last - to)));
      m.query_starts.push_back(int32_t(m.query_starts.back() + (to - from)));
      auto row = b.block_tables.begin() + s * b.max_blocks;
      m.block_tables.insert(m.block_tables.end(), row, row + b.max_blocks);
    }
    m.tokens.assign(b.tokens.begin() + begin, b.tokens.begin() + end);
    m.positions.assign(b.positions.begin() + begin, b.positions.begin() + end);
    m.slot_mapping.assign(b.slot_mapping.begin() + begin, b.slot_mapping.begin() + end);
    for (size_t i = 0; i < b.logits_rows.size(); ++i)
      if (b.logits_rows[i] >= begin && b.logits_rows[i] < end) {
        m.logits_rows.push_back(int32_t(b.logits_rows[i] - begin));
        out[size_t(p)].logits_index.push_back(int64_t(i));
      }
    // A step computes at least one logits row (as the engine's do): a part
    // without one computes its last token's, which nobody reads.
    if (m.logits_rows.empty()) {
      m.logits_rows.push_back(int32_t(end - begin - 1));
      out[size_t(p)].logits_index.push_back(-1);
    }
  }
  return out;
}

int64_t MicroBatchesFor(int64_t num_tokens, int64_t pp) {
  return std::clamp<int64_t>(num_tokens / kMinMicroBatchTokens, 1, std::max<int64_t>(pp, 1));
}

PipelineRunner::PipelineRunner(std::unique_ptr<Communicator> group,
                               std::unique_ptr<StepRunner> stage, Communicator* world,
                               const ManifestMesh& mesh)
    : group_(std::move(group)),
      stage_(std::move(stage)),
      world_(world),
      pp_(mesh.pp),
      stage_index_(mesh.stage),
      last_stage_rank_(int((mesh.pp - 1) * mesh.tp)) {}

PipelineRunner::~PipelineRunner() {
  // The last sends must leave before the world does.
  if (world_ != nullptr) (void)world_->Flush();
}

std::string PipelineRunner::ExecutionSummary() const {
  return absl::StrFormat("%s, pipeline stage %d of %d", stage_->ExecutionSummary(), stage_index_,
                         pp_);
}

int64_t PipelineRunner::max_steps_in_flight() const { return world_->rank() == 0 ? pp_ : 1; }

absl::StatusOr<StepOutput> PipelineRunner::Step(StepAccess key, const StepBatch& batch) {
  LLMC_RETURN_IF_ERROR(Submit(key, batch));
  return Collect(key);
}

absl::Status PipelineRunner::Submit(StepAccess key, const StepBatch& batch) {
  const int64_t vocab = stage_->vocab_size();
  const bool sends_logits = world_->rank() == last_stage_rank_;
  std::vector<MicroBatch> parts = SplitStepBatch(batch, MicroBatchesFor(batch.num_tokens(), pp_));
  for (const MicroBatch& part : parts) {
    LLMC_ASSIGN_OR_RETURN(StepOutput out, stage_->Step(key, part.batch));
    const float* logits = out.logits;
    if (!sends_logits) continue;
    if (logits == nullptr)
      return absl::InternalError("pipeline: the last stage's step returned no logits");
    const int64_t rows = int64_t(part.batch.logits_rows.size());
    LLMC_RETURN_IF_ERROR(world_->Send(logits, rows * vocab * int64_t(sizeof(float)), 0,
                                      Communicator::Channel::kActivations));
  }
  if (world_->rank() == 0) {
    InFlight& step = in_flight_.emplace_back();
    for (MicroBatch& part : parts) step.parts.push_back(std::move(part.logits_index));
    step.picks.picks = batch.picks;
    step.picks.masked_ids = batch.masked_ids;
    step.picks.penalties = batch.penalties;
  }
  return absl::OkStatus();
}

absl::StatusOr<StepOutput> PipelineRunner::Collect(StepAccess) {
  if (world_->rank() != 0) return StepOutput{};
  if (in_flight_.empty())
    return absl::FailedPreconditionError("pipeline: Collect without a submitted step");
  const InFlight step = std::move(in_flight_.front());
  const std::vector<std::vector<int64_t>>& parts = step.parts;
  in_flight_.pop_front();
  // The logits of each micro-batch, from the last stage, in the batch's order.
  const int64_t vocab = stage_->vocab_size();
  int64_t rows_in_step = 0;
  for (const std::vector<int64_t>& index : parts)
    for (int64_t at : index) rows_in_step += at >= 0;
  logits_.resize(size_t(rows_in_step * vocab));
  for (const std::vector<int64_t>& index : parts) {
    const int64_t rows = int64_t(index.size());
    part_.resize(size_t(rows * vocab));
    LLMC_RETURN_IF_ERROR(world_->Recv(part_.data(), rows * vocab * int64_t(sizeof(float)),
                                      last_stage_rank_, Communicator::Channel::kActivations));
    for (int64_t i = 0; i < rows; ++i)
      if (const int64_t at = index[size_t(i)]; at >= 0)
        std::memcpy(logits_.data() + at * vocab, part_.data() + i * vocab,
                    size_t(vocab) * sizeof(float));
  }
  return host_picks_.Pick(step.picks, logits_.data(), vocab);
}

}  // namespace llmc
