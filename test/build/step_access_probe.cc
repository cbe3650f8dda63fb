// Compiled (never linked) by cmake/StepAccess.cmake: a caller that is not
// the Engine, a follower rank or a test must not be able to run a step.
// PROBE selects the attempt; only `tests` may compile.
#include "llmc/runtime/exec/step_runner.h"
#if PROBE_TESTS
#include "runtime/step_access.h"
#endif

namespace llmc {

absl::StatusOr<StepOutput> Probe(StepRunner& runner, const StepBatch& batch) {
#if PROBE_TESTS
  return runner.Step(StepRunnerTestAccess::Key(), batch);
#elif PROBE_BRACES
  return runner.Step(StepAccess{}, batch);
#elif PROBE_DEFAULT
  StepAccess key;
  return runner.Step(key, batch);
#elif PROBE_NO_KEY
  return runner.Step(batch);
#endif
}

}  // namespace llmc
