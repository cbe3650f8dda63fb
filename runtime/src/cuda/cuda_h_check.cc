// When the CUDA toolkit is found at build time: driver_types.h's declarations
// against cuda.h's (sizes, enum values). Nothing of cuda.h is called; the
// driver's functions come from dlsym (driver_api.cc). Without the toolkit this
// file compiles to nothing.
#include "llmc/runtime/cuda/driver_types.h"

#ifdef LLMC_HAVE_CUDA_H
#include <cuda.h>

#include <cstddef>
#include <type_traits>
namespace {
namespace c = llmc::cuda;
static_assert(std::is_same_v<::CUresult, decltype(::CUDA_SUCCESS)>);
static_assert(sizeof(::CUresult) == sizeof(c::CUresult));
static_assert(std::is_same_v<::CUdevice, c::CUdevice>);
static_assert(std::is_same_v<::CUdeviceptr, c::CUdeviceptr>);
static_assert(::CUDA_SUCCESS == c::kCudaSuccess);
static_assert(::CUDA_ERROR_INVALID_VALUE == c::kCudaErrorInvalidValue);
static_assert(::CUDA_ERROR_OUT_OF_MEMORY == c::kCudaErrorOutOfMemory);
static_assert(::CUDA_ERROR_NOT_INITIALIZED == c::kCudaErrorNotInitialized);
static_assert(::CUDA_ERROR_STUB_LIBRARY == c::kCudaErrorStubLibrary);
static_assert(::CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER == c::kCudaErrorCallRequiresNewerDriver);
static_assert(::CUDA_ERROR_NO_DEVICE == c::kCudaErrorNoDevice);
static_assert(::CUDA_ERROR_INVALID_PTX == c::kCudaErrorInvalidPtx);
static_assert(::CUDA_ERROR_UNSUPPORTED_PTX_VERSION == c::kCudaErrorUnsupportedPtxVersion);
static_assert(::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == c::kAttrMultiprocessorCount);
static_assert(::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE == c::kAttrMemoryClockRate);
static_assert(::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH == c::kAttrGlobalMemoryBusWidth);
static_assert(::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE == c::kAttrL2CacheSize);
static_assert(::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == c::kAttrComputeCapabilityMajor);
static_assert(::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == c::kAttrComputeCapabilityMinor);
static_assert(::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ==
              c::kAttrMaxSharedMemoryPerBlockOptin);
static_assert(::CU_JIT_WALL_TIME == c::kJitWallTime);
static_assert(::CU_JIT_INFO_LOG_BUFFER == c::kJitInfoLogBuffer);
static_assert(::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES == c::kJitInfoLogBufferSizeBytes);
static_assert(::CU_JIT_ERROR_LOG_BUFFER == c::kJitErrorLogBuffer);
static_assert(::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == c::kJitErrorLogBufferSizeBytes);
static_assert(::CU_JIT_LOG_VERBOSE == c::kJitLogVerbose);
static_assert(::CU_STREAM_NON_BLOCKING == c::kStreamNonBlocking);
static_assert(::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == c::kCaptureModeThreadLocal);
static_assert(::CUDA_ERROR_NOT_READY == c::kCudaErrorNotReady);
static_assert(::CU_EVENT_DISABLE_TIMING == c::kEventDisableTiming);
static_assert(::CU_MEMORYTYPE_HOST == c::kMemoryTypeHost);
static_assert(::CU_MEMORYTYPE_DEVICE == c::kMemoryTypeDevice);
static_assert(sizeof(::CUmemorytype) == sizeof(c::CUmemorytype));
// cuMemcpy2DAsync_v2's struct, field by field.
static_assert(sizeof(::CUDA_MEMCPY2D) == sizeof(c::CUDA_MEMCPY2D));
#define LLMC_SAME_OFFSET(f) \
  static_assert(offsetof(::CUDA_MEMCPY2D, f) == offsetof(c::CUDA_MEMCPY2D, f), #f)
LLMC_SAME_OFFSET(srcXInBytes);
LLMC_SAME_OFFSET(srcY);
LLMC_SAME_OFFSET(srcMemoryType);
LLMC_SAME_OFFSET(srcHost);
LLMC_SAME_OFFSET(srcDevice);
LLMC_SAME_OFFSET(srcArray);
LLMC_SAME_OFFSET(srcPitch);
LLMC_SAME_OFFSET(dstXInBytes);
LLMC_SAME_OFFSET(dstY);
LLMC_SAME_OFFSET(dstMemoryType);
LLMC_SAME_OFFSET(dstHost);
LLMC_SAME_OFFSET(dstDevice);
LLMC_SAME_OFFSET(dstArray);
LLMC_SAME_OFFSET(dstPitch);
LLMC_SAME_OFFSET(WidthInBytes);
LLMC_SAME_OFFSET(Height);
#undef LLMC_SAME_OFFSET
// cuLaunchKernelEx's structs, field by field, and the attribute's id.
static_assert(sizeof(::CUlaunchAttribute) == sizeof(c::CUlaunchAttribute));
static_assert(sizeof(::CUlaunchAttributeID) == sizeof(int));
static_assert(offsetof(::CUlaunchAttribute, value) == offsetof(c::CUlaunchAttribute, value));
static_assert(offsetof(::CUlaunchAttribute, value.programmaticStreamSerializationAllowed) ==
              offsetof(c::CUlaunchAttribute, value.programmaticStreamSerializationAllowed));
static_assert(::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ==
              c::kLaunchAttributeProgrammaticStreamSerialization);
static_assert(sizeof(::CUlaunchConfig) == sizeof(c::CUlaunchConfig));
#define LLMC_SAME_OFFSET(f) \
  static_assert(offsetof(::CUlaunchConfig, f) == offsetof(c::CUlaunchConfig, f), #f)
LLMC_SAME_OFFSET(gridDimX);
LLMC_SAME_OFFSET(blockDimX);
LLMC_SAME_OFFSET(sharedMemBytes);
LLMC_SAME_OFFSET(hStream);
LLMC_SAME_OFFSET(attrs);
LLMC_SAME_OFFSET(numAttrs);
#undef LLMC_SAME_OFFSET
static_assert(sizeof(::CUjit_option) == sizeof(c::CUjit_option));
static_assert(sizeof(::CUdevice_attribute) == sizeof(c::CUdevice_attribute));
static_assert(sizeof(::CUstreamCaptureMode) == sizeof(c::CUstreamCaptureMode));
}  // namespace
#endif
