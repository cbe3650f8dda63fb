// The CUDA driver API, loaded at run time: libcuda.so.1 is dlopen'd and its
// functions resolved with dlsym, so one llmc-rt binary runs with or without
// an NVIDIA driver (and builds without the CUDA toolkit). Nothing here links
// libcuda; the runtime-links-no-llvm test checks that llmc-rt does not.
//
// The few driver types and constants the runtime uses are declared in
// driver_types.h, with the driver ABI's sizes and values; when the toolkit's
// cuda.h is found at build time, cuda_h_check.cc checks them against it.
// Never include cuda.h in a file that includes this one: its macros
// (#define cuMemAlloc cuMemAlloc_v2, ...) would rename the table's members.
//
// Symbol names are the versioned ones cuda.h's macros map to (CUDA 13:
// cuMemAlloc -> cuMemAlloc_v2, cuEventElapsedTime -> cuEventElapsedTime_v2,
// ...); a function that older drivers export only unversioned falls back to
// that name.
#ifndef LLMC_RUNTIME_CUDA_DRIVER_API_H_
#define LLMC_RUNTIME_CUDA_DRIVER_API_H_

#include <cstddef>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/runtime/cuda/driver_types.h"

namespace llmc::cuda {

// --- The function table -------------------------------------------------------
// X(member, return type, parameter list, symbol, fallback symbol or nullptr,
//   required). An optional function that the driver lacks stays nullptr.
#define LLMC_CUDA_DRIVER_FUNCTIONS(X)                                                           \
  X(cuGetErrorName, CUresult, (CUresult, const char**), "cuGetErrorName", nullptr, true)         \
  X(cuGetErrorString, CUresult, (CUresult, const char**), "cuGetErrorString", nullptr, true)     \
  X(cuInit, CUresult, (unsigned), "cuInit", nullptr, true)                                       \
  X(cuDriverGetVersion, CUresult, (int*), "cuDriverGetVersion", nullptr, true)                   \
  X(cuDeviceGetCount, CUresult, (int*), "cuDeviceGetCount", nullptr, true)                       \
  X(cuDeviceGet, CUresult, (CUdevice*, int), "cuDeviceGet", nullptr, true)                       \
  X(cuDeviceGetName, CUresult, (char*, int, CUdevice), "cuDeviceGetName", nullptr, true)         \
  X(cuDeviceGetAttribute, CUresult, (int*, CUdevice_attribute, CUdevice),                        \
    "cuDeviceGetAttribute", nullptr, true)                                                       \
  X(cuDeviceTotalMem, CUresult, (size_t*, CUdevice), "cuDeviceTotalMem_v2", nullptr, true)       \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext*, CUdevice), "cuDevicePrimaryCtxRetain",      \
    nullptr, true)                                                                               \
  X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice), "cuDevicePrimaryCtxRelease_v2",             \
    "cuDevicePrimaryCtxRelease", true)                                                           \
  X(cuCtxSetCurrent, CUresult, (CUcontext), "cuCtxSetCurrent", nullptr, true)                    \
  X(cuCtxSynchronize, CUresult, (), "cuCtxSynchronize", nullptr, true)                           \
  X(cuMemGetInfo, CUresult, (size_t*, size_t*), "cuMemGetInfo_v2", nullptr, true)                \
  X(cuModuleLoadDataEx, CUresult, (CUmodule*, const void*, unsigned, CUjit_option*, void**),     \
    "cuModuleLoadDataEx", nullptr, true)                                                         \
  X(cuModuleUnload, CUresult, (CUmodule), "cuModuleUnload", nullptr, true)                       \
  X(cuModuleGetFunction, CUresult, (CUfunction*, CUmodule, const char*), "cuModuleGetFunction",  \
    nullptr, true)                                                                               \
  X(cuFuncSetAttribute, CUresult, (CUfunction, CUfunction_attribute, int), "cuFuncSetAttribute", \
    nullptr, true)                                                                               \
  X(cuLaunchKernel, CUresult,                                                                    \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
     void**, void**),                                                                            \
    "cuLaunchKernel", nullptr, true)                                                             \
  /* Programmatic dependent launch (--pdl, sm_90): optional. */                                 \
  X(cuLaunchKernelEx, CUresult, (const CUlaunchConfig*, CUfunction, void**, void**),             \
    "cuLaunchKernelEx", nullptr, false)                                                          \
  X(cuMemAlloc, CUresult, (CUdeviceptr*, size_t), "cuMemAlloc_v2", nullptr, true)                \
  X(cuMemFree, CUresult, (CUdeviceptr), "cuMemFree_v2", nullptr, true)                           \
  /* Page-locked host memory: copies from and to it run asynchronously. */                      \
  X(cuMemAllocHost, CUresult, (void**, size_t), "cuMemAllocHost_v2", "cuMemAllocHost", true)     \
  X(cuMemFreeHost, CUresult, (void*), "cuMemFreeHost", nullptr, true)                            \
  X(cuMemcpyHtoD, CUresult, (CUdeviceptr, const void*, size_t), "cuMemcpyHtoD_v2", nullptr, true) \
  X(cuMemcpyDtoH, CUresult, (void*, CUdeviceptr, size_t), "cuMemcpyDtoH_v2", nullptr, true)      \
  X(cuMemcpyDtoD, CUresult, (CUdeviceptr, CUdeviceptr, size_t), "cuMemcpyDtoD_v2", nullptr, true) \
  X(cuMemcpyHtoDAsync, CUresult, (CUdeviceptr, const void*, size_t, CUstream),                   \
    "cuMemcpyHtoDAsync_v2", nullptr, true)                                                       \
  X(cuMemcpyDtoHAsync, CUresult, (void*, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoHAsync_v2", \
    nullptr, true)                                                                               \
  X(cuMemcpyDtoDAsync, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream),                   \
    "cuMemcpyDtoDAsync_v2", nullptr, true)                                                       \
  X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream), "cuMemsetD8Async", \
    nullptr, true)                                                                               \
  X(cuMemcpy2DAsync, CUresult, (const CUDA_MEMCPY2D*, CUstream), "cuMemcpy2DAsync_v2", nullptr,  \
    true)                                                                                        \
  X(cuStreamQuery, CUresult, (CUstream), "cuStreamQuery", nullptr, true)                         \
  X(cuStreamCreate, CUresult, (CUstream*, unsigned), "cuStreamCreate", nullptr, true)            \
  X(cuStreamSynchronize, CUresult, (CUstream), "cuStreamSynchronize", nullptr, true)             \
  X(cuStreamDestroy, CUresult, (CUstream), "cuStreamDestroy_v2", nullptr, true)                  \
  X(cuEventCreate, CUresult, (CUevent*, unsigned), "cuEventCreate", nullptr, true)               \
  X(cuEventRecord, CUresult, (CUevent, CUstream), "cuEventRecord", nullptr, true)                \
  X(cuEventSynchronize, CUresult, (CUevent), "cuEventSynchronize", nullptr, true)                \
  X(cuEventQuery, CUresult, (CUevent), "cuEventQuery", nullptr, true)                            \
  X(cuEventElapsedTime, CUresult, (float*, CUevent, CUevent), "cuEventElapsedTime_v2",           \
    "cuEventElapsedTime", true)                                                                  \
  X(cuEventDestroy, CUresult, (CUevent), "cuEventDestroy_v2", nullptr, true)                     \
  /* CUDA graphs (decode steps, behind a flag): optional. */                                     \
  X(cuStreamBeginCapture, CUresult, (CUstream, CUstreamCaptureMode), "cuStreamBeginCapture_v2",  \
    nullptr, false)                                                                              \
  X(cuStreamEndCapture, CUresult, (CUstream, CUgraph*), "cuStreamEndCapture", nullptr, false)    \
  X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec*, CUgraph, unsigned long long),          \
    "cuGraphInstantiateWithFlags", nullptr, false)                                               \
  X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream), "cuGraphLaunch", nullptr, false)           \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec), "cuGraphExecDestroy", nullptr, false)           \
  X(cuGraphDestroy, CUresult, (CUgraph), "cuGraphDestroy", nullptr, false)

// The environment variable that names the driver library to load instead of
// libcuda.so.1 (tests point it at a fake driver; a missing path acts as a
// machine without a driver).
inline constexpr char kDriverEnvVar[] = "LLMC_CUDA_DRIVER";
inline constexpr char kDriverLibrary[] = "libcuda.so.1";

class DriverApi {
 public:
#define LLMC_CUDA_DECLARE_MEMBER(name, ret, params, symbol, fallback, required) \
  ret(*name) params = nullptr;
  LLMC_CUDA_DRIVER_FUNCTIONS(LLMC_CUDA_DECLARE_MEMBER)
#undef LLMC_CUDA_DECLARE_MEMBER

  // Loads the driver library at `path` (RTLD_NOW | RTLD_LOCAL) and resolves
  // the table. Errors: FailedPrecondition "no CUDA driver: <dlerror>" when the
  // library cannot be opened; "<path>: not a usable CUDA driver: ..." when a
  // required function is missing. cuInit is not called.
  static absl::StatusOr<std::unique_ptr<DriverApi>> Load(const std::string& path);
  // The driver this process uses: $LLMC_CUDA_DRIVER, else libcuda.so.1, loaded
  // once (the result, success or failure, is kept) and never unloaded.
  static absl::StatusOr<const DriverApi*> Get();
  // The library Get() loads.
  static std::string DefaultPath();

  ~DriverApi();
  DriverApi(const DriverApi&) = delete;
  DriverApi& operator=(const DriverApi&) = delete;

  const std::string& path() const { return path_; }
  bool has_graphs() const {
    return cuStreamBeginCapture && cuStreamEndCapture && cuGraphInstantiateWithFlags &&
           cuGraphLaunch && cuGraphExecDestroy && cuGraphDestroy;
  }

  // "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", from cuGetErrorName and
  // cuGetErrorString ("CUDA error 999" when the driver does not know it).
  std::string Describe(CUresult r) const;
  // OK for CUDA_SUCCESS; else an error naming the call:
  // "cuMemAlloc_v2(1048576 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
  // The code: OUT_OF_MEMORY -> ResourceExhausted, NO_DEVICE/STUB_LIBRARY/
  // CALL_REQUIRES_NEWER_DRIVER -> FailedPrecondition, INVALID_VALUE -> InvalidArgument, others -> Internal.
  absl::Status Check(CUresult r, absl::string_view call) const;

 private:
  DriverApi() = default;
  std::string path_;
  void* handle_ = nullptr;
};

// Evaluates a driver call `api.fn(args...)` and returns its error from the
// enclosing function (absl::Status or StatusOr): the message names the call
// as written, e.g. LLMC_CUDA_RETURN_IF_ERROR(api, cuCtxSynchronize()).
#define LLMC_CUDA_RETURN_IF_ERROR(api, call)                              \
  do {                                                                    \
    ::llmc::cuda::CUresult llmc_cuda_r_ = (api).call;                     \
    if (llmc_cuda_r_ != ::llmc::cuda::kCudaSuccess)                       \
      return (api).Check(llmc_cuda_r_, #call);                            \
  } while (0)

}  // namespace llmc::cuda

#endif  // LLMC_RUNTIME_CUDA_DRIVER_API_H_
