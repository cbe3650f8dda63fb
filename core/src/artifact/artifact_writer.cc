#include "llmc/core/artifact/artifact_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "llmc/core/status_macros.h"
#include "manifest_internal.h"

namespace llmc {
namespace {

namespace fs = std::filesystem;

std::string StripTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status ErrnoError(const std::string& path, const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(err)));
}

// Makes a rename in `dir` durable. Best effort: some file systems refuse.
void SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Writes `text` to `path` via <path>.tmp, fsync and rename.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return ErrnoError(tmp, "cannot create", errno);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
            ::fsync(::fileno(f)) == 0;
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    return ErrnoError(tmp, "write failed", err ? err : EIO);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(path, "cannot rename into place", err);
  }
  SyncDir(ParentOf(path));
  return absl::OkStatus();
}

}  // namespace

// ---- WeightFileWriter -------------------------------------------------------

WeightFileWriter::~WeightFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status WeightFileWriter::Open(const std::string& path) {
  if (file_ != nullptr || !path_.empty())
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": WeightFileWriter::Open called twice (already writing ", path_, ")"));
  path_ = path;
  std::error_code ec;
  fs::create_directories(ParentOf(path), ec);
  if (ec)
    return absl::InternalError(absl::StrCat(ParentOf(path), ": cannot create: ", ec.message()));
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) return error_ = ErrnoError(path, "cannot create", errno);
  return absl::OkStatus();
}

absl::Status WeightFileWriter::OpenDummy(uint64_t seed) {
  if (file_ != nullptr || !path_.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("WeightFileWriter::OpenDummy on a writer already in use (", path_, ")"));
  if (seed == 0)
    return absl::InvalidArgumentError("WeightFileWriter::OpenDummy: the seed must be nonzero");
  path_ = "(dummy weights)";
  dummy_seed_ = seed;
  return absl::OkStatus();
}

absl::Status WeightFileWriter::Write(const uint8_t* data, uint64_t size) {
  if (size == 0 || dummy_seed_ != 0) return absl::OkStatus();
  if (std::fwrite(data, 1, size, file_) != size)
    return error_ = ErrnoError(path_, "write failed", errno);
  checksum_.Update(data, size);
  return absl::OkStatus();
}

absl::StatusOr<ManifestTensor> WeightFileWriter::Add(const std::string& name,
                                                     const std::string& format,
                                                     const std::vector<int64_t>& shape,
                                                     int64_t group, const uint8_t* bytes,
                                                     uint64_t size) {
  if (!error_.ok()) return error_;
  if (file_ == nullptr && dummy_seed_ == 0)
    return absl::FailedPreconditionError(absl::StrCat(path_.empty() ? "WeightFileWriter" : path_,
                                                      ": Add('", name,
                                                      "') on a writer that is not open"));
  ManifestTensor t;
  t.name = name;
  t.format = format;
  t.shape = shape;
  t.group = group;
  t.bytes = size;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": weight '", name, "': ", why));
  };
  if (name.empty()) return bad("the name is empty");
  if (names_.count(name) != 0) return bad("added twice");
  std::string field, why;
  if (!artifact_internal::CheckTensorLayout(t, &field, &why))
    return bad(absl::StrCat(field, " ", why));
  if (dummy_seed_ != 0 && bytes != nullptr) return bad("dummy weights take no data");
  if (dummy_seed_ == 0 && bytes == nullptr) return bad("no data");

  static constexpr uint8_t kZeros[kWeightAlignment] = {};
  uint64_t pad = (kWeightAlignment - size_ % kWeightAlignment) % kWeightAlignment;
  LLMC_RETURN_IF_ERROR(Write(kZeros, pad));
  size_ += pad;
  t.offset = size_;
  LLMC_RETURN_IF_ERROR(Write(bytes, size));
  size_ += size;
  names_.insert(name);
  tensors_.push_back(t);
  return t;
}

absl::Status WeightFileWriter::Finish(ManifestWeights* out) {
  if (!error_.ok()) return error_;
  if (dummy_seed_ != 0) {
    error_ = absl::FailedPreconditionError("the dummy weights are already finished");
    out->file.clear();
    out->checksum.clear();
    out->dummy_seed = dummy_seed_;
    out->size = size_;
    out->tensors = std::move(tensors_);
    tensors_.clear();
    return absl::OkStatus();
  }
  if (file_ == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(path_.empty() ? "WeightFileWriter" : path_,
                                                      ": Finish on a writer that is not open"));
  std::FILE* f = file_;
  file_ = nullptr;
  bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return error_ = ErrnoError(path_, "write failed", err ? err : EIO);
  error_ =
      absl::FailedPreconditionError(absl::StrCat(path_, ": the weight file is already finished"));
  out->size = size_;
  out->checksum = checksum_.Hex();
  out->tensors = std::move(tensors_);
  tensors_.clear();
  return absl::OkStatus();
}

// ---- manifest and directory ----------------------------------------------

absl::Status WriteManifest(const std::string& dir_arg, const Manifest& manifest,
                           const std::string& manifest_file) {
  std::string dir = StripTrailingSlashes(dir_arg);
  std::string path = absl::StrCat(dir, "/", manifest_file);
  LLMC_RETURN_IF_ERROR(ValidateManifest(manifest, path));
  if (manifest.weights.dummy_seed != 0) return WriteFileAtomically(path, ManifestToJson(manifest));
  // The weight file must be there, whole, before the manifest vouches for it.
  std::string weights = absl::StrCat(dir, "/", manifest.weights.file);
  struct stat st;
  if (::stat(weights.c_str(), &st) != 0) {
    int err = errno;
    return ErrnoError(weights, "the weight file is missing", err);
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != manifest.weights.size)
    return absl::FailedPreconditionError(absl::StrCat(
        weights, ": is ", static_cast<uint64_t>(st.st_size), " bytes but the manifest says ",
        manifest.weights.size, " (was WeightFileWriter::Finish called?)"));
  return WriteFileAtomically(path, ManifestToJson(manifest));
}

std::string ArtifactTempDir(const std::string& final_dir) {
  return absl::StrCat(StripTrailingSlashes(final_dir), ".tmp-", static_cast<int64_t>(::getpid()));
}

absl::Status CommitArtifactDir(const std::string& tmp_arg, const std::string& final_arg) {
  std::string tmp = StripTrailingSlashes(tmp_arg), final_dir = StripTrailingSlashes(final_arg);
  if (!Exists(absl::StrCat(tmp, "/", kManifestFile)))
    return absl::FailedPreconditionError(absl::StrCat(
        tmp, ": not a finished artifact (", kManifestFile, " is missing); not committing it"));

  struct stat st;
  if (::lstat(final_dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoError(final_dir, "cannot stat", errno);
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
      int err = errno;
      return ErrnoError(final_dir, absl::StrCat("cannot rename ", tmp, " to it"), err);
    }
    SyncDir(ParentOf(final_dir));
    return absl::OkStatus();
  }

  // Replace only what is clearly ours to replace.
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(
        absl::StrCat(final_dir, ": exists and is not a directory; refusing to replace it"));
  std::error_code ec;
  bool empty = fs::is_empty(final_dir, ec);
  if (!Exists(absl::StrCat(final_dir, "/", kManifestFile)) && !(empty && !ec))
    return absl::FailedPreconditionError(
        absl::StrCat(final_dir, ": exists and is not an llmc artifact (no ", kManifestFile,
                     "); refusing to replace it — remove it or choose another output"));

#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    SyncDir(ParentOf(final_dir));
    fs::remove_all(tmp, ec);  // now the old artifact
    return absl::OkStatus();
  }
  if (int err = errno; err != EINVAL && err != ENOSYS && err != ENOTSUP)
    return ErrnoError(final_dir, absl::StrCat("cannot exchange it with ", tmp), err);
#endif
  std::string aside = absl::StrCat(final_dir, ".old-", static_cast<int64_t>(::getpid()));
  fs::remove_all(aside, ec);
  if (::rename(final_dir.c_str(), aside.c_str()) != 0) {
    int err = errno;
    return ErrnoError(final_dir, absl::StrCat("cannot move it aside to ", aside), err);
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    int err = errno;
    (void)::rename(aside.c_str(), final_dir.c_str());  // put the old one back
    return ErrnoError(final_dir, absl::StrCat("cannot rename ", tmp, " to it"), err);
  }
  SyncDir(ParentOf(final_dir));
  fs::remove_all(aside, ec);  // best effort: the new artifact is in place either way
  return absl::OkStatus();
}

}  // namespace llmc
