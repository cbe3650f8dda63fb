// The CUDA runner's pure bookkeeping (cuda_step_plan.h) on the tiny CUDA
// manifest of the artifact tests: buffer sizes, the split policy and its
// scratch, the staging layout, launch selection by `when`, argument packing.
#include "llmc/runtime/exec/cuda_step_plan.h"

#include <gtest/gtest.h>

#include "core/artifact/artifact_test_util.h"

namespace llmc {
namespace {

using test::TinyCudaManifest;

TEST(CudaStepPlan, BufferBytes) {
  Manifest m = TinyCudaManifest();
  EXPECT_EQ(CudaActivationBytes("bf16"), 2);
  EXPECT_EQ(CudaActivationBytes("f16"), 2);
  EXPECT_EQ(CudaActivationBytes("f32"), 4);
  EXPECT_EQ(CudaActivationBytes("i8"), 0);
  // "hidden": T rows of 64 bf16 (not the host's f32 row_bytes).
  EXPECT_EQ(CudaBufferBytes(m, 0, 512, 4), 512 * 64 * 2);
  // The logits: L rows, always f32.
  EXPECT_EQ(CudaBufferBytes(m, 1, 512, 4), 4 * 64 * 4);
  // A TP rank's slice of the logits: rows "logits", so f32 like them (the
  // all-gather into the logits does not convert).
  m.buffers.push_back({"slice", "logits", 32 * 4, "f32", 32});
  EXPECT_EQ(CudaBufferBytes(m, m.buffers.size() - 1, 512, 4), 4 * 32 * 4);
  m.cuda.activation_dtype = "f32";
  EXPECT_EQ(CudaBufferBytes(m, 0, 10, 4), 10 * 64 * 4);
}

TEST(CudaStepPlan, AttentionSplitsCoverEveryKey) {
  // A split reads split_keys keys, no more: every step needs all of them.
  EXPECT_EQ(AttentionSplits(1000, 256), 4);
  EXPECT_EQ(AttentionSplits(1024, 256), 4);
  EXPECT_EQ(AttentionSplits(1025, 256), 5);
  EXPECT_EQ(AttentionSplits(1, 256), 1);
  EXPECT_EQ(AttentionSplits(0, 256), 1);
  EXPECT_EQ(AttentionSplits(1 << 20, 256), 4096);
  EXPECT_EQ(AttentionSplits(1 << 20, 0), 1);  // not an attention kernel
}

LaunchVars Decode(int64_t seqs) {
  return {.tokens = seqs, .logits = seqs, .queries = 1, .seqs = seqs};
}

int64_t Scratch(const Manifest& m, const LaunchVars& step, int64_t max_context) {
  auto parsed = ParseCudaLaunches(m.cuda);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? StepScratchFloats(m.cuda, *parsed, step, max_context) : -1;
}

TEST(CudaStepPlan, ScratchOfAStep) {
  Manifest m = TinyCudaManifest();
  // A 4-float header, a ticket counter per token and head (rounded up to 4),
  // then T x heads x splits x (head_dim + 2).
  EXPECT_EQ(Scratch(m, Decode(1), 1000), 4 + 4 + 1 * 4 * 4 * (16 + 2));
  EXPECT_EQ(Scratch(m, Decode(3), 1000), 4 + 12 + 3 * 4 * 4 * (16 + 2));
  EXPECT_EQ(Scratch(m, Decode(512), 1024), 4 + 2048 + 512 * 4 * 4 * (16 + 2));
  // One split: no partials, but the counters, which the cache write zeroes
  // whatever the split count.
  EXPECT_EQ(Scratch(m, Decode(512), 256), 4 + 2048);
  m.cuda.kernels.push_back({"wide", "attention", {{"w", "", {"splits", "1", "T"}, 32}}, 128, 8, 64});
  EXPECT_EQ(Scratch(m, Decode(2), 1000), 4 + 16 + 2 * 8 * 8 * (64 + 2));
  m.cuda.kernels[1].split_keys = 0;
  m.cuda.kernels.pop_back();
  EXPECT_EQ(Scratch(m, Decode(64), 1 << 20), 4 + 64 * 4);
  m.cuda.kernels[1].heads = 0;  // no attention at all: the header only
  EXPECT_EQ(Scratch(m, Decode(64), 1 << 20), 4);
}

TEST(CudaStepPlan, SplitKGemmScratchAndTickets) {
  // The LM head's GEMM (L > 8) split 4 ways along K, 64 x 64 floats per
  // block: its steps need blocks x 4096 floats past the header, unless the
  // attention needs more; steps that do not run it need none. Its tickets
  // count the output tiles (grid x * y) of the largest step.
  Manifest m = TinyCudaManifest();
  ManifestCudaLaunch& gemm = m.cuda.kernels[2].launches[1];
  gemm.grid = {"cdiv(L,64)", "3", "4"};
  gemm.split_floats = 64 * 64;
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  // 100 logits rows: 2 x 3 x 4 blocks; the attention (1 split at context
  // 100) needs only its 100 x 4 counters.
  EXPECT_EQ(StepScratchFloats(m.cuda, *parsed, Decode(100), 100), 4 + 2 * 3 * 4 * 4096);
  // 8 rows take the GEMV: the attention's counters alone.
  EXPECT_EQ(StepScratchFloats(m.cuda, *parsed, Decode(8), 100), 4 + 32);
  EXPECT_EQ(SplitGemmTickets(m.cuda, *parsed, {.tokens = 512, .logits = 640}), 10 * 3);
  gemm.split_floats = 0;
  EXPECT_EQ(SplitGemmTickets(m.cuda, *parsed, {.tokens = 512, .logits = 640}), 0);
  EXPECT_EQ(StepScratchFloats(m.cuda, *parsed, Decode(100), 100), 4 + 400);
}

TEST(CudaStepPlan, PrefillKernelNeedsNoPartials) {
  // A split launch for short queries and a flash-attention launch for long
  // ones (the CUDA emitter's pair): only steps that run the split launch
  // need partials.
  Manifest m = TinyCudaManifest();
  m.cuda.kernels[1].launches = {{"llmc_cuda_attn", "Q<=16", {"splits", "2", "T"}, 128},
                                {"llmc_cuda_attn_reduce", "Q<=16&&splits>1", {"T", "4", "1"}, 64},
                                {"llmc_cuda_attn_prefill", "Q>16", {"cdiv(Q,64)", "4", "S"}, 128}};
  EXPECT_EQ(Scratch(m, Decode(3), 1000), 4 + 12 + 3 * 4 * 4 * (16 + 2));
  LaunchVars prefill{.tokens = 2048, .logits = 1, .queries = 2048, .seqs = 1};
  EXPECT_EQ(Scratch(m, prefill, 4096), 4 + 2048 * 4);  // the counters only
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<SelectedLaunch> got;
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, prefill, 4096, 0, &got).ok());
  ASSERT_EQ(got.size(), 4u);  // embed, the prefill kernel, the GEMM head
  EXPECT_EQ(got[1].launch, 2u);
  EXPECT_EQ(got[1].grid, (std::array<unsigned, 3>{32, 4, 1}));
  // Three sequences, the longest query 17 tokens: still the prefill kernel.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 20, .logits = 3, .queries = 17, .seqs = 3},
                             100, 0, &got)
                  .ok());
  EXPECT_EQ(got[1].launch, 2u);
  EXPECT_EQ(got[1].grid, (std::array<unsigned, 3>{1, 4, 3}));
}

StepBatch TwoSequences() {
  StepBatch b;
  b.tokens = {5, 6, 7, 8, 9};
  b.positions = {0, 1, 2, 7, 8};
  b.query_starts = {0, 3, 5};
  b.context_lens = {3, 9};
  b.max_blocks = 2;
  b.block_tables = {4, -1, 0, 1};
  b.slot_mapping = {64, 65, 66, 23, 24};
  b.logits_rows = {2, 4};
  return b;
}

TEST(CudaStepPlan, StagingLayout) {
  StepBatch b = TwoSequences();
  StagingLayout l = PlanStaging(b);
  EXPECT_EQ(l.tokens, 0);
  EXPECT_EQ(l.positions, 16);
  EXPECT_EQ(l.query_starts, 32);
  EXPECT_EQ(l.context_lens, 48);
  EXPECT_EQ(l.slot_mapping, 64);
  EXPECT_EQ(l.logits_rows, 80);
  EXPECT_EQ(l.block_tables, 96);
  EXPECT_EQ(l.step_end, 112);
  EXPECT_EQ(l.total, 112);
  EXPECT_EQ(l.rows, 0);
  std::vector<int32_t> area(size_t(l.total), -7);
  PackStaging(b, l, area.data());
  auto at = [&](int64_t offset, size_t n) {
    return std::vector<int32_t>(area.begin() + offset, area.begin() + offset + int64_t(n));
  };
  EXPECT_EQ(at(l.tokens, 5), b.tokens);
  EXPECT_EQ(at(l.positions, 5), b.positions);
  EXPECT_EQ(at(l.query_starts, 3), b.query_starts);
  EXPECT_EQ(at(l.context_lens, 2), b.context_lens);
  EXPECT_EQ(at(l.block_tables, 4), b.block_tables);
  EXPECT_EQ(at(l.slot_mapping, 5), b.slot_mapping);
  EXPECT_EQ(at(l.logits_rows, 2), b.logits_rows);
  EXPECT_EQ(area[5], 0);  // padding zeroed
  EXPECT_EQ(area[111], 0);

  cuda::CUdeviceptr base = 0x7f0000001000;
  llmc_cuda_step_info info = MakeStepInfo(b, l, base, 16);
  EXPECT_EQ(info.num_tokens, 5);
  EXPECT_EQ(info.num_seqs, 2);
  EXPECT_EQ(info.num_logits, 2);
  EXPECT_EQ(info.max_blocks, 2);
  EXPECT_EQ(info.block_size, 16);
  auto addr = [](const int* p) { return uintptr_t(p); };
  EXPECT_EQ(addr(info.tokens), base);
  EXPECT_EQ(addr(info.positions), base + 16 * 4);
  EXPECT_EQ(addr(info.query_starts), base + 32 * 4);
  EXPECT_EQ(addr(info.context_lens), base + 48 * 4);
  EXPECT_EQ(addr(info.slot_mapping), base + 64 * 4);
  EXPECT_EQ(addr(info.logits_rows), base + 80 * 4);
  EXPECT_EQ(addr(info.block_tables), base + 96 * 4);
}

TEST(CudaStepPlan, StagingOfALongBlockTable) {
  StepBatch b;
  b.tokens = {1};
  b.positions = {0};
  b.query_starts = {0, 1};
  b.context_lens = {1};
  b.max_blocks = 100;
  b.block_tables.assign(100, 3);
  b.slot_mapping = {0};
  b.logits_rows = {0};
  StagingLayout l = PlanStaging(b);
  EXPECT_EQ(l.step_end, l.block_tables + 112);
  EXPECT_EQ(l.total % kStagingAlignInts, 0);
}

TEST(CudaStepPlan, StagingWithPaddedBlockTables) {
  StepBatch b = TwoSequences();  // 2 sequences, 2 columns
  StagingLayout l = PlanStaging(b, 4);
  EXPECT_EQ(l.block_columns, 4);
  EXPECT_EQ(l.step_end, l.block_tables + 16);
  std::vector<int32_t> area(size_t(l.total), -7);
  PackStaging(b, l, area.data());
  EXPECT_EQ(std::vector<int32_t>(area.begin() + l.block_tables, area.begin() + l.block_tables + 8),
            (std::vector<int32_t>{4, -1, -1, -1, 0, 1, -1, -1}));
  EXPECT_EQ(area[size_t(l.block_tables + 8)], 0);  // alignment padding
  llmc_cuda_step_info info = MakeStepInfo(b, l, 0x1000, 16);
  EXPECT_EQ(info.max_blocks, 4);
  // Fewer columns than the batch has: the batch's.
  EXPECT_EQ(PlanStaging(b, 1).block_columns, 2);
  EXPECT_EQ(PlanStaging(b).block_columns, 2);
}

TEST(CudaStepPlan, GraphSteps) {
  EXPECT_FALSE(IsGraphStep(TwoSequences()));  // a prefill
  StepBatch d;
  d.tokens = {1, 2};
  d.query_starts = {0, 1, 2};
  d.context_lens = {5, 9};
  EXPECT_TRUE(IsGraphStep(d));
  d.query_starts = {0, 2, 2};  // T = S, but one sequence has both tokens
  EXPECT_FALSE(IsGraphStep(d));
  StepBatch big;
  big.query_starts = {0};
  for (int i = 1; i <= kCudaGraphMaxTokens; ++i) {
    big.tokens.push_back(1);
    big.query_starts.push_back(i);
    big.context_lens.push_back(1);
  }
  EXPECT_EQ(big.num_tokens(), kCudaGraphMaxTokens);
  EXPECT_TRUE(IsGraphStep(big));
  big.tokens.push_back(1);
  big.query_starts.push_back(int32_t(kCudaGraphMaxTokens + 1));
  big.context_lens.push_back(1);
  EXPECT_FALSE(IsGraphStep(big));  // too many tokens

  using V = std::vector<int64_t>;
  EXPECT_EQ(CudaGraphBuckets(0), V{});
  EXPECT_EQ(CudaGraphBuckets(1), V{1});
  EXPECT_EQ(CudaGraphBuckets(3), (V{1, 2, 3}));
  EXPECT_EQ(CudaGraphBuckets(16), (V{1, 2, 4, 8, 16}));
  EXPECT_EQ(CudaGraphBuckets(40), (V{1, 2, 4, 8, 16, 24, 32, 40}));
  EXPECT_EQ(CudaGraphBuckets(512), (V{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  // Padding at most doubles a batch, and past 16 adds at most half of it.
  const V all = CudaGraphBuckets(kCudaGraphMaxTokens);
  for (size_t i = 2; i < all.size(); ++i) EXPECT_LE(all[i], all[i - 1] * 2) << all[i];
  for (size_t i = 5; i < all.size(); ++i) EXPECT_LE(all[i] * 2, all[i - 1] * 3) << all[i];
  EXPECT_EQ(BucketLaunchVars(24).tokens, 24);
  EXPECT_EQ(BucketLaunchVars(24).logits, 24);
  EXPECT_EQ(BucketLaunchVars(24).seqs, 24);
  EXPECT_EQ(BucketLaunchVars(24).queries, 1);

  StepBatch b = TwoSequences();
  llmc_cuda_step_info a = MakeStepInfo(b, PlanStaging(b), 0x1000, 16);
  llmc_cuda_step_info same = MakeStepInfo(b, PlanStaging(b), 0x1000, 16);
  EXPECT_TRUE(SameStepInfo(a, same));
  EXPECT_FALSE(SameStepInfo(a, MakeStepInfo(b, PlanStaging(b), 0x2000, 16)));
  EXPECT_FALSE(SameStepInfo(a, MakeStepInfo(b, PlanStaging(b, 4), 0x1000, 16)));
  std::vector<SelectedLaunch> x(2), y(2);
  EXPECT_TRUE(SameLaunches(x, y));
  y[1].grid[2] = 3;
  EXPECT_FALSE(SameLaunches(x, y));
  y.pop_back();
  EXPECT_FALSE(SameLaunches(x, y));
}

// A decode step of `contexts.size()` sequences, sequence i's blocks
// 10 i + j.
StepBatch DecodeOf(const std::vector<int32_t>& contexts, int32_t block_size = 16) {
  StepBatch b;
  b.query_starts = {0};
  for (int32_t c : contexts)
    b.max_blocks = std::max<int64_t>(b.max_blocks, (c + block_size - 1) / block_size);
  for (size_t i = 0; i < contexts.size(); ++i) {
    b.tokens.push_back(int32_t(100 + i));
    b.positions.push_back(contexts[i] - 1);
    b.query_starts.push_back(int32_t(i + 1));
    b.context_lens.push_back(contexts[i]);
    b.slot_mapping.push_back(int32_t(i * 1000 + contexts[i] - 1));
    b.logits_rows.push_back(int32_t(i));
    for (int64_t j = 0; j < b.max_blocks; ++j)
      b.block_tables.push_back(j * block_size < contexts[i] ? int32_t(10 * i + j) : -1);
  }
  return b;
}

TEST(CudaStepPlan, ADecodeStepPaddedToItsGraphsBucket) {
  // 3 sequences (2 and 3 blocks) padded to a bucket of 4, tables 8 wide.
  StepBatch b = DecodeOf({20, 40, 33});
  StagingLayout l = PlanStaging(b, 8, 4);
  EXPECT_EQ(l.rows, 4);
  EXPECT_EQ(l.block_columns, 8);
  EXPECT_EQ(l.step_end, l.block_tables + 32);
  std::vector<int32_t> area(size_t(l.total), -7);
  PackStaging(b, l, area.data());
  auto at = [&](int64_t offset, size_t n) {
    return std::vector<int32_t>(area.begin() + offset, area.begin() + offset + int64_t(n));
  };
  // The padding row: token 0 at position 0, query 3, no context, no slot,
  // its own logits row.
  EXPECT_EQ(at(l.tokens, 4), (std::vector<int32_t>{100, 101, 102, 0}));
  EXPECT_EQ(at(l.positions, 4), (std::vector<int32_t>{19, 39, 32, 0}));
  EXPECT_EQ(at(l.query_starts, 5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(at(l.context_lens, 4), (std::vector<int32_t>{20, 40, 33, 0}));
  EXPECT_EQ(at(l.slot_mapping, 4), (std::vector<int32_t>{19, 1039, 2032, -1}));
  EXPECT_EQ(at(l.logits_rows, 4), (std::vector<int32_t>{0, 1, 2, 3}));
  // The batch's 3 columns of its rows at a pitch of 8; the rest is what the
  // upload leaves out (UploadGraphStep), never written.
  EXPECT_EQ(at(l.block_tables, 24),
            (std::vector<int32_t>{0, 1, -1, -7, -7, -7, -7, -7, 10, 11, 12, -7, -7, -7, -7, -7,
                                  20, 21, 22, -7, -7, -7, -7, -7}));
  EXPECT_EQ(at(l.block_tables + 24, 8), std::vector<int32_t>(8, -7));
  llmc_cuda_step_info info = MakeStepInfo(b, l, 0x1000, 16);
  EXPECT_EQ(info.num_tokens, 4);
  EXPECT_EQ(info.num_seqs, 4);
  EXPECT_EQ(info.num_logits, 4);
  EXPECT_EQ(info.max_blocks, 8);

  // Every decode step of the bucket has the step info the graph was
  // captured with (an empty batch of the bucket), whatever its sequences.
  const llmc_cuda_step_info captured =
      MakeStepInfo(StepBatch{}, PlanStaging(StepBatch{}, 8, 4), 0x1000, 16);
  EXPECT_TRUE(SameStepInfo(info, captured));
  for (const std::vector<int32_t>& contexts :
       {std::vector<int32_t>{1}, {128}, {5, 6}, {100, 1, 7, 128}}) {
    StepBatch d = DecodeOf(contexts);
    d.picks.resize(contexts.size());  // the sampler's inputs come after
    EXPECT_TRUE(SameStepInfo(MakeStepInfo(d, PlanStaging(d, 8, 4), 0x1000, 16), captured))
        << contexts.size();
  }
  // Another bucket or width is another graph's.
  EXPECT_FALSE(SameStepInfo(MakeStepInfo(b, PlanStaging(b, 8, 8), 0x1000, 16), captured));
  EXPECT_FALSE(SameStepInfo(MakeStepInfo(b, PlanStaging(b, 16, 4), 0x1000, 16), captured));
  // A bucket smaller than the batch: the batch's own size.
  EXPECT_EQ(PlanStaging(b, 8, 2).rows, 3);
}

struct Expected {
  size_t step, launch;
  std::array<unsigned, 3> grid;
  unsigned block;
};

void ExpectLaunches(const std::vector<SelectedLaunch>& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i].step) << i;
    EXPECT_EQ(got[i].launch, want[i].launch) << i;
    EXPECT_EQ(got[i].grid, want[i].grid) << i;
    EXPECT_EQ(got[i].block, want[i].block) << i;
  }
}

TEST(CudaStepPlan, StepLaunchVars) {
  StepBatch b = TwoSequences();  // queries of 3 and 2 tokens
  LaunchVars v = StepLaunchVars(b);
  EXPECT_EQ(v.tokens, 5);
  EXPECT_EQ(v.logits, int64_t(b.logits_rows.size()));
  EXPECT_EQ(v.queries, 3);
  EXPECT_EQ(v.seqs, 2);
}

TEST(CudaStepPlan, SelectsLaunchesByWhen) {
  Manifest m = TinyCudaManifest();
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<SelectedLaunch> got;
  // Decode over 1000 keys: 4 splits, so each attention adds its reduction;
  // one logits row takes the GEMV.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 1, .logits = 1}, 1000, 0, &got).ok());
  ExpectLaunches(got, {{0, 0, {1, 1, 1}, 128},
                       {1, 0, {1, 2, 4}, 128},
                       {1, 1, {1, 4, 1}, 64},
                       {2, 0, {1, 2, 4}, 128},
                       {2, 1, {1, 4, 1}, 64},
                       {3, 0, {1, 16, 1}, 256}});
  EXPECT_EQ(got[1].splits, 4);
  EXPECT_EQ(got[0].splits, 1);
  // A prefill of 100 tokens with 100 logits rows: no splits, the GEMM.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 100, .logits = 100}, 100, 0, &got).ok());
  ExpectLaunches(got, {{0, 0, {100, 1, 1}, 128},
                       {1, 0, {100, 2, 1}, 128},
                       {2, 0, {100, 2, 1}, 128},
                       {3, 1, {2, 1, 1}, 128}});
  // The same chunk after 900 cached tokens: 4 splits and the reductions.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 100, .logits = 1}, 1000, 0, &got).ok());
  ExpectLaunches(got, {{0, 0, {100, 1, 1}, 128},
                       {1, 0, {100, 2, 4}, 128},
                       {1, 1, {100, 4, 1}, 64},
                       {2, 0, {100, 2, 4}, 128},
                       {2, 1, {100, 4, 1}, 64},
                       {3, 0, {1, 16, 1}, 256}});
  // The boundary of the GEMV: L = 8 and 9.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 8, .logits = 8}, 8, 0, &got).ok());
  EXPECT_EQ(got.back().launch, 0u);
  EXPECT_EQ(got.back().grid[0], 2u);
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 9, .logits = 9}, 9, 0, &got).ok());
  EXPECT_EQ(got.back().launch, 1u);
}

TEST(CudaStepPlan, AttentionSplitsStopOnceTheBlocksFillTheGpu) {
  Manifest m = TinyCudaManifest();
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<SelectedLaunch> got;
  // Decode over 1000 keys needs 4 splits at most; one token's attention
  // grid [T, 2, splits] has 2 blocks a split. 4 blocks fill: 2 splits, and
  // the reduction (splits>1) still runs.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 1, .logits = 1}, 1000, 4, &got).ok());
  ExpectLaunches(got, {{0, 0, {1, 1, 1}, 128},
                       {1, 0, {1, 2, 2}, 128},
                       {1, 1, {1, 4, 1}, 64},
                       {2, 0, {1, 2, 2}, 128},
                       {2, 1, {1, 4, 1}, 64},
                       {3, 0, {1, 16, 1}, 256}});
  EXPECT_EQ(got[1].splits, 2);
  EXPECT_EQ(got[2].splits, 2);  // the reduction's partials: the same count
  // 2 blocks fill: one split, so no reduction either.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 1, .logits = 1}, 1000, 2, &got).ok());
  ExpectLaunches(got, {{0, 0, {1, 1, 1}, 128},
                       {1, 0, {1, 2, 1}, 128},
                       {2, 0, {1, 2, 1}, 128},
                       {3, 0, {1, 16, 1}, 256}});
  // 100 tokens of a chunk, 528 blocks (132 SMs x 4): 200 a split, so 3.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 100, .logits = 1}, 1000, 528, &got).ok());
  EXPECT_EQ(got[1].grid, (std::array<unsigned, 3>{100, 2, 3}));
  // More blocks than splitting every 256 keys gives: the 4 splits, no more.
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 1, .logits = 1}, 1000, 1000, &got).ok());
  EXPECT_EQ(got[1].grid, (std::array<unsigned, 3>{1, 2, 4}));
  // A decode step of 3 sequences whose splits are cut as its bucket's (4
  // sequences, 8 blocks a split): 16 blocks fill at 2 splits, where its
  // own 6 blocks a split would take 3.
  const LaunchVars three{.tokens = 3, .logits = 3, .queries = 1, .seqs = 3};
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, three, 1000, 16, &got).ok());
  EXPECT_EQ(got[1].grid, (std::array<unsigned, 3>{3, 2, 3}));
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, three, 1000, 16, &got, CudaGraphBucketOf(3)).ok());
  EXPECT_EQ(got[1].grid, (std::array<unsigned, 3>{3, 2, 2}));
  EXPECT_EQ(CudaGraphBucketOf(3), 4);
  EXPECT_EQ(CudaGraphBucketOf(1), 1);
  EXPECT_EQ(CudaGraphBucketOf(17), 24);
  EXPECT_EQ(CudaGraphBucketOf(256), 256);
  EXPECT_EQ(CudaGraphBucketOf(257), 0);
}

TEST(CudaStepPlan, ACollectiveEntryIsOneLaunchInPlanOrder) {
  // A tensor-parallel plan: an all-reduce between the attention layers.
  Manifest m = TinyCudaManifest();
  ManifestStep reduce{-1, {0, 0}, {}, {}, "all_reduce_sum", "all_reduce_sum", 64, 64};
  m.cuda.steps.insert(m.cuda.steps.begin() + 2, reduce);
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<SelectedLaunch> got;
  ASSERT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 1, .logits = 1}, 10, 0, &got).ok());
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[1].step, 1u);
  EXPECT_EQ(got[2].step, 2u);
  EXPECT_EQ(got[2].kind, LaunchKind::kCollective);
  EXPECT_EQ(got[3].step, 3u);
  EXPECT_EQ(got[3].kind, LaunchKind::kKernel);
  // cuBLASLt's rewrite leaves it where it is.
  GemmPolicy lt;
  lt.mode = GemmPolicy::Mode::kCublasLt;
  std::vector<SelectedLaunch> rewritten = got;
  ApplyGemmPolicy(m.cuda, lt, {.tokens = 1, .logits = 1}, &rewritten);
  ASSERT_EQ(rewritten.size(), got.size());  // the tiny plan offers no GEMM
  EXPECT_EQ(rewritten[2].kind, LaunchKind::kCollective);
  EXPECT_TRUE(SameLaunches(rewritten, got));
}

TEST(CudaStepPlan, GridOutsideWhatCudaLaunches) {
  Manifest m = TinyCudaManifest();
  m.cuda.kernels[0].launches[0].grid = {"1", "T", "1"};
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_TRUE(parsed.ok());
  std::vector<SelectedLaunch> got;
  EXPECT_TRUE(SelectLaunches(m.cuda, *parsed, {.tokens = 65535, .logits = 1}, 65535, 0, &got).ok());
  absl::Status st = SelectLaunches(m.cuda, *parsed, {.tokens = 65536, .logits = 1}, 65536, 0, &got);
  EXPECT_EQ(st.message(),
            "CUDA launch llmc_cuda_embed of embed (step 0): grid dimension y = T is 65536, outside "
            "1 to 65535 (T 65536, L 1, Q 0, S 0, splits 1)");
}

TEST(CudaStepPlan, ParseRejectsWhatValidationWould) {
  Manifest m = TinyCudaManifest();
  m.cuda.kernels[2].launches[1].when = "L>>8";
  auto parsed = ParseCudaLaunches(m.cuda);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "cuda.kernels[2].launches[1].when: 'L>>8' is not a condition: <= or > must be followed "
            "by a non-negative integer");
}

TEST(CudaStepPlan, PacksArgumentsInBindingOrder) {
  Manifest m = TinyCudaManifest();
  CudaBindings bind;
  bind.buffers = {0x1000, 0x2000};
  bind.weights = 0x100000;
  bind.caches = {0xa00, 0xb00, 0xc00, 0xd00};
  bind.scratch = 0x5000;
  bind.tickets = 0x6000;
  auto ptr = [](const void* p) { return uintptr_t(p); };

  auto head = PackArgs(m, m.cuda.steps[3], bind);  // lm_head: buffers {0, 1}, weights {1..4}
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(ptr(head->buffers[0]), 0x1000u);
  EXPECT_EQ(ptr(head->buffers[1]), 0x2000u);
  for (int i = 2; i < LLMC_CUDA_MAX_BUFFERS; ++i) EXPECT_EQ(head->buffers[i], nullptr);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(ptr(head->weights[i]), 0x100000u + m.weights.tensors[size_t(i + 1)].offset) << i;
  EXPECT_EQ(head->weights[4], nullptr);
  EXPECT_EQ(head->caches[0], nullptr);
  EXPECT_EQ(head->caches[1], nullptr);
  EXPECT_EQ(ptr(head->scratch), 0x5000u);
  EXPECT_EQ(ptr(head->tickets), 0x6000u);

  auto attn1 = PackArgs(m, m.cuda.steps[2], bind);  // layer 1's K and V
  ASSERT_TRUE(attn1.ok());
  EXPECT_EQ(ptr(attn1->caches[0]), 0xc00u);
  EXPECT_EQ(ptr(attn1->caches[1]), 0xd00u);
  EXPECT_EQ(attn1->weights[0], nullptr);

  bind.buffers[1] = 0;
  auto missing = PackArgs(m, m.cuda.steps[3], bind);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "CUDA step 'lm_head': buffer 1 has no device memory");
  bind.caches.resize(2);
  EXPECT_FALSE(PackArgs(m, m.cuda.steps[2], bind).ok());
}

}  // namespace
}  // namespace llmc
