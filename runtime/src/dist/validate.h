// Argument checks every Communicator makes before it takes part in a
// collective: they depend on the arguments alone, so a bad call fails the
// same way on every rank and no rank is left waiting for it.
#ifndef LLMC_RUNTIME_SRC_DIST_VALIDATE_H_
#define LLMC_RUNTIME_SRC_DIST_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace llmc::dist_internal {

inline absl::Status CheckBuffer(const char* collective, const void* data, int64_t count) {
  if (count <= 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: count must be positive, got %d", collective, count));
  if (data == nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: null buffer for %d elements", collective, count));
  return absl::OkStatus();
}

inline absl::Status CheckRoot(int root, int size) {
  if (root < 0 || root >= size)
    return absl::InvalidArgumentError(
        absl::StrFormat("Broadcast: root %d is not a rank of a world of %d", root, size));
  return absl::OkStatus();
}

}  // namespace llmc::dist_internal

#endif  // LLMC_RUNTIME_SRC_DIST_VALIDATE_H_
