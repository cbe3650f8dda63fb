// Flags of the commands that run the serving engine (`llmc run
// --prompts-file`, `llmc bench --serving`): the scheduler's limits and the
// KV cache's size. The step's token budget is RunnerFlags' --batch, also
// spelled --max-batch-tokens here.
#ifndef LLMC_RUNTIME_CLI_ENGINE_FLAGS_H_
#define LLMC_RUNTIME_CLI_ENGINE_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "llmc/runtime/cli/flags.h"
#include "llmc/runtime/engine/engine.h"
#include "llmc/runtime/exec/kv_sizing.h"
#include "runner_flags.h"

namespace llmc::cli {

struct EngineFlags {
  int64_t max_seqs = 64;
  int64_t long_prefill_token_threshold = 0;
  bool prefix_cache = true;
  std::string kv_cache_size;
  int64_t kv_blocks = 0;
  double gpu_memory_fraction = 0.9;
  int64_t steps_in_flight = 0;
  bool device_sampling = true;
  bool async_scheduling = true;

  void Register(FlagSet& flags, RunnerFlags& runner) {
    flags.AddInt("max-batch-tokens", &runner.batch,
                 "most tokens per step, all requests together (same as --batch)");
    flags.AddInt("max-seqs", &max_seqs, "most requests per step and running at once");
    flags.AddInt("long-prefill-token-threshold", &long_prefill_token_threshold,
                 "most prompt tokens of one request per step (0: what the budget leaves); a "
                 "small one bounds how much a long prompt slows the running decodes");
    flags.AddBool("prefix-cache", &prefix_cache,
                  "reuse the KV cache of equal prompt prefixes (--no-prefix-cache: off)");
    flags.AddString("kv-cache-size", &kv_cache_size,
                    "KV-cache size in bytes, e.g. 2GiB (default: the host the model's context; a "
                    "GPU --gpu-memory-fraction of its free memory)");
    flags.AddInt("kv-blocks", &kv_blocks, "KV-cache size in blocks (instead of --kv-cache-size)");
    flags.AddDouble("gpu-memory-fraction", &gpu_memory_fraction,
                    "CUDA: fraction of the free device memory the KV cache takes by default");
    flags.AddInt("steps-in-flight", &steps_in_flight,
                 "most engine steps in flight at once (0: as many as the runner takes, one per "
                 "pipeline stage; 1: one at a time)");
    flags.AddBool("device-sampling", &device_sampling,
                  "the runner picks the tokens (and logprobs) of requests, penalties included "
                  "(greedy, or top-p with a top-k; a GPU on the device: only ids and logprobs "
                  "leave it); "
                  "--no-device-sampling samples every token on the host from its copied logits");
    flags.AddBool("async-scheduling", &async_scheduling,
                  "schedule each step while the one before runs, its requests going on from "
                  "the tokens it picks on the device (a GPU runner with the artifact's token "
                  "feed; --no-async-scheduling: one step at a time)");
  }

  // Checks the values and fills the KV-cache size into `load`.
  absl::Status Apply(LoadOptions& load, EngineOptions& engine) const {
    if (max_seqs < 1)
      return absl::InvalidArgumentError(
          absl::StrFormat("flag --max-seqs must be >= 1, got %d", max_seqs));
    if (long_prefill_token_threshold < 0 || long_prefill_token_threshold > (1 << 30))
      return absl::InvalidArgumentError(
          absl::StrFormat("flag --long-prefill-token-threshold must be in [0, 2^30], got %d",
                          long_prefill_token_threshold));
    if (kv_blocks < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("flag --kv-blocks must be >= 0, got %d", kv_blocks));
    if (steps_in_flight < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("flag --steps-in-flight must be >= 0, got %d", steps_in_flight));
    engine.max_steps_in_flight = int32_t(steps_in_flight);
    if (!(gpu_memory_fraction > 0 && gpu_memory_fraction <= 1))
      return absl::InvalidArgumentError(absl::StrFormat(
          "flag --gpu-memory-fraction must be in (0, 1], got %g", gpu_memory_fraction));
    if (!kv_cache_size.empty() && kv_blocks > 0)
      return absl::InvalidArgumentError("give --kv-cache-size or --kv-blocks, not both");
    if (!kv_cache_size.empty()) {
      auto bytes = ParseByteSize("kv-cache-size", kv_cache_size);
      if (!bytes.ok()) return bytes.status();
      load.runner.kv_cache_bytes = *bytes;
      load.runner.num_blocks = 0;
    }
    if (kv_blocks > 0) load.runner.num_blocks = kv_blocks;
    load.runner.kv_memory_fraction = gpu_memory_fraction;
    // Each request of a step may want its logits.
    load.runner.max_logits = std::min<int64_t>(max_seqs, load.runner.max_batch_tokens);
    engine.max_seqs = int32_t(max_seqs);
    engine.long_prefill_token_threshold = int32_t(long_prefill_token_threshold);
    engine.enable_prefix_caching = prefix_cache;
    engine.runner_picks = device_sampling;
    engine.async_scheduling = async_scheduling;
    return absl::OkStatus();
  }
};

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_ENGINE_FLAGS_H_
