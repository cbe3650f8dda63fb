// The "mesh" part of `llmc inspect` for a partitioned artifact: its ranks,
// each rank's weight file, and what the step plan's collectives move per
// token. Internal to cli/.
#ifndef LLMC_RUNTIME_CLI_INSPECT_MESH_H_
#define LLMC_RUNTIME_CLI_INSPECT_MESH_H_

#include <string>

#include "llmc/core/artifact/manifest.h"

namespace llmc::cli {

// Appends the section to `out`; nothing for an unpartitioned artifact.
void AppendMeshSection(const Manifest& m, std::string* out);

// A pipeline stage's send or recv of the hidden state.
bool IsPipelineTransfer(const ManifestStep& s);

// What a step of the plan runs, for listings: the kernel's ops, or the
// collective with its widths.
std::string DescribeStep(const Manifest& m, const ManifestStep& s);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_INSPECT_MESH_H_
