// What the manifest's reader (manifest.cc), its validator
// (manifest_validate.cc) and the weight writer share. Internal to
// core/src/artifact.
#ifndef LLMC_CORE_SRC_ARTIFACT_MANIFEST_INTERNAL_H_
#define LLMC_CORE_SRC_ARTIFACT_MANIFEST_INTERNAL_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc::artifact_internal {

// Checks a tensor's format, shape, group and byte count (not its name or
// offset). On a problem returns false with the field at fault ("format",
// "shape", "group" or "bytes") and why, phrased to follow the field's name.
bool CheckTensorLayout(const ManifestTensor& t, std::string* field, std::string* why);

// Field names in errors: "prefix.key" and "prefix[i]".
inline std::string Field(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key)
                        : absl::StrCat(prefix, ".", absl::string_view(key.data(), key.size()));
}

// "model config: field 'x' ..." from model_config.cc, as "<path>: model: field 'x' ...".
inline absl::Status ModelError(const std::string& path, const absl::Status& status) {
  absl::string_view message = status.message();
  absl::string_view prefix = "model config: ";
  if (message.substr(0, prefix.size()) == prefix) message.remove_prefix(prefix.size());
  return absl::InvalidArgumentError(absl::StrCat(path, ": model: ", message));
}

inline std::string Indexed(const std::string& prefix, size_t i) {
  return absl::StrCat(prefix, "[", i, "]");
}

}  // namespace llmc::artifact_internal

#endif  // LLMC_CORE_SRC_ARTIFACT_MANIFEST_INTERNAL_H_
