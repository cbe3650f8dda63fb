// The CUDA driver ABI's types and the constants the runtime uses, declared
// here so that the runtime builds without the CUDA toolkit (cuda.h's names, in
// namespace llmc::cuda). cuda_h_check.cc compares them with cuda.h when the
// toolkit is found at build time.
#ifndef LLMC_RUNTIME_CUDA_DRIVER_TYPES_H_
#define LLMC_RUNTIME_CUDA_DRIVER_TYPES_H_

#include <cstddef>

namespace llmc::cuda {

// --- Driver ABI types (cuda.h's names, in this namespace) -------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 on 64-bit hosts
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUgraph = CUgraph_st*;
using CUgraphExec = CUgraphExec_st*;
using CUjit_option = int;
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUstreamCaptureMode = int;
using CUmemorytype = int;
struct CUarray_st;
using CUarray = CUarray_st*;

// cuMemcpy2DAsync's parameters (CUDA_MEMCPY2D_v2: 64-bit sizes).
struct CUDA_MEMCPY2D {
  size_t srcXInBytes;
  size_t srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  CUarray srcArray;
  size_t srcPitch;
  size_t dstXInBytes;
  size_t dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  CUarray dstArray;
  size_t dstPitch;
  size_t WidthInBytes;
  size_t Height;
};

// cuLaunchKernelEx's configuration (CUlaunchConfig, CUlaunchAttribute: an
// id, padding to 8 bytes, then a 64-byte union of values). The runtime sets
// one attribute: programmatic stream serialization (--pdl).
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
inline constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;

// CUresult values the runtime tells apart.
inline constexpr CUresult kCudaSuccess = 0;                  // CUDA_SUCCESS
inline constexpr CUresult kCudaErrorInvalidValue = 1;        // CUDA_ERROR_INVALID_VALUE
inline constexpr CUresult kCudaErrorOutOfMemory = 2;         // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr CUresult kCudaErrorNotInitialized = 3;      // CUDA_ERROR_NOT_INITIALIZED
inline constexpr CUresult kCudaErrorStubLibrary = 34;        // CUDA_ERROR_STUB_LIBRARY
inline constexpr CUresult kCudaErrorCallRequiresNewerDriver = 36;
inline constexpr CUresult kCudaErrorNoDevice = 100;          // CUDA_ERROR_NO_DEVICE
inline constexpr CUresult kCudaErrorNotReady = 600;          // CUDA_ERROR_NOT_READY
inline constexpr CUresult kCudaErrorInvalidPtx = 218;        // CUDA_ERROR_INVALID_PTX
inline constexpr CUresult kCudaErrorUnsupportedPtxVersion = 222;

// CUdevice_attribute values.
inline constexpr CUdevice_attribute kAttrMultiprocessorCount = 16;
inline constexpr CUdevice_attribute kAttrMemoryClockRate = 36;      // kHz
inline constexpr CUdevice_attribute kAttrGlobalMemoryBusWidth = 37; // bits
inline constexpr CUdevice_attribute kAttrL2CacheSize = 38;
inline constexpr CUdevice_attribute kAttrComputeCapabilityMajor = 75;
inline constexpr CUdevice_attribute kAttrComputeCapabilityMinor = 76;
inline constexpr CUdevice_attribute kAttrMaxSharedMemoryPerBlockOptin = 97;

// CUjit_option values (cuModuleLoadDataEx).
inline constexpr CUjit_option kJitWallTime = 2;
inline constexpr CUjit_option kJitInfoLogBuffer = 3;
inline constexpr CUjit_option kJitInfoLogBufferSizeBytes = 4;
inline constexpr CUjit_option kJitErrorLogBuffer = 5;
inline constexpr CUjit_option kJitErrorLogBufferSizeBytes = 6;
inline constexpr CUjit_option kJitLogVerbose = 12;

inline constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDisableTiming = 2;    // CU_EVENT_DISABLE_TIMING
inline constexpr CUmemorytype kMemoryTypeHost = 1;    // CU_MEMORYTYPE_HOST
inline constexpr CUmemorytype kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
inline constexpr CUstreamCaptureMode kCaptureModeThreadLocal = 1;

}  // namespace llmc::cuda

#endif  // LLMC_RUNTIME_CUDA_DRIVER_TYPES_H_
