// When the toolkit's nccl.h is found at build time: nccl_api.h's
// declarations against it (values, the unique id's size, and every resolved
// function's signature). Nothing of nccl.h is called; the functions come
// from dlsym (nccl_api.cc). Without the header this file compiles to nothing.
#include "llmc/runtime/cuda/nccl_api.h"

#ifdef LLMC_HAVE_NCCL_H
#include <nccl.h>

#include <type_traits>

namespace {
namespace c = llmc::cuda;

static_assert(sizeof(::ncclResult_t) == sizeof(c::ncclResult_t));
static_assert(sizeof(::ncclDataType_t) == sizeof(c::ncclDataType_t));
static_assert(sizeof(::ncclRedOp_t) == sizeof(c::ncclRedOp_t));
static_assert(sizeof(::ncclUniqueId) == sizeof(c::ncclUniqueId));
static_assert(NCCL_UNIQUE_ID_BYTES == c::kNcclUniqueIdBytes);
static_assert(::ncclSuccess == c::kNcclSuccess);
static_assert(::ncclUnhandledCudaError == c::kNcclUnhandledCudaError);
static_assert(::ncclSystemError == c::kNcclSystemError);
static_assert(::ncclInternalError == c::kNcclInternalError);
static_assert(::ncclInvalidArgument == c::kNcclInvalidArgument);
static_assert(::ncclInvalidUsage == c::kNcclInvalidUsage);
static_assert(::ncclRemoteError == c::kNcclRemoteError);
static_assert(::ncclInProgress == c::kNcclInProgress);
static_assert(::ncclFloat16 == c::kNcclFloat16);
static_assert(::ncclFloat32 == c::kNcclFloat32);
static_assert(::ncclBfloat16 == c::kNcclBfloat16);
static_assert(::ncclSum == c::kNcclSum);

// Each table entry's signature, with nccl.h's types mapped to ours: the
// same C ABI (enums are ints, handles and streams are pointers).
template <class T>
struct Ours {
  using type = T;
};
template <>
struct Ours<::ncclResult_t> {
  using type = c::ncclResult_t;
};
template <>
struct Ours<::ncclDataType_t> {
  using type = c::ncclDataType_t;
};
template <>
struct Ours<::ncclRedOp_t> {
  using type = c::ncclRedOp_t;
};
template <>
struct Ours<::ncclResult_t*> {
  using type = c::ncclResult_t*;
};
template <>
struct Ours<::ncclComm_t> {
  using type = c::ncclComm_t;
};
template <>
struct Ours<::ncclComm_t*> {
  using type = c::ncclComm_t*;
};
template <>
struct Ours<::ncclUniqueId> {
  using type = c::ncclUniqueId;
};
template <>
struct Ours<::ncclUniqueId*> {
  using type = c::ncclUniqueId*;
};
template <>
struct Ours<::cudaStream_t> {
  using type = c::CUstream;
};
template <class F>
struct Mapped;
template <class R, class... A>
struct Mapped<R (*)(A...)> {
  using type = typename Ours<R>::type (*)(typename Ours<A>::type...);
};
}  // namespace

// Expanded inside llmc::cuda, so that the table's type names are ours.
namespace llmc::cuda::nccl_h_check {
#define LLMC_NCCL_SAME_SIGNATURE(name, ret, params, required)                   \
  static_assert(std::is_same_v<Mapped<decltype(&::name)>::type, ret(*) params>, \
                #name "'s signature differs from nccl.h's");
LLMC_NCCL_FUNCTIONS(LLMC_NCCL_SAME_SIGNATURE)
#undef LLMC_NCCL_SAME_SIGNATURE
}  // namespace llmc::cuda::nccl_h_check
#endif
