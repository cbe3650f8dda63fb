//===- QuantizeOptions.h - the quantize pass's option rules -----*- C++ -*-===//
//
// The one definition of which llmc-quantize options are valid, used by the
// pass itself and by `llmc compile` (which names the flag instead of the pass
// option), so the two cannot drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_QUANTIZEOPTIONS_H
#define LLMC_PASSES_QUANTIZEOPTIONS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace llmc {

// A problem with one option of the quantize pass.
struct QuantizeOptionProblem {
  enum class Option { kMode, kGroup, kSkip };
  Option option;
  std::string message; // follows the option's name: "must be 32, 64 or 128, got 100"
};

// The first problem with (mode, group, skip), or nullopt when the pass can
// run with them. Modes: none, w8a16, w4a16; groups: 32, 64, 128; skip
// entries must not be empty.
std::optional<QuantizeOptionProblem> checkQuantizeOptions(llvm::StringRef mode, int64_t group,
                                                          llvm::ArrayRef<std::string> skip);

} // namespace llmc

#endif // LLMC_PASSES_QUANTIZEOPTIONS_H
