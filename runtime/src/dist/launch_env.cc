// Whether a launcher started this process as an MPI rank (and then its
// world), from the variables
// the launchers put in each rank's environment. Only MPI/PMI variables
// count: SLURM_PROCID and SLURM_NTASKS are set for every task of a Slurm
// step, MPI or not (an `srun` of independent copies), so they prove nothing.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "llmc/runtime/dist/communicator.h"

namespace llmc {
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

}  // namespace

bool LaunchedAsMpiRank() {
  static constexpr const char* kVariables[] = {
      "OMPI_COMM_WORLD_SIZE",  // Open MPI's mpirun
      "OMPI_COMM_WORLD_RANK",
      "PMIX_RANK",  // PMIx launchers: Open MPI 4+, srun --mpi=pmix
      "PMI_RANK",   // PMI-1/2: MPICH's and Intel MPI's Hydra, srun --mpi=pmi2
      "PMI_SIZE",
      "MPI_LOCALNRANKS",      // MPICH's Hydra
      "MV2_COMM_WORLD_RANK",  // MVAPICH2's mpirun_rsh
  };
  for (const char* name : kVariables) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') return true;
  }
  return false;
}

absl::StatusOr<Communicator*> LaunchedWorld() {
  if (!LaunchedAsMpiRank()) return nullptr;
  absl::StatusOr<double> timeout = CollectiveTimeoutFromEnv();
  if (!timeout.ok()) return timeout.status();
  return MpiWorld(*timeout);
}

}  // namespace llmc
