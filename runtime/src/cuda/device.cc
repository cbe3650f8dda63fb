#include "llmc/runtime/cuda/device.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace llmc::cuda {

std::string DeviceInfo::sm() const { return absl::StrFormat("sm_%d%d", sm_major, sm_minor); }

std::string DeviceInfo::Summary() const {
  return absl::StrFormat("%s (%s, %d SMs, %.1f GiB)", name, sm(), multiprocessors,
                         double(total_memory) / double(int64_t(1) << 30));
}

absl::StatusOr<DeviceInfo> ProbeDevice(const DriverApi& api, int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  LLMC_CUDA_RETURN_IF_ERROR(api, cuInit(0));
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDriverGetVersion(&info.driver_version));
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGetCount(&info.device_count));
  if (info.device_count == 0)
    return absl::FailedPreconditionError(
        absl::StrCat(api.path(), ": the CUDA driver sees no device"));
  if (ordinal < 0 || ordinal >= info.device_count)
    return absl::InvalidArgumentError(absl::StrFormat(
        "CUDA device %d does not exist (the driver sees %d)", ordinal, info.device_count));
  CUdevice dev = 0;
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGet(&dev, ordinal));
  char name[256] = {};
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGetName(name, int(sizeof name) - 1, dev));
  info.name = name;
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGetAttribute(&info.sm_major, kAttrComputeCapabilityMajor, dev));
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGetAttribute(&info.sm_minor, kAttrComputeCapabilityMinor, dev));
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGetAttribute(&info.multiprocessors, kAttrMultiprocessorCount, dev));
  int l2 = 0;
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceGetAttribute(&l2, kAttrL2CacheSize, dev));
  info.l2_bytes = l2;
  LLMC_CUDA_RETURN_IF_ERROR(
      api, cuDeviceGetAttribute(&info.max_shared_per_block, kAttrMaxSharedMemoryPerBlockOptin, dev));
  size_t total = 0;
  LLMC_CUDA_RETURN_IF_ERROR(api, cuDeviceTotalMem(&total, dev));
  info.total_memory = int64_t(total);
  return info;
}

// --- Module -------------------------------------------------------------------

Module::~Module() {
  if (module_) (void)api_->cuModuleUnload(module_);
}

absl::StatusOr<CUfunction> Module::Function(const std::string& kernel) const {
  CUfunction f = nullptr;
  CUresult r = api_->cuModuleGetFunction(&f, module_, kernel.c_str());
  if (r != kCudaSuccess) {
    absl::Status st = api_->Check(r, absl::StrCat("cuModuleGetFunction(\"", kernel, "\")"));
    return absl::NotFoundError(absl::StrCat(name_, ": kernel ", kernel, ": ", st.message()));
  }
  return f;
}

// --- CudaDevice -----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(const CudaDeviceOptions& options,
                                                             const DriverApi* api) {
  if (!api) {
    auto got = DriverApi::Get();
    if (!got.ok()) return got.status();
    api = *got;
  }
  auto info = ProbeDevice(*api, options.ordinal);
  if (!info.ok()) return info.status();
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->api_ = api;
  d->info_ = *std::move(info);
  LLMC_CUDA_RETURN_IF_ERROR(*api, cuDeviceGet(&d->device_, options.ordinal));
  CUcontext ctx = nullptr;
  LLMC_CUDA_RETURN_IF_ERROR(*api, cuDevicePrimaryCtxRetain(&ctx, d->device_));
  d->context_ = ctx;  // released by the destructor from here on
  LLMC_CUDA_RETURN_IF_ERROR(*api, cuCtxSetCurrent(d->context_));
  CUstream stream = nullptr;
  LLMC_CUDA_RETURN_IF_ERROR(*api, cuStreamCreate(&stream, kStreamNonBlocking));
  d->stream_ = stream;
  d->pool_ = std::make_unique<DeviceMemoryPool>(
      [api](size_t bytes) -> absl::StatusOr<CUdeviceptr> {
        CUdeviceptr p = 0;
        CUresult r = api->cuMemAlloc(&p, bytes);
        if (r != kCudaSuccess)
          return api->Check(r, absl::StrFormat("cuMemAlloc_v2(%d bytes)", bytes));
        return p;
      },
      [api](CUdeviceptr p) { return api->Check(api->cuMemFree(p), "cuMemFree_v2"); },
      options.pool_slab_bytes);
  return d;
}

CudaDevice::~CudaDevice() {
  if (!api_) return;
  if (context_) (void)api_->cuCtxSetCurrent(context_);
  if (stream_) (void)api_->cuStreamSynchronize(stream_);
  pool_.reset();
  if (stream_) (void)api_->cuStreamDestroy(stream_);
  if (context_) (void)api_->cuDevicePrimaryCtxRelease(device_);
}

absl::Status CudaDevice::MakeCurrent() const {
  LLMC_CUDA_RETURN_IF_ERROR(*api_, cuCtxSetCurrent(context_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Module>> CudaDevice::LoadPtx(absl::string_view ptx,
                                                            const std::string& name) {
  std::string image(ptx);  // cuModuleLoadDataEx reads PTX as a C string
  constexpr size_t kLogBytes = 64 << 10;
  std::vector<char> info_log(kLogBytes, '\0'), error_log(kLogBytes, '\0');
  CUjit_option options[] = {kJitInfoLogBuffer,  kJitInfoLogBufferSizeBytes,
                            kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes,
                            kJitLogVerbose,     kJitWallTime};
  void* values[] = {info_log.data(),
                    reinterpret_cast<void*>(uintptr_t(kLogBytes - 1)),
                    error_log.data(),
                    reinterpret_cast<void*>(uintptr_t(kLogBytes - 1)),
                    reinterpret_cast<void*>(uintptr_t(1)),
                    nullptr};
  CUmodule module = nullptr;
  CUresult r = api_->cuModuleLoadDataEx(&module, image.c_str(), unsigned(std::size(options)),
                                        options, values);
  // The driver writes back the bytes of each log it filled.
  auto log_text = [](const std::vector<char>& buf, void* written) {
    size_t n = std::min<size_t>(uintptr_t(written), buf.size() - 1);
    std::string s(buf.data(), strnlen(buf.data(), n ? n : buf.size() - 1));
    return std::string(absl::StripTrailingAsciiWhitespace(s));
  };
  if (r != kCudaSuccess) {
    absl::Status st = api_->Check(r, "cuModuleLoadDataEx");
    std::string log = log_text(error_log, values[3]);
    return absl::Status(st.code(),
                        absl::StrCat(name, ": PTX JIT for ", info_.sm(), " failed: ", st.message(),
                                     log.empty() ? " (the JIT wrote no log)"
                                                 : absl::StrCat("\nJIT error log:\n", log)));
  }
  std::unique_ptr<Module> m(new Module());
  m->api_ = api_;
  m->module_ = module;
  m->name_ = name;
  m->info_log_ = log_text(info_log, values[1]);
  uint32_t bits = uint32_t(uintptr_t(values[5]));
  std::memcpy(&m->jit_ms_, &bits, sizeof bits);
  return m;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    Free();
    api_ = std::exchange(o.api_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::Free() {
  if (data_ != nullptr) api_->cuMemFreeHost(data_);  // nothing to report from a destructor
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<PinnedBuffer> CudaDevice::AllocPinned(size_t bytes) {
  void* p = nullptr;
  CUresult r = api_->cuMemAllocHost(&p, bytes);
  if (absl::Status st = api_->Check(r, absl::StrFormat("cuMemAllocHost_v2(%d bytes)", bytes));
      !st.ok())
    return st;
  return PinnedBuffer(api_, p, bytes);
}

absl::Status CudaDevice::CopyToDevice(CUdeviceptr dst, const void* src, size_t bytes) {
  CUresult r = api_->cuMemcpyHtoDAsync(dst, src, bytes, stream_);
  return api_->Check(r, absl::StrFormat("cuMemcpyHtoDAsync_v2(%d bytes)", bytes));
}

absl::Status CudaDevice::CopyToHost(void* dst, CUdeviceptr src, size_t bytes) {
  CUresult r = api_->cuMemcpyDtoHAsync(dst, src, bytes, stream_);
  return api_->Check(r, absl::StrFormat("cuMemcpyDtoHAsync_v2(%d bytes)", bytes));
}

absl::Status CudaDevice::Synchronize() {
  LLMC_CUDA_RETURN_IF_ERROR(*api_, cuStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace llmc::cuda
