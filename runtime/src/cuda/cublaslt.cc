#include "llmc/runtime/cuda/cublaslt.h"

#include <dlfcn.h>

#include <algorithm>
#include <compare>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llmc::cuda {
namespace {

const char* StatusName(cublasStatus_t s) {
  switch (s) {
    case kCublasStatusSuccess: return "CUBLAS_STATUS_SUCCESS";
    case kCublasStatusNotInitialized: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kCublasStatusAllocFailed: return "CUBLAS_STATUS_ALLOC_FAILED";
    case kCublasStatusInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE";
    case kCublasStatusArchMismatch: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case kCublasStatusMappingError: return "CUBLAS_STATUS_MAPPING_ERROR";
    case kCublasStatusExecutionFailed: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case kCublasStatusInternalError: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case kCublasStatusNotSupported: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case kCublasStatusLicenseError: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return nullptr;
}

cudaDataType_t DataType(GemmType t) {
  switch (t) {
    case GemmType::kF16: return kCudaR16F;
    case GemmType::kBF16: return kCudaR16BF;
    case GemmType::kF32: return kCudaR32F;
  }
  return kCudaR32F;
}

// The alignment a pointer has, up to the 256 bytes cuBLASLt assumes unless
// told less.
uint32_t Alignment(CUdeviceptr p) {
  if (p == 0) return 256;
  return uint32_t(std::min<CUdeviceptr>(p & (~p + 1), 256));
}

// "1.2.3" from cublasLtGetVersion's major * 10000 + minor * 100 + patch
// (cuBLAS 11 and older: major * 1000 + minor * 100 + patch).
std::string VersionString(size_t v) {
  size_t major_unit = v >= 100000 ? 10000 : 1000;
  return absl::StrFormat("%d.%d.%d", v / major_unit, (v % major_unit) / 100, v % 100);
}

}  // namespace

const char* GemmTypeName(GemmType t) {
  switch (t) {
    case GemmType::kF16: return "f16";
    case GemmType::kBF16: return "bf16";
    case GemmType::kF32: return "f32";
  }
  return "?";
}

struct CublasLt::State {
#define LLMC_CUBLASLT_DECLARE_MEMBER(name, ret, params, required) ret(*name) params = nullptr;
  LLMC_CUBLASLT_FUNCTIONS(LLMC_CUBLASLT_DECLARE_MEMBER)
#undef LLMC_CUBLASLT_DECLARE_MEMBER

  std::string path;
  void* library = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  size_t version = 0;

  // What a shape needs on every call: its layouts and the chosen algorithm.
  struct Key {
    GemmType type;
    int64_t T, N, K;
    uint32_t align_a, align_w, align_d;
    auto operator<=>(const Key&) const = default;
  };
  struct Plan {
    cublasLtMatrixLayout_t w_layout = nullptr;  // cuBLAS's A: K x N, ld K, transposed
    cublasLtMatrixLayout_t a_layout = nullptr;  // cuBLAS's B: K x T, ld K
    cublasLtMatrixLayout_t d_layout = nullptr;  // C and D: N x T, ld N, f32
    cublasLtMatmulAlgo_t algo{};
    size_t workspace_needed = 0;
  };
  std::mutex mu;
  std::map<Key, Plan> plans;

  void Destroy(Plan& p) {
    for (cublasLtMatrixLayout_t* l : {&p.w_layout, &p.a_layout, &p.d_layout}) {
      if (*l) cublasLtMatrixLayoutDestroy(*l);
      *l = nullptr;
    }
  }
};

CublasLt::CublasLt(std::unique_ptr<State> state) : s_(std::move(state)) {}

CublasLt::~CublasLt() {
  if (!s_) return;
  for (auto& [key, plan] : s_->plans) s_->Destroy(plan);
  s_->plans.clear();
  if (s_->desc) s_->cublasLtMatmulDescDestroy(s_->desc);
  if (s_->handle) s_->cublasLtDestroy(s_->handle);
  if (s_->library) dlclose(s_->library);
}

absl::StatusOr<std::unique_ptr<CublasLt>> CublasLt::Load(absl::string_view path) {
  std::vector<std::string> candidates;
  std::string hint;  // appended to a failure to load
  if (!path.empty()) {
    candidates.emplace_back(path);
  } else if (const char* env = std::getenv(kCublasLtEnvVar); env && *env) {
    candidates.emplace_back(env);
    hint = absl::StrCat(" (from ", kCublasLtEnvVar, ")");
  } else {
    for (const char* name : kCublasLtLibraries) candidates.emplace_back(name);
    hint = absl::StrCat(" (install cuBLAS, or set ", kCublasLtEnvVar, " to the library's path)");
  }
  auto state = std::make_unique<State>();
  std::vector<std::string> failures;
  for (const std::string& candidate : candidates) {
    dlerror();
    state->library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (state->library) {
      state->path = candidate;
      break;
    }
    const char* why = dlerror();
    failures.push_back(why ? std::string(why) : candidate + ": cannot be loaded");
  }
  if (!state->library) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load cuBLASLt: ", absl::StrJoin(failures, "; "), hint));
  }
  // From here the object owns what is created: an early return cleans up.
  std::unique_ptr<CublasLt> lt(new CublasLt(std::move(state)));
  State& s = *lt->s_;
#define LLMC_CUBLASLT_RESOLVE(name, ret, params, required)                                    \
  s.name = reinterpret_cast<ret(*) params>(dlsym(s.library, #name));                          \
  if (!s.name && (required))                                                                  \
    return absl::FailedPreconditionError(                                                     \
        absl::StrCat(s.path, ": not a usable cuBLASLt: it does not export ", #name));
  LLMC_CUBLASLT_FUNCTIONS(LLMC_CUBLASLT_RESOLVE)
#undef LLMC_CUBLASLT_RESOLVE
  s.version = s.cublasLtGetVersion();
  if (absl::Status st = lt->Check(s.cublasLtCreate(&s.handle), "cublasLtCreate"); !st.ok()) {
    s.handle = nullptr;
    return absl::Status(st.code(), absl::StrCat(s.path, " (cuBLASLt ", VersionString(s.version),
                                                "): ", st.message()));
  }
  if (absl::Status st = lt->Check(s.cublasLtMatmulDescCreate(&s.desc, kCublasCompute32F, kCudaR32F),
                                  "cublasLtMatmulDescCreate(CUBLAS_COMPUTE_32F, CUDA_R_32F)");
      !st.ok()) {
    s.desc = nullptr;
    return st;
  }
  const int32_t trans_a = kCublasOpT, trans_b = kCublasOpN;
  if (absl::Status st =
          lt->Check(s.cublasLtMatmulDescSetAttribute(s.desc, kCublasLtMatmulDescTransA, &trans_a,
                                                     sizeof trans_a),
                    "cublasLtMatmulDescSetAttribute(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T)");
      !st.ok())
    return st;
  if (absl::Status st =
          lt->Check(s.cublasLtMatmulDescSetAttribute(s.desc, kCublasLtMatmulDescTransB, &trans_b,
                                                     sizeof trans_b),
                    "cublasLtMatmulDescSetAttribute(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N)");
      !st.ok())
    return st;
  return lt;
}

std::string CublasLt::version() const { return VersionString(s_->version); }
const std::string& CublasLt::path() const { return s_->path; }

std::string CublasLt::Describe(cublasStatus_t s) const {
  const char* name = StatusName(s);
  if (!name && s_->cublasLtGetStatusName) {
    name = s_->cublasLtGetStatusName(s);
    if (name && !absl::StartsWith(name, "CUBLAS_")) name = nullptr;
  }
  const char* text = s_->cublasLtGetStatusString ? s_->cublasLtGetStatusString(s) : nullptr;
  std::string out = name ? absl::StrFormat("%s (%d)", name, s)
                         : absl::StrFormat("cuBLAS status %d", s);
  // The library's text for an unknown status is "<unknown>": left out.
  if (text && *text && *text != '<' && (!name || std::string_view(text) != name))
    absl::StrAppend(&out, ": ", text);
  return out;
}

absl::Status CublasLt::Check(cublasStatus_t s, absl::string_view call) const {
  if (s == kCublasStatusSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(call, " failed: ", Describe(s));
  switch (s) {
    case kCublasStatusAllocFailed: return absl::ResourceExhaustedError(msg);
    case kCublasStatusInvalidValue: return absl::InvalidArgumentError(msg);
    case kCublasStatusNotInitialized:
    case kCublasStatusArchMismatch:
    case kCublasStatusNotSupported:
    case kCublasStatusLicenseError: return absl::FailedPreconditionError(msg);
    default: return absl::InternalError(msg);
  }
}

absl::Status CublasLt::Gemm(CUstream stream, GemmType a_type, int64_t T, int64_t N, int64_t K,
                            CUdeviceptr a, CUdeviceptr w, CUdeviceptr d, CUdeviceptr workspace,
                            size_t workspace_bytes) {
  State& s = *s_;
  auto shape = [&] {
    return absl::StrFormat("%s GEMM T=%d N=%d K=%d", GemmTypeName(a_type), T, N, K);
  };
  auto with_shape = [&](const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat(st.message(), " [", shape(), "]"));
  };
  if (T <= 0 || N <= 0 || K <= 0)
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt GEMM: non-positive dimension [",
                                                   shape(), "]"));
  if (!a || !w || !d)
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt GEMM: null ", !a ? "A" : !w ? "W" : "D",
                                                   " pointer [", shape(), "]"));
  if (workspace_bytes > 0 && !workspace)
    return absl::InvalidArgumentError(absl::StrCat("cuBLASLt GEMM: ", workspace_bytes,
                                                   " workspace bytes but no workspace [", shape(),
                                                   "]"));
  const State::Key key{a_type, T, N, K, Alignment(a), Alignment(w), Alignment(d)};
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.plans.find(key);
  if (it != s.plans.end() && it->second.workspace_needed > workspace_bytes) {
    s.Destroy(it->second);
    s.plans.erase(it);
    it = s.plans.end();
  }
  if (it == s.plans.end()) {
    State::Plan plan;
    // Destroys the plan's layouts unless it is kept.
    struct Guard {
      State& s;
      State::Plan* p;
      ~Guard() {
        if (p) s.Destroy(*p);
      }
    } guard{s, &plan};
    const cudaDataType_t type = DataType(a_type);
    absl::Status st = Check(s.cublasLtMatrixLayoutCreate(&plan.w_layout, type, uint64_t(K),
                                                         uint64_t(N), K),
                            "cublasLtMatrixLayoutCreate(W)");
    if (st.ok())
      st = Check(s.cublasLtMatrixLayoutCreate(&plan.a_layout, type, uint64_t(K), uint64_t(T), K),
                 "cublasLtMatrixLayoutCreate(A)");
    if (st.ok())
      st = Check(
          s.cublasLtMatrixLayoutCreate(&plan.d_layout, kCudaR32F, uint64_t(N), uint64_t(T), N),
          "cublasLtMatrixLayoutCreate(D)");
    if (!st.ok()) return with_shape(st);

    cublasLtMatmulPreference_t pref = nullptr;
    st = Check(s.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    if (!st.ok()) return with_shape(st);
    const uint64_t max_workspace = workspace_bytes;
    st = Check(s.cublasLtMatmulPreferenceSetAttribute(pref, kCublasLtPrefMaxWorkspaceBytes,
                                                      &max_workspace, sizeof max_workspace),
               "cublasLtMatmulPreferenceSetAttribute(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {kCublasLtPrefMinAlignmentABytes, key.align_w},  // cuBLAS's A is W
        {kCublasLtPrefMinAlignmentBBytes, key.align_a},
        {kCublasLtPrefMinAlignmentCBytes, key.align_d},
        {kCublasLtPrefMinAlignmentDBytes, key.align_d}};
    for (const auto& [attr, bytes] : alignments) {
      if (!st.ok()) break;
      st = Check(s.cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof bytes),
                 absl::StrCat("cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT ", attr, ", ",
                              bytes, ")"));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st.ok())
      st = Check(s.cublasLtMatmulAlgoGetHeuristic(s.handle, s.desc, plan.w_layout, plan.a_layout,
                                                  plan.d_layout, plan.d_layout, pref, 1, &result,
                                                  &found),
                 "cublasLtMatmulAlgoGetHeuristic");
    s.cublasLtMatmulPreferenceDestroy(pref);
    if (!st.ok()) return with_shape(st);
    if (found < 1)
      return absl::NotFoundError(absl::StrCat("cublasLtMatmulAlgoGetHeuristic found no algorithm [",
                                              shape(), ", workspace ", workspace_bytes,
                                              " bytes]"));
    if (result.state != kCublasStatusSuccess)
      return with_shape(Check(result.state, "cublasLtMatmulAlgoGetHeuristic's result"));
    plan.algo = result.algo;
    plan.workspace_needed = result.workspaceSize;
    it = s.plans.emplace(key, plan).first;
    guard.p = nullptr;  // kept
  }
  const State::Plan& plan = it->second;
  const float alpha = 1.0f, beta = 0.0f;
  void* dp = reinterpret_cast<void*>(uintptr_t(d));
  absl::Status st = Check(
      s.cublasLtMatmul(s.handle, s.desc, &alpha, reinterpret_cast<const void*>(uintptr_t(w)),
                       plan.w_layout, reinterpret_cast<const void*>(uintptr_t(a)), plan.a_layout,
                       &beta, dp, plan.d_layout, dp, plan.d_layout, &plan.algo,
                       reinterpret_cast<void*>(uintptr_t(workspace)), workspace_bytes, stream),
      "cublasLtMatmul");
  if (!st.ok()) return with_shape(st);
  return absl::OkStatus();
}

}  // namespace llmc::cuda
