// Dummy weights: what an artifact compiled with `llmc compile --builtin=NAME
// --dummy-weights=FORMAT` runs on. Such an artifact carries no weight file
// (manifest weights.dummy_seed != 0); the runtime generates every tensor at
// load, deterministically from (seed, tensor index), so that an 8B-parameter
// model travels as a few MiB of kernels and manifest and still times like
// the real one.
//
// The values keep a forward pass numerically sane (no overflow, no NaN):
//   - matrices (2-D and up) in f32/f16/bf16: uniform in +-0.02;
//   - 1-D weights named "...bias...": uniform in +-0.01; other 1-D weights
//     (norms, rope factors): 1 + uniform in +-0.01;
//   - GGUF block formats: valid blocks whose f16 scale d is about 0.02/8
//     (q4_0, q4_1), 0.02/16 (q5_0, q5_1) or 0.02/127 (q8_0), times a random
//     factor in [0.75, 1.25); the _1 formats' minimum m = -7.5d (-15.5d) so
//     the values center on 0 (q4_0/q5_0's are off by -d/2); random quant bits;
//   - llmc's group-wise i8 (scale 0.02/127) and i4 (scale 0.02/8, zero 8).
// k-quants are not generated (no dummy format produces them).
//
// Generation fills 64-bit words from splitmix64 streams, one per fixed-size
// chunk of a tensor, on several threads; the bytes do not depend on the
// thread count.
#ifndef LLMC_RUNTIME_ARTIFACT_DUMMY_WEIGHTS_H_
#define LLMC_RUNTIME_ARTIFACT_DUMMY_WEIGHTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc {

// Writes tensor `index` of the weights seeded `seed` into `out` (t.bytes
// bytes, the size of t.format over t.shape). Errors: a format that cannot
// be generated, or t.bytes that does not match the shape.
absl::Status GenerateDummyTensor(const ManifestTensor& t, uint64_t seed, uint64_t index,
                                 uint8_t* out);

// Fills `base` (weights.size bytes, zeroed) with every tensor of `weights` at
// its offset, seeded with weights.dummy_seed. `threads` <= 0: one per core
// (at most 32).
absl::Status GenerateDummyWeights(const ManifestWeights& weights, uint8_t* base,
                                  int threads = 0);

}  // namespace llmc

#endif  // LLMC_RUNTIME_ARTIFACT_DUMMY_WEIGHTS_H_
