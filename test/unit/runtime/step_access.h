// Tests of step runners run steps themselves: the one key to a runner's
// steps outside the Engine and a follower rank (StepAccess, step_runner.h).
// Only tests may name StepRunnerTestAccess; the build test
// build/step-access fails on a use anywhere else.
#ifndef LLMC_TEST_UNIT_RUNTIME_STEP_ACCESS_H_
#define LLMC_TEST_UNIT_RUNTIME_STEP_ACCESS_H_

#include "llmc/runtime/exec/step_runner.h"

namespace llmc {

struct StepRunnerTestAccess {
  static StepAccess Key() { return StepAccess(); }
};

}  // namespace llmc

#endif  // LLMC_TEST_UNIT_RUNTIME_STEP_ACCESS_H_
