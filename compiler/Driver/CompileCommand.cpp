//===- CompileCommand.cpp - `llmc compile` --------------------------------===//
//
// The command line of `llmc compile`: flags in, CompileOptions out, then the
// library call (Driver/Compile.h) does the work. Each stage can be shown:
// --emit picks where to stop, --print-ir-after(-all) dumps the IR.
//
//===----------------------------------------------------------------------===//
#include "CompileCommand.h"

#include "Driver/Compile.h"
#include "Frontend/BuiltinModels.h"
#include "llmc/core/exit_codes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

namespace cl = llvm::cl;

namespace llmc {
namespace {

// Parses argv into `options`. Returns an exit code when the command is done
// (--list-builtins), or -1 to go on.
int parseFlags(int argc, char **argv, CompileOptions &options) {
  static cl::OptionCategory category("llmc compile options");
  static cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL: Hugging Face folder or .gguf]"),
                                    cl::init(""), cl::cat(category));
  static cl::opt<std::string> builtin(
      "builtin", cl::desc("compile a built-in synthetic model instead of MODEL (see --list-builtins)"),
      cl::value_desc("name"), cl::init(""), cl::cat(category));
  static cl::opt<bool> listBuiltins("list-builtins", cl::desc("list the built-in models and exit"),
                                    cl::cat(category));
  static cl::opt<EmitKind> emit(
      "emit", cl::desc("what to produce"), cl::init(EmitKind::kArtifact),
      cl::values(clEnumValN(EmitKind::kMLIR, "mlir", "the llm-dialect IR after the pipeline"),
                 clEnumValN(EmitKind::kKernels, "kernels", "the fusion groups"),
                 clEnumValN(EmitKind::kCUDA, "cuda", "generated CUDA C++"),
                 clEnumValN(EmitKind::kPTX, "ptx", "PTX from NVRTC"),
                 clEnumValN(EmitKind::kArtifact, "artifact", "a deployable artifact directory")),
      cl::cat(category));
  static cl::opt<std::string> output("o", cl::desc("output file or artifact directory"),
                                     cl::value_desc("path"), cl::init("-"), cl::cat(category));
  static cl::opt<std::string> dtype(
      "dtype",
      cl::desc("activation type: f32, f16 or bf16 (of the CUDA kernels with --target=sm_XX, "
               "default bf16; of the IR otherwise, default f32; host kernels compute in f32)"),
      cl::init("f32"), cl::cat(category));
  static cl::opt<std::string> target(
      "target",
      cl::desc("comma-separated targets: host, sm_80, sm_90, ..., or sm_90a (H100/H200: the "
               "GEMMs on wgmma); artifacts always hold the host kernels, the fallback where no "
               "GPU is"),
      cl::init("host"), cl::cat(category));
  static cl::opt<std::string> hostCpu(
      "host-cpu", cl::desc("-march for the host kernels: x86-64-v3 (AVX2/FMA), native, ..."),
      cl::init("x86-64-v3"), cl::cat(category));
  static cl::opt<std::string> hostCompiler("host-compiler",
                                           cl::desc("C++ compiler that builds the host kernels"),
                                           cl::init("c++"), cl::cat(category));
  static cl::list<std::string> hostCflags(
      "host-cflags", cl::desc("extra flags for the host compiler (space-separated)"),
      cl::value_desc("flags"), cl::cat(category));
  static cl::opt<bool> noCache("no-cache", cl::desc("rebuild host kernels even if cached"),
                               cl::cat(category));
  static cl::opt<bool> printAfterAll("print-ir-after-all",
                                     cl::desc("print the IR after every pass (to stderr)"),
                                     cl::cat(category));
  static cl::opt<std::string> hostActivations(
      "host-activations",
      cl::desc("activations of host GEMMs over q4_0/q4_1/q5_0/q5_1/q8_0 weights: q8 (int8 "
               "blocks and integer dot products, like llama.cpp's CPU backend) or f32 (exact)"),
      cl::init("q8"), cl::cat(category));
  static cl::list<std::string> printAfter(
      "print-ir-after", cl::desc("print the IR after the named passes (to stderr), e.g. llmc-fuse"),
      cl::value_desc("pass,..."), cl::CommaSeparated, cl::cat(category));
  static cl::opt<std::string> gemv(
      "gemv",
      cl::desc("CUDA decode GEMV: auto (int8 dot products for GGUF blocks where they apply) or fp "
               "(weights decoded to float); shown by --emit=kernels as llmc.gemv"),
      cl::init("auto"), cl::cat(category));
  static cl::opt<bool> noFuse("no-fuse",
                              cl::desc("skip the fuse pass: one kernel per op (the baseline)"),
                              cl::cat(category));
  // Weight-only quantization, named as vLLM/TensorRT-LLM name it (w4a16 =
  // 4-bit weights, 16-bit-or-wider activations); see the quantize pass.
  static cl::opt<std::string> quantize(
      "quantize", cl::desc("weight quantization of float weights: none, w8a16 or w4a16"),
      cl::value_desc("mode"), cl::init("none"), cl::cat(category));
  static cl::opt<int64_t> quantizeGroup(
      "quantize-group", cl::desc("input features per quantization group: 32, 64 or 128"),
      cl::value_desc("n"), cl::init(128), cl::cat(category));
  static cl::opt<std::string> quantizeSkip(
      "quantize-skip",
      cl::desc("comma-separated weights kept in their precision (name substrings; lm_head is "
               "the lm_head's weight, tied or not)"),
      cl::value_desc("a,b"), cl::init(""), cl::cat(category));
  static cl::opt<std::string> dummyWeights(
      "dummy-weights",
      cl::desc("with --builtin: an artifact without weights, which the runtime generates at load "
               "(for timing); the matrices' format: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
               "q5_1, q2_k, q3_k, q4_k, q5_k or q6_k (norms and biases stay f32)"),
      cl::value_desc("format"), cl::init(""), cl::cat(category));
  static cl::opt<int64_t> tp("tp", cl::desc("tensor-parallel ranks (Megatron-style split of every layer)"),
                             cl::value_desc("n"), cl::init(1), cl::cat(category));
  static cl::opt<int64_t> pp("pp", cl::desc("pipeline stages (contiguous layers per stage)"),
                             cl::value_desc("n"), cl::init(1), cl::cat(category));
  static cl::list<std::string> ppLayers(
      "pp-layers",
      cl::desc("each pipeline stage's layers, e.g. 0-11,12-23 (default: balanced by weight bytes)"),
      cl::value_desc("a-b,..."), cl::CommaSeparated, cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Compile a transformer model into IR, kernels and an artifact.\n");
  if (listBuiltins) {
    for (const BuiltinModel &m : builtinModels())
      llvm::outs() << llvm::formatv("  {0,-20} {1}\n", m.name, m.description);
    return 0;
  }
  options.model = model;
  options.builtin = builtin;
  options.emit = emit;
  options.output = output;
  if (dtype.getNumOccurrences())
    options.dtype = dtype;
  llvm::SmallVector<llvm::StringRef> targets;
  llvm::StringRef(target.getValue()).split(targets, ',', -1, /*KeepEmpty=*/false);
  options.targets.assign(targets.begin(), targets.end());
  options.hostCpu = hostCpu;
  options.hostCompiler = hostCompiler;
  options.hostCflags.assign(hostCflags.begin(), hostCflags.end());
  options.useCache = !noCache;
  options.hostActivations = hostActivations;
  options.fuse = !noFuse;
  if (gemv != "auto" && gemv != "fp") {
    llvm::errs() << "llmc compile: --gemv must be auto or fp, not '" << gemv << "'\n";
    return 2;
  }
  options.gemv = gemv;
  options.quantize = quantize;
  if (quantizeGroup.getNumOccurrences())
    options.quantizeGroup = quantizeGroup;
  if (quantizeSkip.getNumOccurrences()) {
    llvm::SmallVector<llvm::StringRef> skipped;
    llvm::StringRef(quantizeSkip.getValue()).split(skipped, ',', -1, /*KeepEmpty=*/true);
    options.quantizeSkip.emplace(skipped.begin(), skipped.end());
  }
  options.tp = tp;
  options.pp = pp;
  options.ppLayers.assign(ppLayers.begin(), ppLayers.end());
  options.printIrAfter.assign(printAfter.begin(), printAfter.end());
  options.printIrAfterAll = printAfterAll;
  if (dummyWeights.getNumOccurrences())
    options.dummyWeights = dummyWeights;
  return -1;
}

// Writes --emit's text to `path` ("-": stdout).
int writeOutput(const std::string &path, const std::string &text) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = mlir::openOutputFile(path, &error);
  if (!out) {
    llvm::errs() << "llmc compile: cannot write '" << path << "': " << error << "\n";
    return kExitFailure;
  }
  out->os() << text;
  out->keep();
  return 0;
}

} // namespace

int runCompileCommand(int argc, char **argv) {
  CompileOptions options;
  if (int done = parseFlags(argc, argv, options); done >= 0)
    return done;
  if (absl::Status st = checkCompileOptions(options); !st.ok()) {
    llvm::errs() << "llmc compile: " << std::string(st.message()) << "\n";
    return kExitUsage;
  }
  bool tty = ::isatty(2);
  if (options.emit == EmitKind::kArtifact)
    options.progress = [tty](const std::string &what) {
      llvm::errs() << (tty ? "\r\x1b[K" : "") << "llmc compile: " << what << (tty ? "" : "\n");
    };
  absl::StatusOr<CompileResult> result = compile(options);
  if (options.emit == EmitKind::kArtifact && tty)
    llvm::errs() << "\r\x1b[K";
  if (!result.ok()) {
    llvm::errs() << "llmc compile: " << std::string(result.status().message()) << "\n";
    return kExitFailure;
  }
  if (options.emit != EmitKind::kArtifact)
    return writeOutput(options.output, result->text);
  llvm::errs() << "llmc compile: wrote " << options.output << "\n";
  return 0;
}

} // namespace llmc
