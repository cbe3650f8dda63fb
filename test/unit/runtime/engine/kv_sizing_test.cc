// KV-cache sizing (exec/kv_sizing.h): the flags' byte sizes and the rule
// that turns blocks, bytes or free device memory into a block count.
#include "llmc/runtime/exec/kv_sizing.h"

#include <gtest/gtest.h>

namespace llmc {
namespace {

TEST(KvSizingTest, ParsesByteSizes) {
  EXPECT_EQ(ParseByteSize("kv-cache-size", "2GiB").value(), int64_t(2) << 30);
  EXPECT_EQ(ParseByteSize("kv-cache-size", "512MiB").value(), int64_t(512) << 20);
  EXPECT_EQ(ParseByteSize("kv-cache-size", "1.5g").value(), int64_t(3) << 29);
  EXPECT_EQ(ParseByteSize("kv-cache-size", " 1000 ").value(), 1000);
  EXPECT_EQ(ParseByteSize("kv-cache-size", "64k").value(), 65536);
  for (const char* bad : {"", "GiB", "-1G", "2 parsecs", "0", "1e99G", "0.1"}) {
    auto r = ParseByteSize("kv-cache-size", bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--kv-cache-size"), std::string::npos);
    }
  }
}

TEST(KvSizingTest, BlocksFromBlocksBytesFreeMemoryOrContext) {
  const int64_t per_block = KvBytesPerBlock(/*layers=*/30, /*kv_heads=*/3, /*head_dim=*/64,
                                            /*block_size=*/16, /*element_bytes=*/4);
  EXPECT_EQ(per_block, 2 * 30 * 3 * 64 * 16 * 4);
  RunnerOptions o;
  o.block_size = 16;
  // Neither: one max_position sequence plus a block.
  EXPECT_EQ(KvCacheBlocks(o, per_block, 8192, -1).value(), 8192 / 16 + 1);
  o.kv_memory_fraction = 0.5;
  EXPECT_EQ(KvCacheBlocks(o, per_block, 8192, -1).value(), 8192 / 16 + 1) << "host: no fraction";
  EXPECT_EQ(KvCacheBlocks(o, per_block, 8192, 100 * per_block).value(), 50);
  o.kv_cache_bytes = 10 * per_block + 5;
  EXPECT_EQ(KvCacheBlocks(o, per_block, 8192, 100 * per_block).value(), 10);
  o.num_blocks = 7;
  EXPECT_EQ(KvCacheBlocks(o, per_block, 8192, 100 * per_block).value(), 7);
  o.num_blocks = 0;
  o.kv_cache_bytes = per_block - 1;
  EXPECT_FALSE(KvCacheBlocks(o, per_block, 8192, -1).ok());
  o.kv_cache_bytes = 0;
  EXPECT_FALSE(KvCacheBlocks(o, per_block, 8192, per_block / 4).ok())
      << "free memory holds no block";
  o.num_blocks = int64_t(1) << 30;
  EXPECT_FALSE(KvCacheBlocks(o, per_block, 8192, -1).ok()) << "asked for more than @step addresses";
  o.num_blocks = 0;
  EXPECT_EQ(KvCacheBlocks(o, 64, 8192, int64_t(1) << 40).value(), kMaxDefaultKvBlocks)
      << "a default fraction of a huge GPU is capped, not refused";
}

}  // namespace
}  // namespace llmc
