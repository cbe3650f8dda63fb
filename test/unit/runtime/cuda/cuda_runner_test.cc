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
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "core/artifact/artifact_test_util.h"
#include "llmc/runtime/sample/sampler.h"
#include "fake/fake_libcuda.h"
#include "runtime/step_access.h"

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
    query_ = reinterpret_cast<long (*)(const char*)>(dlsym(handle_, "fake_cuda_query"));
    replay_count_ = reinterpret_cast<decltype(&fake_cuda_graph_launch_count)>(
        dlsym(handle_, "fake_cuda_graph_launch_count"));
    replay_ = reinterpret_cast<decltype(&fake_cuda_graph_launch)>(
        dlsym(handle_, "fake_cuda_graph_launch"));
    ASSERT_TRUE(control_ && count_ && launch_ && query_ && replay_count_ && replay_);
    control_("reset", 0);
    dir_ = folder_.File("model.llmc");
  }
  void TearDown() override {
    runner_.reset();
    artifact_.reset();
    if (handle_) dlclose(handle_);
  }

  // Writes the tiny CUDA artifact (after `edit`) and opens a runner on it
  // (replacing one opened before).
  absl::Status Open(const std::function<void(Manifest&)>& edit = nullptr,
                    const std::string& target = "sm_90", bool cuda_graphs = false,
                    const std::string& gemm = "llmc", bool pdl = false,
                    int64_t max_batch_tokens = 16) {
    runner_.reset();
    artifact_.reset();
    std::filesystem::remove_all(dir_);
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
    o.max_batch_tokens = max_batch_tokens;
    o.block_size = 16;
    o.num_blocks = 64;
    o.cuda_graphs = cuda_graphs;
    if (graph_memory_ >= 0) o.cuda_graph_memory = graph_memory_;
    o.gemm = gemm;
    o.pdl = pdl;
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
  // The graphs cuGraphLaunch replayed, in order.
  std::vector<int> Replays() {
    std::vector<int> out;
    for (long i = 0; i < replay_count_(); ++i) out.push_back(replay_(i));
    return out;
  }
  // Runs `b` and returns the launches it recorded (captured or run).
  std::vector<FakeCudaLaunch> StepLaunches(const StepBatch& b) {
    size_t before = size_t(count_());
    auto logits = runner_->Step(StepRunnerTestAccess::Key(), b);
    EXPECT_TRUE(logits.ok()) << logits.status();
    std::vector<FakeCudaLaunch> l = Launches();
    l.erase(l.begin(), l.begin() + long(before));
    return l;
  }

  // A decode step: one token per sequence, at the end of contexts of
  // `contexts[i]` tokens (sequence i's blocks are 100 i, 100 i + 1, ...:
  // distinct, within the 64-block cache modulo 64).
  static StepBatch Decode(const std::vector<int32_t>& contexts) {
    StepBatch b;
    int32_t blocks = 0;
    for (int32_t c : contexts) blocks = std::max(blocks, (c + 15) / 16);
    b.max_blocks = blocks;
    b.query_starts = {0};
    for (size_t i = 0; i < contexts.size(); ++i) {
      int32_t c = contexts[i];
      b.tokens.push_back(int32_t(7 + i));
      b.positions.push_back(c - 1);
      b.query_starts.push_back(int32_t(i + 1));
      b.context_lens.push_back(c);
      for (int32_t k = 0; k < blocks; ++k)
        b.block_tables.push_back(k < (c + 15) / 16 ? int32_t((100 * i + size_t(k)) % 64) : -1);
      b.slot_mapping.push_back(int32_t(((100 * i + size_t(c - 1) / 16) % 64) * 16 + (c - 1) % 16));
      b.logits_rows.push_back(int32_t(i));
    }
    return b;
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

  // A runner of the tiny artifact on the fake driver built without the
  // optional functions (graphs, cuLaunchKernelEx), with options `o`.
  absl::StatusOr<std::unique_ptr<CudaRunner>> OnBareDriver(const RunnerOptions& o) {
    if (!bare_api_) {
      auto api = cuda::DriverApi::Load(LLMC_FAKE_CUDA_DRIVER_NO_GRAPHS);
      if (!api.ok()) return api.status();
      bare_api_ = *std::move(api);
    }
    if (auto st = test::WriteTinyArtifact(dir_, nullptr, test::TinyCudaManifest()); !st.ok())
      return st;
    auto artifact = Artifact::Open(dir_);
    if (!artifact.ok()) return artifact.status();
    bare_artifact_ = *std::move(artifact);
    auto device = cuda::CudaDevice::Open({}, bare_api_.get());
    if (!device.ok()) return device.status();
    return CudaRunner::Create(*bare_artifact_, o, "sm_90", *std::move(device));
  }

  std::unique_ptr<cuda::DriverApi> api_;  // outlives the runner's device
  std::unique_ptr<cuda::DriverApi> bare_api_;  // OnBareDriver's
  std::unique_ptr<Artifact> bare_artifact_;
  void* handle_ = nullptr;
  void (*control_)(const char*, long) = nullptr;
  decltype(&fake_cuda_launch_count) count_ = nullptr;
  decltype(&fake_cuda_launch) launch_ = nullptr;
  long (*query_)(const char*) = nullptr;
  decltype(&fake_cuda_graph_launch_count) replay_count_ = nullptr;
  decltype(&fake_cuda_graph_launch) replay_ = nullptr;
  test::TempFolder folder_;
  std::string dir_;
  std::unique_ptr<Artifact> artifact_;
  std::unique_ptr<CudaRunner> runner_;
  int64_t graph_memory_ = -1;  // RunnerOptions.cuda_graph_memory where set
};

std::vector<int> Read(const int* device, size_t n) { return std::vector<int>(device, device + n); }

// A launch as text, with every pointer it passes named by its order of first
// appearance across `launches` (so that two runners' launches, whose device
// memory differs, compare), and the staged arrays its step info points to,
// block tables up to each sequence's context.
std::vector<std::string> Canonical(const std::vector<FakeCudaLaunch>& launches) {
  std::map<const void*, int> names;
  auto name = [&](const void* p) {
    if (p == nullptr) return std::string("null");
    auto it = names.emplace(p, int(names.size())).first;
    return absl::StrCat("p", it->second);
  };
  auto ints = [](const int* p, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += std::to_string(p[i]) + ",";
    return out;
  };
  std::vector<std::string> out;
  for (const FakeCudaLaunch& l : launches) {
    const llmc_cuda_step_info& i = l.info;
    std::string s = absl::StrFormat("%s [%d %d %d] x %d T %d S %d L %d bs %d", l.symbol, l.grid[0],
                                    l.grid[1], l.grid[2], l.block[0], i.num_tokens, i.num_seqs,
                                    i.num_logits, i.block_size);
    s += " tokens " + ints(i.tokens, size_t(i.num_tokens));
    s += " positions " + ints(i.positions, size_t(i.num_tokens));
    s += " starts " + ints(i.query_starts, size_t(i.num_seqs + 1));
    s += " contexts " + ints(i.context_lens, size_t(i.num_seqs));
    s += " tables ";
    for (int q = 0; q < i.num_seqs; ++q)
      s += ints(i.block_tables + q * i.max_blocks, size_t((i.context_lens[q] + 15) / 16)) + ";";
    s += " slots " + ints(i.slot_mapping, size_t(i.num_tokens));
    s += " rows " + ints(i.logits_rows, size_t(i.num_logits));
    std::vector<const void*> pointers(std::begin(l.args.buffers), std::end(l.args.buffers));
    pointers.insert(pointers.end(), std::begin(l.args.weights), std::end(l.args.weights));
    pointers.insert(pointers.end(), std::begin(l.args.caches), std::end(l.args.caches));
    pointers.push_back(l.args.scratch);
    for (const void* p : pointers) absl::StrAppend(&s, " ", name(p));
    out.push_back(s);
  }
  return out;
}

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
  auto logits = runner_->Step(StepRunnerTestAccess::Key(), b);
  ASSERT_TRUE(logits.ok()) << logits.status();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(logits->logits[i], 0.f);  // zeroed, and no kernel ran

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
  auto logits = runner_->Step(StepRunnerTestAccess::Key(), b);
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
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), Sequence(999, 1)).ok());
  std::vector<FakeCudaLaunch> decode = Launches();
  const void* decode_scratch = decode.back().args.scratch;
  // 16 tokens after 984: 4 splits of partials for 16 tokens, more than the
  // decode-sized scratch; every launch gets the new one.
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), Sequence(984, 16)).ok());
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
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), b).ok());
  std::vector<FakeCudaLaunch> l = Launches();
  EXPECT_STREQ(l.back().symbol, "llmc_cuda_gemv");  // L = 2
  // Write "logits" where the LM head would, then step again: the runner
  // copies the first L rows back (the launches of the fake do nothing).
  float* device_logits = static_cast<float*>(l.back().args.buffers[1]);
  for (int i = 0; i < 2 * 64; ++i) device_logits[i] = float(i) * 0.5f;
  auto logits = runner_->Step(StepRunnerTestAccess::Key(), b);
  ASSERT_TRUE(logits.ok());
  for (int i = 0; i < 2 * 64; ++i) ASSERT_EQ(logits->logits[i], float(i) * 0.5f) << i;
  // The second step reused the staging area and the bindings.
  std::vector<FakeCudaLaunch> again = Launches();
  ASSERT_EQ(again.size(), 2 * l.size());
  EXPECT_EQ(again.back().info.tokens, l.back().info.tokens);
  // A batch with a larger block table grows the staging area.
  StepBatch many = Sequence(0, 1);
  many.max_blocks = 64;
  many.block_tables.assign(64, 5);
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), many).ok());
  EXPECT_EQ(Read(Launches().back().info.block_tables, 64), std::vector<int>(64, 5));
}

// A step's host copies are one upload of its inputs and one download of
// its logits, both from page-locked memory: a pageable buffer would make the
// driver stage the copy and the host wait for it (issue 27).
TEST_F(CudaRunnerTest, StepCopiesOnlyFromPageLockedMemory) {
  ASSERT_TRUE(Open().ok());
  EXPECT_GE(query_("pinned_allocs"), 1);  // the logits, at load
  const long pageable = query_("pageable_copies");
  const long long down = query_("d2h_bytes");
  StepBatch b = Sequence(0, 12);
  b.logits_rows = {3, 11};
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), b).ok());
  EXPECT_EQ(query_("pageable_copies"), pageable);
  EXPECT_EQ(query_("d2h_bytes") - down, 2 * 64 * long(sizeof(float)));  // 2 rows of the vocabulary
  // A batch that outgrows the staging area gets a larger page-locked one.
  StepBatch many = Sequence(0, 1);
  many.max_blocks = 64;
  many.block_tables.assign(64, 5);
  const long pinned = query_("pinned_allocs");
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), many).ok());
  EXPECT_GT(query_("pinned_allocs"), pinned);
  EXPECT_EQ(query_("pageable_copies"), pageable);
  // Closing the runner frees them all.
  runner_.reset();
  EXPECT_EQ(query_("pinned_live"), 0);
}

TEST_F(CudaRunnerTest, SplitKGemmGetsZeroedTicketsAndScratchForItsPartials) {
  // The LM head's GEMM split 4 ways along K (64 x 64 floats per block):
  // without such a launch no tickets; with it, zeroed tickets for the
  // largest step's tiles, bound to every launch, and a scratch that holds
  // the partials of a step that runs it.
  ASSERT_TRUE(Open().ok());
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), Sequence(0, 1)).ok());
  const size_t before = Launches().size();
  EXPECT_EQ(Launches().back().args.tickets, nullptr);
  ASSERT_TRUE(Open([](Manifest& m) {
                ManifestCudaLaunch& gemm = m.cuda.kernels[2].launches[1];
                gemm.grid = {"cdiv(L,64)", "1", "4"};
                gemm.split_floats = 64 * 64;
              }).ok());
  StepBatch b = Sequence(0, 12);
  b.logits_rows.resize(12);
  for (int i = 0; i < 12; ++i) b.logits_rows[size_t(i)] = i;
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), b).ok());
  std::vector<FakeCudaLaunch> l = Launches();
  l.erase(l.begin(), l.begin() + long(before));  // the first runner's
  ASSERT_STREQ(l.back().symbol, "llmc_cuda_gemm");
  EXPECT_EQ(l.back().grid[2], 4u);
  int* tickets = l.back().args.tickets;
  ASSERT_NE(tickets, nullptr);
  for (const FakeCudaLaunch& x : l) EXPECT_EQ(x.args.tickets, tickets);
  EXPECT_EQ(Read(tickets, 1), std::vector<int>{0});
  // 4 blocks x 4096 floats past the 4-float header, written end to end.
  float* scratch = l.back().args.scratch;
  scratch[4 + 4 * 4096 - 1] = 1.0f;
  EXPECT_EQ(scratch[4 + 4 * 4096 - 1], 1.0f);
}

TEST_F(CudaRunnerTest, BadBatchIsRefusedBeforeAnyLaunch) {
  ASSERT_TRUE(Open().ok());
  StepBatch b = Sequence(0, 3);
  b.tokens[1] = 64;
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: token id 64 outside the vocabulary"});
  b = Sequence(0, 17);
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: 17 tokens; the runner takes 1 to 16"});
  b = Sequence(0, 3);
  b.logits_rows = {0, 2};
  auto pick = [](int32_t row, int32_t mask_begin, int32_t mask_count) {
    RowPick p;
    p.row = row, p.mask_begin = mask_begin, p.mask_count = mask_count;
    return p;
  };
  b.picks = {pick(1, 0, 0), pick(0, 0, 0)};
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: pick 1: rows must ascend, row 0 follows row 1"});
  b.picks = {pick(2, 0, 0)};
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: pick 0: row 2 is not one of the 2 logits rows"});
  b.picks = {pick(1, 0, 2)};
  b.masked_ids = {5};
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: pick 0: masked ids [0, +2) are not within the 1"});
  b.picks = {pick(1, 0, 1)};
  b.masked_ids = {64};
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: masked token id 64 outside the vocabulary"});
  b.masked_ids = {5};
  b.picks[0].temperature = 0.7f, b.picks[0].top_p = 1.5f;
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: pick 0: temperature 0.7, top_p 1.5, min_p 0 out of range"});
  b.picks[0].top_p = 1.0f, b.picks[0].logprobs = 21;
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: pick 0: 21 logprobs from entry 0; a pick asks 0 to 20"});
  b.picks[0].logprobs = 0, b.picks[0].penalty_count = 2;
  b.penalties = {{9, 1}, {4, 2}};
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), b), {"step batch: pick 0: penalized token 4 (count 2): tokens must be "
                                 "in the vocabulary, ascending"});
  EXPECT_EQ(count_(), 0);
}

// A step of 12 tokens, 5 logits rows, rows 0, 2 and 3 picked (one with two
// masked ids and a seeded draw, one with one masked id and 3 logprobs), 1
// and 4 left as logits.
StepBatch PickedStep() {
  StepBatch b;
  for (int32_t i = 0; i < 12; ++i) {
    b.tokens.push_back(3 + i);
    b.positions.push_back(i);
    b.slot_mapping.push_back(i);
  }
  b.query_starts = {0, 12};
  b.context_lens = {12};
  b.max_blocks = 1;
  b.block_tables = {0};
  b.logits_rows = {1, 3, 5, 8, 11};
  b.picks.resize(3);
  b.picks[0].row = 0;
  b.picks[1].row = 2, b.picks[1].mask_count = 2;
  b.picks[1].temperature = 0.7f, b.picks[1].top_k = 40, b.picks[1].top_p = 0.9f;
  b.picks[1].min_p = 0.05f, b.picks[1].seed = 0x123456789abcdefull, b.picks[1].draw = 77;
  b.picks[1].penalty_count = 2, b.picks[1].repetition_penalty = 1.2f;
  b.picks[1].presence_penalty = 0.5f, b.picks[1].frequency_penalty = -0.25f;
  b.penalties = {{5, 1}, {40, 3}};
  b.picks[2].row = 3, b.picks[2].mask_begin = 2, b.picks[2].mask_count = 1;
  b.picks[2].logprobs = 3;  // 4 entries: the token's and the 3 best
  b.masked_ids = {7, 9, 63};
  return b;
}

TEST_F(CudaRunnerTest, PicksRunOnTheDeviceAndOnlyTheirIdsComeBack) {
  ASSERT_TRUE(Open([](Manifest& m) {
                m.cuda.samplers = {{"sample", "llmc_sample", 256}};
              }).ok());
  ASSERT_TRUE(runner_->picks_on_device());
  const StepBatch b = PickedStep();
  const long pageable = query_("pageable_copies");
  const long long down = query_("d2h_bytes");
  std::vector<FakeCudaLaunch> l = StepLaunches(b);
  ASSERT_GE(l.size(), 2u);
  // After the step's kernels, one block a pick over the logits buffer, to
  // which the LM head (the last kernel) wrote.
  const FakeCudaLaunch& pick = l.back();
  EXPECT_STREQ(pick.symbol, "llmc_sample");
  EXPECT_EQ(pick.grid[0], 3u);
  EXPECT_EQ(pick.block[0], 256u);
  EXPECT_EQ(pick.info.num_logits, 3);
  float* device_logits = static_cast<float*>(l[l.size() - 2].args.buffers[1]);
  EXPECT_EQ(pick.args.buffers[0], device_logits);
  // The picks and masked ids as staged (llmc_cuda_pick, cuda_abi.h).
  const auto* staged = static_cast<const llmc_cuda_pick*>(pick.args.buffers[1]);
  for (size_t j = 0; j < b.picks.size(); ++j) {
    EXPECT_EQ(staged[j].row, b.picks[j].row);
    EXPECT_EQ(staged[j].mask_begin, b.picks[j].mask_begin);
    EXPECT_EQ(staged[j].mask_count, b.picks[j].mask_count);
    EXPECT_EQ(staged[j].top_k, b.picks[j].top_k);
    EXPECT_EQ(staged[j].temperature, b.picks[j].temperature);
    EXPECT_EQ(staged[j].top_p, b.picks[j].top_p);
    EXPECT_EQ(staged[j].min_p, b.picks[j].min_p);
    EXPECT_EQ(staged[j].seed, b.picks[j].seed);
    EXPECT_EQ(staged[j].penalty_begin, b.picks[j].penalty_begin);
    EXPECT_EQ(staged[j].penalty_count, b.picks[j].penalty_count);
    EXPECT_EQ(staged[j].repetition_penalty, b.picks[j].repetition_penalty);
    EXPECT_EQ(staged[j].presence_penalty, b.picks[j].presence_penalty);
    EXPECT_EQ(staged[j].frequency_penalty, b.picks[j].frequency_penalty);
    EXPECT_EQ(staged[j].draw, b.picks[j].draw);
  }
  const auto* masked = static_cast<const int32_t*>(pick.args.buffers[2]);
  EXPECT_EQ(std::vector<int32_t>(masked, masked + 3), b.masked_ids);
  const auto* penalized = static_cast<const llmc_cuda_penalty*>(pick.args.buffers[5]);
  EXPECT_EQ(penalized[1].token, 40);
  EXPECT_EQ(penalized[1].count, 3);
  // Down came the two unpicked rows, three ids and the 4 logprobs asked
  // for, from page-locked memory.
  EXPECT_EQ(query_("d2h_bytes") - down, 2 * 64 * long(sizeof(float)) + 3 * long(sizeof(int32_t)) +
                                            4 * long(sizeof(PickLogprob)));
  EXPECT_EQ(query_("pageable_copies"), pageable);

  // The fake runs no kernel: what the device holds is what comes back.
  for (int i = 0; i < 5 * 64; ++i) device_logits[i] = float(i) * 0.25f;
  int32_t* device_ids = static_cast<int32_t*>(pick.args.buffers[3]);
  device_ids[0] = 17, device_ids[1] = 23, device_ids[2] = 42;
  auto* device_logprobs = static_cast<llmc_cuda_logprob*>(pick.args.buffers[4]);
  for (int i = 0; i < 4; ++i) device_logprobs[i] = {60 + i, -0.5f * float(i)};
  auto out = runner_->Step(StepRunnerTestAccess::Key(), b);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(std::vector<int32_t>(out->tokens, out->tokens + 3), (std::vector<int32_t>{17, 23, 42}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out->logprobs[i].token, 60 + i);
    EXPECT_EQ(out->logprobs[i].logprob, -0.5f * float(i));
  }
  for (int row : {1, 4})
    for (int i = 0; i < 64; ++i)
      ASSERT_EQ(out->logits[row * 64 + i], device_logits[row * 64 + i]) << row << " " << i;
}

TEST_F(CudaRunnerTest, ADecodeStepOf256PicksCopiesOnlyIdsAndTheLogprobsAskedFor) {
  // Issue 27's bound: a decode step of 256 sequences, every token picked on
  // the device (greedy, top-k, temperature alone, top-p alone, as OpenAI
  // clients send it), half of them with 2 logprobs: down come 256 ids and 128 x 3
  // logprob entries, nothing else, and nothing from pageable memory.
  ASSERT_TRUE(Open([](Manifest& m) { m.cuda.samplers = {{"sample", "llmc_sample", 256}}; },
                   "sm_90", false, "llmc", false, 256)
                  .ok());
  StepBatchBuilder builder;
  builder.Clear();
  const std::vector<int32_t> table = {3};
  for (int32_t s = 0; s < 256; ++s) {
    const std::vector<int32_t> token = {int32_t(2 + s % 60)}, slot = {3 * 16 + s % 16};
    builder.AddLogitsRow(builder.AddSequence(token, s % 16, slot, table));
    RowPick pick;
    pick.temperature = s % 3 == 0 ? 0.0f : 0.8f;
    pick.top_k = s % 3 == 1 ? 40 : 0;
    pick.top_p = s % 6 == 2 ? 0.9f : 1.0f;
    pick.seed = uint64_t(s);
    pick.logprobs = s % 2 ? 2 : 0;
    builder.PickLastRow({}, pick);
  }
  const StepBatch& b = builder.Finish();
  const long pageable = query_("pageable_copies");
  const long long down = query_("d2h_bytes");
  auto out = runner_->Step(StepRunnerTestAccess::Key(), b);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(query_("d2h_bytes") - down,
            256 * long(sizeof(int32_t)) + 128 * 3 * long(sizeof(PickLogprob)));
  EXPECT_EQ(query_("pageable_copies"), pageable);
}

TEST_F(CudaRunnerTest, AScoredPromptCopiesOnlyItsLogprobsNotItsLogits) {
  // A score request's prompt logprobs (perplexity): a 16-token prefill with
  // a forced pick on each of its first 15 rows: down come 15 ids and 15
  // logprob entries (N = 0: the token's own), no row of logits.
  ASSERT_TRUE(Open([](Manifest& m) { m.cuda.samplers = {{"sample", "llmc_sample", 256}}; },
                   "sm_90", false, "llmc", false, 16)
                  .ok());
  StepBatchBuilder builder;
  builder.Clear();
  std::vector<int32_t> tokens, slots;
  const std::vector<int32_t> table = {3};
  for (int32_t i = 0; i < 16; ++i) tokens.push_back(2 + i), slots.push_back(3 * 16 + i);
  const int32_t row = builder.AddSequence(tokens, 0, slots, table);
  for (int32_t i = 0; i < 15; ++i) {
    builder.AddLogitsRow(row + i);
    RowPick pick;
    pick.forced = tokens[size_t(i + 1)];
    builder.PickLastRow({}, pick);
  }
  const StepBatch& b = builder.Finish();
  EXPECT_EQ(b.num_logprob_entries(), 15);
  const long pageable = query_("pageable_copies");
  const long long down = query_("d2h_bytes");
  auto out = runner_->Step(StepRunnerTestAccess::Key(), b);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(query_("d2h_bytes") - down, 15 * long(sizeof(int32_t)) + 15 * long(sizeof(PickLogprob)));
  EXPECT_EQ(query_("pageable_copies"), pageable);
}

// Asynchronous scheduling's runner side: with the sampler and the token
// feed, a step is submitted while the one before is in flight (no
// synchronization between the two, the fake's stream deferred), its feeds
// run first, from the picked ids the step before left on the device, and
// each step's ids come back through its own page-locked slot.
TEST_F(CudaRunnerTest, TwoStepsOverlapAndTheSecondIsFedTheFirstsPicks) {
  ASSERT_TRUE(Open([](Manifest& m) {
                m.cuda.samplers = {{"sample", "llmc_sample", 256}, {"feed", "llmc_feed", 128}};
              }).ok());
  EXPECT_EQ(runner_->max_steps_in_flight(), 2);
  EXPECT_TRUE(runner_->feeds_tokens());
  control_("defer", 1);
  const StepBatch first = PickedStep();  // 3 picks
  StepBatch second = Decode({13, 20});
  second.picks.resize(2);
  second.picks[1].row = 1;
  second.feeds = {{0, 2}, {1, 0}};
  // Once to size the staging and the slots (growing one waits for the
  // device), then timed by the fake's synchronizations.
  for (const StepBatch* b : {&first, static_cast<const StepBatch*>(&second)})
    ASSERT_TRUE(runner_->Submit(StepRunnerTestAccess::Key(), *b).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(runner_->Collect(StepRunnerTestAccess::Key()).ok());
  const long flushes = query_("flushes");
  const size_t before = size_t(count_());
  ASSERT_TRUE(runner_->Submit(StepRunnerTestAccess::Key(), first).ok());
  ASSERT_TRUE(runner_->Submit(StepRunnerTestAccess::Key(), second).ok());
  EXPECT_EQ(query_("flushes"), flushes) << "a Submit waited for the device";
  EXPECT_EQ(runner_->Submit(StepRunnerTestAccess::Key(), second).code(),
            absl::StatusCode::kFailedPrecondition);

  std::vector<FakeCudaLaunch> l = Launches();
  l.erase(l.begin(), l.begin() + long(before));
  auto at = [&](const char* symbol, int nth) {
    for (const FakeCudaLaunch& x : l)
      if (std::string(x.symbol) == symbol && nth-- == 0) return x;
    ADD_FAILURE() << "no launch " << symbol;
    return FakeCudaLaunch{};
  };
  const FakeCudaLaunch feed = at("llmc_feed", 0), pick1 = at("llmc_sample", 0),
                       pick2 = at("llmc_sample", 1);
  EXPECT_EQ(feed.grid[0], 1u);
  EXPECT_EQ(feed.block[0], 128u);
  EXPECT_EQ(feed.info.num_logits, 2);
  // It reads the ids the first step's sampler writes and writes the second
  // step's tokens, which its first kernel reads, before that kernel.
  EXPECT_EQ(feed.args.buffers[2], pick1.args.buffers[3]);
  size_t feed_at = 0, second_kernel = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    if (std::string(l[i].symbol) == "llmc_feed") feed_at = i;
    if (feed_at > 0 && second_kernel == 0 && i > feed_at) second_kernel = i;
  }
  ASSERT_GT(second_kernel, feed_at);
  EXPECT_EQ(feed.args.buffers[0], static_cast<const void*>(l[second_kernel].info.tokens));
  // Stream order (deferred, nothing ran yet): the second step's upload
  // lands after the first step's kernels read theirs, so its feeds are
  // checked once the queue ran.
  auto out1 = runner_->Collect(StepRunnerTestAccess::Key());
  ASSERT_TRUE(out1.ok()) << out1.status();
  const auto* feeds = static_cast<const llmc_cuda_feed*>(feed.args.buffers[1]);
  EXPECT_EQ(feeds[0].token, 0);
  EXPECT_EQ(feeds[0].pick, 2);
  EXPECT_EQ(feeds[1].token, 1);
  EXPECT_EQ(feeds[1].pick, 0);
  auto out2 = runner_->Collect(StepRunnerTestAccess::Key());
  ASSERT_TRUE(out2.ok()) << out2.status();
  EXPECT_NE(out1->tokens, out2->tokens) << "two steps in flight share one page-locked slot";
  EXPECT_EQ(pick2.args.buffers[3], pick1.args.buffers[3]);
  EXPECT_EQ(runner_->Collect(StepRunnerTestAccess::Key()).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // A feed must read a pick the step before made.
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), first).ok());
  second.feeds = {{0, 3}};
  auto bad = runner_->Step(StepRunnerTestAccess::Key(), second);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("feed 0 reads pick 3 of the step before, which had 3"),
            std::string::npos)
      << bad.status();
  control_("defer", 0);

  // Without the token feed: one step at a time, and feeds are refused.
  ASSERT_TRUE(Open([](Manifest& m) { m.cuda.samplers = {{"sample", "llmc_sample", 256}}; }).ok());
  EXPECT_EQ(runner_->max_steps_in_flight(), 1);
  EXPECT_FALSE(runner_->feeds_tokens());
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), first).ok());
  second.feeds = {{0, 0}};
  EXPECT_EQ(runner_->Step(StepRunnerTestAccess::Key(), second).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaRunnerTest, WithoutTheDeviceSamplerThePicksAreMadeOnTheHost) {
  // An artifact without cuda.samplers: every row comes back, and the picks
  // are the host sampler's tokens of the rows, masks applied.
  ASSERT_TRUE(Open().ok());
  ASSERT_FALSE(runner_->picks_on_device());
  const StepBatch b = PickedStep();
  std::vector<FakeCudaLaunch> l = StepLaunches(b);
  ASSERT_FALSE(l.empty());
  EXPECT_STRNE(l.back().symbol, "llmc_sample");
  float* device_logits = static_cast<float*>(l.back().args.buffers[1]);
  for (int i = 0; i < 5 * 64; ++i) device_logits[i] = float((i * 37) % 64) * 0.1f;
  device_logits[3 * 64 + 63] = 100.f;  // masked: loses
  const long long down = query_("d2h_bytes");
  auto out = runner_->Step(StepRunnerTestAccess::Key(), b);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(query_("d2h_bytes") - down, 5 * 64 * long(sizeof(float)));
  std::vector<int32_t> want;
  std::vector<float> scratch;
  for (const RowPick& p : b.picks) {
    SamplingParams params;
    params.temperature = p.temperature, params.top_k = p.top_k, params.top_p = p.top_p;
    params.min_p = p.min_p, params.seed = p.seed, params.repeat_last_n = -1;
    params.repetition_penalty = p.repetition_penalty;
    params.presence_penalty = p.presence_penalty;
    params.frequency_penalty = p.frequency_penalty;
    std::vector<int32_t> previous;  // the window: each token `count` times
    for (int32_t k = p.penalty_begin; k < p.penalty_begin + p.penalty_count; ++k)
      previous.insert(previous.end(), size_t(b.penalties[size_t(k)].count),
                      b.penalties[size_t(k)].token);
    const std::span<const float> row(device_logits + p.row * 64, 64);
    const std::span<const int32_t> mask(b.masked_ids.data() + p.mask_begin, size_t(p.mask_count));
    params.logprobs = p.logprobs;
    Sampler with_logprobs(params);
    with_logprobs.SetDrawIndex(p.draw);
    SampleResult r;
    want.push_back(with_logprobs.Sample(MaskTokens(row, mask, &scratch), previous, &r));
    if (p.logprobs == 0) continue;
    EXPECT_EQ(out->logprobs[p.logprob_begin].token, r.token);
    EXPECT_EQ(out->logprobs[p.logprob_begin].logprob, r.logprob);
    ASSERT_EQ(r.top_logprobs.size(), size_t(p.logprobs));
    for (int i = 0; i < p.logprobs; ++i)
      EXPECT_EQ(out->logprobs[p.logprob_begin + 1 + i].token, r.top_logprobs[size_t(i)].token);
  }
  EXPECT_NE(want[2], 63);
  EXPECT_EQ(std::vector<int32_t>(out->tokens, out->tokens + 3), want);
}

TEST_F(CudaRunnerTest, GemmChoices) {
  ExpectError(Open(nullptr, "sm_90", false, "cublas"),
              {"--gemm: 'cublas' is not llmc, cublaslt or auto"});
  // The tiny artifact offers no cuBLASLt GEMM: the generated ones stay, and
  // the summary says why; no cuBLASLt policy can be set then.
  ASSERT_TRUE(Open(nullptr, "sm_90", false, "cublaslt").ok());
  EXPECT_NE(runner_->ExecutionSummary().find("the generated GEMMs (no GEMM has 16-bit activations"),
            std::string::npos)
      << runner_->ExecutionSummary();
  EXPECT_EQ(runner_->CublasLtVersion(), "");
  GemmPolicy lt;
  lt.mode = GemmPolicy::Mode::kCublasLt;
  ExpectError(runner_->SetGemmPolicy(lt), {"a GEMM policy with cuBLASLt needs a runner created"});
  EXPECT_TRUE(runner_->SetGemmPolicy(GemmPolicy{}).ok());
  // auto without a tune file: the generated GEMMs, said so.
  ASSERT_TRUE(Open([](Manifest& m) {
                for (ManifestCudaLaunch& l : m.cuda.kernels[2].launches) l.impl = "llmc";
                m.cuda.kernels[2].gemm = {64, 64, 64, 1, "L", "llmc_cuda_gemv", "llmc_cuda_gemm"};
              }, "sm_90", false, "auto")
                  .ok());
  EXPECT_NE(runner_->ExecutionSummary().find("the generated GEMMs (no tune file "),
            std::string::npos)
      << runner_->ExecutionSummary();
}

TEST_F(CudaRunnerTest, LaunchFailureNamesTheKernelAndStep) {
  ASSERT_TRUE(Open().ok());
  control_("launch_result", 1);
  ExpectError(runner_->Step(StepRunnerTestAccess::Key(), Sequence(0, 2)),
              {"cuLaunchKernel(llmc_cuda_embed, grid [2, 1, 1] x 128) of CUDA step 0 (embed) "
               "failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument"});
}

TEST_F(CudaRunnerTest, CreateErrors) {
  ExpectError(Open([](Manifest& m) { m.cuda.kernels[2].launches[1].symbol = "missing"; }),
              {"kernels/sm_90/kernels.ptx: kernel missing: cuModuleGetFunction(\"missing\") "
               "failed: CUDA_ERROR_NOT_FOUND (500)"});
  std::filesystem::remove_all(dir_);
  ExpectError(Open([](Manifest& m) { m.cuda.cuda_abi_version = LLMC_CUDA_ABI_VERSION + 1; }),
              {absl::StrCat("CUDA kernels use ABI version ", LLMC_CUDA_ABI_VERSION + 1,
                            ", this runtime speaks ", LLMC_CUDA_ABI_VERSION,
                            "; recompile the model")});
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

// The tiny artifact's runner takes decode steps of up to 16 sequences: 5
// buckets (1, 2, 4, 8, 16), captured largest first, so graph 6 - n holds
// the n-th smallest. Its contexts reach the model's 128 positions: block
// tables 8 wide.
constexpr int kGraphOf1 = 5, kGraphOf2 = 4, kGraphOf4 = 3, kGraphOf8 = 2, kGraphOf16 = 1;

// The launches recorded into graph `n`.
std::vector<FakeCudaLaunch> CapturedInto(const std::vector<FakeCudaLaunch>& all, int n) {
  std::vector<FakeCudaLaunch> out;
  for (const FakeCudaLaunch& l : all)
    if (l.graph == n) out.push_back(l);
  return out;
}

TEST_F(CudaRunnerTest, GraphsAreCapturedAtLoadOnePerBucket) {
  // Without graphs: the launches of a decode step at the longest context.
  ASSERT_TRUE(Open().ok());
  std::vector<FakeCudaLaunch> direct = StepLaunches(Decode({128}));
  ASSERT_FALSE(direct.empty());
  for (const FakeCudaLaunch& l : direct) EXPECT_EQ(l.graph, 0);
  EXPECT_EQ(query_("captures"), 0);
  std::vector<std::string> direct_text = Canonical(direct);  // while its memory is there

  control_("reset", 0);
  ASSERT_TRUE(Open(nullptr, "sm_90", /*cuda_graphs=*/true).ok());
  EXPECT_EQ(runner_->ExecutionSummary(),
            "CUDA sm_90 on Fake GPU (sm_90, 132 SMs, 80.0 GiB), decode steps of 1 to 16 sequences "
            "as CUDA graphs (5 buckets, 0.0 MiB)");
  EXPECT_EQ(query_("captures"), 5);
  EXPECT_EQ(query_("graphs"), 5);
  EXPECT_EQ(query_("graph_execs"), 5);
  EXPECT_EQ(query_("capture_violations"), 0);  // no copy or sync inside a capture
  const std::vector<FakeCudaLaunch> at_load = Launches();
  for (const FakeCudaLaunch& l : at_load) EXPECT_GT(l.graph, 0) << l.symbol;  // none ran
  for (int n = 1; n <= 5; ++n) {
    std::vector<FakeCudaLaunch> g = CapturedInto(at_load, n);
    ASSERT_FALSE(g.empty()) << n;
    EXPECT_EQ(g[0].info.num_tokens, 1 << (5 - n)) << n;  // T = S = L = the bucket
    EXPECT_EQ(g[0].info.num_seqs, 1 << (5 - n)) << n;
    EXPECT_EQ(g[0].info.num_logits, 1 << (5 - n)) << n;
    EXPECT_EQ(g[0].info.max_blocks, 8) << n;
  }

  // A decode step launches nothing itself: it replays its bucket's graph,
  // whose launches are those of the direct step (kernels, grids, splits,
  // bindings; the staged arrays, read through the graph's pointers, are
  // this step's).
  EXPECT_TRUE(StepLaunches(Decode({128})).empty());
  EXPECT_EQ(Replays(), (std::vector<int>{kGraphOf1}));
  EXPECT_EQ(Canonical(CapturedInto(at_load, kGraphOf1)), direct_text);

  // The runner's logits are still the device's rows after a replay.
  float* logits_area = static_cast<float*>(CapturedInto(at_load, kGraphOf1).back().args.buffers[1]);
  for (int i = 0; i < 64; ++i) logits_area[i] = float(i) + 0.5f;
  auto logits = runner_->Step(StepRunnerTestAccess::Key(), Decode({62}));
  ASSERT_TRUE(logits.ok());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(logits->logits[i], float(i) + 0.5f) << i;

  // The runner destroys its graphs.
  runner_.reset();
  EXPECT_EQ(query_("graphs"), 0);
  EXPECT_EQ(query_("graph_execs"), 0);
}

TEST_F(CudaRunnerTest, ADecodeStepReplaysTheSmallestBucketThatHoldsIt) {
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  const std::vector<FakeCudaLaunch> at_load = Launches();
  const llmc_cuda_step_info four = CapturedInto(at_load, kGraphOf4)[0].info;
  // 3 sequences (3, 5 and 2 blocks): bucket 4, one padding row.
  const long h2d_2d = query_("h2d_2d_bytes");
  const long pageable = query_("pageable_copies");  // the weights' upload, from the file
  EXPECT_TRUE(StepLaunches(Decode({40, 70, 20})).empty());
  EXPECT_EQ(Replays(), (std::vector<int>{kGraphOf4}));
  EXPECT_EQ(Read(four.tokens, 4), (std::vector<int>{7, 8, 9, 0}));
  EXPECT_EQ(Read(four.positions, 4), (std::vector<int>{39, 69, 19, 0}));
  EXPECT_EQ(Read(four.query_starts, 5), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Read(four.context_lens, 4), (std::vector<int>{40, 70, 20, 0}));
  EXPECT_EQ(Read(four.slot_mapping, 4)[3], -1);  // the padding row writes no cache slot
  EXPECT_EQ(Read(four.logits_rows, 4), (std::vector<int>{0, 1, 2, 3}));
  // The batch's 5 columns of its 3 rows went up, at the graph's pitch of 8,
  // in one pitched copy.
  auto row = [&](int q) { return Read(four.block_tables + q * 8, 5); };
  EXPECT_EQ(row(0), (std::vector<int>{0, 1, 2, -1, -1}));
  EXPECT_EQ(row(1), (std::vector<int>{36, 37, 38, 39, 40}));
  EXPECT_EQ(row(2), (std::vector<int>{8, 9, -1, -1, -1}));
  EXPECT_EQ(query_("h2d_2d_bytes") - h2d_2d, 3 * 5 * 4);

  // Any context up to the longest replays the same graphs (their splits
  // are the longest context's), and every batch size has one.
  EXPECT_TRUE(StepLaunches(Decode({1})).empty());
  EXPECT_TRUE(StepLaunches(Decode({128})).empty());
  EXPECT_TRUE(StepLaunches(Decode({1, 128})).empty());
  EXPECT_TRUE(StepLaunches(Decode({9, 9, 9, 9})).empty());
  EXPECT_TRUE(StepLaunches(Decode({9, 9, 9, 9, 9})).empty());
  EXPECT_TRUE(StepLaunches(Decode(std::vector<int32_t>(16, 100))).empty());
  EXPECT_EQ(Replays(), (std::vector<int>{kGraphOf4, kGraphOf1, kGraphOf1, kGraphOf2, kGraphOf4,
                                         kGraphOf8, kGraphOf16}));
  EXPECT_EQ(query_("captures"), 5);  // none after the load
  EXPECT_EQ(query_("capture_violations"), 0);
  EXPECT_EQ(query_("pageable_copies"), pageable);

  // A context past the model's (block tables wider than the graphs'): the
  // step runs launch by launch.
  std::vector<FakeCudaLaunch> wide = StepLaunches(Decode({700}));
  ASSERT_FALSE(wide.empty());
  for (const FakeCudaLaunch& l : wide) EXPECT_EQ(l.graph, 0);
  EXPECT_EQ(wide[0].info.max_blocks, 44);
}

TEST_F(CudaRunnerTest, PrefillStepsNeverUseGraphs) {
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  for (int i = 0; i < 2; ++i) {
    std::vector<FakeCudaLaunch> l = StepLaunches(Sequence(0, 3));
    ASSERT_EQ(l.size(), 4u);
    for (const FakeCudaLaunch& x : l) EXPECT_EQ(x.graph, 0);
  }
  // As many tokens as sequences, but not one each: a prefill.
  StepBatch mixed = Decode({30, 30});
  mixed.query_starts = {0, 2, 2};
  mixed.positions = {28, 29};
  std::vector<FakeCudaLaunch> l = StepLaunches(mixed);
  ASSERT_FALSE(l.empty());
  for (const FakeCudaLaunch& x : l) EXPECT_EQ(x.graph, 0);
  EXPECT_EQ(l[0].info.max_blocks, 2);  // the batch's own width
  EXPECT_EQ(query_("captures"), 5);    // the load's
  EXPECT_TRUE(Replays().empty());
}

TEST_F(CudaRunnerTest, GrowingTheEagerStepsAreasKeepsTheGraphs) {
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  const FakeCudaLaunch one = CapturedInto(Launches(), kGraphOf1)[0];
  // A prefill of 16 tokens late in a long context grows the scratch and the
  // staging of the steps that run launch by launch.
  std::vector<FakeCudaLaunch> prefill = StepLaunches(Sequence(984, 16));
  ASSERT_FALSE(prefill.empty());
  EXPECT_NE(prefill[0].args.scratch, one.args.scratch);
  // The graphs read their own areas: still 5, replayed as they are.
  EXPECT_EQ(query_("graphs"), 5);
  EXPECT_EQ(query_("graph_execs"), 5);
  EXPECT_TRUE(StepLaunches(Decode({100})).empty());
  EXPECT_EQ(Replays(), (std::vector<int>{kGraphOf1}));
  EXPECT_EQ(Read(one.info.context_lens, 1), (std::vector<int>{100}));
}

TEST_F(CudaRunnerTest, GraphsStayWithinTheirMemoryBudget) {
  // Each executable graph takes 1,000 bytes a launch; the budget holds the
  // two largest buckets' (16 and 8), and the third is destroyed again.
  control_("graph_node_bytes", 1000);
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  const long per_graph = long(CapturedInto(Launches(), 1).size()) * 1000;
  graph_memory_ = 2 * per_graph + per_graph / 2;
  runner_.reset();  // its graphs go before the counts do
  control_("reset", 0);
  control_("graph_node_bytes", 1000);
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  EXPECT_EQ(query_("captures"), 3);
  EXPECT_EQ(query_("graphs"), 2);
  EXPECT_EQ(query_("graph_execs"), 2);
  EXPECT_EQ(query_("graph_exec_bytes"), 2 * per_graph);
  EXPECT_NE(runner_->ExecutionSummary().find("decode steps of 1 to 16 sequences as CUDA graphs "
                                             "(2 buckets"),
            std::string::npos)
      << runner_->ExecutionSummary();
  // One sequence pads to 8, the smallest bucket captured; 9 to 16.
  EXPECT_TRUE(StepLaunches(Decode({20})).empty());
  EXPECT_TRUE(StepLaunches(Decode(std::vector<int32_t>(9, 20))).empty());
  EXPECT_EQ(Replays(), (std::vector<int>{2, 1}));

  // No room for any: every step launch by launch, and the summary says so.
  graph_memory_ = per_graph / 2;
  runner_.reset();
  control_("reset", 0);
  control_("graph_node_bytes", 1000);
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  EXPECT_EQ(query_("graphs"), 0);
  EXPECT_NE(runner_->ExecutionSummary().find("no CUDA graphs"), std::string::npos);
  std::vector<FakeCudaLaunch> l = StepLaunches(Decode({20}));
  ASSERT_FALSE(l.empty());
  for (const FakeCudaLaunch& x : l) EXPECT_EQ(x.graph, 0);
}

TEST_F(CudaRunnerTest, ALaunchFailingDuringCaptureFailsTheLoad) {
  control_("launch_result", 1);
  auto st = Open(nullptr, "sm_90", true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cuLaunchKernel(llmc_cuda_embed"), std::string::npos) << st;
  EXPECT_NE(st.message().find("failed: CUDA_ERROR_INVALID_VALUE (1)"), std::string::npos) << st;
  EXPECT_EQ(query_("capturing"), 0);
  EXPECT_EQ(query_("graphs"), 0);
  control_("launch_result", 0);
  ASSERT_TRUE(Open(nullptr, "sm_90", true).ok());
  EXPECT_TRUE(StepLaunches(Decode({5})).empty());
}

TEST_F(CudaRunnerTest, PdlLaunchesEveryKernelWithProgrammaticSerialization) {
  // Without --pdl: cuLaunchKernel, nothing programmatic.
  ASSERT_TRUE(Open().ok());
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), Sequence(999, 1)).ok());
  std::vector<FakeCudaLaunch> plain = Launches();
  ASSERT_FALSE(plain.empty());
  for (const FakeCudaLaunch& l : plain) EXPECT_EQ(l.programmatic, 0) << l.symbol;
  EXPECT_EQ(runner_->ExecutionSummary().find("programmatic"), std::string::npos);
  const std::vector<std::string> plain_text = Canonical(plain);  // while its memory lives
  // With it: every kernel through cuLaunchKernelEx with the attribute, and
  // the same launches otherwise (grids, blocks, bindings, step info).
  control_("reset", 0);
  ASSERT_TRUE(Open(nullptr, "sm_90", false, "llmc", /*pdl=*/true).ok());
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), Sequence(999, 1)).ok());
  std::vector<FakeCudaLaunch> pdl = Launches();
  ASSERT_EQ(pdl.size(), plain.size());
  for (const FakeCudaLaunch& l : pdl) EXPECT_EQ(l.programmatic, 1) << l.symbol;
  EXPECT_EQ(Canonical(pdl), plain_text);
  EXPECT_NE(runner_->ExecutionSummary().find("programmatic dependent launch"), std::string::npos);
  // Graph captures take the same launches.
  control_("reset", 0);
  ASSERT_TRUE(Open(nullptr, "sm_90", /*cuda_graphs=*/true, "llmc", /*pdl=*/true).ok());
  ASSERT_TRUE(runner_->Step(StepRunnerTestAccess::Key(), Decode({99})).ok());
  EXPECT_EQ(Replays().size(), 1u);
  for (const FakeCudaLaunch& l : Launches()) EXPECT_EQ(l.programmatic, 1) << l.symbol;
}

TEST_F(CudaRunnerTest, PdlNeedsSm90AndTheDriversLaunchKernelEx) {
  control_("sm_major", 8);
  auto st = Open(nullptr, "sm_90", false, "llmc", /*pdl=*/true);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("--pdl: programmatic dependent launch needs sm_90 or newer"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find("is sm_80"), std::string::npos) << st;
  control_("sm_major", 9);
  RunnerOptions o;
  o.pdl = true;
  auto runner = OnBareDriver(o);
  ExpectError(runner, {"--pdl: the CUDA driver", "lacks cuLaunchKernelEx", "run without --pdl"});
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CudaRunnerTest, GraphsNeedTheDriversGraphFunctions) {
  RunnerOptions o;
  o.cuda_graphs = true;
  {
    auto runner = OnBareDriver(o);
    ExpectError(runner, {"--cuda-graphs: the CUDA driver", "lacks the graph functions",
                         "run without --cuda-graphs"});
    EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition);
  }
  // Without the flag the same driver runs the artifact.
  o.cuda_graphs = false;
  auto runner = OnBareDriver(o);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_TRUE((*runner)->Step(StepRunnerTestAccess::Key(), Sequence(0, 1)).ok());
}

}  // namespace
}  // namespace llmc
