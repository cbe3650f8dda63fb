// --backend selection: which artifact target a device runs, and the choice
// (and the user's messages) for every combination of request, driver/device
// and artifact targets. The device is a probe result, so no driver is needed.
#include "llmc/runtime/exec/backend.h"

#include "gtest/gtest.h"

namespace llmc {
namespace {

cuda::DeviceInfo H200() {
  cuda::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.sm_major = 9;
  d.sm_minor = 0;
  d.multiprocessors = 132;
  d.total_memory = int64_t(140) << 30;
  return d;
}

DeviceProbe Found(cuda::DeviceInfo d) {
  return [d]() -> absl::StatusOr<cuda::DeviceInfo> { return d; };
}
DeviceProbe NoDriver() {
  return []() -> absl::StatusOr<cuda::DeviceInfo> {
    return absl::FailedPreconditionError(
        "no CUDA driver: libcuda.so.1: cannot open shared object file: No such file or directory");
  };
}
DeviceProbe NotCalled() {
  return []() -> absl::StatusOr<cuda::DeviceInfo> {
    ADD_FAILURE() << "the driver was probed";
    return absl::InternalError("probed");
  };
}

TEST(BackendTest, Parse) {
  EXPECT_EQ(*ParseBackend("auto"), Backend::kAuto);
  EXPECT_EQ(*ParseBackend("host"), Backend::kHost);
  EXPECT_EQ(*ParseBackend("cuda"), Backend::kCuda);
  EXPECT_EQ(ParseBackend("gpu").status().message(),
            "flag --backend: 'gpu' is not a backend (auto, host, cuda)");
  EXPECT_STREQ(ToString(Backend::kCuda), "cuda");
}

TEST(BackendTest, PickCudaTarget) {
  using V = std::vector<std::string>;
  EXPECT_EQ(PickCudaTarget(V{"host"}, 9, 0), std::nullopt);
  EXPECT_EQ(PickCudaTarget(V{"host", "sm_80", "sm_90"}, 9, 0), "sm_90");
  EXPECT_EQ(PickCudaTarget(V{"sm_80", "sm_90"}, 8, 9), "sm_80");   // Ada runs sm_80 PTX
  EXPECT_EQ(PickCudaTarget(V{"sm_90"}, 8, 0), std::nullopt);       // never backwards
  EXPECT_EQ(PickCudaTarget(V{"sm_90", "sm_90a"}, 9, 0), "sm_90a"); // arch-specific first
  EXPECT_EQ(PickCudaTarget(V{"sm_90a"}, 10, 0), std::nullopt);     // ...only on its own arch
  EXPECT_EQ(PickCudaTarget(V{"sm_90", "sm_100"}, 10, 0), "sm_100");
  EXPECT_EQ(PickCudaTarget(V{"sm_90", "sm_100"}, 12, 0), "sm_100");
  EXPECT_EQ(PickCudaTarget(V{"sm_100f"}, 10, 3), "sm_100f");       // family: same major
  EXPECT_EQ(PickCudaTarget(V{"sm_100f"}, 12, 0), std::nullopt);
}

TEST(BackendTest, HostNeverProbes) {
  auto c = ChooseBackend({Backend::kHost, {"host", "sm_90"}}, NotCalled());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kHost);
  EXPECT_EQ(c->note, "");
}

TEST(BackendTest, AutoOnAHostOnlyArtifactIsSilentAndDoesNotProbe) {
  auto c = ChooseBackend({Backend::kAuto, {"host"}}, NotCalled());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kHost);
  EXPECT_EQ(c->note, "");
}

TEST(BackendTest, AutoWithoutADriverFallsBackAndSaysWhy) {
  auto c = ChooseBackend({Backend::kAuto, {"host", "sm_90"}}, NoDriver());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kHost);
  EXPECT_EQ(c->note,
            "no CUDA driver: libcuda.so.1: cannot open shared object file: No such file or "
            "directory; running on the host backend");
}

TEST(BackendTest, AutoWithoutHostKernelsOrADriverFails) {
  auto c = ChooseBackend({Backend::kAuto, {"sm_90"}}, NoDriver());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "the artifact has no host kernels (targets: sm_90) and the GPU cannot run it: no CUDA "
            "driver: libcuda.so.1: cannot open shared object file: No such file or directory; "
            "recompile with --target=sm_90,host to run it on this machine");
}

TEST(BackendTest, AutoOnAnOlderDeviceFallsBack) {
  cuda::DeviceInfo a100 = H200();
  a100.name = "NVIDIA A100";
  a100.sm_major = 8;
  auto c = ChooseBackend({Backend::kAuto, {"host", "sm_90"}}, Found(a100));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kHost);
  EXPECT_EQ(c->note,
            "the artifact has no kernels that NVIDIA A100 (sm_80) runs (targets: host, sm_90); "
            "running on the host backend");
}

TEST(BackendTest, AutoPicksCudaWhenEverythingIsThere) {
  auto c = ChooseBackend({Backend::kAuto, {"host", "sm_90"}, /*cuda_executor=*/true}, Found(H200()));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kCuda);
  EXPECT_EQ(c->cuda_target, "sm_90");
  EXPECT_EQ(c->note,
            "running on CUDA device 0: NVIDIA H200 (sm_90, 132 SMs, 140.0 GiB), with the "
            "artifact's sm_90 kernels");
}

TEST(BackendTest, AutoWithoutTheCudaExecutorFallsBack) {
  auto c = ChooseBackend({Backend::kAuto, {"host", "sm_90"}}, Found(H200()));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kHost);
  EXPECT_EQ(c->note,
            "found NVIDIA H200 (sm_90) and the artifact's sm_90 target, but the artifact has no "
            "CUDA kernels (its manifest has no cuda section; recompile it with this llmc); running "
            "on the host backend");
}

TEST(BackendTest, CudaWithoutADriver) {
  auto c = ChooseBackend({Backend::kCuda, {"host"}}, NoDriver());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().message(),
            "--backend=cuda: no CUDA driver: libcuda.so.1: cannot open shared object file: No such "
            "file or directory (install the NVIDIA driver, or use --backend=host)");
}

TEST(BackendTest, CudaWithADriverButNoDevice) {
  auto c = ChooseBackend({Backend::kCuda, {"host", "sm_90"}}, []() -> absl::StatusOr<cuda::DeviceInfo> {
    return absl::FailedPreconditionError(
        "cuInit(0) failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
  });
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--backend=cuda: cuInit(0) failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device "
            "is detected (use --backend=host)");
}

TEST(BackendTest, CudaOnAHostOnlyArtifact) {
  auto c = ChooseBackend({Backend::kCuda, {"host"}}, Found(H200()));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--backend=cuda: the artifact was compiled for host only (targets: host); recompile "
            "with --target=sm_90 to run it on NVIDIA H200");
}

TEST(BackendTest, CudaWithNoKernelsForTheDevice) {
  cuda::DeviceInfo t4 = H200();
  t4.name = "Tesla T4";
  t4.sm_major = 7;
  t4.sm_minor = 5;
  auto c = ChooseBackend({Backend::kCuda, {"host", "sm_80"}, true}, Found(t4));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--backend=cuda: the artifact has no kernels that Tesla T4 (sm_75) runs (targets: host, "
            "sm_80); recompile with --target=sm_75");
}

TEST(BackendTest, CudaChosenSilently) {
  auto c = ChooseBackend({Backend::kCuda, {"sm_80"}, true}, Found(H200()));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend, Backend::kCuda);
  EXPECT_EQ(c->cuda_target, "sm_80");
  EXPECT_EQ(c->note, "");
  ASSERT_TRUE(c->device.has_value());
}

}  // namespace
}  // namespace llmc
