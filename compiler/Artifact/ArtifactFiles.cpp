//===- ArtifactFiles.cpp - files and folders of an artifact being built ---===//
#include "ArtifactFiles.h"

#include "absl/strings/str_format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

namespace llmc {

absl::Status writeArtifactFile(const std::string &path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec)
    return absl::InternalError(absl::StrFormat("cannot write %s: %s", path, ec.message()));
  os << text;
  os.close();
  if (os.has_error())
    return absl::InternalError(absl::StrFormat("cannot write %s", path));
  return absl::OkStatus();
}

absl::Status makeArtifactDir(const std::string &dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return absl::InternalError(absl::StrFormat("cannot create %s: %s", dir, ec.message()));
  return absl::OkStatus();
}

} // namespace llmc
