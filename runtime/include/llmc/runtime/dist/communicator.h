// The collectives a partitioned artifact's step needs, between the ranks of
// one world (docs/partitioning.md). Ranks are processes started by `mpirun`
// (or srun, or any launcher that sets up an MPI world). This communicator
// runs the host backend's collectives through MPI; on GPUs the CUDA executor
// runs them through NCCL (exec/nccl_comm.h), and this one only bootstraps
// NCCL's unique id and moves pipeline stages' hidden states.
//
// Every call either completes on every rank or fails: a rank that does not
// take part within the timeout (it died or hangs) makes the call end the
// whole world with a message naming the collective, never a silent hang.
#ifndef LLMC_RUNTIME_DIST_COMMUNICATOR_H_
#define LLMC_RUNTIME_DIST_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llmc {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums `count` floats over the ranks, in place: afterwards every rank
  // holds the same sums (added in the same order on every rank).
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;
  // Every rank's `count` floats from `in`, in rank order, into `out`
  // (size() * count floats), on every rank.
  virtual absl::Status AllGather(const float* in, float* out, int64_t count) = 0;
  // Rank `root`'s `bytes` bytes at `data` to every rank's `data`.
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;

  // Point to point, on one of two channels: the leader's steps to the
  // other ranks, and activations between pipeline stages. Messages of a
  // channel between two ranks arrive in send order; channels never mix.
  // Send copies `bytes` bytes and returns before `peer` has them, so that
  // this rank computes on while they travel (the leader hands out its next
  // step while the last stage still runs the previous one); Flush() waits
  // until every send so far has been received. Recv waits, within the
  // timeout, for `peer`'s next message on `channel`, which must be `bytes`
  // long. WaitForRecv waits without the timeout: how a follower waits for
  // the leader's next step, which may be hours away on an idle server (a
  // leader that dies still ends the wait: the launcher ends the world).
  enum class Channel { kSteps = 1, kActivations = 2 };
  virtual absl::Status Send(const void* data, int64_t bytes, int peer, Channel channel) = 0;
  virtual absl::Status Recv(void* data, int64_t bytes, int peer, Channel channel) = 0;
  virtual absl::Status WaitForRecv(void* data, int64_t bytes, int peer, Channel channel) = 0;
  virtual absl::Status Flush() = 0;
  // The ranks that pass the same `color`, in `key` order (ties by rank), as
  // a communicator of their own: the tensor-parallel group of one pipeline
  // stage. Every rank of this communicator must call it.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) = 0;
};

// A world of one rank: collectives copy (tests, and unpartitioned runs).
std::unique_ptr<Communicator> MakeLocalCommunicator();

// True when this process was started as a rank of an MPI world (the
// launcher's environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, ...).
bool LaunchedAsMpiRank();

// MPI_COMM_WORLD, initialized on the first call (and finalized at exit).
// `timeout_seconds` bounds every collective. An error when this build has
// no MPI ("rebuild with libopenmpi-dev") or MPI fails to start.
absl::StatusOr<Communicator*> MpiWorld(double timeout_seconds = 30);

// The world this process belongs to: MpiWorld, every collective bounded by
// $LLMC_MPI_TIMEOUT seconds (30 by default), when an MPI launcher started
// it (LaunchedAsMpiRank); null for a process alone. InvalidArgument for a
// malformed $LLMC_MPI_TIMEOUT.
absl::StatusOr<Communicator*> LaunchedWorld();

// For an error one rank meets alone (its weight file is missing, say): when
// this process is one of several ranks of a started MPI world, prints the
// error with this rank's number and ends every rank (MPI_Abort), since the
// others would wait for it in their next collective. Returns otherwise
// (status OK, MPI never started, or a world of one).
void EndWorldOnError(const absl::Status& status);

}  // namespace llmc

#endif  // LLMC_RUNTIME_DIST_COMMUNICATOR_H_
