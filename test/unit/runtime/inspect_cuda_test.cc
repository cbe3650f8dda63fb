// `llmc inspect` on an artifact with CUDA modules (a hand-written manifest
// through the real writer: no compiler, no GPU): the cuda section's targets,
// kernels with their launches, and the ptxas table with spills flagged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/artifact/artifact_test_util.h"
#include "llmc/core/artifact/cuda_abi.h"
#include "llmc/runtime/cli/commands.h"

namespace llmc::cli {
namespace {

std::string Inspect(std::vector<std::string> args, int* rc) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto runtime = RuntimeCommands();
  std::vector<Command> commands(runtime.begin(), runtime.end());
  testing::internal::CaptureStdout();
  *rc = Dispatch("llmc-test", "test", commands, int(argv.size()), argv.data());
  return testing::internal::GetCapturedStdout();
}

void ExpectLines(const std::string& out, const std::vector<std::string>& lines) {
  size_t at = 0;
  for (const std::string& line : lines) {
    size_t found = out.find(line + "\n", at);
    EXPECT_NE(found, std::string::npos) << "missing (in order):\n" << line << "\nin:\n" << out;
    if (found != std::string::npos) at = found + line.size();
  }
}

TEST(InspectCuda, ShowsTargetsKernelsAndPtxas) {
  test::TempFolder folder;
  std::string dir = folder.File("model.llmc");
  Manifest m = test::TinyCudaManifest();
  // The LM head offers a cuBLASLt GEMM (--gemm) in place of its own.
  for (ManifestCudaLaunch& l : m.cuda.kernels[2].launches) l.impl = "llmc";
  m.cuda.kernels[2].gemm = {64, 64, 64, 1, "L", "llmc_cuda_lt_pre", "llmc_cuda_lt_epi"};
  ASSERT_TRUE(test::WriteTinyArtifact(dir, nullptr, m).ok());
  int rc = -1;
  std::string out = Inspect({"llmc-test", "inspect", dir, "--steps"}, &rc);
  EXPECT_EQ(rc, 0);
  ExpectLines(
      out,
      {"targets  host, sm_80, sm_90; activations f32, KV cache f16",
       "cuda     sm_80, sm_90; activations and KV cache bf16 (logits f32), ABI " +
           std::to_string(LLMC_CUDA_ABI_VERSION),
       "cuda kernels  3 unique (5 launch shapes), 4 steps",
       "  c0   x1    gather f32 64x64",
       "        llmc_cuda_embed       [T, 1, 1] x 128",
       "  c1   x2    attention 4/2 x 16 (split attention, 256 keys per split)",
       "        llmc_cuda_attn        [T, 2, splits] x 128",
       "        llmc_cuda_attn_reduce [T, 4, 1] x 64           if splits>1",
       "  c2   x1    linear q4_1 64x64",
       "        llmc_cuda_gemv        [cdiv(L,4), 16, 1] x 256 if L<=8",
       "        llmc_cuda_gemm        [cdiv(L,64), 1, 1] x 128 if L>8",
       "        --gemm=cublaslt: llmc_cuda_lt_pre [L, 1, 1], cublasLtMatmul 64x64 x L rows, "
       "llmc_cuda_lt_epi [cdiv(64,128), L, 1] instead of the llmc launches",
       "  cuda step    1: c1 layers.0.attn",
       "ptxas sm_80: 5 entries, 1 with spills",
       "  symbol                 regs spill st/ld B shared B  stack",
       "  llmc_cuda_embed          24           0/0        0      0",
       "  llmc_cuda_attn           96         16/24     4096     32  <- SPILLS",
       "ptxas sm_90: 1 entry"});
  // The PTX sizes come from the files (the writer's placeholder text).
  EXPECT_NE(out.find("  sm_80   kernels/sm_80/kernels.ptx: 42 bytes of PTX, checksum "),
            std::string::npos)
      << out;
}

TEST(InspectCuda, HostOnlyArtifactHasNoCudaSection) {
  test::TempFolder folder;
  std::string dir = folder.File("model.llmc");
  ASSERT_TRUE(test::WriteTinyArtifact(dir).ok());
  int rc = -1;
  std::string out = Inspect({"llmc-test", "inspect", dir}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out.find("cuda"), std::string::npos) << out;
  EXPECT_EQ(out.find("ptxas"), std::string::npos) << out;
}

}  // namespace
}  // namespace llmc::cli
