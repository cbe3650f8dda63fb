// The "cuda" part of `llmc inspect`: an artifact's CUDA targets, kernels and
// launches, and ptxas's resource table per architecture. Internal to cli/.
#ifndef LLMC_RUNTIME_CLI_INSPECT_CUDA_H_
#define LLMC_RUNTIME_CLI_INSPECT_CUDA_H_

#include <string>

#include "llmc/runtime/artifact/artifact.h"

namespace llmc::cli {

// Appends the section to `out`; nothing for an artifact without CUDA modules.
// `steps`: also list every launch of the CUDA step plan (inspect --steps).
void AppendCudaSection(const Artifact& artifact, bool steps, std::string* out);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_INSPECT_CUDA_H_
