// The small expression language of a CUDA launch in the manifest
// (ManifestCudaLaunch): a grid dimension and the condition under which a
// launch runs, as functions of the step's token count T, its logits rows L
// and the attention split count. Parsed once (the manifest's validator and
// the CUDA runner both parse; the runner keeps the result) and evaluated per
// step, so a step never looks at text.
//
//   grid:  <int> | T | L | splits | cdiv(T,<int>) | cdiv(L,<int>)
//   when:  "" (always) | <var><op><int>, var T, L or splits, op <= or >
// Spaces around the tokens are allowed; integers are decimal, grid constants
// and divisors positive.
//
// It lives with the manifest (not the executor) because ValidateManifest
// checks every expression at load.
#ifndef LLMC_RUNTIME_ARTIFACT_CUDA_LAUNCH_EXPR_H_
#define LLMC_RUNTIME_ARTIFACT_CUDA_LAUNCH_EXPR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc {

// The values one step gives the variables.
struct LaunchVars {
  int64_t tokens = 0;  // T
  int64_t logits = 0;  // L
  int64_t splits = 1;
};

enum class LaunchVar { kConst, kTokens, kLogits, kSplits };

// One grid dimension: a constant, a variable, or cdiv(variable, divisor).
struct GridExpr {
  LaunchVar var = LaunchVar::kConst;
  int64_t value = 1;  // kConst: the constant; else the divisor (1: the variable itself)

  int64_t Evaluate(const LaunchVars& v) const;
  std::string ToString() const;  // canonical spelling: "7", "T", "cdiv(L,4)"
};

// When a launch runs: always, or `var <= bound` / `var > bound`.
struct WhenExpr {
  bool always = true;
  LaunchVar var = LaunchVar::kTokens;
  bool less_equal = true;  // <=; else >
  int64_t bound = 0;

  bool Holds(const LaunchVars& v) const;
  std::string ToString() const;  // "" for always, else e.g. "T<=8"
};

// InvalidArgument saying what is wrong with `text` (the caller names the
// field), e.g. "'cdiv(T,0)' divides by 0".
absl::StatusOr<GridExpr> ParseGridExpr(absl::string_view text);
absl::StatusOr<WhenExpr> ParseWhenExpr(absl::string_view text);

}  // namespace llmc

#endif  // LLMC_RUNTIME_ARTIFACT_CUDA_LAUNCH_EXPR_H_
