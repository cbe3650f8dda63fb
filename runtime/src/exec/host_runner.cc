#include "llmc/runtime/exec/host_runner.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/exec/kv_sizing.h"

namespace llmc {

HostRunner::~HostRunner() {
  pool_.reset();
  for (const CacheRegion& c : caches_) munmap(c.data, c.bytes);
  if (library_ != nullptr) dlclose(library_);
}

std::string HostRunner::ExecutionSummary() const {
  const Communicator* comm = options_.pipeline ? options_.pipeline : options_.communicator;
  if (comm && comm->size() > 1)
    return absl::StrFormat("%d threads, rank %d of %d", threads(), comm->rank(), comm->size());
  return absl::StrFormat("%d threads", threads());
}

int64_t HostRunner::kv_cache_bytes() const {
  int64_t bytes = 0;
  for (const auto& c : caches_) bytes += int64_t(c.bytes);
  return bytes;
}

absl::StatusOr<std::unique_ptr<HostRunner>> HostRunner::Create(const Artifact& artifact,
                                                               const RunnerOptions& options) {
  const Manifest& m = artifact.manifest();
  const ModelConfig& c = m.model;
  if (std::find(m.targets.begin(), m.targets.end(), "host") == m.targets.end())
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the artifact has no host kernels (targets: %s)", artifact.dir(),
                        m.targets.empty() ? "none" : m.targets.front()));
  if (m.host_abi_version != LLMC_HOST_ABI_VERSION)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: host kernels use ABI version %d, this runtime speaks %d; recompile the model",
        artifact.dir(), m.host_abi_version, LLMC_HOST_ABI_VERSION));
  if (m.activation_dtype != "f32" || m.kv_dtype != "f32")
    return absl::UnimplementedError(absl::StrFormat(
        "%s: the host backend runs f32 activations and KV cache, the artifact has %s/%s",
        artifact.dir(), m.activation_dtype, m.kv_dtype));

  // A partitioned artifact runs as one rank of a world of tp * pp ranks.
  const ManifestMesh& mesh = m.mesh;
  LLMC_RETURN_IF_ERROR(CheckRankWorld(artifact, options));
  const int64_t kv_heads = mesh.tp * mesh.pp > 1 ? mesh.kv_heads : c.num_kv_heads;
  const CacheLayers layers = CacheLayersOf(m);

  auto runner = std::unique_ptr<HostRunner>(new HostRunner());
  runner->artifact_ = &artifact;
  runner->options_ = options;
  RunnerOptions& o = runner->options_;
  if (o.threads <= 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
  if (o.max_batch_tokens <= 0)
    return absl::InvalidArgumentError("max_batch_tokens must be positive");
  if (o.max_logits <= 0) o.max_logits = o.max_batch_tokens;
  if (o.block_size <= 0) return absl::InvalidArgumentError("block_size must be positive");
  LLMC_ASSIGN_OR_RETURN(
      o.num_blocks, KvCacheBlocks(o,
                                  KvBytesPerBlock(layers.sizing, kv_heads, c.head_dim, o.block_size,
                                                  int64_t(sizeof(float))),
                                  c.max_position, /*free_device_bytes=*/-1));
  runner->vocab_ = c.vocab_size;

  std::string lib = artifact.Path(m.host_library);
  runner->library_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (runner->library_ == nullptr)
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: cannot load host kernels: %s", lib, dlerror()));
  for (const ManifestKernel& k : m.kernels) {
    if (k.target != "host") {
      runner->kernels_.push_back(nullptr);
      continue;
    }
    void* sym = dlsym(runner->library_, k.symbol.c_str());
    if (sym == nullptr)
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: kernel '%s' (symbol %s) is missing from the host library", lib, k.name, k.symbol));
    runner->kernels_.push_back(reinterpret_cast<llmc_host_kernel_fn>(sym));
  }

  for (const ManifestBuffer& b : m.buffers) {
    int64_t rows = b.rows == "logits" ? o.max_logits : o.max_batch_tokens;
    runner->buffers_.emplace_back(size_t(rows * b.row_bytes / int64_t(sizeof(float))));
  }
  size_t cache_bytes = size_t(o.num_blocks * o.block_size * kv_heads * c.head_dim) * sizeof(float);
  for (int64_t l = 0; l < 2 * layers.held; ++l) {
    void* p =
        mmap(nullptr, cache_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot reserve %d bytes for the KV cache of layer %d (%d blocks of %d tokens); lower "
          "--ctx",
          cache_bytes, l / 2, o.num_blocks, o.block_size));
    runner->caches_.push_back({static_cast<float*>(p), cache_bytes});
  }

  for (size_t i = 0; i < m.steps.size(); ++i) {
    const ManifestStep& s = m.steps[i];
    Launch launch;
    if (!s.collective.empty()) {
      const int tp_rank = o.communicator ? o.communicator->rank() : 0;
      LLMC_ASSIGN_OR_RETURN(launch.collective, MakeHostCollective(m, i, runner->buffers_, tp_rank));
      runner->launches_.push_back(std::move(launch));
      continue;
    }
    launch.fn = runner->kernels_[size_t(s.kernel)];
    if (launch.fn == nullptr)
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: step uses kernel '%s', which has no host build", artifact.dir(),
                          m.kernels[size_t(s.kernel)].name));
    for (int64_t b : s.buffers) launch.buffers.push_back(runner->buffers_[size_t(b)].data());
    for (int64_t w : s.weights) launch.weights.push_back(artifact.weight_data(w));
    for (int64_t layer : s.caches) {
      if (layer < 0 || layer >= layers.held)
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: step binds KV cache %d of %d layers", artifact.dir(), layer, layers.held));
      launch.caches.push_back(runner->caches_[size_t(2 * layer)].data);
      launch.caches.push_back(runner->caches_[size_t(2 * layer + 1)].data);
    }
    runner->launches_.push_back(std::move(launch));
  }
  runner->pool_ = std::make_unique<ThreadPool>(o.threads);
  return runner;
}

absl::Status HostRunner::Validate(const StepBatch& b) const {
  return ValidateStepBatch(b, {options_.max_batch_tokens, options_.max_logits, options_.num_blocks,
                               options_.block_size, vocab_});
}

absl::StatusOr<StepOutput> HostRunner::Step(StepAccess, const StepBatch& batch) {
  LLMC_RETURN_IF_ERROR(Validate(batch));
  llmc_host_step_info info{};
  info.num_tokens = batch.num_tokens();
  info.num_seqs = batch.num_seqs();
  info.num_logits = int64_t(batch.logits_rows.size());
  info.tokens = batch.tokens.data();
  info.positions = batch.positions.data();
  info.query_starts = batch.query_starts.data();
  info.context_lens = batch.context_lens.data();
  info.block_tables = batch.block_tables.data();
  info.max_blocks = batch.max_blocks;
  info.slot_mapping = batch.slot_mapping.data();
  info.logits_rows = batch.logits_rows.data();
  info.block_size = options_.block_size;
  info.pool = pool_.get();
  info.parallel_for = &ThreadPool::ParallelForC;
  for (const Launch& l : launches_) {
    if (l.collective) {
      const int64_t rows = l.collective->logits_rows ? info.num_logits : info.num_tokens;
      LLMC_RETURN_IF_ERROR(RunHostCollective(
          *l.collective, rows, {options_.communicator, options_.pipeline}, gather_scratch_));
      continue;
    }
    llmc_host_args args{&info, l.buffers.data(), l.weights.data(), l.caches.data()};
    l.fn(&args);
  }
  // A pipeline stage before the last sent its hidden state on instead.
  const int64_t logits = artifact_->manifest().logits_buffer;
  if (logits < 0) return StepOutput{};
  const float* rows = buffers_[size_t(logits)].data();
  return host_picks_.Pick(batch, rows, vocab_);
}

}  // namespace llmc
