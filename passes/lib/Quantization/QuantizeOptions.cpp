//===- QuantizeOptions.cpp - the quantize pass's option rules -------------===//
#include "llmc/Passes/QuantizeOptions.h"

#include "llvm/ADT/Twine.h"

namespace llmc {

std::optional<QuantizeOptionProblem> checkQuantizeOptions(llvm::StringRef mode, int64_t group,
                                                          llvm::ArrayRef<std::string> skip) {
  using Option = QuantizeOptionProblem::Option;
  if (mode != "none" && mode != "w8a16" && mode != "w4a16")
    return QuantizeOptionProblem{Option::kMode,
                                 ("must be none, w8a16 or w4a16, got '" + mode + "'").str()};
  if (group != 32 && group != 64 && group != 128)
    return QuantizeOptionProblem{Option::kGroup,
                                 "must be 32, 64 or 128, got " + std::to_string(group)};
  for (const std::string &s : skip)
    if (llvm::StringRef(s).trim().empty())
      return QuantizeOptionProblem{Option::kSkip, "has an empty entry"};
  return std::nullopt;
}

} // namespace llmc
