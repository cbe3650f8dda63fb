"""How every end-to-end script counts its checks and picks its exit status.

One place, so that no script can drop a failure on the way to its exit code:
tp_logits_test.py once stored `(ok, artifact)` pairs and counted `False`
among them, printed "FAIL" four times, then "5 passed, 0 failed", and
exited 0.

  tally = Tally(k)                   # k: the script's -k filter, or None
  if tally.wants("case-a"):          # -k selects cases by substring
      tally.attempt("case-a", lambda: check_a())   # True, False or None
  return tally.exit_status()

A check returns True (passed), False (failed) or None (skipped, said loudly
by the check itself). Anything else (a tuple, a number, a string) is a
harness bug and counts as a failure, as does an exception. Exit status:
1 when anything failed or when -k matched no case (a filter with a typo must
not pass), 77 when nothing ran but something was skipped (ctest's
SKIP_RETURN_CODE, so a skip is never read as a pass), else 0.
"""
import traceback

SKIP = 77


def is_verdict(ok):
    """True, False or None; numpy's bool_ (what `a < b` on arrays gives) too."""
    return ok is None or type(ok).__name__ in ("bool", "bool_")


class Tally:
    def __init__(self, k=None):
        self.k = k
        self.selected = 0
        self.passed, self.failed, self.skipped = [], [], []

    def wants(self, name):
        """Whether -k selects the case `name` (a substring of it); counts it."""
        chosen = not self.k or self.k in name
        self.selected += chosen
        return chosen

    def record(self, name, ok):
        if not is_verdict(ok):
            print(f"FAIL {name}: the check returned {ok!r}, not True, False or None "
                  "(a harness bug)", flush=True)
            ok = False
        if ok is None:
            self.skipped.append(name)
        elif ok:
            self.passed.append(name)
        else:
            self.failed.append(name)
        return ok

    def attempt(self, name, check):
        """Runs one check; an exception fails it, with its traceback, without
        hiding the checks after it."""
        try:
            ok = check()
        except Exception as e:  # a crash or a refused model is a failure, with its reason
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            ok = False
        return self.record(name, ok)

    def exit_status(self):
        """Prints the summary line and returns the script's exit status."""
        print(f"{len(self.passed)} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"
              + (f": FAILED {', '.join(self.failed)}" if self.failed else ""), flush=True)
        if self.k and not self.selected:
            print(f"FAIL: -k {self.k!r} matches no case", flush=True)
            return 1
        if self.failed:
            return 1
        if not self.passed:
            print("SKIPPED: no check ran" if self.skipped else "FAIL: no check ran", flush=True)
            return SKIP if self.skipped else 1
        return 0
