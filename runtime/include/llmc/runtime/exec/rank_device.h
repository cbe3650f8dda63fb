// Which GPU a rank of a partitioned artifact opens: each rank of a node
// needs its own (NCCL refuses two ranks on one device), and launchers
// number a node's ranks for that purpose.
#ifndef LLMC_RUNTIME_EXEC_RANK_DEVICE_H_
#define LLMC_RUNTIME_EXEC_RANK_DEVICE_H_

namespace llmc {

// The rank's index among its node's ranks, from the launcher's environment
// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID,
// MV2_COMM_WORLD_LOCAL_RANK), else `world_rank` (one node); modulo
// `devices` (a CUDA_VISIBLE_DEVICES that gives each rank one GPU makes it 0).
int RankDeviceOrdinal(int world_rank, int devices);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_RANK_DEVICE_H_
