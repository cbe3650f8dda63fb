// CudaRunner end to end against the fake driver (fake/fake_libcuda.cc): a
// tiny CUDA artifact (hand-written manifest, placeholder PTX) is loaded, and
// each Step's launches are recorded by the fake's cuLaunchKernel: symbols,
// grids, blocks, and the packed ABI structs. The fake's device memory is
// host memory, so the uploaded weights, the staged batch and the zeroed KV
// cache are read back through the recorded pointers. No GPU, no kernel runs.
#include "llmc/runtime/exec/cuda_runner.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "../artifact/artifact_test_util.h"
#include "fake/fake_libcuda.h"

namespace llmc {
namespace {

using test::ExpectError;

class CudaRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = cuda::DriverApi::Load(LLMC_FAKE_CUDA_DRIVER);
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *std::move(api);
    handle_ = dlopen(LLMC_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr);
    control_ = reinterpret_cast<void (*)(const char*, long)>(dlsym(handle_, "fake_cuda_control"));
    count_ = reinterpret_cast<decltype(&fake_cuda_launch_count)>(
        dlsym(handle_, "fake_cuda_launch_count"));
    launch_ = reinterpret_cast<decltype(&fake_cuda_launch)>(dlsym(handle_, "fake_cuda_launch"));
    ASSERT_TRUE(control_ && count_ && launch_);
    control_("reset", 0);
    dir_ = folder_.File("model.llmc");
  }
  void TearDown() override {
    runner_.reset();
    artifact_.reset();
    if (handle_) dlclose(handle_);
  }

  // Writes the tiny CUDA artifact (after `edit`) and opens a runner on it.
  absl::Status Open(const std::function<void(Manifest&)>& edit = nullptr,
                    const std::string& target = "sm_90") {
    Manifest m = test::TinyCudaManifest();
    if (edit) edit(m);
    if (auto st = test::WriteTinyArtifact(dir_, nullptr, m); !st.ok()) return st;
    auto artifact = Artifact::Open(dir_);
    if (!artifact.ok()) return artifact.status();
    artifact_ = *std::move(artifact);
    cuda::CudaDeviceOptions device_options;
    device_options.pool_slab_bytes = size_t(1) << 20;  // the fake's memory is host memory
    auto device = cuda::CudaDevice::Open(device_options, api_.get());
    if (!device.ok()) return device.status();
    RunnerOptions o;
    o.max_batch_tokens = 16;
    o.block_size = 16;
    o.num_blocks = 64;
    auto runner = CudaRunner::Create(*artifact_, o, target, *std::move(device));
    if (!runner.ok()) return runner.status();
    runner_ = *std::move(runner);
    return absl::OkStatus();
  }

  std::vector<FakeCudaLaunch> Launches() {
    std::vector<FakeCudaLaunch> out(static_cast<size_t>(count_()));
    for (size_t i = 0; i < out.size(); ++i) launch_(long(i), &out[i]);
    return out;
  }

  // One sequence: `n` new tokens after `cached` ones, logits for the last.
  static StepBatch Sequence(int32_t cached, int32_t n) {
    StepBatch b;
    for (int32_t i = 0; i < n; ++i) {
      b.tokens.push_back(3 + i);
      b.positions.push_back(cached + i);
      b.slot_mapping.push_back(cached + i);
    }
    b.query_starts = {0, n};
    b.context_lens = {cached + n};
    b.max_blocks = (cached + n + 15) / 16;
    for (int32_t k = 0; k < b.max_blocks; ++k) b.block_tables.push_back(k);
    b.logits_rows = {n - 1};
    return b;
  }

  std::unique_ptr<cuda::DriverApi> api_;  // outlives the runner's device
  void* handle_ = nullptr;
  void (*control_)(const char*, long) = nullptr;
  decltype(&fake_cuda_launch_count) count_ = nullptr;
  decltype(&fake_cuda_launch) launch_ = nullptr;
  test::TempFolder folder_;
  std::string dir_;
  std::unique_ptr<Artifact> artifact_;
  std::unique_ptr<CudaRunner> runner_;
};

std::vector<int> Read(const int* device, size_t n) { return std::vector<int>(device, device + n); }

TEST_F(CudaRunnerTest, PrefillStepLaunchesThePlanWithItsBindings) {
  auto opened = Open();
  ASSERT_TRUE(opened.ok()) << opened;
  EXPECT_EQ(runner_->vocab_size(), 64);
  EXPECT_EQ(runner_->max_logits(), 16);
  EXPECT_EQ(runner_->num_blocks(), 64);
  EXPECT_EQ(runner_->threads(), 0);
  // 2 layers x K and V x 64 blocks x 16 tokens x 2 KV heads x 16 dims x bf16.
  EXPECT_EQ(runner_->kv_cache_bytes(), 2 * 2 * 64 * 16 * 2 * 16 * 2);
  EXPECT_EQ(runner_->ExecutionSummary(), "CUDA sm_90 on Fake GPU (sm_90, 132 SMs, 80.0 GiB)");

  StepBatch b = Sequence(0, 3);
  auto logits = runner_->Step(b);
  ASSERT_TRUE(logits.ok()) << logits.status();
  for (int i = 0; i < 64; ++i) EXPECT_EQ((*logits)[i], 0.f);  // zeroed, and no kernel ran

  std::vector<FakeCudaLaunch> l = Launches();
  // T = 3, one split (3 keys of 256 per split): no reductions; L = 1: the GEMV.
  ASSERT_EQ(l.size(), 4u);
  const char* symbols[] = {"llmc_cuda_embed", "llmc_cuda_attn", "llmc_cuda_attn", "llmc_cuda_gemv"};
  unsigned grids[4][3] = {{3, 1, 1}, {3, 2, 1}, {3, 2, 1}, {1, 16, 1}};
  unsigned blocks[] = {128, 128, 128, 256};
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_STREQ(l[i].symbol, symbols[i]) << i;
    for (int d = 0; d < 3; ++d) EXPECT_EQ(l[i].grid[d], grids[i][d]) << i << " " << d;
    EXPECT_EQ(l[i].block[0], blocks[i]) << i;
    EXPECT_EQ(l[i].block[1], 1u);
    EXPECT_EQ(l[i].block[2], 1u);
    EXPECT_EQ(l[i].shared_bytes, 0u);
    ASSERT_EQ(l[i].has_params, 1);
  }

  // The step info points at the one upload of the batch's arrays.
  const llmc_cuda_step_info& info = l[0].info;
  EXPECT_EQ(info.num_tokens, 3);
  EXPECT_EQ(info.num_seqs, 1);
  EXPECT_EQ(info.num_logits, 1);
  EXPECT_EQ(info.max_blocks, 1);
  EXPECT_EQ(info.block_size, 16);
  EXPECT_EQ(Read(info.tokens, 3), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(Read(info.positions, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Read(info.query_starts, 2), (std::vector<int>{0, 3}));
  EXPECT_EQ(Read(info.context_lens, 1), (std::vector<int>{3}));
  EXPECT_EQ(Read(info.block_tables, 1), (std::vector<int>{0}));
  EXPECT_EQ(Read(info.slot_mapping, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Read(info.logits_rows, 1), (std::vector<int>{2}));
  for (const FakeCudaLaunch& x : l) EXPECT_EQ(std::memcmp(&x.info, &info, sizeof info), 0);

  // Buffers in binding order: embed and attention write "hidden", the LM
  // head reads it and writes the logits.
  const llmc_cuda_args &embed = l[0].args, &attn0 = l[1].args, &attn1 = l[2].args,
                       &head = l[3].args;
  ASSERT_NE(embed.buffers[0], nullptr);
  EXPECT_EQ(embed.buffers[1], nullptr);
  EXPECT_EQ(attn0.buffers[0], embed.buffers[0]);
  EXPECT_EQ(head.buffers[0], embed.buffers[0]);
  ASSERT_NE(head.buffers[1], nullptr);
  EXPECT_NE(head.buffers[1], head.buffers[0]);
  // Weights: the uploaded bytes of each bound tensor, at its offset.
  const Manifest& m = artifact_->manifest();
  auto same_bytes = [&](const void* device, int64_t tensor) {
    return std::memcmp(device, artifact_->weight_data(tensor),
                       m.weights.tensors[size_t(tensor)].bytes) == 0;
  };
  EXPECT_TRUE(same_bytes(embed.weights[0], 0));
  EXPECT_EQ(embed.weights[1], nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(head.weights[i], i + 1)) << i;
  // Caches: each layer's K and V, distinct, zeroed.
  EXPECT_EQ(embed.caches[0], nullptr);
  std::set<const void*> caches = {attn0.caches[0], attn0.caches[1], attn1.caches[0],
                                  attn1.caches[1]};
  EXPECT_EQ(caches.size(), 4u);
  EXPECT_EQ(caches.count(nullptr), 0u);
  for (const void* c : caches) {
    std::vector<uint8_t> zero(64 * 16 * 2 * 16 * 2, 0);
    EXPECT_EQ(std::memcmp(c, zero.data(), zero.size()), 0);
  }
  // One scratch for the split partials, bound everywhere.
  ASSERT_NE(embed.scratch, nullptr);
  for (const FakeCudaLaunch& x : l) EXPECT_EQ(x.args.scratch, embed.scratch);
}

TEST_F(CudaRunnerTest, DecodeOverALongContextSplitsAndReduces) {
  ASSERT_TRUE(Open().ok());
  StepBatch b = Sequence(999, 1);  // 1000 keys: 4 splits of 256
  auto logits = runner_->Step(b);
  ASSERT_TRUE(logits.ok()) << logits.status();
  std::vector<FakeCudaLaunch> l = Launches();
  ASSERT_EQ(l.size(), 6u);
  EXPECT_STREQ(l[1].symbol, "llmc_cuda_attn");
  EXPECT_EQ(l[1].grid[2], 4u);
  EXPECT_STREQ(l[2].symbol, "llmc_cuda_attn_reduce");
  EXPECT_EQ(l[2].block[0], 64u);
  EXPECT_STREQ(l[4].symbol, "llmc_cuda_attn_reduce");
  EXPECT_EQ(l[4].args.caches[0], l[3].args.caches[0]);  // layer 1's
  EXPECT_STREQ(l[5].symbol, "llmc_cuda_gemv");
  EXPECT_EQ(l[5].info.max_blocks, 63);
  EXPECT_EQ(Read(l[5].info.block_tables, 63).back(), 62);
}

TEST_F(CudaRunnerTest, PrefillOverALongContextGrowsTheScratch) {
  ASSERT_TRUE(Open().ok());
  ASSERT_TRUE(runner_->Step(Sequence(999, 1)).ok());
  std::vector<FakeCudaLaunch> decode = Launches();
  const void* decode_scratch = decode.back().args.scratch;
  // 16 tokens after 984: 4 splits of partials for 16 tokens, more than the
  // decode-sized scratch; every launch gets the new one.
  ASSERT_TRUE(runner_->Step(Sequence(984, 16)).ok());
  std::vector<FakeCudaLaunch> l = Launches();
  l.erase(l.begin(), l.begin() + long(decode.size()));
  ASSERT_EQ(l.size(), 6u);
  EXPECT_STREQ(l[2].symbol, "llmc_cuda_attn_reduce");
  EXPECT_EQ(l[1].grid[2], 4u);
  EXPECT_EQ(l[1].grid[0], 16u);
  EXPECT_NE(l[0].args.scratch, decode_scratch);
  for (const FakeCudaLaunch& x : l) EXPECT_EQ(x.args.scratch, l[0].args.scratch);
}

TEST_F(CudaRunnerTest, ReturnsTheLogitsRowsTheDeviceHolds) {
  ASSERT_TRUE(Open().ok());
  StepBatch b = Sequence(0, 12);
  b.logits_rows = {3, 11};
  ASSERT_TRUE(runner_->Step(b).ok());
  std::vector<FakeCudaLaunch> l = Launches();
  EXPECT_STREQ(l.back().symbol, "llmc_cuda_gemv");  // L = 2
  // Write "logits" where the LM head would, then step again: the runner
  // copies the first L rows back (the launches of the fake do nothing).
  float* device_logits = static_cast<float*>(l.back().args.buffers[1]);
  for (int i = 0; i < 2 * 64; ++i) device_logits[i] = float(i) * 0.5f;
  auto logits = runner_->Step(b);
  ASSERT_TRUE(logits.ok());
  for (int i = 0; i < 2 * 64; ++i) ASSERT_EQ((*logits)[i], float(i) * 0.5f) << i;
  // The second step reused the staging area and the bindings.
  std::vector<FakeCudaLaunch> again = Launches();
  ASSERT_EQ(again.size(), 2 * l.size());
  EXPECT_EQ(again.back().info.tokens, l.back().info.tokens);
  // A batch with a larger block table grows the staging area.
  StepBatch many = Sequence(0, 1);
  many.max_blocks = 64;
  many.block_tables.assign(64, 5);
  ASSERT_TRUE(runner_->Step(many).ok());
  EXPECT_EQ(Read(Launches().back().info.block_tables, 64), std::vector<int>(64, 5));
}

TEST_F(CudaRunnerTest, BadBatchIsRefusedBeforeAnyLaunch) {
  ASSERT_TRUE(Open().ok());
  StepBatch b = Sequence(0, 3);
  b.tokens[1] = 64;
  ExpectError(runner_->Step(b), {"step batch: token id 64 outside the vocabulary"});
  b = Sequence(0, 17);
  ExpectError(runner_->Step(b), {"step batch: 17 tokens; the runner takes 1 to 16"});
  EXPECT_EQ(count_(), 0);
}

TEST_F(CudaRunnerTest, LaunchFailureNamesTheKernelAndStep) {
  ASSERT_TRUE(Open().ok());
  control_("launch_result", 1);
  ExpectError(runner_->Step(Sequence(0, 2)),
              {"cuLaunchKernel(llmc_cuda_embed, grid [2, 1, 1] x 128) of CUDA step 0 (embed) "
               "failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument"});
}

TEST_F(CudaRunnerTest, CreateErrors) {
  ExpectError(Open([](Manifest& m) { m.cuda.kernels[2].launches[1].symbol = "missing"; }),
              {"kernels/sm_90/kernels.ptx: kernel missing: cuModuleGetFunction(\"missing\") "
               "failed: CUDA_ERROR_NOT_FOUND (500)"});
  std::filesystem::remove_all(dir_);
  ExpectError(Open([](Manifest& m) { m.cuda.cuda_abi_version = 2; }),
              {"CUDA kernels use ABI version 2, this runtime speaks 1; recompile the model"});
  std::filesystem::remove_all(dir_);
  ExpectError(Open(nullptr, "sm_75"), {"the artifact has no CUDA module for sm_75"});
  std::filesystem::remove_all(dir_);
  // A PTX file that is not the one the manifest describes.
  ASSERT_TRUE(test::WriteTinyArtifact(dir_, nullptr, test::TinyCudaManifest()).ok());
  test::WriteFile(dir_ + "/kernels/sm_90/kernels.ptx", "// another PTX\n");
  auto artifact = Artifact::Open(dir_);
  ASSERT_TRUE(artifact.ok());
  auto device = cuda::CudaDevice::Open({}, api_.get());
  ASSERT_TRUE(device.ok());
  ExpectError(CudaRunner::Create(**artifact, {}, "sm_90", *std::move(device)),
              {"kernels/sm_90/kernels.ptx: checksum mismatch", "the file is corrupt"});
}

}  // namespace
}  // namespace llmc
