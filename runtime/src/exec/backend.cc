#include "llmc/runtime/exec/backend.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/runtime/cuda/driver_api.h"

namespace llmc {
namespace {

bool IsCudaTarget(const std::string& t) { return absl::StartsWith(t, "sm_"); }

// "sm_90" -> {90, '\0'}, "sm_90a" -> {90, 'a'}; nullopt for anything else.
std::optional<std::pair<int, char>> ParseSm(const std::string& t) {
  if (!IsCudaTarget(t)) return std::nullopt;
  size_t i = 3;
  int n = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9' && n < 100000) n = n * 10 + (t[i++] - '0');
  if (i == 3) return std::nullopt;
  if (i == t.size()) return std::pair{n, '\0'};
  if (i + 1 == t.size() && t[i] >= 'a' && t[i] <= 'z') return std::pair{n, t[i]};
  return std::nullopt;
}

std::string TargetList(const std::vector<std::string>& targets) {
  return targets.empty() ? "none" : absl::StrJoin(targets, ", ");
}

}  // namespace

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name == "auto") return Backend::kAuto;
  if (name == "host") return Backend::kHost;
  if (name == "cuda") return Backend::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("flag --backend: '", name, "' is not a backend (auto, host, cuda)"));
}

const char* ToString(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kHost: return "host";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

std::optional<std::string> PickCudaTarget(const std::vector<std::string>& targets, int sm_major,
                                          int sm_minor) {
  int device = sm_major * 10 + sm_minor;
  std::optional<std::string> best;
  int best_n = -1, best_rank = -1;
  for (const std::string& t : targets) {
    auto sm = ParseSm(t);
    if (!sm) continue;
    auto [n, suffix] = *sm;
    bool runs = false;
    int rank = 0;  // at equal versions: arch-specific > family > portable
    if (suffix == '\0') {
      runs = n <= device;  // PTX JITs forward
    } else if (suffix == 'a') {
      runs = n == device;
      rank = 2;
    } else if (suffix == 'f') {
      runs = n <= device && n / 10 == sm_major;
      rank = 1;
    }
    if (runs && (n > best_n || (n == best_n && rank > best_rank))) {
      best = t;
      best_n = n;
      best_rank = rank;
    }
  }
  return best;
}

absl::StatusOr<BackendChoice> ChooseBackend(const BackendRequest& request,
                                            const DeviceProbe& probe) {
  BackendChoice choice;
  const auto& targets = request.targets;
  bool has_host = std::find(targets.begin(), targets.end(), "host") != targets.end();
  bool has_cuda = std::any_of(targets.begin(), targets.end(), IsCudaTarget);
  if (request.requested == Backend::kHost) return choice;
  // auto over a host-only artifact: host by default; the driver is not touched.
  if (request.requested == Backend::kAuto && !has_cuda) return choice;

  const bool forced = request.requested == Backend::kCuda;
  auto fail = [&](const std::string& why) {
    return absl::FailedPreconditionError(forced ? absl::StrCat("--backend=cuda: ", why) : why);
  };
  // auto cannot fall back to host: say why neither backend runs.
  auto no_host = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the artifact has no host kernels (targets: ", TargetList(targets),
        ") and the GPU cannot run it: ", why, "; recompile with --target=",
        absl::StrJoin(targets, ","), ",host to run it on this machine"));
  };
  auto fall_back = [&](const std::string& why) -> absl::StatusOr<BackendChoice> {
    if (!has_host) return no_host(why);
    choice.backend = Backend::kHost;
    choice.note = absl::StrCat(why, "; running on the host backend");
    return choice;
  };

  auto device = probe();
  if (!device.ok()) {
    std::string why(device.status().message());
    if (forced)
      return fail(absl::StrCat(why, absl::StartsWith(why, "no CUDA driver")
                                        ? " (install the NVIDIA driver, or use --backend=host)"
                                        : " (use --backend=host)"));
    return fall_back(why);
  }
  choice.device = *device;
  const cuda::DeviceInfo& d = *device;
  if (!has_cuda)  // only when forced
    return fail(absl::StrCat("the artifact was compiled for host only (targets: ",
                             TargetList(targets), "); recompile with --target=", d.sm(),
                             " to run it on ", d.name));
  auto target = PickCudaTarget(targets, d.sm_major, d.sm_minor);
  if (!target) {
    std::string why = absl::StrCat("the artifact has no kernels that ", d.name, " (", d.sm(),
                                   ") runs (targets: ", TargetList(targets), ")");
    if (forced) return fail(absl::StrCat(why, "; recompile with --target=", d.sm()));
    return fall_back(why);
  }
  if (!request.cuda_executor) {
    std::string why = absl::StrCat("found ", d.name, " (", d.sm(), ") and the artifact's ", *target,
                                   " target, but the artifact has no CUDA kernels (its manifest "
                                   "has no cuda section; recompile it with this llmc)");
    if (forced) return fail(absl::StrCat(why, "; use --backend=host"));
    return fall_back(why);
  }
  choice.backend = Backend::kCuda;
  choice.cuda_target = *target;
  if (!forced)
    choice.note = absl::StrCat("running on CUDA device ", d.ordinal, ": ", d.Summary(),
                               ", with the artifact's ", *target, " kernels");
  return choice;
}

absl::StatusOr<BackendChoice> ChooseBackend(const BackendRequest& request) {
  return ChooseBackend(request, []() -> absl::StatusOr<cuda::DeviceInfo> {
    auto api = cuda::DriverApi::Get();
    if (!api.ok()) return api.status();
    return cuda::ProbeDevice(**api, 0);
  });
}

namespace {

absl::StatusOr<Manifest> ReadManifest(const std::string& artifact_dir) {
  std::string path = absl::StrCat(artifact_dir, "/", kManifestFile);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20))
    return absl::NotFoundError(absl::StrCat(path, ": not a readable manifest"));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return ManifestFromJson(text.str(), path);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadArtifactTargets(const std::string& artifact_dir) {
  auto manifest = ReadManifest(artifact_dir);
  if (!manifest.ok()) return manifest.status();
  return manifest->targets;
}

absl::StatusOr<BackendRequest> ReadBackendRequest(const std::string& artifact_dir,
                                                  Backend requested) {
  auto manifest = ReadManifest(artifact_dir);
  if (!manifest.ok()) return manifest.status();
  BackendRequest request;
  request.requested = requested;
  request.targets = manifest->targets;
  request.cuda_executor = !manifest->cuda.modules.empty();
  return request;
}

}  // namespace llmc
