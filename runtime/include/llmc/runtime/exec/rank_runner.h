// One scheduler for all the ranks of a partitioned artifact: rank 0 (the
// leader) owns the engine, the scheduler and any server, and each step it
// runs it first sends to the other ranks (the followers), which only
// execute steps. So every command (run, bench, logits, perplexity, serve)
// works unchanged under `mpirun`: it runs on rank 0, with a runner whose
// steps the whole world takes part in.
#ifndef LLMC_RUNTIME_EXEC_RANK_RUNNER_H_
#define LLMC_RUNTIME_EXEC_RANK_RUNNER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/step_batch.h"
#include "llmc/runtime/exec/step_runner.h"

namespace llmc {

// Rank 0's runner: sends each (checked) batch to the followers, then runs
// it on `inner`.
// Destroying it tells the followers to stop.
class LeaderRunner : public StepRunner {
 public:
  LeaderRunner(std::unique_ptr<StepRunner> inner, Communicator* comm)
      : inner_(std::move(inner)), comm_(comm) {}
  ~LeaderRunner() override;

  absl::StatusOr<StepOutput> Step(StepAccess key, const StepBatch& batch) override;
  // Sends the batch to the followers, then submits it to `inner`.
  absl::Status Submit(StepAccess key, const StepBatch& batch) override;
  absl::StatusOr<StepOutput> Collect(StepAccess key) override { return inner_->Collect(key); }
  int64_t max_steps_in_flight() const override { return inner_->max_steps_in_flight(); }

  int64_t block_size() const override { return inner_->block_size(); }
  int64_t num_blocks() const override { return inner_->num_blocks(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_batch_tokens() const override { return inner_->max_batch_tokens(); }
  int64_t max_logits() const override { return inner_->max_logits(); }
  int64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
  int threads() const override { return inner_->threads(); }
  std::string ExecutionSummary() const override { return inner_->ExecutionSummary(); }

 private:
  std::unique_ptr<StepRunner> inner_;
  Communicator* comm_;
  bool failed_ = false;  // a send failed: the world is gone, send nothing more
};

// This rank's runner of `artifact` (opened for the rank of
// options.communicator, the world; null runs it alone). With a pipeline
// mesh and a world of tp * pp ranks it is this stage's PipelineRunner, its
// tensor-parallel group split from the world (every rank must call this,
// the split is collective); else the backend's runner on the world (which
// checks the world's size against the mesh). Rank 0 of a world of more
// than one leads: its runner is a LeaderRunner. A follower's runs the steps
// RunFollowerRank receives.
absl::StatusOr<std::unique_ptr<StepRunner>> CreateRankRunner(const Artifact& artifact,
                                                             RunnerOptions options,
                                                             const BackendChoice& backend);

// A follower rank's whole life: receive the leader's steps and run them on
// `runner` until the leader stops (OK) or something fails (the error).
absl::Status RunFollowerRank(StepRunner& runner, Communicator& comm);

// The batch on the wire (exposed for tests): SendBatch on the leader matches
// ReceiveBatch on the followers; ReceiveBatch returns false for the stop.
absl::Status SendBatch(const StepBatch* batch, Communicator& comm);  // null: stop
absl::StatusOr<bool> ReceiveBatch(StepBatch& batch, Communicator& comm);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_RANK_RUNNER_H_
