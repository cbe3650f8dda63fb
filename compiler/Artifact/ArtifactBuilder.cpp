//===- ArtifactBuilder.cpp - write model.llmc -----------------------------===//
#include "ArtifactBuilder.h"

#include "Artifact/CudaArtifact.h"
#include "Artifact/WeightStore.h"
#include "Target/Host/HostEmitter.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/runtime/artifact/artifact_writer.h"
#include "llmc/runtime/artifact/host_abi.h"
#include "llmc/runtime/status_macros.h"

#include "absl/strings/str_format.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

// The host template library and the ABI header, embedded at build time.
#include "EmbeddedHostAbi.inc"
#include "EmbeddedHostKernels.inc"

using namespace mlir;

namespace llmc {
namespace {

absl::Status writeFile(const std::string &path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return absl::InternalError(absl::StrFormat("cannot write %s: %s", path, ec.message()));
  os << text;
  os.close();
  if (os.has_error())
    return absl::InternalError(absl::StrFormat("cannot write %s", path));
  return absl::OkStatus();
}

std::string cacheDir() {
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/llmc/host";
  const char *home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/llmc/host";
}

// Builds `srcDir`/kernels.cpp into `library` with the system compiler. Builds
// of identical sources and flags are cached by content hash.
absl::Status buildHostLibrary(const std::string &srcDir, const std::string &source,
                              const std::string &library, const ArtifactOptions &options) {
  std::vector<std::string> args = {options.hostCompiler, "-std=c++17", "-O3",
                                   "-march=" + options.hostCpu, "-fPIC", "-shared",
                                   "-fno-math-errno", "-I" + srcDir, "-o", library,
                                   srcDir + "/kernels.cpp"};
  args.insert(args.end() - 3, options.hostCflags.begin(), options.hostCflags.end());
  std::string key = source;
  key += kHostKernelsHeader;
  key += kHostAbiHeader;
  for (const std::string &a : args)
    if (a != library && a.rfind("-I", 0) != 0 && a.find("kernels.cpp") == std::string::npos)
      key += "\n" + a;
  std::string cached =
      cacheDir() + "/" + ChecksumHex(reinterpret_cast<const uint8_t *>(key.data()), key.size()) +
      ".so";
  if (options.useCache && llvm::sys::fs::exists(cached) &&
      !llvm::sys::fs::copy_file(cached, library))
    return absl::OkStatus();

  llvm::ErrorOr<std::string> program = llvm::sys::findProgramByName(options.hostCompiler);
  if (!program)
    return absl::FailedPreconditionError(absl::StrFormat(
        "host compiler '%s' not found on PATH (set it with --host-compiler)", options.hostCompiler));
  std::string log = srcDir + "/build.log";
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(*program, argRefs, std::nullopt, redirects, 0, 0, &error);
  if (rc != 0) {
    std::string command;
    for (const std::string &a : args)
      command += (command.empty() ? "" : " ") + a;
    std::string output;
    if (auto buf = llvm::MemoryBuffer::getFile(log))
      output = (*buf)->getBuffer().take_back(4000).str();
    return absl::InternalError(absl::StrFormat(
        "building the host kernels failed (exit %d%s%s):\n%s\nreproduce with:\n  %s", rc,
        error.empty() ? "" : ", ", error, output, command));
  }
  if (options.useCache && !llvm::sys::fs::create_directories(cacheDir())) {
    // Best effort: a cache that cannot be written only costs time.
    std::string tmp = cached + ".tmp" + std::to_string(::getpid());
    if (!llvm::sys::fs::copy_file(library, tmp))
      (void)llvm::sys::fs::rename(tmp, cached);
  }
  return absl::OkStatus();
}

std::string dtypeOf(Type t) {
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  return "f32";
}

absl::Status build(ModuleOp module, const ImportedModel &model, const ArtifactOptions &options,
                   const std::string &tmp) {
  auto progress = [&](const std::string &what) {
    if (options.progress)
      options.progress(what);
  };
  HostEmitOptions emitOptions;
  emitOptions.q8Activations = options.q8Activations;
  FailureOr<HostKernelPlan> plan = emitHostKernels(module, emitOptions);
  if (failed(plan))
    return absl::InternalError("host code generation failed (see the diagnostics above)");

  // Sources and the shared object.
  std::string srcDir = tmp + "/kernels/host/src";
  if (std::error_code ec = llvm::sys::fs::create_directories(srcDir))
    return absl::InternalError(absl::StrFormat("cannot create %s: %s", srcDir, ec.message()));
  LLMC_RETURN_IF_ERROR(writeFile(srcDir + "/kernels.cpp", plan->source));
  LLMC_RETURN_IF_ERROR(writeFile(srcDir + "/llmc_host_kernels.h", kHostKernelsHeader));
  LLMC_RETURN_IF_ERROR(writeFile(srcDir + "/host_abi.h", kHostAbiHeader));
  progress(absl::StrFormat("building %d host kernels (-march=%s)", plan->kernels.size(),
                           options.hostCpu));
  LLMC_RETURN_IF_ERROR(
      buildHostLibrary(srcDir, plan->source, tmp + "/kernels/host/kernels.so", options));

  // Weights, in the order the step plan first binds them.
  llvm::StringMap<llm::WeightOp> weightOps;
  module.walk([&](llm::WeightOp w) { weightOps.try_emplace(w.getName(), w); });
  WeightStore store(model);
  WeightFileWriter writer;
  LLMC_RETURN_IF_ERROR(writer.Open(tmp + "/weights/rank0.bin"));
  llvm::StringMap<int64_t> tensorIndex;
  // A weight's index in the file, packing it on first use.
  auto weightIndex = [&](const std::string &name) -> absl::StatusOr<int64_t> {
    auto [it, inserted] = tensorIndex.try_emplace(name, int64_t(tensorIndex.size()));
    if (inserted) {
      llm::WeightOp op = weightOps.lookup(name);
      if (!op)
        return absl::InternalError(absl::StrFormat("no llm.weight op names '%s'", name));
      LLMC_ASSIGN_OR_RETURN(WeightStore::Bytes raw, store.materialize(op));
      llm::WeightType t = op.getType();
      std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
      LLMC_ASSIGN_OR_RETURN(ManifestTensor entry,
                            writer.Add(name, llm::stringifyWeightFormat(t.getFormat()).str(),
                                       shape, t.getGroup(), raw.data, raw.size));
      (void)entry;
    }
    return it->second;
  };
  Manifest m;
  for (HostKernelPlan::Launch &launch : plan->launches) {
    ManifestStep step;
    step.name = launch.group;
    step.kernel = launch.kernel;
    step.buffers = launch.buffers;
    step.caches = launch.caches;
    for (const std::string &name : launch.weights) {
      LLMC_ASSIGN_OR_RETURN(int64_t index, weightIndex(name));
      step.weights.push_back(index);
    }
    m.steps.push_back(std::move(step));
  }
  if (!options.cudaArchs.empty()) {
    CudaArtifactOptions cudaOptions;
    cudaOptions.archs = options.cudaArchs;
    cudaOptions.emit.activationType = options.cudaActivations;
    cudaOptions.useCache = options.useCache;
    cudaOptions.progress = options.progress;
    LLMC_RETURN_IF_ERROR(buildCudaArtifact(module, cudaOptions, tmp, weightIndex, m.cuda));
  }
  progress(absl::StrFormat("packing %d weights", tensorIndex.size()));
  LLMC_RETURN_IF_ERROR(writer.Finish(&m.weights));
  m.weights.file = "weights/rank0.bin";

  // Tokenizer.
  std::string tokDir = tmp + "/tokenizer";
  if (std::error_code ec = llvm::sys::fs::create_directories(tokDir))
    return absl::InternalError(absl::StrFormat("cannot create %s: %s", tokDir, ec.message()));
  LLMC_ASSIGN_OR_RETURN(std::string tokenizer, model.exportTokenizer(tokDir));

  m.host_abi_version = LLMC_HOST_ABI_VERSION;
  m.compiler = "llmc 0.1";
  m.source = model.path();
  m.model = model.config();
  m.targets = {"host"};
  m.targets.insert(m.targets.end(), options.cudaArchs.begin(), options.cudaArchs.end());
  auto cache = module.lookupSymbol<func::FuncOp>("step").getArgumentTypes().back();
  auto kvType = dyn_cast<llm::KVCacheType>(cache);
  m.kv_dtype = kvType ? dtypeOf(kvType.getElementType()) : "f32";
  m.activation_dtype = m.kv_dtype;
  m.buffers = plan->buffers;
  m.kernels = plan->kernels;
  m.logits_buffer = plan->logitsBuffer;
  m.host_library = "kernels/host/kernels.so";
  m.tokenizer = "tokenizer/" + tokenizer;
  // The manifest goes last: a directory without it is never taken for an artifact.
  return WriteManifest(tmp, m);
}

} // namespace

absl::Status buildArtifact(ModuleOp module, const ImportedModel &model,
                           const ArtifactOptions &options) {
  std::string tmp = ArtifactTempDir(options.output);
  absl::Status st = build(module, model, options, tmp);
  if (!st.ok()) {
    (void)llvm::sys::fs::remove_directories(tmp);
    return st;
  }
  st = CommitArtifactDir(tmp, options.output);
  if (!st.ok())
    (void)llvm::sys::fs::remove_directories(tmp);
  return st;
}

} // namespace llmc
