// Writing an artifact (used by `llmc compile`, which is built without
// exceptions: nothing here throws). An artifact is never left half-written
// where it could be taken for a complete one:
//
//   std::string tmp = ArtifactTempDir("model.llmc");        // model.llmc.tmp-<pid>
//   WeightFileWriter weights;
//   weights.Open(tmp + "/weights/rank0.bin");
//   weights.Add("blk.0.attn_q", "q4_1", {576, 576}, 0, data, size);  // ...
//   manifest.weights.file = "weights/rank0.bin";
//   weights.Finish(&manifest.weights);
//   ... kernels, tokenizer ...
//   WriteManifest(tmp, manifest);          // last: it marks the dir complete
//   CommitArtifactDir(tmp, "model.llmc");  // swap it into place
//
// and the runtime refuses a directory without manifest.json.
#ifndef LLMC_CORE_ARTIFACT_ARTIFACT_WRITER_H_
#define LLMC_CORE_ARTIFACT_ARTIFACT_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc {

// Writes weights back to back, each at a kWeightAlignment-aligned offset
// (zero padding between), hashing as it goes.
class WeightFileWriter {
 public:
  WeightFileWriter() = default;
  ~WeightFileWriter();  // closes (without finishing) an unfinished file
  WeightFileWriter(const WeightFileWriter&) = delete;
  WeightFileWriter& operator=(const WeightFileWriter&) = delete;

  // Creates (truncates) `path`, and its parent directories.
  absl::Status Open(const std::string& path);
  // Lays out dummy weights (seed != 0): nothing is written; Add takes no
  // bytes (nullptr) and assigns offsets as if packing, and Finish fills in
  // size, tensors and dummy_seed, with file and checksum empty.
  absl::Status OpenDummy(uint64_t seed);

  // Appends one weight. `size` must be WeightByteSize(format, elements of
  // shape, group), and `shape`/`group` must be what the manifest's checks
  // accept; the name must be new. Returns the manifest entry (offset, bytes).
  absl::StatusOr<ManifestTensor> Add(const std::string& name, const std::string& format,
                                     const std::vector<int64_t>& shape, int64_t group,
                                     const uint8_t* bytes, uint64_t size);

  // Flushes, fsyncs and closes the file, and fills out->size, out->checksum
  // and out->tensors (every Add, in order). out->file is left to the caller
  // (the path relative to the artifact root).
  absl::Status Finish(ManifestWeights* out);

  // Bytes written so far (the next tensor goes at this, rounded up).
  uint64_t size() const { return size_; }

 private:
  absl::Status Write(const uint8_t* data, uint64_t size);
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t dummy_seed_ = 0;  // nonzero: OpenDummy, nothing written
  uint64_t size_ = 0;
  Checksum64 checksum_;
  std::vector<ManifestTensor> tensors_;
  std::unordered_set<std::string> names_;
  absl::Status error_;  // sticky: once a write failed, every call fails
};

// Checks `manifest` (ValidateManifest) and writes <dir>/<manifest_file>
// through a temporary file and a rename, fsynced; `dir` is the artifact's
// root, and a pipeline stage's manifest_file is "stages/<S>/manifest.json".
// Write it after everything else (the weight file must be complete; dummy
// weights have none).
absl::Status WriteManifest(const std::string& dir, const Manifest& manifest,
                           const std::string& manifest_file = kManifestFile);

// "<final_dir>.tmp-<pid>": where to build the artifact before committing it.
std::string ArtifactTempDir(const std::string& final_dir);

// Moves the finished artifact `tmp_dir` (it must hold manifest.json) to
// `final_dir`. An existing `final_dir` is replaced only if it is an llmc
// artifact (holds manifest.json) or an empty directory; anything else is an
// error, so `-o ~/` cannot delete a home directory. The swap is atomic where
// the file system supports renameat2(RENAME_EXCHANGE); elsewhere the old one
// is renamed aside, the new one renamed in (the old one put back if that
// fails) and the old one deleted.
absl::Status CommitArtifactDir(const std::string& tmp_dir, const std::string& final_dir);

}  // namespace llmc

#endif  // LLMC_CORE_ARTIFACT_ARTIFACT_WRITER_H_
