// Whether a launcher started this process as an MPI rank, from the variables
// the launchers put in each rank's environment. Only MPI/PMI variables
// count: SLURM_PROCID and SLURM_NTASKS are set for every task of a Slurm
// step, MPI or not (an `srun` of independent copies), so they prove nothing.
#include <cstdlib>

#include "llmc/runtime/dist/communicator.h"

namespace llmc {

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

}  // namespace llmc
