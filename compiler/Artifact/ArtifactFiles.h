//===- ArtifactFiles.h - files and folders of an artifact being built -*- C++ -*-===//
//
// The artifact builders (host and CUDA) write text files and folders into the
// temporary directory of the artifact being built; these report failures as
// absl::Status naming the path.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_ARTIFACT_ARTIFACTFILES_H
#define LLMC_COMPILER_ARTIFACT_ARTIFACTFILES_H

#include "absl/status/status.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace llmc {

absl::Status writeArtifactFile(const std::string &path, llvm::StringRef text);
// The folder and its parents.
absl::Status makeArtifactDir(const std::string &dir);

} // namespace llmc

#endif // LLMC_COMPILER_ARTIFACT_ARTIFACTFILES_H
