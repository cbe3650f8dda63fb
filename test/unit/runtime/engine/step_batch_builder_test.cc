// StepBatchBuilder's picks: each names its logits row, and picks that mask
// the same ids share one range of masked_ids; the batch they make passes
// ValidateStepBatch and PickOnHost honours the masks.
#include <gtest/gtest.h>

#include <vector>

#include "llmc/runtime/exec/step_batch.h"
#include "llmc/runtime/exec/step_runner.h"

namespace llmc {
namespace {

// A runner picks greedy tokens and draws with top-k up to kMaxPickTopK or
// none (top-p alone included); a top-k between that and the vocabulary is
// sampled on the host.
TEST(StepBatchBuilderTest, PickSupportsTopKUpToTheDeviceLimitOrNone) {
  EXPECT_TRUE(PickSupports(0.0f, 5000, 128256));   // greedy ignores top-k
  EXPECT_TRUE(PickSupports(0.7f, 0, 128256));      // top-p alone
  EXPECT_TRUE(PickSupports(0.7f, kMaxPickTopK, 128256));
  EXPECT_FALSE(PickSupports(0.7f, kMaxPickTopK + 1, 128256));
  EXPECT_TRUE(PickSupports(0.7f, 128256, 128256));  // the whole vocabulary: none
}

TEST(StepBatchBuilderTest, PicksShareTheRangeOfEqualMasks) {
  StepBatchBuilder b;
  b.Clear();
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> eos = {1, 2};
  const std::vector<int32_t> other = {3};
  for (int32_t s = 0; s < 5; ++s) {
    const std::vector<int32_t> token = {4 + s}, slot = {s};
    b.AddLogitsRow(b.AddSequence(token, s, slot, table));
    if (s == 0) b.PickLastRow(eos);
    if (s == 1) b.PickLastRow({});
    if (s == 2) b.PickLastRow(eos);    // the same ids as the last range: shared
    if (s == 3) b.PickLastRow(other);  // new ids: a new range
    // s == 4: left as logits
  }
  const StepBatch& batch = b.Finish();
  ASSERT_EQ(batch.picks.size(), 4u);
  EXPECT_EQ(batch.masked_ids, (std::vector<int32_t>{1, 2, 3}));
  const int32_t want[4][3] = {{0, 0, 2}, {1, 0, 0}, {2, 0, 2}, {3, 2, 1}};
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(batch.picks[j].row, want[j][0]) << j;
    EXPECT_EQ(batch.picks[j].mask_begin, want[j][1]) << j;
    EXPECT_EQ(batch.picks[j].mask_count, want[j][2]) << j;
  }
  const absl::Status valid = ValidateStepBatch(batch, {16, 8, 4, 16, 16});
  EXPECT_TRUE(valid.ok()) << valid;

  // Every row's best is id 1, then 2, then 3, then 0: a pick lands on the
  // best id its mask leaves.
  std::vector<float> logits(5 * 16, 0.f);
  for (int r = 0; r < 5; ++r) {
    float* row = logits.data() + r * 16;
    row[1] = 9, row[2] = 8, row[3] = 7, row[0] = 6;
  }
  std::vector<int32_t> tokens;
  std::vector<PickLogprob> logprobs;
  PickOnHost(batch, logits.data(), 16, &tokens, &logprobs);
  EXPECT_TRUE(logprobs.empty());
  EXPECT_EQ(tokens, (std::vector<int32_t>{3, 1, 3, 1}));

  b.Clear();
  EXPECT_TRUE(b.batch().picks.empty());
  EXPECT_TRUE(b.batch().masked_ids.empty());
}

}  // namespace
}  // namespace llmc
