//===- StepPlan.h - a code generator's launches as manifest steps -*- C++ -*-===//
#ifndef LLMC_COMPILER_ARTIFACT_STEPPLAN_H
#define LLMC_COMPILER_ARTIFACT_STEPPLAN_H

#include "Target/Common/KernelLaunch.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/core/status_macros.h"

#include "absl/status/statusor.h"

#include <functional>
#include <string>
#include <vector>

namespace llmc {

// A weight's tensor index in the artifact's weight file (packing it when new).
using WeightIndexFn = std::function<absl::StatusOr<int64_t>(const std::string &)>;

// The manifest steps of `launches`, weights resolved through `weightIndex`.
inline absl::StatusOr<std::vector<ManifestStep>>
toManifestSteps(const std::vector<KernelLaunch> &launches, const WeightIndexFn &weightIndex) {
  std::vector<ManifestStep> steps;
  for (const KernelLaunch &l : launches) {
    ManifestStep step;
    step.name = l.group;
    step.kernel = l.kernel;
    step.buffers = l.buffers;
    step.caches = l.caches;
    step.collective = l.collective;
    step.in_row_elems = l.inRowElems;
    step.out_row_elems = l.outRowElems;
    step.peer = l.peer;
    for (const std::string &w : l.weights) {
      LLMC_ASSIGN_OR_RETURN(int64_t index, weightIndex(w));
      step.weights.push_back(index);
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

} // namespace llmc

#endif // LLMC_COMPILER_ARTIFACT_STEPPLAN_H
