#include "llmc/runtime/exec/nccl_comm.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llmc/core/status_macros.h"

namespace llmc {

cuda::ncclDataType_t NcclType(CudaElem e) {
  switch (e) {
    case CudaElem::kF32:
      return cuda::kNcclFloat32;
    case CudaElem::kF16:
      return cuda::kNcclFloat16;
    case CudaElem::kBF16:
      return cuda::kNcclBfloat16;
  }
  return cuda::kNcclFloat32;
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Create(const cuda::NcclApi& api,
                                                           Communicator& world, int devices) {
  std::unique_ptr<NcclComm> c(new NcclComm());
  c->api_ = &api;
  c->rank_ = world.rank();
  c->size_ = world.size();
  // Every rank takes part in the broadcast, whatever rank 0 met: a rank 0
  // that could not make an id sends zeros, which the others refuse, rather
  // than leaving them waiting for the broadcast's deadline.
  cuda::ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  absl::Status made = absl::OkStatus();
  if (c->rank_ == 0) made = api.Check(api.ncclGetUniqueId(&id), "ncclGetUniqueId");
  LLMC_RETURN_IF_ERROR(world.Broadcast(&id, int64_t(sizeof id), 0));
  if (!made.ok()) return made;
  static const cuda::ncclUniqueId kZero{};
  if (std::memcmp(&id, &kZero, sizeof id) == 0)
    return absl::UnavailableError("rank 0 could not make NCCL's unique id (see its message)");
  cuda::ncclComm_t comm = nullptr;
  cuda::ncclResult_t r = api.ncclCommInitRank(&comm, c->size_, id, c->rank_);
  if (r != cuda::kNcclSuccess) {
    absl::Status st = api.Check(
        r, absl::StrFormat("ncclCommInitRank(%d ranks, rank %d)", c->size_, c->rank_), comm);
    if (c->size_ <= devices) return st;
    return absl::Status(st.code(),
                        absl::StrFormat("%s; every rank needs a GPU of its own: %d ranks, and "
                                        "this one sees %d GPU(s)",
                                        st.message(), c->size_, devices));
  }
  c->comm_ = comm;
  // What NCCL made must be the world's shape: a library that disagrees
  // would pair the wrong ranks' rows.
  int count = 0, rank = -1;
  LLMC_RETURN_IF_ERROR(api.Check(api.ncclCommCount(comm, &count), "ncclCommCount", comm));
  LLMC_RETURN_IF_ERROR(api.Check(api.ncclCommUserRank(comm, &rank), "ncclCommUserRank", comm));
  if (count != c->size_ || rank != c->rank_)
    return absl::InternalError(absl::StrFormat(
        "NCCL made a communicator of %d ranks with this one as rank %d; the world has %d ranks "
        "and this is rank %d",
        count, rank, c->size_, c->rank_));
  return c;
}

NcclComm::~NcclComm() {
  if (comm_) (void)api_->ncclCommDestroy(comm_);
}

absl::Status NcclComm::AllReduceSum(cuda::CUdeviceptr in, cuda::CUdeviceptr out, size_t count,
                                    CudaElem elem, cuda::CUstream stream, const std::string& what) {
  if (!comm_) return absl::FailedPreconditionError(what + ": the NCCL communicator was aborted");
  cuda::ncclResult_t r = api_->ncclAllReduce(reinterpret_cast<const void*>(uintptr_t(in)),
                                             reinterpret_cast<void*>(uintptr_t(out)), count,
                                             NcclType(elem), cuda::kNcclSum, comm_, stream);
  return api_->Check(
      r, absl::StrFormat("ncclAllReduce(%d %s, sum) of %s", count, CudaElemName(elem), what),
      comm_);
}

absl::Status NcclComm::AllGather(cuda::CUdeviceptr in, cuda::CUdeviceptr out, size_t count,
                                 CudaElem elem, cuda::CUstream stream, const std::string& what) {
  if (!comm_) return absl::FailedPreconditionError(what + ": the NCCL communicator was aborted");
  cuda::ncclResult_t r = api_->ncclAllGather(reinterpret_cast<const void*>(uintptr_t(in)),
                                             reinterpret_cast<void*>(uintptr_t(out)), count,
                                             NcclType(elem), comm_, stream);
  return api_->Check(
      r, absl::StrFormat("ncclAllGather(%d %s per rank) of %s", count, CudaElemName(elem), what),
      comm_);
}

absl::Status NcclComm::AsyncError() const {
  if (!comm_) return absl::OkStatus();
  cuda::ncclResult_t async = cuda::kNcclSuccess;
  cuda::ncclResult_t r = api_->ncclCommGetAsyncError(comm_, &async);
  if (r != cuda::kNcclSuccess) return api_->Check(r, "ncclCommGetAsyncError", comm_);
  // ncclInProgress: a non-blocking communicator still being set up; this
  // one is blocking, so it means nothing went wrong.
  if (async == cuda::kNcclSuccess || async == cuda::kNcclInProgress) return absl::OkStatus();
  return api_->Check(async, "a collective (ncclCommGetAsyncError)", comm_);
}

void NcclComm::Abort() {
  if (!comm_) return;
  (void)api_->ncclCommAbort(comm_);
  comm_ = nullptr;
}

}  // namespace llmc
