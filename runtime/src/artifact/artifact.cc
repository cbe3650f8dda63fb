#include "llmc/runtime/artifact/artifact.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llmc/core/artifact/host_abi.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/artifact/dummy_weights.h"

namespace llmc {
namespace {

// No real manifest comes near this; a bigger "manifest.json" is not one.
constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;

std::string StripTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// Reads a whole file of at most `limit` bytes.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t limit) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    if (text.size() + n > limit) {
      std::fclose(f);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", limit, " bytes; not an llmc manifest"));
    }
    text.append(buf, n);
  }
  bool failed = std::ferror(f) != 0;
  int err = errno;
  std::fclose(f);
  if (failed) return absl::DataLossError(absl::StrCat(path, ": read failed: ", std::strerror(err)));
  return text;
}

// Whether `path` exists as a regular file (following links); else why not.
absl::Status RequireRegularFile(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat(
        path, ": ", what, " named by the manifest is missing: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, " is not a regular file"));
  return absl::OkStatus();
}

}  // namespace

std::string Artifact::Path(const std::string& relative) const {
  return dir_ == "/" ? "/" + relative : absl::StrCat(dir_, "/", relative);
}

const uint8_t* Artifact::weight_data(int64_t tensor_index) const {
  const auto& tensors = manifest_.weights.tensors;
  if (tensor_index < 0 || static_cast<size_t>(tensor_index) >= tensors.size() || !weights_ ||
      weights_->data() == nullptr)
    return nullptr;
  return weights_->data() + tensors[tensor_index].offset;
}

namespace {

absl::StatusOr<Manifest> ReadManifest(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))  // a FIFO would block the read below
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  LLMC_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, kMaxManifestBytes));
  return ManifestFromJson(text, path);
}

// Stage `stage`'s manifest (`path`) describes the root's model, split alike.
absl::Status CheckStageManifest(const Manifest& root, const Manifest& staged, int64_t stage,
                                const std::string& path) {
  auto differs = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": pipeline stage ", stage, "'s manifest does not match ", kManifestFile,
                     " (", what, "): the artifact mixes two compilations; recompile it"));
  };
  const ManifestMesh &a = root.mesh, &b = staged.mesh;
  if (b.stage != stage) return differs(absl::StrCat("it is stage ", b.stage));
  if (a.tp != b.tp || a.pp != b.pp) return differs("the mesh");
  for (size_t s = 0; s < a.stages.size(); ++s)
    if (b.stages[s].manifest != a.stages[s].manifest ||
        b.stages[s].first_layer != a.stages[s].first_layer ||
        b.stages[s].num_layers != a.stages[s].num_layers)
      return differs("the stages' layers");
  const ModelConfig &x = root.model, &y = staged.model;
  if (x.num_layers != y.num_layers || x.hidden_size != y.hidden_size ||
      x.vocab_size != y.vocab_size || x.num_heads != y.num_heads || root.source != staged.source)
    return differs("the model");
  if (root.tokenizer != staged.tokenizer || root.targets != staged.targets)
    return differs("the tokenizer or targets");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Artifact>> Artifact::Open(const std::string& dir_arg,
                                                         const OpenOptions& options) {
  std::unique_ptr<Artifact> a(new Artifact());
  a->dir_ = StripTrailingSlashes(dir_arg.empty() ? "." : dir_arg);
  const std::string& dir = a->dir_;

  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return absl::NotFoundError(
        absl::StrCat(dir, ": cannot open the artifact: ", std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": not an llmc artifact: an artifact is a directory (llmc compile -o DIR)"));

  // The manifest is written last, so a directory without one is unfinished
  // or something else entirely.
  std::string manifest_path = a->Path(kManifestFile);
  if (::stat(manifest_path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(
          absl::StrCat(dir, ": not an llmc artifact: ", kManifestFile, " is missing"));
    return absl::NotFoundError(absl::StrCat(manifest_path, ": ", std::strerror(errno)));
  }
  LLMC_ASSIGN_OR_RETURN(a->manifest_, ReadManifest(manifest_path));
  // A pipeline-parallel artifact: stages after the first have manifests of
  // their own, which must belong to the same split of the same model.
  const ManifestMesh& mesh = a->manifest_.mesh;
  const int64_t ranks = mesh.tp * mesh.pp;
  if (options.rank < 0 || (options.rank > 0 && options.rank >= ranks))
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rank %d does not exist: the artifact is split over %d rank(s)", dir,
                        options.rank, ranks));
  if (const int64_t stage = options.rank / mesh.tp; stage > 0) {
    manifest_path = a->Path(mesh.stages[size_t(stage)].manifest);
    LLMC_ASSIGN_OR_RETURN(Manifest staged, ReadManifest(manifest_path));
    LLMC_RETURN_IF_ERROR(CheckStageManifest(a->manifest_, staged, stage, manifest_path));
    a->manifest_ = std::move(staged);
  }
  const Manifest& m = a->manifest_;

  bool host = std::find(m.targets.begin(), m.targets.end(), "host") != m.targets.end();
  if (host && m.host_abi_version != LLMC_HOST_ABI_VERSION)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: host_abi_version %d does not match this runtime's host kernel ABI (version %d); "
        "recompile the model with this llmc",
        manifest_path, m.host_abi_version, LLMC_HOST_ABI_VERSION));

  // A partitioned artifact: this rank's weight file has its stage's layout.
  if (ranks > 1) {
    const ManifestMeshRank& r = m.mesh.ranks[size_t(options.rank % m.mesh.tp)];
    a->manifest_.weights.file = r.weights_file;
    a->manifest_.weights.size = r.weights_size;
    a->manifest_.weights.checksum = r.weights_checksum;
  }

  if (m.weights.dummy_seed != 0) {
    // No weight file: the bytes are generated here (dummy_weights.h).
    auto generated = MappedFile::Anonymous(
        absl::StrCat(dir, " (dummy weights, seed ", m.weights.dummy_seed, ")"), m.weights.size,
        [&](uint8_t* base) { return GenerateDummyWeights(m.weights, base); });
    if (!generated.ok())
      return absl::Status(generated.status().code(),
                          absl::StrCat(manifest_path, ": ", generated.status().message()));
    a->weights_ = *std::move(generated);
  } else {
    LLMC_RETURN_IF_ERROR(a->MapWeightFile(options));
  }

  if (host)
    LLMC_RETURN_IF_ERROR(RequireRegularFile(a->Path(m.host_library), "the host kernel library"));
  if (!m.tokenizer.empty())
    LLMC_RETURN_IF_ERROR(RequireRegularFile(a->Path(m.tokenizer), "the tokenizer"));
  for (const ManifestCudaModule& mod : m.cuda.modules)
    LLMC_RETURN_IF_ERROR(RequireRegularFile(a->Path(mod.file), "the " + mod.arch + " PTX"));
  return a;
}

absl::Status Artifact::MapWeightFile(const OpenOptions& options) {
  const Manifest& m = manifest_;
  Artifact* a = this;
  std::string weights_path = a->Path(m.weights.file);
  auto mapped = MappedFile::Open(weights_path);
  if (!mapped.ok()) {
    if (mapped.status().code() == absl::StatusCode::kNotFound)
      return absl::NotFoundError(
          absl::StrCat(weights_path, ": the weight file named by ", kManifestFile, " is missing"));
    return mapped.status();
  }
  a->weights_ = *std::move(mapped);
  uint64_t size = a->weights_->size();
  if (size != m.weights.size)
    return absl::DataLossError(absl::StrFormat(
        "%s: size is %d bytes but %s says %d: the file is %s", weights_path, size, kManifestFile,
        m.weights.size,
        size < m.weights.size ? "truncated" : "not the one the manifest describes"));

  if (options.verify_checksum) {
    // Read ahead while hashing; the pages stay for the first step.
    if (size > 0) ::madvise(const_cast<uint8_t*>(a->weights_->data()), size, MADV_WILLNEED);
    std::string got = ChecksumHex(a->weights_->data(), size);
    if (got != m.weights.checksum)
      return absl::DataLossError(absl::StrCat(weights_path, ": checksum mismatch (expected ",
                                              m.weights.checksum, ", got ", got,
                                              "): the file is corrupt"));
  }
  return absl::OkStatus();
}

}  // namespace llmc
