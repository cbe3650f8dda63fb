//===- WeightSlice.h - one rank's slice of a stored tensor ------*- C++ -*-===//
//
// Tensor parallelism packs, for each rank, a slice of every split weight
// (`llm.weight ... shard <dim, pieces, ranks>`). Slicing works on the stored
// bytes, in the stored format, so GGUF blocks are never decoded: a slice of
// rows is a byte range, and a slice of columns is a byte range of every row,
// made of whole blocks. Rows past the end of the tensor (the padded last
// slice of a vocabulary) are zero bytes, which every format decodes to 0.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_ARTIFACT_WEIGHTSLICE_H
#define LLMC_COMPILER_ARTIFACT_WEIGHTSLICE_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc {

// Slice number `piece` along `dim` of a stored tensor whose bytes are
// `data[0, size)` in the non-grouped `format` (f32, f16, bf16 or a GGUF
// block format). `sliceShape` is the slice's shape (1 or 2 dimensions): the
// slice's size along `dim`, and the stored tensor's along the other. The
// stored size along `dim` follows from `size`. Errors say what does not fit.
absl::StatusOr<std::vector<uint8_t>> SliceStoredTensor(const uint8_t *data, uint64_t size,
                                                       const std::string &format,
                                                       const std::vector<int64_t> &sliceShape,
                                                       int dim, int64_t piece);

} // namespace llmc

#endif // LLMC_COMPILER_ARTIFACT_WEIGHTSLICE_H
