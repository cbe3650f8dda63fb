#!/usr/bin/env python3
"""Weight-only int4 (llmc's i4 storage: per group f16 scale s, f16 zero z,
q in 0..15, y = (q - z) * s) fake-quantization experiments on SmolLM2-135M.

Each run takes the F16 HF folder made by tools/gguf-to-hf (hf-f16), replaces
every projection weight by its quantize->dequantize value (f16), writes a new
HF folder, compiles it WITHOUT --quantize (`llmc compile DIR -o X.llmc`) and
runs `llmc perplexity X.llmc --file test/data/text/eval-2k.txt --ctx 512
--threads 2`. Group: --group (128) where the input dim allows, else 64
(576 % 128 != 0), as llmc's quantize pass does.

  python3 /tmp/w4research/w4research.py TAG [options]      (appends results.tsv)

options:
  --emb {f16,same}     tied embedding / lm_head: keep f16 or quantize it like the rest
  --clip {none,mse,wmse}  per-group range shrink search (factors 1.00..0.70 on lo and hi,
                       jointly); wmse weights each error by E[x_j^2] (calib.npz)
  --clip2d             search lo and hi factors independently (16x16 grid)
  --z {int,real}       zero point: integer 0..15 (llmc today; range widened to
                       include 0) or any f16 value (range = [min, max])
  --lsq N              N rounds of per-group weighted least squares refit of (s, z)
                       and re-rounding (kept only where error drops)
  --awq                AWQ-style per-input-channel scaling, s = mean|x|^alpha, alpha per
                       layer/site from a 0..1 grid minimizing tr(dW H dW^T) on calibration;
                       sites: q/k/v (folds into input_layernorm), gate/up (into
                       post_attention_layernorm), down (into up_proj rows). The folded
                       model is written as its equivalent W_eff = Q(W diag(s)) diag(1/s)
  --gptq               GPTQ (numpy, blocks of 128, damp 0.01, group params from the
                       updated weights when each group starts) using calib.npz H
  --rtn-check          llmc's exact RTN (same as --z int --clip none) -- sanity check
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = "/work/main"
W4 = "/tmp/w4research"
HF = os.path.join(W4, "hf-f16")
LLMC = os.path.join(ROOT, "build/bin/llmc")
TEXT = os.path.join(ROOT, "test/data/text/eval-2k.txt")
F16_PPL = 21.4189
FACTORS = np.linspace(1.0, 0.70, 16)


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


# ----------------------------------------------------------------- quantizer
def qgroups(Xg, o, wgt=None):
    """Xg [N, G] float32 -> dequantized [N, G] (f32, values as the runtime decodes them).
    wgt: [G] or [N, G] error weights (None: plain MSE)."""
    lo0, hi0 = Xg.min(1), Xg.max(1)
    if o.z == "int":
        lo0, hi0 = np.minimum(lo0, 0), np.maximum(hi0, 0)
    if o.clip == "none":
        cands = [(1.0, 1.0)]
    elif o.clip2d:
        cands = [(a, b) for a in FACTORS for b in FACTORS]
    else:
        cands = [(a, a) for a in FACTORS]
    w = np.ones_like(Xg) if wgt is None else np.broadcast_to(wgt, Xg.shape)
    best = None
    best_err = None
    for a, b in cands:
        Y = deq(Xg, lo0 * a, hi0 * b, o.z)
        if len(cands) == 1 and o.lsq == 0:
            return Y
        err = (w * (Y - Xg) ** 2).sum(1)
        if best is None:
            best, best_err = Y, err
        else:
            m = err < best_err
            best[m], best_err[m] = Y[m], err[m]
    for _ in range(o.lsq):
        Y = lsq_refit(Xg, best, w, o.z)
        err = (w * (Y - Xg) ** 2).sum(1)
        m = err < best_err
        best[m], best_err[m] = Y[m], err[m]
    return best


def params(lo, hi, zmode):
    s = f16(np.maximum(hi - lo, 0) / 15.0)
    safe = np.where(s > 0, s, 1.0)
    if zmode == "int":
        z = np.clip(np.round(-lo / safe), 0, 15)
    else:
        z = f16(-lo / safe)
    z = np.where(s > 0, z, 0.0)
    return s, z


def deq_sz(Xg, s, z):
    safe = np.where(s > 0, s, 1.0)[:, None]
    q = np.clip(np.round(Xg / safe + z[:, None]), 0, 15)
    if False:  # llmc: round(x/s) + z; identical for integer z
        pass
    return ((q - z[:, None]) * s[:, None]).astype(np.float32)


def deq(Xg, lo, hi, zmode):
    s, z = params(lo, hi, zmode)
    if zmode == "int":  # exactly llmc's QuantizeI4Group: round(x/s) + z, clamp
        safe = np.where(s > 0, s, 1.0)[:, None]
        q = np.clip(np.round(Xg / safe) + z[:, None], 0, 15)
        return ((q - z[:, None]) * s[:, None]).astype(np.float32)
    return deq_sz(Xg, s, z)


def lsq_refit(Xg, Y, w, zmode):
    """Given the current codes (from Y), weighted least-squares s, b for x ~ s*q + b."""
    # recover codes: Y = (q - z) s ; recompute from scratch via min over params is
    # messy, so refit on integer codes derived from Y's own grid.
    lo, hi = Y.min(1), Y.max(1)
    s0 = np.where(hi > lo, (hi - lo) / 15.0, 1.0)
    q = np.clip(np.round((Y - lo[:, None]) / s0[:, None]), 0, 15)
    sw = w.sum(1)
    mq = (w * q).sum(1) / sw
    mx = (w * Xg).sum(1) / sw
    cov = (w * (q - mq[:, None]) * (Xg - mx[:, None])).sum(1)
    var = (w * (q - mq[:, None]) ** 2).sum(1)
    s = np.where(var > 0, cov / np.maximum(var, 1e-30), s0)
    s = np.where(s > 0, s, s0)
    b = mx - s * mq
    s = f16(s)
    z = -b / s
    z = np.round(z) if zmode == "int" else f16(z)
    z = np.clip(z, 0, 15) if zmode == "int" else z
    return deq_sz(Xg, s, z)


def group_of(cols, g):
    return g if cols % g == 0 else 64


def quant_matrix(W, o, colw=None):
    """W [out, in] float32 -> dequantized, groups along `in`."""
    out, n = W.shape
    G = group_of(n, o.group)
    Xg = W.reshape(-1, G)
    wg = None
    if colw is not None:
        wg = np.broadcast_to(colw.reshape(1, n // G, G), (out, n // G, G)).reshape(-1, G)
    return qgroups(Xg, o, wg).reshape(out, n)


# ---------------------------------------------------------------------- GPTQ
def gptq(W, H, o, block=128, damp=float(os.environ.get("GPTQ_DAMP", "0.01"))):
    W = W.astype(np.float64).copy()
    out, n = W.shape
    G = group_of(n, o.group)
    H = H.astype(np.float64).copy()
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    H[np.diag_indices(n)] += damp * np.mean(np.diag(H))
    L = np.linalg.cholesky(np.linalg.inv(H))
    Hinv = L.T  # upper Cholesky factor of H^-1
    Q = np.zeros_like(W)
    for i1 in range(0, n, block):
        i2 = min(i1 + block, n)
        W1 = W[:, i1:i2].copy()
        E1 = np.zeros_like(W1)
        Hi = Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            if (i1 + i) % G == 0:
                Xg = W1[:, i:i + G].astype(np.float32)
                # group params from the current (updated) weights; clip search uses
                # diag(H^-1)-free plain MSE here
                lo0, hi0 = Xg.min(1), Xg.max(1)
                if o.z == "int":
                    lo0, hi0 = np.minimum(lo0, 0), np.maximum(hi0, 0)
                if o.clip != "none":
                    best_err, best_ab = None, None
                    for a in FACTORS:
                        Y = deq(Xg, lo0 * a, hi0 * a, o.z)
                        err = ((Y - Xg) ** 2).sum(1)
                        if best_err is None:
                            best_err, best_ab = err, np.full(len(err), a)
                        else:
                            mm = err < best_err
                            best_err[mm], best_ab[mm] = err[mm], a
                    lo0, hi0 = lo0 * best_ab, hi0 * best_ab
                s, z = params(lo0, hi0, o.z)
            w = W1[:, i]
            safe = np.where(s > 0, s, 1.0)
            if o.z == "int":
                qv = np.clip(np.round(w / safe) + z, 0, 15)
            else:
                qv = np.clip(np.round(w / safe + z), 0, 15)
            qd = (qv - z) * s
            Q[:, i1 + i] = qd
            err = (w - qd) / Hi[i, i]
            W1[:, i:] -= np.outer(err, Hi[i, i:])
            E1[:, i] = err
        W[:, i2:] -= E1 @ Hinv[i1:i2, i2:]
    return Q.astype(np.float32)


# ----------------------------------------------------------------------- AWQ
def awq_site(Ws, A, H, o, grid=np.linspace(0, 1, 11)):
    """Ws: list of [out, in] weights reading the same input; returns W_effs, alpha."""
    best = None
    for alpha in grid:
        s = np.maximum(A, 1e-8) ** alpha
        s = s / np.sqrt(s.max() * s.min())
        effs, loss = [], 0.0
        for W in Ws:
            Qs = quant_matrix(W * s[None, :], o, colw=np.diag(H) / s ** 2 if o.clip == "wmse" else None)
            E = Qs / s[None, :]
            D = (W - E).astype(np.float64)
            loss += float(np.sum((D @ H.astype(np.float64)) * D))
            effs.append(E)
        if best is None or loss < best[0]:
            best = (loss, alpha, effs)
    return best[2], best[1]


# ---------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tag")
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--emb", choices=["f16", "same"], default="same")
    ap.add_argument("--clip", choices=["none", "mse", "wmse"], default="none")
    ap.add_argument("--clip2d", action="store_true")
    ap.add_argument("--z", choices=["int", "real"], default="int")
    ap.add_argument("--lsq", type=int, default=0)
    ap.add_argument("--awq", action="store_true")
    ap.add_argument("--gptq", action="store_true")
    ap.add_argument("--keep", action="store_true")
    o = ap.parse_args()
    t0 = time.time()
    W = load_file(os.path.join(HF, "model.safetensors"))
    cfg = json.load(open(os.path.join(HF, "config.json")))
    need_calib = o.awq or o.gptq or o.clip == "wmse"
    C = np.load(os.path.join(W4, "calib.npz")) if need_calib else None
    new = dict(W)
    alphas = []
    stats = []

    def put(name, Y):
        X = W[name].astype(np.float32)
        stats.append(float(((Y - X) ** 2).sum() / (X ** 2).sum()))
        new[name] = Y.astype(np.float16)

    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sites = [("attn", ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]),
                 ("o", ["self_attn.o_proj"]), ("mlp", ["mlp.gate_proj", "mlp.up_proj"]),
                 ("down", ["mlp.down_proj"])]
        for site, names in sites:
            Ws = [W[p + n + ".weight"].astype(np.float32) for n in names]
            H = C[f"H.{site}.{i}"] if C is not None else None
            if o.gptq:
                cat = np.concatenate(Ws, 0)
                if o.awq and site != "o":
                    # AWQ scaling first (alpha chosen as in awq_site), then GPTQ on W*s
                    _, alpha = awq_site(Ws, C[f"A.{site}.{i}"], H, o)
                    s = np.maximum(C[f"A.{site}.{i}"], 1e-8) ** alpha
                    s = s / np.sqrt(s.max() * s.min())
                    Hs = H / s[:, None] / s[None, :]
                    Q = gptq(cat * s[None, :], Hs, o) / s[None, :]
                    alphas.append(alpha)
                else:
                    Q = gptq(cat, H, o)
                rows = np.cumsum([0] + [w.shape[0] for w in Ws])
                for k, n in enumerate(names):
                    put(p + n + ".weight", Q[rows[k]:rows[k + 1]])
            elif o.awq and site != "o":
                effs, alpha = awq_site(Ws, C[f"A.{site}.{i}"], H, o)
                alphas.append(alpha)
                for n, E in zip(names, effs):
                    put(p + n + ".weight", E)
            else:
                for n, Wm in zip(names, Ws):
                    colw = np.diag(H) if o.clip == "wmse" else None
                    put(p + n + ".weight", quant_matrix(Wm, o, colw))
        print(f"  layer {i} ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)
    if o.emb == "same":
        name = "model.embed_tokens.weight"
        E = W[name].astype(np.float32)
        colw = np.diag(C["H.head"]) if o.clip == "wmse" else None
        if o.gptq:
            put(name, gptq(E, C["H.head"], o))
        else:
            put(name, quant_matrix(E, o, colw))
    relerr = float(np.mean(stats))
    dst = os.path.join(W4, f"hf-{o.tag}")
    os.makedirs(dst, exist_ok=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(HF, f), dst)
    save_file(new, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    art = os.path.join(W4, f"{o.tag}.llmc")
    subprocess.run([LLMC, "compile", dst, "-o", art], check=True, capture_output=True)
    r = subprocess.run([LLMC, "perplexity", art, "--file", TEXT, "--ctx", "512", "--threads", "2"],
                       capture_output=True, text=True, check=True)
    ppl = float(re.search(r"PPL = ([0-9.]+)", r.stdout + r.stderr).group(1))
    if not o.keep:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.rmtree(art, ignore_errors=True)
        if os.path.exists(art):
            os.remove(art)
    opts = " ".join(a for a in sys.argv[2:])
    line = (f"{o.tag}\t{ppl:.4f}\t{ppl / F16_PPL - 1:+.2%}\trelerr {relerr:.5f}\t"
            f"alpha {np.mean(alphas) if alphas else '-'}\t{opts}\t{time.time() - t0:.0f}s")
    print(line)
    with open(os.path.join(W4, "results.tsv"), "a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
