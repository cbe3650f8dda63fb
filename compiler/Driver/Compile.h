//===- Compile.h - llmc compile as a library call ---------------*- C++ -*-===//
//
// What `llmc compile` does, callable and testable without a command line:
// CompileOptions says what to compile and what to produce,
// checkCompileOptions() finds what is wrong with them (each error names the
// flag), compile() runs the frontend, the pass pipeline and the code
// generators and returns the text asked for or writes the artifact.
//
// The command (CompileCommand.cpp) only turns flags into CompileOptions; the
// checks of pass options come from the passes (checkQuantizeOptions) and the
// dummy-weight formats from the weight-format table.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_DRIVER_COMPILE_H
#define LLMC_COMPILER_DRIVER_COMPILE_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace llmc {

enum class EmitKind {
  kMLIR,     // the llm-dialect IR after import cleanup (and partitioning)
  kKernels,  // the IR after the whole pipeline: fusion groups, buffer plan
  kCUDA,     // generated CUDA C++
  kPTX,      // PTX from NVRTC, per CUDA target
  kArtifact, // a deployable artifact directory
};

struct CompileOptions {
  // The model: a Hugging Face folder or a .gguf file, or a built-in shape
  // (exactly one of the two).
  std::string model;
  std::string builtin;
  EmitKind emit = EmitKind::kArtifact;
  // Where an artifact goes (required for kArtifact); the other kinds return
  // their text and let the caller write it.
  std::string output;
  // Activation type: of the CUDA kernels when a CUDA target is given (bf16
  // when unset), of the IR otherwise (f32 when unset).
  std::optional<std::string> dtype;
  // "host" and/or "sm_XX" (XX >= 80); artifacts always hold host kernels.
  std::vector<std::string> targets = {"host"};
  // Host kernels: -march, compiler, extra flags, build cache, activations of
  // GEMMs over 32-element block formats ("q8" or "f32").
  std::string hostCpu = "x86-64-v3";
  std::string hostCompiler = "c++";
  std::vector<std::string> hostCflags;
  bool useCache = true;
  std::string hostActivations = "q8";
  // The pass pipeline.
  bool fuse = true;
  // The CUDA decode GEMV: "auto" (llmc-select-gemv picks) or "fp".
  std::string gemv = "auto";
  std::string quantize = "none";
  std::optional<int64_t> quantizeGroup;            // 128 when unset
  std::optional<std::vector<std::string>> quantizeSkip;
  // Partitioning: tensor-parallel ranks, pipeline stages, and optionally
  // each stage's layers ("0-11", "12-23"). With pp > 1 every stage is
  // compiled; --emit=mlir|kernels print them one after the other.
  int64_t tp = 1;
  int64_t pp = 1;
  std::vector<std::string> ppLayers;
  // IR dumps to stderr after the named passes, or after every pass.
  std::vector<std::string> printIrAfter;
  bool printIrAfterAll = false;
  // With a built-in shape: an artifact without weights whose matrices the
  // runtime generates at load in this format (for timing).
  std::optional<std::string> dummyWeights;
  // Progress lines ("building host kernels", ...), for a terminal.
  std::function<void(const std::string &)> progress;
};

// What a compile produced: the text of --emit=mlir|kernels|cuda|ptx (empty
// for an artifact, which is on disk at options.output).
struct CompileResult {
  std::string text;
};

// The first problem with `options` as an InvalidArgumentError whose message
// names the flag ("--quantize-group must be 32, 64 or 128, got 100"); OK when
// compile() may run. A usage error: nothing has been read or written.
absl::Status checkCompileOptions(const CompileOptions &options);

// Checks the options, imports the model, runs the pipeline and produces what
// options.emit asks for. Usage problems come back as by checkCompileOptions;
// any other error (an unreadable model, a failed pass, a host compiler
// error) names its cause, and MLIR diagnostics have gone to stderr. An
// artifact is written whole or not at all.
absl::StatusOr<CompileResult> compile(const CompileOptions &options);

} // namespace llmc

#endif // LLMC_COMPILER_DRIVER_COMPILE_H
