//===- ArtifactBuilder.cpp - write model.llmc -----------------------------===//
#include "ArtifactBuilder.h"

#include "Artifact/ArtifactFiles.h"
#include "Artifact/CudaArtifact.h"
#include "Artifact/EmbeddedFile.h"
#include "Artifact/WeightStore.h"
#include "Target/Host/HostEmitter.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/core/artifact/artifact_writer.h"
#include "llmc/core/artifact/host_abi.h"
#include "llmc/core/status_macros.h"
#include "llmc/core/weight_format.h"

#include "absl/strings/str_format.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

#include <unistd.h>

// The host template library and the ABI header, embedded at build time.
#include "EmbeddedHostKernels.inc"

using namespace mlir;

namespace llmc {
namespace {

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
  std::vector<std::string> args = {options.hostCompiler,
                                   "-std=c++17",
                                   "-O3",
                                   "-march=" + options.hostCpu,
                                   "-fPIC",
                                   "-shared",
                                   "-fno-math-errno",
                                   "-I" + srcDir,
                                   "-o",
                                   library,
                                   srcDir + "/kernels.cpp"};
  args.insert(args.end() - 3, options.hostCflags.begin(), options.hostCflags.end());
  std::string key = source;
  for (const EmbeddedFile &f : kHostKernelFiles) {
    key += f.name;
    key += f.text;
  }
  for (const std::string &a : args)
    if (a != library && a.rfind("-I", 0) != 0 && a.find("kernels.cpp") == std::string::npos)
      key += "\n" + a;
  std::string cached = cacheDir() + "/" +
                       ChecksumHex(reinterpret_cast<const uint8_t *>(key.data()), key.size()) +
                       ".so";
  if (options.useCache && llvm::sys::fs::exists(cached) &&
      !llvm::sys::fs::copy_file(cached, library))
    return absl::OkStatus();

  llvm::ErrorOr<std::string> program = llvm::sys::findProgramByName(options.hostCompiler);
  if (!program)
    return absl::FailedPreconditionError(
        absl::StrFormat("host compiler '%s' not found on PATH (set it with --host-compiler)",
                        options.hostCompiler));
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

// GPT-2's byte-to-unicode map (what byte-level BPE vocabularies spell bytes
// with), as UTF-8.
std::string byteLevelToken(unsigned b) {
  unsigned cp = b;
  if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))) {
    // The unprintable bytes map to U+0100.. in byte order.
    unsigned n = 0;
    for (unsigned x = 0; x < b; ++x)
      if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff)))
        ++n;
    cp = 0x100 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  }
  return out;
}

// A tokenizer for a model that has none (a built-in shape): byte-level BPE
// without merges over `vocab` ids — the 256 bytes, fillers "<tok_N>" (never
// produced by encoding) and "<|endoftext|>" as the last id. Text round-trips;
// token ids are what matters to timing and logits checks.
absl::StatusOr<std::string> writeSyntheticTokenizer(const std::string &dir, int64_t vocab) {
  if (vocab < 256)
    return absl::InvalidArgumentError(absl::StrFormat(
        "a built-in model needs a vocabulary of at least 256 tokens for its synthetic "
        "tokenizer, got %d",
        vocab));
  bool eos = vocab > 256;
  llvm::json::Object model{{"type", "BPE"},
                           {"dropout", nullptr},
                           {"unk_token", nullptr},
                           {"continuing_subword_prefix", ""},
                           {"end_of_word_suffix", ""},
                           {"fuse_unk", false},
                           {"byte_fallback", false},
                           {"ignore_merges", false},
                           {"merges", llvm::json::Array()}};
  llvm::json::Object ids;
  for (unsigned b = 0; b < 256; ++b)
    ids[byteLevelToken(b)] = int64_t(b);
  for (int64_t i = 256; i < vocab - (eos ? 1 : 0); ++i)
    ids["<tok_" + std::to_string(i) + ">"] = i;
  model["vocab"] = std::move(ids);
  llvm::json::Array added;
  if (eos)
    added.push_back(llvm::json::Object{{"id", vocab - 1},
                                       {"content", "<|endoftext|>"},
                                       {"single_word", false},
                                       {"lstrip", false},
                                       {"rstrip", false},
                                       {"normalized", false},
                                       {"special", true}});
  auto byteLevel = [](bool trim) {
    return llvm::json::Object{{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", trim},
                              {"use_regex", true}};
  };
  llvm::json::Object tokenizer{{"version", "1.0"},
                               {"truncation", nullptr},
                               {"padding", nullptr},
                               {"added_tokens", std::move(added)},
                               {"normalizer", nullptr},
                               {"pre_tokenizer", byteLevel(true)},
                               {"post_processor", byteLevel(false)},
                               {"decoder", byteLevel(true)},
                               {"model", std::move(model)}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(tokenizer));
  LLMC_RETURN_IF_ERROR(writeArtifactFile(dir + "/tokenizer.json", text));
  llvm::json::Object config{{"add_bos_token", false},
                            {"add_eos_token", false},
                            {"tokenizer_class", "PreTrainedTokenizerFast"}};
  if (eos)
    config["eos_token"] = "<|endoftext|>";
  text.clear();
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(config));
  LLMC_RETURN_IF_ERROR(writeArtifactFile(dir + "/tokenizer_config.json", text));
  return std::string("tokenizer.json");
}

// The packed size of `op`'s weight (for dummy weights, which are laid out
// but never materialized).
absl::StatusOr<uint64_t> weightBytes(llm::WeightOp op) {
  llm::WeightType t = op.getType();
  int64_t elements = 1;
  for (int64_t d : t.getShape())
    elements *= d;
  int64_t bytes =
      WeightByteSize(llm::stringifyWeightFormat(t.getFormat()).str(), elements, t.getGroup());
  if (bytes < 0)
    return absl::InternalError(
        absl::StrFormat("weight '%s': no byte size for its type", op.getName().str()));
  return uint64_t(bytes);
}

// Where one pipeline stage's files go: the root for stage 0 (and for an
// artifact without stages), stages/<S>/ for the others.
struct StageFiles {
  int64_t stage = 0;
  std::string prefix; // "" or "stages/1/", relative to the artifact root
  std::string dir;    // the same directory in the artifact being built
};

StageFiles stageFiles(const std::string &tmp, int64_t stage) {
  StageFiles f;
  f.stage = stage;
  f.prefix = stage == 0 ? "" : "stages/" + std::to_string(stage) + "/";
  f.dir = tmp + "/" + f.prefix;
  return f;
}

// The mesh of a partitioned module (llm.mesh, set by the partition passes)
// with the per-rank KV heads of its caches and its TP ranks' weight files
// (named by world rank, stage * tp + r); tp = 1 when unsplit. The stage
// list is the caller's to fill.
ManifestMesh meshOf(ModuleOp module, const StageFiles &files) {
  ManifestMesh mesh;
  auto attr = module->getAttrOfType<DictionaryAttr>("llm.mesh");
  if (!attr)
    return mesh;
  if (auto tp = attr.getAs<IntegerAttr>("tp"))
    mesh.tp = tp.getInt();
  if (auto pp = attr.getAs<IntegerAttr>("pp"))
    mesh.pp = pp.getInt();
  mesh.stage = files.stage;
  for (Type t : module.lookupSymbol<func::FuncOp>("step").getArgumentTypes())
    if (auto cache = dyn_cast<llm::KVCacheType>(t))
      mesh.kv_heads = cache.getKvHeads();
  for (int64_t r = 0; r < mesh.tp; ++r)
    mesh.ranks.push_back(
        {files.prefix + "weights/rank" + std::to_string(files.stage * mesh.tp + r) + ".bin", 0,
         ""});
  return mesh;
}

// The number of layers (KV caches) `module`'s @step runs.
int64_t numLayersOf(ModuleOp module) {
  return llvm::count_if(module.lookupSymbol<func::FuncOp>("step").getArgumentTypes(),
                        [](Type t) { return isa<llm::KVCacheType>(t); });
}

// TP rank r's weight file (r >= 1): the same tensors as TP rank 0's, in the
// same order, each its rank-r slice; split weights have equal slices on every
// rank, so the layout (m.weights.tensors) is shared. TP rank 0's entry comes
// from m.weights.
absl::Status packOtherRanks(WeightStore &store, const std::vector<llm::WeightOp> &packed,
                            Manifest &m, const std::string &tmp) {
  m.mesh.ranks[0].weights_size = m.weights.size;
  m.mesh.ranks[0].weights_checksum = m.weights.checksum;
  for (int64_t r = 1; r < m.mesh.tp; ++r) {
    ManifestMeshRank &rank = m.mesh.ranks[size_t(r)];
    WeightFileWriter writer;
    LLMC_RETURN_IF_ERROR(writer.Open(tmp + "/" + rank.weights_file));
    for (llm::WeightOp op : packed) {
      LLMC_ASSIGN_OR_RETURN(WeightStore::Bytes raw, store.materialize(op, r));
      llm::WeightType t = op.getType();
      std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
      LLMC_ASSIGN_OR_RETURN(ManifestTensor entry,
                            writer.Add(op.getName().str(),
                                       llm::stringifyWeightFormat(t.getFormat()).str(), shape,
                                       t.getGroup(), raw.data, raw.size));
      (void)entry;
    }
    ManifestWeights weights;
    LLMC_RETURN_IF_ERROR(writer.Finish(&weights));
    if (weights.size != m.weights.size)
      return absl::InternalError(
          absl::StrFormat("rank %d's weight file holds %d bytes, rank 0's %d: their layouts differ",
                          r, weights.size, m.weights.size));
    rank.weights_size = weights.size;
    rank.weights_checksum = weights.checksum;
  }
  return absl::OkStatus();
}

// One program's files (a whole artifact's, or one pipeline stage's) under
// `files`: the host kernels and their library, the CUDA kernels, the weight
// file of every TP rank. Returns its manifest less what the stages share
// (the model, the tokenizer: see finishManifest).
absl::StatusOr<Manifest> buildStage(ModuleOp module, const ImportedModel *model,
                                    const ArtifactOptions &options, const std::string &tmp,
                                    const StageFiles &files) {
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
  std::string srcDir = files.dir + "kernels/host/src";
  LLMC_RETURN_IF_ERROR(makeArtifactDir(srcDir));
  LLMC_RETURN_IF_ERROR(writeArtifactFile(srcDir + "/kernels.cpp", plan->source));
  for (const EmbeddedFile &f : kHostKernelFiles)
    LLMC_RETURN_IF_ERROR(writeArtifactFile(srcDir + "/" + f.name, f.text));
  progress(absl::StrFormat("building %d host kernels (-march=%s)%s", plan->kernels.size(),
                           options.hostCpu,
                           files.stage > 0 ? " of stage " + std::to_string(files.stage) : ""));
  LLMC_RETURN_IF_ERROR(
      buildHostLibrary(srcDir, plan->source, files.dir + "kernels/host/kernels.so", options));

  // Weights, in the order the step plan first binds them.
  llvm::StringMap<llm::WeightOp> weightOps;
  module.walk([&](llm::WeightOp w) { weightOps.try_emplace(w.getName(), w); });
  bool dummy = options.dummySeed != 0;
  if (!dummy && !model)
    return absl::InvalidArgumentError("built-in models have no weights: an artifact of one needs "
                                      "dummy weights (--dummy-weights=FORMAT)");
  std::optional<WeightStore> store;
  if (!dummy)
    store.emplace(*model);
  Manifest m;
  m.mesh = meshOf(module, files);
  const std::string weightFile =
      m.mesh.ranks.empty() ? "weights/rank0.bin" : m.mesh.ranks[0].weights_file;
  WeightFileWriter writer;
  if (dummy)
    LLMC_RETURN_IF_ERROR(writer.OpenDummy(options.dummySeed));
  else
    LLMC_RETURN_IF_ERROR(writer.Open(tmp + "/" + weightFile));
  llvm::StringMap<int64_t> tensorIndex;
  std::vector<llm::WeightOp> packed; // by tensor index, for the other ranks' files
  // A weight's index in the file, packing it (rank 0's slice) on first use.
  auto weightIndex = [&](const std::string &name) -> absl::StatusOr<int64_t> {
    auto [it, inserted] = tensorIndex.try_emplace(name, int64_t(tensorIndex.size()));
    if (inserted) {
      llm::WeightOp op = weightOps.lookup(name);
      if (!op)
        return absl::InternalError(absl::StrFormat("no llm.weight op names '%s'", name));
      packed.push_back(op);
      WeightStore::Bytes raw;
      if (dummy) {
        LLMC_ASSIGN_OR_RETURN(raw.size, weightBytes(op)); // raw.data stays null: nothing to write
      } else {
        LLMC_ASSIGN_OR_RETURN(raw, store->materialize(op));
      }
      llm::WeightType t = op.getType();
      std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
      LLMC_ASSIGN_OR_RETURN(ManifestTensor entry,
                            writer.Add(name, llm::stringifyWeightFormat(t.getFormat()).str(), shape,
                                       t.getGroup(), raw.data, raw.size));
      (void)entry;
    }
    return it->second;
  };
  LLMC_ASSIGN_OR_RETURN(m.steps, toManifestSteps(plan->launches, weightIndex));
  if (!options.cudaArchs.empty()) {
    CudaArtifactOptions cudaOptions;
    cudaOptions.archs = options.cudaArchs;
    cudaOptions.emit.activationType = options.cudaActivations;
    cudaOptions.emit.wgmma = archsHaveWgmma(options.cudaArchs);
    cudaOptions.useCache = options.useCache;
    cudaOptions.progress = options.progress;
    LLMC_RETURN_IF_ERROR(buildCudaArtifact(module, cudaOptions, files.dir, weightIndex, m.cuda));
    for (ManifestCudaModule &mod : m.cuda.modules)
      mod.file = files.prefix + mod.file;
  }
  progress(absl::StrFormat(dummy ? "laying out %d dummy weights" : "packing %d weights",
                           tensorIndex.size()));
  LLMC_RETURN_IF_ERROR(writer.Finish(&m.weights));
  if (!dummy)
    m.weights.file = weightFile;
  if (!m.mesh.ranks.empty()) {
    if (dummy)
      return absl::UnimplementedError("--dummy-weights cannot be split over ranks (--tp, --pp)");
    if (m.mesh.tp > 1)
      progress(absl::StrFormat("packing the weight slices of TP ranks 1-%d", m.mesh.tp - 1));
    LLMC_RETURN_IF_ERROR(packOtherRanks(*store, packed, m, tmp));
  }
  auto cache = module.lookupSymbol<func::FuncOp>("step").getArgumentTypes().back();
  auto kvType = dyn_cast<llm::KVCacheType>(cache);
  m.kv_dtype = kvType ? dtypeOf(kvType.getElementType()) : "f32";
  m.activation_dtype = m.kv_dtype;
  m.buffers = plan->buffers;
  m.kernels = plan->kernels;
  m.logits_buffer = plan->logitsBuffer;
  m.host_library = files.prefix + "kernels/host/kernels.so";
  return m;
}

// What every stage's manifest shares: the model, the tokenizer (written
// once, at the root, when `tokenizer` is empty), the targets.
absl::Status finishManifest(Manifest &m, const ModelConfig &config, const std::string &source,
                            const ImportedModel *model, const ArtifactOptions &options,
                            const std::string &tmp, std::string &tokenizer) {
  if (tokenizer.empty()) {
    std::string tokDir = tmp + "/tokenizer";
    LLMC_RETURN_IF_ERROR(makeArtifactDir(tokDir));
    if (model) {
      LLMC_ASSIGN_OR_RETURN(tokenizer, model->exportTokenizer(tokDir));
    } else {
      LLMC_ASSIGN_OR_RETURN(tokenizer, writeSyntheticTokenizer(tokDir, config.vocab_size));
    }
  }

  m.host_abi_version = LLMC_HOST_ABI_VERSION;
  m.compiler = "llmc 0.1";
  m.source = source;
  m.model = config;
  m.targets = {"host"};
  m.targets.insert(m.targets.end(), options.cudaArchs.begin(), options.cudaArchs.end());
  m.tokenizer = "tokenizer/" + tokenizer;
  return absl::OkStatus();
}

absl::Status build(llvm::ArrayRef<ModuleOp> stages, const ModelConfig &config,
                   const std::string &source, const ImportedModel *model,
                   const ArtifactOptions &options, const std::string &tmp) {
  std::vector<Manifest> manifests;
  std::string tokenizer;
  std::vector<ManifestStage> layers;
  for (auto [s, module] : llvm::enumerate(stages)) {
    StageFiles files = stageFiles(tmp, int64_t(s));
    LLMC_ASSIGN_OR_RETURN(Manifest m, buildStage(module, model, options, tmp, files));
    LLMC_RETURN_IF_ERROR(finishManifest(m, config, source, model, options, tmp, tokenizer));
    int64_t first = layers.empty() ? 0 : layers.back().first_layer + layers.back().num_layers;
    layers.push_back({files.prefix + kManifestFile, first, numLayersOf(module)});
    manifests.push_back(std::move(m));
  }
  if (stages.size() > 1)
    for (Manifest &m : manifests)
      m.mesh.stages = layers;
  // Stage 0's manifest, at the root, goes last: a directory without it is
  // never taken for an artifact.
  for (size_t s = manifests.size(); s-- > 0;)
    LLMC_RETURN_IF_ERROR(WriteManifest(tmp, manifests[s], layers[s].manifest));
  return absl::OkStatus();
}

} // namespace

absl::Status buildArtifact(llvm::ArrayRef<ModuleOp> stages, const ModelConfig &config,
                           const std::string &source, const ImportedModel *model,
                           const ArtifactOptions &options) {
  std::string tmp = ArtifactTempDir(options.output);
  absl::Status st = build(stages, config, source, model, options, tmp);
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
