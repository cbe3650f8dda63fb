#include "llmc/runtime/exec/cuda_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/gemm_tuning.h"
#include "llmc/runtime/exec/kv_sizing.h"

namespace llmc {
namespace {

// LaunchProfiled's mark for an entry that is no kernel (a collective).
constexpr size_t kNoKernel = std::numeric_limits<size_t>::max();

// $LLMC_NCCL_TIMEOUT: seconds a partitioned step may wait for its
// collectives (30 by default, the host backend's MPI deadline).
absl::StatusOr<double> CollectiveTimeout() {
  const char* text = std::getenv("LLMC_NCCL_TIMEOUT");
  if (text == nullptr || *text == '\0') return 30.0;
  char* end = nullptr;
  double s = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(s > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("LLMC_NCCL_TIMEOUT: '", text, "' is not a positive number of seconds"));
  return s;
}

// The fewest of `value` over a partitioned world's ranks (a collective at
// load): every rank's KV cache has as many blocks, since rank 0's
// scheduler hands out block ids for all, and every tensor-parallel rank
// replays the same CUDA graphs, whose collectives must match. Sized by each
// GPU's free memory, the ranks' own counts may differ.
absl::StatusOr<int64_t> FewestOfWorld(int64_t value, Communicator* world, const char* what) {
  if (world == nullptr || world->size() <= 1) return value;
  constexpr int64_t kExact = int64_t{1} << 24;  // floats carry the counts
  if (value > kExact)
    return absl::InvalidArgumentError(
        absl::StrFormat("%d %s on one rank: more than the %d a partitioned world agrees on", value,
                        what, kExact));
  std::vector<float> all(size_t(world->size()), 0.f);
  const float mine = float(value);
  LLMC_RETURN_IF_ERROR(world->AllGather(&mine, all.data(), 1));
  return int64_t(*std::min_element(all.begin(), all.end()));
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return text.str();
}

}  // namespace

CudaRunner::~CudaRunner() {
  if (!device_) return;
  (void)device_->MakeCurrent();
  (void)device_->Synchronize();  // nothing of ours may still be in flight
  DropGraphs();
  nccl_.reset();  // its graphs are gone, its work is done
  for (cuda::CUevent e : events_) (void)device_->api().cuEventDestroy(e);
  for (StepSlot& slot : slots_)
    if (slot.done) (void)device_->api().cuEventDestroy(slot.done);
  for (cuda::CUevent e : collective_events_) (void)device_->api().cuEventDestroy(e);
  cublaslt_.reset();
  for (cuda::CUdeviceptr p : allocations_) (void)device_->memory().Free(p);
  module_.reset();
}

std::string CudaRunner::CublasLtVersion() const { return cublaslt_ ? cublaslt_->version() : ""; }

absl::Status CudaRunner::SetGemmPolicy(const GemmPolicy& policy) {
  if (policy.mode != GemmPolicy::Mode::kOwn && !cublaslt_)
    return absl::FailedPreconditionError(
        "a GEMM policy with cuBLASLt needs a runner created with --gemm=cublaslt or auto");
  const ManifestCuda& c = artifact_->manifest().cuda;
  for (size_t k = 0; k < c.kernels.size(); ++k)
    if (policy.MayUseCublasLt(c, k) && !gemm_functions_[k][0])
      return absl::FailedPreconditionError(absl::StrCat(
          "a GEMM policy with cuBLASLt for kernel ", c.kernels[k].name,
          ", whose operands this runner did not allocate (its tuning kept it on its own GEMM)"));
  gemm_policy_ = policy;
  if (graphs_.empty()) return absl::OkStatus();
  // The graphs hold the old policy's launches.
  LLMC_RETURN_IF_ERROR(device_->Synchronize());
  return CaptureGraphs();
}

std::string CudaRunner::ExecutionSummary() const {
  std::string gemms;
  if (cublaslt_)
    gemms = absl::StrCat(
        ", GEMMs by ",
        gemm_policy_.mode != GemmPolicy::Mode::kTuned ? "cuBLASLt"
        : gemm_tuning_source_ == "predicted"          ? "llmc tune --predict's choice"
                                                      : "llmc tune's choice",
        " (cuBLASLt ", cublaslt_->version(), ")");
  else if (!gemm_note_.empty())
    gemms = ", " + gemm_note_;
  std::string ranks;
  if (nccl_)
    ranks = absl::StrFormat(", rank %d of %d, collectives by NCCL %s", nccl_->rank(), nccl_->size(),
                            nccl_->api().VersionString());
  std::string graphs;
  if (options_.cuda_graphs && graphs_.empty())
    graphs = ", no CUDA graphs (none captured within --cuda-graph-memory, or no decode step)";
  if (!graphs_.empty()) {
    size_t bytes = 0;
    for (const Graph& g : graphs_) bytes += g.bytes;
    graphs = absl::StrFormat(", decode steps of 1 to %d sequences as CUDA graphs (%d buckets, "
                             "%.1f MiB)",
                             graphs_.back().bucket, graphs_.size(), double(bytes) / (1 << 20));
  }
  return absl::StrFormat("CUDA %s on %s%s%s%s%s", target_, device_->info().Summary(), ranks,
                         graphs, options_.pdl ? ", programmatic dependent launch" : "", gemms);
}

void CudaRunner::DestroyGraph(const Graph& g) {
  const cuda::DriverApi& api = device_->api();
  if (g.exec) (void)api.cuGraphExecDestroy(g.exec);
  if (g.graph) (void)api.cuGraphDestroy(g.graph);
}

void CudaRunner::DropGraphs() {
  for (const Graph& g : graphs_) DestroyGraph(g);
  graphs_.clear();
}

absl::Status CudaRunner::Allocate(size_t bytes, const char* what, cuda::CUdeviceptr* out) {
  auto p = device_->memory().Allocate(bytes);
  if (!p.ok())
    return absl::Status(p.status().code(),
                        absl::StrFormat("cannot allocate %d bytes of device memory for %s: %s",
                                        bytes, what, p.status().message()));
  allocations_.push_back(*p);
  *out = *p;
  // Fresh memory is zero, as the host runner's is: the KV cache must be
  // (attention reads whole blocks), the rest for reproducible runs.
  const cuda::DriverApi& api = device_->api();
  LLMC_CUDA_RETURN_IF_ERROR(api, cuMemsetD8Async(*p, 0, bytes, device_->stream()));
  return absl::OkStatus();
}

absl::Status CudaRunner::Grow(size_t bytes, const char* what, cuda::CUdeviceptr* area,
                              size_t* capacity) {
  if (bytes <= *capacity && *area != 0) return absl::OkStatus();
  if (*area != 0) {
    // A step in flight may still use it.
    LLMC_RETURN_IF_ERROR(device_->Synchronize());
    (void)device_->memory().Free(*area);
    allocations_.erase(std::find(allocations_.begin(), allocations_.end(), *area));
    *area = 0;
  }
  *capacity = std::max(bytes, 2 * *capacity);
  return Allocate(*capacity, what, area);
}

absl::StatusOr<std::unique_ptr<CudaRunner>> CudaRunner::Create(
    const Artifact& artifact, const RunnerOptions& options, const std::string& target,
    std::unique_ptr<cuda::CudaDevice> device) {
  const Manifest& m = artifact.manifest();
  const ManifestCuda& c = m.cuda;
  const ModelConfig& config = m.model;
  if (!device) return absl::InvalidArgumentError("CudaRunner: no device");
  // A partitioned artifact runs as one rank of a world of tp * pp ranks.
  LLMC_RETURN_IF_ERROR(CheckRankWorld(artifact, options));
  const bool partitioned = m.mesh.tp * m.mesh.pp > 1;
  if (c.modules.empty())
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the artifact has no CUDA kernels (targets: %s)", artifact.dir(),
                        absl::StrJoin(m.targets, ", ")));
  if (c.cuda_abi_version != LLMC_CUDA_ABI_VERSION)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: CUDA kernels use ABI version %d, this runtime speaks %d; recompile the model",
        artifact.dir(), c.cuda_abi_version, LLMC_CUDA_ABI_VERSION));
  int64_t elem = CudaActivationBytes(c.activation_dtype);
  if (elem == 0)
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: CUDA activation type '%s' is not bf16, f16 or f32", artifact.dir(),
                        c.activation_dtype));

  auto runner = std::unique_ptr<CudaRunner>(new CudaRunner());
  runner->device_ = std::move(device);
  runner->artifact_ = &artifact;
  runner->target_ = target;
  runner->options_ = options;
  RunnerOptions& o = runner->options_;
  if (o.max_batch_tokens <= 0)
    return absl::InvalidArgumentError("max_batch_tokens must be positive");
  if (o.max_logits <= 0) o.max_logits = o.max_batch_tokens;
  if (o.block_size <= 0) return absl::InvalidArgumentError("block_size must be positive");
  runner->vocab_ = config.vocab_size;
  if (o.pdl && !runner->device_->api().cuLaunchKernelEx)
    return absl::FailedPreconditionError(absl::StrFormat(
        "--pdl: the CUDA driver %s lacks cuLaunchKernelEx (programmatic dependent launch); "
        "update the NVIDIA driver or run without --pdl",
        runner->device_->api().path()));
  if (o.pdl && runner->device_->info().sm_major < 9)
    return absl::FailedPreconditionError(absl::StrFormat(
        "--pdl: programmatic dependent launch needs sm_90 or newer; %s is sm_%d%d",
        runner->device_->info().name, runner->device_->info().sm_major,
        runner->device_->info().sm_minor));
  if (o.cuda_graphs && !runner->device_->api().has_graphs())
    return absl::FailedPreconditionError(absl::StrFormat(
        "--cuda-graphs: the CUDA driver %s lacks the graph functions (cuStreamBeginCapture_v2, "
        "cuGraphInstantiateWithFlags, cuGraphLaunch, ...); update the NVIDIA driver or run "
        "without --cuda-graphs",
        runner->device_->api().path()));
  LLMC_RETURN_IF_ERROR(runner->device_->MakeCurrent());

  LLMC_ASSIGN_OR_RETURN(runner->parsed_, ParseCudaLaunches(c));
  // Before the module and the buffers: NCCL's own device memory then counts
  // in what the KV cache leaves free.
  if (partitioned) LLMC_RETURN_IF_ERROR(runner->SetUpCollectives());
  LLMC_RETURN_IF_ERROR(runner->LoadModule());

  // Buffers: those the CUDA plan binds, and the logits.
  std::set<int64_t> used;
  if (m.logits_buffer >= 0) used.insert(m.logits_buffer);  // a stage before the last has none
  for (const ManifestStep& s : c.steps) used.insert(s.buffers.begin(), s.buffers.end());
  CudaBindings& bind = runner->bindings_;
  bind.buffers.assign(m.buffers.size(), 0);
  for (int64_t b : used) {
    int64_t bytes = CudaBufferBytes(m, size_t(b), o.max_batch_tokens, o.max_logits);
    std::string what = absl::StrFormat("buffer '%s'", m.buffers[size_t(b)].name);
    LLMC_RETURN_IF_ERROR(runner->Allocate(size_t(bytes), what.c_str(), &bind.buffers[size_t(b)]));
  }
  // The all-gathers' scratch: every rank's rows, rank-major.
  for (const CudaCollective& col : runner->collectives_) {
    cuda::CUdeviceptr p = 0;
    if (col.kind == CudaCollective::Kind::kAllGather) {
      int64_t rows = col.logits_rows ? o.max_logits : o.max_batch_tokens;
      std::string what = absl::StrFormat("the gathered rows of %s", col.Describe());
      LLMC_RETURN_IF_ERROR(
          runner->Allocate(size_t(GatherScratchBytes(col, rows, m.mesh.tp)), what.c_str(), &p));
    }
    runner->gather_scratch_.push_back(p);
  }
  // Sized now, after the buffers and before the weights are uploaded
  // (UploadWeights, below): a fraction of what the buffers and the weights
  // leave free.
  LLMC_RETURN_IF_ERROR(runner->AllocateKvCache(elem));
  // Enough for any decode step; a larger step grows it (Step).
  LaunchVars decode{.tokens = 1, .logits = 1, .queries = 1, .seqs = 1};
  int64_t scratch = StepScratchFloats(c, runner->parsed_, decode, o.num_blocks * o.block_size);
  LLMC_RETURN_IF_ERROR(runner->Grow(size_t(scratch) * sizeof(float), "the step scratch",
                                    &bind.scratch, &runner->scratch_bytes_));
  // The split-K GEMMs' tickets, for the largest step: zeroed here once, and
  // each tile's last block zeroes its own again (gemm_split).
  const LaunchVars most{.tokens = o.max_batch_tokens, .logits = o.max_logits,
                        .queries = o.max_batch_tokens, .seqs = o.max_batch_tokens};
  if (const int64_t tickets = SplitGemmTickets(c, runner->parsed_, most); tickets > 0)
    LLMC_RETURN_IF_ERROR(runner->Allocate(size_t(tickets) * sizeof(int32_t),
                                          "the split-K GEMMs' tickets", &bind.tickets));
  LLMC_RETURN_IF_ERROR(runner->UploadWeights());
  LLMC_RETURN_IF_ERROR(runner->SetUpGemms());
  for (const ManifestStep& s : c.steps) {
    LLMC_ASSIGN_OR_RETURN(llmc_cuda_args args, PackArgs(m, s, bind));
    runner->args_.push_back(args);
  }
  // The first slot's outputs now; the second's when a step overlaps one.
  StepSlot& first = runner->slots_[0];
  LLMC_ASSIGN_OR_RETURN(first.logits, runner->device_->AllocPinned(
                                          size_t(o.max_logits * runner->vocab_) * sizeof(float)));
  if (runner->sampler_) {
    const size_t bytes = size_t(o.max_logits) * sizeof(int32_t);
    LLMC_RETURN_IF_ERROR(runner->Allocate(bytes, "the picked token ids", &runner->device_picked_));
    LLMC_ASSIGN_OR_RETURN(first.picked, runner->device_->AllocPinned(bytes));
    const size_t lp_bytes =
        size_t(o.max_logits) * size_t(1 + kMaxPickLogprobs) * sizeof(PickLogprob);
    LLMC_RETURN_IF_ERROR(
        runner->Allocate(lp_bytes, "the picks' logprobs", &runner->device_logprobs_));
    LLMC_ASSIGN_OR_RETURN(first.logprobs, runner->device_->AllocPinned(lp_bytes));
  }
  // Last: a graph bakes in the pointers of everything above.
  if (o.cuda_graphs && runner->transfers_.empty()) LLMC_RETURN_IF_ERROR(runner->CaptureGraphs());
  LLMC_RETURN_IF_ERROR(runner->device_->Synchronize());
  return runner;
}

absl::Status CudaRunner::AllocateKvCache(int64_t elem) {
  const Manifest& m = artifact_->manifest();
  const ModelConfig& config = m.model;
  RunnerOptions& o = options_;
  const bool partitioned = m.mesh.tp * m.mesh.pp > 1;
  // A rank's cache holds only its own KV heads (mesh.kv_heads) of its own
  // layers (a pipeline stage's).
  const int64_t kv_heads = partitioned ? m.mesh.kv_heads : config.num_kv_heads;
  const CacheLayers layers = CacheLayersOf(m);
  size_t free_bytes = 0, total_bytes = 0;
  if (device_->api().cuMemGetInfo(&free_bytes, &total_bytes) != cuda::kCudaSuccess) free_bytes = 0;
  const auto& weight_file = artifact_->weight_file();
  const size_t weight_bytes = weight_file ? weight_file->size() : 0;
  free_bytes = free_bytes > weight_bytes ? free_bytes - weight_bytes : 0;
  // The CUDA graphs captured after it may take this much (CaptureGraphs).
  if (o.cuda_graphs && transfers_.empty()) {
    const size_t budget = size_t(std::max<int64_t>(0, o.cuda_graph_memory));
    free_bytes = free_bytes > budget ? free_bytes - budget : 0;
  }
  LLMC_ASSIGN_OR_RETURN(
      o.num_blocks,
      KvCacheBlocks(o,
                    KvBytesPerBlock(layers.sizing, kv_heads, config.head_dim, o.block_size, elem),
                    config.max_position, int64_t(free_bytes)));
  if (partitioned) {
    LLMC_ASSIGN_OR_RETURN(o.num_blocks, FewestOfWorld(o.num_blocks, RankWorld(o), "KV blocks"));
  }
  int64_t cache_bytes = o.num_blocks * o.block_size * kv_heads * config.head_dim * elem;
  for (int64_t l = 0; l < 2 * layers.held; ++l) {
    cuda::CUdeviceptr p = 0;
    auto st = Allocate(size_t(cache_bytes), "the KV cache", &p);
    if (!st.ok())
      return absl::Status(st.code(),
                          absl::StrFormat("%s (layer %d: %d blocks of %d tokens); lower "
                                          "--ctx",
                                          st.message(), l / 2, o.num_blocks, o.block_size));
    bindings_.caches.push_back(p);
    kv_cache_bytes_ += cache_bytes;
  }
  return absl::OkStatus();
}

absl::Status CudaRunner::SetUpCollectives() {
  const Manifest& m = artifact_->manifest();
  const ManifestCuda& c = m.cuda;
  const int64_t ranks = m.mesh.tp;
  LLMC_ASSIGN_OR_RETURN(collective_timeout_s_, CollectiveTimeout());
  collective_of_step_.assign(c.steps.size(), -1);
  transfer_of_step_.assign(c.steps.size(), -1);
  const int tp_rank = options_.communicator ? options_.communicator->rank() : 0;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const std::string& kind = c.steps[i].collective;
    if (kind.empty()) continue;
    if (kind == "send" || kind == "recv") {
      LLMC_ASSIGN_OR_RETURN(CudaTransfer t, MakeCudaTransfer(m, i, tp_rank));
      transfer_of_step_[i] = int(transfers_.size());
      transfers_.push_back(t);
      continue;
    }
    LLMC_ASSIGN_OR_RETURN(CudaCollective col, MakeCudaCollective(m, i, ranks));
    collective_of_step_[i] = int(collectives_.size());
    collectives_.push_back(col);
  }
  if (!transfers_.empty() && options_.pipeline == nullptr)
    return absl::InternalError("a pipeline stage's transfers need the world to send in");
  // A stage without tensor parallelism needs no NCCL.
  if (collectives_.empty()) return absl::OkStatus();
  const cuda::DriverApi& api = device_->api();
  for (size_t i = 0; i < collectives_.size(); ++i) {
    cuda::CUevent e = nullptr;
    LLMC_CUDA_RETURN_IF_ERROR(api, cuEventCreate(&e, cuda::kEventDisableTiming));
    collective_events_.push_back(e);
  }
  auto nccl = cuda::NcclApi::Get();
  if (!nccl.ok())
    return absl::Status(nccl.status().code(),
                        absl::StrFormat("%s is split over %d tensor-parallel ranks, whose "
                                        "collectives on GPUs need NCCL: %s",
                                        artifact_->dir(), ranks, nccl.status().message()));
  LLMC_ASSIGN_OR_RETURN(
      nccl_, NcclComm::Create(**nccl, *options_.communicator, device_->info().device_count));
  return absl::OkStatus();
}

absl::Status CudaRunner::LoadModule() {
  const Manifest& m = artifact_->manifest();
  const ManifestCudaModule* mod = nullptr;
  for (const ManifestCudaModule& candidate : m.cuda.modules)
    if (candidate.arch == target_) mod = &candidate;
  if (mod == nullptr)
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the artifact has no CUDA module for %s", artifact_->dir(), target_));
  std::string path = artifact_->Path(mod->file);
  LLMC_ASSIGN_OR_RETURN(std::string ptx, ReadWholeFile(path));
  std::string sum = ChecksumHex(reinterpret_cast<const uint8_t*>(ptx.data()), ptx.size());
  if (sum != mod->checksum)
    return absl::DataLossError(absl::StrCat(path, ": checksum mismatch (expected ", mod->checksum,
                                            ", got ", sum, "): the file is corrupt"));
  LLMC_ASSIGN_OR_RETURN(module_, device_->LoadPtx(ptx, path));
  functions_.assign(m.cuda.kernels.size(), {});
  for (size_t k = 0; k < m.cuda.kernels.size(); ++k)
    for (const ManifestCudaLaunch& l : m.cuda.kernels[k].launches) {
      LLMC_ASSIGN_OR_RETURN(cuda::CUfunction fn, module_->Function(l.symbol));
      functions_[k].push_back(fn);
    }
  // Only the last pipeline stage has logits to pick from.
  for (const ManifestCudaSampler& s : m.cuda.samplers) {
    if (m.logits_buffer < 0) break;
    if (s.kind == "sample") {
      LLMC_ASSIGN_OR_RETURN(sampler_, module_->Function(s.symbol));
      sampler_block_ = s.block;
    } else if (s.kind == "feed") {
      LLMC_ASSIGN_OR_RETURN(feeder_, module_->Function(s.symbol));
      feeder_block_ = s.block;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaRunner::SetUpGemms() {
  const Manifest& m = artifact_->manifest();
  const ManifestCuda& c = m.cuda;
  const std::string& mode = options_.gemm;
  // The generated GEMMs' A operands (their prologues' output), whatever
  // runs the GEMMs; cuBLASLt's below may need more.
  const int64_t elem = CudaActivationBytes(c.activation_dtype);
  int64_t a_bytes = 0;
  for (const ManifestCudaKernel& k : c.kernels)
    if (k.gemm.operand_k > 0)
      a_bytes = std::max(a_bytes, (k.gemm.operand_rows == "L" ? options_.max_logits
                                                               : options_.max_batch_tokens) *
                                      k.gemm.operand_k * elem);
  // Every way of keeping the generated GEMMs ends here.
  auto generated = [&](std::string note) {
    gemm_note_ = std::move(note);
    if (a_bytes == 0) return absl::OkStatus();
    return Allocate(size_t(a_bytes), "the GEMMs' A operand", &bindings_.gemm_a);
  };
  if (mode.empty() || mode == "llmc") return generated("");
  if (mode != "cublaslt" && mode != "auto")
    return absl::InvalidArgumentError(
        absl::StrCat("--gemm: '", mode, "' is not llmc, cublaslt or auto"));
  bool offered = false;
  for (const ManifestCudaKernel& k : c.kernels) offered |= k.gemm.n > 0;
  if (!offered)
    return generated(
        "the generated GEMMs (no GEMM has 16-bit activations, which cuBLASLt would take)");
  if (mode == "auto") {
    std::string path =
        options_.tune_file.empty() ? DefaultTuneFile(artifact_->dir()) : options_.tune_file;
    auto text = ReadWholeFile(path);
    if (!text.ok())
      return generated("the generated GEMMs (no tune file " + path +
                       "; run llmc tune, or llmc tune --predict without a GPU)");
    LLMC_ASSIGN_OR_RETURN(GemmTuning tuning, ParseGemmTuning(*text, path));
    if (!TuningAppliesTo(tuning, device_->info().name))
      return generated(absl::StrCat("the generated GEMMs (", path, " was ", tuning.source,
                                    " for ", tuning.device, ", this is ", device_->info().name,
                                    "; run llmc tune)"));
    gemm_policy_ = PolicyFromTuning(c, tuning);
    gemm_tuning_source_ = tuning.source;
  } else {
    gemm_policy_.mode = GemmPolicy::Mode::kCublasLt;
  }
  auto lt = cuda::CublasLt::Load();
  if (!lt.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("--gemm=", mode, ": ", lt.status().message()));
  cublaslt_ = *std::move(lt);

  // Operands for the largest GEMM: A in the activation type, D in f32.
  int64_t d_bytes = 0, b_bytes = 0;
  gemm_functions_.assign(c.kernels.size(), {nullptr, nullptr, nullptr});
  for (size_t k = 0; k < c.kernels.size(); ++k) {
    const ManifestCudaGemm& g = c.kernels[k].gemm;
    // A tuning that keeps a GEMM on its own kernel at every row count spares
    // its operands (the LM head's dequantized weight is the largest: 1 GB
    // of bf16 for Llama-3-8B).
    if (!gemm_policy_.MayUseCublasLt(c, k)) continue;
    int64_t rows = g.rows == "L" ? options_.max_logits : options_.max_batch_tokens;
    a_bytes = std::max(a_bytes, rows * g.k * elem);
    d_bytes = std::max(d_bytes, rows * g.n * int64_t(sizeof(float)));
    LLMC_ASSIGN_OR_RETURN(gemm_functions_[k][0], module_->Function(g.pre));
    LLMC_ASSIGN_OR_RETURN(gemm_functions_[k][1], module_->Function(g.epi));
    if (!g.deq.empty()) {
      // The weight dequantized for cuBLASLt, one GEMM's at a time.
      b_bytes = std::max(b_bytes, g.n * g.k * elem);
      LLMC_ASSIGN_OR_RETURN(gemm_functions_[k][2], module_->Function(g.deq));
    }
  }
  if (b_bytes > 0)
    LLMC_RETURN_IF_ERROR(Allocate(size_t(b_bytes), "cuBLASLt's dequantized weight (B operand)",
                                  &bindings_.gemm_b));
  LLMC_RETURN_IF_ERROR(Allocate(size_t(a_bytes), "cuBLASLt's A operand", &bindings_.gemm_a));
  LLMC_RETURN_IF_ERROR(Allocate(size_t(d_bytes), "cuBLASLt's f32 result", &bindings_.gemm_d));
  gemm_workspace_bytes_ = size_t{32} << 20;  // what cuBLASLt's Hopper kernels ask for at most
  return Allocate(gemm_workspace_bytes_, "cuBLASLt's workspace", &gemm_workspace_);
}

absl::Status CudaRunner::UploadWeights() {
  // The file as one copy: every tensor lands at its manifest offset from the
  // base (kWeightAlignment-aligned, as the kernels' vector loads need).
  const auto& file = artifact_->weight_file();
  if (!file || file->size() == 0) return absl::OkStatus();
  LLMC_RETURN_IF_ERROR(Allocate(file->size(), "the weights", &bindings_.weights));
  return device_->CopyToDevice(bindings_.weights, file->data(), file->size());
}

absl::Status CudaRunner::Launch(const SelectedLaunch& sel, llmc_cuda_step_info* info) {
  const ManifestCuda& c = artifact_->manifest().cuda;
  if (sel.kind == LaunchKind::kCollective) {
    if (const int t = transfer_of_step_[sel.step]; t >= 0)
      return RunTransfer(transfers_[size_t(t)], *info);
    return RunCollective(sel.step, *info);
  }
  size_t k = size_t(c.steps[sel.step].kernel);
  const llmc_cuda_args& args = args_[sel.step];
  const ManifestCudaGemm& gemm = c.kernels[k].gemm;
  if (sel.kind == LaunchKind::kGemmMatmul) {
    cuda::GemmType type =
        c.activation_dtype == "f16" ? cuda::GemmType::kF16 : cuda::GemmType::kBF16;
    absl::Status st =
        cublaslt_->Gemm(device_->stream(), type, sel.rows, gemm.n, gemm.k, uintptr_t(args.gemm_a),
                        uintptr_t(gemm.deq.empty() ? args.weights[gemm.weight] : args.gemm_b),
                        uintptr_t(args.gemm_d),
                        gemm_workspace_, gemm_workspace_bytes_);
    if (st.ok()) return st;
    return absl::Status(st.code(), absl::StrFormat("%s (CUDA step %d, %s)", st.message(), sel.step,
                                                   c.steps[sel.step].name));
  }
  cuda::CUfunction fn = sel.kind == LaunchKind::kKernel        ? functions_[k][sel.launch]
                        : sel.kind == LaunchKind::kGemmPre     ? gemm_functions_[k][0]
                        : sel.kind == LaunchKind::kGemmDequant ? gemm_functions_[k][2]
                                                               : gemm_functions_[k][1];
  const std::string& symbol = sel.kind == LaunchKind::kKernel
                                  ? c.kernels[k].launches[sel.launch].symbol
                              : sel.kind == LaunchKind::kGemmPre     ? gemm.pre
                              : sel.kind == LaunchKind::kGemmDequant ? gemm.deq
                                                                     : gemm.epi;
  void* params[] = {info, const_cast<llmc_cuda_args*>(&args)};
  const cuda::DriverApi& api = device_->api();
  cuda::CUresult r;
  if (options_.pdl) {
    // Every generated entry begins with griddepcontrol.wait, so it may be
    // placed before the kernel ahead of it has finished (cuda_runner.h).
    cuda::CUlaunchAttribute attr{};
    attr.id = cuda::kLaunchAttributeProgrammaticStreamSerialization;
    attr.value.programmaticStreamSerializationAllowed = 1;
    cuda::CUlaunchConfig config{};
    config.gridDimX = sel.grid[0], config.gridDimY = sel.grid[1], config.gridDimZ = sel.grid[2];
    config.blockDimX = unsigned(sel.block), config.blockDimY = 1, config.blockDimZ = 1;
    config.hStream = device_->stream();
    config.attrs = &attr;
    config.numAttrs = 1;
    r = api.cuLaunchKernelEx(&config, fn, params, nullptr);
  } else {
    r = api.cuLaunchKernel(fn, sel.grid[0], sel.grid[1], sel.grid[2], sel.block, 1, 1, 0,
                           device_->stream(), params, nullptr);
  }
  if (r == cuda::kCudaSuccess) return absl::OkStatus();
  return api.Check(
      r, absl::StrFormat("cuLaunchKernel(%s, grid [%d, %d, %d] x %d) of CUDA step %d (%s)", symbol,
                         sel.grid[0], sel.grid[1], sel.grid[2], sel.block, sel.step,
                         c.steps[sel.step].name));
}

absl::Status CudaRunner::LaunchFeeds(const StepBatch& batch, const StagingLayout& layout,
                                     cuda::CUdeviceptr step_arrays) {
  llmc_cuda_step_info feeds{};
  feeds.num_logits = int(batch.feeds.size());
  llmc_cuda_args args{};
  args.buffers[0] =
      reinterpret_cast<void*>(uintptr_t(step_arrays + layout.tokens * sizeof(int32_t)));
  args.buffers[1] = reinterpret_cast<void*>(uintptr_t(staging_ + layout.feeds * sizeof(int32_t)));
  args.buffers[2] = reinterpret_cast<void*>(uintptr_t(device_picked_));
  void* params[] = {&feeds, &args};
  const cuda::DriverApi& api = device_->api();
  const unsigned grid = unsigned((int64_t(batch.feeds.size()) + feeder_block_ - 1) / feeder_block_);
  cuda::CUresult r = api.cuLaunchKernel(feeder_, grid, 1, 1, unsigned(feeder_block_), 1, 1, 0,
                                        device_->stream(), params, nullptr);
  if (r != cuda::kCudaSuccess)
    return api.Check(r, absl::StrFormat("cuLaunchKernel of the token feed (%d feeds)",
                                        batch.feeds.size()));
  return absl::OkStatus();
}

absl::Status CudaRunner::LaunchPicks(const StepBatch& batch, const StagingLayout& layout,
                                     const llmc_cuda_step_info& info, StepSlot& slot) {
  const Manifest& m = artifact_->manifest();
  llmc_cuda_step_info picks = info;
  picks.num_logits = int(batch.picks.size());
  llmc_cuda_args args{};
  args.buffers[0] = reinterpret_cast<void*>(uintptr_t(bindings_.buffers[size_t(m.logits_buffer)]));
  args.buffers[1] = reinterpret_cast<void*>(uintptr_t(staging_ + layout.picks * sizeof(int32_t)));
  args.buffers[2] =
      reinterpret_cast<void*>(uintptr_t(staging_ + layout.masked_ids * sizeof(int32_t)));
  args.buffers[3] = reinterpret_cast<void*>(uintptr_t(device_picked_));
  args.buffers[4] = reinterpret_cast<void*>(uintptr_t(device_logprobs_));
  args.buffers[5] =
      reinterpret_cast<void*>(uintptr_t(staging_ + layout.penalties * sizeof(int32_t)));
  void* params[] = {&picks, &args};
  const cuda::DriverApi& api = device_->api();
  const unsigned grid = unsigned(batch.picks.size());
  cuda::CUresult r = api.cuLaunchKernel(sampler_, grid, 1, 1, unsigned(sampler_block_), 1, 1, 0,
                                        device_->stream(), params, nullptr);
  if (r != cuda::kCudaSuccess)
    return api.Check(r, absl::StrFormat("cuLaunchKernel of the device sampler (%d picks)", grid));
  const size_t picked_bytes = size_t(options_.max_logits) * sizeof(int32_t);
  LLMC_RETURN_IF_ERROR(EnsurePinned(picked_bytes, &slot.picked));
  LLMC_RETURN_IF_ERROR(device_->CopyToHost(slot.picked.data(), device_picked_,
                                           batch.picks.size() * sizeof(int32_t)));
  // Only the logprobs the picks asked for.
  if (const int64_t entries = batch.num_logprob_entries(); entries > 0) {
    LLMC_RETURN_IF_ERROR(EnsurePinned(size_t(options_.max_logits) *
                                          size_t(1 + kMaxPickLogprobs) * sizeof(PickLogprob),
                                      &slot.logprobs));
    LLMC_RETURN_IF_ERROR(device_->CopyToHost(slot.logprobs.data(), device_logprobs_,
                                             size_t(entries) * sizeof(PickLogprob)));
  }
  return absl::OkStatus();
}

absl::Status CudaRunner::EnsurePinned(size_t bytes, cuda::PinnedBuffer* buffer) {
  if (bytes <= buffer->bytes() && buffer->data() != nullptr) return absl::OkStatus();
  // The slot's last step was collected, so nothing copies into it now.
  LLMC_ASSIGN_OR_RETURN(*buffer, device_->AllocPinned(std::max(bytes, 2 * buffer->bytes())));
  return absl::OkStatus();
}

absl::Status CudaRunner::CopyUnpickedRows(const StepBatch& batch, int64_t rows, StepSlot& slot) {
  const cuda::CUdeviceptr logits = bindings_.buffers[size_t(artifact_->manifest().logits_buffer)];
  const size_t row_bytes = size_t(vocab_) * sizeof(float);
  size_t next_pick = 0;
  for (int64_t begin = 0; begin < rows;) {
    // Rows [begin, end) until the next picked one, in one copy.
    const int64_t end = next_pick < batch.picks.size() ? batch.picks[next_pick].row : rows;
    if (end > begin && slot.logits.bytes() < size_t(rows) * row_bytes)
      LLMC_RETURN_IF_ERROR(EnsurePinned(size_t(options_.max_logits) * row_bytes, &slot.logits));
    if (end > begin)
      LLMC_RETURN_IF_ERROR(device_->CopyToHost(slot.logits.as<float>() + begin * vocab_,
                                               logits + size_t(begin) * row_bytes,
                                               size_t(end - begin) * row_bytes));
    begin = end + 1;
    ++next_pick;
  }
  return absl::OkStatus();
}

absl::Status CudaRunner::LaunchProfiled(llmc_cuda_step_info* info) {
  const ManifestCuda& c = artifact_->manifest().cuda;
  const cuda::DriverApi& api = device_->api();
  event_kernels_.clear();
  size_t used = 0;
  auto record = [&](size_t kernel) -> absl::Status {
    if (used == events_.size()) {
      cuda::CUevent e = nullptr;
      LLMC_CUDA_RETURN_IF_ERROR(api, cuEventCreate(&e, 0));
      events_.push_back(e);
    }
    event_kernels_.push_back(kernel);
    LLMC_CUDA_RETURN_IF_ERROR(api, cuEventRecord(events_[used++], device_->stream()));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < selected_.size(); ++i) {
    const ManifestStep& entry = c.steps[selected_[i].step];
    if (i == 0 || selected_[i].step != selected_[i - 1].step)
      LLMC_RETURN_IF_ERROR(record(entry.collective.empty() ? size_t(entry.kernel) : kNoKernel));
    LLMC_RETURN_IF_ERROR(Launch(selected_[i], info));
  }
  return record(0);  // the end of the last entry
}

absl::Status CudaRunner::ReadProfile() {
  const cuda::DriverApi& api = device_->api();
  kernel_ms_.resize(artifact_->manifest().cuda.kernels.size(), 0.0);
  for (size_t i = 0; i + 1 < event_kernels_.size(); ++i) {
    if (event_kernels_[i] == kNoKernel) continue;  // a collective: no kernel of ours
    float ms = 0;
    LLMC_CUDA_RETURN_IF_ERROR(api, cuEventElapsedTime(&ms, events_[i], events_[i + 1]));
    kernel_ms_[event_kernels_[i]] += ms;
  }
  event_kernels_.clear();
  return absl::OkStatus();
}

absl::Status CudaRunner::CaptureGraphs() {
  DropGraphs();
  const Manifest& m = artifact_->manifest();
  const ManifestCuda& c = m.cuda;
  const int64_t block = options_.block_size;
  // The blocks of the longest context a sequence may reach: the cache's,
  // or the model's (a step past it runs launch by launch), and the splits
  // of that context.
  graph_columns_ = options_.num_blocks;
  if (m.model.max_position > 0)
    graph_columns_ = std::min(graph_columns_, (m.model.max_position + block - 1) / block);
  graph_columns_ = std::max<int64_t>(1, graph_columns_);
  graph_context_ = graph_columns_ * block;
  const std::vector<int64_t> buckets =
      CudaGraphBuckets(std::min(options_.max_batch_tokens, options_.max_logits));
  if (buckets.empty()) return absl::OkStatus();
  if (graph_staging_ == 0) {  // a recapture (SetGemmPolicy) keeps them
    const int64_t ints = PlanStaging(StepBatch{}, graph_columns_, buckets.back()).step_end;
    int64_t floats = 0;
    for (int64_t b : buckets)
      floats = std::max(floats, StepScratchFloats(c, parsed_, BucketLaunchVars(b), graph_context_));
    LLMC_RETURN_IF_ERROR(Allocate(size_t(ints) * sizeof(int32_t),
                                  "the CUDA graphs' step arrays", &graph_staging_));
    LLMC_RETURN_IF_ERROR(Allocate(size_t(floats) * sizeof(float),
                                  "the CUDA graphs' attention scratch", &graph_scratch_));
    LLMC_RETURN_IF_ERROR(device_->Synchronize());  // the zeroing, before any capture
  }
  // Largest first: the buckets past the budget are the small ones, whose
  // steps then pad to the smallest captured.
  const size_t budget = size_t(std::max<int64_t>(0, options_.cuda_graph_memory));
  size_t spent = 0;
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    LLMC_RETURN_IF_ERROR(CaptureGraph(*it));
    if (spent + graphs_.back().bytes > budget) {
      DestroyGraph(graphs_.back());
      graphs_.pop_back();
      break;
    }
    spent += graphs_.back().bytes;
  }
  std::reverse(graphs_.begin(), graphs_.end());
  if (nccl_) {
    // Every tensor-parallel rank replays the same bucket for a step: the
    // collectives inside must match.
    LLMC_ASSIGN_OR_RETURN(
        int64_t fewest, FewestOfWorld(int64_t(graphs_.size()), options_.communicator, "CUDA graphs"));
    while (int64_t(graphs_.size()) > fewest) {
      DestroyGraph(graphs_.front());
      graphs_.erase(graphs_.begin());
    }
  }
  return absl::OkStatus();
}

absl::Status CudaRunner::CaptureGraph(int64_t bucket) {
  const ManifestCuda& c = artifact_->manifest().cuda;
  const cuda::DriverApi& api = device_->api();
  cuda::CUstream stream = device_->stream();
  Graph g;
  g.bucket = bucket;
  const LaunchVars vars = BucketLaunchVars(bucket);
  const StagingLayout layout = PlanStaging(StepBatch{}, graph_columns_, bucket);
  g.info = MakeStepInfo(StepBatch{}, layout, graph_staging_, options_.block_size);
  LLMC_RETURN_IF_ERROR(SelectLaunches(c, parsed_, vars, graph_context_,
                                     kAttentionFillBlocksPerSm * device_->info().multiprocessors,
                                     &g.launches));
  ApplyGemmPolicy(c, gemm_policy_, vars, &g.launches, &selected_scratch_);
  size_t free_before = 0, free_after = 0, total = 0;
  if (api.cuMemGetInfo(&free_before, &total) != cuda::kCudaSuccess) free_before = 0;
  // The launches read the graphs' own scratch, not the eager steps' (which
  // grows).
  std::vector<float*> eager_scratch;
  for (llmc_cuda_args& a : args_) {
    eager_scratch.push_back(a.scratch);
    a.scratch = reinterpret_cast<float*>(uintptr_t(graph_scratch_));
  }
  // Captured launches do not run.
  absl::Status launched = api.Check(api.cuStreamBeginCapture(stream, cuda::kCaptureModeThreadLocal),
                                    "cuStreamBeginCapture (a decode step's CUDA graph)");
  if (launched.ok()) {
    capturing_ = true;
    llmc_cuda_step_info info = g.info;
    for (const SelectedLaunch& sel : g.launches) {
      launched = Launch(sel, &info);
      if (!launched.ok()) break;
    }
    capturing_ = false;
    cuda::CUresult r = api.cuStreamEndCapture(stream, &g.graph);
    if (launched.ok()) launched = api.Check(r, "cuStreamEndCapture (a decode step's CUDA graph)");
  }
  for (size_t i = 0; i < args_.size(); ++i) args_[i].scratch = eager_scratch[i];
  if (launched.ok())
    launched = api.Check(api.cuGraphInstantiateWithFlags(&g.exec, g.graph, 0),
                         absl::StrFormat("cuGraphInstantiateWithFlags (the CUDA graph of a decode "
                                         "step of %d sequences, %d launches)",
                                         bucket, g.launches.size()));
  if (!launched.ok()) {
    DestroyGraph(g);
    return launched;
  }
  if (api.cuMemGetInfo(&free_after, &total) == cuda::kCudaSuccess && free_after < free_before)
    g.bytes = free_before - free_after;
  graphs_.push_back(std::move(g));
  return absl::OkStatus();
}

const CudaRunner::Graph* CudaRunner::GraphFor(int64_t seqs) const {
  for (const Graph& g : graphs_)
    if (g.bucket >= seqs) return &g;
  return nullptr;
}

absl::Status CudaRunner::UploadGraphStep(const StepBatch& batch, const StagingLayout& layout,
                                         const int32_t* staged) {
  LLMC_RETURN_IF_ERROR(device_->CopyToDevice(graph_staging_, staged,
                                             size_t(layout.block_tables) * sizeof(int32_t)));
  if (batch.max_blocks > 0) {
    // The batch's rows of its own width, at the graph's row pitch.
    cuda::CUDA_MEMCPY2D p{};
    const size_t pitch = size_t(layout.block_columns) * sizeof(int32_t);
    p.srcMemoryType = cuda::kMemoryTypeHost;
    p.srcHost = staged + layout.block_tables;
    p.srcPitch = pitch;
    p.dstMemoryType = cuda::kMemoryTypeDevice;
    p.dstDevice = graph_staging_ + cuda::CUdeviceptr(layout.block_tables) * sizeof(int32_t);
    p.dstPitch = pitch;
    p.WidthInBytes = size_t(batch.max_blocks) * sizeof(int32_t);
    p.Height = size_t(batch.num_seqs());
    const cuda::DriverApi& api = device_->api();
    LLMC_RETURN_IF_ERROR(api.Check(
        api.cuMemcpy2DAsync(&p, device_->stream()),
        absl::StrFormat("cuMemcpy2DAsync_v2 (a CUDA graph step's block tables, %d rows of %d "
                        "blocks)",
                        batch.num_seqs(), batch.max_blocks)));
  }
  if (layout.total > layout.step_end)
    LLMC_RETURN_IF_ERROR(device_->CopyToDevice(
        staging_ + cuda::CUdeviceptr(layout.step_end) * sizeof(int32_t), staged + layout.step_end,
        size_t(layout.total - layout.step_end) * sizeof(int32_t)));
  return absl::OkStatus();
}

absl::Status CudaRunner::RunCollective(size_t step, const llmc_cuda_step_info& info) {
  const size_t i = size_t(collective_of_step_[step]);
  const CudaCollective& c = collectives_[i];
  const int64_t rows = c.logits_rows ? info.num_logits : info.num_tokens;
  const size_t count = size_t(CollectiveElements(c, rows));
  // Every rank runs the same batch, so all skip an empty one alike.
  if (count == 0) return absl::OkStatus();
  const cuda::DriverApi& api = device_->api();
  cuda::CUstream stream = device_->stream();
  const cuda::CUdeviceptr in = bindings_.buffers[c.in_buffer];
  const cuda::CUdeviceptr out = bindings_.buffers[c.out_buffer];
  absl::Status st;
  if (c.kind == CudaCollective::Kind::kAllReduceSum) {
    st = nccl_->AllReduceSum(in, out, count, c.in_elem, stream, c.Describe());
  } else {
    const cuda::CUdeviceptr gathered = gather_scratch_[i];
    st = nccl_->AllGather(in, gathered, count, c.in_elem, stream, c.Describe());
    // Each rank's piece becomes its columns of every output row.
    if (st.ok())
      for (const GatherCopy& g : PlanGatherCopies(c, rows, nccl_->size())) {
        cuda::CUDA_MEMCPY2D p{};
        p.srcMemoryType = cuda::kMemoryTypeDevice;
        p.srcDevice = gathered + cuda::CUdeviceptr(g.src_offset);
        p.srcPitch = size_t(g.src_pitch);
        p.dstMemoryType = cuda::kMemoryTypeDevice;
        p.dstDevice = out + cuda::CUdeviceptr(g.dst_offset);
        p.dstPitch = size_t(g.dst_pitch);
        p.WidthInBytes = size_t(g.width_bytes);
        p.Height = size_t(g.height);
        cuda::CUresult r = api.cuMemcpy2DAsync(&p, stream);
        if (r != cuda::kCudaSuccess) {
          st = api.Check(r, absl::StrFormat("cuMemcpy2DAsync_v2 (%d rows of %d bytes) of %s",
                                            g.height, g.width_bytes, c.Describe()));
          break;
        }
      }
  }
  if (!st.ok()) return CollectiveFailed(st);
  // Events tell which collective a stalled step waits on; a graph being
  // captured records none (its replays are waited on as a whole).
  if (!capturing_) LLMC_CUDA_RETURN_IF_ERROR(api, cuEventRecord(collective_events_[i], stream));
  return absl::OkStatus();
}

absl::Status CudaRunner::RunTransfer(const CudaTransfer& t, const llmc_cuda_step_info& info) {
  const size_t bytes = size_t(info.num_tokens * t.row_bytes);
  if (bytes == 0) return absl::OkStatus();
  if (bytes > transfer_host_.bytes()) {  // the last transfer synchronized: nothing in flight
    absl::StatusOr<cuda::PinnedBuffer> grown =
        device_->AllocPinned(std::max(bytes, 2 * transfer_host_.bytes()));
    if (!grown.ok()) return grown.status();
    transfer_host_ = *std::move(grown);
  }
  const cuda::CUdeviceptr rows = bindings_.buffers[t.buffer];
  auto failed = [&](const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat(st.message(), " in ", t.Describe()));
  };
  if (t.send) {
    // The rows must be computed before the host can send them.
    absl::Status st = device_->CopyToHost(transfer_host_.data(), rows, bytes);
    if (st.ok()) st = nccl_ ? WaitForCollectives(false) : device_->Synchronize();
    if (st.ok())
      st = options_.pipeline->Send(transfer_host_.data(), int64_t(bytes), t.peer_rank,
                                   Communicator::Channel::kActivations);
    return st.ok() ? st : failed(st);
  }
  absl::Status st = options_.pipeline->Recv(transfer_host_.data(), int64_t(bytes), t.peer_rank,
                                            Communicator::Channel::kActivations);
  // Synchronized: the host area is reused by the next transfer.
  if (st.ok()) st = device_->CopyToDevice(rows, transfer_host_.data(), bytes);
  if (st.ok()) st = device_->Synchronize();
  return st.ok() ? st : failed(st);
}

std::string CudaRunner::PendingCollectives(bool events_recorded) const {
  if (events_recorded) {
    const cuda::DriverApi& api = device_->api();
    for (size_t i = 0; i < collectives_.size(); ++i)
      if (api.cuEventQuery(collective_events_[i]) == cuda::kCudaErrorNotReady)
        return collectives_[i].Describe();
  }
  std::vector<std::string> steps;
  for (const CudaCollective& c : collectives_) steps.push_back(absl::StrCat(c.step));
  return absl::StrFormat("one of the step's collectives (CUDA steps %s)",
                         absl::StrJoin(steps, ", "));
}

absl::Status CudaRunner::CollectiveFailed(const absl::Status& status) {
  if (nccl_) nccl_->Abort();
  // The other ranks' collectives wait for this one's part: only ending the
  // world frees them (it returns when this process is no MPI rank).
  EndWorldOnError(status);
  return status;
}

absl::Status CudaRunner::WaitForCollectives(bool graph) {
  const cuda::DriverApi& api = device_->api();
  const auto start = std::chrono::steady_clock::now();
  constexpr int kSpins = 100;  // a step's work usually ends within these polls
  for (int polls = 0;; ++polls) {
    cuda::CUresult r = api.cuStreamQuery(device_->stream());
    if (r == cuda::kCudaSuccess) break;
    if (r != cuda::kCudaErrorNotReady)  // a launch failed: the peers would wait for this rank
      return CollectiveFailed(api.Check(r, "cuStreamQuery (a partitioned step's work)"));
    if (absl::Status async = nccl_->AsyncError(); !async.ok())
      return CollectiveFailed(absl::Status(
          async.code(),
          absl::StrCat(async.message(), " while waiting for ", PendingCollectives(!graph))));
    std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (waited.count() > collective_timeout_s_)
      return CollectiveFailed(absl::DeadlineExceededError(absl::StrFormat(
          "%s did not complete within %g s (LLMC_NCCL_TIMEOUT): another rank died or hangs",
          PendingCollectives(!graph), collective_timeout_s_)));
    if (polls >= kSpins)
      std::this_thread::sleep_for(std::chrono::microseconds(waited.count() > 0.01 ? 1000 : 50));
  }
  // A collective may fail and still let the stream finish.
  if (absl::Status async = nccl_->AsyncError(); !async.ok())
    return CollectiveFailed(absl::Status(
        async.code(), absl::StrCat(async.message(), " in ", PendingCollectives(false))));
  return absl::OkStatus();
}

absl::StatusOr<StepOutput> CudaRunner::Step(StepAccess key, const StepBatch& batch) {
  if (!submitted_.empty())
    return absl::FailedPreconditionError(
        "CudaRunner: Step while submitted steps wait to be collected");
  LLMC_RETURN_IF_ERROR(Submit(key, batch));
  return Collect(key);
}

absl::Status CudaRunner::Submit(StepAccess, const StepBatch& batch) {
  if (int64_t(submitted_.size()) >= max_steps_in_flight())
    return absl::FailedPreconditionError(absl::StrFormat(
        "CudaRunner: %d steps in flight already, the most it holds", submitted_.size()));
  LLMC_RETURN_IF_ERROR(
      ValidateStepBatch(batch, {options_.max_batch_tokens, options_.max_logits, options_.num_blocks,
                                options_.block_size, vocab_}));
  if (!batch.feeds.empty() && !feeds_tokens())
    return absl::InvalidArgumentError(
        "step batch: tokens fed from the step before, and this runner feeds none (the artifact "
        "lacks the token feed, or its steps cannot overlap)");
  for (size_t j = 0; j < batch.feeds.size(); ++j)
    if (batch.feeds[j].pick >= last_picks_)
      return absl::InvalidArgumentError(
          absl::StrFormat("step batch: feed %d reads pick %d of the step before, which had %d", j,
                          batch.feeds[j].pick, last_picks_));
  LLMC_RETURN_IF_ERROR(device_->MakeCurrent());
  Submitted step;
  step.slot = next_slot_;
  StepSlot& slot = slots_[step.slot];
  bool device_picks = false;
  last_picks_ = 0;  // a step that fails feeds nothing
  LLMC_RETURN_IF_ERROR(Enqueue(batch, slot, &device_picks));
  last_picks_ = int64_t(batch.picks.size());
  // A step whose every pick is made on the device overlaps the next; the
  // host's own picks need the batch, and wait here.
  step.overlapped = Overlaps() && device_picks;
  if (step.overlapped) {
    const cuda::DriverApi& api = device_->api();
    if (!slot.done)
      LLMC_CUDA_RETURN_IF_ERROR(api, cuEventCreate(&slot.done, cuda::kEventDisableTiming));
    LLMC_CUDA_RETURN_IF_ERROR(api, cuEventRecord(slot.done, device_->stream()));
  } else {
    step.out = Finish(batch, slot, device_picks);
  }
  // A step finished here still holds its slot's outputs until collected:
  // the next step, which may be submitted first, takes the other slot.
  if (Overlaps()) next_slot_ ^= 1;
  submitted_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<StepOutput> CudaRunner::Collect(StepAccess) {
  if (submitted_.empty())
    return absl::FailedPreconditionError("CudaRunner: Collect, and no step was submitted");
  Submitted step = std::move(submitted_.front());
  submitted_.pop_front();
  if (!step.overlapped) return std::move(step.out);
  StepSlot& slot = slots_[step.slot];
  // Errors of the launches surface here (the driver reports them late).
  const cuda::DriverApi& api = device_->api();
  LLMC_CUDA_RETURN_IF_ERROR(api, cuEventSynchronize(slot.done));
  return StepOutput{slot.logits.as<float>(), slot.picked.as<int32_t>(),
                    slot.logprobs.as<PickLogprob>()};
}

absl::Status CudaRunner::Enqueue(const StepBatch& batch, StepSlot& slot, bool* device_picks) {
  const Manifest& m = artifact_->manifest();
  // A decode step replays its bucket's graph, padded to it.
  const bool decode = IsGraphStep(batch);
  const Graph* graph =
      decode && batch.max_blocks <= graph_columns_ ? GraphFor(batch.num_seqs()) : nullptr;
  graph_step_ = graph != nullptr;
  const StagingLayout layout =
      graph ? PlanStaging(batch, graph_columns_, graph->bucket) : PlanStaging(batch);

  // One upload of the batch's arrays (a graph step's: three, UploadGraphStep);
  // the area grows (rarely: S and max_blocks vary).
  const size_t staging_bytes = size_t(layout.total) * sizeof(int32_t);
  if (staging_bytes > staging_bytes_ || staging_ == 0)
    LLMC_RETURN_IF_ERROR(Grow(staging_bytes, "the step's inputs", &staging_, &staging_bytes_));
  if (staging_bytes > slot.staging.bytes()) {
    // No upload may still read the old area (a step that failed midway
    // left its stream unsynchronized).
    LLMC_RETURN_IF_ERROR(device_->Synchronize());
    LLMC_ASSIGN_OR_RETURN(slot.staging,
                          device_->AllocPinned(std::max(staging_bytes, 2 * slot.staging.bytes())));
  }
  int32_t* staged = slot.staging.as<int32_t>();
  PackStaging(batch, layout, staged);
  const cuda::CUdeviceptr step_arrays = graph ? graph_staging_ : staging_;
  if (graph) {
    LLMC_RETURN_IF_ERROR(UploadGraphStep(batch, layout, staged));
  } else {
    LLMC_RETURN_IF_ERROR(device_->CopyToDevice(staging_, staged, staging_bytes));
  }
  if (!batch.feeds.empty()) LLMC_RETURN_IF_ERROR(LaunchFeeds(batch, layout, step_arrays));
  llmc_cuda_step_info info = MakeStepInfo(batch, layout, step_arrays, options_.block_size);
  // The batch's own rows of logits (a graph step computes its padding's too).
  const int64_t rows = int64_t(batch.logits_rows.size());

  if (graph) {
    if (!SameStepInfo(graph->info, info))
      return absl::InternalError(absl::StrFormat(
          "CudaRunner: a decode step of %d sequences does not match the step info of the CUDA "
          "graph of %d it replays",
          batch.num_seqs(), graph->bucket));
    const cuda::DriverApi& api = device_->api();
    LLMC_CUDA_RETURN_IF_ERROR(api, cuGraphLaunch(graph->exec, device_->stream()));
  } else {
    int64_t max_context = 0;
    for (int32_t len : batch.context_lens) max_context = std::max<int64_t>(max_context, len);
    // A prefill over a long context splits too: its partials may outgrow the
    // scratch, which every launch's args then point to anew (the graphs
    // have their own).
    LaunchVars vars = StepLaunchVars(batch);
    size_t scratch =
        size_t(StepScratchFloats(m.cuda, parsed_, vars, max_context)) * sizeof(float);
    if (scratch > scratch_bytes_) {
      LLMC_RETURN_IF_ERROR(
          Grow(scratch, "the step scratch", &bindings_.scratch, &scratch_bytes_));
      for (llmc_cuda_args& a : args_)
        a.scratch = reinterpret_cast<float*>(uintptr_t(bindings_.scratch));
    }
    // A decode step's splits are its bucket's (CudaGraphBucketOf), as if
    // replayed from the bucket's graph.
    LLMC_RETURN_IF_ERROR(SelectLaunches(
        m.cuda, parsed_, vars, max_context,
        kAttentionFillBlocksPerSm * device_->info().multiprocessors, &selected_,
        decode ? CudaGraphBucketOf(batch.num_seqs()) : 0));
    ApplyGemmPolicy(m.cuda, gemm_policy_, vars, &selected_, &selected_scratch_);
    if (options_.profile_kernels) {
      LLMC_RETURN_IF_ERROR(LaunchProfiled(&info));
    } else {
      for (const SelectedLaunch& sel : selected_) LLMC_RETURN_IF_ERROR(Launch(sel, &info));
    }
  }

  // A pipeline stage before the last has no logits. The picks' rows stay on
  // the device where it picks them.
  *device_picks = sampler_ != nullptr && !batch.picks.empty();
  if (*device_picks) {
    LLMC_RETURN_IF_ERROR(LaunchPicks(batch, layout, info, slot));
    LLMC_RETURN_IF_ERROR(CopyUnpickedRows(batch, rows, slot));
  } else if (m.logits_buffer >= 0) {
    const size_t bytes = size_t(rows * vocab_) * sizeof(float);
    LLMC_RETURN_IF_ERROR(EnsurePinned(bytes, &slot.logits));
    LLMC_RETURN_IF_ERROR(device_->CopyToHost(
        slot.logits.data(), bindings_.buffers[size_t(m.logits_buffer)], bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepOutput> CudaRunner::Finish(const StepBatch& batch, StepSlot& slot,
                                              bool device_picks) {
  const Manifest& m = artifact_->manifest();
  // A partitioned step waits with a deadline: a peer that died or hangs
  // would otherwise leave this stream (and Synchronize) waiting forever.
  if (nccl_) LLMC_RETURN_IF_ERROR(WaitForCollectives(graph_step_));
  // Errors of the launches surface here (the driver reports them late).
  LLMC_RETURN_IF_ERROR(device_->Synchronize());
  if (!event_kernels_.empty()) LLMC_RETURN_IF_ERROR(ReadProfile());
  if (m.logits_buffer < 0) return StepOutput{};
  if (device_picks)
    return StepOutput{slot.logits.as<float>(), slot.picked.as<int32_t>(),
                      slot.logprobs.as<PickLogprob>()};
  return host_picks_.Pick(batch, slot.logits.as<float>(), vocab_);
}

}  // namespace llmc
