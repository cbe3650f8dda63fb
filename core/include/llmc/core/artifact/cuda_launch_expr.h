// The small expression language of a CUDA launch in the manifest
// (ManifestCudaLaunch): a grid dimension and the condition under which a
// launch runs, as functions of the step's token count T, its logits rows L,
// its longest query Q (tokens of one sequence), its sequence count S and the
// attention split count. Parsed once (the manifest's validator and
// the CUDA runner both parse; the runner keeps the result) and evaluated per
// step, so a step never looks at text.
//
//   grid:  <int> | <var> | cdiv(<var>,<int>) | min(<var>,<int>)
//          (cdiv: not of splits; min: the variable capped, e.g. the split
//          attention's min(splits,32) for a kernel whose splits grow their
//          share of the keys past 32 splits)
//   when:  "" (always) | <cond> [&& <cond> ...],  cond: <var> <= <int> | <var> > <int>
//   var:   T | L | Q | S | splits
// Spaces around the tokens are allowed; integers are decimal, grid constants
// and divisors positive.
//
// It lives with the manifest (not the executor) because ValidateManifest
// checks every expression at load.
#ifndef LLMC_CORE_ARTIFACT_CUDA_LAUNCH_EXPR_H_
#define LLMC_CORE_ARTIFACT_CUDA_LAUNCH_EXPR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace llmc {

// The values one step gives the variables.
struct LaunchVars {
  int64_t tokens = 0;  // T
  int64_t logits = 0;  // L
  int64_t splits = 1;
  int64_t queries = 0;  // Q: the longest query of one sequence
  int64_t seqs = 0;     // S
};

enum class LaunchVar { kConst, kTokens, kLogits, kSplits, kQueries, kSeqs };

// One grid dimension: a constant, a variable, cdiv(variable, divisor) or
// min(variable, cap).
struct GridExpr {
  LaunchVar var = LaunchVar::kConst;
  int64_t value = 1;  // kConst: the constant; else the divisor (1: the variable itself)
  int64_t cap = 0;    // min(var, cap) when positive (then value is 1)

  int64_t Evaluate(const LaunchVars& v) const;
  std::string ToString() const;  // canonical spelling: "7", "T", "cdiv(L,4)", "min(splits,32)"
};

// One comparison `var <= bound` or `var > bound`.
struct WhenCond {
  LaunchVar var = LaunchVar::kTokens;
  bool less_equal = true;  // <=; else >
  int64_t bound = 0;
};

// When a launch runs: always (no conditions), or when all conditions hold.
struct WhenExpr {
  std::vector<WhenCond> all;

  bool Holds(const LaunchVars& v) const;
  std::string ToString() const;  // "" for always, else e.g. "Q<=16&&splits>1"
};

// InvalidArgument saying what is wrong with `text` (the caller names the
// field), e.g. "'cdiv(T,0)' divides by 0".
absl::StatusOr<GridExpr> ParseGridExpr(absl::string_view text);
absl::StatusOr<WhenExpr> ParseWhenExpr(absl::string_view text);

}  // namespace llmc

#endif  // LLMC_CORE_ARTIFACT_CUDA_LAUNCH_EXPR_H_
