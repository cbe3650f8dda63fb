#!/usr/bin/env python3
"""The checks of the end-to-end scripts, fed deliberately wrong inputs: each
must fail where it once passed. Pure Python, no build needed; ctest runs it
as tools/e2e-checks-selftest.

  - tally.py: a check that returns a tuple, or fails, or a -k that selects
    nothing, ends in exit 1 (tp_logits_test.py once printed FAIL four times,
    then "5 passed, 0 failed", and exited 0);
  - tp_logits_test.py: main() over a failing case exits 1; every e2e script
    exits 1 for a -k that matches no case;
  - engine_batch_invariance_test.py: a request missing (or doubled) on one
    side fails the comparison that zip() once passed;
  - cuda_tp_emu_test.py: NCCL calls fewer than the runs, but not the
    prefill's and the first decode step's exactly, fail;
  - serve_openai_test.py: an oversized body answered by a timeout or a
    refused connection is no 413;
  - test/build/check_lit_positive.py: a prefix with only -NOT lines fails;
  - test/gpu/e2e_check.py: a top-1 miss is a near-tie only with a small gap
    and the two swapped; scripts/payload-libs.py: a library the payload
    lacks fails its verify.

  python3 test/e2e/checks_selftest.py [-v]
"""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(ROOT, "test", "build"), os.path.join(ROOT, "test", "gpu")]

import check_lit_positive  # noqa: E402
import cuda_tp_emu_test  # noqa: E402
import e2e_check  # noqa: E402
import engine_batch_invariance_test as inv  # noqa: E402
import serve_openai_test  # noqa: E402
import tp_logits_test  # noqa: E402
from tally import Tally  # noqa: E402


def quiet(fn, *args, **kw):
    """fn's result, with what it prints swallowed."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return fn(*args, **kw)


class TallyTest(unittest.TestCase):
    def test_a_failure_exits_1(self):
        t = Tally()
        t.record("a", True)
        t.record("b", False)
        self.assertEqual(quiet(t.exit_status), 1)

    def test_a_pair_is_a_harness_bug_not_a_pass(self):
        # tp_logits_test.py's old check_case returned (ok, artifact).
        t = Tally()
        quiet(t.attempt, "case", lambda: (False, "/tmp/a.llmc"))
        quiet(t.attempt, "other", lambda: True)
        self.assertEqual(t.failed, ["case"])
        self.assertEqual(quiet(t.exit_status), 1)

    def test_numpy_bools_count(self):
        t = Tally()
        t.record("a", np.float64(1.0) < 2.0)
        t.record("b", np.float64(3.0) < 2.0)
        self.assertEqual((t.passed, t.failed), (["a"], ["b"]))

    def test_an_exception_fails_and_the_rest_run(self):
        t = Tally()

        def boom():
            raise RuntimeError("llmc compile failed")
        quiet(t.attempt, "a", boom)
        quiet(t.attempt, "b", lambda: True)
        self.assertEqual((t.passed, t.failed), (["b"], ["a"]))

    def test_k_matching_nothing_exits_1(self):
        t = Tally("no-such-case")
        self.assertFalse(t.wants("llama"))
        self.assertEqual(quiet(t.exit_status), 1)

    def test_only_skips_exit_77_and_nothing_at_all_1(self):
        t = Tally()
        t.record("a", None)
        self.assertEqual(quiet(t.exit_status), 77)
        self.assertEqual(quiet(Tally().exit_status), 1)


class TpLogitsTallyTest(unittest.TestCase):
    """main() itself: a case whose logits disagree must end in exit 1."""

    def main_with_case_result(self, verdict):
        saved = {n: getattr(tp_logits_test, n) for n in
                 ("check_case", "check_smollm2", "check_errors", "mpirun_command")}
        argv = sys.argv
        try:
            tp_logits_test.check_case = lambda *a, **k: verdict
            tp_logits_test.check_smollm2 = lambda *a, **k: True
            tp_logits_test.check_errors = lambda *a, **k: True
            tp_logits_test.mpirun_command = lambda n: ["mpirun", "-np", str(n)]
            sys.argv = ["tp_logits_test.py", "--llmc", "/nonexistent/llmc"]
            return quiet(tp_logits_test.main)
        finally:
            sys.argv = argv
            for n, f in saved.items():
                setattr(tp_logits_test, n, f)

    def test_a_failing_case_exits_nonzero(self):
        self.assertEqual(self.main_with_case_result(False), 1)
        # What the old check_case returned for a mismatch: the old main
        # counted no False among the pairs and exited 0.
        self.assertEqual(self.main_with_case_result((False, "/tmp/tp1.llmc")), 1)
        self.assertEqual(self.main_with_case_result(True), 0)


class KFilterTest(unittest.TestCase):
    """Every e2e script with -k exits 1 when the filter matches no case,
    before it needs a build (it is given none)."""
    SCRIPTS = ["host_logits_test.py", "quantize_logits_test.py", "cuda_emu_logits_test.py",
               "engine_batch_invariance_test.py", "tp_logits_test.py", "serve_openai_test.py"]

    def test_each_script(self):
        for script in self.SCRIPTS:
            with self.subTest(script=script):
                r = subprocess.run([sys.executable, os.path.join(HERE, script), "--llmc",
                                    "/nonexistent/llmc", "-k", "no-such-case-anywhere"],
                                   capture_output=True, text=True, timeout=120)
                if r.returncode == 77:
                    self.skipTest(f"{script} skipped: {r.stdout.strip()[-200:]}")
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("matches no case", r.stdout)


def result(rid, tokens, preempted=0):
    # As `llmc run --prompts-file` writes them: the request's id as a string.
    return {"id": str(rid), "token_ids": tokens, "logprobs": [{"logprob": -0.5 * t} for t in tokens],
            "usage": {"preemptions": preempted}}


class BatchInvarianceCompareTest(unittest.TestCase):
    def setUp(self):
        self.ids = [0, 1, 2]
        self.alone = [result(i, [i, i + 1]) for i in self.ids]

    def test_identical_passes(self):
        batched = [result(2, [2, 3], 1), result(0, [0, 1]), result(1, [1, 2])]
        self.assertTrue(quiet(inv.compare, "t", self.ids, batched, self.alone, 64))

    def test_a_missing_result_fails(self):
        # zip() over the two lists once dropped request 2 and passed.
        batched = [result(0, [0, 1], 1), result(1, [1, 2])]
        self.assertFalse(quiet(inv.compare, "t", self.ids, batched, self.alone, 64))
        self.assertFalse(quiet(inv.compare, "t", self.ids, self.alone[:2] + [result(2, [2, 3], 1)],
                               batched, 64))

    def test_a_doubled_result_fails(self):
        batched = [result(0, [0, 1], 1), result(1, [1, 2]), result(1, [1, 2])]
        self.assertFalse(quiet(inv.compare, "t", self.ids, batched, self.alone, 64))

    def test_other_tokens_fail(self):
        batched = [result(0, [0, 1], 1), result(1, [1, 7]), result(2, [2, 3])]
        self.assertFalse(quiet(inv.compare, "t", self.ids, batched, self.alone, 64))


class NcclCallsTest(unittest.TestCase):
    """The fake NCCL's log: exact calls, with and without graph replays."""

    def write_logs(self, prefix, runs, calls):
        for rank in (0, 1):
            with open(f"{prefix}.rank{rank}", "w") as f:
                f.write(f"init 2 {rank}\n")
                for kind, lines in (("run", runs), ("call", calls)):
                    for op, dtype, n in lines:
                        f.write(f"{kind} {op} {dtype} {n}\n")

    def check(self, calls, graphs):
        runs = cuda_tp_emu_test.expected_runs("bf16")
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "nccl")
            self.write_logs(prefix, runs, calls(runs))
            return quiet(cuda_tp_emu_test.check_calls, prefix, "bf16", graphs)

    def test_launch_by_launch(self):
        self.assertTrue(self.check(lambda runs: runs, graphs=False))
        self.assertFalse(self.check(lambda runs: runs[:-1], graphs=False))

    def test_graph_replays_make_the_captures_and_the_prefills_calls(self):
        t = cuda_tp_emu_test
        per_step = len(t.expected_runs("bf16")) // (1 + t.DECODE)
        want = t.expected_calls("bf16", True)
        # A step of each bucket at load (largest first), then the prefill.
        self.assertEqual(len(want), per_step * (len(t.GRAPH_BUCKETS) + 1))
        self.assertEqual(want[0], ("all_reduce", "bf16", 256 * t.HIDDEN))
        self.assertEqual(want[-per_step:], t.expected_runs("bf16")[:per_step])
        self.assertTrue(self.check(lambda runs: want, graphs=True))
        # The old capture on first use (the prefill's and one decode step's
        # calls), a bucket captured twice or one never captured: refused.
        self.assertFalse(self.check(lambda runs: runs[:2 * per_step], graphs=True))
        self.assertFalse(self.check(lambda runs: want[:per_step] + want, graphs=True))
        self.assertFalse(self.check(lambda runs: want[per_step:], graphs=True))


class OversizedBodyTest(unittest.TestCase):
    def answer(self, exc):
        def send():
            raise exc
        return serve_openai_test.oversized_answer(send)[0]

    def test_a_cut_connection_is_the_413(self):
        self.assertEqual(self.answer(urllib.error.URLError(BrokenPipeError(32, "pipe"))), 413)
        self.assertEqual(self.answer(urllib.error.URLError(ConnectionResetError(104, "reset"))), 413)
        self.assertEqual(self.answer(ConnectionResetError(104, "reset")), 413)

    def test_anything_else_is_no_answer(self):
        # The old check turned every exception into a passing 413.
        self.assertIsNone(self.answer(urllib.error.URLError(TimeoutError("timed out"))))
        self.assertIsNone(self.answer(urllib.error.URLError(ConnectionRefusedError(111, "no"))))
        self.assertIsNone(self.answer(TimeoutError("timed out")))
        self.assertIsNone(self.answer(ValueError("bad status line")))

    def test_a_real_answer_passes_through(self):
        got = serve_openai_test.oversized_answer(lambda: (413, {}, {"error": {"message": "body"}}))
        self.assertEqual(got[0], 413)


class LitPositiveTest(unittest.TestCase):
    def problems(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
            f.write(text)
        try:
            return check_lit_positive.problems(f.name)
        finally:
            os.remove(f.name)

    def test_only_negative_checks_fail(self):
        bad = ("// RUN: llmc-opt %s | FileCheck %s --check-prefix=OFF\n"
               "// OFF-NOT: concat\n// OFF-NOT: llm.split\n")
        self.assertEqual(len(self.problems(bad)), 1)
        self.assertEqual(len(self.problems("// RUN: llmc-opt %s | FileCheck %s\n// CHECK-NOT: x\n")), 1)

    def test_a_positive_check_passes(self):
        for line in ("// OFF: func.func", "// OFF-LABEL: func", "// OFF-COUNT-3: llm.linear",
                     "// OFF-DAG: x", "// OFF-NEXT: x"):
            good = f"// RUN: llmc-opt %s | FileCheck %s --check-prefix=OFF\n{line}\n// OFF-NOT: y\n"
            self.assertEqual(self.problems(good), [], line)


class Top1ExplanationTest(unittest.TestCase):
    """e2e_check's near-ties: a swap within 4 standard deviations of the
    row's error is one, a swap the error cannot explain is a fault."""

    def rows(self):
        rng = np.random.default_rng(7)
        want = rng.normal(size=(3, 64))
        got = want + rng.normal(scale=0.01, size=want.shape)
        want[:, 5] = 10.0
        want[0, 6], want[1, 6] = 9.99, 5.0
        got[0, 5], got[0, 6] = 9.98, 10.0   # a near-tie swapped by 0.03 of error
        got[1, 5], got[1, 6] = 4.0, 6.0     # a gap of 5 swapped: a fault
        got[2, 5] = 10.0
        return got, want

    def test_near_tie_and_fault(self):
        got, want = self.rows()
        misses = e2e_check.top1_misses(got, want)
        self.assertEqual([m["row"] for m in misses], [0, 1])
        self.assertEqual([m["rank"] for m in misses], [2, 2])
        self.assertTrue(e2e_check.is_near_tie(misses[0]))
        self.assertFalse(e2e_check.is_near_tie(misses[1]))
        self.assertGreater(misses[1]["sigmas"], 100)
        self.assertEqual(quiet(e2e_check.explain_top1, got, want, 1), 1)
        # One fault in three rows fails a 0.99 floor; a near-tie alone does not.
        self.assertFalse(e2e_check.top1_verdict(got, want, 0.99))
        self.assertTrue(e2e_check.top1_verdict(got[[0, 2]], want[[0, 2]], 0.99))
        self.assertFalse(e2e_check.top1_verdict(got[:0], want[:0], 0.99))

    def test_a_pick_the_reference_puts_far_below_is_a_fault(self):
        want = np.array([[10.0, 9.999, 0.0, -10.0, 1.0, 2.0]])
        got = np.array([[9.0, 9.5, 9.8, -10.0, 1.0, 2.0]])  # picks what the reference puts at 0
        (m,) = e2e_check.top1_misses(got, want)
        self.assertEqual(m["rank"], 3)
        self.assertFalse(e2e_check.is_near_tie(m))

    def test_an_exact_tie_is_a_near_tie(self):
        want = np.array([[10.0, 10.0, 0.0, -10.0]])  # argmax: the first of the two
        got = np.array([[10.0, 10.0 + 1e-6, 0.0, -10.0]])
        (m,) = e2e_check.top1_misses(got, want)
        self.assertEqual(m["sigmas"], 0.0)
        self.assertTrue(e2e_check.is_near_tie(m))


class PayloadLibsTest(unittest.TestCase):
    """scripts/payload-libs.py on a system binary that links libraries
    outside the base allow-list (python3: libexpat, libffi ...)."""

    def setUp(self):
        self.tool = os.path.join(ROOT, "scripts", "payload-libs.py")
        self.binary = os.path.realpath(shutil.which("python3") or sys.executable)
        r = subprocess.run(["ldd", self.binary], capture_output=True, text=True)
        outside = [ln for ln in r.stdout.splitlines() if "=>" in ln and not any(
            b in ln for b in ("libc.so", "libm.so", "libstdc++", "libgcc_s", "libz.so",
                              "libpthread", "libdl.so", "librt.so", "libutil"))]
        if r.returncode != 0 or not outside:
            self.skipTest(f"{self.binary} links nothing beyond the base system (or no ldd)")

    def run_tool(self, cmd, libdir):
        return subprocess.run([sys.executable, self.tool, cmd, self.binary, libdir],
                              capture_output=True, text=True)

    def test_collect_then_verify_then_a_missing_library(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_tool("verify", d)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("MISSING", r.stderr)
            r = self.run_tool("collect", d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            carried = [os.path.join(root, f) for root, _, fs in os.walk(d) for f in fs]
            self.assertTrue(carried)
            os.remove(carried[0])
            r = self.run_tool("verify", d)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(os.path.basename(carried[0]), r.stderr)


if __name__ == "__main__":
    unittest.main()
