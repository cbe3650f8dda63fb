// Checks shared by the manifest reader and the weight writer. Internal to
// runtime/src/artifact.
#ifndef LLMC_RUNTIME_SRC_ARTIFACT_MANIFEST_INTERNAL_H_
#define LLMC_RUNTIME_SRC_ARTIFACT_MANIFEST_INTERNAL_H_

#include <string>

#include "llmc/runtime/artifact/manifest.h"

namespace llmc::artifact_internal {

// Checks a tensor's format, shape, group and byte count (not its name or
// offset). On a problem returns false with the field at fault ("format",
// "shape", "group" or "bytes") and why, phrased to follow the field's name.
bool CheckTensorLayout(const ManifestTensor& t, std::string* field, std::string* why);

}  // namespace llmc::artifact_internal

#endif  // LLMC_RUNTIME_SRC_ARTIFACT_MANIFEST_INTERNAL_H_
