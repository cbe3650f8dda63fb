//===- CompileCommand.cpp - `llmc compile` --------------------------------===//
//
// Turns a model into IR (and, as the pipeline grows, into an artifact). Each
// stage can be shown: --emit picks where to stop, --print-ir-after-all dumps
// the IR after every pass.
//
//===----------------------------------------------------------------------===//
#include "CompileCommand.h"

#include "Artifact/ArtifactBuilder.h"
#include "Artifact/CudaArtifact.h"
#include "Frontend/BuiltinModels.h"
#include "Frontend/ModelImporter.h"
#include "Frontend/StepBuilder.h"
#include "llmc/Passes/Pipelines.h"
#include "llmc/runtime/artifact/dummy_weights.h"
#include "llmc/runtime/cli/commands.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

namespace cl = llvm::cl;

namespace llmc {
namespace {

enum class Emit { kMLIR, kKernels, kCUDA, kPTX, kArtifact };

} // namespace

int runCompileCommand(int argc, char **argv) {
  static cl::OptionCategory category("llmc compile options");
  static cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL: Hugging Face folder or .gguf]"),
                                    cl::init(""), cl::cat(category));
  static cl::opt<std::string> builtin(
      "builtin", cl::desc("compile a built-in synthetic model instead of MODEL (see --list-builtins)"),
      cl::value_desc("name"), cl::init(""), cl::cat(category));
  static cl::opt<bool> listBuiltins("list-builtins", cl::desc("list the built-in models and exit"),
                                    cl::cat(category));
  static cl::opt<Emit> emit(
      "emit", cl::desc("what to produce"), cl::init(Emit::kArtifact),
      cl::values(clEnumValN(Emit::kMLIR, "mlir", "the llm-dialect IR after the pipeline"),
                 clEnumValN(Emit::kKernels, "kernels", "the fusion groups"),
                 clEnumValN(Emit::kCUDA, "cuda", "generated CUDA C++"),
                 clEnumValN(Emit::kPTX, "ptx", "PTX from NVRTC"),
                 clEnumValN(Emit::kArtifact, "artifact", "a deployable artifact directory")),
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
      cl::desc("comma-separated targets: host, sm_80, sm_90, ... (artifacts always hold the host "
               "kernels, the fallback where no GPU is)"),
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
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "Compile a transformer model into IR, kernels and an artifact.\n");

  if (listBuiltins) {
    for (const BuiltinModel &m : builtinModels())
      llvm::outs() << llvm::formatv("  {0,-20} {1}\n", m.name, m.description);
    return 0;
  }
  if (!model.empty() && !builtin.empty()) {
    llvm::errs() << "llmc compile: give either MODEL or --builtin, not both\n";
    return cli::kExitUsage;
  }
  if (builtin.empty() && model.empty()) {
    llvm::errs() << "llmc compile: no model given (MODEL or --builtin=NAME; see --help)\n";
    return cli::kExitUsage;
  }
  const BuiltinModel *spec = nullptr;
  if (!builtin.empty() && !(spec = findBuiltinModel(builtin))) {
    llvm::errs() << "llmc compile: unknown built-in model '" << builtin
                 << "' (see --list-builtins)\n";
    return cli::kExitUsage;
  }
  // Dummy weights: a built-in shape with matrices in this format.
  llm::WeightFormat dummyFormat = llm::WeightFormat::f32;
  if (dummyWeights.getNumOccurrences()) {
    if (!spec) {
      llvm::errs() << "llmc compile: --dummy-weights needs --builtin=NAME (a model file has its "
                      "own weights)\n";
      return cli::kExitUsage;
    }
    static const char *const kDummyFormats[] = {"f32",  "f16",  "bf16", "q8_0", "q4_0", "q4_1",
                                                "q5_0", "q5_1", "q2_k", "q3_k", "q4_k",
                                                "q5_k", "q6_k"};
    std::optional<llm::WeightFormat> format;
    if (llvm::is_contained(kDummyFormats, dummyWeights.getValue()))
      format = llm::symbolizeWeightFormat(dummyWeights.getValue());
    if (!format) {
      llvm::errs() << "llmc compile: --dummy-weights must be f32, f16, bf16, q8_0, q4_0, q4_1, "
                      "q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k, got '"
                   << dummyWeights << "'\n";
      return cli::kExitUsage;
    }
    dummyFormat = *format;
  }
  bool dummy = spec && dummyWeights.getNumOccurrences();
  StepBuildOptions options;
  if (dtype == "f16")
    options.activations = StepBuildOptions::DType::kF16;
  else if (dtype == "bf16")
    options.activations = StepBuildOptions::DType::kBF16;
  else if (dtype != "f32") {
    llvm::errs() << "llmc compile: --dtype must be f32, f16 or bf16, got '" << dtype << "'\n";
    return cli::kExitUsage;
  }
  if (quantize != "none" && quantize != "w8a16" && quantize != "w4a16") {
    llvm::errs() << "llmc compile: --quantize must be none, w8a16 or w4a16, got '" << quantize
                 << "'\n";
    return cli::kExitUsage;
  }
  if (quantizeGroup != 32 && quantizeGroup != 64 && quantizeGroup != 128) {
    llvm::errs() << "llmc compile: --quantize-group must be 32, 64 or 128, got "
                 << quantizeGroup << "\n";
    return cli::kExitUsage;
  }
  if (quantize == "none" &&
      (quantizeGroup.getNumOccurrences() || quantizeSkip.getNumOccurrences())) {
    llvm::errs() << "llmc compile: --quantize-group and --quantize-skip need "
                    "--quantize=w8a16 or w4a16\n";
    return cli::kExitUsage;
  }
  llvm::SmallVector<llvm::StringRef> skipped;
  llvm::StringRef(quantizeSkip.getValue()).split(skipped, ',', -1, /*KeepEmpty=*/true);
  if (quantizeSkip.empty())
    skipped.clear();
  for (llvm::StringRef s : skipped)
    if (s.trim().empty()) {
      llvm::errs() << "llmc compile: --quantize-skip has an empty entry in '" << quantizeSkip
                   << "'\n";
      return cli::kExitUsage;
    }
  if (hostActivations != "q8" && hostActivations != "f32") {
    llvm::errs() << "llmc compile: --host-activations must be q8 or f32, got '" << hostActivations
                 << "'\n";
    return cli::kExitUsage;
  }
  llvm::SmallVector<llvm::StringRef> targets;
  llvm::StringRef(target.getValue()).split(targets, ',', -1, /*KeepEmpty=*/false);
  std::vector<std::string> cudaArchs;
  for (llvm::StringRef t : targets) {
    unsigned sm = 0;
    if (t == "host")
      continue;
    if (t.consume_front("sm_") && !t.getAsInteger(10, sm) && sm >= 80) {
      if (!llvm::is_contained(cudaArchs, "sm_" + std::to_string(sm)))
        cudaArchs.push_back("sm_" + std::to_string(sm));
      continue;
    }
    llvm::errs() << "llmc compile: unknown target '" << target
                 << "' (expected host or sm_XX with XX >= 80, e.g. --target=host,sm_80,sm_90)\n";
    return cli::kExitUsage;
  }
  if ((emit == Emit::kCUDA || emit == Emit::kPTX) && cudaArchs.empty()) {
    llvm::errs() << "llmc compile: --emit=cuda and --emit=ptx need a CUDA target "
                    "(--target=sm_80, sm_90, ...)\n";
    return cli::kExitUsage;
  }
  // CUDA kernels take --dtype (bf16 unless given); the IR they and the host
  // kernels share keeps f32 activations, which the host computes in.
  std::string cudaActivations = dtype.getNumOccurrences() ? dtype.getValue() : "bf16";
  if (!cudaArchs.empty() && cudaActivations != "f32" && cudaActivations != "f16" &&
      cudaActivations != "bf16") {
    llvm::errs() << "llmc compile: --dtype must be f32, f16 or bf16, got '" << dtype << "'\n";
    return cli::kExitUsage;
  }
  if (!cudaArchs.empty())
    options.activations = StepBuildOptions::DType::kF32;
  if (emit == Emit::kArtifact && ((spec && !dummy) || output == "-")) {
    llvm::errs() << (spec && !dummy ? "llmc compile: built-in models have no weights; compile "
                                      "a model file (tools/synth-model writes synthetic ones), "
                                      "use --dummy-weights=FORMAT or --emit=mlir\n"
                                    : "llmc compile: an artifact needs -o DIR\n");
    return cli::kExitUsage;
  }

  // The model: a built-in shape with f32 weights (or --dummy-weights' format),
  // or files on disk.
  std::unique_ptr<ImportedModel> imported;
  std::unique_ptr<HFNamedCatalog> builtinCatalog;
  const ModelConfig *config = nullptr;
  const WeightCatalog *catalog = nullptr;
  if (spec) {
    builtinCatalog = std::make_unique<HFNamedCatalog>(spec->config, dummyFormat);
    config = &spec->config;
    catalog = builtinCatalog.get();
  } else {
    absl::StatusOr<std::unique_ptr<ImportedModel>> opened = importModel(model);
    if (!opened.ok()) {
      llvm::errs() << "llmc compile: " << std::string(opened.status().message()) << "\n";
      return 1;
    }
    imported = std::move(*opened);
    config = &imported->config();
    catalog = &imported->catalog();
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = buildStepModule(context, *config, *catalog, options);
  if (!module)
    return 1;
  (*module)->setAttr("llm.source",
                     mlir::StringAttr::get(&context, spec ? "builtin:" + builtin.getValue()
                                                          : model.getValue()));

  CompilePipelineOptions pipelineOptions;
  pipelineOptions.fuse = !noFuse;
  pipelineOptions.quantize = quantize;
  pipelineOptions.quantizeGroup = quantizeGroup;
  for (llvm::StringRef s : skipped)
    pipelineOptions.quantizeSkip.push_back(s.trim().str());

  mlir::PassManager pm(&context);
  pm.enableVerifier(true);
  // --emit=mlir stops after import cleanup; kernels and artifacts need every stage.
  if (emit == Emit::kMLIR)
    buildImportCleanupStage(pm);
  else
    buildCompilePipeline(pm, pipelineOptions);
  llvm::StringSet<> inPipeline;
  for (mlir::Pass &pass : pm.getPasses())
    inPipeline.insert(pass.getArgument());
  for (const std::string &name : printAfter)
    if (!inPipeline.contains(name)) {
      std::string names;
      for (mlir::Pass &pass : pm.getPasses())
        names += (names.empty() ? "" : ", ") + pass.getArgument().str();
      llvm::errs() << "llmc compile: --print-ir-after: no pass '" << name
                   << "' in this pipeline (it runs: " << names << ")\n";
      return cli::kExitUsage;
    }
  if (printAfterAll || !printAfter.empty()) {
    context.disableMultithreading();
    // After each chosen pass, changed or not, so every stage asked for shows.
    std::vector<std::string> chosen(printAfter.begin(), printAfter.end());
    bool all = printAfterAll;
    pm.enableIRPrinting(/*shouldPrintBeforePass=*/nullptr,
                        /*shouldPrintAfterPass=*/
                        [all, chosen](mlir::Pass *pass, mlir::Operation *) {
                          return all || llvm::is_contained(chosen, pass->getArgument().str());
                        },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  if (mlir::failed(pm.run(*module)))
    return 1;

  if (emit == Emit::kArtifact) {
    ArtifactOptions options;
    options.output = output;
    options.hostCpu = hostCpu;
    for (const std::string &flags : hostCflags) {
      llvm::SmallVector<llvm::StringRef> split;
      llvm::StringRef(flags).split(split, ' ', -1, /*KeepEmpty=*/false);
      for (llvm::StringRef f : split)
        options.hostCflags.push_back(f.str());
    }
    options.hostCompiler = hostCompiler;
    options.useCache = !noCache;
    options.q8Activations = hostActivations == "q8";
    options.cudaArchs = cudaArchs;
    options.cudaActivations = cudaActivations;
    if (dummy)
      options.dummySeed = kDefaultDummySeed;
    bool tty = ::isatty(2);
    options.progress = [&](const std::string &what) {
      llvm::errs() << (tty ? "\r\x1b[K" : "") << "llmc compile: " << what << (tty ? "" : "\n");
    };
    absl::Status st =
        buildArtifact(*module, *config, spec ? "builtin:" + builtin.getValue() : model.getValue(),
                      imported.get(), options);
    if (tty)
      llvm::errs() << "\r\x1b[K";
    if (!st.ok()) {
      llvm::errs() << "llmc compile: " << std::string(st.message()) << "\n";
      return 1;
    }
    llvm::errs() << "llmc compile: wrote " << output << "\n";
    return 0;
  }

  std::string text;
  if (emit == Emit::kCUDA || emit == Emit::kPTX) {
    CudaEmitOptions cudaOptions;
    cudaOptions.activationType = cudaActivations;
    absl::StatusOr<CudaKernelPlan> plan = emitCudaSource(*module, cudaOptions);
    if (!plan.ok())
      return 1;
    text = plan->source;
    if (emit == Emit::kPTX) {
      CudaArtifactOptions ptxOptions;
      ptxOptions.archs = cudaArchs;
      ptxOptions.useCache = !noCache;
      auto ptx = compileCudaSource(plan->source, ptxOptions, /*report=*/nullptr);
      if (!ptx.ok()) {
        llvm::errs() << "llmc compile: " << std::string(ptx.status().message()) << "\n";
        return 1;
      }
      text.clear();
      for (const auto &[arch, code] : *ptx)
        text += "// ---- " + arch + " ----\n" + code + "\n";
    }
  }

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = mlir::openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "llmc compile: cannot write '" << output << "': " << error << "\n";
    return 1;
  }
  if (!text.empty()) {
    out->os() << text;
  } else {
    module->print(out->os());
    out->os() << "\n";
  }
  out->keep();
  return 0;
}

} // namespace llmc
