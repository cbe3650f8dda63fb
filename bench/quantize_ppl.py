#!/usr/bin/env python3
"""Quantization accuracy on SmolLM2-135M: perplexity of llmc's w8a16 and
w4a16 artifacts against the same model's f16 weights.

The f16 Hugging Face folder is made by the project's own tool
(tools/gguf-to-hf) from the Q4_1 GGUF, so every number below is relative to
that dequantized model. Perplexity is `llmc perplexity` on the committed
text (test/data/text/eval-2k.txt, ctx 512, llama.cpp's method).

Goals (issue #5): w8a16 group 128 rises less than 1%, w4a16 group 128 less
than 6%. Exit 0 when both hold, 1 otherwise, 77 (printed loudly) when the
GGUF is absent (scripts/fetch-model fetches it). About 1 minute on two
cores (2 with --more). Not in ctest: the w4a16 goal is not met yet (plain
RTN at group 128 costs SmolLM2-135M about +43%; see the pass docs).

  python3 bench/quantize_ppl.py [--llmc build/bin/llmc] [--more] [--keep DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = os.path.join(ROOT, "test", "data", "text", "eval-2k.txt")
GOALS = {("w8a16", 128, ""): 0.01, ("w4a16", 128, ""): 0.06}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--gguf", default=GGUF)
    ap.add_argument("--more", action="store_true",
                    help="also groups 32/64 and w4a16 with lm_head kept in f16")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--keep", help="keep the HF folder and artifacts in DIR")
    a = ap.parse_args()
    if not os.path.exists(a.gguf):
        print(f"SKIPPED: model not found: {a.gguf} (scripts/fetch-model fetches it)")
        return 77
    work = a.keep or tempfile.mkdtemp(prefix="llmc-qppl-")
    os.makedirs(work, exist_ok=True)
    try:
        hf = os.path.join(work, "smollm2-f16")
        if not os.path.exists(os.path.join(hf, "model.safetensors")):
            run([sys.executable, os.path.join(ROOT, "tools", "gguf-to-hf", "gguf_to_hf.py"),
                 a.gguf, hf, "--dtype", "f16"])
        configs = [("none", 0, ""), ("w8a16", 128, ""), ("w4a16", 128, "")]
        if a.more:
            configs += [("w8a16", 32, ""), ("w4a16", 64, ""), ("w4a16", 32, ""),
                        ("w4a16", 128, "lm_head")]
        results = {}
        for mode, group, skip in configs:
            art = os.path.join(work, f"{mode}-g{group}-{skip or 'all'}.llmc")
            cmd = [a.llmc, "compile", hf, "-o", art, "--no-fuse"]
            if mode != "none":
                cmd += [f"--quantize={mode}", f"--quantize-group={group}"]
                if skip:
                    cmd.append(f"--quantize-skip={skip}")
            run(cmd)
            out = run([a.llmc, "perplexity", art, "--file", TEXT, "--ctx", "512",
                       "--threads", a.threads])
            m = re.search(r"PPL = ([0-9.]+)", out)
            if not m:
                sys.exit(f"no perplexity in:\n{out}")
            results[(mode, group, skip)] = float(m.group(1))
            shutil.rmtree(art, ignore_errors=True)
        base = results[("none", 0, "")]
        ok = True
        print(f"{'config':<28} {'PPL':>8} {'vs f16':>8}  goal")
        for key, ppl in results.items():
            mode, group, skip = key
            name = "f16 (no quantization)" if mode == "none" else \
                f"{mode} g{group}" + (f" skip {skip}" if skip else "")
            rise = ppl / base - 1
            goal = GOALS.get(key)
            verdict = "" if goal is None else (f"< {goal:.0%}: " + ("ok" if rise < goal else "MISSED"))
            ok &= goal is None or rise < goal
            print(f"{name:<28} {ppl:8.4f} {rise:+8.2%}  {verdict}")
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
