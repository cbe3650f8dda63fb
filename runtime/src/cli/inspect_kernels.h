// `llmc inspect ARTIFACT --kernels`: per CUDA kernel launch, what ptxas and
// the SASS say about it (registers, occupancy, access widths, the hot loop)
// and, at the step shapes asked for, its work (the emitter's cost forms in
// the manifest) and the time the performance model (kernel_model.h)
// predicts, then the step's total against the weights' copy time.
//
// The numbers come from the manifest, ptxas and cuobjdump only: a launch
// without a cost model says so instead of getting made-up numbers, and a
// missing tool is named (with how to install it) while the rest still
// prints. Internal to cli/.
#ifndef LLMC_RUNTIME_CLI_INSPECT_KERNELS_H_
#define LLMC_RUNTIME_CLI_INSPECT_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llmc/core/artifact/cuda_cost.h"
#include "llmc/core/artifact/cuda_launch_expr.h"
#include "llmc/runtime/artifact/artifact.h"

namespace llmc::cli {

// A step shape the report evaluates: the cost forms' variables, the launch
// variables (which launches run, their grids) and the longest context (the
// attention splits).
struct ReportShape {
  std::string name;  // "decode 1x512", "prefill 128"
  CostShape cost;
  LaunchVars vars;
  int64_t max_context = 0;
  // A decode step's attention splits are cut as its batch-size bucket's
  // (SelectLaunches' fill_rows, CudaGraphBucketOf), as the runner does; 0
  // for a prefill.
  int64_t fill_rows = 0;
};
// Decode of `batch` sequences at context `context` (every sequence one token).
ReportShape DecodeShape(int64_t batch, int64_t context);
// Prefill of `tokens` tokens of one sequence from position 0.
ReportShape PrefillShape(int64_t tokens);
// The flags' spellings: --decode=B,C and --prefill=T (InvalidArgument
// naming the flag when malformed or not positive).
absl::StatusOr<ReportShape> ParseDecodeFlag(absl::string_view text);
absl::StatusOr<ReportShape> ParsePrefillFlag(int64_t tokens);

struct KernelReportOptions {
  std::vector<ReportShape> shapes;
  // A device of the model's table (kernel_model.h: "sm_90", "h200", ...);
  // "": the one of the artifact's first CUDA arch.
  std::string device;
  bool json = false;
};

// The report as text (lines under ~110 columns) or JSON. InvalidArgument for
// an artifact without CUDA modules or an unknown device; a missing tool or a
// failing disassembly is part of the report, not an error.
absl::StatusOr<std::string> KernelReport(const Artifact& artifact, const KernelReportOptions& options);

// What `llmc tune --predict` writes: per GEMM kernel that cuBLASLt may run
// (manifest gemm), at each shape, the model's time per use of its own
// launches and of the cuBLASLt path (dequantization, operand, matmul,
// epilogue) that --gemm=cublaslt runs in their place.
struct PredictedGemm {
  std::string kernel;  // the cuda kernel's name
  int64_t rows = 0;    // the GEMM's rows at the shape
  double own_s = 0, cublaslt_s = 0;
};
struct PredictedGemms {
  std::string device;  // the model table's name, e.g. "H200"
  std::vector<std::vector<PredictedGemm>> by_shape;
};
// InvalidArgument as KernelReport, and for a shape the plan cannot run.
absl::StatusOr<PredictedGemms> PredictGemms(const Artifact& artifact, const std::string& device,
                                            const std::vector<ReportShape>& shapes);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_INSPECT_KERNELS_H_
