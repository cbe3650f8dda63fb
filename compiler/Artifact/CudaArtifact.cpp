//===- CudaArtifact.cpp - the CUDA part of model.llmc ---------------------===//
#include "CudaArtifact.h"

#include "Artifact/ArtifactFiles.h"
#include "Artifact/EmbeddedFile.h"
#include "Artifact/StepPlan.h"
#include "Target/CUDA/NVRTCCompiler.h"
#include "llmc/core/artifact/cuda_abi.h"
#include "llmc/core/status_macros.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

// The CUDA template library and ABI header, embedded at build time.
#include "EmbeddedCudaKernels.inc"

namespace llmc {

absl::StatusOr<CudaKernelPlan> emitCudaSource(mlir::ModuleOp module,
                                              const CudaEmitOptions &options) {
  mlir::FailureOr<CudaKernelPlan> plan = emitCudaKernels(module, options);
  if (mlir::failed(plan))
    return absl::InvalidArgumentError("CUDA code generation failed (see the diagnostics above)");
  return std::move(*plan);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
compileCudaSource(const std::string &source, const CudaArtifactOptions &options,
                  ManifestCuda *report) {
  absl::StatusOr<cuda::NVRTCCompiler> nvrtc = cuda::NVRTCCompiler::create();
  if (!nvrtc.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        "--target=", options.archs.empty() ? "sm_XX" : options.archs.front(),
        " needs the CUDA toolkit's NVRTC and ptxas, which this machine lacks: ",
        nvrtc.status().message(), " (install the toolkit or set LLMC_CUDA_HOME)"));
  cuda::CompileOptions co;
  co.archs = options.archs;
  for (const EmbeddedFile &f : kCudaKernelFiles)
    co.headers.push_back({f.name, f.text});
  co.use_cache = options.useCache;
  if (options.progress)
    options.progress(absl::StrFormat("compiling CUDA kernels with NVRTC %s for %s",
                                     nvrtc->version(), absl::StrJoin(options.archs, ", ")));
  LLMC_ASSIGN_OR_RETURN(std::vector<cuda::CompiledPtx> compiled,
                        nvrtc->compile(source, "kernels.cu", co));
  std::vector<std::pair<std::string, std::string>> result;
  for (cuda::CompiledPtx &c : compiled) {
    if (report) {
      ManifestCudaModule m;
      m.arch = c.arch;
      m.file = "kernels/" + c.arch + "/kernels.ptx";
      m.checksum = ChecksumHex(reinterpret_cast<const uint8_t *>(c.ptx.data()), c.ptx.size());
      for (const cuda::KernelResources &k : c.report.kernels)
        m.ptxas.push_back({k.name, k.registers, k.spill_stores, k.spill_loads, k.shared_bytes,
                           k.stack_bytes});
      report->modules.push_back(std::move(m));
    }
    result.push_back({c.arch, std::move(c.ptx)});
  }
  return result;
}

absl::Status buildCudaArtifact(mlir::ModuleOp module, const CudaArtifactOptions &options,
                               const std::string &dir, const WeightIndexFn &weightIndex,
                               ManifestCuda &cuda) {
  LLMC_ASSIGN_OR_RETURN(CudaKernelPlan plan, emitCudaSource(module, options.emit));
  std::string src = dir + "/kernels/cuda/src";
  LLMC_RETURN_IF_ERROR(makeArtifactDir(src));
  LLMC_RETURN_IF_ERROR(writeArtifactFile(src + "/kernels.cu", plan.source));
  for (const EmbeddedFile &f : kCudaKernelFiles)
    LLMC_RETURN_IF_ERROR(writeArtifactFile(src + "/" + f.name, f.text));

  cuda = ManifestCuda();
  cuda.activation_dtype = options.emit.activationType;
  cuda.cuda_abi_version = LLMC_CUDA_ABI_VERSION;
  LLMC_ASSIGN_OR_RETURN(auto ptx, compileCudaSource(plan.source, options, &cuda));
  for (const auto &[arch, text] : ptx) {
    LLMC_RETURN_IF_ERROR(makeArtifactDir(dir + "/kernels/" + arch));
    LLMC_RETURN_IF_ERROR(writeArtifactFile(dir + "/kernels/" + arch + "/kernels.ptx", text));
  }
  cuda.kernels = std::move(plan.kernels);
  cuda.samplers = std::move(plan.samplers);
  LLMC_ASSIGN_OR_RETURN(cuda.steps, toManifestSteps(plan.launches, weightIndex));
  return absl::OkStatus();
}

} // namespace llmc
