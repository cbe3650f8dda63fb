#!/usr/bin/env python3
"""Runs a test on a deliberately wrong input and passes only when the test
fails the way it must: exit status 1 (not a crash, not a skip) and every
--want pattern in its output. This is how a check shows it can fail.

  expect_failure.py --want 'FAIL .* vs TP=1' -- python3 tp_logits_test.py --perturb 1e-4 ...

A command that skips (exit 77: something it needs is absent) makes this
skip too, so ctest counts it as skipped, never as passed.
"""
import argparse
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--want", action="append", default=[],
                    help="a regular expression the output must contain (repeatable)")
    ap.add_argument("--rc", type=int, default=1, help="the exit status the test must return")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the test's command line")
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command given")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout, end="")
    if r.returncode == 77:
        print("SKIPPED: the test skipped, so whether it can fail was not shown")
        return 77
    missing = [w for w in a.want if not re.search(w, r.stdout, re.MULTILINE)]
    good = r.returncode == a.rc and not missing
    print(f"{'PASS' if good else 'FAIL'}: on the wrong input the test exited {r.returncode} "
          f"(must be {a.rc})" + "".join(f"; output lacks /{w}/" for w in missing))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
