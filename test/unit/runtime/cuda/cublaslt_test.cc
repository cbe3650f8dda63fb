// The cuBLASLt wrapper (cublaslt.h) without a GPU: a fake libcublasLt
// (fake/fake_cublaslt.cc) computes on the host, so the row-major -> column-
// major mapping, the types, the algorithm cache and the errors are checked
// against a float64 reference. RealCublasLt runs the same GEMMs on a GPU with
// the real library, and is skipped where there is no driver, device or
// libcublasLt.
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "llmc/runtime/cuda/cublaslt.h"
#include "llmc/runtime/cuda/device.h"
#include "llmc/runtime/cuda/driver_api.h"
#include "llmc/core/format/dequantize.h"

namespace llmc::cuda {
namespace {

CUdeviceptr Ptr(const void* p) { return CUdeviceptr(uintptr_t(p)); }

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

size_t ElementBytes(GemmType t) { return t == GemmType::kF32 ? 4 : 2; }

// Inputs rounded to the GEMM's type: `bytes` as stored, `values` what they
// hold (the reference reads these). Uniform in ±[0.05, 1]: never zero.
struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};
Matrix RandomMatrix(std::mt19937& rng, GemmType t, int64_t rows, int64_t cols) {
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  std::bernoulli_distribution neg(0.5);
  Matrix m;
  size_t n = size_t(rows * cols);
  m.bytes.resize(n * ElementBytes(t));
  m.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float x = neg(rng) ? -mag(rng) : mag(rng);
    if (t == GemmType::kF32) {
      std::memcpy(&m.bytes[i * 4], &x, 4);
      m.values[i] = x;
    } else {
      uint16_t h = t == GemmType::kF16 ? FloatToHalf(x) : FloatToBF16(x);
      std::memcpy(&m.bytes[i * 2], &h, 2);
      m.values[i] = t == GemmType::kF16 ? HalfToFloat(h) : BF16ToFloat(h);
    }
  }
  return m;
}

// D[T,N] = A[T,K] W[N,K]^T in float64, and sum |a||w| per element (the
// scale of f32 accumulation's error).
void Reference(const Matrix& a, const Matrix& w, int64_t T, int64_t N, int64_t K,
               std::vector<double>* d, std::vector<double>* scale) {
  d->assign(size_t(T * N), 0.0);
  scale->assign(size_t(T * N), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        double p = a.values[size_t(t * K + k)] * w.values[size_t(n * K + k)];
        s += p;
        abs += std::fabs(p);
      }
      (*d)[size_t(t * N + n)] = s;
      (*scale)[size_t(t * N + n)] = abs;
    }
}

// f32 accumulation over K <= 96 terms: |error| <= K * 2^-24 * sum|a w|
// (5.7e-6 for K = 96); 1e-5 leaves room for any summation order.
constexpr double kRelTol = 1e-5;

class FakeCublasLt : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FAKE_CUBLASLT_FAIL");
    handle_ = dlopen(LLMC_FAKE_CUBLASLT, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    control_ = reinterpret_cast<void (*)(const char*, long)>(dlsym(handle_, "fake_cublaslt_control"));
    query_ = reinterpret_cast<long (*)(const char*)>(dlsym(handle_, "fake_cublaslt_query"));
    heuristic_calls_ =
        reinterpret_cast<long (*)()>(dlsym(handle_, "fake_cublaslt_heuristic_calls"));
    ASSERT_TRUE(control_ && query_ && heuristic_calls_);
    control_("reset", 0);
    auto lt = CublasLt::Load(LLMC_FAKE_CUBLASLT);
    ASSERT_TRUE(lt.ok()) << lt.status();
    lt_ = *std::move(lt);
  }
  void TearDown() override {
    lt_.reset();
    if (handle_) {
      // Everything the wrapper created is destroyed with it.
      EXPECT_EQ(query_("handles"), 0);
      EXPECT_EQ(query_("descs"), 0);
      EXPECT_EQ(query_("layouts"), 0);
      EXPECT_EQ(query_("prefs"), 0);
      dlclose(handle_);
    }
    unsetenv("FAKE_CUBLASLT_FAIL");
  }

  // One GEMM on fresh random inputs, checked against the reference.
  void CheckGemm(std::mt19937& rng, GemmType type, int64_t T, int64_t N, int64_t K) {
    SCOPED_TRACE(absl::StrFormat("%s T=%d N=%d K=%d", GemmTypeName(type), T, N, K));
    Matrix a = RandomMatrix(rng, type, T, K);
    Matrix w = RandomMatrix(rng, type, N, K);
    // D is filled with NaN (every element must be written) and has a guard
    // tail that must stay untouched.
    constexpr size_t kGuard = 16;
    std::vector<float> d(size_t(T * N) + kGuard, std::nanf(""));
    for (size_t i = size_t(T * N); i < d.size(); ++i) d[i] = 12345.0f;
    ASSERT_TRUE(lt_->Gemm(nullptr, type, T, N, K, Ptr(a.bytes.data()), Ptr(w.bytes.data()),
                          Ptr(d.data()), 0, 0)
                    .ok());
    std::vector<double> ref, scale;
    Reference(a, w, T, N, K, &ref, &scale);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_TRUE(std::isfinite(d[i])) << "element " << i << " not written";
      double err = std::fabs(double(d[i]) - ref[i]);
      ASSERT_LE(err, kRelTol * scale[i] + 1e-30)
          << "element " << i << " (t=" << i / size_t(N) << ", n=" << i % size_t(N)
          << "): " << d[i] << " vs " << ref[i];
      worst = std::max(worst, err / scale[i]);
    }
    for (size_t i = size_t(T * N); i < d.size(); ++i) ASSERT_EQ(d[i], 12345.0f) << "overrun";
    EXPECT_LT(worst, kRelTol);
  }

  void* handle_ = nullptr;
  void (*control_)(const char*, long) = nullptr;
  long (*query_)(const char*) = nullptr;
  long (*heuristic_calls_)() = nullptr;
  std::unique_ptr<CublasLt> lt_;
};

TEST_F(FakeCublasLt, GemmMatchesFloat64Reference) {
  std::mt19937 rng(20240611);
  for (GemmType type : {GemmType::kBF16, GemmType::kF16, GemmType::kF32})
    for (int64_t T : {1, 5, 33})
      for (int64_t N : {24, 130})
        for (int64_t K : {64, 96}) CheckGemm(rng, type, T, N, K);
  // Odd sizes (K odd: rows of A and W only 2-byte aligned in f16/bf16).
  CheckGemm(rng, GemmType::kBF16, 3, 7, 5);
  CheckGemm(rng, GemmType::kF16, 2, 1, 9);
  EXPECT_EQ(query_("matmul_calls"), 3 * 3 * 2 * 2 + 2);
}

TEST_F(FakeCublasLt, VersionAndPath) {
  EXPECT_EQ(lt_->version(), "13.0.2");
  EXPECT_EQ(lt_->path(), LLMC_FAKE_CUBLASLT);
}

TEST_F(FakeCublasLt, PassesTheStreamAndWorkspace) {
  std::vector<uint16_t> a(4 * 8, 0x3f80), w(3 * 8, 0x3f80);  // bf16 1.0
  std::vector<float> d(4 * 3);
  alignas(256) static uint8_t workspace[1024];
  auto* stream = reinterpret_cast<CUstream>(uintptr_t(0x5000));
  ASSERT_TRUE(lt_->Gemm(stream, GemmType::kBF16, 4, 3, 8, Ptr(a.data()), Ptr(w.data()),
                        Ptr(d.data()), Ptr(workspace), sizeof workspace)
                  .ok());
  EXPECT_EQ(query_("last_stream"), 0x5000);
  EXPECT_EQ(query_("last_workspace_bytes"), 1024);
  EXPECT_EQ(query_("last_max_workspace"), 1024);
  for (float x : d) EXPECT_EQ(x, 8.0f);
}

TEST_F(FakeCublasLt, AlgorithmIsCachedPerShapeTypeAndAlignment) {
  std::vector<uint16_t> a(33 * 96 + 8, 0x3c00), w(130 * 96 + 8, 0x3c00);  // f16 1.0
  std::vector<float> d(33 * 130 + 8);
  auto gemm = [&](GemmType t, int64_t T, int64_t N, int64_t K, size_t a_offset = 0) {
    return lt_->Gemm(nullptr, t, T, N, K, Ptr(a.data() + a_offset), Ptr(w.data()), Ptr(d.data()),
                     0, 0);
  };
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 64).ok());
  EXPECT_EQ(heuristic_calls_(), 1);
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 64).ok());
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 64).ok());
  EXPECT_EQ(heuristic_calls_(), 1);  // reused
  EXPECT_EQ(query_("matmul_calls"), 3);
  ASSERT_TRUE(gemm(GemmType::kF16, 6, 24, 64).ok());   // another T
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 130, 64).ok());  // another N
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 96).ok());   // another K
  ASSERT_TRUE(gemm(GemmType::kBF16, 5, 24, 64).ok());  // another type
  EXPECT_EQ(heuristic_calls_(), 5);
  // The layouts of 5 shapes live while cached (3 each).
  EXPECT_EQ(query_("layouts"), 15);
  EXPECT_EQ(query_("prefs"), 0);
  // A less aligned A (one f16 element in): chosen again, for that alignment
  // (cuBLAS's B is our A), and the fake refuses pointers less aligned than
  // the algorithm was chosen for, so reusing the aligned one would fail.
  EXPECT_GE(query_("last_align_b"), 16);  // malloc's alignment at least
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 64, 1).ok());
  EXPECT_EQ(heuristic_calls_(), 6);
  EXPECT_EQ(query_("last_align_b"), 2);
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 64, 1).ok());
  ASSERT_TRUE(gemm(GemmType::kF16, 5, 24, 64).ok());
  EXPECT_EQ(heuristic_calls_(), 6);
}

TEST_F(FakeCublasLt, AlgorithmNeedingMoreWorkspaceThanGivenIsChosenAgain) {
  std::vector<float> a(2 * 4, 1.0f), w(3 * 4, 2.0f), d(2 * 3);
  alignas(256) static uint8_t workspace[1024];
  control_("workspace_needed", 512);
  auto gemm = [&](size_t ws) {
    return lt_->Gemm(nullptr, GemmType::kF32, 2, 3, 4, Ptr(a.data()), Ptr(w.data()),
                     Ptr(d.data()), Ptr(workspace), ws);
  };
  ASSERT_TRUE(gemm(1024).ok());
  EXPECT_EQ(heuristic_calls_(), 1);
  ASSERT_TRUE(gemm(512).ok());  // enough for the cached one
  EXPECT_EQ(heuristic_calls_(), 1);
  ASSERT_TRUE(gemm(256).ok());  // not enough: chosen again within 256
  EXPECT_EQ(heuristic_calls_(), 2);
  EXPECT_EQ(query_("last_max_workspace"), 256);
  EXPECT_EQ(query_("layouts"), 3);  // the old plan's layouts were destroyed
  for (float x : d) EXPECT_EQ(x, 8.0f);
}

TEST_F(FakeCublasLt, MatmulErrorNamesTheCallStatusAndShape) {
  std::mt19937 rng(7);
  Matrix a = RandomMatrix(rng, GemmType::kBF16, 5, 64), w = RandomMatrix(rng, GemmType::kBF16, 24, 64);
  std::vector<float> d(5 * 24);
  ScopedEnv fail("FAKE_CUBLASLT_FAIL", "matmul");
  absl::Status st = lt_->Gemm(nullptr, GemmType::kBF16, 5, 24, 64, Ptr(a.bytes.data()),
                              Ptr(w.bytes.data()), Ptr(d.data()), 0, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(st.message(),
            "cublasLtMatmul failed: CUBLAS_STATUS_EXECUTION_FAILED (13): the GPU program failed "
            "to execute [bf16 GEMM T=5 N=24 K=64]");
}

TEST_F(FakeCublasLt, HeuristicErrorsNameTheShapeAndCacheNothing) {
  std::vector<uint16_t> a(5 * 64, 0x3c00), w(24 * 64, 0x3c00);
  std::vector<float> d(5 * 24);
  auto gemm = [&] {
    return lt_->Gemm(nullptr, GemmType::kF16, 5, 24, 64, Ptr(a.data()), Ptr(w.data()),
                     Ptr(d.data()), 0, 0);
  };
  {
    ScopedEnv fail("FAKE_CUBLASLT_FAIL", "heuristic");
    absl::Status st = gemm();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(st.message(),
              "cublasLtMatmulAlgoGetHeuristic failed: CUBLAS_STATUS_NOT_SUPPORTED (15): the "
              "functionality requested is not supported [f16 GEMM T=5 N=24 K=64]");
  }
  {
    ScopedEnv fail("FAKE_CUBLASLT_FAIL", "noalgo");
    absl::Status st = gemm();
    EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(st.message(), "cublasLtMatmulAlgoGetHeuristic found no algorithm [f16 GEMM T=5 "
                            "N=24 K=64, workspace 0 bytes]");
  }
  EXPECT_EQ(query_("layouts"), 0);  // nothing kept
  EXPECT_EQ(query_("prefs"), 0);
  EXPECT_EQ(query_("matmul_calls"), 0);
  ASSERT_TRUE(gemm().ok());
  EXPECT_EQ(heuristic_calls_(), 3);
  for (float x : d) EXPECT_EQ(x, 64.0f);
}

TEST_F(FakeCublasLt, InvalidArguments) {
  std::vector<float> a(8, 1.0f), w(8, 1.0f), d(8);
  auto code = [&](int64_t T, int64_t N, int64_t K, CUdeviceptr pa, CUdeviceptr pd,
                  CUdeviceptr ws, size_t ws_bytes) {
    return lt_->Gemm(nullptr, GemmType::kF32, T, N, K, pa, Ptr(w.data()), pd, ws, ws_bytes);
  };
  absl::Status st = code(0, 2, 2, Ptr(a.data()), Ptr(d.data()), 0, 0);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "cuBLASLt GEMM: non-positive dimension [f32 GEMM T=0 N=2 K=2]");
  EXPECT_EQ(code(2, -1, 2, Ptr(a.data()), Ptr(d.data()), 0, 0).code(),
            absl::StatusCode::kInvalidArgument);
  st = code(2, 2, 2, 0, Ptr(d.data()), 0, 0);
  EXPECT_EQ(st.message(), "cuBLASLt GEMM: null A pointer [f32 GEMM T=2 N=2 K=2]");
  st = code(2, 2, 2, Ptr(a.data()), 0, 0, 0);
  EXPECT_EQ(st.message(), "cuBLASLt GEMM: null D pointer [f32 GEMM T=2 N=2 K=2]");
  st = code(2, 2, 2, Ptr(a.data()), Ptr(d.data()), 0, 64);
  EXPECT_EQ(st.message(),
            "cuBLASLt GEMM: 64 workspace bytes but no workspace [f32 GEMM T=2 N=2 K=2]");
  EXPECT_EQ(heuristic_calls_(), 0);
}

TEST_F(FakeCublasLt, CheckMapsStatusesToCodes) {
  EXPECT_TRUE(lt_->Check(kCublasStatusSuccess, "x").ok());
  EXPECT_EQ(lt_->Check(kCublasStatusAllocFailed, "x").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(lt_->Check(kCublasStatusInvalidValue, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(lt_->Check(kCublasStatusNotSupported, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(lt_->Check(kCublasStatusExecutionFailed, "x").code(), absl::StatusCode::kInternal);
  // The fake names only some statuses; the wrapper's own table the rest.
  EXPECT_EQ(lt_->Describe(kCublasStatusInvalidValue),
            "CUBLAS_STATUS_INVALID_VALUE (7): an invalid value was used as an argument");
  EXPECT_EQ(lt_->Check(999, "cublasLtMatmul").message(),
            "cublasLtMatmul failed: cuBLAS status 999");
}

TEST(CublasLtLoad, BadPathIsNamed) {
  auto lt = CublasLt::Load("/nonexistent/libcublasLt.so.99");
  ASSERT_FALSE(lt.ok());
  EXPECT_EQ(lt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(lt.status().message(),
                               "cannot load cuBLASLt: /nonexistent/libcublasLt.so.99: cannot open "
                               "shared object file"))
      << lt.status();
}

TEST(CublasLtLoad, EnvironmentNamesTheLibrary) {
  {
    ScopedEnv env(kCublasLtEnvVar, "/nonexistent/from-env.so");
    auto lt = CublasLt::Load();
    ASSERT_FALSE(lt.ok());
    EXPECT_TRUE(absl::StrContains(lt.status().message(), "/nonexistent/from-env.so: cannot open"))
        << lt.status();
    EXPECT_TRUE(absl::EndsWith(lt.status().message(), "(from LLMC_CUBLASLT_LIBRARY)"))
        << lt.status();
    // An explicit path wins over the environment.
    auto fake = CublasLt::Load(LLMC_FAKE_CUBLASLT);
    ASSERT_TRUE(fake.ok()) << fake.status();
  }
  ScopedEnv env(kCublasLtEnvVar, LLMC_FAKE_CUBLASLT);
  auto lt = CublasLt::Load();
  ASSERT_TRUE(lt.ok()) << lt.status();
  EXPECT_EQ((*lt)->path(), LLMC_FAKE_CUBLASLT);
}

TEST(CublasLtLoad, LibraryWithoutTheFunctionsIsRefused) {
  auto lt = CublasLt::Load("libm.so.6");
  ASSERT_FALSE(lt.ok());
  EXPECT_EQ(lt.status().message(),
            "libm.so.6: not a usable cuBLASLt: it does not export cublasLtCreate");
}

TEST(CublasLtLoad, CreateFailureIsNamed) {
  ScopedEnv fail("FAKE_CUBLASLT_FAIL", "create");
  auto lt = CublasLt::Load(LLMC_FAKE_CUBLASLT);
  ASSERT_FALSE(lt.ok());
  EXPECT_EQ(lt.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(lt.status().message(),
            std::string(LLMC_FAKE_CUBLASLT) +
                " (cuBLASLt 13.0.2): cublasLtCreate failed: CUBLAS_STATUS_NOT_INITIALIZED (1): "
                "the library was not initialized");
}

// The real libcublasLt leaks a little in its own code (from dlopen and a
// failing cublasLtCreate), which LeakSanitizer reports: the tests that load
// it are skipped in sanitizer builds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Where the toolkit's libcublasLt is installed, it resolves every symbol the
// wrapper asks for even without a GPU (then cublasLtCreate fails, named).
TEST(CublasLtLoad, RealLibraryExportsEverythingItNeeds) {
  if (std::getenv(kCublasLtEnvVar)) GTEST_SKIP() << kCublasLtEnvVar << " is set";
  if (kAddressSanitizer) GTEST_SKIP() << "the real libcublasLt under AddressSanitizer";
  auto lt = CublasLt::Load();
  if (lt.ok()) {
    EXPECT_TRUE(absl::StartsWith((*lt)->version(), "1")) << (*lt)->version();
    return;
  }
  const std::string msg(lt.status().message());
  if (absl::StartsWith(msg, "cannot load cuBLASLt: ")) GTEST_SKIP() << msg;
  EXPECT_FALSE(absl::StrContains(msg, "does not export")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "cublasLtCreate failed")) << msg;
  std::printf("%s\n", msg.c_str());
}

// --- The real library on a GPU -----------------------------------------------

class RealCublasLt : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = DriverApi::Get();
    if (!api.ok()) GTEST_SKIP() << api.status().message();
    auto dev = CudaDevice::Open({});
    if (!dev.ok()) GTEST_SKIP() << dev.status().message();
    dev_ = *std::move(dev);
    if (kAddressSanitizer) GTEST_SKIP() << "the real libcublasLt under AddressSanitizer";
    auto lt = CublasLt::Load();
    if (!lt.ok()) GTEST_SKIP() << lt.status().message();
    lt_ = *std::move(lt);
    std::printf("cuBLASLt %s (%s) on %s\n", lt_->version().c_str(), lt_->path().c_str(),
                dev_->info().Summary().c_str());
  }
  void TearDown() override {
    if (!dev_) return;
    EXPECT_TRUE(dev_->Synchronize().ok());
    lt_.reset();
    for (CUdeviceptr p : allocated_) EXPECT_TRUE(dev_->memory().Free(p).ok());
  }
  CUdeviceptr Upload(const void* data, size_t bytes) {
    auto p = dev_->memory().Allocate(bytes);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return 0;
    allocated_.push_back(*p);
    if (data) {
      EXPECT_TRUE(dev_->CopyToDevice(*p, data, bytes).ok());
    }
    return *p;
  }
  std::unique_ptr<CudaDevice> dev_;
  std::unique_ptr<CublasLt> lt_;
  std::vector<CUdeviceptr> allocated_;
};

TEST_F(RealCublasLt, GemmMatchesFloat64Reference) {
  std::mt19937 rng(99);
  const size_t ws_bytes = size_t(32) << 20;
  CUdeviceptr ws = Upload(nullptr, ws_bytes);
  struct Shape {
    int64_t T, N, K;
  };
  for (GemmType type : {GemmType::kBF16, GemmType::kF16, GemmType::kF32})
    for (Shape s : {Shape{1, 24, 64}, Shape{5, 130, 96}, Shape{33, 576, 1536},
                    Shape{128, 1536, 576}, Shape{3, 7, 5}}) {
      SCOPED_TRACE(absl::StrFormat("%s T=%d N=%d K=%d", GemmTypeName(type), s.T, s.N, s.K));
      Matrix a = RandomMatrix(rng, type, s.T, s.K), w = RandomMatrix(rng, type, s.N, s.K);
      CUdeviceptr da = Upload(a.bytes.data(), a.bytes.size());
      CUdeviceptr dw = Upload(w.bytes.data(), w.bytes.size());
      CUdeviceptr dd = Upload(nullptr, size_t(s.T * s.N) * 4);
      ASSERT_TRUE(dev_->api().cuMemsetD8Async(dd, 0xff, size_t(s.T * s.N) * 4, dev_->stream()) ==
                  kCudaSuccess);  // NaN: every element must be written
      absl::Status st = lt_->Gemm(dev_->stream(), type, s.T, s.N, s.K, da, dw, dd, ws, ws_bytes);
      ASSERT_TRUE(st.ok()) << st;
      std::vector<float> d(size_t(s.T * s.N));
      ASSERT_TRUE(dev_->CopyToHost(d.data(), dd, d.size() * 4).ok());
      ASSERT_TRUE(dev_->Synchronize().ok());
      std::vector<double> ref, scale;
      Reference(a, w, s.T, s.N, s.K, &ref, &scale);
      // f32 accumulation over up to 1536 terms in any order (split-K
      // included): K * 2^-24 * sum|a w| at worst, ~1e-4 here.
      const double tol = double(s.K) * 6e-8 + 1e-6;
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_LE(std::fabs(double(d[i]) - ref[i]), tol * scale[i])
            << "element " << i << ": " << d[i] << " vs " << ref[i];
    }
}

TEST_F(RealCublasLt, CachedGemmIsCapturedIntoAGraph) {
  const DriverApi& api = dev_->api();
  if (!api.has_graphs()) GTEST_SKIP() << "driver without graphs";
  std::mt19937 rng(5);
  const int64_t T = 4, N = 256, K = 512;
  Matrix a = RandomMatrix(rng, GemmType::kBF16, T, K), w = RandomMatrix(rng, GemmType::kBF16, N, K);
  CUdeviceptr da = Upload(a.bytes.data(), a.bytes.size());
  CUdeviceptr dw = Upload(w.bytes.data(), w.bytes.size());
  CUdeviceptr dd = Upload(nullptr, size_t(T * N) * 4);
  const size_t ws_bytes = size_t(4) << 20;
  CUdeviceptr ws = Upload(nullptr, ws_bytes);
  // The first call chooses the algorithm (host work); the captured one only
  // launches.
  ASSERT_TRUE(lt_->Gemm(dev_->stream(), GemmType::kBF16, T, N, K, da, dw, dd, ws, ws_bytes).ok());
  std::vector<float> direct(size_t(T * N)), replayed(direct.size());
  ASSERT_TRUE(dev_->CopyToHost(direct.data(), dd, direct.size() * 4).ok());
  ASSERT_TRUE(dev_->Synchronize().ok());
  ASSERT_EQ(api.cuMemsetD8Async(dd, 0xff, direct.size() * 4, dev_->stream()), kCudaSuccess);
  ASSERT_TRUE(dev_->Synchronize().ok());
  ASSERT_EQ(api.cuStreamBeginCapture(dev_->stream(), kCaptureModeThreadLocal), kCudaSuccess);
  absl::Status st = lt_->Gemm(dev_->stream(), GemmType::kBF16, T, N, K, da, dw, dd, ws, ws_bytes);
  CUgraph graph = nullptr;
  ASSERT_EQ(api.cuStreamEndCapture(dev_->stream(), &graph), kCudaSuccess);
  ASSERT_TRUE(st.ok()) << st;
  CUgraphExec exec = nullptr;
  ASSERT_EQ(api.cuGraphInstantiateWithFlags(&exec, graph, 0), kCudaSuccess);
  ASSERT_EQ(api.cuGraphLaunch(exec, dev_->stream()), kCudaSuccess);
  ASSERT_TRUE(dev_->CopyToHost(replayed.data(), dd, replayed.size() * 4).ok());
  ASSERT_TRUE(dev_->Synchronize().ok());
  EXPECT_EQ(api.cuGraphExecDestroy(exec), kCudaSuccess);
  EXPECT_EQ(api.cuGraphDestroy(graph), kCudaSuccess);
  EXPECT_EQ(std::memcmp(direct.data(), replayed.data(), direct.size() * 4), 0);
}

}  // namespace
}  // namespace llmc::cuda
