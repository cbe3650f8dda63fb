// `llmc tune`'s measurements: for every CUDA kernel whose GEMM cuBLASLt may
// run instead (manifest kernels[i].gemm), the time of its own GEMV/GEMM and
// of cuBLASLt at a few row counts on one device, and the faster of the two.
// Written as JSON (by default ARTIFACT/tune.json) and read back by the CUDA
// runner with --gemm=auto, which follows it only on the device it was
// measured on.
#ifndef LLMC_RUNTIME_EXEC_GEMM_TUNING_H_
#define LLMC_RUNTIME_EXEC_GEMM_TUNING_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/runtime/exec/cuda_step_plan.h"

namespace llmc {

struct GemmTuneEntry {
  int64_t max_rows = 0;     // the measured row count; it covers rows up to it
  bool cublaslt = false;    // the choice: cuBLASLt faster than the generated kernel
  double llmc_us = 0, cublaslt_us = 0;  // per call, averaged over the steps timed
};

struct GemmTuning {
  std::string device;    // the GPU's name
  std::string cublaslt;  // cuBLASLt's version
  // By cuda kernel name, ascending max_rows.
  std::map<std::string, std::vector<GemmTuneEntry>> kernels;
};

// ARTIFACT/tune.json.
std::string DefaultTuneFile(const std::string& artifact_dir);
std::string GemmTuningToJson(const GemmTuning& tuning);
// InvalidArgument "<path>: <field>: ..." for anything malformed.
absl::StatusOr<GemmTuning> ParseGemmTuning(std::string_view text, const std::string& path);
// The policy for `cuda`'s kernels (by name; kernels the tuning lacks keep
// their own GEMM).
GemmPolicy PolicyFromTuning(const ManifestCuda& cuda, const GemmTuning& tuning);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_GEMM_TUNING_H_
