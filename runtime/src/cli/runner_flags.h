// Flags shared by the subcommands that execute an artifact.
#ifndef LLMC_RUNTIME_CLI_RUNNER_FLAGS_H_
#define LLMC_RUNTIME_CLI_RUNNER_FLAGS_H_

#include <cstdint>

#include "llmc/runtime/cli/flags.h"
#include "llmc/runtime/engine/generator.h"

namespace llmc::cli {

struct RunnerFlags {
  int64_t threads = 0;
  int64_t block_size = 16;
  int64_t batch = 512;
  int64_t ctx = 0;
  bool no_verify = false;

  void Register(FlagSet& flags) {
    flags.AddInt("threads", &threads, "worker threads (0: one per core)", 't');
    flags.AddInt("block-size", &block_size, "tokens per KV-cache block");
    flags.AddInt("batch", &batch, "most tokens per step (prefill chunk)", 'b');
    flags.AddInt("ctx", &ctx, "KV-cache capacity in tokens (0: the model's max_position)", 'c');
    flags.AddBool("no-verify", &no_verify, "skip the weight checksum at load");
  }
  // `logits_rows`: most rows of logits one step returns (generation needs 1,
  // scoring needs a whole batch); the logits buffer is sized by it.
  GeneratorOptions Options(int64_t logits_rows = 1) const {
    GeneratorOptions o;
    o.runner.max_logits = logits_rows > 0 ? logits_rows : batch;
    o.runner.threads = int(threads);
    o.runner.block_size = block_size;
    o.runner.max_batch_tokens = batch;
    if (ctx > 0) o.runner.num_blocks = (ctx + block_size - 1) / block_size;
    o.verify_checksum = !no_verify;
    return o;
  }
};

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_RUNNER_FLAGS_H_
