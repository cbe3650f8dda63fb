// SplitStepBatch (pipeline_runner.h): the micro-batches of a step, run in
// order, must ask for exactly what the whole batch asks for: the same
// tokens at the same positions and cache slots, each sequence's context
// ending at its last token so far, and every logits row once.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "llmc/runtime/exec/pipeline_runner.h"

namespace llmc {
namespace {

// A ragged batch as the engine builds it: `seqs` sequences with random
// chunk lengths (prefill chunks and single decode tokens) and contexts,
// logits rows for a random subset (at least one).
StepBatch RandomBatch(std::mt19937& rng, int seqs) {
  StepBatch b;
  b.max_blocks = 8;
  b.query_starts.push_back(0);
  for (int s = 0; s < seqs; ++s) {
    const int n = rng() % 3 == 0 ? 1 : 1 + int(rng() % 90);
    const int past = int(rng() % 20);
    for (int i = 0; i < n; ++i) {
      b.tokens.push_back(int32_t(rng() % 300));
      b.positions.push_back(past + i);
      b.slot_mapping.push_back(s * 128 + past + i);
    }
    b.query_starts.push_back(int32_t(b.tokens.size()));
    b.context_lens.push_back(past + n);
    for (int k = 0; k < b.max_blocks; ++k) b.block_tables.push_back(s * 8 + k);
    if (rng() % 2 == 0) b.logits_rows.push_back(b.query_starts.back() - 1);
  }
  if (b.logits_rows.empty()) b.logits_rows.push_back(int32_t(b.tokens.size()) - 1);
  return b;
}

TEST(PipelineSplit, MicroBatchesComputeWhatTheBatchDoes) {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 200; ++trial) {
    const StepBatch b = RandomBatch(rng, 1 + int(rng() % 6));
    const int64_t parts = 1 + int64_t(rng() % 4);
    std::vector<MicroBatch> split = SplitStepBatch(b, parts);
    ASSERT_EQ(int64_t(split.size()), std::min(parts, b.num_tokens()));
    std::vector<int32_t> tokens, positions, slots;
    std::vector<int> logits_seen(b.logits_rows.size());
    for (const MicroBatch& mb : split) {
      const StepBatch& m = mb.batch;
      ASSERT_TRUE(ValidateStepBatch(m, {512, 64, 1024, 16, 300}).ok())
          << ValidateStepBatch(m, {512, 64, 1024, 16, 300});
      tokens.insert(tokens.end(), m.tokens.begin(), m.tokens.end());
      positions.insert(positions.end(), m.positions.begin(), m.positions.end());
      slots.insert(slots.end(), m.slot_mapping.begin(), m.slot_mapping.end());
      // Each part's sequence ends its context at its last token here.
      for (int64_t s = 0; s < m.num_seqs(); ++s)
        EXPECT_EQ(m.context_lens[size_t(s)],
                  m.positions[size_t(m.query_starts[size_t(s) + 1]) - 1] + 1);
      ASSERT_EQ(mb.logits_index.size(), m.logits_rows.size());
      for (size_t i = 0; i < mb.logits_index.size(); ++i) {
        const int64_t at = mb.logits_index[i];
        if (at < 0) continue;  // the row a part without one computes anyway
        ++logits_seen[size_t(at)];
        // The same token: its row in the part, offset by the tokens before.
        const int64_t before = int64_t(tokens.size()) - m.num_tokens();
        EXPECT_EQ(before + m.logits_rows[i], b.logits_rows[size_t(at)]);
      }
    }
    EXPECT_EQ(tokens, b.tokens);
    EXPECT_EQ(positions, b.positions);
    EXPECT_EQ(slots, b.slot_mapping);
    for (int seen : logits_seen) EXPECT_EQ(seen, 1);
  }
}

TEST(PipelineSplit, SmallStepsStayWhole) {
  EXPECT_EQ(MicroBatchesFor(8, 2), 1);  // a decode step of 8 sequences
  EXPECT_EQ(MicroBatchesFor(63, 2), 1);
  EXPECT_EQ(MicroBatchesFor(64, 2), 2);
  EXPECT_EQ(MicroBatchesFor(4096, 4), 4);  // at most one per stage
  EXPECT_EQ(MicroBatchesFor(100, 1), 1);
}

}  // namespace
}  // namespace llmc
