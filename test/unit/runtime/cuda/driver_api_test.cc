// The CUDA driver loader and CudaDevice, without a GPU: a missing library, a
// library that is not a driver, and a fake driver (fake/fake_libcuda.cc) whose
// answers the tests set.
#include <dlfcn.h>

#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "llmc/runtime/cuda/device.h"
#include "llmc/runtime/cuda/driver_api.h"

namespace llmc::cuda {
namespace {


class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = DriverApi::Load(LLMC_FAKE_CUDA_DRIVER);
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *std::move(api);
    // The same handle as the loader's: one state.
    handle_ = dlopen(LLMC_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr);
    control_ = reinterpret_cast<void (*)(const char*, long)>(dlsym(handle_, "fake_cuda_control"));
    query_ = reinterpret_cast<long (*)(const char*)>(dlsym(handle_, "fake_cuda_query"));
    ASSERT_TRUE(control_ && query_);
    control_("reset", 0);
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }
  std::unique_ptr<DriverApi> api_;
  void* handle_ = nullptr;
  void (*control_)(const char*, long) = nullptr;
  long (*query_)(const char*) = nullptr;
};

TEST(DriverApiTest, MissingLibraryIsNoDriver) {
  auto api = DriverApi::Load("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(std::string(api.status().message()), "no CUDA driver: /nonexistent/libcuda.so.1: cannot open shared object file")) << std::string(api.status().message());
}

TEST(DriverApiTest, LibraryWithoutTheFunctionsIsNotADriver) {
  auto api = DriverApi::Load("libm.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(std::string(api.status().message()),
            "libm.so.6: not a usable CUDA driver: it does not export cuGetErrorName (a driver older "
            "than CUDA 12? update the NVIDIA driver, or use --backend=host)");
}

TEST(DriverApiTest, DriverMissingAVersionedSymbolIsRefused) {
  auto api = DriverApi::Load(LLMC_FAKE_CUDA_DRIVER_OLD);
  ASSERT_FALSE(api.ok());
  EXPECT_TRUE(absl::StrContains(std::string(api.status().message()), "does not export cuMemAlloc_v2")) << std::string(api.status().message());
}

TEST(DriverApiTest, DefaultPathHonorsTheEnvironment) {
  setenv(kDriverEnvVar, "/x/fake.so", 1);
  EXPECT_EQ(DriverApi::DefaultPath(), "/x/fake.so");
  setenv(kDriverEnvVar, "", 1);
  EXPECT_EQ(DriverApi::DefaultPath(), "libcuda.so.1");
  unsetenv(kDriverEnvVar);
  EXPECT_EQ(DriverApi::DefaultPath(), "libcuda.so.1");
}

TEST_F(FakeDriver, ResolvesVersionedNamesFallbacksAndOptionalGraphs) {
  EXPECT_NE(api_->cuMemAlloc, nullptr);
  EXPECT_NE(api_->cuEventElapsedTime, nullptr);  // through the unversioned fallback
  float ms = 0;
  EXPECT_EQ(api_->cuEventElapsedTime(&ms, nullptr, nullptr), kCudaSuccess);
  EXPECT_EQ(ms, 0.25f);
  EXPECT_TRUE(api_->has_graphs());
  EXPECT_EQ(api_->path(), LLMC_FAKE_CUDA_DRIVER);
  // A driver without the graph functions is usable; they stay null.
  auto no_graphs = DriverApi::Load(LLMC_FAKE_CUDA_DRIVER_NO_GRAPHS);
  ASSERT_TRUE(no_graphs.ok()) << no_graphs.status();
  EXPECT_FALSE((*no_graphs)->has_graphs());
  EXPECT_EQ((*no_graphs)->cuGraphLaunch, nullptr);
  EXPECT_EQ((*no_graphs)->cuStreamBeginCapture, nullptr);
  EXPECT_NE((*no_graphs)->cuLaunchKernel, nullptr);
}

TEST_F(FakeDriver, CheckNamesTheCallAndTheDriversError) {
  EXPECT_TRUE(api_->Check(kCudaSuccess, "cuInit(0)").ok());
  absl::Status oom = api_->Check(kCudaErrorOutOfMemory, "cuMemAlloc_v2(1048576 bytes)");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message(),
            "cuMemAlloc_v2(1048576 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  EXPECT_EQ(api_->Check(kCudaErrorNoDevice, "cuInit(0)").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(api_->Check(kCudaErrorInvalidValue, "x").code(), absl::StatusCode::kInvalidArgument);
  absl::Status unknown = api_->Check(999, "cuLaunchKernel");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(unknown.message(), "cuLaunchKernel failed: CUDA error 999");
}

absl::Status ReturnIfError(const DriverApi& api) {
  LLMC_CUDA_RETURN_IF_ERROR(api, cuCtxSynchronize());
  LLMC_CUDA_RETURN_IF_ERROR(api, cuInit(0));
  return absl::OkStatus();
}

TEST_F(FakeDriver, ReturnIfErrorMacroQuotesTheCall) {
  EXPECT_TRUE(ReturnIfError(*api_).ok());
  control_("init_result", kCudaErrorNoDevice);
  EXPECT_EQ(ReturnIfError(*api_).message(),
            "cuInit(0) failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
}

TEST_F(FakeDriver, ProbeReportsTheDevice) {
  auto info = ProbeDevice(*api_, 0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "Fake GPU");
  EXPECT_EQ(info->sm(), "sm_90");
  EXPECT_EQ(info->multiprocessors, 132);
  EXPECT_EQ(info->driver_version, 13000);
  EXPECT_EQ(info->Summary(), "Fake GPU (sm_90, 132 SMs, 80.0 GiB)");
}

TEST_F(FakeDriver, ProbeErrors) {
  auto bad = ProbeDevice(*api_, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "CUDA device 3 does not exist (the driver sees 1)");
  control_("device_count", 0);
  EXPECT_TRUE(absl::StrContains(std::string(ProbeDevice(*api_, 0).status().message()), "the CUDA driver sees no device")) << std::string(ProbeDevice(*api_, 0).status().message());
  control_("init_result", kCudaErrorNoDevice);
  EXPECT_EQ(ProbeDevice(*api_, 0).status().message(),
            "cuInit(0) failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
}

TEST_F(FakeDriver, OpenRetainsTheContextAndOneStreamAndReleasesThem) {
  {
    auto dev = CudaDevice::Open({}, api_.get());
    ASSERT_TRUE(dev.ok()) << dev.status();
    EXPECT_EQ(query_("ctx_retained"), 1);
    EXPECT_EQ(query_("streams"), 1);
    EXPECT_EQ((*dev)->info().sm(), "sm_90");
    // The pool over cuMemAlloc: the fake's device memory is host memory.
    auto a = (*dev)->memory().Allocate(1000);
    auto b = (*dev)->memory().Allocate(3000);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(query_("allocs"), 1);  // one slab
    std::vector<int> in(250), out(250);
    for (int i = 0; i < 250; ++i) in[i] = i * 7;
    ASSERT_TRUE((*dev)->CopyToDevice(*a, in.data(), 1000).ok());
    ASSERT_TRUE((*dev)->CopyToHost(out.data(), *a, 1000).ok());
    ASSERT_TRUE((*dev)->Synchronize().ok());
    EXPECT_EQ(in, out);
    EXPECT_TRUE((*dev)->memory().Free(*a).ok());
  }
  EXPECT_EQ(query_("ctx_retained"), 0);
  EXPECT_EQ(query_("streams"), 0);
  EXPECT_EQ(query_("frees"), 1);  // the slab, with b still in it
}

TEST_F(FakeDriver, OutOfDeviceMemoryNamesTheCall) {
  auto dev = CudaDevice::Open({.ordinal = 0, .pool_slab_bytes = 1 << 20}, api_.get());
  ASSERT_TRUE(dev.ok()) << dev.status();
  control_("alloc_limit", 0);
  auto p = (*dev)->memory().Allocate(4096);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(std::string(p.status().message()), "cuMemAlloc_v2(1048576 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of "
                        "memory")) << std::string(p.status().message());
}

TEST_F(FakeDriver, LoadPtxKeepsTheInfoLog) {
  auto dev = CudaDevice::Open({}, api_.get());
  ASSERT_TRUE(dev.ok()) << dev.status();
  {
    auto m = (*dev)->LoadPtx(".version 8.0\n.target sm_90\n", "kernels/sm_90/kernels.ptx");
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(query_("modules"), 1);
    EXPECT_EQ((*m)->info_log(), "ptxas info    : Used 32 registers");
    EXPECT_EQ((*m)->jit_ms(), 1.5f);
    EXPECT_TRUE((*m)->Function("rms_norm_0").ok());
    auto missing = (*m)->Function("missing");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(missing.status().message(),
              "kernels/sm_90/kernels.ptx: kernel missing: cuModuleGetFunction(\"missing\") failed: "
              "CUDA_ERROR_NOT_FOUND (500): named symbol not found");
  }
  EXPECT_EQ(query_("modules"), 0);
}

TEST_F(FakeDriver, LoadPtxErrorCarriesTheJitLog) {
  auto dev = CudaDevice::Open({}, api_.get());
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto m = (*dev)->LoadPtx(".version 8.0\n.target sm_90\nerror here\n", "k.ptx");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "k.ptx: PTX JIT for sm_90 failed: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX "
            "(218): a PTX JIT compilation failed\nJIT error log:\nptxas application ptx input, line "
            "3; error   : Unknown symbol 'oops'");
}

}  // namespace
}  // namespace llmc::cuda
