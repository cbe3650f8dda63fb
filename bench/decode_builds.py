#!/usr/bin/env python3
"""Batch-1 decode tokens/s of several llmc builds and llama.cpp, interleaved, in one run.

Each engine is NAME=EXE:MODEL. EXE is an `llmc-rt` (or `llmc`) measured with its
`bench` command on MODEL, an artifact; or a `llama-bench` (any EXE whose name
contains "llama-bench") measured on MODEL, a GGUF. Both run `-p 0 -n N -d DEPTH
-r REPS -t THREADS`: tgN after a DEPTH-token context, the way llama-bench
defines it, so the numbers compare directly.

Every round runs each engine once, in an order rotated by one per round, after
waiting for the machine to go idle; a round's value is the median of its REPS
samples. The report gives each engine's median over the rounds and, for every
pair, the median and range of the per-round ratios: on a noisy shared VM the
paired ratio of one round is the number to trust, not an absolute tok/s.

    python3 bench/decode_builds.py --rounds 8 --n 128 --depth 0 \\
        old=/path/to/old/llmc-rt:old.llmc new=build/bin/llmc-rt:new.llmc \\
        llama.cpp=/path/to/llama-bench:model.gguf

See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def parse_engine(spec: str) -> tuple[str, str, str]:
    name, sep, rest = spec.partition("=")
    exe, sep2, model = rest.partition(":")
    if not sep or not sep2 or not name or not exe or not model:
        sys.exit(f"decode_builds: engine '{spec}' is not NAME=EXE:MODEL")
    exe, model = os.path.expanduser(exe), os.path.expanduser(model)
    for what, path in (("executable", exe), ("model", model)):
        if not os.path.exists(path):
            sys.exit(f"decode_builds: engine '{name}': {what} {path} does not exist")
    return name, exe, model


def is_llama_bench(exe: str) -> bool:
    return "llama-bench" in os.path.basename(exe)


def measure(exe: str, model: str, a: argparse.Namespace) -> list[float]:
    """The tok/s samples of one engine's tgN run."""
    common = ["-p", "0", "-n", str(a.n), "-d", str(a.depth), "-r", str(a.reps), "-t",
              str(a.threads)]
    if is_llama_bench(exe):
        cmd = [exe, "-m", model, *common, "-o", "json", *a.llama_args.split()]
    else:
        cmd = [exe, "bench", model, *common, "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"decode_builds: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    tests = doc if isinstance(doc, list) else doc["tests"]
    gen = [t for t in tests if t.get("n_gen", 0) > 0]
    if not gen:
        sys.exit(f"decode_builds: {' '.join(cmd)} reported no decode test")
    return [float(x) for x in gen[0]["samples_ts"]]


def cpu_idle_fraction(seconds: float = 1.0) -> float:
    def snap() -> tuple[int, int]:
        v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(v), v[3] + v[4]  # idle + iowait

    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return (i1 - i0) / max(t1 - t0, 1)


def wait_for_idle(threshold: float, limit_s: float) -> bool:
    end = time.time() + limit_s
    while time.time() < end:
        if cpu_idle_fraction() >= threshold:
            return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engines", nargs="+", metavar="NAME=EXE:MODEL")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n", type=int, default=128, help="decode tokens per sample (tgN)")
    ap.add_argument("--depth", type=int, default=0, help="context tokens before decoding")
    ap.add_argument("--reps", type=int, default=3, help="samples per engine per round")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--llama-args", default="--repack 0",
                    help="extra llama-bench flags (default: %(default)s; see bench/README.md)")
    ap.add_argument("--idle", type=float, default=0.9,
                    help="wait before each run until this fraction of the CPU is idle (0: never)")
    ap.add_argument("--json", help="also write every sample here")
    a = ap.parse_args()
    if a.rounds < 1 or a.reps < 1 or a.n < 1:
        ap.error("--rounds, --reps and --n must be at least 1")
    engines = [parse_engine(e) for e in a.engines]
    names = [e[0] for e in engines]
    if len(set(names)) != len(names):
        sys.exit("decode_builds: engine names must differ")

    rounds: dict[str, list[float]] = {n: [] for n in names}
    samples: dict[str, list[list[float]]] = {n: [] for n in names}
    for r in range(a.rounds):
        order = engines[r % len(engines):] + engines[:r % len(engines)]
        line = []
        for name, exe, model in order:
            if a.idle > 0 and not wait_for_idle(a.idle, 600):
                print("  (the machine stayed busy for 600 s; measuring anyway)", flush=True)
            s = measure(exe, model, a)
            rounds[name].append(statistics.median(s))
            samples[name].append(s)
            line.append(f"{name} {rounds[name][-1]:6.1f} ({' '.join(f'{x:.1f}' for x in s)})")
        print(f"round {r + 1}: " + " | ".join(line), flush=True)

    print(f"\ndecode tg{a.n} at depth {a.depth}, {a.threads} threads, {a.rounds} rounds x "
          f"{a.reps} reps; median [min - max] of the rounds' medians:")
    for n in names:
        v = rounds[n]
        print(f"  {n:14s} {statistics.median(v):7.1f} tok/s  [{min(v):.1f} - {max(v):.1f}]")
    print("per-round ratios, median [min - max] (above 1: the first is faster):")
    ratios = {}
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            pr = [p / q for p, q in zip(rounds[x], rounds[y])]
            ratios[f"{x}/{y}"] = pr
            print(f"  {x + '/' + y:24s} {statistics.median(pr):.3f} [{min(pr):.3f} - {max(pr):.3f}]")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "engines": engines, "samples": samples,
                       "round_medians": rounds, "ratios": ratios}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
