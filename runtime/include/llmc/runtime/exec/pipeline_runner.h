// One rank's share of a pipeline-parallel artifact (docs/partitioning.md):
// its stage's runner, the batch cut into micro-batches that flow through
// the stages one after another, and the logits brought back to rank 0.
//
// Every rank gets every step's batch (from rank 0: rank_runner.h) and cuts
// it the same way, so the stages agree on each micro-batch without talking
// about it. A stage runs micro-batch k + 1 while the next stage runs
// micro-batch k: its send returns before the bytes arrive. The last stage's
// first TP rank sends each micro-batch's logits rows to rank 0, which
// receives them after running its own part and returns them in the batch's
// order: to the engine, a pipeline is a runner like any other.
#ifndef LLMC_RUNTIME_EXEC_PIPELINE_RUNNER_H_
#define LLMC_RUNTIME_EXEC_PIPELINE_RUNNER_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/step_batch.h"
#include "llmc/runtime/exec/step_runner.h"

namespace llmc {

// A contiguous range of a batch's tokens, as a batch of its own: the
// sequences it touches (a sequence cut in two ends its first part at the
// cut: its context then ends there too), their block tables, and the
// logits rows among its tokens. `logits_index[i]` is the position in the
// whole batch's logits_rows of the part's logits row i, or -1 for the row
// a part without any computes anyway (every step computes one at least).
struct MicroBatch {
  StepBatch batch;
  std::vector<int64_t> logits_index;
};

// Cuts `batch` into `parts` micro-batches of near-equal token counts (fewer
// when it has fewer tokens), in token order. Running them in order computes
// what the whole batch does: each sequence's tokens still reach the cache
// in order, before any later token of it attends to them.
std::vector<MicroBatch> SplitStepBatch(const StepBatch& batch, int64_t parts);

// How many micro-batches a step of `num_tokens` tokens is cut into on `pp`
// stages: one per stage once each gets kMinMicroBatchTokens, else fewer. A
// decode step of a few tokens stays whole: its stages are bound by reading
// their weights, which every micro-batch would read again.
inline constexpr int64_t kMinMicroBatchTokens = 32;
int64_t MicroBatchesFor(int64_t num_tokens, int64_t pp);

class PipelineRunner : public StepRunner {
 public:
  // `stage` runs this rank's stage of `mesh` (its tensor-parallel group is
  // `group`, kept alive here as the stage runner uses it); `world` holds
  // every rank. Not owned: world.
  PipelineRunner(std::unique_ptr<Communicator> group, std::unique_ptr<StepRunner> stage,
                 Communicator* world, const ManifestMesh& mesh);
  ~PipelineRunner() override;

  // Rank 0 returns the whole batch's logits; other ranks return null.
  absl::StatusOr<StepOutput> Step(StepAccess key, const StepBatch& batch) override;
  // Rank 0 keeps up to pp steps in flight: Submit runs stage 0's part of a
  // step (its sends return at once) and Collect receives the oldest step's
  // logits from the last stage, which by then may be running the next.
  absl::Status Submit(StepAccess key, const StepBatch& batch) override;
  // Rank 0 makes the step's picks from the collected logits.
  absl::StatusOr<StepOutput> Collect(StepAccess key) override;
  int64_t max_steps_in_flight() const override;

  int64_t block_size() const override { return stage_->block_size(); }
  int64_t num_blocks() const override { return stage_->num_blocks(); }
  int64_t vocab_size() const override { return stage_->vocab_size(); }
  int64_t max_batch_tokens() const override { return stage_->max_batch_tokens(); }
  int64_t max_logits() const override { return stage_->max_logits(); }
  int64_t kv_cache_bytes() const override { return stage_->kv_cache_bytes(); }
  int threads() const override { return stage_->threads(); }
  std::string ExecutionSummary() const override;

 private:
  std::unique_ptr<Communicator> group_;  // destroyed after stage_, which uses it
  std::unique_ptr<StepRunner> stage_;
  Communicator* world_;
  int64_t pp_, stage_index_;
  int last_stage_rank_;  // the last stage's TP rank 0: it sends rank 0 the logits
  // Rank 0: each submitted step's micro-batches' logits_index, and its
  // picks, oldest first, for Collect.
  struct InFlight {
    std::vector<std::vector<int64_t>> parts;
    StepBatch picks;  // only picks, masked_ids and penalties
  };
  std::deque<InFlight> in_flight_;
  std::vector<float> logits_;  // rank 0: the collected step's
  HostPicks host_picks_;       // rank 0: the collected step's picks
  std::vector<float> part_;    // rank 0: one micro-batch's, as received
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_PIPELINE_RUNNER_H_
