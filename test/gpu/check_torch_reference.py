#!/usr/bin/env python3
"""Checks test/gpu/torch_reference.py (PyTorch float32) against
test/reference/reference_forward.py (numpy float64): by hand, wherever
PyTorch is importable (not part of CI).

Every synthetic shape of scripts/gpu-payload.sh (read from its `shapes`
list), written with the same seed by tools/synth-model, loaded the way the
GPU check loads it (ReferenceModel.from_gguf / from_hf_folder), plus shapes
for the branches the payload does not reach (HF llama3 and linear RoPE
scaling, a GGUF with linear scaling, qwen2 as GGUF, an untied MHA model):
64 tokens (as the payload: 40 prefill + 24 decode, here one full forward),
max over rows of max |torch - ref| / max |ref| under --tol (1e-4), and the
top-1 agreement. With --payload DIR the payload's own model files
(synth/<name>.model.gguf or .model/) are also checked against its stored
reference logits (synth/<name>.ref.npz).

    python3 test/gpu/check_torch_reference.py [--payload build-gpu-payload] [--tol 1e-4]

Exit status: 0 all agree, 1 one does not, 77 PyTorch is not importable
(nothing was checked).
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zlib

import numpy as np

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path[:0] = [os.path.join(REPO, "test", "reference"), os.path.join(REPO, "test", "gpu")]
import reference_forward as rf  # noqa: E402

# Beyond the payload's shapes: the remaining RoPE scaling paths and layouts.
EXTRA = [
    ("hf-llama3-scaling", "--arch llama --vocab 271 --hidden 128 --heads 4 --kv-heads 2 "
     "--intermediate 192 --layers 2 --rope-scaling llama3:8,1,4,16 --max-position 512 "
     "--dtype f32", "hf"),
    ("hf-linear-scaling-mha", "--arch llama --vocab 260 --hidden 64 --heads 4 --kv-heads 4 "
     "--intermediate 96 --layers 2 --rope-scaling linear:4 --no-tie-embeddings --dtype f16", "hf"),
    ("gguf-linear-scaling", "--arch llama --vocab 260 --hidden 64 --heads 4 --kv-heads 2 "
     "--intermediate 96 --layers 2 --rope-scaling linear:2 --gguf-type q8_0", "gguf"),
    ("gguf-qwen2-q4_0", "--arch qwen2 --vocab 290 --hidden 64 --heads 4 --kv-heads 2 "
     "--intermediate 128 --layers 2 --gguf-type q4_0", "gguf"),
]


def payload_shapes():
    """(name, synth flags, kind) of scripts/gpu-payload.sh's shapes list."""
    text = open(os.path.join(REPO, "scripts", "gpu-payload.sh"), encoding="utf-8").read()
    block = re.search(r"^shapes=\((.*?)^\)", text, re.S | re.M)
    if not block:
        sys.exit("check_torch_reference: no shapes=( ... ) list in scripts/gpu-payload.sh")
    rows = re.findall(r'^\s*"([^|"]+)\|([^|"]+)\|(gguf|hf)"', block.group(1), re.M)
    if not rows:
        sys.exit("check_torch_reference: empty shapes list in scripts/gpu-payload.sh")
    return rows


def load(path, kind):
    return rf.ReferenceModel.from_gguf(path) if kind == "gguf" else rf.ReferenceModel.from_hf_folder(path)


def compare(got, want):
    err = np.abs(got - want).max(axis=1) / np.maximum(np.abs(want).max(axis=1), 1e-30)
    return float(err.max()), float((got.argmax(axis=1) == want.argmax(axis=1)).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--payload", help="also check a payload's model files against its .ref.npz")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    args = ap.parse_args()
    try:
        import torch
        import torch_reference as tr
    except ImportError as e:
        print("#" * 72)
        print(f"# SKIPPED: PyTorch is not importable ({e}); NOTHING was checked.")
        print("#" * 72)
        return 77
    device = args.device or str(tr.default_device())
    print(f"torch {torch.__version__} on {device}; float32 vs the float64 reference, "
          f"tolerance {args.tol:g} (max |torch - ref| / max |ref| per row)")
    ok = True
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for source, shapes in (("payload", payload_shapes()), ("extra", EXTRA)):
            for name, flags, kind in shapes:
                path = os.path.join(tmp, name + (".gguf" if kind == "gguf" else ""))
                subprocess.run([sys.executable, os.path.join(REPO, "tools", "synth-model", "synth_model.py"),
                                "--format", kind, "--out", path, "--seed", "11", *shlex.split(flags)],
                               check=True, stdout=subprocess.DEVNULL)
                m = load(path, kind)
                rng = np.random.default_rng(zlib.crc32(name.encode()))
                tokens = rng.integers(0, m.cfg.vocab, 64).tolist()
                want = m.forward(tokens)
                err, top1 = compare(tr.forward(m, tokens, device).astype(np.float64), want)
                good = err < args.tol and top1 == 1.0
                ok &= good
                worst = max(worst, err)
                print(f"{'PASS' if good else 'FAIL'} {source:7} {name:22} max rel err {err:.2e}, "
                      f"top-1 {top1:.3f}  ({m.cfg.summary()})")
    if args.payload:
        refs = sorted(glob.glob(os.path.join(args.payload, "synth", "*.ref.npz")))
        if not refs:
            print(f"FAIL no synth/*.ref.npz under {args.payload}")
            ok = False
        for ref_path in refs:
            name = os.path.basename(ref_path)[: -len(".ref.npz")]
            base = os.path.join(args.payload, "synth", name + ".model")
            if os.path.isfile(base + ".gguf"):
                m = load(base + ".gguf", "gguf")
            elif os.path.isdir(base):
                m = load(base, "hf")
            else:
                print(f"FAIL payload {name}: no {base}.gguf or {base}/")
                ok = False
                continue
            ref = np.load(ref_path)
            err, top1 = compare(tr.forward(m, ref["tokens"].tolist(), device).astype(np.float64),
                                ref["logits"].astype(np.float64))
            # The stored logits are float32: a little more room than --tol.
            good = err < 2 * args.tol and top1 == 1.0
            ok &= good
            print(f"{'PASS' if good else 'FAIL'} payload {name:22} model file vs its ref.npz: "
                  f"max rel err {err:.2e}, top-1 {top1:.3f}")
    print(f"{'all agree' if ok else 'DISAGREEMENT'}: worst synthetic max rel err {worst:.2e}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
