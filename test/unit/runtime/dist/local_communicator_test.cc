#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "llmc/runtime/dist/communicator.h"

namespace llmc {
namespace {

using ::absl::StatusCode;

TEST(LocalCommunicator, IsRankZeroOfOne) {
  auto comm = MakeLocalCommunicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
}

TEST(LocalCommunicator, AllReduceSumLeavesDataAsIs) {
  auto comm = MakeLocalCommunicator();
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE(comm->AllReduceSum(data.data(), 3).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

TEST(LocalCommunicator, AllGatherCopies) {
  auto comm = MakeLocalCommunicator();
  std::vector<float> in = {1, 2, 3, 4}, out(4, 0);
  ASSERT_TRUE(comm->AllGather(in.data(), out.data(), 4).ok());
  EXPECT_EQ(out, in);
  // In place: the one rank's block is already where it belongs.
  ASSERT_TRUE(comm->AllGather(in.data(), in.data(), 4).ok());
  EXPECT_EQ(in, (std::vector<float>{1, 2, 3, 4}));
}

TEST(LocalCommunicator, BroadcastFromRankZeroLeavesData) {
  auto comm = MakeLocalCommunicator();
  std::string bytes = "abc";
  ASSERT_TRUE(comm->Broadcast(bytes.data(), 3, 0).ok());
  EXPECT_EQ(bytes, "abc");
}

TEST(LocalCommunicator, RejectsBadArguments) {
  auto comm = MakeLocalCommunicator();
  float x[2] = {0, 0};
  EXPECT_EQ(comm->AllReduceSum(x, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduceSum(x, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllReduceSum(nullptr, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllGather(nullptr, x, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllGather(x, nullptr, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->AllGather(x, x, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Broadcast(nullptr, 4, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Broadcast(x, -4, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Broadcast(x, 4, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->Broadcast(x, 4, -1).code(), StatusCode::kInvalidArgument);
}

// Checked before MPI is touched, so this starts no MPI (and holds with and
// without MPI in the build).
TEST(MpiWorld, RejectsNonPositiveTimeout) {
  EXPECT_EQ(MpiWorld(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MpiWorld(-1).status().code(), StatusCode::kInvalidArgument);
}

// Every variable LaunchedAsMpiRank() may read, and the Slurm ones it must
// not trust; the fixture clears them and puts the test's environment back.
const char* const kLauncherVariables[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",    "PMI_RANK",    "PMI_SIZE",
    "MPI_LOCALNRANKS",      "MV2_COMM_WORLD_RANK",  "SLURM_PROCID", "SLURM_NTASKS"};

class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kLauncherVariables) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(LaunchEnvTest, FalseWithoutLauncher) { EXPECT_FALSE(LaunchedAsMpiRank()); }

TEST_F(LaunchEnvTest, EachMpiVariableIsEnough) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                           "PMI_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_RANK"}) {
    setenv(name, "2", 1);
    EXPECT_TRUE(LaunchedAsMpiRank()) << name;
    unsetenv(name);
    EXPECT_FALSE(LaunchedAsMpiRank()) << name;
  }
}

TEST_F(LaunchEnvTest, EmptyValueDoesNotCount) {
  setenv("OMPI_COMM_WORLD_SIZE", "", 1);
  EXPECT_FALSE(LaunchedAsMpiRank());
}

// srun starts every task of a step with these, MPI program or not.
TEST_F(LaunchEnvTest, SlurmTasksAloneAreNotMpi) {
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_FALSE(LaunchedAsMpiRank());
  setenv("PMIX_RANK", "1", 1);
  EXPECT_TRUE(LaunchedAsMpiRank());
}

}  // namespace
}  // namespace llmc
