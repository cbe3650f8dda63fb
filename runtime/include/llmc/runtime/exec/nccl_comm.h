// One NCCL communicator over the ranks of a world (RunnerOptions::
// communicator, MPI under mpirun), for the CUDA executor's collectives: rank
// 0 makes the unique id (ncclGetUniqueId), the world's Communicator
// broadcasts it, and every rank joins with ncclCommInitRank on the device of
// its current CUDA context. Collectives are enqueued on a stream and return
// at once; errors that NCCL finds later are read with AsyncError.
#ifndef LLMC_RUNTIME_EXEC_NCCL_COMM_H_
#define LLMC_RUNTIME_EXEC_NCCL_COMM_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/runtime/cuda/nccl_api.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/cuda_collective.h"

namespace llmc {

class NcclComm {
 public:
  // The communicator of `world`'s ranks on the calling thread's current
  // CUDA context. `devices`: the devices this node's driver sees, for the
  // hint when NCCL refuses (two ranks on one GPU).
  static absl::StatusOr<std::unique_ptr<NcclComm>> Create(const cuda::NcclApi& api,
                                                          Communicator& world, int devices);
  // ncclCommDestroy, unless aborted (the caller has synchronized the stream).
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const cuda::NcclApi& api() const { return *api_; }

  // Enqueue on `stream` (in place when in == out); `what` names the step in
  // errors. InvalidArgument for an element type NCCL is not given here.
  absl::Status AllReduceSum(cuda::CUdeviceptr in, cuda::CUdeviceptr out, size_t count,
                            CudaElem elem, cuda::CUstream stream, const std::string& what);
  // Every rank's `count` elements at `in`, in rank order, into `out`.
  absl::Status AllGather(cuda::CUdeviceptr in, cuda::CUdeviceptr out, size_t count, CudaElem elem,
                         cuda::CUstream stream, const std::string& what);
  // OK while NCCL has found nothing wrong; else its error (a peer gone, a
  // failed kernel): ncclCommGetAsyncError.
  absl::Status AsyncError() const;
  // ncclCommAbort: ends the communicator's work in flight (a collective
  // waiting for a dead peer); nothing may use it after.
  void Abort();

 private:
  NcclComm() = default;
  const cuda::NcclApi* api_ = nullptr;
  cuda::ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

// NCCL's type of a CUDA element type.
cuda::ncclDataType_t NcclType(CudaElem e);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_NCCL_COMM_H_
