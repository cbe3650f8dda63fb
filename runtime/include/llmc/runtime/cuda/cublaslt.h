// cuBLASLt, loaded at run time: libcublasLt is dlopen'd and its functions
// resolved with dlsym (as the driver is, driver_api.h), so the runtime builds
// without the CUDA toolkit and runs without cuBLAS; only a run that asks for
// a cuBLASLt GEMM needs the library. It is an alternative GEMM for f16/bf16
// (and f32) weights: D[T,N] (f32) = A[T,K] x W[N,K]^T, row-major.
//
// The cuBLASLt ABI's types, values and function signatures the wrapper uses
// are declared here with cublasLt.h's names (in namespace llmc::cuda);
// cublaslt_h_check.cc compares them with cublasLt.h when the toolkit is found
// at build time. Never include cublasLt.h in a file that includes this one.
//
// Like every cuBLAS call, Gemm runs on the CUDA context current on the
// calling thread (the runtime's: CudaDevice makes the device's primary
// context current), and is asynchronous on `stream`.
#ifndef LLMC_RUNTIME_CUDA_CUBLASLT_H_
#define LLMC_RUNTIME_CUDA_CUBLASLT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "llmc/runtime/cuda/driver_types.h"

namespace llmc::cuda {

// --- cuBLASLt ABI (cublasLt.h / cublas_api.h / library_types.h names) ------
using cublasStatus_t = int;       // enum
using cublasComputeType_t = int;  // enum
using cudaDataType_t = int;       // enum
using cublasLtMatmulDescAttributes_t = int;
using cublasLtMatmulPreferenceAttributes_t = int;
struct CublasLtContext;
using cublasLtHandle_t = CublasLtContext*;
// cublasLt.h's descriptors point to semi-opaque structs that the library
// fills (cublasLtMatmulDescOpaque_t: 256 bytes; the others 64); the wrapper
// only holds the pointers that the Create functions return.
struct CublasLtMatmulDescOpaque;
struct CublasLtMatrixLayoutOpaque;
struct CublasLtMatmulPreferenceOpaque;
using cublasLtMatmulDesc_t = CublasLtMatmulDescOpaque*;
using cublasLtMatrixLayout_t = CublasLtMatrixLayoutOpaque*;
using cublasLtMatmulPreference_t = CublasLtMatmulPreferenceOpaque*;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

// cublasStatus_t values.
inline constexpr cublasStatus_t kCublasStatusSuccess = 0;
inline constexpr cublasStatus_t kCublasStatusNotInitialized = 1;
inline constexpr cublasStatus_t kCublasStatusAllocFailed = 3;
inline constexpr cublasStatus_t kCublasStatusInvalidValue = 7;
inline constexpr cublasStatus_t kCublasStatusArchMismatch = 8;
inline constexpr cublasStatus_t kCublasStatusMappingError = 11;
inline constexpr cublasStatus_t kCublasStatusExecutionFailed = 13;
inline constexpr cublasStatus_t kCublasStatusInternalError = 14;
inline constexpr cublasStatus_t kCublasStatusNotSupported = 15;
inline constexpr cublasStatus_t kCublasStatusLicenseError = 16;
// cudaDataType_t values.
inline constexpr cudaDataType_t kCudaR32F = 0;   // CUDA_R_32F
inline constexpr cudaDataType_t kCudaR16F = 2;   // CUDA_R_16F
inline constexpr cudaDataType_t kCudaR16BF = 14; // CUDA_R_16BF
inline constexpr cublasComputeType_t kCublasCompute32F = 68;  // CUBLAS_COMPUTE_32F
// cublasOperation_t values (int32_t attributes).
inline constexpr int32_t kCublasOpN = 0;
inline constexpr int32_t kCublasOpT = 1;
// cublasLtMatmulDescAttributes_t values.
inline constexpr cublasLtMatmulDescAttributes_t kCublasLtMatmulDescTransA = 3;  // int32_t
inline constexpr cublasLtMatmulDescAttributes_t kCublasLtMatmulDescTransB = 4;  // int32_t
// cublasLtMatmulPreferenceAttributes_t values.
inline constexpr cublasLtMatmulPreferenceAttributes_t kCublasLtPrefMaxWorkspaceBytes = 1;  // uint64_t
inline constexpr cublasLtMatmulPreferenceAttributes_t kCublasLtPrefMinAlignmentABytes = 5; // uint32_t
inline constexpr cublasLtMatmulPreferenceAttributes_t kCublasLtPrefMinAlignmentBBytes = 6;
inline constexpr cublasLtMatmulPreferenceAttributes_t kCublasLtPrefMinAlignmentCBytes = 7;
inline constexpr cublasLtMatmulPreferenceAttributes_t kCublasLtPrefMinAlignmentDBytes = 8;

// The functions resolved: X(name (= symbol), return type, parameter list,
// required). An optional function the library lacks is not used.
#define LLMC_CUBLASLT_FUNCTIONS(X)                                                                \
  X(cublasLtCreate, cublasStatus_t, (cublasLtHandle_t*), true)                                    \
  X(cublasLtDestroy, cublasStatus_t, (cublasLtHandle_t), true)                                    \
  X(cublasLtGetVersion, size_t, (), true)                                                         \
  X(cublasLtGetStatusName, const char*, (cublasStatus_t), false)                                  \
  X(cublasLtGetStatusString, const char*, (cublasStatus_t), false)                                \
  X(cublasLtMatmulDescCreate, cublasStatus_t,                                                     \
    (cublasLtMatmulDesc_t*, cublasComputeType_t, cudaDataType_t), true)                           \
  X(cublasLtMatmulDescDestroy, cublasStatus_t, (cublasLtMatmulDesc_t), true)                      \
  X(cublasLtMatmulDescSetAttribute, cublasStatus_t,                                               \
    (cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*, size_t), true)            \
  X(cublasLtMatrixLayoutCreate, cublasStatus_t,                                                   \
    (cublasLtMatrixLayout_t*, cudaDataType_t, uint64_t, uint64_t, int64_t), true)                 \
  X(cublasLtMatrixLayoutDestroy, cublasStatus_t, (cublasLtMatrixLayout_t), true)                  \
  X(cublasLtMatmulPreferenceCreate, cublasStatus_t, (cublasLtMatmulPreference_t*), true)          \
  X(cublasLtMatmulPreferenceDestroy, cublasStatus_t, (cublasLtMatmulPreference_t), true)          \
  X(cublasLtMatmulPreferenceSetAttribute, cublasStatus_t,                                         \
    (cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t, const void*, size_t),      \
    true)                                                                                         \
  X(cublasLtMatmulAlgoGetHeuristic, cublasStatus_t,                                               \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,      \
     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,             \
     cublasLtMatmulHeuristicResult_t*, int*),                                                     \
    true)                                                                                         \
  X(cublasLtMatmul, cublasStatus_t,                                                               \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,    \
     const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t,       \
     void*, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, CUstream),        \
    true)

// The environment variable that names the cuBLASLt library to load (tests
// point it at a fake), and the names tried without it, in order.
inline constexpr char kCublasLtEnvVar[] = "LLMC_CUBLASLT_LIBRARY";
inline constexpr const char* kCublasLtLibraries[] = {"libcublasLt.so.13", "libcublasLt.so.12",
                                                     "libcublasLt.so"};

// The element type of a GEMM's A and W.
enum class GemmType { kF16, kBF16, kF32 };
// "f16", "bf16", "f32".
const char* GemmTypeName(GemmType t);

class CublasLt {
 public:
  // dlopens `path` if non-empty, else $LLMC_CUBLASLT_LIBRARY if set and
  // non-empty, else the first of kCublasLtLibraries that loads (RTLD_NOW |
  // RTLD_LOCAL); resolves the functions, then cublasLtCreate and the matmul
  // descriptor (compute f32, scale f32, W transposed). Errors:
  // FailedPrecondition "cannot load cuBLASLt: <each library tried: its
  // dlerror>"; "<path>: not a usable cuBLASLt: it does not export <symbol>";
  // a failing cuBLASLt call as Check() gives it.
  static absl::StatusOr<std::unique_ptr<CublasLt>> Load(absl::string_view path = "");
  // Destroys the cached layouts, the matmul descriptor and the handle, then
  // dlcloses the library. Work still queued on a stream must not need them:
  // synchronize first.
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  // D[T,N] (f32, row-major, ld N) = A[T,K] (a_type, row-major, ld K) x
  // W[N,K]^T (a_type, row-major, ld K), asynchronously on `stream`. D must
  // not overlap A or W. In cuBLAS's column-major terms: m=N, n=T, k=K,
  // D' = op(W') x A' with W' (K x N, ld K) transposed and A' (K x T, ld K)
  // not; alpha 1, beta 0 (D is only written), f32 accumulation.
  //
  // The algorithm comes from cublasLtMatmulAlgoGetHeuristic with a workspace
  // limit of workspace_bytes and the pointers' actual alignment (up to 256
  // bytes), and is cached per (a_type, T, N, K, alignments): a shape seen
  // before makes one cublasLtMatmul call and nothing else (so it can be
  // captured into a CUDA graph). A cached algorithm that needs more
  // workspace than a later call gives is chosen again.
  //
  // Errors: InvalidArgument for a non-positive dimension, a null pointer, or
  // workspace_bytes without a workspace; NotFound when the heuristic has no
  // algorithm; a failing cuBLASLt call as Check() gives it, with the shape:
  // "cublasLtMatmul failed: CUBLAS_STATUS_EXECUTION_FAILED (13): ...
  // [bf16 GEMM T=5 N=24 K=64]".
  absl::Status Gemm(CUstream stream, GemmType a_type, int64_t T, int64_t N, int64_t K,
                    CUdeviceptr a, CUdeviceptr w, CUdeviceptr d, CUdeviceptr workspace,
                    size_t workspace_bytes);

  // The library's version, from cublasLtGetVersion: "13.0.2".
  std::string version() const;
  // The library loaded (as given to dlopen).
  const std::string& path() const;

  // "CUBLAS_STATUS_NOT_SUPPORTED (15): the functionality requested is not
  // supported" (the text when the library has cublasLtGetStatusString).
  std::string Describe(cublasStatus_t s) const;
  // OK for CUBLAS_STATUS_SUCCESS; else "<call> failed: <Describe(s)>". The
  // code: ALLOC_FAILED -> ResourceExhausted, INVALID_VALUE -> InvalidArgument,
  // NOT_INITIALIZED / ARCH_MISMATCH / NOT_SUPPORTED / LICENSE_ERROR ->
  // FailedPrecondition, others -> Internal.
  absl::Status Check(cublasStatus_t s, absl::string_view call) const;

 private:
  struct State;
  explicit CublasLt(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace llmc::cuda

#endif  // LLMC_RUNTIME_CUDA_CUBLASLT_H_
