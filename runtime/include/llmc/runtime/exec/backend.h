// Which backend executes an artifact: `--backend=auto|host|cuda`.
//
//   host  the host kernels (kernels/host/kernels.so), as always.
//   cuda  the GPU: needs the CUDA driver (libcuda.so.1, dlopen'd), a device,
//         and an sm_XX target in the artifact that the device can run; fails
//         with the reason otherwise.
//   auto  (the default) cuda when all of that holds, else host. An artifact
//         compiled for host only runs on host without touching the driver,
//         silently; one with CUDA kernels that falls back to host says why in
//         one line on stderr.
#ifndef LLMC_RUNTIME_EXEC_BACKEND_H_
#define LLMC_RUNTIME_EXEC_BACKEND_H_

#include <functional>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/cuda/device.h"

namespace llmc {

enum class Backend { kAuto, kHost, kCuda };

absl::StatusOr<Backend> ParseBackend(absl::string_view name);  // "auto", "host", "cuda"
const char* ToString(Backend backend);

struct BackendChoice {
  Backend backend = Backend::kHost;       // kHost or kCuda
  std::string cuda_target;                // kCuda: the artifact target it runs ("sm_90")
  std::optional<cuda::DeviceInfo> device; // when the driver was probed successfully
  std::string note;                       // one line for stderr, or empty
};

// The artifact target a device of compute capability major.minor runs, if
// any: the newest sm_XY not newer than the device (PTX is JIT-compiled
// forward), or an arch-specific sm_XYa only on exactly that device.
std::optional<std::string> PickCudaTarget(const std::vector<std::string>& targets, int sm_major,
                                          int sm_minor);

struct BackendRequest {
  Backend requested = Backend::kAuto;
  std::vector<std::string> targets;  // the manifest's
  // Whether the artifact carries CUDA kernels the CUDA executor runs (a
  // manifest `cuda` section with modules); a target list may name sm_XX
  // without them (an artifact from before the CUDA emitter).
  bool cuda_executor = false;
};

// Device 0's properties, or why there is none ("no CUDA driver: ...").
using DeviceProbe = std::function<absl::StatusOr<cuda::DeviceInfo>()>;

// Decides; errors are FailedPrecondition with a message for the user,
// starting "--backend=cuda: ..." (or, for auto, saying why neither backend
// can run). The probe is called only when the answer depends on it.
absl::StatusOr<BackendChoice> ChooseBackend(const BackendRequest& request, const DeviceProbe& probe);
// With the process's driver (DriverApi::Get(), so $LLMC_CUDA_DRIVER applies).
absl::StatusOr<BackendChoice> ChooseBackend(const BackendRequest& request);

// The `targets` of an artifact's manifest (reads only manifest.json).
absl::StatusOr<std::vector<std::string>> ReadArtifactTargets(const std::string& artifact_dir);
// The request for the artifact at `artifact_dir`: its targets, and whether it
// has CUDA kernels (reads only manifest.json).
absl::StatusOr<BackendRequest> ReadBackendRequest(const std::string& artifact_dir,
                                                  Backend requested);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_BACKEND_H_
