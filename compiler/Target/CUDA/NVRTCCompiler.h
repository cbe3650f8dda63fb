//===- NVRTCCompiler.h - CUDA C++ -> PTX with NVRTC, checked by ptxas -*- C++ -*-===//
//
// The CUDA target's back end: compiles one generated source for each
// requested sm_XX with NVRTC (libnvrtc is dlopen'd, so llmc builds and runs
// where the toolkit is absent and says so when asked for PTX), then runs
// `ptxas -arch=sm_XX -v` over the PTX and parses its report per kernel
// (registers, spills, shared memory, stack) for the artifact and
// `llmc inspect`. PTX of identical inputs (source, headers, options, NVRTC
// version, arch) is cached under ~/.cache/llmc/cuda/<sha256>.ptx.
//
// Needs no GPU and no CUDA header at build time.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_CUDA_NVRTCCOMPILER_H
#define LLMC_COMPILER_TARGET_CUDA_NVRTCCOMPILER_H

#include "absl/status/statusor.h"

#include <string>
#include <utility>
#include <vector>

namespace llmc::cuda {

// ptxas -v's numbers for one entry function.
struct KernelResources {
  std::string name;
  int registers = 0;
  int spill_stores = 0; // bytes
  int spill_loads = 0;  // bytes
  int shared_bytes = 0; // static shared memory
  int stack_bytes = 0;  // stack frame
  int const_bytes = 0;  // cmem[0] (parameters)
  bool hasSpills() const { return spill_stores != 0 || spill_loads != 0; }
};

struct PtxasReport {
  std::string arch; // "sm_80"
  std::vector<KernelResources> kernels;
  std::string log; // ptxas's full output
  const KernelResources *find(const std::string &name) const;
};

struct CompiledPtx {
  std::string arch; // "sm_80"
  std::string ptx;
  bool from_cache = false;
  PtxasReport report; // empty kernels when ptxas was not run
};

struct CompileOptions {
  std::vector<std::string> archs = {"sm_80"};
  // Headers given by name and contents (the compiler embeds its kernel library).
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> include_paths; // in addition to <toolkit>/include
  std::vector<std::string> extra_flags;   // e.g. "-DFOO=1"
  bool run_ptxas = true;
  bool use_cache = true;
  std::string cache_dir; // empty: $LLMC_CACHE_DIR/cuda, else $XDG_CACHE_HOME or ~/.cache, /llmc/cuda
};

// Where the CUDA toolkit is: $LLMC_CUDA_HOME, $CUDA_HOME, $CUDA_PATH, the
// toolkit CMake found at build time, /usr/local/cuda. Empty if none exists.
std::string toolkitRoot();

class NVRTCCompiler {
public:
  // Loads libnvrtc ($LLMC_NVRTC alone if set, else <toolkit>/lib64, then the
  // loader path) and
  // finds ptxas. Fails with a message naming what is missing.
  static absl::StatusOr<NVRTCCompiler> create();

  // "13.0"
  std::string version() const;
  const std::string &ptxasPath() const { return ptxas; }

  // One CompiledPtx per arch, in order. Errors carry the NVRTC log or
  // ptxas's output.
  absl::StatusOr<std::vector<CompiledPtx>> compile(const std::string &source,
                                                   const std::string &name,
                                                   const CompileOptions &options) const;

  // Runs ptxas -v over `ptx` for `arch` and parses its report.
  absl::StatusOr<PtxasReport> runPtxas(const std::string &ptx, const std::string &arch) const;

private:
  NVRTCCompiler() = default;
  absl::StatusOr<std::string> compileOne(const std::string &source, const std::string &name,
                                         const std::string &arch,
                                         const CompileOptions &options) const;
  void *lib = nullptr;
  int major = 0, minor = 0;
  std::string ptxas;
  std::string root;
};

// Parses `ptxas -v` output (exposed for tests).
PtxasReport parsePtxasReport(const std::string &log, const std::string &arch);

// A table of the report, one line per kernel.
std::string formatReport(const PtxasReport &report);

} // namespace llmc::cuda

#endif // LLMC_COMPILER_TARGET_CUDA_NVRTCCOMPILER_H
