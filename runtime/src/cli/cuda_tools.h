// The CUDA toolkit's command-line tools that `llmc inspect --kernels` runs
// to read an artifact's SASS: ptxas (PTX -> cubin) and cuobjdump or nvdisasm
// (cubin -> SASS text). Tuning and test tools, never runtime dependencies:
// a missing one is reported (with how to install it), not fatal.
//
// Processes start with posix_spawn and an argument vector (no shell), so
// paths with spaces or quotes are safe. Internal to cli/.
#ifndef LLMC_RUNTIME_CLI_CUDA_TOOLS_H_
#define LLMC_RUNTIME_CLI_CUDA_TOOLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llmc::cli {

// Where the tools are. An empty path: missing, and `*_missing` says what was
// searched and how to install it.
struct CudaTools {
  // $LLMC_PTXAS, else bin/ptxas of the toolkit root the compiler uses (the
  // first of $LLMC_CUDA_HOME, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda that
  // exists), else ptxas on PATH.
  std::string ptxas, ptxas_missing;
  // $LLMC_CUOBJDUMP when set (then nothing else: the test of a missing
  // disassembler sets it to a path that does not exist); else cuobjdump,
  // then nvdisasm, each on PATH, in the toolkit's bin/, then in a pip
  // package's bin/ (site-packages/nvidia/*/bin, from
  // `pip install nvidia-cuda-cuobjdump`).
  std::string disassembler, disassembler_missing;
  bool nvdisasm = false;  // `disassembler` is nvdisasm (its -c text), not cuobjdump
};
CudaTools FindCudaTools();

struct ProcessOutput {
  int exit_code = 0;  // the exit status; 128 + N when killed by signal N
  std::string out, err;
};
// Runs argv[0] (a path) with `argv`, stdin from /dev/null; waits for it and
// collects its stdout and stderr. An error only when it cannot start.
absl::StatusOr<ProcessOutput> RunProcess(const std::vector<std::string>& argv);

// The SASS text of the PTX module at `ptx_path` for `arch` ("sm_90"):
// `ptxas -arch=ARCH -O3` into a temporary folder (removed after), then
// `cuobjdump -sass` (or `nvdisasm -c`) of the cubin. FailedPrecondition when
// a tool is missing (its *_missing message); Internal with the tool's
// message when it fails.
absl::StatusOr<std::string> DisassemblePtx(const CudaTools& tools, const std::string& ptx_path,
                                           const std::string& arch);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_CUDA_TOOLS_H_
