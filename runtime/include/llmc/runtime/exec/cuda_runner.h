// Executes an artifact's CUDA step plan (manifest `cuda` section) on one
// device: the PTX module of the chosen target JIT-compiled by the driver,
// weights uploaded once, activation buffers and the KV cache in device
// memory, and per step one upload of the batch's int32 arrays, the launches
// whose `when` holds, and one download of the logits rows.
//
// Memory: every buffer in cuda.activation_dtype (those of logits rows in
// f32: the logits, a TP rank's slice of them), rows as on the host (max_batch_tokens or
// max_logits); per layer K and V, each [num_blocks, block_size, kv_heads, head_dim] in the
// activation type, zero-initialised; f32 scratch for split attention's partials (sized at load for
// a decode step at full context, grown when a larger step needs more).
//
// Two steps may be in flight (asynchronous scheduling) where the artifact
// has the device sampler and the token feed (cuda.samplers) and the step
// needs no host round trip of its own (no collectives, no pipeline
// transfers, no kernel profile): Submit enqueues a step whose tokens are
// all picked on the device and returns; Collect waits for its event. Each
// step in flight has its own page-locked staging and outputs (a slot), so
// that packing step N+1 and reading step N's ids never touch what the
// device still copies; the device areas are one, in stream order. A step
// with feeds (StepBatch::feeds) first runs the token feed, which copies
// the ids step N picked, still on the device, over its placeholders.
//
// With RunnerOptions.cuda_graphs, the runner captures at load one CUDA
// graph per decode batch-size bucket (CudaGraphBuckets up to the largest
// decode step it takes), largest first, while the device memory they take
// stays within RunnerOptions.cuda_graph_memory; a decode step (IsGraphStep)
// of S sequences replays the smallest captured bucket of at least S, its
// batch padded to it (cuda_step_plan.h says what a graph depends on). The
// graphs read their own areas, allocated once at load: the step arrays
// (graph_staging_: the batch's arrays, then its block tables as wide as the
// longest context, of which only the batch's rows and columns go up, in one
// pitched copy) and the split attention's scratch (graph_scratch_), so no
// later step moves a pointer they hold. The sampler, the token feed and the
// downloads stay outside the graphs. A step no bucket takes (prefill, or a
// decode larger than every captured bucket) runs launch by launch.
//
// A tensor-parallel artifact (mesh.tp > 1, mesh.pp == 1) runs as one rank
// of RunnerOptions.communicator's world, which must have mesh.tp ranks: the
// runner joins an NCCL communicator of the world's ranks (libnccl.so.2,
// dlopen'd: nccl_api.h; its unique id broadcast by the communicator) and
// enqueues each collective entry of the plan on its stream (cuda_collective.h
// says what each moves). A partitioned step then waits for its stream by
// polling, with NCCL's asynchronous error checked between polls, for at most
// $LLMC_NCCL_TIMEOUT seconds (30 by default): a collective that fails or
// never completes (a peer died or hangs) aborts the communicator and ends
// every rank (EndWorldOnError) with a message naming the step. CUDA graphs
// capture the collectives with the launches.
//
// A pipeline stage (mesh.pp > 1) runs as one rank of RunnerOptions.pipeline's
// world (tp * pp ranks), its collectives within RunnerOptions.communicator
// (the stage's tensor-parallel group), and holds only its own layers' KV
// cache. Its `recv` and `send` entries move the hidden state's rows through
// host memory and the world (cuda_collective.h, CudaTransfer): the stream
// synchronizes before a send, so such steps run launch by launch, never as
// CUDA graphs. A stage before the last has no logits: Step returns null.
// Every rank of a partitioned world takes the fewest KV blocks any rank
// could hold, since rank 0's scheduler hands out block ids for all.
//
// With RunnerOptions.gemm "cublaslt" or "auto" (and a tune file measured on
// this device), the GEMMs the artifact offers to cuBLASLt (16-bit weights in
// the activation type; manifest kernels[i].gemm) run as its pre launch,
// cublasLtMatmul into an f32 area, and its epi launch (ApplyGemmPolicy).
#ifndef LLMC_RUNTIME_EXEC_CUDA_RUNNER_H_
#define LLMC_RUNTIME_EXEC_CUDA_RUNNER_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/cuda/cublaslt.h"
#include "llmc/runtime/cuda/device.h"
#include "llmc/runtime/exec/cuda_collective.h"
#include "llmc/runtime/exec/cuda_step_plan.h"
#include "llmc/runtime/exec/nccl_comm.h"
#include "llmc/runtime/exec/step_runner.h"

namespace llmc {

class CudaRunner : public StepRunner {
 public:
  // Runs `artifact`'s module for `target` ("sm_90", from ChooseBackend) on
  // `device`, which the runner keeps (and closes last). RunnerOptions.threads
  // is ignored. FailedPrecondition when cuda_graphs is set and the driver
  // lacks the graph functions, when a partitioned artifact's world is not
  // its mesh, or when NCCL cannot be loaded.
  static absl::StatusOr<std::unique_ptr<CudaRunner>> Create(
      const Artifact& artifact, const RunnerOptions& options, const std::string& target,
      std::unique_ptr<cuda::CudaDevice> device);
  ~CudaRunner() override;

  // Runs @step once. The picks run on the device where the artifact has
  // the device sampler (cuda.samplers): only their token ids are copied
  // back, and only the other rows' logits. Otherwise every row's logits
  // come back and the picks are made on the host.
  absl::StatusOr<StepOutput> Step(StepAccess key, const StepBatch& batch) override;
  // Two steps in flight where Overlaps(), one otherwise (see above).
  int64_t max_steps_in_flight() const override { return Overlaps() ? 2 : 1; }
  bool feeds_tokens() const override { return Overlaps(); }
  absl::Status Submit(StepAccess key, const StepBatch& batch) override;
  absl::StatusOr<StepOutput> Collect(StepAccess key) override;
  // Whether the picks run on the device (the artifact has the sampler).
  bool picks_on_device() const { return sampler_ != nullptr; }

  int64_t block_size() const override { return options_.block_size; }
  int64_t num_blocks() const override { return options_.num_blocks; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t max_logits() const override { return options_.max_logits; }
  int64_t kv_cache_bytes() const override { return kv_cache_bytes_; }
  int threads() const override { return 0; }
  std::string ExecutionSummary() const override;

  cuda::CudaDevice& device() { return *device_; }
  // With RunnerOptions.profile_kernels: milliseconds spent in each cuda
  // kernel (by index into cuda.kernels) over the steps run, from events
  // recorded between step entries. Graph steps are not timed.
  const std::vector<double>& KernelTimes() const { return kernel_ms_; }
  void ResetKernelTimes() { kernel_ms_.assign(kernel_ms_.size(), 0.0); }
  // The cuBLASLt version when it runs GEMMs, else "".
  std::string CublasLtVersion() const;
  // Replaces the GEMM policy, e.g. to time both sides on one runner (llmc
  // tune). FailedPrecondition for a policy that uses cuBLASLt on a runner
  // created without it (RunnerOptions.gemm "llmc").
  absl::Status SetGemmPolicy(const GemmPolicy& policy);

 private:
  struct Graph;
  CudaRunner() = default;
  // What one step in flight owns on the host: its staging's page-locked
  // copy, its outputs' page-locked destinations, and the event recorded
  // after its last copy.
  struct StepSlot {
    cuda::PinnedBuffer staging;
    cuda::PinnedBuffer logits;    // [rows, vocab] f32: the rows no pick takes
    cuda::PinnedBuffer picked;    // the picked ids
    cuda::PinnedBuffer logprobs;  // the picks' logprobs
    cuda::CUevent done = nullptr;
  };
  // A submitted step: its slot and, when it ran to the end at Submit, its
  // outcome.
  struct Submitted {
    size_t slot = 0;
    bool overlapped = false;  // Collect waits for slot's event
    absl::StatusOr<StepOutput> out = StepOutput{};
  };
  // Whether steps may overlap: the device sampler and the token feed, and
  // nothing that makes the host wait inside a step.
  bool Overlaps() const {
    return sampler_ != nullptr && feeder_ != nullptr && !nccl_ && transfers_.empty() &&
           !options_.profile_kernels;
  }
  // Enqueues `batch`'s upload, feed, launches, picks and copies into `slot`.
  absl::Status Enqueue(const StepBatch& batch, StepSlot& slot, bool* device_picks);
  // Waits for the step enqueued last into `slot` and returns its output.
  absl::StatusOr<StepOutput> Finish(const StepBatch& batch, StepSlot& slot, bool device_picks);
  // A page-locked buffer of at least `bytes` (the slot's, grown).
  absl::Status EnsurePinned(size_t bytes, cuda::PinnedBuffer* buffer);
  // The token feed of `batch` (staged at `layout`, its tokens in the area
  // at `step_arrays`) from device_picked_.
  absl::Status LaunchFeeds(const StepBatch& batch, const StagingLayout& layout,
                           cuda::CUdeviceptr step_arrays);
  absl::Status Allocate(size_t bytes, const char* what, cuda::CUdeviceptr* out);
  // Grows a device area a step needs (the staging, the scratch) to at least
  // `bytes`; the previous step has synchronized, so the old one is free.
  absl::Status Grow(size_t bytes, const char* what, cuda::CUdeviceptr* area, size_t* capacity);
  // The KV cache: this rank's layers and KV heads, its blocks sized by
  // RunnerOptions or the device's free memory (less the weights), the
  // fewest of any rank in a partitioned world. `elem`: bytes per element.
  absl::Status AllocateKvCache(int64_t elem);
  absl::Status UploadWeights();
  absl::Status LoadModule();
  absl::Status Launch(const SelectedLaunch& launch, llmc_cuda_step_info* info);
  // The device sampler over the step's logits for `batch.picks` (staged at
  // `layout`), the ids to device_picked_ and the logprobs asked for to
  // device_logprobs_, and both down to the host.
  absl::Status LaunchPicks(const StepBatch& batch, const StagingLayout& layout,
                           const llmc_cuda_step_info& info, StepSlot& slot);
  // The logits rows of `rows` that no pick takes, to slot.logits (the
  // picks' rows ascend).
  absl::Status CopyUnpickedRows(const StepBatch& batch, int64_t rows, StepSlot& slot);
  // Loads cuBLASLt and allocates its operands when options_.gemm asks for it
  // (sets gemm_policy_, or gemm_note_ saying why the generated GEMMs stay).
  absl::Status SetUpGemms();
  // Launches selected_, recording an event before each step entry and after
  // the last; Step reads them after it synchronizes.
  absl::Status LaunchProfiled(llmc_cuda_step_info* info);
  absl::Status ReadProfile();
  // Captures the buckets' graphs (the class comment), dropping any before.
  absl::Status CaptureGraphs();
  // Captures the launches of a decode step of `bucket` sequences (into
  // graph_staging_ and graph_scratch_) and instantiates them.
  absl::Status CaptureGraph(int64_t bucket);
  void DestroyGraph(const Graph& graph);
  void DropGraphs();
  // The graph a decode step of `seqs` sequences replays (null: none).
  const Graph* GraphFor(int64_t seqs) const;
  // A graph step's upload: its step arrays to graph_staging_, the block
  // tables' rows and columns in use by one pitched copy, the sampler's and
  // the feed's inputs to staging_ at their offsets.
  absl::Status UploadGraphStep(const StepBatch& batch, const StagingLayout& layout,
                               const int32_t* staged);
  // Tensor parallelism: joins the NCCL communicator and allocates what the
  // collectives need.
  absl::Status SetUpCollectives();
  // Enqueues the collective of step entry `step` over the step's rows.
  absl::Status RunCollective(size_t step, const llmc_cuda_step_info& info);
  // A pipeline stage's send or receive of the step's token rows.
  absl::Status RunTransfer(const CudaTransfer& t, const llmc_cuda_step_info& info);
  // Polls the stream until the step's work is done, NCCL's asynchronous
  // error and the deadline checked between polls.
  absl::Status WaitForCollectives(bool graph);
  // What has not finished, for an error: the first collective whose event
  // is pending when `events_recorded` (graph steps record none), else "one
  // of the step's collectives (CUDA steps ...)".
  std::string PendingCollectives(bool events_recorded) const;
  // A collective failed: aborts the communicator, ends the world (a peer
  // would wait for this rank forever) and returns `status` where it goes on.
  absl::Status CollectiveFailed(const absl::Status& status);

  struct Graph {
    int64_t bucket = 0;  // the decode batch size it runs (padded to)
    llmc_cuda_step_info info{};
    std::vector<SelectedLaunch> launches;
    cuda::CUgraph graph = nullptr;
    cuda::CUgraphExec exec = nullptr;
    size_t bytes = 0;  // device memory its instantiation took (cuMemGetInfo's drop)
  };

  // Declared first: destroyed last, after the module and memory that need it.
  std::unique_ptr<cuda::CudaDevice> device_;
  const Artifact* artifact_ = nullptr;
  RunnerOptions options_;
  std::string target_;
  int64_t vocab_ = 0;
  int64_t kv_cache_bytes_ = 0;
  std::unique_ptr<cuda::Module> module_;
  std::vector<cuda::CUdeviceptr> allocations_;  // freed by the destructor
  CudaBindings bindings_;
  std::vector<std::vector<ParsedLaunch>> parsed_;         // per cuda kernel, per launch
  std::vector<std::vector<cuda::CUfunction>> functions_;  // likewise
  std::vector<llmc_cuda_args> args_;                      // per cuda step, packed at load
  // The steps in flight's slots (the second used only when steps overlap)
  // and the steps submitted and not yet collected, oldest first.
  std::array<StepSlot, 2> slots_;
  size_t next_slot_ = 0;
  std::deque<Submitted> submitted_;
  // The picks of the step submitted last, which a step's feeds index.
  int64_t last_picks_ = 0;
  // The step's staging device area (the host copy is its slot's: page-
  // locked, so that its upload is one asynchronous copy), grown when a
  // batch needs more.
  cuda::CUdeviceptr staging_ = 0;
  size_t staging_bytes_ = 0;
  size_t scratch_bytes_ = 0;  // of bindings_.scratch
  std::vector<SelectedLaunch> selected_;
  std::vector<SelectedLaunch> selected_scratch_;  // ApplyGemmPolicy's, reused
  // With options_.cuda_graphs: the buckets' graphs, ascending (destroyed
  // before the device), the areas they read, the longest context a
  // sequence may reach (their splits) and its block tables' width.
  std::vector<Graph> graphs_;
  cuda::CUdeviceptr graph_staging_ = 0;
  cuda::CUdeviceptr graph_scratch_ = 0;
  int64_t graph_context_ = 0;
  int64_t graph_columns_ = 0;
  bool graph_step_ = false;  // the step enqueued last replayed a graph
  // The device sampler (null: the artifact has none) and its picked ids on
  // the device [max_logits] (the slots hold them on the host).
  cuda::CUfunction sampler_ = nullptr;
  int64_t sampler_block_ = 0;
  cuda::CUdeviceptr device_picked_ = 0;
  // The picks' logprobs (llmc_cuda_logprob) on the device: room for
  // max_logits picks of the most logprobs.
  cuda::CUdeviceptr device_logprobs_ = 0;
  // The token feed (null: the artifact has none).
  cuda::CUfunction feeder_ = nullptr;
  int64_t feeder_block_ = 0;
  HostPicks host_picks_;  // the picks made on the host instead
  // cuBLASLt GEMMs.
  std::unique_ptr<cuda::CublasLt> cublaslt_;  // destroyed before the device
  GemmPolicy gemm_policy_;
  std::string gemm_note_;
  std::string gemm_tuning_source_;  // kTuned: the tune file's "measured" or "predicted"
  std::vector<std::array<cuda::CUfunction, 3>> gemm_functions_;  // per kernel: pre, epi, deq
  cuda::CUdeviceptr gemm_workspace_ = 0;
  size_t gemm_workspace_bytes_ = 0;
  // Profiling.
  std::vector<cuda::CUevent> events_;
  std::vector<size_t> event_kernels_;  // the kernel of the entry each event opens
  std::vector<double> kernel_ms_;
  // Tensor parallelism (null / empty otherwise).
  std::unique_ptr<NcclComm> nccl_;  // destroyed before the device, after a synchronize
  std::vector<CudaCollective> collectives_;
  std::vector<int> collective_of_step_;            // per cuda step: into collectives_, or -1
  std::vector<cuda::CUdeviceptr> gather_scratch_;  // per collective (all-gathers only)
  std::vector<cuda::CUevent> collective_events_;   // per collective: recorded after it
  double collective_timeout_s_ = 30;
  // Pipeline stages (empty otherwise).
  std::vector<CudaTransfer> transfers_;
  std::vector<int> transfer_of_step_;  // per cuda step: into transfers_, or -1
  cuda::PinnedBuffer transfer_host_;  // the rows on their way through (page-locked) host memory
  bool capturing_ = false;             // a graph capture is under way (no events recorded)
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_CUDA_RUNNER_H_
