#!/usr/bin/env python3
"""Activation statistics for AWQ/GPTQ-style quantization of SmolLM2-135M,
on calibration text that is NOT the eval text: the repo's README.md and
docs/*.md (sorted), tokenized by `llmc tokenize`, cut into NSEQ sequences of
512 tokens, run through test/reference/reference_forward.py (numpy forward of
the F16 HF folder).

  python3 /tmp/w4research/calib.py [NSEQ]     -> /tmp/w4research/calib.npz

Per layer i and linear-input site (attn: q/k/v input = attn_norm output,
o: attention output, mlp: gate/up input = post-attention norm output, down:
silu(gate)*up), and for the lm_head (final_norm):
  H.<site>.<i>  = X^T X / n   (float32, [in, in])
  A.<site>.<i>  = mean |x|    (float32, [in])
"""
import glob
import os
import subprocess
import sys

import numpy as np

ROOT = "/work/main"
HF = "/tmp/w4research/hf-f16"
GGUF = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import reference_forward as RF  # noqa: E402


def calib_tokens(nseq, ctx=512):
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    text = "\n\n".join(open(f, encoding="utf-8").read() for f in files)
    out = subprocess.run([os.path.join(ROOT, "build/bin/llmc"), "tokenize", GGUF, "--no-special",
                          "--", text], capture_output=True, text=True, check=True).stdout
    toks = [int(t) for t in out.split()]
    print(f"calibration text: {len(files)} files, {len(toks)} tokens; using {nseq}x{ctx}",
          file=sys.stderr)
    assert len(toks) >= nseq * ctx
    return [toks[k * ctx:(k + 1) * ctx] for k in range(nseq)]


def main():
    nseq = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    m = RF.ReferenceModel.from_hf_folder(HF)
    c = m.cfg
    H, A, n = {}, {}, 0

    def add(key, x):
        x = x.astype(np.float64)
        H[key] = H.get(key, 0) + x.T @ x
        A[key] = A.get(key, 0) + np.abs(x).sum(0)

    for seq in calib_tokens(nseq):
        tr = {}
        m.forward(seq, trace=tr)
        n += len(seq)
        for i in range(c.layers):
            p = f"model.layers.{i}."
            add(f"attn.{i}", tr[f"L{i}.attn_norm"])
            add(f"o.{i}", tr[f"L{i}.attn"])
            h = RF.rms_norm(tr[f"L{i}.h_attn"], m.W[p + "post_attention_layernorm.weight"], c.rms_norm_eps)
            add(f"mlp.{i}", h)
            g = RF.activation(c.hidden_act, h @ m.W[p + "mlp.gate_proj.weight"].T)
            add(f"down.{i}", g * (h @ m.W[p + "mlp.up_proj.weight"].T))
        add("head", tr["final_norm"])
        print(f"  seq done ({n} tokens)", file=sys.stderr)
    out = {}
    for k in H:
        out["H." + k] = (H[k] / n).astype(np.float32)
        out["A." + k] = (A[k] / n).astype(np.float32)
    np.savez("/tmp/w4research/calib.npz", **out)
    print("wrote /tmp/w4research/calib.npz", file=sys.stderr)


if __name__ == "__main__":
    main()
