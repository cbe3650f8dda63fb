//===- main.cpp - gtest main that skips loudly without a CUDA toolkit -----===//
//
// Every test here needs NVRTC and ptxas (no GPU). Where they are missing, or
// the build has LLMC_ENABLE_CUDA=OFF, each test run prints
// "SKIPPED: no CUDA toolkit (...)" and exits 77, which ctest (SKIP_RETURN_CODE)
// counts as skipped, not passed. Listing tests always works, so that
// gtest_discover_tests sees them either way.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include <cstdio>
#include <cstring>
#include <gtest/gtest.h>

namespace llmc::cuda::test {

const NVRTCCompiler *compiler() {
  static absl::StatusOr<NVRTCCompiler> c = NVRTCCompiler::create();
  return c.ok() ? &*c : nullptr;
}

std::string unavailableReason() {
  if (!LLMC_CUDA_ENABLED)
    return "the build has LLMC_ENABLE_CUDA=OFF";
  auto c = NVRTCCompiler::create();
  if (!c.ok())
    return std::string(c.status().message());
  if (c->ptxasPath().empty())
    return "no ptxas found";
  return "";
}

} // namespace llmc::cuda::test

int main(int argc, char **argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing |= std::strncmp(argv[i], "--gtest_list_tests", 18) == 0;
  if (!listing) {
    std::string why = llmc::cuda::test::unavailableReason();
    if (!why.empty()) {
      std::printf("SKIPPED: no CUDA toolkit (%s)\n", why.c_str());
      return 77;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
