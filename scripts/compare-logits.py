#!/usr/bin/env python3
"""Checks that two builds of llmc compute the same logits, bit for bit.

For a refactoring that must not change numerics: compiles the same seeded
synthetic models (several architectures, HF and GGUF weights, f32 and q8
host activations, fused and unfused, and a SmolLM2 GGUF when present) with
two `llmc` binaries, runs each artifact's teacher-forced logits (a chunked
prefill, then decode steps) with its own build's `llmc-rt`, and compares the
float32 files byte for byte. Prints one line per case and exits 1 on any
difference.

  scripts/compare-logits.py --old OLD/bin --new NEW/bin [--work DIR] [--smollm2 GGUF]

The generated host kernels may differ in text where a pass moved a
decision into the IR; --show-kernel-diff prints how many lines of each
kernels.cpp changed, so a reader can see where.
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")

# name -> (synth_model.py options, form, gguf type)
MODELS = {
    "llama-gqa": (["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4",
                   "--kv-heads", "2", "--head-dim", "64", "--intermediate", "384", "--layers", "2",
                   "--tie-embeddings"], "hf", None),
    "qwen2-bias": (["--arch", "qwen2", "--vocab", "300", "--hidden", "128", "--heads", "4",
                    "--kv-heads", "2", "--intermediate", "256", "--layers", "2",
                    "--no-tie-embeddings", "--rope-theta", "1000000"], "hf", None),
    "llama3-scaled-q8_0": (["--arch", "llama", "--vocab", "333", "--hidden", "128", "--heads", "8",
                            "--kv-heads", "2", "--intermediate", "256", "--layers", "3",
                            "--rope-scaling", "llama3:8,1,4,16", "--max-position", "512"],
                           "gguf", "q8_0"),
    "mistral-window-q4_1": (["--arch", "mistral", "--vocab", "300", "--hidden", "128", "--heads",
                             "4", "--kv-heads", "1", "--intermediate", "256", "--layers", "2",
                             "--sliding-window", "9"], "gguf", "q4_1"),
    "llama-q3_k": (["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4",
                    "--kv-heads", "4", "--intermediate", "512", "--layers", "2"], "gguf", "q3_k"),
}
# compile flag sets per model
VARIANTS = {"fused": [], "unfused": ["--no-fuse"], "f32-act": ["--host-activations=f32"]}
TOKENS = [(i * 37 + 11) % 250 for i in range(40)]
PREFILL = 24


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare-logits: {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout


def logits(bindir, model, art, extra):
    run([os.path.join(bindir, "llmc"), "compile", model, "-o", art, *extra])
    out = art + ".f32"
    run([os.path.join(bindir, "llmc-rt"), "logits", art, "--tokens", ",".join(map(str, TOKENS)),
         "--prefill", str(PREFILL), "--threads", "2", "--block-size", "16", "-o", out])
    with open(out, "rb") as f:
        return f.read()


def kernel_lines(art):
    with open(os.path.join(art, "kernels", "host", "src", "kernels.cpp")) as f:
        return f.read().splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="bin folder of the reference build")
    ap.add_argument("--new", required=True, help="bin folder of the build under test")
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    ap.add_argument("--smollm2", help="SmolLM2 GGUF to include (default: ~/.cache/llmc/models)")
    ap.add_argument("--show-kernel-diff", action="store_true")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="llmc-compare-")
    cases = []
    for name, (opts, form, gtype) in MODELS.items():
        path = os.path.join(work, name + (".gguf" if form == "gguf" else "-hf"))
        if not os.path.exists(path):
            cmd = [sys.executable, SYNTH, "--format", form, "--out", path, "--seed", "5", *opts]
            run(cmd + (["--gguf-type", gtype] if gtype else []))
        for variant, flags in VARIANTS.items():
            cases.append((f"{name}/{variant}", path, flags))
    smollm2 = args.smollm2 or os.path.expanduser(
        "~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(smollm2):
        cases.append(("smollm2/fused", smollm2, []))
    else:
        print(f"compare-logits: SKIPPED SmolLM2 (not found at {smollm2})")
    differ = 0
    for case, model, flags in cases:
        tag = case.replace("/", "-")
        old_art = os.path.join(work, f"{tag}.old.llmc")
        new_art = os.path.join(work, f"{tag}.new.llmc")
        same = logits(args.old, model, old_art, flags) == logits(args.new, model, new_art, flags)
        differ += not same
        note = ""
        if args.show_kernel_diff:
            diff = [l for l in difflib.unified_diff(kernel_lines(old_art), kernel_lines(new_art),
                                                     lineterm="", n=0)
                    if l[:1] in "+-" and l[:3] not in ("+++", "---")]
            note = f"  (kernels.cpp: {len(diff)} lines differ)"
        print(f"{'identical' if same else 'DIFFERENT'}  {case}{note}")
    print(f"compare-logits: {len(cases) - differ} identical, {differ} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
