// CreateRankRunner: the world assembly of one rank's runner (rank_runner.h).
#include "llmc/core/status_macros.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/pipeline_runner.h"
#include "llmc/runtime/exec/rank_runner.h"

namespace llmc {

absl::StatusOr<std::unique_ptr<StepRunner>> CreateRankRunner(const Artifact& artifact,
                                                             RunnerOptions options,
                                                             const BackendChoice& backend) {
  Communicator* world = options.communicator;
  const ManifestMesh& mesh = artifact.manifest().mesh;
  std::unique_ptr<StepRunner> runner;
  if (mesh.pp > 1 && world != nullptr && world->size() == mesh.tp * mesh.pp) {
    // Pipeline stages: collectives within this stage's tensor-parallel
    // group, the hidden state sent through the world. Every rank of a world
    // of the right size gets here (a wrong size fails in the runner, alike
    // on every rank), and the split is collective.
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> group,
                          world->Split(int(world->rank() / mesh.tp), world->rank()));
    options.communicator = group.get();
    options.pipeline = world;
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<StepRunner> stage,
                          CreateStepRunner(artifact, options, backend));
    runner = std::make_unique<PipelineRunner>(std::move(group), std::move(stage), world, mesh);
  } else {
    LLMC_ASSIGN_OR_RETURN(runner, CreateStepRunner(artifact, options, backend));
  }
  if (world != nullptr && world->size() > 1 && world->rank() == 0)
    runner = std::make_unique<LeaderRunner>(std::move(runner), world);
  return runner;
}

}  // namespace llmc
