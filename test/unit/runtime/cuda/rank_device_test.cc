// Which GPU a rank of a partitioned artifact opens (rank_device.h): the
// launcher's node-local rank, modulo the GPUs the process sees.
#include "llmc/runtime/exec/rank_device.h"

#include <cstdlib>
#include <initializer_list>

#include "gtest/gtest.h"

namespace llmc {
namespace {

constexpr const char* kVars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                                 "MV2_COMM_WORLD_LOCAL_RANK"};

class RankDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(RankDeviceTest, WithoutALauncherTheWorldRankPicksTheGpu) {
  EXPECT_EQ(RankDeviceOrdinal(0, 8), 0);
  EXPECT_EQ(RankDeviceOrdinal(3, 8), 3);
  EXPECT_EQ(RankDeviceOrdinal(9, 8), 1);
  EXPECT_EQ(RankDeviceOrdinal(5, 0), 0);  // no device: the probe fails later, with its message
}

TEST_F(RankDeviceTest, TheNodeLocalRankPicksTheGpu) {
  // Rank 11 of a world whose nodes have 8 ranks each: the 4th on its node.
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  EXPECT_EQ(RankDeviceOrdinal(11, 8), 3);
  // One GPU visible per rank (CUDA_VISIBLE_DEVICES set by the launcher).
  EXPECT_EQ(RankDeviceOrdinal(11, 1), 0);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  for (const char* v : {"MPI_LOCALRANKID", "SLURM_LOCALID", "MV2_COMM_WORLD_LOCAL_RANK"}) {
    setenv(v, "2", 1);
    EXPECT_EQ(RankDeviceOrdinal(10, 4), 2) << v;
    unsetenv(v);
  }
  // Garbage is ignored.
  setenv("SLURM_LOCALID", "two", 1);
  EXPECT_EQ(RankDeviceOrdinal(1, 4), 1);
}

}  // namespace
}  // namespace llmc
