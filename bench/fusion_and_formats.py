#!/usr/bin/env python3
"""What fusion and the weight format buy (issue #5): one model compiled several
ways, each measured with `llmc bench --json`, in one invocation.

Variants, for each model source given:
  fused      `llmc compile SRC` (the default pipeline)
  unfused    `llmc compile SRC --no-fuse` (one kernel per op: the baseline)
and, for each Hugging Face folder (--hf), once per --quantize mode asked for
(`--quantize=none|w8a16|w4a16`; without --quantize the flag is not passed and
the compiler's default applies). A GGUF keeps its stored formats.

Every artifact is measured by the runtime-only executable (`llmc-rt bench`,
the same command as `llmc bench`, without LLVM's pages in its RSS) with the
same prompt lengths, decode length, threads and seed. With --rounds R > 1 the
variants are measured in turn R times (A, B, A, B, ...) so that a change in
machine load hits them alike, and the samples are pooled.

    python3 bench/fusion_and_formats.py                      # SmolLM2 GGUF, fused vs unfused
    python3 bench/fusion_and_formats.py --hf ~/models/SmolLM2-135M-Instruct \\
        --quantize none,w8a16,w4a16 --threads 2 -r 5

See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_GGUF = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")
QUANTIZE_MODES = ("none", "w8a16", "w4a16")


def die(msg: str) -> None:
    print(f"fusion_and_formats: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", action="append", default=[],
                    help=f"GGUF model (repeatable; default {DEFAULT_GGUF} when no --gguf/--hf)")
    ap.add_argument("--hf", action="append", default=[],
                    help="Hugging Face model folder (repeatable)")
    ap.add_argument("--quantize", default="",
                    help="comma-separated --quantize modes for the --hf folders: none,w8a16,w4a16 "
                         "(default: do not pass --quantize)")
    ap.add_argument("--no-unfused", action="store_true", help="skip the --no-fuse variants")
    ap.add_argument("--threads", "-t", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--prompt-tokens", "-p", default="128,512", help="llmc bench -p")
    ap.add_argument("--gen-tokens", "-n", type=int, default=64, help="llmc bench -n")
    ap.add_argument("--repetitions", "-r", type=int, default=3, help="llmc bench -r, per round")
    ap.add_argument("--rounds", type=int, default=1, help="measure every variant this many times, in turn")
    ap.add_argument("--llmc", default=os.path.join(REPO, "build", "bin", "llmc"),
                    help="compiler executable")
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "bin", "llmc-rt"),
                    help="executable whose `bench` command measures (llmc-rt or llmc)")
    ap.add_argument("--keep", help="compile the artifacts into this folder and keep them "
                                   "(default: a temporary folder, removed at the end)")
    ap.add_argument("--json", help="write every variant's results to this file")
    a = ap.parse_args()
    modes = [m for m in a.quantize.split(",") if m]
    bad = [m for m in modes if m not in QUANTIZE_MODES]
    if bad:
        die(f"--quantize: unknown mode {bad[0]!r} (expected a comma-separated list of "
            f"{', '.join(QUANTIZE_MODES)})")
    if modes and not a.hf:
        die("--quantize applies to --hf folders, and none was given")
    a.quantize = modes
    for flag, v in (("--threads", a.threads), ("--repetitions", a.repetitions),
                    ("--rounds", a.rounds)):
        if v < 1:
            die(f"{flag} must be >= 1, got {v}")
    if not a.gguf and not a.hf:
        a.gguf = [DEFAULT_GGUF]
    for path in a.gguf:
        if not os.path.isfile(path):
            die(f"--gguf: {path}: no such file (scripts/fetch-model fetches the default model)")
    for path in a.hf:
        if not os.path.isfile(os.path.join(path, "config.json")):
            die(f"--hf: {path}: not a Hugging Face model folder (no config.json)")
    for flag, exe in (("--llmc", a.llmc), ("--bench", a.bench)):
        if not os.access(exe, os.X_OK):
            die(f"{flag}: {exe} is not an executable (build it: ninja -C build llmc llmc-rt)")
    return a


def variants(a: argparse.Namespace) -> list[dict]:
    out = []
    sources = [(p, "gguf", [None]) for p in a.gguf] + [(p, "hf", a.quantize or [None]) for p in a.hf]
    for path, kind, modes in sources:
        name = os.path.basename(os.path.normpath(path))
        for mode in modes:
            for fused in (True, False) if not a.no_unfused else (True,):
                flags = ([] if fused else ["--no-fuse"]) + ([f"--quantize={mode}"] if mode else [])
                fmt = kind if mode is None else f"{kind} {mode}"
                out.append(dict(source=path, name=name, format=fmt, fused=fused, flags=flags))
    return out


def compile_variant(a: argparse.Namespace, v: dict, outdir: str, index: int) -> str | None:
    """Compiles v into outdir; returns an error message, or None."""
    v["artifact"] = os.path.join(outdir, f"v{index}.llmc")
    cmd = [a.llmc, "compile", v["source"], "-o", v["artifact"]] + v["flags"]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    v["compile_seconds"] = time.monotonic() - t0
    if r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip()).splitlines()
        hint = ""
        if any(f.startswith("--quantize") for f in v["flags"]):
            hint = f" (the compiler rejected {' '.join(v['flags'])}; is --quantize built yet?)"
        return f"llmc compile failed (exit {r.returncode}){hint}: {' | '.join(msg[-3:])}"
    with open(os.path.join(v["artifact"], "manifest.json")) as f:
        m = json.load(f)
    v["launches"] = len(m["steps"])
    v["kernels"] = len(m["kernels"])
    v["weight_bytes"] = m["weights"]["size"]
    return None


def bench_variant(a: argparse.Namespace, v: dict) -> str | None:
    cmd = [a.bench, "bench", v["artifact"], "-p", a.prompt_tokens, "-n", str(a.gen_tokens),
           "-r", str(a.repetitions), "-t", str(a.threads), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return f"{' '.join(cmd[:2])} failed (exit {r.returncode}): {r.stderr.strip()}"
    j = json.loads(r.stdout)
    v.setdefault("samples", {})
    for t in j["tests"]:
        v["samples"].setdefault(t["test"], []).extend(t["samples_ts"])
    v["peak_rss_bytes"] = max(v.get("peak_rss_bytes", 0), j["peak_rss_bytes"])
    v["threads"] = j["threads"]
    return None


def stats(samples: list[float]) -> tuple[float, float]:
    return statistics.fmean(samples), statistics.stdev(samples) if len(samples) > 1 else 0.0


def label(v: dict) -> str:
    return f"{v['name']} [{v['format']}] {'fused' if v['fused'] else 'unfused'}"


def report(vs: list[dict]) -> None:
    ok = [v for v in vs if "samples" in v]
    tests = list(dict.fromkeys(t for v in ok for t in v["samples"]))
    width = max([len(label(v)) for v in vs] + [10])
    head = f"{'variant':<{width}}  {'launches':>8}  {'weights':>9}  {'RSS':>9}"
    head += "".join(f"  {t + ' t/s':>22}" for t in tests)
    print(head)
    print("-" * len(head))
    for v in vs:
        if "error" in v:
            print(f"{label(v):<{width}}  FAILED: {v['error']}")
            continue
        line = (f"{label(v):<{width}}  {v['launches']:>8}  {v['weight_bytes'] / 2**20:>7.1f}Mi"
                f"  {v['peak_rss_bytes'] / 2**20:>7.1f}Mi")
        for t in tests:
            mean, sd = stats(v["samples"][t])
            line += f"  {f'{mean:.2f} ± {sd:.2f}':>22}"
        print(line)
    # Ratios: fused over unfused of the same source and format, then every
    # variant over the first one of its source (its first format, fused).
    print()
    for v in ok:
        if not v["fused"]:
            continue
        base = next((u for u in ok if not u["fused"] and u["source"] == v["source"]
                     and u["format"] == v["format"]), None)
        if base:
            print(f"fused / unfused  {v['name']} [{v['format']}]: " + "  ".join(
                f"{t} {stats(v['samples'][t])[0] / stats(base['samples'][t])[0]:.2f}x"
                for t in tests if t in base["samples"]))
    for src in dict.fromkeys(v["source"] for v in ok):
        group = [v for v in ok if v["source"] == src]
        if len({v["format"] for v in group}) < 2:
            continue
        base = group[0]
        for v in group[1:]:
            if not v["fused"]:
                continue
            print(f"{v['format']} / {base['format']}  {v['name']} (fused): " + "  ".join(
                f"{t} {stats(v['samples'][t])[0] / stats(base['samples'][t])[0]:.2f}x"
                for t in tests if t in base["samples"]))
    print("(ratio > 1: the first variant named is faster)")


def main() -> int:
    a = parse_args()
    vs = variants(a)
    outdir = a.keep or tempfile.mkdtemp(prefix="llmc-fusion-bench-")
    os.makedirs(outdir, exist_ok=True)
    try:
        load = os.getloadavg()[0]
        print(f"fusion_and_formats: {len(vs)} variants, threads {a.threads}, -p {a.prompt_tokens} "
              f"-n {a.gen_tokens}, {a.repetitions} repetitions x {a.rounds} rounds; "
              f"load average {load:.2f}{' (busy machine: numbers are noisy)' if load > 1 else ''}",
              file=sys.stderr)
        for i, v in enumerate(vs):
            print(f"  compiling {label(v)}: llmc compile {' '.join(v['flags'])}", file=sys.stderr)
            err = compile_variant(a, v, outdir, i)
            if err:
                v["error"] = err
                print(f"  error: {label(v)}: {err}", file=sys.stderr)
        for rnd in range(a.rounds):
            for v in vs:
                if "error" in v:
                    continue
                print(f"  round {rnd + 1}/{a.rounds}: bench {label(v)}", file=sys.stderr)
                err = bench_variant(a, v)
                if err:
                    v["error"] = err
                    v.pop("samples", None)
                    print(f"  error: {label(v)}: {err}", file=sys.stderr)
        report(vs)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(dict(args=vars(a), variants=vs), f, indent=2)
    finally:
        if not a.keep:
            shutil.rmtree(outdir, ignore_errors=True)
    return 1 if any("error" in v for v in vs) else 0


if __name__ == "__main__":
    sys.exit(main())
