// `llmc tune`'s choices: for every CUDA kernel whose GEMM cuBLASLt may run
// instead (manifest kernels[i].gemm), the time of its own GEMV/GEMM and of
// the cuBLASLt path at a few row counts on one device, and the faster of the
// two. Either measured on a GPU (`llmc tune`) or predicted by the kernel
// report's performance model for a GPU of its table (`llmc tune --predict`,
// on a machine without one). Written as JSON (by default ARTIFACT/tune.json)
// and read back by the CUDA runner with --gemm=auto, which follows it only
// on the GPU it describes (TuningAppliesTo).
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
  // "measured": `device` is the GPU's name as the driver gives it;
  // "predicted": the performance model's name for it ("H200").
  std::string source = "measured";
  std::string device;
  std::string cublaslt;  // cuBLASLt's version ("" when predicted)
  // By cuda kernel name, ascending max_rows.
  std::map<std::string, std::vector<GemmTuneEntry>> kernels;
};

// ARTIFACT/tune.json.
std::string DefaultTuneFile(const std::string& artifact_dir);
std::string GemmTuningToJson(const GemmTuning& tuning);
// InvalidArgument "<path>: <field>: ..." for anything malformed.
absl::StatusOr<GemmTuning> ParseGemmTuning(std::string_view text, const std::string& path);
// Whether --gemm=auto may follow `tuning` on the GPU the driver names
// `gpu_name`: a measured tuning on that very name; a predicted one on a GPU
// whose name contains the model's family (case-insensitive: "H200" or
// "h200-nvl" on "NVIDIA H200"; "A100-80GB" on "NVIDIA A100-SXM4-80GB").
bool TuningAppliesTo(const GemmTuning& tuning, std::string_view gpu_name);
// The policy for `cuda`'s kernels (by name; kernels the tuning lacks keep
// their own GEMM).
GemmPolicy PolicyFromTuning(const ManifestCuda& cuda, const GemmTuning& tuning);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_GEMM_TUNING_H_
