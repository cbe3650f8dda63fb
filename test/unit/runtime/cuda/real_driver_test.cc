// The CUDA backend's pieces against the real driver (DriverApi::Get():
// libcuda.so.1, or $LLMC_CUDA_DRIVER): skipped where there is no driver or
// no device, so CI without a GPU passes; on a GPU machine this is the check
// that the dlsym'd table, the versioned symbols and the JIT options are those
// of a real driver. A hand-written PTX kernel (sm_80, JIT-compiled forward to
// the device) is launched directly and through a captured CUDA graph.
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "llmc/runtime/cuda/device.h"
#include "llmc/runtime/cuda/driver_api.h"

namespace llmc::cuda {
namespace {

constexpr char kAddOnePtx[] = R"(.version 7.0
.target sm_80
.address_size 64

.visible .entry add_one(
    .param .u64 p,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [p];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd4], %f2;
DONE:
    ret;
}
)";

class RealDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = DriverApi::Get();
    if (!api.ok()) GTEST_SKIP() << api.status().message();
    auto dev = CudaDevice::Open({});
    if (!dev.ok()) GTEST_SKIP() << dev.status().message();
    dev_ = *std::move(dev);
    std::printf("CUDA device: %s, driver %d\n", dev_->info().Summary().c_str(),
                dev_->info().driver_version);
  }
  std::unique_ptr<CudaDevice> dev_;
};

TEST_F(RealDriver, DeviceProperties) {
  const DeviceInfo& d = dev_->info();
  EXPECT_GE(d.sm_major, 7);
  EXPECT_GT(d.multiprocessors, 0);
  EXPECT_GT(d.total_memory, int64_t(1) << 30);
  EXPECT_GT(d.max_shared_per_block, 48 << 10);
  EXPECT_GE(d.driver_version, 12000);
  size_t free = 0, total = 0;
  ASSERT_EQ(dev_->api().cuMemGetInfo(&free, &total), kCudaSuccess);
  EXPECT_EQ(int64_t(total), d.total_memory);
}

TEST_F(RealDriver, PoolAndCopies) {
  std::vector<float> in(1 << 18), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) * 0.5f;
  auto a = dev_->memory().Allocate(in.size() * 4);
  auto b = dev_->memory().Allocate(3 << 20);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_TRUE(dev_->CopyToDevice(*a, in.data(), in.size() * 4).ok());
  ASSERT_EQ(dev_->api().cuMemcpyDtoDAsync(*b, *a, in.size() * 4, dev_->stream()), kCudaSuccess);
  ASSERT_TRUE(dev_->CopyToHost(out.data(), *b, in.size() * 4).ok());
  ASSERT_TRUE(dev_->Synchronize().ok());
  EXPECT_EQ(in, out);
  PoolStats st = dev_->memory().stats();
  EXPECT_EQ(st.slabs, 1);
  EXPECT_EQ(st.live_blocks, 2);
  EXPECT_TRUE(dev_->memory().Free(*a).ok());
  EXPECT_TRUE(dev_->memory().Free(*b).ok());
  EXPECT_TRUE(dev_->memory().Trim().ok());
  EXPECT_EQ(dev_->memory().stats().slabs, 0);
  // More than the device has: the driver's error, named, as ResourceExhausted.
  auto huge = dev_->memory().Allocate(size_t(dev_->info().total_memory) * 2);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_TRUE(absl::StrContains(huge.status().message(), "CUDA_ERROR_OUT_OF_MEMORY"))
      << huge.status();
}

TEST_F(RealDriver, JitLaunchEventsAndGraph) {
  auto m = dev_->LoadPtx(kAddOnePtx, "add_one.ptx");
  ASSERT_TRUE(m.ok()) << m.status();
  std::printf("JIT %.2f ms; info log:\n%s\n", (*m)->jit_ms(), (*m)->info_log().c_str());
  auto fn = (*m)->Function("add_one");
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_EQ((*m)->Function("missing").status().code(), absl::StatusCode::kNotFound);

  const DriverApi& api = dev_->api();
  unsigned n = 100000;
  std::vector<float> host(n);
  for (unsigned i = 0; i < n; ++i) host[i] = float(i);
  auto buf = dev_->memory().Allocate(n * 4);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(dev_->CopyToDevice(*buf, host.data(), n * 4).ok());
  CUdeviceptr p = *buf;
  void* params[] = {&p, &n};
  CUevent start = nullptr, stop = nullptr;
  ASSERT_EQ(api.cuEventCreate(&start, 0), kCudaSuccess);
  ASSERT_EQ(api.cuEventCreate(&stop, 0), kCudaSuccess);
  ASSERT_EQ(api.cuEventRecord(start, dev_->stream()), kCudaSuccess);
  ASSERT_EQ(api.cuLaunchKernel(*fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, dev_->stream(), params,
                               nullptr),
            kCudaSuccess);
  ASSERT_EQ(api.cuEventRecord(stop, dev_->stream()), kCudaSuccess);
  ASSERT_EQ(api.cuEventSynchronize(stop), kCudaSuccess);
  float ms = -1;
  ASSERT_EQ(api.cuEventElapsedTime(&ms, start, stop), kCudaSuccess);
  EXPECT_GE(ms, 0.f);
  std::printf("add_one over %u floats: %.3f ms\n", n, ms);

  // The same launch captured into a graph, replayed twice: +3 in all.
  ASSERT_TRUE(api.has_graphs());
  ASSERT_EQ(api.cuStreamBeginCapture(dev_->stream(), kCaptureModeThreadLocal), kCudaSuccess);
  ASSERT_EQ(api.cuLaunchKernel(*fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, dev_->stream(), params,
                               nullptr),
            kCudaSuccess);
  CUgraph graph = nullptr;
  ASSERT_EQ(api.cuStreamEndCapture(dev_->stream(), &graph), kCudaSuccess);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(api.cuGraphInstantiateWithFlags(&exec, graph, 0), kCudaSuccess);
  ASSERT_EQ(api.cuGraphLaunch(exec, dev_->stream()), kCudaSuccess);
  ASSERT_EQ(api.cuGraphLaunch(exec, dev_->stream()), kCudaSuccess);
  std::vector<float> out(n);
  ASSERT_TRUE(dev_->CopyToHost(out.data(), *buf, n * 4).ok());
  ASSERT_TRUE(dev_->Synchronize().ok());
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], float(i) + 3.f) << i;
  EXPECT_EQ(api.cuGraphExecDestroy(exec), kCudaSuccess);
  EXPECT_EQ(api.cuGraphDestroy(graph), kCudaSuccess);
  EXPECT_EQ(api.cuEventDestroy(start), kCudaSuccess);
  EXPECT_EQ(api.cuEventDestroy(stop), kCudaSuccess);
}

TEST_F(RealDriver, BadPtxCarriesTheJitLog) {
  std::string bad = kAddOnePtx;
  bad.replace(bad.find("add.f32 %f2, %f1"), 16, "add.f32 %f2, %f9");  // an undeclared register
  auto m = dev_->LoadPtx(bad, "bad.ptx");
  ASSERT_FALSE(m.ok());
  std::printf("%s\n", std::string(m.status().message()).c_str());
  EXPECT_TRUE(absl::StartsWith(m.status().message(), "bad.ptx: PTX JIT for sm_")) << m.status();
  EXPECT_TRUE(absl::StrContains(m.status().message(), "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX"))
      << m.status();
  EXPECT_TRUE(absl::StrContains(m.status().message(), "JIT error log:\n")) << m.status();
}

}  // namespace
}  // namespace llmc::cuda
