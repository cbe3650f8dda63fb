//===- CudaTestUtil.h - shared helpers of the CUDA kernel tests -*- C++ -*-===//
#ifndef LLMC_TEST_UNIT_KERNELS_CUDA_CUDATESTUTIL_H
#define LLMC_TEST_UNIT_KERNELS_CUDA_CUDATESTUTIL_H

#include "Target/CUDA/NVRTCCompiler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace llmc::cuda::test {

// The process-wide compiler; null when the toolkit is missing (main() then
// skips every test before they run).
const NVRTCCompiler *compiler();
std::string unavailableReason();

inline std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Options that hand the kernel library to NVRTC by contents, as the CUDA
// emitter does (it embeds the headers), for sm_80 and sm_90. A private cache
// directory keeps the test independent of ~/.cache.
inline CompileOptions kernelLibraryOptions(const std::string &cacheDir) {
  CompileOptions o;
  o.archs = {"sm_80", "sm_90"};
  // Every .cuh of the library (the umbrella and its parts), in name order,
  // and core's block_decode.h, which the compiler embeds with them.
  std::vector<std::string> headers;
  for (const auto &entry : std::filesystem::directory_iterator(LLMC_CUDA_KERNELS_DIR))
    if (entry.path().extension() == ".cuh")
      headers.push_back(std::string(LLMC_CUDA_KERNELS_DIR) + "/" + entry.path().filename().string());
  std::sort(headers.begin(), headers.end());
  headers.push_back(LLMC_BLOCK_DECODE_DIR "/block_decode.h");
  for (const std::string &header : headers)
    o.headers.push_back({std::filesystem::path(header).filename().string(), readText(header)});
  o.cache_dir = cacheDir;
  return o;
}

} // namespace llmc::cuda::test

#endif
