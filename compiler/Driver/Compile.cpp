//===- Compile.cpp - llmc compile as a library call -----------------------===//
#include "Driver/Compile.h"

#include "Artifact/ArtifactBuilder.h"
#include "Artifact/CudaArtifact.h"
#include "Frontend/BuiltinModels.h"
#include "Frontend/ModelImporter.h"
#include "Frontend/StepBuilder.h"
#include "llmc/Passes/Pipelines.h"
#include "llmc/Passes/QuantizeOptions.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/core/weight_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

namespace llmc {
namespace {

absl::Status usage(const std::string &message) { return absl::InvalidArgumentError(message); }

// The CUDA architectures among options.targets ("sm_80", ...), in order and
// without repeats; an error names a target that is neither host nor sm_XX.
absl::StatusOr<std::vector<std::string>> cudaArchsOf(const CompileOptions &options) {
  std::vector<std::string> archs;
  for (llvm::StringRef t : options.targets) {
    unsigned sm = 0;
    if (t == "host")
      continue;
    // sm_90a: Hopper's arch-specific features (wgmma), for cc 9.0 only.
    const bool archSpecific = t.consume_back("a");
    if (t.consume_front("sm_") && !t.getAsInteger(10, sm) && sm >= 80 &&
        (!archSpecific || sm == 90)) {
      const std::string arch = "sm_" + std::to_string(sm) + (archSpecific ? "a" : "");
      if (!llvm::is_contained(archs, arch))
        archs.push_back(arch);
      continue;
    }
    return usage(absl::StrCat("unknown target '", absl::StrJoin(options.targets, ","),
                              "' (expected host, sm_XX with XX >= 80, or sm_90a, e.g. "
                              "--target=host,sm_80,sm_90)"));
  }
  return archs;
}

bool isDType(const std::string &t) { return t == "f32" || t == "f16" || t == "bf16"; }

// Formats the runtime can generate dummy weights in: every format of the
// table but llmc's group-wise ints (which need a group per weight).
std::vector<std::string> dummyFormats() {
  std::vector<std::string> names;
  for (const WeightFormatInfo &f : AllWeightFormats())
    if (!f.grouped)
      names.push_back(std::string(f.name));
  return names;
}

absl::Status checkModel(const CompileOptions &o) {
  if (!o.model.empty() && !o.builtin.empty())
    return usage("give either MODEL or --builtin, not both");
  if (o.model.empty() && o.builtin.empty())
    return usage("no model given (MODEL or --builtin=NAME; see --help)");
  if (!o.builtin.empty() && !findBuiltinModel(o.builtin))
    return usage(absl::StrCat("unknown built-in model '", o.builtin, "' (see --list-builtins)"));
  if (o.dummyWeights) {
    if (o.builtin.empty())
      return usage("--dummy-weights needs --builtin=NAME (a model file has its own weights)");
    std::vector<std::string> formats = dummyFormats();
    if (!llvm::is_contained(formats, *o.dummyWeights))
      return usage(absl::StrCat("--dummy-weights must be ",
                                absl::StrJoin(formats.begin(), formats.end() - 1, ", "), " or ",
                                formats.back(), ", got '", *o.dummyWeights, "'"));
  }
  return absl::OkStatus();
}

absl::Status checkQuantize(const CompileOptions &o) {
  std::vector<std::string> skip = o.quantizeSkip.value_or(std::vector<std::string>{});
  if (auto problem = checkQuantizeOptions(o.quantize, o.quantizeGroup.value_or(128), skip)) {
    using Option = QuantizeOptionProblem::Option;
    switch (problem->option) {
    case Option::kMode:
      return usage("--quantize " + problem->message);
    case Option::kGroup:
      return usage("--quantize-group " + problem->message);
    case Option::kSkip:
      return usage(absl::StrCat("--quantize-skip ", problem->message, " in '",
                                absl::StrJoin(skip, ","), "'"));
    }
  }
  if (o.quantize == "none" && (o.quantizeGroup || o.quantizeSkip))
    return usage("--quantize-group and --quantize-skip need --quantize=w8a16 or w4a16");
  return absl::OkStatus();
}

CompilePipelineOptions pipelineOptionsOf(const CompileOptions &o) {
  CompilePipelineOptions p;
  p.fuse = o.fuse;
  p.quantize = o.quantize;
  p.quantizeGroup = o.quantizeGroup.value_or(128);
  for (const std::string &s : o.quantizeSkip.value_or(std::vector<std::string>{}))
    p.quantizeSkip.push_back(llvm::StringRef(s).trim().str());
  p.tp = o.tp;
  p.pp = o.pp;
  // The CUDA GEMMs fold a norm into their prologue, not the residual add
  // before it (which tensor parallelism leaves there, after the all-reduce).
  p.fusePrologueElementwise =
      llvm::all_of(o.targets, [](const std::string &t) { return t == "host"; });
  p.ppLayers = o.ppLayers;
  p.cudaActivations = o.dtype.value_or("bf16");
  p.gemv = o.gemv;
  std::vector<std::string> archs;
  if (absl::StatusOr<std::vector<std::string>> a = cudaArchsOf(o); a.ok())
    archs = *a;
  p.wgmma = archsHaveWgmma(archs);
  return p;
}

// The pipeline --emit asks for: --emit=mlir stops after import cleanup (and
// partitioning, when asked); kernels and artifacts need every stage.
void buildPipeline(mlir::PassManager &pm, const CompileOptions &o, int64_t ppStage = 0) {
  CompilePipelineOptions p = pipelineOptionsOf(o);
  p.ppStage = ppStage;
  if (o.emit == EmitKind::kMLIR) {
    buildImportCleanupStage(pm);
    buildPartitionStage(pm, p);
  } else {
    buildCompilePipeline(pm, p);
  }
}

absl::Status checkPartition(const CompileOptions &o) {
  if (o.tp < 1)
    return usage(absl::StrCat("--tp must be at least 1, got ", o.tp));
  if (o.pp < 1)
    return usage(absl::StrCat("--pp must be at least 1, got ", o.pp));
  if (!o.ppLayers.empty() && int64_t(o.ppLayers.size()) != o.pp)
    return usage(absl::StrCat("--pp-layers gives ", o.ppLayers.size(),
                              " layer ranges for --pp=", o.pp, " stages"));
  if ((o.tp > 1 || o.pp > 1) && o.dummyWeights)
    return usage(
        absl::StrCat(o.tp > 1 ? "--tp" : "--pp", ": dummy weights cannot be split over ranks"));
  return absl::OkStatus();
}

// --print-ir-after names passes of the pipeline that will run.
absl::Status checkPrintAfter(const CompileOptions &o) {
  if (o.printIrAfter.empty())
    return absl::OkStatus();
  mlir::MLIRContext context;
  mlir::PassManager pm(&context);
  buildPipeline(pm, o);
  llvm::StringSet<> inPipeline;
  std::vector<std::string> names;
  for (mlir::Pass &pass : pm.getPasses()) {
    inPipeline.insert(pass.getArgument());
    names.push_back(pass.getArgument().str());
  }
  for (const std::string &name : o.printIrAfter)
    if (!inPipeline.contains(name))
      return usage(absl::StrCat("--print-ir-after: no pass '", name,
                                "' in this pipeline (it runs: ", absl::StrJoin(names, ", "), ")"));
  return absl::OkStatus();
}

// The activation type of the CUDA kernels (bf16 unless --dtype says).
std::string cudaActivationsOf(const CompileOptions &o) { return o.dtype.value_or("bf16"); }

// The model to compile: a built-in shape (its catalog names weights in
// --dummy-weights' format) or files on disk.
struct ModelSource {
  std::unique_ptr<ImportedModel> imported;
  std::unique_ptr<HFNamedCatalog> builtinCatalog;
  const ModelConfig *config = nullptr;
  const WeightCatalog *catalog = nullptr;
  std::string name; // the manifest's "source"
};

absl::StatusOr<ModelSource> openModel(const CompileOptions &o) {
  ModelSource m;
  if (const BuiltinModel *spec = o.builtin.empty() ? nullptr : findBuiltinModel(o.builtin)) {
    llm::WeightFormat format = llm::WeightFormat::f32;
    if (o.dummyWeights)
      format = *llm::symbolizeWeightFormat(*o.dummyWeights);
    m.builtinCatalog = std::make_unique<HFNamedCatalog>(spec->config, format);
    m.config = &spec->config;
    m.catalog = m.builtinCatalog.get();
    m.name = "builtin:" + o.builtin;
    return m;
  }
  absl::StatusOr<std::unique_ptr<ImportedModel>> opened = importModel(o.model);
  if (!opened.ok())
    return opened.status();
  m.imported = std::move(*opened);
  m.config = &m.imported->config();
  m.catalog = &m.imported->catalog();
  m.name = o.model;
  return m;
}

// Runs the pipeline on `module`, dumping the IR after the passes asked for.
absl::Status runPipeline(mlir::MLIRContext &context, mlir::ModuleOp module, const CompileOptions &o,
                         int64_t ppStage = 0) {
  mlir::PassManager pm(&context);
  pm.enableVerifier(true);
  buildPipeline(pm, o, ppStage);
  if (o.printIrAfterAll || !o.printIrAfter.empty()) {
    context.disableMultithreading();
    // After each chosen pass, changed or not, so every stage asked for shows.
    std::vector<std::string> chosen = o.printIrAfter;
    bool all = o.printIrAfterAll;
    pm.enableIRPrinting(/*shouldPrintBeforePass=*/nullptr,
                        /*shouldPrintAfterPass=*/
                        [all, chosen](mlir::Pass *pass, mlir::Operation *) {
                          return all || llvm::is_contained(chosen, pass->getArgument().str());
                        },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  if (mlir::failed(pm.run(module)))
    return absl::InternalError("the pass pipeline failed (see the diagnostics above)");
  return absl::OkStatus();
}

absl::Status writeArtifact(llvm::ArrayRef<mlir::ModuleOp> stages, const ModelSource &m,
                           const CompileOptions &o, const std::vector<std::string> &cudaArchs) {
  ArtifactOptions a;
  a.output = o.output;
  a.hostCpu = o.hostCpu;
  for (const std::string &flags : o.hostCflags) {
    llvm::SmallVector<llvm::StringRef> split;
    llvm::StringRef(flags).split(split, ' ', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef f : split)
      a.hostCflags.push_back(f.str());
  }
  a.hostCompiler = o.hostCompiler;
  a.useCache = o.useCache;
  a.q8Activations = o.hostActivations == "q8";
  a.cudaArchs = cudaArchs;
  a.cudaActivations = cudaActivationsOf(o);
  if (o.dummyWeights)
    a.dummySeed = kDefaultDummySeed;
  a.progress = o.progress;
  return buildArtifact(stages, *m.config, m.name, m.imported.get(), a);
}

// --emit=cuda: the generated source; --emit=ptx: NVRTC's PTX per target.
absl::StatusOr<std::string> cudaText(mlir::ModuleOp module, const CompileOptions &o,
                                     const std::vector<std::string> &cudaArchs) {
  CudaEmitOptions emit;
  emit.activationType = cudaActivationsOf(o);
  emit.wgmma = archsHaveWgmma(cudaArchs);
  absl::StatusOr<CudaKernelPlan> plan = emitCudaSource(module, emit);
  if (!plan.ok())
    return plan.status();
  if (o.emit == EmitKind::kCUDA)
    return plan->source;
  CudaArtifactOptions ptxOptions;
  ptxOptions.archs = cudaArchs;
  ptxOptions.useCache = o.useCache;
  auto ptx = compileCudaSource(plan->source, ptxOptions, /*report=*/nullptr);
  if (!ptx.ok())
    return ptx.status();
  std::string text;
  for (const auto &[arch, code] : *ptx)
    text += "// ---- " + arch + " ----\n" + code + "\n";
  return text;
}

} // namespace

absl::Status checkCompileOptions(const CompileOptions &o) {
  if (absl::Status st = checkModel(o); !st.ok())
    return st;
  absl::StatusOr<std::vector<std::string>> archs = cudaArchsOf(o);
  if (o.dtype && !isDType(*o.dtype))
    return usage(absl::StrCat("--dtype must be f32, f16 or bf16, got '", *o.dtype, "'"));
  if (absl::Status st = checkQuantize(o); !st.ok())
    return st;
  if (absl::Status st = checkPartition(o); !st.ok())
    return st;
  if (o.hostActivations != "q8" && o.hostActivations != "f32")
    return usage(
        absl::StrCat("--host-activations must be q8 or f32, got '", o.hostActivations, "'"));
  if (!archs.ok())
    return archs.status();
  if ((o.emit == EmitKind::kCUDA || o.emit == EmitKind::kPTX) && archs->empty())
    return usage("--emit=cuda and --emit=ptx need a CUDA target (--target=sm_80, sm_90, ...)");
  if (o.emit == EmitKind::kArtifact && !o.builtin.empty() && !o.dummyWeights)
    return usage("built-in models have no weights; compile a model file (tools/synth-model "
                 "writes synthetic ones), use --dummy-weights=FORMAT or --emit=mlir");
  if (o.emit == EmitKind::kArtifact && (o.output.empty() || o.output == "-"))
    return usage("an artifact needs -o DIR");
  return checkPrintAfter(o);
}

absl::StatusOr<CompileResult> compile(const CompileOptions &o) {
  if (absl::Status st = checkCompileOptions(o); !st.ok())
    return st;
  std::vector<std::string> cudaArchs = *cudaArchsOf(o);
  absl::StatusOr<ModelSource> model = openModel(o);
  if (!model.ok())
    return model.status();

  // CUDA kernels take --dtype; the IR they and the host kernels share keeps
  // f32 activations, which the host computes in.
  StepBuildOptions build;
  std::string irType = cudaArchs.empty() ? o.dtype.value_or("f32") : "f32";
  build.activations = irType == "f16"    ? StepBuildOptions::DType::kF16
                      : irType == "bf16" ? StepBuildOptions::DType::kBF16
                                         : StepBuildOptions::DType::kF32;
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildStepModule(context, *model->config, *model->catalog, build);
  if (!module)
    return absl::InvalidArgumentError("building the IR failed (see the diagnostics above)");
  (*module)->setAttr("llm.source", mlir::StringAttr::get(&context, model->name));
  // Each pipeline stage is a program of its own, compiled from a copy.
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> stages;
  if (o.pp == 1)
    stages.push_back(std::move(module));
  else
    for (int64_t stage = 0; stage < o.pp; ++stage)
      stages.emplace_back(module->clone());
  for (auto [stage, m] : llvm::enumerate(stages))
    if (absl::Status st = runPipeline(context, *m, o, int64_t(stage)); !st.ok())
      return st;

  CompileResult result;
  if (o.emit == EmitKind::kArtifact) {
    std::vector<mlir::ModuleOp> modules;
    for (auto &m : stages)
      modules.push_back(*m);
    if (absl::Status st = writeArtifact(modules, *model, o, cudaArchs); !st.ok())
      return st;
    return result;
  }
  for (auto [stage, m] : llvm::enumerate(stages)) {
    if (o.pp > 1)
      result.text += absl::StrCat("// ---- pipeline stage ", stage, " of ", o.pp, " ----\n");
    if (o.emit == EmitKind::kCUDA || o.emit == EmitKind::kPTX) {
      absl::StatusOr<std::string> text = cudaText(*m, o, cudaArchs);
      if (!text.ok())
        return text.status();
      result.text += *text;
      continue;
    }
    llvm::raw_string_ostream os(result.text);
    m->print(os);
    os << "\n";
  }
  return result;
}

} // namespace llmc
