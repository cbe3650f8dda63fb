#!/usr/bin/env python3
"""End-to-end check of quantized weights: the quantize pass, the weight
store's conversion and the host kernels' i8/i4 decoders together.

For synthetic Hugging Face models (f32, f16 and bf16 sources; tied and untied
embeddings; a QKV bias), `llmc compile --quantize=MODE --quantize-group=G`
each, read the quantized tensors back from the artifact's weight file and
dequantize them with the numpy decoder below (written from the layout in
core/include/llmc/core/format/quantize.h, sharing no code with the C++),
then compare `llmc logits` with test/reference's float64 forward pass on those
dequantized weights. The kernels must read the format exactly as written:
max |llmc - ref| / max |ref| < 1e-4 per row, as for float weights.

Also checked, per artifact: which tensors were quantized (projections and the
lm_head, not norms, biases or an untied embedding table; `skip` honoured; the
group asked for, or a smaller one where the width needs it) and that each
quantized tensor is close to its source (relative RMS error below 1.5% for
i8, 15% for i4), so that a wrong but self-consistent quantizer fails too.

  python3 test/e2e/quantize_logits_test.py --llmc build/bin/llmc [--keep DIR] [-k NAME]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from tally import Tally

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tools", "synth-model"))
import reference_forward as rf  # noqa: E402
import synth_model  # noqa: E402

SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
TOLERANCE = 1e-4
PROMPT = 12
DECODE = 12
MAX_RMS = {"i8": 0.015, "i4": 0.15}

GQA_TIED = ["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4",
            "--kv-heads", "2", "--head-dim", "64", "--intermediate", "384", "--layers", "2",
            "--tie-embeddings"]
# hidden 192: group 128 falls back to 64 for the projections that read it.
QWEN_UNTIED = ["--arch", "qwen2", "--vocab", "300", "--hidden", "192", "--heads", "4",
               "--kv-heads", "2", "--intermediate", "256", "--layers", "2",
               "--no-tie-embeddings"]

# Qwen3-MoE: the experts' stacks are quantized (the router is not); experts
# 96 wide: group 128 falls back to 32 for the down stack.
QWEN3_MOE = ["--arch", "qwen3moe", "--vocab", "300", "--hidden", "128", "--heads", "4",
             "--kv-heads", "2", "--head-dim", "32", "--experts", "4", "--experts-per-tok", "2",
             "--moe-intermediate", "96", "--layers", "2", "--no-tie-embeddings"]

# name -> (synth options, --quantize, group, skip list)
CASES = {
    "w4a16-g128-f32-qwen3moe": (QWEN3_MOE + ["--dtype", "f32"], "w4a16", 128, []),
    "w8a16-g64-bf16-qwen3moe": (QWEN3_MOE + ["--dtype", "bf16"], "w8a16", 64, []),
    "w8a16-g128-f32-tied": (GQA_TIED + ["--dtype", "f32"], "w8a16", 128, []),
    "w4a16-g128-bf16-tied": (GQA_TIED + ["--dtype", "bf16"], "w4a16", 128, []),
    "w4a16-g32-f16-tied": (GQA_TIED + ["--dtype", "f16"], "w4a16", 32, []),
    "w8a16-g64-f32-qwen": (QWEN_UNTIED + ["--dtype", "f32"], "w8a16", 64, []),
    "w4a16-g128-f32-qwen-skip": (QWEN_UNTIED + ["--dtype", "f32"], "w4a16", 128,
                                 ["lm_head", "down_proj"]),
}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def dequantize(buf, fmt, group, shape):
    """The independent decoder: i8 = f16 s | int8 q[G] -> q*s; i4 = f16 s |
    f16 z | nibbles in 16-byte chunks per 32 elements (low nibble element j,
    high nibble element j+16) -> (q - z) * s."""
    n = int(np.prod(shape))
    groups = n // group
    if fmt == "i8":
        blocks = np.frombuffer(buf, np.uint8).reshape(groups, group + 2)
        s = blocks[:, :2].copy().view(np.float16).astype(np.float32)
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        return (q * s).reshape(shape)
    blocks = np.frombuffer(buf, np.uint8).reshape(groups, group // 2 + 4)
    s = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    z = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    chunks = blocks[:, 4:].reshape(groups, group // 32, 16)
    q = np.concatenate([chunks & 0x0F, chunks >> 4], axis=2).reshape(groups, group)
    return ((q.astype(np.float32) - z) * s).reshape(shape)


def expected_format(name, tied, mode, skip):
    """What the pass's rule says `name` becomes: "i8"/"i4" or None (kept)."""
    projection = name.endswith("_proj.weight") or name == "lm_head.weight" or (
        tied and name == "model.embed_tokens.weight")
    lm_head = name == "lm_head.weight" or (tied and name == "model.embed_tokens.weight")
    if not projection or any(s in name or (s == "lm_head" and lm_head) for s in skip):
        return None
    return "i8" if mode == "w8a16" else "i4"


def expert_parts(source, name):
    """The checkpoint's tensors behind an artifact's stack of experts
    (model.layers.L.mlp.experts.P -> ...experts.E.P, E = 0, 1, ...); empty
    for any other name."""
    if ".experts." not in name:
        return []
    prefix, proj = name.rsplit(".experts.", 1)
    parts = []
    while f"{prefix}.experts.{len(parts)}.{proj}" in source:
        parts.append(f"{prefix}.experts.{len(parts)}.{proj}")
    return parts


def check(llmc, name, case, work):
    opts, mode, group, skip = case
    model = os.path.join(work, f"{name}-hf")
    run([sys.executable, SYNTH, "--format", "hf", "--out", model, "--seed", "5"] + opts)
    art = os.path.join(work, f"{name}.llmc")
    cmd = [llmc, "compile", model, "-o", art, "--no-fuse", f"--quantize={mode}",
           f"--quantize-group={group}"]
    if skip:
        cmd.append("--quantize-skip=" + ",".join(skip))
    run(cmd)

    with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    source = synth_model.read_hf_weights(model)
    manifest = json.load(open(os.path.join(art, "manifest.json"), encoding="utf-8"))
    blob = open(os.path.join(art, manifest["weights"]["file"]), "rb").read()
    weights = dict(source)
    problems, quantized = [], 0
    for t in manifest["weights"]["tensors"]:
        tname, fmt, shape = t["name"], t["format"], t["shape"]
        want = expected_format(tname, cfg["tie_word_embeddings"], mode, skip)
        if fmt not in ("i8", "i4"):
            if want:
                problems.append(f"{tname} kept as {fmt}, expected {want}")
            continue
        if fmt != want:
            problems.append(f"{tname} is {fmt}, expected {want or 'its source format'}")
        width = shape[-1]
        g = group
        while width % g:
            g //= 2
        if t["group"] != g:
            problems.append(f"{tname}: group {t['group']}, expected {g}")
        w = dequantize(blob[t["offset"]:t["offset"] + t["bytes"]], fmt, t["group"], shape)
        parts = expert_parts(source, tname)
        src = (np.concatenate([source[p] for p in parts]) if parts else
               source[tname]).astype(np.float32)
        rms = float(np.sqrt(((w - src) ** 2).mean() / (src ** 2).mean()))
        if not rms < MAX_RMS[fmt]:
            problems.append(f"{tname}: relative RMS error {rms:.3g} >= {MAX_RMS[fmt]}")
        if parts:  # the reference reads one tensor per expert
            for p, rows in zip(parts, np.split(w, len(parts))):
                weights[p] = rows
        else:
            weights[tname] = w
        quantized += 1
    if quantized == 0:
        problems.append("no tensor was quantized")

    ref = rf.ReferenceModel(cfg, weights)
    vocab = ref.cfg.vocab
    rng = np.random.default_rng(sum(map(ord, name)))
    tokens = [int(t) for t in rng.integers(0, vocab, PROMPT + DECODE)]
    out = os.path.join(work, f"{name}.f32")
    run([llmc, "logits", art, "--tokens", ",".join(map(str, tokens)), "--prefill", str(PROMPT),
         "--block-size", "5", "--threads", "2", "-o", out])
    got = np.fromfile(out, dtype=np.float32).reshape(len(tokens), vocab).astype(np.float64)
    want = ref.forward(tokens)
    err = np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)
    worst = float(err.max())
    if not worst < TOLERANCE:
        problems.append(f"logits: max rel err {worst:.2e} >= {TOLERANCE}")
    ok = not problems
    print(f"{'PASS' if ok else 'FAIL'} {name}: {quantized} tensors quantized, "
          f"max rel err {worst:.2e} against the reference on the dequantized weights")
    for p in problems:
        print(f"  {p}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--keep", help="keep models and artifacts in DIR")
    ap.add_argument("-k", help="only cases whose name contains this")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="llmc-e2e-quant-")
    os.makedirs(work, exist_ok=True)
    tally = Tally(a.k)
    try:
        for name, case in CASES.items():
            if tally.wants(name):
                tally.attempt(name, lambda: check(a.llmc, name, case, work))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return tally.exit_status()


if __name__ == "__main__":
    sys.exit(main())
