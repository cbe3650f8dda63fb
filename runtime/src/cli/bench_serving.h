// `llmc bench --serving` (bench_serving.cc): the serving engine under load.
#ifndef LLMC_RUNTIME_CLI_BENCH_SERVING_H_
#define LLMC_RUNTIME_CLI_BENCH_SERVING_H_

namespace llmc::cli {

// Whether argv asks for the serving benchmark (--serving).
bool WantsServingBench(int argc, char** argv);
int RunServingBench(int argc, char** argv);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_BENCH_SERVING_H_
