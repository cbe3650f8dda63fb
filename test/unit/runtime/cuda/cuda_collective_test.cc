// The CUDA plan's collectives as pure functions (cuda_collective.h): what a
// tensor-parallel plan's collective entries move and in which types, the
// errors naming the step, and the all-gather's layout: the 2D copies per
// rank, against rows built by hand.
#include "llmc/runtime/exec/cuda_collective.h"

#include <cstring>
#include <vector>

#include "core/artifact/artifact_test_util.h"
#include "gtest/gtest.h"

namespace llmc {
namespace {

using test::ExpectError;

// The tail of a TP=2 plan of a 301-word vocabulary: a hidden buffer the
// all-reduce sums in place, the LM head's slice of 151 columns, and the
// gather into the logits (buffer 2). Activations `act`; the slice and the
// logits, rows "logits", are f32 whatever `act` is.
Manifest TpManifest(const std::string& act = "bf16") {
  Manifest m;
  m.cuda.activation_dtype = act;
  m.buffers = {{"hidden", "tokens", 512, "f32", 128},
               {"slice", "logits", 604, "f32", 151},
               {"logits", "logits", 1204, "f32", 301}};
  m.logits_buffer = 2;
  m.mesh.tp = 2;
  ManifestStep reduce{-1, {0, 0}, {}, {}, "all_reduce_sum", "all_reduce_sum", 128, 128};
  ManifestStep head{0, {0, 1}, {0}, {}, "lm_head"};
  ManifestStep gather{-1, {1, 2}, {}, {}, "all_gather", "all_gather", 151, 301};
  m.cuda.steps = {reduce, head, gather};
  return m;
}

TEST(CudaCollectiveTest, AllReduceSumsTheActivationsInPlace) {
  auto c = MakeCudaCollective(TpManifest(), 0, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, CudaCollective::Kind::kAllReduceSum);
  EXPECT_EQ(c->in_buffer, 0u);
  EXPECT_EQ(c->out_buffer, 0u);
  EXPECT_EQ(c->in_elem, CudaElem::kBF16);
  EXPECT_EQ(c->out_elem, CudaElem::kBF16);
  EXPECT_FALSE(c->logits_rows);
  EXPECT_EQ(CollectiveElements(*c, 5), 5 * 128);
  EXPECT_EQ(c->Describe(), "CUDA step 0 (all_reduce_sum of 128 bf16 per token row)");
}

TEST(CudaCollectiveTest, TheLogitsAreGatheredInF32WhateverTheActivations) {
  for (const char* act : {"bf16", "f16", "f32"}) {
    auto c = MakeCudaCollective(TpManifest(act), 2, 2);
    ASSERT_TRUE(c.ok()) << act << ": " << c.status();
    EXPECT_EQ(c->kind, CudaCollective::Kind::kAllGather);
    EXPECT_EQ(c->in_elem, CudaElem::kF32) << act;
    EXPECT_EQ(c->out_elem, CudaElem::kF32) << act;
    EXPECT_TRUE(c->logits_rows);
    EXPECT_EQ(CollectiveElements(*c, 3), 3 * 151);
    EXPECT_EQ(GatherScratchBytes(*c, 3, 2), 2 * 3 * 151 * 4);
    EXPECT_EQ(c->Describe(), "CUDA step 2 (all_gather of 151 f32 per logits row)");
  }
}

TEST(CudaCollectiveTest, TheGatherIsLaidOutOnTheDevice) {
  auto c = MakeCudaCollective(TpManifest(), 2, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  // Rank 0's 151 columns, then rank 1's 150 (its last column is padding).
  std::vector<GatherCopy> copies = PlanGatherCopies(*c, 3, 2);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src_offset, 0);
  EXPECT_EQ(copies[0].src_pitch, 151 * 4);
  EXPECT_EQ(copies[0].dst_offset, 0);
  EXPECT_EQ(copies[0].dst_pitch, 301 * 4);
  EXPECT_EQ(copies[0].width_bytes, 151 * 4);
  EXPECT_EQ(copies[0].height, 3);
  EXPECT_EQ(copies[1].src_offset, 3 * 151 * 4);
  EXPECT_EQ(copies[1].dst_offset, 151 * 4);
  EXPECT_EQ(copies[1].width_bytes, 150 * 4);
  EXPECT_TRUE(PlanGatherCopies(*c, 0, 2).empty());
}

TEST(CudaCollectiveTest, TheCopiesGiveTheRows) {
  // Four ranks of 3 columns making rows of 10 (two padding columns cut).
  Manifest m = TpManifest();
  m.mesh.tp = 4;
  m.buffers[1].row_elems = 3;
  m.buffers[2].row_elems = 10;
  m.cuda.steps[2].in_row_elems = 3;
  m.cuda.steps[2].out_row_elems = 10;
  auto c = MakeCudaCollective(m, 2, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  const int64_t rows = 2, ranks = 4, piece = 3;
  std::vector<float> gathered(size_t(ranks * rows * piece));
  for (int64_t k = 0; k < ranks; ++k)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < piece; ++j)  // row r, column k * piece + j
        gathered[size_t((k * rows + r) * piece + j)] = float(100 * r + k * piece + j);
  // The device's way: the 2D copies, done on the host.
  std::vector<float> copied(size_t(rows * 10), -1.0f);
  for (const GatherCopy& g : PlanGatherCopies(*c, rows, ranks))
    for (int64_t r = 0; r < g.height; ++r)
      std::memcpy(reinterpret_cast<char*>(copied.data()) + g.dst_offset + r * g.dst_pitch,
                  reinterpret_cast<const char*>(gathered.data()) + g.src_offset + r * g.src_pitch,
                  size_t(g.width_bytes));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t col = 0; col < 10; ++col)
      EXPECT_EQ(copied[size_t(r * 10 + col)], float(100 * r + col)) << r << "," << col;
}

TEST(CudaCollectiveTest, AGatherOfTokenRowsKeepsTheActivationType) {
  // The rows "tokens" of both buffers: bf16 pieces into bf16 rows.
  Manifest m = TpManifest();
  m.buffers[1].rows = "tokens";
  m.buffers[2].rows = "tokens";
  auto c = MakeCudaCollective(m, 2, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->in_elem, CudaElem::kBF16);
  EXPECT_EQ(c->out_elem, CudaElem::kBF16);
  EXPECT_FALSE(c->logits_rows);
  EXPECT_EQ(PlanGatherCopies(*c, 3, 2)[1].dst_offset, 151 * 2);
}

TEST(CudaCollectiveTest, PlansTheExecutorCannotRunNameTheStep) {
  auto edit = [](auto change) {
    Manifest m = TpManifest();
    change(m);
    return m;
  };
  ExpectError(
      MakeCudaCollective(edit([](Manifest& m) { m.cuda.steps[0].collective = "broadcast"; }), 0, 2),
      {"CUDA step 0 (broadcast): not a collective the CUDA executor knows"});
  ExpectError(MakeCudaCollective(edit([](Manifest& m) { m.cuda.steps[0].buffers = {0}; }), 0, 2),
              {"CUDA step 0 (all_reduce_sum): needs an input and an output buffer"});
  ExpectError(MakeCudaCollective(edit([](Manifest& m) { m.cuda.steps[0].weights = {0}; }), 0, 2),
              {"binds no weights or caches"});
  ExpectError(
      MakeCudaCollective(edit([](Manifest& m) { m.cuda.steps[0].in_row_elems = 129; }), 0, 2),
      {"row widths 129 -> 128 do not fit its buffers (128 and 128 elements)"});
  ExpectError(
      MakeCudaCollective(edit([](Manifest& m) { m.cuda.steps[0].out_row_elems = 64; }), 0, 2),
      {"an all-reduce keeps the row width"});
  // Token rows (bf16) into logits rows (f32): NCCL does not convert.
  ExpectError(MakeCudaCollective(edit([](Manifest& m) {
                                   m.cuda.steps[0].buffers = {0, 2};
                                 }),
                                 0, 2),
              {"CUDA step 0 (all_reduce_sum): an all-reduce keeps the element type, not bf16 -> "
               "f32 (buffer 'hidden' of tokens rows to 'logits' of logits rows"});
  ExpectError(MakeCudaCollective(TpManifest(), 2, 3),
              {"CUDA step 2 (all_gather): 3 ranks of 151 columns do not make rows of 301"});
  ExpectError(MakeCudaCollective(edit([](Manifest& m) { m.buffers[1].rows = "tokens"; }), 2, 2),
              {"CUDA step 2 (all_gather): an all-gather keeps the element type, not bf16 -> f32 "
               "(buffer 'slice' of tokens rows to 'logits' of logits rows; on the device logits "
               "rows are f32, other rows the activation type)"});
  // With f32 activations the types agree; the kinds of rows still must.
  ExpectError(MakeCudaCollective(edit([](Manifest& m) {
                                   m.cuda.activation_dtype = "f32";
                                   m.buffers[1].rows = "tokens";
                                 }),
                                 2, 2),
              {"CUDA step 2 (all_gather): its input and output rows differ in kind"});
  ExpectError(MakeCudaCollective(edit([](Manifest& m) { m.cuda.activation_dtype = "i8"; }), 0, 2),
              {"activation type 'i8' is not bf16, f16 or f32"});
}

// Stage 1 of a TP=2 x PP=2 plan: the hidden state received from stage 0
// into buffer 0, in the activation type.
Manifest StageManifest(const std::string& act = "f16") {
  Manifest m;
  m.cuda.activation_dtype = act;
  m.buffers = {{"hidden", "tokens", 512, "f32", 128}, {"logits", "logits", 1204, "f32", 301}};
  m.logits_buffer = 1;
  m.mesh.tp = 2;
  m.mesh.pp = 2;
  ManifestStep recv{-1, {0}, {}, {}, "recv", "recv", 0, 128};
  recv.peer = 0;
  m.cuda.steps = {recv};
  return m;
}

TEST(CudaTransferTest, ReceivesTokenRowsInTheActivationTypeFromItsTpPeer) {
  auto t = MakeCudaTransfer(StageManifest(), 0, /*tp_rank=*/1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->send);
  EXPECT_EQ(t->buffer, 0u);
  EXPECT_EQ(t->row_bytes, 128 * 2);
  EXPECT_EQ(t->peer_rank, 1);  // stage 0's TP rank 1 is world rank 0 * 2 + 1
  EXPECT_EQ(t->Describe(), "CUDA step 0 (recv of 256 bytes per token row from rank 1)");
  auto f32 = MakeCudaTransfer(StageManifest("f32"), 0, 0);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(f32->row_bytes, 128 * 4);
  EXPECT_EQ(f32->peer_rank, 0);
}

TEST(CudaTransferTest, RefusesWhatIsNoPipelineTransfer) {
  auto edit = [](auto change) {
    Manifest m = StageManifest();
    change(m);
    return m;
  };
  ExpectError(MakeCudaTransfer(edit([](Manifest& m) { m.mesh.pp = 1; }), 0, 0),
              {"CUDA step 0 (recv)", "without stages"});
  ExpectError(MakeCudaTransfer(edit([](Manifest& m) {
                                 m.cuda.steps[0].buffers = {0, 1};
                               }),
                               0, 0),
              {"binds one buffer"});
  ExpectError(MakeCudaTransfer(edit([](Manifest& m) { m.cuda.steps[0].buffers = {1}; }), 0, 0),
              {"buffer 'logits' is not of token rows"});
  ExpectError(
      MakeCudaTransfer(edit([](Manifest& m) { m.cuda.steps[0].out_row_elems = 129; }), 0, 0),
      {"rows of 129 elements do not fit buffer 'hidden' (128)"});
  ExpectError(
      MakeCudaTransfer(edit([](Manifest& m) { m.cuda.steps[0].collective = "scatter"; }), 0, 0),
      {"not a pipeline transfer"});
}

}  // namespace
}  // namespace llmc
