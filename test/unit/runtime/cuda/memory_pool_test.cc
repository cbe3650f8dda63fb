// DeviceMemoryPool's bookkeeping over a fake slab allocator (addresses only,
// no memory).
#include "llmc/runtime/cuda/memory_pool.h"

#include <set>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace llmc::cuda {
namespace {

struct FakeSlabs {
  CUdeviceptr next = 0x10000000;
  std::set<CUdeviceptr> live;
  int allocs = 0, frees = 0;
  int fail_after = -1;  // slab allocations that succeed before OOM (-1: never fail)
  DeviceMemoryPool::SlabAlloc Alloc() {
    return [this](size_t bytes) -> absl::StatusOr<CUdeviceptr> {
      if (fail_after == 0) return absl::ResourceExhaustedError("cuMemAlloc_v2 failed: OOM");
      if (fail_after > 0) --fail_after;
      CUdeviceptr p = next;
      next += (bytes + 0xfffff) & ~CUdeviceptr(0xfffff);
      next += 0x100000;  // a gap: slabs are never adjacent
      live.insert(p);
      ++allocs;
      return p;
    };
  }
  DeviceMemoryPool::SlabFree Free() {
    return [this](CUdeviceptr p) {
      live.erase(p);
      ++frees;
      return absl::OkStatus();
    };
  }
};

TEST(DeviceMemoryPoolTest, AlignsAndCarvesOneSlab) {
  FakeSlabs s;
  DeviceMemoryPool pool(s.Alloc(), s.Free(), 1 << 20, 256);
  auto a = pool.Allocate(1);
  auto b = pool.Allocate(300);
  auto c = pool.Allocate(0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a % 256, 0u);
  EXPECT_EQ(*b, *a + 256);
  EXPECT_EQ(*c, *b + 512);  // 300 rounds up to 512; 0 bytes still gets a block
  PoolStats st = pool.stats();
  EXPECT_EQ(st.slabs, 1);
  EXPECT_EQ(s.allocs, 1);
  EXPECT_EQ(st.reserved_bytes, 1 << 20);
  EXPECT_EQ(st.in_use_bytes, 256 + 512 + 256);
  EXPECT_EQ(st.live_blocks, 3);
  EXPECT_EQ(st.free_blocks, 1);
  EXPECT_EQ(st.allocations, 3);
}

TEST(DeviceMemoryPoolTest, FreedNeighboursCoalesce) {
  FakeSlabs s;
  DeviceMemoryPool pool(s.Alloc(), s.Free(), 4096, 256);
  auto a = *pool.Allocate(1024), b = *pool.Allocate(1024), c = *pool.Allocate(1024);
  ASSERT_TRUE(pool.Free(b).ok());
  EXPECT_EQ(pool.stats().free_blocks, 2);  // b, and the slab's tail
  ASSERT_TRUE(pool.Free(a).ok());
  EXPECT_EQ(pool.stats().free_blocks, 2);  // a+b, tail
  // a+b is one block again: 2048 bytes fit at a without a new slab.
  auto ab = pool.Allocate(2048);
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(*ab, a);
  EXPECT_EQ(s.allocs, 1);
  ASSERT_TRUE(pool.Free(c).ok());
  ASSERT_TRUE(pool.Free(*ab).ok());
  EXPECT_EQ(pool.stats().free_blocks, 1);  // the whole slab
  EXPECT_EQ(pool.stats().in_use_bytes, 0);
  EXPECT_EQ(pool.stats().peak_in_use_bytes, 3072);
}

TEST(DeviceMemoryPoolTest, BestFitPicksTheSmallestHole) {
  FakeSlabs s;
  DeviceMemoryPool pool(s.Alloc(), s.Free(), 8192, 256);
  auto a = *pool.Allocate(2048);
  auto gap1 = *pool.Allocate(256);
  auto b = *pool.Allocate(512);
  auto gap2 = *pool.Allocate(256);
  (void)gap1;
  (void)gap2;
  ASSERT_TRUE(pool.Free(a).ok());
  ASSERT_TRUE(pool.Free(b).ok());
  auto p = pool.Allocate(400);  // fits both holes; the 512 one is the best fit
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, b);
}

TEST(DeviceMemoryPoolTest, LargeRequestsGetTheirOwnSlab) {
  FakeSlabs s;
  DeviceMemoryPool pool(s.Alloc(), s.Free(), 4096, 256);
  auto small = pool.Allocate(100);
  auto big = pool.Allocate(10000);
  ASSERT_TRUE(small.ok() && big.ok());
  EXPECT_EQ(s.allocs, 2);
  EXPECT_EQ(pool.stats().reserved_bytes, 4096 + 10240);
}

TEST(DeviceMemoryPoolTest, DoubleFreeAndForeignPointersAreErrors) {
  FakeSlabs s;
  DeviceMemoryPool pool(s.Alloc(), s.Free(), 4096, 256);
  auto a = *pool.Allocate(100);
  ASSERT_TRUE(pool.Free(a).ok());
  absl::Status again = pool.Free(a);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(again.message(), "not a live block of this pool")) << again;
  EXPECT_FALSE(pool.Free(12345).ok());
}

TEST(DeviceMemoryPoolTest, TrimReturnsEmptySlabsAndDestructorTheRest) {
  FakeSlabs s;
  {
    DeviceMemoryPool pool(s.Alloc(), s.Free(), 4096, 256);
    auto a = *pool.Allocate(4096);
    auto b = *pool.Allocate(4096);
    ASSERT_TRUE(pool.Free(a).ok());
    ASSERT_TRUE(pool.Trim().ok());
    EXPECT_EQ(s.frees, 1);
    EXPECT_EQ(pool.stats().slabs, 1);
    EXPECT_EQ(pool.stats().reserved_bytes, 4096);
    EXPECT_EQ(pool.stats().free_blocks, 0);
    (void)b;
  }
  EXPECT_EQ(s.frees, 2);
  EXPECT_TRUE(s.live.empty());
}

TEST(DeviceMemoryPoolTest, OutOfMemoryTrimsAndRetriesOnce) {
  FakeSlabs s;
  DeviceMemoryPool pool(s.Alloc(), s.Free(), 4096, 256);
  auto a = *pool.Allocate(4096);
  ASSERT_TRUE(pool.Free(a).ok());  // an empty slab, not returned yet
  s.fail_after = 0;
  // 8192 does not fit the empty slab; the driver says OOM; trimming the empty
  // slab is what a real driver would need to succeed, but this one still fails.
  auto b = pool.Allocate(8192);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(b.status().message(),
                                "device memory pool: a slab of 8192 bytes for a block of 8192: "
                                "cuMemAlloc_v2 failed: OOM"))
      << b.status();
  EXPECT_EQ(s.frees, 1);  // the empty slab went back before the retry
  EXPECT_EQ(pool.stats().slabs, 0);
  s.fail_after = -1;
  EXPECT_TRUE(pool.Allocate(8192).ok());
}

}  // namespace
}  // namespace llmc::cuda
