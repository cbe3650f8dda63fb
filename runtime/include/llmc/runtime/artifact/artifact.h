// A compiled model (`model.llmc/`), opened for execution: the checked
// manifest and the weight file mapped read-only. Opening checks everything a
// backend would otherwise trip over later (manifest.h's layout rules, the
// weight file's size and checksum, that the files the manifest names exist),
// and fails with a message that names the file and the problem; no input
// makes it crash.
#ifndef LLMC_RUNTIME_ARTIFACT_ARTIFACT_H_
#define LLMC_RUNTIME_ARTIFACT_ARTIFACT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "llmc/runtime/artifact/manifest.h"
#include "llmc/runtime/format/mapped_file.h"

namespace llmc {

struct ArtifactOpenOptions {
  // Hash the whole weight file and compare with the manifest (several GB/s;
  // it also faults the weights in, which the first step would do anyway).
  bool verify_checksum = true;
};

class Artifact {
 public:
  using OpenOptions = ArtifactOpenOptions;

  // Opens the artifact directory `dir`. Errors start with the file at fault
  // ("model.llmc/weights/rank0.bin: ..."), spelled from `dir` as given.
  static absl::StatusOr<std::unique_ptr<Artifact>> Open(const std::string& dir,
                                                        const OpenOptions& options = {});

  const Manifest& manifest() const { return manifest_; }
  // The directory as given to Open, without trailing slashes.
  const std::string& dir() const { return dir_; }
  // `relative` (a path from the manifest) inside the artifact.
  std::string Path(const std::string& relative) const;

  // The packed bytes of weights.tensors[tensor_index] (manifest().weights.
  // tensors[i].bytes of them, kWeightAlignment-aligned within the file), or
  // nullptr if the index is out of range.
  const uint8_t* weight_data(int64_t tensor_index) const;
  // The whole mapped weight file.
  const std::shared_ptr<MappedFile>& weight_file() const { return weights_; }

 private:
  Artifact() = default;
  std::string dir_;
  Manifest manifest_;
  std::shared_ptr<MappedFile> weights_;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_ARTIFACT_ARTIFACT_H_
