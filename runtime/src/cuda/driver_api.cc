#include "llmc/runtime/cuda/driver_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"


namespace llmc::cuda {

std::string DriverApi::DefaultPath() {
  const char* env = std::getenv(kDriverEnvVar);
  return env && *env ? std::string(env) : std::string(kDriverLibrary);
}

absl::StatusOr<std::unique_ptr<DriverApi>> DriverApi::Load(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA driver: ", why ? why : path + ": cannot be loaded"));
  }
  std::unique_ptr<DriverApi> api(new DriverApi());
  api->path_ = path;
  api->handle_ = handle;
  auto resolve = [&](const char* symbol, const char* fallback) -> void* {
    void* p = dlsym(handle, symbol);
    if (!p && fallback) p = dlsym(handle, fallback);
    return p;
  };
#define LLMC_CUDA_RESOLVE(name, ret, params, symbol, fallback, required)                         \
  api->name = reinterpret_cast<ret(*) params>(resolve(symbol, fallback));                        \
  if (!api->name && (required))                                                                  \
    return absl::FailedPreconditionError(absl::StrCat(                                           \
        path, ": not a usable CUDA driver: it does not export ", symbol,                         \
        " (a driver older than CUDA 12? update the NVIDIA driver, or use --backend=host)"));
  LLMC_CUDA_DRIVER_FUNCTIONS(LLMC_CUDA_RESOLVE)
#undef LLMC_CUDA_RESOLVE
  return api;
}

absl::StatusOr<const DriverApi*> DriverApi::Get() {
  static std::once_flag once;
  static absl::StatusOr<std::unique_ptr<DriverApi>>* loaded = nullptr;
  std::call_once(once, [] {
    loaded = new absl::StatusOr<std::unique_ptr<DriverApi>>(Load(DefaultPath()));
  });
  if (!loaded->ok()) return loaded->status();
  return loaded->value().get();
}

DriverApi::~DriverApi() {
  // The process-wide driver (Get) is never destroyed; a table from Load is
  // unloaded with it, which only tests do.
  if (handle_) dlclose(handle_);
}

std::string DriverApi::Describe(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (!cuGetErrorName || cuGetErrorName(r, &name) != kCudaSuccess || !name)
    return absl::StrFormat("CUDA error %d", r);
  if (!cuGetErrorString || cuGetErrorString(r, &text) != kCudaSuccess || !text)
    return absl::StrFormat("%s (%d)", name, r);
  return absl::StrFormat("%s (%d): %s", name, r, text);
}

absl::Status DriverApi::Check(CUresult r, absl::string_view call) const {
  if (r == kCudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(call, " failed: ", Describe(r));
  switch (r) {
    case kCudaErrorOutOfMemory: return absl::ResourceExhaustedError(msg);
    case kCudaErrorNoDevice:
    case kCudaErrorStubLibrary:
    case kCudaErrorCallRequiresNewerDriver: return absl::FailedPreconditionError(msg);
    case kCudaErrorInvalidValue: return absl::InvalidArgumentError(msg);
    default: return absl::InternalError(msg);
  }
}

}  // namespace llmc::cuda
