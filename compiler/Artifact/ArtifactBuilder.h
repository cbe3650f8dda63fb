//===- ArtifactBuilder.h - write model.llmc -------------------*- C++ -*-===//
//
// Writes the artifact of a compiled model (runtime/include/llmc/runtime/
// artifact/manifest.h describes the layout): the generated kernels and the
// shared object built from them, the weights packed in the order the step
// plan binds them, the tokenizer and the manifest. Everything is written into
// a temporary directory that replaces the destination only when complete.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_ARTIFACT_ARTIFACTBUILDER_H
#define LLMC_COMPILER_ARTIFACT_ARTIFACTBUILDER_H

#include "Frontend/ModelImporter.h"

#include "absl/status/status.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace llmc {

struct ArtifactOptions {
  std::string output;                 // the model.llmc directory
  std::string hostCpu = "x86-64-v3";  // -march for the host kernels ("native" allowed)
  std::string hostCompiler = "c++";
  // Extra flags for the host compiler, after llmc's own (e.g. sanitizers
  // for checking the generated kernels: see scripts/check-sanitize).
  std::vector<std::string> hostCflags;
  bool useCache = true;               // reuse identical builds from ~/.cache/llmc/host
  bool q8Activations = true;          // HostEmitOptions::q8Activations
  // CUDA targets ("sm_80", ...) built besides the host kernels (which every
  // artifact has: the fallback where no GPU is), and their activation type.
  std::vector<std::string> cudaArchs;
  std::string cudaActivations = "bf16";
  // Progress messages ("building host kernels", ...), for the terminal.
  std::function<void(const std::string &)> progress;
};

// `module` must have gone through the whole compile pipeline.
absl::Status buildArtifact(mlir::ModuleOp module, const ImportedModel &model,
                           const ArtifactOptions &options);

} // namespace llmc

#endif // LLMC_COMPILER_ARTIFACT_ARTIFACTBUILDER_H
