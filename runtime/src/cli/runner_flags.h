// Flags shared by the subcommands that execute an artifact.
#ifndef LLMC_RUNTIME_CLI_RUNNER_FLAGS_H_
#define LLMC_RUNTIME_CLI_RUNNER_FLAGS_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/cli/flags.h"
#include "llmc/runtime/engine/generator.h"
#include "llmc/runtime/exec/backend.h"

namespace llmc::cli {

struct RunnerFlags {
  int64_t threads = 0;
  int64_t block_size = 16;
  int64_t batch = 512;
  int64_t ctx = 0;
  bool no_verify = false;
  bool cuda_graphs = false;
  int64_t cuda_graph_memory_mib = 256;
  bool pdl = false;
  std::string backend = "auto";
  std::string gemm = "llmc";
  std::string tune_file;

  void Register(FlagSet& flags) {
    flags.AddString("backend", &backend,
                    "auto|host|cuda: where the artifact runs (auto: the GPU when the driver, a "
                    "device and the artifact's kernels for it are there, else the host)");
    flags.AddInt("threads", &threads, "worker threads (0: one per core)", 't');
    flags.AddInt("block-size", &block_size, "tokens per KV-cache block");
    flags.AddInt("batch", &batch, "most tokens per step (prefill chunk)", 'b');
    flags.AddInt("ctx", &ctx, "KV-cache capacity in tokens (0: the model's max_position)", 'c');
    flags.AddBool("no-verify", &no_verify, "skip the weight checksum at load");
    flags.AddBool("cuda-graphs", &cuda_graphs,
                  "CUDA: replay decode steps from CUDA graphs captured at load, one per batch "
                  "size bucket (1, 2, 4, 8, 16, 24, 32, ... 256; the host ignores it)");
    flags.AddInt("cuda-graph-memory", &cuda_graph_memory_mib,
                 "CUDA graphs: MiB of device memory they may take, set aside before the KV cache; "
                 "the smallest buckets past it are not captured");
    flags.AddBool("pdl", &pdl,
                  "CUDA, sm_90+: programmatic dependent launch, each kernel placed while the one "
                  "before it drains (the host ignores it)");
    flags.AddString("gemm", &gemm,
                    "CUDA: llmc|cublaslt|auto: who runs GEMMs with 16-bit activations (quantized "
                    "weights dequantized for cuBLASLt first; auto: as "
                    "`llmc tune` measured on this GPU, from --tune-file)");
    flags.AddString("tune-file", &tune_file, "CUDA: llmc tune's choices (default ARTIFACT/tune.json)");
  }
  // Settles --backend for the artifact at `dir` before it is loaded (call it
  // before Options(), which passes the choice on): 0 to go on, else the exit
  // code, after a message on stderr. A fallback from an artifact with CUDA
  // kernels to the host says why in one line. An unreadable artifact is left
  // to Generator::Create to report (on the host backend).
  int ResolveBackend(const char* self, const std::string& dir) {
    choice_ = BackendChoice{};
    auto requested = ParseBackend(backend);
    if (!requested.ok()) {
      std::fprintf(stderr, "%s: %s\n", self, std::string(requested.status().message()).c_str());
      return kExitUsage;
    }
    if (*requested == Backend::kHost) return 0;
    auto request = ReadBackendRequest(dir, *requested);
    if (!request.ok()) return 0;
    auto choice = ChooseBackend(*request);
    if (!choice.ok()) {
      std::fprintf(stderr, "%s: %s\n", self, std::string(choice.status().message()).c_str());
      return 1;
    }
    if (!choice->note.empty()) std::fprintf(stderr, "%s: %s\n", self, choice->note.c_str());
    choice_ = *std::move(choice);
    return 0;
  }
  // `logits_rows`: most rows of logits one step returns (generation needs 1,
  // scoring needs a whole batch); the logits buffer is sized by it.
  GeneratorOptions Options(int64_t logits_rows = 1) const {
    GeneratorOptions o;
    o.runner.max_logits = logits_rows > 0 ? logits_rows : batch;
    o.runner.threads = int(threads);
    o.runner.block_size = block_size;
    o.runner.max_batch_tokens = batch;
    o.runner.cuda_graphs = cuda_graphs;
    o.runner.cuda_graph_memory = std::max<int64_t>(0, cuda_graph_memory_mib) << 20;
    o.runner.pdl = pdl;
    o.runner.gemm = gemm;
    o.runner.tune_file = tune_file;
    if (ctx > 0) o.runner.num_blocks = (ctx + block_size - 1) / block_size;
    o.verify_checksum = !no_verify;
    o.backend = choice_;
    return o;
  }

 private:
  BackendChoice choice_;  // ResolveBackend's; the host until then
};

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_RUNNER_FLAGS_H_
