#!/usr/bin/env python3
"""Checks scripts/kernel-model-check.py on tiny synthetic inputs written to a
temporary folder: an `inspect --kernels --json` report with a decode and a
prefill shape, an ncu text table, an ncu CSV (thousands separators, ncu's
own ==PROF== lines, a second metric), a plain CSV, and malformed inputs.
Checks the joined numbers, the ratios and their "outside 30%" flags, the
rows without a prediction, and the exit status (0, 1 with --fail-outside,
2 on bad input naming the file and line). Needs no GPU and no build.

  scripts/kernel-model-check-selftest.py [-v]
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "kernel-model-check.py")
VERBOSE = "-v" in sys.argv[1:]
failures = []


def launch(symbol, shapes):
    return {"symbol": symbol, "grid": ["1", "1", "1"], "block": 128, "when": "", "variant": "",
            "has_cost": True, "modules": [], "shapes": shapes}


def runs(shape, seconds=None, bound="memory"):
    e = {"shape": shape, "runs": True, "grid": [1, 1, 1], "blocks": 1}
    if seconds is None:
        e["note"] = "no cost model"
    else:
        e.update(bytes=1.0, flops=1.0, warp_instructions=1.0,
                 prediction={"seconds": seconds, "bound": bound, "mem_s": seconds})
    return e


D, P = "decode 1x4", "prefill 16"
REPORT = {
    "device": {"name": "H200", "arch": "sm_90"},
    "shapes": [{"name": D}, {"name": P}],
    "kernels": [
        {"index": 1, "name": "qkv", "uses": 2, "launches": [
            launch("k1_gemv", [runs(D, 10e-6), {"shape": P, "runs": False}]),
            launch("k1_gemm", [{"shape": D, "runs": False}, runs(P, 100e-6, "tensor")])]},
        {"index": 2, "name": "attn", "uses": 2, "launches": [
            launch("k2_attn", [runs(D), runs(P)])]},
        {"index": 6, "name": "lm_head", "uses": 1, "launches": [
            launch("k6_gemv", [runs(D, 50e-6, "instructions"), runs(P, 50e-6, "instructions")])]},
        {"index": 7, "name": "extra", "uses": 1, "launches": [
            launch("k7_extra", [runs(D, 3e-6), {"shape": P, "runs": False}])]},
    ],
    "steps": [{"shape": D, "launches": 5}, {"shape": P, "launches": 4}],
}

NCU_TEXT = """\
===== decode step, 1 sequence (synthetic): kernel time 0.32 ms over 23 launches
k1_gemv            n=  10    0.100 ms ( 31.2%) read   0.001 GB     10 GB/s grid=1 block=128 regs=32
k6_gemv            n=   2    0.050 ms ( 15.6%) read   0.001 GB     10 GB/s grid=1 block=128 regs=32
k2_attn            n=  10    0.020 ms (  6.2%) read   0.000 GB      1 GB/s grid=1 block=128 regs=32
k9_unknown         n=   1    5.000 us (  1.5%)
k1_gemm            n=   2    0.150 ms ( 46.9%)
===== prefill of 16 tokens (synthetic): kernel time 0.30 ms over 4 launches
k1_gemm            n=   2    0.250 ms ( 83.3%) read   0.001 GB     10 GB/s grid=1 block=128 regs=32
k6_gemv            n=   1    0.050 ms ( 16.7%)
"""

NCU_CSV = """\
==PROF== Connected to process 4242 (/payload/bin/llmc-rt)
==PROF== Profiling "k1_gemv" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","llmc-rt","127.0.0.1","k1_gemv","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","9,000"
"0","4242","llmc-rt","127.0.0.1","k1_gemv","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","123,456"
"1","4242","llmc-rt","127.0.0.1","k1_gemv","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","10,000"
==PROF== Profiling "k1_gemv" - 2: 0%....50%....100% - 1 pass
"2","4242","llmc-rt","127.0.0.1","k1_gemv","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","11,000"
"3","4242","llmc-rt","127.0.0.1","k6_gemv","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","70"
"4","4242","llmc-rt","127.0.0.1","k6_gemv(float const*, int)","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","70000"
"5","4242","llmc-rt","127.0.0.1","k2_attn","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","4,000"
==PROF== Disconnected from process 4242
"""

PLAIN_CSV = """\
# event timing, synthetic
symbol,launches,total_us
k1_gemv,4,60
k6_gemv,1,45.5
"""


def run(tmp, *args):
    r = subprocess.run([sys.executable, CHECK, *args], capture_output=True, text=True, cwd=tmp)
    if VERBOSE:
        print("$ kernel-model-check.py", " ".join(args), f"-> exit {r.returncode}")
        print(r.stdout + r.stderr)
    return r


def table(stdout):
    """The markdown table's rows: symbol -> cells."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| ") and not line.startswith("| kernel |"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells
    return rows


def check(name, cond, detail=""):
    if not cond:
        failures.append(f"{name}{': ' + detail if detail else ''}")
    print(f"{'ok  ' if cond else 'FAIL'} {name}")


def expect_row(case, rows, sym, launches, meas, pred, ratio, note, bound=None):
    r = rows.get(sym)
    if r is None:
        check(f"{case}: row {sym}", False, f"missing; rows {sorted(rows)}")
        return
    got = (r[1], r[2], r[3], r[4], r[6])
    want = (str(launches), meas, pred, ratio, note)
    ok = got == want and (bound is None or r[5] == bound)
    check(f"{case}: {sym} {want}", ok, f"got {got} bound {r[5]!r}")


def main():
    with tempfile.TemporaryDirectory(prefix="kernel-model-check-") as tmp:
        def write(name, text):
            path = os.path.join(tmp, name)
            with open(path, "w") as f:
                f.write(text)
            return path
        pred = write("report.json", json.dumps(REPORT, indent=2))
        text = write("ncu.txt", NCU_TEXT)
        ncsv = write("ncu.csv", NCU_CSV)
        plain = write("plain.csv", PLAIN_CSV)

        # ncu text, decode section.
        r = run(tmp, "--measured", text, "--predicted", pred, "--markdown")
        check("ncu text decode: exit 0", r.returncode == 0, r.stderr)
        rows = table(r.stdout)
        expect_row("ncu text decode", rows, "k1_gemv", 10, "10.00", "10.00", "1.00", "", "memory")
        expect_row("ncu text decode", rows, "k6_gemv", 2, "25.00", "50.00", "2.00", "outside 30%",
                   "instructions")
        expect_row("ncu text decode", rows, "k2_attn", 10, "2.00", "-", "-", "no prediction: no cost model")
        expect_row("ncu text decode", rows, "k9_unknown", 1, "5.00", "-", "-",
                   "no prediction: not in the artifact")
        expect_row("ncu text decode", rows, "k1_gemm", 2, "75.00", "-", "-",
                   "no prediction: does not run at decode 1x4")
        expect_row("ncu text decode", rows, "k7_extra", 0, "-", "3.00", "-", "not measured")
        # 10 x 10 + 2 x 50 predicted over 100 + 50 measured.
        expect_row("ncu text decode", rows, "total (kernels with a prediction)", 12, "150.0", "200.0",
                   "1.33", "microseconds in all, not per launch")
        check("ncu text decode: the prefill section is not read", "k1_gemm" in rows
              and rows["k1_gemm"][1] == "2" and "0.250" not in r.stdout)
        r = run(tmp, "--measured", text, "--predicted", pred, "--fail-outside")
        check("ncu text decode --fail-outside: exit 1", r.returncode == 1, r.stderr)
        check("plain table names the flag", "outside 30%" in r.stdout and "| " not in r.stdout)

        # ncu text, prefill section: its shape's predictions.
        r = run(tmp, "--measured", text, "--predicted", pred, "--section", "prefill", "--markdown",
                "--fail-outside")
        check("ncu text prefill: exit 0 (all within 30%)", r.returncode == 0, r.stdout + r.stderr)
        rows = table(r.stdout)
        expect_row("ncu text prefill", rows, "k1_gemm", 2, "125.00", "100.00", "0.80", "", "tensor")
        expect_row("ncu text prefill", rows, "k6_gemv", 1, "50.00", "50.00", "1.00", "")
        check("ncu text prefill: shape named", 'shape "prefill 16"' in r.stdout)

        # ncu CSV: summed and counted per kernel, other metrics and ==PROF== skipped.
        r = run(tmp, "--measured", ncsv, "--predicted", pred, "--markdown")
        check("ncu CSV: exit 0", r.returncode == 0, r.stderr)
        rows = table(r.stdout)
        expect_row("ncu CSV", rows, "k1_gemv", 3, "10.00", "10.00", "1.00", "")
        expect_row("ncu CSV", rows, "k6_gemv", 2, "70.00", "50.00", "0.71", "")
        expect_row("ncu CSV", rows, "k2_attn", 1, "4.00", "-", "-", "no prediction: no cost model")

        # --step-us: 6 launches, 174 us measured; the report's step has 5
        # launches, so 145 us of kernels per step; (200 - 145) / 5 = 11.
        r = run(tmp, "--measured", ncsv, "--predicted", pred, "--step-us", "200")
        check("--step-us: exit 0", r.returncode == 0, r.stderr)
        check("--step-us: the gap per launch", "145.0 us of kernels per step" in r.stdout and
              "11.00 us per launch" in r.stdout, r.stdout[-400:])
        r = run(tmp, "--measured", ncsv, "--predicted", pred, "--step-us", "-1")
        check("--step-us -1: exit 2", r.returncode == 2 and "positive" in r.stderr, r.stderr)

        # plain CSV.
        r = run(tmp, "--measured", plain, "--predicted", pred, "--markdown", "--fail-outside")
        check("plain CSV --fail-outside: exit 1", r.returncode == 1, r.stderr)
        rows = table(r.stdout)
        expect_row("plain CSV", rows, "k1_gemv", 4, "15.00", "10.00", "0.67", "outside 30%")
        expect_row("plain CSV", rows, "k6_gemv", 1, "45.50", "50.00", "1.10", "")

        # --artifact: runs `LLMC inspect ...` (a stand-in that checks its flags).
        fake = write("fake-llmc", f"""#!{sys.executable}
import sys
want = ["inspect", "ART", "--kernels", "--json", "--decode=1,4", "--prefill=16"]
if sys.argv[1:] != want:
    sys.exit("fake llmc: got %r, want %r" % (sys.argv[1:], want))
print(open({pred!r}).read())
""")
        os.chmod(fake, 0o755)
        r = run(tmp, "--measured", text, "--artifact", "ART", "--llmc", fake, "--decode", "1,4",
                "--section", "prefill", "--markdown")
        check("--artifact (prefill T from the section header): exit 0", r.returncode == 0, r.stderr)
        expect_row("--artifact", table(r.stdout), "k1_gemm", 2, "125.00", "100.00", "0.80", "")
        r = run(tmp, "--measured", text, "--artifact", "ART", "--llmc", fake, "--decode", "1,8")
        check("--artifact, inspect fails: exit 2", r.returncode == 2 and "failed" in r.stderr, r.stderr)

        # Bad input: exit 2 with the file and line.
        bad_text = write("bad.txt", NCU_TEXT.replace("k6_gemv            n=   2    0.050 ms",
                                                     "k6_gemv            n=   2    fast"))
        r = run(tmp, "--measured", bad_text, "--predicted", pred)
        check("malformed ncu text row: exit 2, file:line", r.returncode == 2 and
              f"{bad_text}:3:" in r.stderr and not r.stdout, r.stderr)
        bad_csv = write("bad.csv", NCU_CSV.replace('"nsecond","10,000"', '"nsecond","n/a"'))
        r = run(tmp, "--measured", bad_csv, "--predicted", pred)
        check("ncu CSV, a value not a number: exit 2, file:line",
              r.returncode == 2 and f"{bad_csv}:6:" in r.stderr, r.stderr)
        short_csv = write("short.csv", NCU_CSV.replace(',"9.0","Command line profiler metrics"', "", 1))
        r = run(tmp, "--measured", short_csv, "--predicted", pred)
        check("ncu CSV, a row short of fields: exit 2, file:line",
              r.returncode == 2 and f"{short_csv}:4:" in r.stderr, r.stderr)
        bad_plain = write("bad-plain.csv", PLAIN_CSV + "k2_attn,two,3\n")
        r = run(tmp, "--measured", bad_plain, "--predicted", pred)
        check("plain CSV, launches not an integer: exit 2, file:line",
              r.returncode == 2 and f"{bad_plain}:5:" in r.stderr, r.stderr)
        bad_json = write("bad.json", json.dumps(REPORT, indent=2)[:-40])
        r = run(tmp, "--measured", text, "--predicted", bad_json)
        check("truncated JSON: exit 2, file:line", r.returncode == 2 and f"{bad_json}:" in r.stderr
              and "not JSON" in r.stderr, r.stderr)
        r = run(tmp, "--measured", text, "--predicted", write("manifest.json", '{"model": {}}'))
        check("JSON that is no kernel report: exit 2", r.returncode == 2 and "not an" in r.stderr,
              r.stderr)
        r = run(tmp, "--measured", text, "--predicted", pred, "--section", "serving")
        check("no such section: exit 2, naming the sections", r.returncode == 2 and
              "decode step, 1 sequence" in r.stderr, r.stderr)
        only_decode = dict(REPORT, shapes=[{"name": D}])
        r = run(tmp, "--measured", text, "--section", "prefill", "--predicted",
                write("decode-only.json", json.dumps(only_decode)))
        check("no prefill shape in the report: exit 2", r.returncode == 2 and "--prefill" in r.stderr,
              r.stderr)
        r = run(tmp, "--measured", write("other.csv", "kx,1,5\n"), "--predicted", pred)
        check("no measured kernel has a prediction: exit 2", r.returncode == 2 and r.stdout, r.stderr)
        r = run(tmp, "--measured", os.path.join(tmp, "missing.txt"), "--predicted", pred)
        check("missing measured file: exit 2", r.returncode == 2 and "missing.txt" in r.stderr, r.stderr)

    if failures:
        print(f"kernel-model-check-selftest: {len(failures)} FAILED")
        for f in failures:
            print("  " + f)
        return 1
    print("kernel-model-check-selftest: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
