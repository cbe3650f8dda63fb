// `llmc run`, `serve`, `bench`, `tune`, `perplexity`, `logits` and `inspect`: the subcommands that
// execute or read a compiled artifact.
#ifndef LLMC_RUNTIME_CLI_RUN_COMMAND_H_
#define LLMC_RUNTIME_CLI_RUN_COMMAND_H_

namespace llmc::cli {

inline constexpr const char* kRunSummary =
    "Generate text from a compiled artifact, streaming tokens as they come.";
inline constexpr const char* kPerplexitySummary =
    "Compute perplexity over a text file the way llama.cpp's perplexity tool does.";
inline constexpr const char* kInspectSummary =
    "Show an artifact's model config, targets, kernels, buffers and weights.";

inline constexpr const char* kLogitsSummary =
    "Write teacher-forced logits of a token sequence, for comparison with a reference.";

inline constexpr const char* kBenchSummary =
    "Measure prefill and decode tokens/s of an artifact as llama-bench does, or (--serving) the "
    "serving engine under load: throughput, TTFT, inter-token latency.";

inline constexpr const char* kServeSummary =
    "Serve an artifact over an OpenAI-compatible HTTP API (continuous batching, SSE streaming, "
    "Prometheus metrics, a chat page).";

inline constexpr const char* kTuneSummary =
    "Time (or, with --predict, model) each GEMM of a CUDA artifact as generated and through "
    "cuBLASLt; write the faster choice.";

int RunRunCommand(int argc, char** argv);
int RunServeCommand(int argc, char** argv);
int RunTuneCommand(int argc, char** argv);
int RunBenchCommand(int argc, char** argv);
int RunLogitsCommand(int argc, char** argv);
int RunPerplexityCommand(int argc, char** argv);
int RunInspectCommand(int argc, char** argv);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_RUN_COMMAND_H_
