"""End-to-end GPU check of compiled artifacts (run by scripts/gpu-check.sh on
a GPU machine, over the payload scripts/gpu-payload.sh built without one).

1. Correctness. Each synthetic model runs teacher-forced (a 40-token
   prefill through the tensor-core GEMMs, then 24 decode steps through the
   GEMVs) on --backend=cuda; its logits are compared with the float64
   reference computed where the payload was built (test/reference), with the
   bf16 tolerance of the issue: max relative error per row (max |gpu - ref|
   / max |ref|) under 2e-2 and top-1 agreement at least 99%. The host backend
   runs the same artifact as a second opinion. The other artifacts (SmolLM2's
   and Llama-3-8B's shapes with dummy weights in q4_1, q4_0 and q4_k, and a
   w4a16 model) compare the GPU with the host backend.
2. Speed. `llmc-rt bench --json` on the GPU for the dummy-weight artifacts:
   prefill at 512 and 2048 tokens, decode of 1, 8, 64 and 256 sequences
   together (--seqs); decode bandwidth = bytes of weights read per step
   (all but an untied embedding table) over the step time, against a
   measured device-to-device copy (PyTorch if present).

Exit status: 0 all checks passed, 1 a check failed, 2 a tool failed.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

REL_TOL = 2e-2
TOP1_MIN = 0.99


def run(cmd, env):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
        sys.exit(2)
    return r, time.time() - t0


def logits(rt, env, art, tokens, prefill, backend, vocab):
    out = os.path.join(art, f"..{os.path.basename(art)}.{backend}.f32")
    _, secs = run([rt, "logits", art, "--tokens", ",".join(map(str, tokens)), "--prefill",
                   str(prefill), "--backend", backend, "--no-verify", "-o", out], env)
    got = np.fromfile(out, dtype=np.float32).reshape(len(tokens), vocab).astype(np.float64)
    os.remove(out)
    return got, secs


def compare(got, want):
    err = np.abs(got - want).max(axis=1) / np.maximum(np.abs(want).max(axis=1), 1e-30)
    top1 = float((got.argmax(axis=1) == want.argmax(axis=1)).mean())
    return float(err.max()), top1, bool(np.isfinite(got).all())


def manifest(art):
    return json.load(open(os.path.join(art, "manifest.json")))


def copy_bandwidth():
    """Device-to-device copy GB/s (read + write counted), or None."""
    try:
        import torch
    except ImportError:
        return None
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.time()
    reps = 20
    for _ in range(reps):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * n * reps / (time.time() - t0) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("payload")
    ap.add_argument("--no-timing", action="store_true")
    # host: check this script itself on a machine without a GPU.
    ap.add_argument("--backend", default="cuda", choices=["cuda", "host"])
    args = ap.parse_args()
    p = os.path.abspath(args.payload)
    rt = os.path.join(p, "bin", "llmc-rt")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(p, "lib") + ":" +
               os.environ.get("LD_LIBRARY_PATH", ""), LLMC_NO_EXEC_RT="1")
    ok = True

    print("--- correctness: synthetic models, GPU (bf16) vs the float64 reference")
    for ref_path in sorted(glob.glob(os.path.join(p, "synth", "*.ref.npz"))):
        name = os.path.basename(ref_path)[: -len(".ref.npz")]
        art = os.path.join(p, "synth", name + ".llmc")
        ref = np.load(ref_path)
        tokens, prefill, want = ref["tokens"].tolist(), int(ref["prefill"]), ref["logits"]
        vocab = want.shape[1]
        gpu, gsecs = logits(rt, env, art, tokens, prefill, args.backend, vocab)
        host, _ = logits(rt, env, art, tokens, prefill, "host", vocab)
        err, top1, finite = compare(gpu, want)
        herr, htop1, _ = compare(host, want)
        good = finite and err < REL_TOL and top1 >= TOP1_MIN
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name}: {args.backend} max rel err {err:.2e} "
              f"(prefill {compare(gpu[:prefill], want[:prefill])[0]:.2e}, decode "
              f"{compare(gpu[prefill:], want[prefill:])[0]:.2e}), top-1 {top1:.3f}; "
              f"host {herr:.2e} / {htop1:.3f}; {gsecs:.1f} s")

    print("--- correctness: dummy-weight shapes and a w4a16 model, GPU vs host backend")
    rng = np.random.default_rng(5)
    for art in sorted(glob.glob(os.path.join(p, "*.llmc"))):
        name = os.path.basename(art)[: -len(".llmc")]
        vocab = manifest(art)["model"]["vocab_size"]
        tokens = rng.integers(0, vocab, 48).tolist()
        gpu, gsecs = logits(rt, env, art, tokens, 32, args.backend, vocab)
        host, hsecs = logits(rt, env, art, tokens, 32, "host", vocab)
        err, top1, finite = compare(gpu, host)
        good = finite and err < REL_TOL * 2.5 and top1 >= 0.9
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name}: {args.backend} vs host max rel err {err:.2e}, "
              f"top-1 {top1:.3f} (random weights: near-ties are common; bound 5e-2 / 0.90); "
              f"gpu {gsecs:.1f} s, host {hsecs:.1f} s")

    if args.no_timing:
        return 0 if ok else 1
    print(f"--- speed (llmc-rt bench --backend={args.backend}; tgN@bB: B sequences decoding together)")
    bw = copy_bandwidth()
    print(f"device-to-device copy: {bw:.0f} GB/s" if bw else "copy bandwidth: no PyTorch, not measured")
    print(f"{'model':22} {'test':12} {'tok/s':>10} {'GB/s':>8} {'of copy':>8}")
    for name in ("smollm2-shape", "llama3-8b-shape", "llama3-8b-shape-q4_k"):
        art = os.path.join(p, name + ".llmc")
        if not os.path.exists(art):
            continue
        m = manifest(art)
        # Bytes a decode step reads: every weight, except an untied
        # embedding table (one row per token).
        tensors = m["weights"]["tensors"]
        names = [t["name"] for t in tensors]
        untied = any("lm_head" in n or n.startswith("output.") for n in names)
        weight_bytes = sum(t["bytes"] for t in tensors
                           if not (untied and ("embed_tokens" in t["name"] or "token_embd" in t["name"])))
        r, _ = run([rt, "bench", art, "--backend", args.backend, "--json", "-p", "512,2048", "-n", "128",
                    "-B", "1,8,64,256", "-r", "3", "--no-verify"], env)
        for row in json.loads(r.stdout)["tests"]:
            test, tps = row["test"], float(row["avg_ts"])
            line = f"{name:22} {test:12} {tps:10.1f}"
            if test.startswith("tg") and tps > 0:
                # One step reads every weight once, for all n_seqs tokens.
                gbs = weight_bytes * tps / row.get("n_seqs", 1) / 1e9
                line += f" {gbs:8.0f}" + (f" {gbs / bw:8.1%}" if bw else "")
            print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
