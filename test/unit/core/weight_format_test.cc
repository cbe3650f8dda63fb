#include "llmc/core/weight_format.h"

#include <gtest/gtest.h>

namespace llmc {
namespace {

TEST(WeightFormat, GgufBlockSizesMatchGgml) {
  // Bytes per block from ggml's block structs: d (f16) + packed quants (+ m/min).
  struct {
    const char* name;
    int64_t elems, bytes;
    int ggml;
  } expected[] = {
      {"q8_0", 32, 2 + 32, 8},   {"q4_0", 32, 2 + 16, 2},
      {"q4_1", 32, 2 + 2 + 16, 3}, {"q5_0", 32, 2 + 4 + 16, 6},
      {"q5_1", 32, 2 + 2 + 4 + 16, 7},
      {"q2_k", 256, 16 + 64 + 2 + 2, 10}, {"q3_k", 256, 32 + 64 + 12 + 2, 11},
      {"q4_k", 256, 2 + 2 + 12 + 128, 12}, {"q5_k", 256, 2 + 2 + 12 + 32 + 128, 13},
      {"q6_k", 256, 128 + 64 + 16 + 2, 14},
  };
  for (const auto& e : expected) {
    auto info = LookupWeightFormat(e.name);
    ASSERT_TRUE(info) << e.name;
    EXPECT_EQ(info->block_elems, e.elems) << e.name;
    EXPECT_EQ(info->block_bytes, e.bytes) << e.name;
    auto by_id = LookupGgmlType(e.ggml);
    ASSERT_TRUE(by_id) << e.name;
    EXPECT_EQ(by_id->name, e.name);
  }
}

TEST(WeightFormat, ByteSizes) {
  EXPECT_EQ(WeightByteSize("f32", 576 * 576), 576 * 576 * 4);
  EXPECT_EQ(WeightByteSize("bf16", 10), 20);
  EXPECT_EQ(WeightByteSize("q4_1", 576 * 576), 576 * 576 / 32 * 20);
  EXPECT_EQ(WeightByteSize("i8", 256, 128), 2 * (128 + 2));
  EXPECT_EQ(WeightByteSize("i4", 256, 64), 4 * (32 + 4));
  // Not whole blocks, unknown format, missing group.
  EXPECT_EQ(WeightByteSize("q4_0", 33), -1);
  EXPECT_EQ(WeightByteSize("q9_9", 32), -1);
  EXPECT_EQ(WeightByteSize("i4", 256), -1);
  EXPECT_FALSE(LookupGgmlType(-1));
  EXPECT_FALSE(LookupGgmlType(9));  // Q8_1: not a storage format llmc reads
}

}  // namespace
}  // namespace llmc
