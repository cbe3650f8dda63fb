// `llmc bench --serving` (bench_serving.cc): the serving engine under load.
#ifndef LLMC_RUNTIME_CLI_BENCH_SERVING_H_
#define LLMC_RUNTIME_CLI_BENCH_SERVING_H_

#include <string>

namespace llmc::cli {

// Whether argv asks for the serving benchmark (--serving).
bool WantsServingBench(int argc, char** argv);
int RunServingBench(int argc, char** argv);
// The --serving flags' usage (the serving benchmark's own and the engine's),
// which `llmc bench --help` prints after its own.
std::string ServingBenchUsage(const char* argv0);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_BENCH_SERVING_H_
