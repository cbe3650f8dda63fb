//===- KernelLaunch.h - one launch of a step plan, any target ---*- C++ -*-===//
//
// What every code generator hands the artifact builder for each fusion group
// of @step, in order: which of its kernels runs and what it binds (buffer
// indices of the plan, weight names, layer indices of KV caches), in the
// order the kernel reads them. The builder turns weight names into tensor
// indices of the packed weight file (Artifact/StepPlan.h).
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_COMMON_KERNELLAUNCH_H
#define LLMC_COMPILER_TARGET_COMMON_KERNELLAUNCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

struct KernelLaunch {
  std::string group; // the llm.fusion group's name
  int64_t kernel = 0;
  std::vector<int64_t> buffers;
  std::vector<std::string> weights;
  std::vector<int64_t> caches;
  // A collective between kernels instead ("all_reduce_sum", "all_gather"):
  // kernel -1, buffers [input, output] (ManifestStep has the semantics).
  std::string collective;
  // "send" / "recv" between pipeline stages: buffers [input] / [output].
  int64_t inRowElems = 0, outRowElems = 0; // the values' widths
  int64_t peer = -1;                       // send/recv: the other stage
};

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_COMMON_KERNELLAUNCH_H
