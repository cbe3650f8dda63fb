#include "llmc/runtime/engine/loaded_model.h"

#include <csignal>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "llmc/core/format/gguf.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/pipeline_runner.h"
#include "llmc/runtime/exec/rank_runner.h"

namespace llmc {
namespace {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const Artifact& artifact) {
  const std::string& rel = artifact.manifest().tokenizer;
  std::string path = artifact.Path(rel);
  if (rel.size() >= 5 && rel.substr(rel.size() - 5) == ".gguf") {
    LLMC_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(path));
    return Tokenizer::FromGguf(*gguf);
  }
  return Tokenizer::FromHFFolder(path.substr(0, path.rfind('/')));
}

}  // namespace

std::vector<int32_t> EndOfGenerationIds(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < int32_t(tokenizer.vocab_size()); ++t)
    if (tokenizer.IsEndOfGeneration(t)) ids.push_back(t);
  return ids;
}

namespace {

// $LLMC_MPI_TIMEOUT: seconds a collective, send or receive between ranks may
// take before every rank is ended (30 by default). A CPU rank of a big model
// may need more for one long prefill step.
absl::StatusOr<double> CollectiveTimeoutFromEnv() {
  const char* text = std::getenv("LLMC_MPI_TIMEOUT");
  if (text == nullptr || *text == '\0') return 30.0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0))
    return absl::InvalidArgumentError(
        absl::StrCat("LLMC_MPI_TIMEOUT: '", text, "' is not a positive number of seconds"));
  return seconds;
}

// The artifact, tokenizer and runner of this process (one rank of a
// partitioned artifact, or the only one).
absl::StatusOr<LoadedModel> LoadModelOnThisRank(const std::string& dir,
                                                const LoadOptions& options) {
  LoadedModel m;
  // Started by an MPI launcher, this process is one rank of a world: it maps
  // its rank's weights of a partitioned artifact, and the runner checks the
  // world's size against the artifact's mesh.
  RunnerOptions runner = options.runner;
  if (runner.communicator == nullptr && LaunchedAsMpiRank()) {
    LLMC_ASSIGN_OR_RETURN(double timeout, CollectiveTimeoutFromEnv());
    LLMC_ASSIGN_OR_RETURN(runner.communicator, MpiWorld(timeout));
  }
  Artifact::OpenOptions open;
  open.verify_checksum = options.verify_checksum;
  open.rank = runner.communicator ? runner.communicator->rank() : 0;
  LLMC_ASSIGN_OR_RETURN(m.artifact, Artifact::Open(dir, open));
  LLMC_ASSIGN_OR_RETURN(m.tokenizer, LoadTokenizer(*m.artifact));
  m.eos_ids = EndOfGenerationIds(*m.tokenizer);
  Communicator* comm = runner.communicator;
  const ManifestMesh& mesh = m.artifact->manifest().mesh;
  if (mesh.pp > 1 && comm != nullptr && comm->size() == mesh.tp * mesh.pp) {
    // Pipeline stages: collectives within this stage's tensor-parallel
    // group, the hidden state sent through the world. Every rank of a world
    // of the right size gets here (a wrong size fails in the runner, alike
    // on every rank), and the split is collective.
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> group,
                          comm->Split(int(comm->rank() / mesh.tp), comm->rank()));
    runner.communicator = group.get();
    runner.pipeline = comm;
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> stage,
                          CreateStepRunner(*m.artifact, runner, options.backend));
    m.runner = std::make_unique<PipelineRunner>(std::move(group), std::move(stage), comm, mesh);
  } else {
    LLMC_ASSIGN_OR_RETURN(m.runner, CreateStepRunner(*m.artifact, runner, options.backend));
  }
  m.max_position = m.artifact->manifest().model.max_position;
  if (comm != nullptr && comm->size() > 1) {
    if (comm->rank() == 0) {
      m.runner = std::make_unique<LeaderRunner>(std::move(m.runner), comm);
    } else {
      // A follower never returns to the command: it runs the leader's steps
      // until the leader stops, then the process ends. mpirun hands ^C and
      // SIGTERM to every rank; the leader drains and then stops the
      // followers, which must outlive it until then.
      std::signal(SIGINT, SIG_IGN);
      std::signal(SIGTERM, SIG_IGN);
      absl::Status st = RunFollowerRank(*m.runner, *comm);
      // The last stage's last logits are on their way to rank 0.
      if (st.ok()) st = comm->Flush();
      EndWorldOnError(st);
      std::exit(0);
    }
  }
  return m;
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const std::string& dir, const LoadOptions& options) {
  absl::StatusOr<LoadedModel> m = LoadModelOnThisRank(dir, options);
  // A rank that cannot load ends the others, which would wait for it.
  if (!m.ok()) EndWorldOnError(m.status());
  return m;
}

}  // namespace llmc
