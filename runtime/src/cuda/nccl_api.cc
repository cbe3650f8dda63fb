#include "llmc/runtime/cuda/nccl_api.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <initializer_list>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llmc::cuda {
namespace {

const char* ResultName(ncclResult_t r) {
  switch (r) {
    case kNcclSuccess:
      return "ncclSuccess";
    case kNcclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case kNcclSystemError:
      return "ncclSystemError";
    case kNcclInternalError:
      return "ncclInternalError";
    case kNcclInvalidArgument:
      return "ncclInvalidArgument";
    case kNcclInvalidUsage:
      return "ncclInvalidUsage";
    case kNcclRemoteError:
      return "ncclRemoteError";
    case kNcclInProgress:
      return "ncclInProgress";
  }
  return nullptr;
}

// Files matching `pattern`, sorted (glob's order), none when nothing does.
std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

}  // namespace

std::vector<std::string> NcclApi::Candidates() {
  if (const char* env = std::getenv(kNcclEnvVar); env && *env) return {env};
  std::vector<std::string> out = {kNcclLibrary};
  auto add = [&](const std::string& path) {
    for (const std::string& seen : out)
      if (seen == path) return;
    out.push_back(path);
  };
  // The CUDA toolkit's copy (CUDA 13 ships NCCL in its lib folder).
  for (const char* var : {"LLMC_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(var); home && *home)
      for (const char* lib : {"lib64", "lib", "targets/x86_64-linux/lib"})
        add(absl::StrCat(home, "/", lib, "/", kNcclLibrary));
  for (const char* lib : {"lib64", "lib", "targets/x86_64-linux/lib"})
    add(absl::StrCat("/usr/local/cuda/", lib, "/", kNcclLibrary));
  // pip's nvidia-nccl-cu13 (and -cu12) wheels: site-packages/nvidia/nccl/lib.
  std::vector<std::string> prefixes;
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv) prefixes.emplace_back(venv);
  if (const char* home = std::getenv("HOME"); home && *home)
    prefixes.push_back(absl::StrCat(home, "/.local"));
  prefixes.emplace_back("/usr/local");
  prefixes.emplace_back("/usr");
  for (const std::string& prefix : prefixes)
    for (const char* dir : {"site-packages", "dist-packages"})
      for (const std::string& found :
           Glob(absl::StrCat(prefix, "/lib/python3*/", dir, "/nvidia/nccl/lib/", kNcclLibrary)))
        add(found);
  return out;
}

absl::StatusOr<std::unique_ptr<NcclApi>> NcclApi::Load(const std::string& path) {
  if (!path.empty()) return LoadFirst({path}, "");
  const char* env = std::getenv(kNcclEnvVar);
  if (env && *env)
    return LoadFirst({env}, absl::StrCat(" (named by ", kNcclEnvVar,
                                         "; point it at NCCL's library, or unset it to search "
                                         "for ",
                                         kNcclLibrary, ")"));
  return LoadFirst(Candidates(), absl::StrCat(": install NCCL (the CUDA toolkit's lib folder "
                                              "has it, or pip install nvidia-nccl-cu13) or set ",
                                              kNcclEnvVar, " to its path"));
}

absl::StatusOr<std::unique_ptr<NcclApi>> NcclApi::LoadFirst(
    const std::vector<std::string>& candidates, absl::string_view hint) {
  std::unique_ptr<NcclApi> api(new NcclApi());
  std::vector<std::string> failures;
  for (const std::string& candidate : candidates) {
    dlerror();
    api->handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->handle_) {
      api->path_ = candidate;
      break;
    }
    const char* why = dlerror();
    failures.push_back(why ? std::string(why) : candidate + ": cannot be loaded");
  }
  if (!api->handle_)
    return absl::FailedPreconditionError(absl::StrCat(
        kNcclLibrary, " not found (tried: ", absl::StrJoin(failures, "; "), ")", hint));
#define LLMC_NCCL_RESOLVE(name, ret, params, required)                     \
  api->name = reinterpret_cast<ret(*) params>(dlsym(api->handle_, #name)); \
  if (!api->name && (required))                                            \
    return absl::FailedPreconditionError(                                  \
        absl::StrCat(api->path_, ": not a usable NCCL: it does not export ", #name));
  LLMC_NCCL_FUNCTIONS(LLMC_NCCL_RESOLVE)
#undef LLMC_NCCL_RESOLVE
  if (absl::Status st = api->Check(api->ncclGetVersion(&api->version_), "ncclGetVersion"); !st.ok())
    return absl::FailedPreconditionError(absl::StrCat(api->path_, ": ", st.message()));
  if (api->version_ < kMinVersion)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is NCCL %s; llmc needs 2.12 or later (ncclCommGetAsyncError, ncclCommAbort)",
        api->path_, api->VersionString()));
  return api;
}

absl::StatusOr<const NcclApi*> NcclApi::Get() {
  static std::once_flag once;
  static absl::StatusOr<std::unique_ptr<NcclApi>>* loaded = nullptr;
  std::call_once(once, [] { loaded = new absl::StatusOr<std::unique_ptr<NcclApi>>(Load("")); });
  if (!loaded->ok()) return loaded->status();
  return loaded->value().get();
}

NcclApi::~NcclApi() {
  if (handle_) dlclose(handle_);
}

std::string NcclApi::VersionString() const {
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z since 2.9; X*1000 + Y*100 + Z before.
  int major_unit = version_ >= 10000 ? 10000 : 1000;
  return absl::StrFormat("%d.%d.%d", version_ / major_unit, (version_ % major_unit) / 100,
                         version_ % 100);
}

std::string NcclApi::Describe(ncclResult_t r) const {
  const char* name = ResultName(r);
  const char* text = ncclGetErrorString ? ncclGetErrorString(r) : nullptr;
  std::string out =
      name ? absl::StrFormat("%s (%d)", name, r) : absl::StrFormat("NCCL result %d", r);
  if (text && *text) absl::StrAppend(&out, ": ", text);
  return out;
}

absl::Status NcclApi::Check(ncclResult_t r, absl::string_view call, ncclComm_t comm) const {
  if (r == kNcclSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(call, " failed: ", Describe(r));
  if (ncclGetLastError) {
    const char* last = ncclGetLastError(comm);
    if (last && *last) absl::StrAppend(&msg, " (", last, ")");
  }
  switch (r) {
    case kNcclInvalidArgument:
    case kNcclInvalidUsage:
      return absl::InvalidArgumentError(msg);
    case kNcclSystemError:
    case kNcclRemoteError:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace llmc::cuda
