// `llmc inspect --kernels` on a hand-written CUDA manifest (no compiler, no
// GPU, no CUDA tools: the disassembler is made missing, as on a machine
// without it): the launches at a shape with their grids, "no cost model"
// where the manifest has none, a prediction where it has one, the step
// totals, and the flag errors. test/tools/inspect-kernels*.test run it on a
// compiled artifact with its SASS.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "core/artifact/artifact_test_util.h"
#include "llmc/runtime/cli/commands.h"

namespace llmc::cli {
namespace {

std::string Inspect(std::vector<std::string> args, int* rc) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto runtime = RuntimeCommands();
  std::vector<Command> commands(runtime.begin(), runtime.end());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  *rc = Dispatch("llmc-test", "test", commands, int(argv.size()), argv.data());
  std::string err = testing::internal::GetCapturedStderr();
  return testing::internal::GetCapturedStdout() + err;
}

// Sets an environment variable for the scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void ExpectInOrder(const std::string& out, const std::vector<std::string>& parts) {
  size_t at = 0;
  for (const std::string& p : parts) {
    size_t found = out.find(p, at);
    EXPECT_NE(found, std::string::npos) << "missing (in order):\n" << p << "\nin:\n" << out;
    if (found != std::string::npos) at = found + p.size();
  }
}

class InspectKernels : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = folder_.File("model.llmc");
    Manifest m = test::TinyCudaManifest();
    // Only the LM head's GEMV has a cost model: 8 kB of weights plus 128
    // bytes per logits row.
    ManifestCudaCost& cost = m.cuda.kernels[2].launches[0].cost;
    cost.bytes = {8192, 0, 0, 0, 128, 0};
    cost.flops = {0, 0, 0, 0, 8192, 0};
    cost.trips = {0, 0, 0, 0, 64, 0};
    m.cuda.kernels[2].launches[0].variant = "gemv=q4_1 warps=8";
    ASSERT_TRUE(test::WriteTinyArtifact(dir_, nullptr, m).ok());
  }
  test::TempFolder folder_;
  std::string dir_;
  ScopedEnv no_disassembler_{"LLMC_CUOBJDUMP", "/nonexistent/cuobjdump"};
};

TEST_F(InspectKernels, LaunchesAtShapesAndStepTotals) {
  int rc = -1;
  std::string out = Inspect({"llmc-test", "inspect", dir_, "--kernels", "--prefill=64"}, &rc);
  EXPECT_EQ(rc, 0) << out;
  ExpectInOrder(out, {
      // The default device: the first module's arch, sm_80.
      "kernels on A100-80GB (sm_80: 108 SMs", "; shapes decode 1x512, prefill 64\n",
      "  the model takes resources and SASS from sm_80\n",
      "  SASS not read: ",
      "c0   x1   gather f32 64x64\n",
      "  llmc_cuda_embed [T, 1, 1] x 128\n",
      "    sm_80  regs  24 spill 0/0 smem 0 stack 0  occupancy ",
      "    sm_90  regs  24 spill 0/0 smem 0 stack 0  occupancy ",
      "           SASS: not read (a tool is missing, see above)\n",
      "    decode 1x512          1 blocks  no cost model\n",
      "    prefill 64           64 blocks  no cost model\n",
      "c1   x2   attention 4/2 x 16 (256 keys per split)\n",
      // 512 keys: 2 splits, so the reduction runs; a 64-token prefill has one.
      "    decode 1x512          4 blocks  no cost model\n",
      "  llmc_cuda_attn_reduce [T, 4, 1] x 64 if splits>1\n",
      "    decode 1x512          4 blocks  no cost model\n",
      "    prefill 64     not run (splits>1)\n",
      "  llmc_cuda_gemv [cdiv(L,4), 16, 1] x 256 if L<=8  variant gemv=q4_1 warps=8\n",
      "    sm_80  regs  64 spill 0/0 smem 0 stack 0  occupancy ",
      "    sm_90  no ptxas report  occupancy ",
      // 8192 + 128 bytes, 8192 flops; no SASS: no instruction count.
      "    decode 1x512         16 blocks   8.32 kB  8.19 kFLOP    ? winst -> ",
      " (no SASS)\n",
      "  llmc_cuda_gemm [cdiv(L,64), 1, 1] x 128 if L>8\n",
      "    decode 1x512   not run (L>8)\n",
      "per step on A100-80GB",
      "  decode 1x512   6 launches ", ", 8.32 kB moved: ",
      "                 weights ", "% of copy bandwidth\n",
      "                 not counted: 5 launches without a cost model\n",
  });
}

TEST_F(InspectKernels, JsonMirrorsTheText) {
  int rc = -1;
  std::string out =
      Inspect({"llmc-test", "inspect", dir_, "--kernels", "--json", "--device=h200"}, &rc);
  EXPECT_EQ(rc, 0) << out;
  ExpectInOrder(out, {"\"device\": {", "\"name\": \"H200\"", "\"model_module\": \"sm_90\"",
                      "\"missing\": \"cuobjdump not found",
                      "\"symbol\": \"llmc_cuda_embed\"", "\"note\": \"no cost model\"",
                      "\"symbol\": \"llmc_cuda_gemv\"", "\"variant\": \"gemv=q4_1 warps=8\"",
                      "\"has_cost\": true", "\"sass\": null", "\"blocks\": 16",
                      "\"bytes\": 8320.0", "\"warp_instructions\": null", "\"bound\": \"",
                      "\"steps\": [", "\"without_cost\": 5", "\"copy_bandwidth_fraction\": "});
}

TEST_F(InspectKernels, FlagErrors) {
  int rc = -1;
  std::string out = Inspect({"llmc-test", "inspect", dir_, "--kernels", "--decode=8"}, &rc);
  EXPECT_EQ(rc, kExitUsage);
  EXPECT_NE(out.find("--decode=8: expected B,C"), std::string::npos) << out;
  out = Inspect({"llmc-test", "inspect", dir_, "--kernels", "--prefill=-3"}, &rc);
  EXPECT_EQ(rc, kExitUsage);
  EXPECT_NE(out.find("--prefill=-3: expected a positive token count"), std::string::npos) << out;
  out = Inspect({"llmc-test", "inspect", dir_, "--kernels", "--device=tpu"}, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("--device=tpu: not in the performance model's table (known: H200"),
            std::string::npos)
      << out;
}

TEST(InspectKernelsHostOnly, SaysThereAreNoCudaKernels) {
  test::TempFolder folder;
  std::string dir = folder.File("model.llmc");
  ASSERT_TRUE(test::WriteTinyArtifact(dir).ok());
  int rc = -1;
  std::string out = Inspect({"llmc-test", "inspect", dir, "--kernels"}, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("the artifact has no CUDA kernels"), std::string::npos) << out;
}

}  // namespace
}  // namespace llmc::cli
