// What executes an artifact's step plan, whatever the backend: the engine and
// the commands hold a StepRunner, and CreateStepRunner builds the HostRunner
// or the CudaRunner that ChooseBackend (backend.h) settled on.
#ifndef LLMC_RUNTIME_EXEC_STEP_RUNNER_H_
#define LLMC_RUNTIME_EXEC_STEP_RUNNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/exec/backend.h"
#include "llmc/runtime/exec/step_batch.h"

namespace llmc {

class Communicator;

struct RunnerOptions {
  int threads = 0;                 // host: 0 for one per core
  int64_t max_batch_tokens = 512;  // T of the largest step
  int64_t max_logits = 0;          // rows of logits per step; 0: max_batch_tokens
  int64_t block_size = 16;         // tokens per KV block
  // KV-cache size (kv_sizing.h): num_blocks when positive, else
  // kv_cache_bytes (all layers, K and V) when positive, else on a GPU
  // kv_memory_fraction of the device memory still free once weights and
  // buffers are allocated, else enough for max_position tokens of one
  // sequence.
  int64_t num_blocks = 0;
  int64_t kv_cache_bytes = 0;
  double kv_memory_fraction = 0;
  bool cuda_graphs = false;  // CUDA: replay decode steps from captured graphs (host: ignored)
  // CUDA graphs: the most device memory their instantiation may take (the
  // KV cache is sized after setting it aside); buckets past it are not
  // captured, and their steps pad to a larger one.
  int64_t cuda_graph_memory = int64_t{256} << 20;
  // CUDA, sm_90 and newer: launch the generated kernels with programmatic
  // stream serialization (programmatic dependent launch), so that a kernel's
  // blocks are placed and wait (griddepcontrol.wait, the first thing every
  // generated entry does) while the kernel before it drains; its launch
  // latency and ramp overlap the previous tail. Off by default until a GPU
  // run measures it (scripts/gpu-check.sh stage 5). Host: ignored.
  bool pdl = false;
  // CUDA: who runs the GEMMs with 16-bit weights: "llmc" (the generated
  // kernels), "cublaslt" (cuBLASLt, loaded with dlopen, wherever the artifact
  // offers it), "auto" (per kernel and row count as `llmc tune` measured on
  // this device, from `tune_file`, default ARTIFACT/tune.json; the generated
  // kernels without one).
  std::string gemm = "llmc";
  std::string tune_file;
  // CUDA: time each step entry with events (KernelTimes); for `llmc tune`.
  bool profile_kernels = false;
  // The ranks of a partitioned artifact (its manifest's mesh), this process
  // one of them; null runs an unpartitioned artifact alone. Not owned.
  // `communicator` is this rank's tensor-parallel group (all of the world
  // without pipeline stages); `pipeline` the whole world, which the
  // stages' sends and receives go through (null without stages).
  Communicator* communicator = nullptr;
  Communicator* pipeline = nullptr;
};

// One logprob of a pick (llmc_cuda_logprob): a token and its raw
// log-softmax.
struct PickLogprob {
  int32_t token = -1;
  float logprob = 0;
};

// What a step gives back, on the host, valid until the runner's next Step
// or Collect.
struct StepOutput {
  // f32 [batch.logits_rows.size(), vocab]: row i the logits of
  // logits_rows[i]. A picked row's (batch.picks) is not filled: its token
  // is all that leaves the runner. Null on a pipeline stage before the last.
  const float* logits = nullptr;
  // [batch.picks.size()]: the token of each pick, in the picks' order.
  const int32_t* tokens = nullptr;
  // [batch.num_logprob_entries()]: the logprobs the picks asked for, pick
  // j's from picks[j].logprob_begin: its token's, then its N best (best
  // first; token -1 where the row has fewer tokens above -inf).
  const PickLogprob* logprobs = nullptr;
};

class Engine;
class StepRunner;
struct StepRunnerTestAccess;

// The key to a runner's steps (Step, Submit, Collect take one). The Engine
// is the one driver of a runner: its scheduler, KV cache and requests'
// sampling state must see every step, and every command (run, perplexity,
// logits, bench, tune, serve) is a client of an engine. Besides it only a
// follower rank's loop (RunFollowerRank), which runs the leader's steps,
// makes one; runners that wrap a runner pass theirs on, and tests of
// runners take one from StepRunnerTestAccess (test/unit/runtime/
// step_access.h; build/step-access checks that nothing else names it). Any
// other caller does not compile.
class StepAccess {
 private:
  StepAccess() {}  // user-provided: `StepAccess{}` is no aggregate either
  friend class Engine;
  friend absl::Status RunFollowerRank(StepRunner& runner, Communicator& comm);
  friend struct StepRunnerTestAccess;
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;

  // Runs @step once.
  virtual absl::StatusOr<StepOutput> Step(StepAccess key, const StepBatch& batch) = 0;

  // Several steps in flight, for a pipeline whose stages each run another
  // step: Submit starts a step (the caller may reuse `batch` at once), and
  // Collect returns the output of the oldest step not yet collected. Up to
  // max_steps_in_flight() steps may be submitted before the first is
  // collected; their requests must differ (a request's next step needs the
  // token its last one gives), unless the runner feeds tokens. The default
  // runs the step at Submit and reports its outcome at Collect.
  virtual int64_t max_steps_in_flight() const { return 1; }
  // Whether Submit takes StepBatch::feeds: a step's token that is a pick of
  // the step submitted just before it, collected or not (asynchronous
  // scheduling: the engine schedules step N+1 while step N runs, and a
  // request of both decodes on in N+1 from the token N picks, which stays
  // on the device). A runner that feeds holds at least two steps in flight.
  virtual bool feeds_tokens() const { return false; }
  virtual absl::Status Submit(StepAccess key, const StepBatch& batch) {
    submitted_ = Step(key, batch);
    return absl::OkStatus();
  }
  virtual absl::StatusOr<StepOutput> Collect(StepAccess) {
    absl::StatusOr<StepOutput> out = std::move(submitted_);
    submitted_ = absl::FailedPreconditionError("Collect: no step was submitted");
    return out;
  }

  virtual int64_t block_size() const = 0;
  virtual int64_t num_blocks() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_batch_tokens() const = 0;
  virtual int64_t max_logits() const = 0;
  // Bytes of the KV cache (all layers, K and V).
  virtual int64_t kv_cache_bytes() const = 0;
  // Host worker threads (0 on a GPU backend).
  virtual int threads() const = 0;
  // Where it runs, for one line of statistics: "4 threads" on the host,
  // "CUDA sm_90 on NVIDIA H200" on a GPU.
  virtual std::string ExecutionSummary() const = 0;

 private:
  absl::StatusOr<StepOutput> submitted_ =
      absl::FailedPreconditionError("Collect: no step was submitted");
};

// The picks of `batch` made on the host from `logits` (StepOutput's layout:
// [logits_rows.size(), vocab]), into `tokens` (resized to the picks'
// count) and `logprobs` (StepOutput's layout), by the host Sampler: for a
// runner whose logits are on the host anyway, or that has no device
// sampler.
void PickOnHost(const StepBatch& batch, const float* logits, int64_t vocab,
                std::vector<int32_t>* tokens, std::vector<PickLogprob>* logprobs);

// A runner's picks made on the host (PickOnHost), held until its next step.
class HostPicks {
 public:
  // Picks `batch`'s picks from `logits` and returns the step's output:
  // those logits with the picks' ids and logprobs.
  StepOutput Pick(const StepBatch& batch, const float* logits, int64_t vocab) {
    PickOnHost(batch, logits, vocab, &tokens_, &logprobs_);
    return StepOutput{logits, tokens_.data(), logprobs_.data()};
  }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<PickLogprob>& logprobs() const { return logprobs_; }

 private:
  std::vector<int32_t> tokens_;
  std::vector<PickLogprob> logprobs_;
};

// The world this rank's runner belongs to: the pipeline's (all stages) or
// the tensor-parallel group's; null for a process of its own.
Communicator* RankWorld(const RunnerOptions& options);

// A partitioned artifact runs as one rank of a world of tp * pp ranks:
// FailedPrecondition naming the mpirun command when the world has another
// size, Internal when a pipeline stage lacks its tensor-parallel group.
absl::Status CheckRankWorld(const Artifact& artifact, const RunnerOptions& options);

// The layers whose K/V this rank's cache holds (a pipeline stage holds only
// its own), and the count that sizes the cache: every stage has as many
// blocks (one scheduler's block tables index them all), so the stage with
// the most layers sizes it.
struct CacheLayers {
  int64_t held = 0, sizing = 0;
};
CacheLayers CacheLayersOf(const Manifest& m);

// The runner `choice` names (ChooseBackend's answer; a default BackendChoice
// is the host). A CUDA runner opens device 0 with the process's driver.
absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Artifact& artifact,
                                                             const RunnerOptions& options,
                                                             const BackendChoice& choice);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_STEP_RUNNER_H_
