// NCCL, loaded at run time: libnccl.so.2 is dlopen'd and the few functions
// the CUDA executor's collectives need are resolved with dlsym (as the
// driver is, driver_api.h), so the runtime builds without the CUDA toolkit
// and NCCL, and only a tensor-parallel run on GPUs needs the library.
//
// The NCCL ABI's types and values used here are declared with nccl.h's
// meaning (in namespace llmc::cuda); nccl_h_check.cc compares them with
// nccl.h when the toolkit is found at build time. nccl.h itself includes
// cuda_runtime.h, so it is never included here.
#ifndef LLMC_RUNTIME_CUDA_NCCL_API_H_
#define LLMC_RUNTIME_CUDA_NCCL_API_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llmc/runtime/cuda/driver_types.h"

namespace llmc::cuda {

// --- NCCL ABI (nccl.h's names, in this namespace) ---------------------------
using ncclResult_t = int;    // enum
using ncclDataType_t = int;  // enum
using ncclRedOp_t = int;     // enum
struct NcclCommOpaque;
using ncclComm_t = NcclCommOpaque*;
inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

// ncclResult_t values.
inline constexpr ncclResult_t kNcclSuccess = 0;
inline constexpr ncclResult_t kNcclUnhandledCudaError = 1;
inline constexpr ncclResult_t kNcclSystemError = 2;
inline constexpr ncclResult_t kNcclInternalError = 3;
inline constexpr ncclResult_t kNcclInvalidArgument = 4;
inline constexpr ncclResult_t kNcclInvalidUsage = 5;
inline constexpr ncclResult_t kNcclRemoteError = 6;
inline constexpr ncclResult_t kNcclInProgress = 7;
// ncclDataType_t values.
inline constexpr ncclDataType_t kNcclFloat16 = 6;
inline constexpr ncclDataType_t kNcclFloat32 = 7;
inline constexpr ncclDataType_t kNcclBfloat16 = 9;
// ncclRedOp_t values.
inline constexpr ncclRedOp_t kNcclSum = 0;

// --- The function table ------------------------------------------------------
// X(member, return type, parameter list, required). Streams are the driver's
// CUstream (cudaStream_t is the same pointer).
#define LLMC_NCCL_FUNCTIONS(X)                                                             \
  X(ncclGetVersion, ncclResult_t, (int*), true)                                            \
  X(ncclGetErrorString, const char*, (ncclResult_t), true)                                 \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId*), true)                                  \
  X(ncclCommInitRank, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int), true)           \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t), true)                                     \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t), true)                                       \
  X(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t, ncclResult_t*), true)                \
  X(ncclCommCount, ncclResult_t, (ncclComm_t, int*), true)                                 \
  X(ncclCommUserRank, ncclResult_t, (ncclComm_t, int*), true)                              \
  X(ncclAllReduce, ncclResult_t,                                                           \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream), true) \
  X(ncclAllGather, ncclResult_t,                                                           \
    (const void*, void*, size_t, ncclDataType_t, ncclComm_t, CUstream), true)              \
  /* NCCL 2.13 and later: the last error's text; optional. */                              \
  X(ncclGetLastError, const char*, (ncclComm_t), false)

// The environment variable that names the NCCL library to load instead of
// searching for libnccl.so.2 (tests point it at a fake NCCL).
inline constexpr char kNcclEnvVar[] = "LLMC_NCCL_LIBRARY";
inline constexpr char kNcclLibrary[] = "libnccl.so.2";

class NcclApi {
 public:
#define LLMC_NCCL_DECLARE_MEMBER(name, ret, params, required) ret(*name) params = nullptr;
  LLMC_NCCL_FUNCTIONS(LLMC_NCCL_DECLARE_MEMBER)
#undef LLMC_NCCL_DECLARE_MEMBER

  // The libraries Load() tries, in order, when no path is given:
  // $LLMC_NCCL_LIBRARY alone when set; else libnccl.so.2 by the loader's
  // search path, then under $LLMC_CUDA_HOME, $CUDA_HOME, $CUDA_PATH and
  // /usr/local/cuda (lib64/, lib/, targets/x86_64-linux/lib/), then the
  // nvidia-nccl-cu13 / -cu12 wheels' nvidia/nccl/lib/ in the site-packages
  // of $VIRTUAL_ENV, ~/.local and /usr/local (any python3.*).
  static std::vector<std::string> Candidates();
  // Loads `path` (or, when empty, the first of Candidates() that loads,
  // RTLD_NOW | RTLD_LOCAL) and resolves the table. Errors, FailedPrecondition:
  // "libnccl.so.2 not found (tried: <each dlerror>): install NCCL (the CUDA
  // toolkit's lib folder has it, or pip install nvidia-nccl-cu13) or set
  // LLMC_NCCL_LIBRARY to its path" (when $LLMC_NCCL_LIBRARY named it: what
  // to do with the variable); "<path>: not a usable NCCL: it does not export
  // <symbol>"; and a library older than NCCL 2.12 (kMinVersion).
  static absl::StatusOr<std::unique_ptr<NcclApi>> Load(const std::string& path = "");
  // The first of `candidates` that loads; `hint` ends the message when none
  // does. (Load's search, given its list.)
  static absl::StatusOr<std::unique_ptr<NcclApi>> LoadFirst(
      const std::vector<std::string>& candidates, absl::string_view hint);
  // The process's NCCL: Load(""), once (the result, success or failure, is
  // kept); never unloaded.
  static absl::StatusOr<const NcclApi*> Get();

  ~NcclApi();
  NcclApi(const NcclApi&) = delete;
  NcclApi& operator=(const NcclApi&) = delete;

  // ncclCommGetAsyncError and ncclCommAbort as used here: NCCL 2.12.
  static constexpr int kMinVersion = 21200;
  const std::string& path() const { return path_; }
  // ncclGetVersion's code (2.28.9: 22809) and as text ("2.28.9").
  int version() const { return version_; }
  std::string VersionString() const;

  // "ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN
  // for details)": the enum's name and the library's text.
  std::string Describe(ncclResult_t r) const;
  // OK for ncclSuccess; else "<call> failed: <Describe(r)>", with
  // ncclGetLastError(comm)'s text when the library has it and says more.
  // The code: InvalidArgument/InvalidUsage -> InvalidArgument, SystemError/
  // RemoteError -> Unavailable, others -> Internal.
  absl::Status Check(ncclResult_t r, absl::string_view call, ncclComm_t comm = nullptr) const;

 private:
  NcclApi() = default;
  std::string path_;
  void* handle_ = nullptr;
  int version_ = 0;
};

}  // namespace llmc::cuda

#endif  // LLMC_RUNTIME_CUDA_NCCL_API_H_
