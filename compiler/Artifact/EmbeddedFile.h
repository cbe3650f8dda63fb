//===- EmbeddedFile.h - a source file the compiler carries -------*- C++ -*-===//
//
// The kernel libraries (host and CUDA) and their ABI headers are embedded in
// the compiler at build time (cmake/EmbedFiles.cmake) as tables of these, so
// that an artifact's generated kernels build against exactly the library the
// compiler was built with.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_ARTIFACT_EMBEDDEDFILE_H
#define LLMC_ARTIFACT_EMBEDDEDFILE_H

namespace llmc {

struct EmbeddedFile {
  const char *name;  // file name, no folder: written next to the kernels
  const char *text;
};

} // namespace llmc

#endif // LLMC_ARTIFACT_EMBEDDEDFILE_H
