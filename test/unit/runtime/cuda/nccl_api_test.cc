// The NCCL loader (nccl_api.h) without a GPU: a missing library, one that
// is not NCCL, one too old, where it searches, and the error texts, against
// the fake NCCL (fake/fake_nccl.cc, built where MPI is) and, where the CUDA
// toolkit's libnccl.so.2 is found, the real library's table and strings
// (loading it needs no GPU). NcclComm's errors without an MPI world: the
// fake refuses to make a communicator outside one, loudly.
#include "llmc/runtime/cuda/nccl_api.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "llmc/runtime/exec/nccl_comm.h"

namespace llmc::cuda {
namespace {

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::string Message(const absl::Status& st) { return std::string(st.message()); }

TEST(NcclApiTest, NothingLoadsSaysWhatWasTriedAndWhatToDo) {
  auto api = NcclApi::LoadFirst({"/nonexistent/a/libnccl.so.2", "/nonexistent/b/libnccl.so.2"},
                                ": install NCCL");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string m = Message(api.status());
  EXPECT_TRUE(absl::StartsWith(m,
                               "libnccl.so.2 not found (tried: /nonexistent/a/libnccl.so.2: "
                               "cannot open shared object file"))
      << m;
  EXPECT_TRUE(absl::StrContains(m, "; /nonexistent/b/libnccl.so.2: cannot open")) << m;
  EXPECT_TRUE(absl::EndsWith(m, "): install NCCL")) << m;
}

TEST(NcclApiTest, TheEnvironmentVariableNamesTheOnlyLibraryTried) {
  ScopedEnv env(kNcclEnvVar, "/nonexistent/libnccl.so.2");
  EXPECT_EQ(NcclApi::Candidates(), std::vector<std::string>{"/nonexistent/libnccl.so.2"});
  auto api = NcclApi::Load();
  ASSERT_FALSE(api.ok());
  const std::string m = Message(api.status());
  EXPECT_TRUE(absl::StartsWith(m, "libnccl.so.2 not found (tried: /nonexistent/libnccl.so.2: "))
      << m;
  EXPECT_TRUE(absl::EndsWith(m,
                             "(named by LLMC_NCCL_LIBRARY; point it at NCCL's library, or "
                             "unset it to search for libnccl.so.2)"))
      << m;
}

TEST(NcclApiTest, SearchesTheLoaderPathTheToolkitAndThePipWheel) {
  ScopedEnv no_env(kNcclEnvVar, nullptr);
  std::string venv = ::testing::TempDir() + "llmc_nccl_venv";
  std::string lib = venv + "/lib/python3.12/site-packages/nvidia/nccl/lib";
  std::filesystem::create_directories(lib);
  std::ofstream(lib + "/libnccl.so.2").put('\n');
  ScopedEnv virtual_env("VIRTUAL_ENV", venv.c_str());
  ScopedEnv cuda_home("CUDA_HOME", "/opt/some-cuda");
  std::vector<std::string> c = NcclApi::Candidates();
  auto index = [&](const std::string& path) {
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] == path) return int(i);
    ADD_FAILURE() << path << " is not a candidate";
    return -1;
  };
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0], "libnccl.so.2");
  int home = index("/opt/some-cuda/lib64/libnccl.so.2");
  int toolkit = index("/usr/local/cuda/lib64/libnccl.so.2");
  int wheel = index(lib + "/libnccl.so.2");
  EXPECT_LT(home, toolkit);
  EXPECT_LT(toolkit, wheel);
  std::filesystem::remove_all(venv);
}

TEST(NcclApiTest, ALibraryWithoutNcclsFunctionsIsRefused) {
  auto api = NcclApi::Load("libm.so.6");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(Message(api.status()),
            "libm.so.6: not a usable NCCL: it does not export ncclGetVersion");
}

#ifdef LLMC_FAKE_NCCL
TEST(NcclApiTest, TheFakeLoadsAndDescribesResults) {
  auto api = NcclApi::Load(LLMC_FAKE_NCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  const NcclApi& n = **api;
  EXPECT_EQ(n.path(), LLMC_FAKE_NCCL);
  EXPECT_EQ(n.version(), 22800);
  EXPECT_EQ(n.VersionString(), "2.28.0");
  EXPECT_EQ(n.Describe(kNcclInvalidArgument),
            "ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details)");
  EXPECT_EQ(n.Describe(42), "NCCL result 42: unknown result code");
  EXPECT_TRUE(n.Check(kNcclSuccess, "x").ok());
  absl::Status st = n.Check(kNcclRemoteError, "ncclAllReduce(...)");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(Message(st),
                               "ncclAllReduce(...) failed: ncclRemoteError (6): "
                               "remote process exited"))
      << Message(st);
  EXPECT_EQ(n.Check(kNcclInvalidUsage, "y").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(n.Check(kNcclInternalError, "z").code(), absl::StatusCode::kInternal);
}

TEST(NcclApiTest, ALibraryOlderThanTwoTwelveIsRefused) {
  ScopedEnv old("FAKE_NCCL_VERSION", "21003");
  auto api = NcclApi::Load(LLMC_FAKE_NCCL);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(Message(api.status()), absl::StrCat(LLMC_FAKE_NCCL,
                                                " is NCCL 2.10.3; llmc needs 2.12 or later "
                                                "(ncclCommGetAsyncError, ncclCommAbort)"));
}

TEST(NcclApiTest, ACommunicatorOutsideAnMpiWorldIsRefused) {
  auto api = NcclApi::Load(LLMC_FAKE_NCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  // Rank 0 of a world of one makes the id and "broadcasts" it; the fake
  // then refuses ncclCommInitRank: this process is no MPI rank.
  std::unique_ptr<Communicator> world = MakeLocalCommunicator();
  auto comm = NcclComm::Create(**api, *world, /*devices=*/1);
  ASSERT_FALSE(comm.ok());
  const std::string m = Message(comm.status());
  EXPECT_TRUE(absl::StartsWith(m, "ncclCommInitRank(1 ranks, rank 0) failed: ncclInvalidUsage (5)"))
      << m;
  EXPECT_TRUE(absl::StrContains(m, "MPI is not initialized")) << m;
}
#endif  // LLMC_FAKE_NCCL

// The toolkit's NCCL, where it is: the table resolves and the library
// answers without a GPU. (Skipped elsewhere: nothing to check.)
TEST(RealNcclTest, TheToolkitsLibraryResolvesEveryFunction) {
  ScopedEnv no_env(kNcclEnvVar, nullptr);
  auto api = NcclApi::Load();
  if (!api.ok()) GTEST_SKIP() << "no NCCL on this machine: " << api.status().message();
  const NcclApi& n = **api;
  std::printf("NCCL %s from %s\n", n.VersionString().c_str(), n.path().c_str());
  EXPECT_GE(n.version(), NcclApi::kMinVersion);
#define LLMC_EXPECT_RESOLVED(name, ret, params, required) \
  if (required) {                                         \
    EXPECT_NE(n.name, nullptr) << #name;                  \
  }
  LLMC_NCCL_FUNCTIONS(LLMC_EXPECT_RESOLVED)
#undef LLMC_EXPECT_RESOLVED
  EXPECT_TRUE(
      absl::StartsWith(n.Describe(kNcclInvalidUsage), "ncclInvalidUsage (5): invalid usage"))
      << n.Describe(kNcclInvalidUsage);
}

}  // namespace
}  // namespace llmc::cuda
