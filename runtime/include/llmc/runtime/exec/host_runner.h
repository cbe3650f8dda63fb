// Executes an artifact's step plan on the host: the kernels of the host
// shared object, in the manifest's order, over activation buffers sized for
// the largest batch and a KV cache held in host memory. A tensor-parallel
// artifact runs as one rank of its group (RunnerOptions::communicator): this
// rank's weights and KV heads, and the plan's collectives between kernels.
#ifndef LLMC_RUNTIME_EXEC_HOST_RUNNER_H_
#define LLMC_RUNTIME_EXEC_HOST_RUNNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/host_abi.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/exec/host_collective.h"
#include "llmc/runtime/exec/step_batch.h"
#include "llmc/runtime/exec/step_runner.h"
#include "llmc/runtime/host/thread_pool.h"

namespace llmc {

class HostRunner : public StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<HostRunner>> Create(const Artifact& artifact,
                                                            const RunnerOptions& options);
  ~HostRunner() override;

  // Runs @step once; the picks are made from the host logits.
  absl::StatusOr<StepOutput> Step(StepAccess key, const StepBatch& batch) override;

  int64_t block_size() const override { return options_.block_size; }
  int64_t num_blocks() const override { return options_.num_blocks; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_batch_tokens() const override { return options_.max_batch_tokens; }
  int64_t max_logits() const override { return options_.max_logits; }
  int threads() const override { return pool_->size(); }
  std::string ExecutionSummary() const override;
  // Bytes of the KV cache (all layers, K and V).
  int64_t kv_cache_bytes() const override;

 private:
  HostRunner() = default;
  absl::Status Validate(const StepBatch& batch) const;

  const Artifact* artifact_ = nullptr;
  RunnerOptions options_;
  int64_t vocab_ = 0;
  void* library_ = nullptr;  // dlopen handle
  std::unique_ptr<ThreadPool> pool_;
  std::vector<llmc_host_kernel_fn> kernels_;  // per manifest kernel
  std::vector<std::vector<float>> buffers_;   // per manifest buffer (f32 activations)
  // 2 per layer: K, V. Anonymous mappings, so blocks never written take no
  // memory: the cache is sized for the whole context but only the blocks a
  // sequence reaches become resident.
  struct CacheRegion {
    float* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<CacheRegion> caches_;
  HostPicks host_picks_;  // the last step's picks
  // Per step entry, the pointer arrays its launch passes (rebuilt once), or
  // the collective it runs (a tensor-parallel plan).
  struct Launch {
    llmc_host_kernel_fn fn = nullptr;
    std::vector<void*> buffers;
    std::vector<const void*> weights;
    std::vector<void*> caches;
    std::optional<HostCollective> collective;
  };
  std::vector<Launch> launches_;
  std::vector<float> gather_scratch_;  // all-gathers' rank-major rows
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_HOST_RUNNER_H_
