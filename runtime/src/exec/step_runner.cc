#include "llmc/runtime/exec/step_runner.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/cuda_runner.h"
#include "llmc/runtime/exec/host_runner.h"
#include "llmc/runtime/exec/rank_device.h"
#include "llmc/runtime/sample/sampler.h"

namespace llmc {

// A runner's pick of top-p without top-k looks among as many best tokens as
// the host sampler does, so that both give the same token.
static_assert(sample_internal::kTopPCandidates == size_t(kMaxPickTopK),
              "the host's top-p candidates and the device's top-k limit differ");

namespace {

// A pick's logprob entries (StepOutput::logprobs) from the sampler's result:
// the token's, then its N best (token -1 past the last).
void WriteLogprobs(const SampleResult& result, const RowPick& p, PickLogprob* out) {
  out[0] = {result.token, result.logprob};
  for (size_t i = 0; i < result.top_logprobs.size() && i < size_t(p.logprobs); ++i)
    out[1 + i] = {result.top_logprobs[i].token, result.top_logprobs[i].logprob};
}

}  // namespace

void PickOnHost(const StepBatch& batch, const float* logits, int64_t vocab,
                std::vector<int32_t>* tokens, std::vector<PickLogprob>* logprobs) {
  thread_local SamplerScratch scratch;
  thread_local std::vector<float> masked_row;
  thread_local SampleResult result;
  thread_local std::vector<int32_t> previous;
  tokens->resize(batch.picks.size());
  logprobs->assign(size_t(batch.num_logprob_entries()), PickLogprob{});
  for (size_t j = 0; j < batch.picks.size(); ++j) {
    const RowPick& p = batch.picks[j];
    const std::span<const float> row(logits + int64_t(p.row) * vocab, size_t(vocab));
    const std::span<const int32_t> masked(batch.masked_ids.data() + p.mask_begin,
                                          size_t(p.mask_count));
    if (p.forced >= 0) {  // a scored prompt's next token: only its logprobs
      SamplingParams params;
      params.logprobs = p.logprobs;
      Sampler sampler(params, &scratch);
      sampler.TokenLogprobs(MaskTokens(row, masked, &masked_row), p.forced, &result);
      (*tokens)[j] = p.forced;
      WriteLogprobs(result, p, logprobs->data() + p.logprob_begin);
      continue;
    }
    if (!(p.temperature > 0) && p.logprobs == 0 && p.penalty_count == 0) {
      (*tokens)[j] = GreedyToken(row, masked);
      continue;
    }
    // The request's own sampler would draw this token, its draw at p.draw.
    // Its penalty window comes as (token, count): each token `count` times
    // is a window that counts the same.
    SamplingParams params;
    params.logprobs = p.logprobs;
    params.repetition_penalty = p.repetition_penalty;
    params.presence_penalty = p.presence_penalty;
    params.frequency_penalty = p.frequency_penalty;
    previous.clear();
    for (int32_t k = p.penalty_begin; k < p.penalty_begin + p.penalty_count; ++k)
      previous.insert(previous.end(), size_t(batch.penalties[size_t(k)].count),
                      batch.penalties[size_t(k)].token);
    params.temperature = p.temperature;
    params.top_k = p.top_k;
    params.top_p = p.top_p;
    params.min_p = p.min_p;
    params.repeat_last_n = -1;
    params.seed = p.seed;
    Sampler sampler(params, &scratch);
    sampler.SetDrawIndex(p.draw);
    (*tokens)[j] = sampler.Sample(MaskTokens(row, masked, &masked_row), previous, &result);
    if (p.logprobs > 0) WriteLogprobs(result, p, logprobs->data() + p.logprob_begin);
  }
}

Communicator* RankWorld(const RunnerOptions& options) {
  return options.pipeline ? options.pipeline : options.communicator;
}

absl::Status CheckRankWorld(const Artifact& artifact, const RunnerOptions& options) {
  const ManifestMesh& mesh = artifact.manifest().mesh;
  const int64_t ranks = mesh.tp * mesh.pp;
  const Communicator* world = RankWorld(options);
  const int size = world ? world->size() : 1;
  if (ranks > 1 && size != ranks)
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is split over %d ranks (llmc compile --tp %d --pp %d): start it as "
                        "`mpirun -np %d llmc-rt ...`; this process is one rank of %d",
                        artifact.dir(), ranks, mesh.tp, mesh.pp, ranks, size));
  if (mesh.pp > 1 && (options.pipeline == nullptr || options.communicator == nullptr ||
                      options.communicator->size() != mesh.tp))
    return absl::InternalError(absl::StrFormat(
        "%s: a pipeline stage needs the world and its %d-rank tensor-parallel group",
        artifact.dir(), mesh.tp));
  return absl::OkStatus();
}

CacheLayers CacheLayersOf(const Manifest& m) {
  CacheLayers l{m.model.num_layers, m.model.num_layers};
  if (m.mesh.pp > 1) {
    l.held = m.mesh.stages[size_t(m.mesh.stage)].num_layers;
    l.sizing = 0;
    for (const ManifestStage& st : m.mesh.stages) l.sizing = std::max(l.sizing, st.num_layers);
  }
  return l;
}

absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Artifact& artifact,
                                                             const RunnerOptions& options,
                                                             const BackendChoice& choice) {
  if (choice.backend != Backend::kCuda) {
    LLMC_ASSIGN_OR_RETURN(auto host, HostRunner::Create(artifact, options));
    return std::unique_ptr<StepRunner>(std::move(host));
  }
  cuda::CudaDeviceOptions device_options;
  if (choice.device) device_options.ordinal = choice.device->ordinal;
  // Each rank of a partitioned artifact (of every stage) on its own GPU of
  // the node.
  const Communicator* comm = RankWorld(options);
  if (comm && comm->size() > 1 && choice.device)
    device_options.ordinal = RankDeviceOrdinal(comm->rank(), choice.device->device_count);
  LLMC_ASSIGN_OR_RETURN(auto device, cuda::CudaDevice::Open(device_options));
  LLMC_ASSIGN_OR_RETURN(
      auto runner, CudaRunner::Create(artifact, options, choice.cuda_target, std::move(device)));
  return std::unique_ptr<StepRunner>(std::move(runner));
}

}  // namespace llmc
