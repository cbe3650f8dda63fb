// One CUDA device opened for execution: the driver (dlopen'd, driver_api.h),
// cuInit, the device's primary context made current, one non-blocking stream
// (one per rank: a rank opens its own device), a device memory pool, and PTX
// modules JIT-compiled by the driver (cuModuleLoadDataEx) with the JIT's log
// in the error when compilation fails. Every driver call is checked; errors
// name the call and the driver's error name and text.
#ifndef LLMC_RUNTIME_CUDA_DEVICE_H_
#define LLMC_RUNTIME_CUDA_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/runtime/cuda/driver_api.h"
#include "llmc/runtime/cuda/memory_pool.h"

namespace llmc::cuda {

struct DeviceInfo {
  int ordinal = 0;
  int device_count = 0;
  std::string name;             // "NVIDIA H200"
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  int64_t total_memory = 0;     // bytes
  int64_t l2_bytes = 0;
  int max_shared_per_block = 0; // opt-in maximum, bytes
  int driver_version = 0;       // 13000 for CUDA 13.0

  // "sm_90" (the artifact target name of this compute capability).
  std::string sm() const;
  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
  std::string Summary() const;
};

// Loads nothing itself: `api` from DriverApi::Get() or a test's Load. Calls
// cuInit and reads device `ordinal`'s properties; creates no context.
absl::StatusOr<DeviceInfo> ProbeDevice(const DriverApi& api, int ordinal = 0);

// A JIT-compiled module (unloaded on destruction; the device must outlive it).
class Module {
 public:
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // NotFound naming the kernel and the module when it is absent.
  absl::StatusOr<CUfunction> Function(const std::string& kernel) const;
  const std::string& name() const { return name_; }
  // The JIT's info log (may be empty) and wall time.
  const std::string& info_log() const { return info_log_; }
  float jit_ms() const { return jit_ms_; }

 private:
  friend class CudaDevice;
  Module() = default;
  const DriverApi* api_ = nullptr;
  CUmodule module_ = nullptr;
  std::string name_;
  std::string info_log_;
  float jit_ms_ = 0;
};

// Page-locked host memory (cuMemAllocHost), freed with the buffer: copies
// from and to it are truly asynchronous, where a pageable buffer makes the
// driver stage each copy and wait for it. Empty until allocated.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const DriverApi* api, void* data, size_t bytes)
      : api_(api), data_(data), bytes_(bytes) {}
  PinnedBuffer(PinnedBuffer&& o) noexcept { *this = std::move(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Free(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }

 private:
  void Free();
  const DriverApi* api_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct CudaDeviceOptions {
  int ordinal = 0;
  size_t pool_slab_bytes = size_t(256) << 20;
};

class CudaDevice {
 public:
  // `api`: nullptr for DriverApi::Get() (the process's driver).
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Open(const CudaDeviceOptions& options = {},
                                                          const DriverApi* api = nullptr);
  // Synchronizes the stream, frees the pool's slabs, destroys the stream and
  // releases the primary context.
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const DeviceInfo& info() const { return info_; }
  const DriverApi& api() const { return *api_; }
  CUstream stream() const { return stream_; }
  DeviceMemoryPool& memory() { return *pool_; }

  // Makes the context current on the calling thread (Open does so for its own).
  absl::Status MakeCurrent() const;
  // JIT-compiles PTX text for this device. `name` (e.g. "kernels/sm_90/
  // kernels.ptx") names the module in errors, which carry the JIT's error log.
  absl::StatusOr<std::unique_ptr<Module>> LoadPtx(absl::string_view ptx, const std::string& name);

  // `bytes` of page-locked host memory (the context must be current).
  absl::StatusOr<PinnedBuffer> AllocPinned(size_t bytes);
  // Stream-ordered copies (the host memory must stay valid until Synchronize).
  absl::Status CopyToDevice(CUdeviceptr dst, const void* src, size_t bytes);
  absl::Status CopyToHost(void* dst, CUdeviceptr src, size_t bytes);
  absl::Status Synchronize();

 private:
  CudaDevice() = default;
  const DriverApi* api_ = nullptr;
  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::unique_ptr<DeviceMemoryPool> pool_;
};

}  // namespace llmc::cuda

#endif  // LLMC_RUNTIME_CUDA_DEVICE_H_
