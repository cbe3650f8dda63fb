#!/usr/bin/env python3
"""Self-checks of reference_forward.py. Plain script; exit status 1 on failure.

    python3 test/reference/test_reference.py [-q] [--no-llama-cpp] [--keep DIR]

1. incremental (prefill + decode, chunked prefill) == full forward, 1e-12
2. a ragged multi-sequence batch (with fork / truncate) == per-sequence runs
3. llama.cpp (llama-cpp-python, when importable) on f32 GGUFs from
   synth_model.write_gguf: prompt + decode logits within 1e-4 relative
   (Gemma: 1e-3, llama.cpp's f16-table GELU; and one q8_0 model, against the
   reference on the dequantized weights); each Gemma feature matters to it
4. HF folder and GGUF of the same seed give the same reference logits
5. sliding-window semantics, GQA head grouping, llama3 frequencies, Qwen3's
   QK-norm (it matters; per head; == a plain loop; before RoPE), the MoE block
   of Qwen3-MoE / Mixtral (== a per-token loop; only routed experts matter;
   norm_topk_prob; the tie rule; routes independent of batch-mates), Gemma 2 /
   3 (layers == plain loops of HF's rules; per-layer RoPE; every semantic knob
   matters; llama.cpp's key rules), Phi-3 (== llama with split tensors; the
   fused row order matters), real HF configs, the CLI
Relative error everywhere: max |a - b| / max |b|.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "synth-model"))
sys.path.insert(0, os.path.join(ROOT, "tools", "llamacpp"))
import reference_forward as rf  # noqa: E402
import synth_model as sm  # noqa: E402

QUIET = False
RESULTS: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, bool(ok), detail))
    if not QUIET or not ok:
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


SHAPES = {
    "llama-gqa-tied": (dict(arch="llama"), 1),
    "qwen2-bias-untied": (dict(arch="qwen2", vocab=300, hidden=64, heads=4, kv_heads=2,
                               intermediate=128, tie_embeddings=False), 2),
    "llama-mha-hd128": (dict(arch="llama", vocab=400, hidden=256, heads=2, kv_heads=2,
                             head_dim=128, intermediate=320, tie_embeddings=False,
                             rope_theta=500000.0, dtype="bf16"), 3),
    "llama3-scaled": (dict(arch="llama", vocab=350, hidden=128, heads=4, kv_heads=2,
                           head_dim=64, intermediate=256, tie_embeddings=False,
                           rope_theta=500000.0, rope_scaling="llama3:8,1,4,32",
                           max_position=1024), 6),
    "mistral-swa5-linear": (dict(arch="mistral", vocab=320, hidden=96, heads=6, kv_heads=2,
                                 head_dim=32, intermediate=192, layers=3, sliding_window=5,
                                 rope_scaling="linear:2", tie_embeddings=False), 4),
    "llama-bias-mqa": (dict(arch="llama", qkv_bias=True, hidden=64, heads=4, kv_heads=1,
                            layers=1), 5),
    # Qwen3: QK-norm, no bias, heads*head_dim = 2*hidden, Qwen3's theta/eps, bf16.
    "qwen3-qknorm-untied": (dict(arch="qwen3", vocab=300, hidden=64, heads=4, kv_heads=2,
                                 head_dim=32, intermediate=128, tie_embeddings=False,
                                 rope_theta=1000000.0, rms_norm_eps=1e-6, dtype="bf16"), 9),
    "qwen3-tied-mqa": (dict(arch="qwen3", vocab=320, hidden=64, heads=4, kv_heads=1,
                            layers=3), 10),
    # Qwen3-MoE: QK-norm, top-2 of 6 experts 32 wide (!= hidden), renormalized,
    # untied, bf16.
    "qwen3moe-untied": (dict(arch="qwen3moe", vocab=300, hidden=64, heads=4, kv_heads=2,
                             head_dim=32, intermediate=128, experts=6, experts_per_tok=2,
                             moe_intermediate=32, tie_embeddings=False,
                             rope_theta=1000000.0, rms_norm_eps=1e-6, dtype="bf16"), 12),
    # Qwen3-MoE with norm_topk_prob off, top-3 of 5: HF only (no GGUF says it).
    "qwen3moe-nonorm-k3": (dict(arch="qwen3moe", vocab=300, hidden=64, heads=4, kv_heads=2,
                                intermediate=128, experts=5, experts_per_tok=3,
                                moe_intermediate=64, norm_topk_prob=False), 13),
    # Mixtral: llama attention (Q/K permuted in the GGUF), top-2 of 4 experts
    # intermediate (96) wide, tied, MQA.
    "mixtral-tied-mqa": (dict(arch="mixtral", vocab=320, hidden=64, heads=4, kv_heads=1,
                              intermediate=96, experts=4, experts_per_tok=2,
                              rope_theta=1000000.0), 14),
    # Phi-3: fused qkv_proj / gate_up_proj, untied, GQA, bf16.
    "phi3-untied": (dict(arch="phi3", vocab=300, hidden=64, heads=4, kv_heads=2,
                         intermediate=128, tie_embeddings=False, dtype="bf16"), 15),
    # Phi-3 tied, MQA, a window of 5 on every layer, 3 layers.
    "phi3-window-mqa": (dict(arch="phi3", vocab=320, hidden=64, heads=4, kv_heads=1,
                             intermediate=96, layers=3, sliding_window=5), 16),
    # Gemma 2: tied, head_dim 32 (!= hidden/heads), window 8 on layers 0 and 2,
    # soft-caps 50 / 30, qk_gain 3 (scores nearer the cap), eps 1e-6, bf16.
    "gemma2-tied": (dict(arch="gemma2", vocab=300, hidden=64, heads=4, kv_heads=2,
                         head_dim=32, intermediate=128, layers=3, qk_gain=3.0,
                         rms_norm_eps=1e-6, dtype="bf16"), 17),
    # Gemma 2 untied, soft-caps 5 / 3, window 5, MQA: HF only (llama.cpp's
    # gemma2 always ties).
    "gemma2-untied-caps": (dict(arch="gemma2", vocab=300, hidden=64, heads=4, kv_heads=1,
                                intermediate=96, tie_embeddings=False, attn_softcap=5.0,
                                final_softcap=3.0, sliding_window=5), 18),
    # Gemma 3: the real pattern 6 over 6 layers (layer 5 global), head_dim 32,
    # window 8, tied.
    "gemma3-pattern6": (dict(arch="gemma3", vocab=320, hidden=64, heads=4, kv_heads=2,
                             head_dim=32, intermediate=128, layers=6, rms_norm_eps=1e-6), 19),
    # Gemma 3: pattern 2 (layers 1, 3 global), linear:4 on the global layers,
    # final soft-cap 15, window 6, untied, MQA, qk_gain 1.5, f16.
    "gemma3-linear-untied": (dict(arch="gemma3", vocab=300, hidden=64, heads=4, kv_heads=1,
                                  intermediate=96, layers=4, sliding_window_pattern=2,
                                  sliding_window=6, rope_scaling="linear:4",
                                  final_softcap=15.0, tie_embeddings=False, qk_gain=1.5,
                                  dtype="f16"), 20),
}
# Shapes no GGUF can express (llama.cpp's qwen3moe always renormalizes;
# llama.cpp's gemma2 always uses the embedding as its head).
HF_ONLY = {"qwen3moe-nonorm-k3", "gemma2-untied-caps"}
GEMMA = ("gemma2", "gemma3")


def toks(n: int, vocab: int, seed: int) -> list[int]:
    return [int(x) for x in np.random.default_rng(seed).integers(0, vocab, n)]


# ------------------------------------------------------------------ (1), (2)

def check_incremental(tag: str, m: rf.ReferenceModel) -> None:
    t = toks(16, m.cfg.vocab, 11)
    full = m.forward(t)
    pre = m.prefill(t[:6], seq_id="s")
    dec = [m.decode(x, seq_id="s") for x in t[6:]]
    inc = np.vstack([pre] + [d[None] for d in dec])
    e = rel(inc, full)
    check(f"{tag}/1/prefill+decode==forward", e < 1e-12, f"rel err {e:.1e}")
    m.prefill(t[:3], seq_id="c")
    chunks = [m.extend(t[3:8], "c"), m.extend(t[8:9], "c"), m.extend(t[9:], "c")]
    e2 = rel(np.vstack(chunks), full[3:])
    check(f"{tag}/1/chunked-prefill==forward", e2 < 1e-12, f"rel err {e2:.1e}")
    K, V = m.kv("s", 0)
    check(f"{tag}/1/kv-shape", K.shape == (16, m.cfg.kv_heads, m.cfg.head_dim)
          and V.shape == K.shape and m.context_len("s") == 16 and m.seq_tokens("s") == t)
    # prefill restarts a sequence.
    again = m.prefill(t[:6], seq_id="s")
    check(f"{tag}/1/prefill-restarts", rel(again, full[:6]) < 1e-12 and m.context_len("s") == 6)
    m.reset()


def check_ragged(tag: str, m: rf.ReferenceModel) -> None:
    V = m.cfg.vocab
    A, B, C, X = toks(12, V, 21), toks(14, V, 22), toks(9, V, 23), toks(6, V, 24)
    m.reset()
    got: dict = {k: [] for k in "ABCD"}
    plan = [
        [("A", A[:5]), ("B", B[:3])],
        [("A", A[5:6]), ("B", B[3:7]), ("C", C[:6])],
        [("C", C[6:7]), ("A", A[6:7]), ("B", B[7:8])],
        "fork A D",
        [("D", X[:1]), ("A", A[7:8]), ("B", B[8:14]), ("C", C[7:9])],
        [("A", A[8:12]), ("D", X[1:6])],
    ]
    inputs_ok = True
    for st in plan:
        if isinstance(st, str):
            m.fork("A", "D")
            got["D"] = list(got["A"])
            continue
        bi = m.batch_inputs(st)
        flat = m.step(st)
        T = sum(len(tk) for _, tk in st)
        inputs_ok &= (flat.shape == (T, V) and len(bi["tokens"]) == T
                      and list(bi["query_starts"]) == list(np.cumsum([0] + [len(tk) for _, tk in st]))
                      and all(bi["context_lens"][j] == m.context_len(sid)
                              for j, (sid, _) in enumerate(st)))
        for sid, rows in m.split_rows(st, flat).items():
            got[sid].append(rows)
    seqs = {"A": A, "B": B, "C": C, "D": A[:7] + X}
    worst = 0.0
    for sid, want_toks in seqs.items():
        worst = max(worst, rel(np.vstack(got[sid]), m.forward(want_toks)))
    check(f"{tag}/2/ragged-batch==per-sequence", worst < 1e-12,
          f"4 seqs (one forked), 5 steps, rel err {worst:.1e}")
    check(f"{tag}/2/batch-inputs+shapes", bool(inputs_ok))
    # logits_rows picks rows of the flattened batch.
    m.reset()
    st = [("P", A[:4]), ("Q", B[:5])]
    sel = m.step(st, logits_rows=[3, 8])
    want = np.vstack([m.forward(A[:4])[3], m.forward(B[:5])[4]])
    check(f"{tag}/2/logits_rows", sel.shape == (2, V) and rel(sel, want) < 1e-12)
    # truncate (preemption / rollback) then continue with other tokens.
    m.truncate("P", 2)
    cont = m.extend(C[:3], "P")
    e = rel(cont, m.forward(A[:2] + C[:3])[2:])
    check(f"{tag}/2/truncate+extend", e < 1e-12 and m.context_len("P") == 5, f"rel err {e:.1e}")
    # A failing step leaves the state unchanged.
    try:
        m.step([("P", [0]), ("Q", [V + 5])])
        raised = False
    except rf.ReferenceError:
        raised = True
    check(f"{tag}/2/bad-token-rejected-state-kept", raised and m.context_len("P") == 5
          and m.context_len("Q") == 5)
    m.reset()


# ------------------------------------------------------------------ (3) llama.cpp

def patch_llama_cpp():
    """llama_cpp with its extra buffer types off (tools/llamacpp/llamacpp_compat.py
    says why)."""
    from llamacpp_compat import import_llama_cpp
    return import_llama_cpp()[0]


def llama_cpp_logits(path: str, prompt: list[int], steps: list[int]) -> np.ndarray:
    """[len(prompt) + len(steps), vocab]: the prompt in one eval (all-position
    logits via logits_all), then one eval per decode token."""
    llama_cpp = patch_llama_cpp()
    kw = dict(model_path=path, n_ctx=64, n_batch=64, verbose=False, logits_all=True,
              n_threads=1, n_threads_batch=1)
    try:
        llm = llama_cpp.Llama(type_k=0, type_v=0, **kw)  # f32 KV cache
    except TypeError:
        llm = llama_cpp.Llama(**kw)
    llm.reset()
    llm.eval(prompt)
    rows = [np.array(llm.scores[i], np.float64) for i in range(len(prompt))]
    for t in steps:
        llm.eval([t])
        rows.append(np.array(llm.scores[llm.n_tokens - 1], np.float64))
    del llm
    return np.vstack(rows)


LLAMA_CPP_SHAPES = {
    "llama-gqa-tied": SHAPES["llama-gqa-tied"],
    "qwen2-bias-untied": SHAPES["qwen2-bias-untied"],
    "llama-mha-hd128": (dict(SHAPES["llama-mha-hd128"][0], dtype="f32"), 3),
    "llama3-scaled": SHAPES["llama3-scaled"],
    # llama.cpp's llama architecture ignores the window, so none here.
    "mistral-linear": (dict(SHAPES["mistral-swa5-linear"][0], sliding_window=None), 4),
    "llama-bias-mqa": SHAPES["llama-bias-mqa"],
    "qwen3-qknorm-untied": (dict(SHAPES["qwen3-qknorm-untied"][0], dtype="f32"), 9),
    "qwen3-tied-mqa": SHAPES["qwen3-tied-mqa"],
    "qwen3moe-untied": (dict(SHAPES["qwen3moe-untied"][0], dtype="f32"), 12),
    "mixtral-tied-mqa": SHAPES["mixtral-tied-mqa"],
    "phi3-untied": (dict(SHAPES["phi3-untied"][0], dtype="f32"), 15),
    # llama.cpp's phi3 ignores the window (its SWA is disabled), so none here.
    "phi3-mqa": (dict(SHAPES["phi3-window-mqa"][0], sliding_window=None), 16),
    "gemma2-tied": (dict(SHAPES["gemma2-tied"][0], dtype="f32"), 17),
    "gemma3-pattern6": SHAPES["gemma3-pattern6"],
    "gemma3-linear-untied": (dict(SHAPES["gemma3-linear-untied"][0], dtype="f32"), 20),
}


def variant(m: rf.ReferenceModel, **changes) -> rf.ReferenceModel:
    """A copy of m whose RefConfig has `changes` (the weights shared): what
    a reader with that one semantic bug computes."""
    v = rf.ReferenceModel.__new__(rf.ReferenceModel)
    v.__dict__.update(m.__dict__)
    v.cfg = dataclasses.replace(m.cfg, **changes)
    v.inv_freq, v.inv_freq_local = rf.rope_inv_freq(v.cfg), rf.rope_inv_freq_local(v.cfg)
    v._seqs = {}
    return v


@contextlib.contextmanager
def ggml_gelu():
    """Within: the reference's gelu_pytorch_tanh is ggml's CPU GELU (the input
    rounded to f16, the value looked up in an f16 table, GGML_GELU_FP16; x
    itself from 10 up, 0 from -10 down), which llama.cpp's GeGLU (Gemma)
    runs: it accounts for most of llama.cpp's gap to the float64 reference."""
    orig = rf.activation

    def act(name, x):
        if name != "gelu_pytorch_tanh":
            return orig(name, x)
        y = orig(name, x.astype(np.float16).astype(np.float64))
        y = y.astype(np.float16).astype(np.float64)
        return np.where(x <= -10, 0.0, np.where(x >= 10, x, y))
    rf.activation = act
    try:
        yield
    finally:
        rf.activation = orig


def check_llama_cpp(tmp: str) -> None:
    for tag, (cd, seed) in LLAMA_CPP_SHAPES.items():
        c = sm.make_config(cd)
        path = os.path.join(tmp, f"lc-{tag}.gguf")
        sm.write_gguf(path, c, seed, "f32")
        # phi3 / gemma: a 24-token prompt, so that the windows (5 to 8) matter.
        n_prompt = 24 if c.arch in ("phi3",) + GEMMA else 10
        t = toks(n_prompt + 4, c.vocab, 31)
        prompt, steps = t[:n_prompt], t[n_prompt:]
        got = llama_cpp_logits(path, prompt, steps)
        m = rf.ReferenceModel.from_synth(c, seed)
        ref = np.vstack([m.prefill(prompt)] + [m.decode(x)[None] for x in steps])
        e = rel(got, ref)
        e_dec = rel(got[len(prompt):], ref[len(prompt):])
        agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
        # Gemma: llama.cpp's CPU GeGLU looks GELU up in an f16 table (its input
        # rounded to f16), about 5e-4 per element, hence 1e-3; the reference
        # with that GELU agrees with it several times closer (what is left:
        # f16 roundings that fall the other way on llama.cpp's f32 inputs).
        tol = 1e-3 if c.arch in GEMMA else 1e-4
        check(f"{tag}/3/llama.cpp-f32==reference", e < tol,
              f"rel err {e:.1e} (decode rows {e_dec:.1e}; tol {tol:g}), {n_prompt}-token "
              f"prompt + 4 decode, argmax agreement {agree:.2f}")
        if c.arch in GEMMA:
            with ggml_gelu():
                e16 = rel(got, m.forward(t))
            check(f"{tag}/3/llama.cpp-f32==reference-with-ggml-gelu", e16 < 1e-4 and e16 < e,
                  f"rel err {e16:.1e} with ggml's f16-table GELU (vs {e:.1e})")
            # Each Gemma feature, as llama.cpp computes it: without it the
            # reference differs from llama.cpp by far more than the two differ.
            L = c.layers
            feats = {"windows": variant(m, layer_windows=[None] * L),
                     "window-one-wider": variant(m, layer_windows=[
                         w and w + 1 for w in m.cfg.layer_windows]),
                     "embed-scale": variant(m, embed_scale=1.0),
                     "post-norms": variant(m, post_norms=False),
                     "norm+1": variant(m, norm_offset=0.0)}
            if c.final_softcap:
                feats["final-softcap"] = variant(m, final_softcap=None)
            if c.attn_softcap:
                feats["attn-softcap"] = variant(m, attn_softcap=None)
            if c.arch == "gemma3":
                feats["local-rope-base"] = variant(m, layer_local_rope=None)
            ds = {k: rel(got, v.forward(t)) for k, v in feats.items()}
            check(f"{tag}/3/gemma-features-matter-to-llama.cpp",
                  min(ds.values()) > 10 * e,
                  "llama.cpp vs reference without: " + ", ".join(
                      f"{k} {d:.1e}" for k, d in ds.items()))
        if c.moe:  # the routing must matter: with expert 0 everywhere it differs
            W = sm.make_weights(c, seed)
            d = rel(got, rf.ReferenceModel(sm.hf_config_json(c), _all_expert_0(c, W)).forward(t))
            check(f"{tag}/3/experts-matter", d > 1e-2,
                  f"llama.cpp vs reference with every expert = expert 0: rel diff {d:.1e}")
        if c.qk_norm:  # likewise the QK-norm weights (Gemma 3: 1 + w, so w = 0)
            W = sm.make_weights(c, seed)
            one = 0.0 if c.arch in GEMMA else 1.0
            plain = rf.ReferenceModel(sm.hf_config_json(c), {
                k: np.full_like(a, one) if k.endswith(("q_norm.weight", "k_norm.weight")) else a
                for k, a in W.items()})
            d = rel(got, plain.forward(t))
            check(f"{tag}/3/qk-norm-weights-matter", d > 1e-3,
                  f"llama.cpp vs reference with all-ones q/k_norm: rel diff {d:.1e}")
        if c.rope_scaling:  # the scaling must matter, or the check above proves little
            plain = rf.ReferenceModel.from_synth(sm.make_config(c, rope_scaling=None), seed)
            d = rel(got, plain.forward(t))
            check(f"{tag}/3/rope-scaling-matters", d > 1e-3,
                  f"llama.cpp vs unscaled reference: rel diff {d:.1e}")
    # One quantized model: the reference on what the q8_0 file holds.
    tag, (cd, seed) = "llama-gqa-tied", SHAPES["llama-gqa-tied"]
    c = sm.make_config(cd)
    path = os.path.join(tmp, "lc-q8_0.gguf")
    sm.write_gguf(path, c, seed, "q8_0")
    t = toks(14, c.vocab, 32)
    got = llama_cpp_logits(path, t[:10], t[10:])
    ref = rf.ReferenceModel.from_gguf(path).forward(t)
    e = rel(got, ref)
    check(f"{tag}/3/llama.cpp-q8_0==reference(dequantized)", e < 5e-2,
          f"rel err {e:.1e} (llama.cpp also quantizes activations to 8 bits)")


# ------------------------------------------------------------------ (4) HF vs GGUF

def check_hf_vs_gguf(tmp: str) -> None:
    for tag, (cd, seed) in SHAPES.items():
        if tag in HF_ONLY:
            continue
        c = sm.make_config(cd)
        hf = os.path.join(tmp, f"{tag}-hf")
        gg = os.path.join(tmp, f"{tag}.gguf")
        sm.write_hf(hf, c, seed, shards=2 if tag == "llama-gqa-tied" else 1)
        sm.write_gguf(gg, c, seed, "f32")
        mh, mg = rf.ReferenceModel.from_hf_folder(hf), rf.ReferenceModel.from_gguf(gg)
        same_w = same_weights(c, mh.W, mg.W)
        t = toks(20, c.vocab, 41)
        e = rel(mg.forward(t), mh.forward(t))
        # The GGUF stores rms_norm_eps as f32 (1e-5 -> 9.99999975e-06); with the
        # HF value the two must agree to the last bit (llama3 aside).
        mg.cfg.rms_norm_eps = mh.cfg.rms_norm_eps
        e_eps = rel(mg.forward(t), mh.forward(t))
        if c.rope_scaling and c.rope_scaling["rope_type"] == "llama3":
            # The GGUF carries llama3 as f32 rope_freqs divisors; HF recomputes
            # them in full precision, so the two differ by f32 rounding.
            check(f"{tag}/4/hf==gguf-f32", same_w and e < 1e-6,
                  f"weights identical: {same_w}, rel err {e:.1e} "
                  f"({e_eps:.1e} with HF's eps; tol 1e-6: f32 rope_freqs vs float64 llama3 rule)")
        else:
            check(f"{tag}/4/hf==gguf-f32", same_w and e < 1e-12 and e_eps == 0.0,
                  f"weights identical (Q/K unpermuted"
                  f"{'; GGUF norms = 1 + HF norms' if c.arch in GEMMA else ''}): "
                  f"{same_w}, rel err {e:.1e} (f32 eps in the GGUF), {e_eps:.1e} with HF's eps")
        if c.arch in ("phi3",) + GEMMA:
            # The GGUF's keys give the HF config's semantics: windows, local
            # RoPE layers, score scale, soft-caps, embedding scale (Gemma's norm
            # offset 1 in HF, 0 in the GGUF, whose weights hold the 1).
            fields = ("layer_windows", "layer_local_rope", "rope_local_theta", "rope_theta",
                      "rope_scaling", "query_pre_attn_scalar", "attn_softcap",
                      "final_softcap", "embed_scale", "post_norms", "qk_norm", "fused_proj",
                      "hidden_act", "head_dim", "tie_embeddings")
            diff = {f: (getattr(mh.cfg, f), getattr(mg.cfg, f)) for f in fields
                    if getattr(mh.cfg, f) != getattr(mg.cfg, f)}
            offs = (mh.cfg.norm_offset, mg.cfg.norm_offset)
            check(f"{tag}/4/gguf-config==hf-config", not diff
                  and offs == ((1.0, 0.0) if c.arch in GEMMA else (0.0, 0.0)),
                  f"{diff or 'same'}; norm offsets {offs}; {mg.cfg.summary()}")
        ms = rf.ReferenceModel.from_synth(c, seed)
        check(f"{tag}/4/from_synth==from_hf_folder",
              all(np.array_equal(ms.W[k], mh.W[k]) for k in mh.W) and set(ms.W) == set(mh.W)
              and ms.cfg == mh.cfg)
    # Quantized GGUFs: from_gguf's dequantization == synth's dequantized_weights
    # (qwen3: its f32 q_norm / k_norm beside quantized matrices).
    for tag, gts in (("llama-gqa-tied", ("q8_0", "q4_0", "q5_1")),
                     ("qwen3-qknorm-untied", ("q8_0", "q4_0")),
                     ("qwen3moe-untied", ("q8_0", "q4_0")),
                     ("mixtral-tied-mqa", ("q8_0", "q4_0")),
                     ("phi3-untied", ("q8_0", "q4_0")),
                     ("gemma2-tied", ("q8_0",)),
                     ("gemma3-linear-untied", ("q8_0", "q4_0"))):
        cd, seed = SHAPES[tag]
        c = sm.make_config(cd)
        for gt in gts:
            gg = os.path.join(tmp, f"{tag}-{gt}.gguf")
            sm.write_gguf(gg, c, seed, gt)
            mg = rf.ReferenceModel.from_gguf(gg)
            ms = rf.ReferenceModel.from_synth(c, seed, gguf_type=gt)
            same = same_weights(c, ms.W, mg.W)
            t = toks(8, c.vocab, 42)
            check(f"{tag}/4/gguf-{gt}==from_synth(gguf_type)",
                  same and mg.cfg.qk_norm == c.qk_norm
                  and rel(mg.forward(t), ms.forward(t)) < 1e-12)
            if c.moe:
                check_gguf_moe_tensors(tag, gg, c, gt)


def same_weights(c, hf_w: dict, gguf_w: dict) -> bool:
    """An HF-form and a GGUF-form weight set (from_hf_folder / from_synth vs
    from_gguf) hold the same numbers: equal, but for Gemma's norm weights,
    which the GGUF holds as 1 + w (exactly, in float64 too)."""
    if set(hf_w) != set(gguf_w):
        return False
    gem = c.arch in GEMMA
    return all(np.array_equal(hf_w[k] + (1.0 if gem and k.endswith("norm.weight") else 0.0),
                              gguf_w[k]) for k in hf_w)


def check_gguf_moe_tensors(tag: str, path: str, c, gguf_type: str) -> None:
    """A MoE GGUF as llama.cpp's converter lays it out: the arch and expert
    keys, per layer ffn_gate_inp F32 numpy [E, hidden], ffn_gate_exps /
    ffn_up_exps [E, I, hidden] and ffn_down_exps [E, hidden, I] in gguf_type,
    no dense ffn_gate/up/down; from_gguf's RefConfig has the MoE fields."""
    import gguf
    r = gguf.GGUFReader(path)
    arch = "qwen3moe" if c.arch == "qwen3moe" else "llama"
    f = {k: v.contents() for k, v in r.fields.items() if k.startswith(arch + ".")}
    t = {x.name: x for x in r.tensors}
    E, H, I = c.experts, c.hidden, c.expert_intermediate
    ok = (r.fields["general.architecture"].contents() == arch
          and f[f"{arch}.expert_count"] == E and f[f"{arch}.expert_used_count"] == c.experts_per_tok
          and (f.get(f"{arch}.expert_feed_forward_length") == I if arch == "qwen3moe"
               else f[f"{arch}.feed_forward_length"] == I))
    for i in range(c.layers):
        for name, shape, ttype in (("ffn_gate_inp", [E, H], "F32"),
                                   ("ffn_gate_exps", [E, I, H], gguf_type.upper()),
                                   ("ffn_up_exps", [E, I, H], gguf_type.upper()),
                                   ("ffn_down_exps", [E, H, I], gguf_type.upper())):
            x = t[f"blk.{i}.{name}.weight"]
            ok &= ([int(n) for n in x.shape][::-1] == shape and x.tensor_type.name == ttype)
        ok &= not any(f"blk.{i}.ffn_{n}.weight" in t for n in ("gate", "up", "down"))
    cfg, _ = rf.read_gguf(path)
    ok &= (cfg.num_experts == E and cfg.experts_per_tok == c.experts_per_tok
           and cfg.moe_intermediate == I and cfg.norm_topk_prob
           and cfg.moe_naming == ("qwen3_moe" if c.arch == "qwen3moe" else "mixtral"))
    check(f"{tag}/4/gguf-{gguf_type}/moe-tensors", bool(ok),
          f"router F32 [{E}, {H}], stacks {gguf_type} [{E}, {I}, {H}] / [{E}, {H}, {I}]")


# ------------------------------------------------------------------ (5) semantics

def check_semantics() -> None:
    # Sliding window: RoPE scores depend only on q_pos - k_pos, so in a 1-layer
    # model the output at position i with window W equals a full-attention run
    # over the W tokens ending at i (the window's own off-by-one included).
    W_ = 4
    cd = dict(arch="mistral", vocab=300, hidden=64, heads=4, kv_heads=2, layers=1,
              sliding_window=W_, tie_embeddings=False)
    m = rf.ReferenceModel.from_synth(cd, 7)
    full = rf.ReferenceModel.from_synth(dict(cd, sliding_window=None), 7)
    t = toks(12, 300, 51)
    got = m.forward(t)
    want = np.vstack([full.forward(t[max(0, i - W_ + 1):i + 1])[-1] for i in range(len(t))])
    e = rel(got, want)
    wrong = np.vstack([full.forward(t[max(0, i - W_):i + 1])[-1] for i in range(len(t))])
    check("semantics/sliding-window==last-W-keys", e < 1e-10 and rel(got, wrong) > 1e-3,
          f"window {W_}, rel err {e:.1e}; a window of W+1 keys differs by {rel(got, wrong):.1e}")
    check("semantics/sliding-window-matters", rel(got, full.forward(t)) > 1e-3)
    # GQA grouping: query head h uses KV head h // (heads / kv_heads) (HF
    # repeat_kv). An MHA model with K/V rows copied that way must agree.
    c = sm.make_config(dict(arch="llama", hidden=64, heads=4, kv_heads=2, layers=2,
                            qkv_bias=True))
    Wg = sm.make_weights(c, 8)
    Wm = dict(Wg)
    d, rep = c.head_dim, c.heads // c.kv_heads
    for i in range(c.layers):
        for n in ("k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias"):
            key = f"model.layers.{i}.self_attn.{n}"
            a = Wg[key].reshape(c.kv_heads, d, *Wg[key].shape[1:])
            Wm[key] = np.repeat(a, rep, axis=0).reshape(c.heads * d, *Wg[key].shape[1:])
    cm = sm.hf_config_json(sm.make_config(c, kv_heads=c.heads))
    t = toks(10, c.vocab, 52)
    mg = rf.ReferenceModel(sm.hf_config_json(c), Wg)
    e = rel(rf.ReferenceModel(cm, Wm).forward(t), mg.forward(t))
    check("semantics/gqa==mha-with-repeated-kv", e < 1e-12, f"rel err {e:.1e}")
    inc = np.vstack([mg.prefill(t[:4])] + [mg.decode(x)[None] for x in t[4:]])
    check("semantics/gqa-cached-path==mha", rel(inc, rf.ReferenceModel(cm, Wm).forward(t)) < 1e-12)
    # llama3: the HF rule here vs synth_model's rope_freqs (convert_hf_to_gguf's rule).
    c = sm.make_config(SHAPES["llama3-scaled"][0])
    m = rf.ReferenceModel.from_synth(c, 6)
    base = 1.0 / (c.rope_theta ** (np.arange(0, c.head_dim, 2) / c.head_dim))
    div = base / m.inv_freq
    f32 = sm.llama3_rope_freqs(c).astype(np.float64)
    bands = (int((div == 1).sum()), int(((div > 1) & (div < 8)).sum()), int((div == 8).sum()))
    check("semantics/llama3-inv_freq==rope_freqs", rel(div, f32) < 1e-6 and min(bands) > 0,
          f"rel diff {rel(div, f32):.1e}; unscaled/smoothed/scaled bands {bands}")
    # linear: inv_freq / factor == positions / factor.
    cl = sm.make_config(SHAPES["mistral-swa5-linear"][0])
    ml = rf.ReferenceModel.from_synth(cl, 4)
    check("semantics/linear-inv_freq", np.allclose(
        ml.inv_freq * 2.0, 1.0 / (cl.rope_theta ** (np.arange(0, 32, 2) / 32)), rtol=1e-15))
    # Activations.
    x = np.linspace(-30, 30, 61)
    ok = (np.allclose(rf.activation("silu", x), x / (1 + np.exp(-x)), rtol=1e-14, atol=1e-300)
          and abs(rf.activation("gelu", np.array([1.0]))[0] - 0.8413447460685429) < 1e-15
          and abs(rf.activation("gelu_pytorch_tanh", np.array([1.0]))[0] - 0.8411919906082768) < 1e-15)
    check("semantics/activations", ok)
    # trace: the recorded intermediates are the ones the logits come from.
    m = rf.ReferenceModel.from_synth(SHAPES["qwen2-bias-untied"][0], 2)
    tr: dict = {}
    t = toks(7, 300, 53)
    lg = m.forward(t, trace=tr)
    keys = {"embed", "final_norm"} | {f"L{i}.{k}" for i in range(2) for k in
                                      ("attn_norm", "q", "k", "v", "attn", "h_attn", "h_mlp")}
    check("semantics/trace", keys <= set(tr) and tr["L0.q"].shape == (7, 4, 16)
          and rel(tr["final_norm"] @ m.W["lm_head.weight"].T, lg) < 1e-15)


def _loop_rms_heads(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Per-head RMSNorm as a plain loop over rows, heads and elements, in
    Python floats: x [n, heads, head_dim], w [head_dim]."""
    n, heads, d = x.shape
    out = np.empty_like(x)
    for t in range(n):
        for hd in range(heads):
            ss = 0.0
            for e in range(d):
                ss += float(x[t, hd, e]) ** 2
            inv = 1.0 / math.sqrt(ss / d + eps)
            for e in range(d):
                out[t, hd, e] = float(x[t, hd, e]) * inv * float(w[e])
    return out


def _loop_rope(x: np.ndarray, theta: float, factor: float = 1.0) -> np.ndarray:
    """Rotate-half RoPE at positions 0..n-1 as a plain loop: element e < d/2
    pairs with e + d/2 at angle (pos / factor) * theta^(-2e/d) (factor:
    linear scaling)."""
    n, heads, d = x.shape
    out = np.empty_like(x)
    for t in range(n):
        for hd in range(heads):
            for e in range(d // 2):
                a = t / factor * theta ** (-2.0 * e / d)
                x1, x2 = float(x[t, hd, e]), float(x[t, hd, e + d // 2])
                out[t, hd, e] = x1 * math.cos(a) - x2 * math.sin(a)
                out[t, hd, e + d // 2] = x2 * math.cos(a) + x1 * math.sin(a)
    return out


def check_qk_norm() -> None:
    """Qwen3's QK-norm: it matters, it is per head over head_dim with the
    shared weight, it equals a plain loop, and it comes before RoPE, in the
    cached path too (the stateful checks (1), (2) run the qwen3 shapes)."""
    cd, seed = SHAPES["qwen3-qknorm-untied"]
    c = sm.make_config(cd)
    W = sm.make_weights(c, seed)
    m = rf.ReferenceModel.from_synth(c, seed)
    t = toks(9, c.vocab, 61)
    tr: dict = {}
    ref = m.forward(t, trace=tr)
    # The weights matter: each of q_norm, k_norm changed alone moves the logits.
    # (Scaled or all ones; a bug that dropped or swapped them would show.)
    diffs = {}
    for name, f in (("q_norm=ones", lambda a: np.ones_like(a)),
                    ("k_norm=ones", lambda a: np.ones_like(a)),
                    ("q_norm*1.5", lambda a: a * 1.5)):
        key = f"model.layers.0.self_attn.{name[:6]}.weight"
        diffs[name] = rel(rf.ReferenceModel(sm.hf_config_json(c), dict(W, **{key: f(W[key])}))
                          .forward(t), ref)
    swapped = dict(W)
    for i in range(c.layers):
        q, k = (f"model.layers.{i}.self_attn.{n}_norm.weight" for n in "qk")
        swapped[q], swapped[k] = W[k], W[q]
    diffs["q<->k"] = rel(rf.ReferenceModel(sm.hf_config_json(c), swapped).forward(t), ref)
    check("qk-norm/weights-matter", min(diffs.values()) > 1e-2,
          ", ".join(f"{k}: {v:.1e}" for k, v in diffs.items()))
    # == a plain loop: the trace's q_norm/k_norm (before RoPE) from the
    # projections of the traced attn_norm, and its q/k after RoPE.
    p = "model.layers.0.self_attn."
    h = tr["L0.attn_norm"]
    qp = (h @ W[p + "q_proj.weight"].astype(np.float64).T).reshape(len(t), c.heads, c.head_dim)
    kp = (h @ W[p + "k_proj.weight"].astype(np.float64).T).reshape(len(t), c.kv_heads, c.head_dim)
    ql = _loop_rms_heads(qp, W[p + "q_norm.weight"], c.rms_norm_eps)
    kl = _loop_rms_heads(kp, W[p + "k_norm.weight"], c.rms_norm_eps)
    e_norm = max(rel(tr["L0.q_norm"], ql), rel(tr["L0.k_norm"], kl))
    e_rope = max(rel(tr["L0.q"], _loop_rope(ql, c.rope_theta)),
                 rel(tr["L0.k"], _loop_rope(kl, c.rope_theta)))
    check("qk-norm/per-head==plain-loop", e_norm < 1e-13 and e_rope < 1e-12,
          f"norm rel err {e_norm:.1e}, after RoPE {e_rope:.1e}")
    # The order and the axis matter: RoPE first, or one norm over all heads of
    # a row, would give other q (RoPE keeps the RMS but not the per-element weight).
    qrope_first = _loop_rms_heads(_loop_rope(qp, c.rope_theta), W[p + "q_norm.weight"],
                                  c.rms_norm_eps)
    flat = qp.reshape(len(t), 1, -1)
    q_whole_row = _loop_rope(_loop_rms_heads(flat, np.tile(W[p + "q_norm.weight"], c.heads),
                                             c.rms_norm_eps).reshape(qp.shape), c.rope_theta)
    d_order, d_axis = rel(qrope_first, tr["L0.q"]), rel(q_whole_row, tr["L0.q"])
    check("qk-norm/before-rope-and-per-head-matter", d_order > 1e-3 and d_axis > 1e-3,
          f"RoPE-then-norm differs by {d_order:.1e}, norm over the whole row by {d_axis:.1e}")
    # Per head: scaling one query head's q_proj rows (and one KV head's k_proj
    # rows) leaves the logits as they were (eps aside: 1e-12 here); without
    # QK-norm the same scaling changes them.
    c0 = sm.make_config(c, rms_norm_eps=1e-12)
    W0 = sm.make_weights(c0, seed)
    scaled = dict(W0)
    d = c.head_dim
    for n, head in (("q_proj", 1), ("k_proj", 0)):
        a = W0[p + n + ".weight"].copy()
        a[head * d:(head + 1) * d] *= 7.0
        scaled[p + n + ".weight"] = a
    base0 = rf.ReferenceModel(sm.hf_config_json(c0), W0).forward(t)
    e_inv = rel(rf.ReferenceModel(sm.hf_config_json(c0), scaled).forward(t), base0)
    def without_qk_norm(w: dict) -> dict:
        return {k: a for k, a in w.items() if not k.endswith(("q_norm.weight", "k_norm.weight"))}
    cfg_nn = dict(sm.hf_config_json(c0), model_type="qwen2")   # same model, no QK-norm
    d_nn = rel(rf.ReferenceModel(cfg_nn, without_qk_norm(scaled)).forward(t),
               rf.ReferenceModel(cfg_nn, without_qk_norm(W0)).forward(t))
    check("qk-norm/per-head-scale-invariant", e_inv < 1e-9 and d_nn > 1e-2,
          f"head rows x7: rel diff {e_inv:.1e} with QK-norm, {d_nn:.1e} without")


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _loop_gemma_layer(c, W: dict, i: int, x: np.ndarray, q: np.ndarray, k: np.ndarray,
                      v: np.ndarray, local_theta: float | None = None) -> dict:
    """Gemma's layer i as plain loops in Python floats, HF's rules spelled
    out here: from the layer input x [T, hidden] and the traced q, k (after
    RoPE) and v: scores q.k * query_pre_attn_scalar^-0.5, soft-capped (gemma2),
    the causal mask with the window when layer i slides (gemma2: i even;
    gemma3: (i + 1) % pattern != 0), softmax, o_proj, post_attention_layernorm
    (1 + w), the residual; pre_feedforward_layernorm, down(gelu_tanh(gate) *
    up), post_feedforward_layernorm, the residual. -> {attn, h_attn, h_mlp}."""
    p = f"model.layers.{i}."
    Wd = {n: np.asarray(a, np.float64) for n, a in W.items() if n.startswith(p)}
    T, nh, d = q.shape
    rep = nh // c.kv_heads
    slides = (i % 2 == 0) if c.arch == "gemma2" else bool((i + 1) % c.sliding_window_pattern)
    win = c.sliding_window if slides else None
    scale = c.query_pre_attn_scalar ** -0.5

    def norm(row, w):
        ms = sum(float(a) * float(a) for a in row) / len(row)
        inv = 1.0 / math.sqrt(ms + c.rms_norm_eps)
        return np.array([float(a) * inv * (1.0 + float(b)) for a, b in zip(row, w)])
    attn = np.zeros((T, nh * d))
    for t in range(T):
        for hd in range(nh):
            g = hd // rep
            sc = []
            for j in range(t + 1):
                if win is not None and t - j >= win:
                    continue
                z = sum(float(q[t, hd, e]) * float(k[j, g, e]) for e in range(d)) * scale
                if c.attn_softcap:
                    z = c.attn_softcap * math.tanh(z / c.attn_softcap)
                sc.append((j, z))
            mx = max(z for _, z in sc)
            ws = [(j, math.exp(z - mx)) for j, z in sc]
            tot = sum(w for _, w in ws)
            for e in range(d):
                attn[t, hd * d + e] = sum(w * float(v[j, g, e]) for j, w in ws) / tot
    h_attn = np.array([x[t] + norm(Wd[p + "self_attn.o_proj.weight"] @ attn[t],
                                   Wd[p + "post_attention_layernorm.weight"])
                       for t in range(T)])
    h_mlp = np.empty_like(h_attn)
    for t in range(T):
        h = norm(h_attn[t], Wd[p + "pre_feedforward_layernorm.weight"])
        gate, up = Wd[p + "mlp.gate_proj.weight"] @ h, Wd[p + "mlp.up_proj.weight"] @ h
        act = np.array([_gelu_tanh(float(a)) * float(b) for a, b in zip(gate, up)])
        h_mlp[t] = h_attn[t] + norm(Wd[p + "mlp.down_proj.weight"] @ act,
                                    Wd[p + "post_feedforward_layernorm.weight"])
    return {"attn": attn, "h_attn": h_attn, "h_mlp": h_mlp}


def check_gemma() -> None:
    """Gemma 2 / 3: each layer == plain loops of HF's rules (traced inputs);
    the embedding scale and the final norm + soft-cap by hand; the window
    (a query sees the last `window` keys); gemma3's per-layer RoPE (local
    base unscaled, global base with linear scaling) == a loop; every
    semantic knob of RefConfig changed alone moves the logits; the cached
    path (checks 1, 2) runs these shapes too."""
    for tag in ("gemma2-tied", "gemma2-untied-caps", "gemma3-pattern6", "gemma3-linear-untied"):
        cd, seed = SHAPES[tag]
        c = sm.make_config(cd)
        W = sm.make_weights(c, seed)
        m = rf.ReferenceModel.from_synth(c, seed)
        t = toks(14, c.vocab, 81)
        tr: dict = {}
        ref = m.forward(t, trace=tr)
        E = W["model.embed_tokens.weight"].astype(np.float64)
        e_embed = rel(tr["embed"], E[t] * math.sqrt(c.hidden))
        errs = {}
        x = tr["embed"]
        for i in (0, 1, c.layers - 1):
            lp = _loop_gemma_layer(c, W, i, tr[f"L{i - 1}.h_mlp"] if i else x,
                                   tr[f"L{i}.q"], tr[f"L{i}.k"], tr[f"L{i}.v"])
            for name in ("attn", "h_attn", "h_mlp"):
                errs[f"L{i}.{name}"] = rel(tr[f"L{i}.{name}"], lp[name])
        fin = W["model.norm.weight"].astype(np.float64)
        xf = tr[f"L{c.layers - 1}.h_mlp"]
        nf = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + c.rms_norm_eps) * (1.0 + fin)
        head = W.get("lm_head.weight", W["model.embed_tokens.weight"]).astype(np.float64)
        lg = nf @ head.T
        if c.final_softcap:
            lg = c.final_softcap * np.tanh(lg / c.final_softcap)
        errs["logits"] = rel(ref, lg)
        check(f"{tag}/gemma/layers==plain-loops", max(errs.values()) < 1e-12 and e_embed < 1e-15,
              f"embed x sqrt(hidden) {e_embed:.1e}; " + ", ".join(
                  f"{k} {v:.1e}" for k, v in errs.items()))
        # Every knob matters (a reader with that one bug): > 1e-3 (the GELU
        # variant > 1e-5: the two GELUs differ by < 2e-4 per element).
        L, w = c.layers, c.sliding_window
        knobs = {"norm weight w, not 1 + w": variant(m, norm_offset=0.0),
                 "no embedding scale": variant(m, embed_scale=1.0),
                 "llama's norms (no post-norms)": variant(m, post_norms=False),
                 "scores / sqrt(2 head_dim)": variant(m, query_pre_attn_scalar=2.0 * c.head_dim),
                 "no windows": variant(m, layer_windows=[None] * L),
                 "window one key wider": variant(m, layer_windows=[
                     x_ and x_ + 1 for x_ in m.cfg.layer_windows]),
                 "silu": variant(m, hidden_act="silu")}
        if c.attn_softcap:
            knobs["no attention soft-cap"] = variant(m, attn_softcap=None)
        if c.final_softcap:
            knobs["no final soft-cap"] = variant(m, final_softcap=None)
        if c.arch == "gemma2":
            knobs["odd layers slide"] = variant(m, layer_windows=[
                None if x_ else w for x_ in m.cfg.layer_windows])
        else:
            n = c.sliding_window_pattern
            knobs["global at i % pattern == 0"] = variant(m, layer_windows=[
                None if i % n == 0 else w for i in range(L)])
            knobs["rope_theta everywhere"] = variant(m, layer_local_rope=None)
            knobs["rope_local_theta everywhere"] = variant(m, layer_local_rope=[True] * L)
        diffs = {k: rel(v.forward(t), ref) for k, v in knobs.items()}
        diffs["gelu (erf)"] = rel(variant(m, hidden_act="gelu").forward(t), ref)
        if c.rope_scaling:
            loc = variant(m)
            loc.inv_freq_local = loc.inv_freq_local / c.rope_scaling["factor"]
            diffs["linear scaling on local layers too"] = rel(loc.forward(t), ref)
        check(f"{tag}/gemma/every-knob-matters",
              all(v > (1e-5 if k == "gelu (erf)" else 1e-3) for k, v in diffs.items()),
              ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
        if c.arch == "gemma3":
            # Per-layer RoPE == a loop: local layers at rope_local_theta
            # unscaled, global ones at rope_theta with the linear factor.
            f = c.rope_scaling["factor"] if c.rope_scaling else 1.0
            e_r, kinds = 0.0, []
            for i in range(L):
                slides = bool((i + 1) % c.sliding_window_pattern)
                kinds.append("L" if slides else "G")
                want = (_loop_rope(tr[f"L{i}.q_norm"], c.rope_local_theta) if slides else
                        _loop_rope(tr[f"L{i}.q_norm"], c.rope_theta, f))
                e_r = max(e_r, rel(tr[f"L{i}.q"], want))
            check(f"{tag}/gemma3/per-layer-rope==plain-loop", e_r < 1e-12,
                  f"layers {''.join(kinds)} (L: theta {c.rope_local_theta:g}, G: "
                  f"{c.rope_theta:g} / {f:g}), rel err {e_r:.1e}")
    # The window, as Mistral's: in a 1-layer gemma2 (layer 0 slides) the
    # output at i equals a window-free run over the `window` tokens ending at
    # i (RoPE is relative; the soft-cap acts per score).
    W_ = 4
    cd = dict(arch="gemma2", vocab=300, hidden=64, heads=4, kv_heads=2, layers=1,
              sliding_window=W_, qk_gain=2.0)
    m = rf.ReferenceModel.from_synth(cd, 7)
    full = variant(m, layer_windows=[None])
    t = toks(12, 300, 82)
    got = m.forward(t)
    want = np.vstack([full.forward(t[max(0, i - W_ + 1):i + 1])[-1] for i in range(len(t))])
    wrong = np.vstack([full.forward(t[max(0, i - W_):i + 1])[-1] for i in range(len(t))])
    check("gemma2/sliding-window==last-W-keys", rel(got, want) < 1e-10
          and rel(got, wrong) > 1e-3,
          f"window {W_}: rel err {rel(got, want):.1e}; W+1 keys differ by {rel(got, wrong):.1e}")


def check_gguf_gemma_keys() -> None:
    """How read_gguf turns gemma2 / gemma3 keys into semantics, as llama.cpp's
    loaders do, on key sets the synthetic files do not all have: the SWA
    pattern as a count or a per-layer bool array; gemma2's defaults (window
    4096 on even layers, caps 50 / 30: it always soft-caps); gemma3 without
    a window key (all global, one RoPE base); rope.freq_base_swa's default
    10000; the 27B layer counts' score scale hidden // heads."""
    def run(arch, keys, layers=6, hidden=64, heads=4, head_dim=32):
        def field(k, default=None):
            return keys.get(k.split(".", 1)[1], default)
        return rf._gguf_gemma("x.gguf", arch, field, {}, hidden, heads, head_dim, layers, True)
    ok, detail = True, []
    e, w = run("gemma2", {})
    ok &= (w == [4096, None] * 3 and e["attn_softcap"] == 50.0 and e["final_softcap"] == 30.0
           and e.get("layer_local_rope") is None and e["query_pre_attn_scalar"] == 32.0)
    e, w = run("gemma3", {"attention.sliding_window": 8})
    ok &= w == [8] * 5 + [None] and e["layer_local_rope"] == [True] * 5 + [False] \
        and e["rope_local_theta"] == 10000.0 and e["final_softcap"] is None
    e, w = run("gemma3", {"attention.sliding_window": 8, "attention.sliding_window_pattern": 3,
                          "rope.freq_base_swa": 500.0})
    ok &= w == [8, 8, None] * 2 and e["rope_local_theta"] == 500.0
    arr = [True, False, False, True, True, False]
    e, w = run("gemma3", {"attention.sliding_window": 8, "attention.sliding_window_pattern": arr})
    ok &= w == [8 if a else None for a in arr] and e["layer_local_rope"] == arr
    e, w = run("gemma3", {})
    ok &= w == [None] * 6 and e.get("layer_local_rope") is None
    e, _ = run("gemma3", {"attention.sliding_window": 8, "final_logit_softcapping": 30.0})
    ok &= e["final_softcap"] == 30.0
    e2, _ = run("gemma2", {}, layers=46, hidden=4608, heads=32, head_dim=128)
    e3, _ = run("gemma3", {"attention.sliding_window": 8}, layers=62, hidden=5376, heads=32,
                head_dim=128)
    ok &= e2["query_pre_attn_scalar"] == 144.0 and e3["query_pre_attn_scalar"] == 168.0
    check("gguf/gemma-keys-as-llama.cpp-reads-them", bool(ok))


def check_phi3() -> None:
    """Phi-3: its fused tensors are llama's q/k/v and gate/up stacked by rows
    (Q, K, V; gate, up): split into a llama model, the logits agree; K/V rows
    swapped, Q heads rotated, gate/up halves swapped each move the logits;
    the window applies to every layer."""
    for tag in ("phi3-untied", "phi3-window-mqa"):
        cd, seed = SHAPES[tag]
        c = sm.make_config(cd)
        W = sm.make_weights(c, seed)
        m = rf.ReferenceModel.from_synth(c, seed)
        t = toks(14, c.vocab, 83)
        ref = m.forward(t)
        q, kv, I, D = c.heads * c.head_dim, c.kv_heads * c.head_dim, c.intermediate, c.head_dim
        split, kv_swap, q_roll, gu_swap = {}, dict(W), dict(W), dict(W)
        for name, a in W.items():
            if name.endswith("self_attn.qkv_proj.weight"):
                p = name[:-len("qkv_proj.weight")]
                split.update({p + "q_proj.weight": a[:q], p + "k_proj.weight": a[q:q + kv],
                              p + "v_proj.weight": a[q + kv:]})
                kv_swap[name] = np.concatenate([a[:q], a[q + kv:], a[q:q + kv]])
                q_roll[name] = np.concatenate([np.roll(a[:q], D, axis=0), a[q:]])
            elif name.endswith("mlp.gate_up_proj.weight"):
                p = name[:-len("gate_up_proj.weight")]
                split.update({p + "gate_proj.weight": a[:I], p + "up_proj.weight": a[I:]})
                gu_swap[name] = np.concatenate([a[I:], a[:I]])
            else:
                split[name] = a
        llama = dict(sm.hf_config_json(sm.make_config(c, arch="llama", sliding_window=None)),
                     model_type="mistral", sliding_window=c.sliding_window)
        e = rel(rf.ReferenceModel(llama, split).forward(t), ref)
        hf = sm.hf_config_json(c)
        diffs = {"K/V rows swapped": rel(rf.ReferenceModel(hf, kv_swap).forward(t), ref),
                 "Q heads rotated": rel(rf.ReferenceModel(hf, q_roll).forward(t), ref),
                 "gate/up swapped": rel(rf.ReferenceModel(hf, gu_swap).forward(t), ref)}
        if c.sliding_window:
            diffs["no window"] = rel(variant(m, layer_windows=[None] * c.layers).forward(t), ref)
        check(f"{tag}/phi3/==split-tensors+fused-order-matters",
              e < 1e-13 and min(diffs.values()) > 1e-2 and m.cfg.fused_proj
              and m.cfg.layer_windows == [c.sliding_window] * c.layers,
              f"== llama/mistral with split q/k/v, gate/up: rel err {e:.1e}; " + ", ".join(
                  f"{k} {v:.1e}" for k, v in diffs.items()))


def _all_expert_0(c, W: dict) -> dict:
    """W with every expert of every layer replaced by expert 0 (what a bug
    that runs expert 0 for every token computes)."""
    out = dict(W)
    for name in W:
        m = re.fullmatch(r"(model\.layers\.\d+\.(?:mlp|block_sparse_moe)\.experts\.)(\d+)(\..+)",
                         name)
        if m and m.group(2) != "0":
            out[name] = W[m.group(1) + "0" + m.group(3)]
    return out


def _loop_moe(c, W: dict, layer: int, h: np.ndarray) -> tuple[np.ndarray, list]:
    """HF's sparse MoE block as a plain loop over tokens and their experts, in
    Python floats where it matters: softmax over all experts, the k largest
    (ties to the lower index), weights renormalized when norm_topk_prob, the
    sum of w * down(silu(gate h) * up h). HF names spelled out here.
    -> (out [T, hidden], [(experts, weights) per token])."""
    p = f"model.layers.{layer}."
    if c.arch == "qwen3moe":
        router, ex, (g_, u_, d_) = p + "mlp.gate.weight", p + "mlp.experts.", (
            "gate_proj", "up_proj", "down_proj")
    else:
        router, ex, (g_, u_, d_) = p + "block_sparse_moe.gate.weight", \
            p + "block_sparse_moe.experts.", ("w1", "w3", "w2")
    Wd = {k: np.asarray(v, np.float64) for k, v in W.items() if k.startswith(p)}
    out = np.zeros_like(h)
    routes = []
    for t in range(len(h)):
        logits = [float(Wd[router][e] @ h[t]) for e in range(c.experts)]
        mx = max(logits)
        z = [math.exp(x - mx) for x in logits]
        probs = [x / sum(z) for x in z]
        top = sorted(range(c.experts), key=lambda e: (-probs[e], e))[:c.experts_per_tok]
        w = [probs[e] for e in top]
        if c.norm_topk_prob:
            s = sum(w)
            w = [x / s for x in w]
        routes.append((top, w))
        for e, we in zip(top, w):
            gate = Wd[f"{ex}{e}.{g_}.weight"] @ h[t]
            up = Wd[f"{ex}{e}.{u_}.weight"] @ h[t]
            act = np.array([x / (1.0 + math.exp(-x)) for x in gate]) * up
            out[t] += we * (Wd[f"{ex}{e}.{d_}.weight"] @ act)
    return out, routes


def check_moe(tmp: str) -> None:
    """The MoE block (Qwen3-MoE, Mixtral): == a plain per-token loop; the
    routing matters and only routed experts do; norm_topk_prob; the tie rule;
    a token's route does not depend on its batch-mates."""
    for tag in ("qwen3moe-untied", "qwen3moe-nonorm-k3", "mixtral-tied-mqa"):
        cd, seed = SHAPES[tag]
        c = sm.make_config(cd)
        W = sm.make_weights(c, seed)
        m = rf.ReferenceModel.from_synth(c, seed)
        t = toks(10, c.vocab, 71)
        tr: dict = {}
        ref = m.forward(t, trace=tr)
        # == the loop, layer by layer from the traced MLP input; same routes.
        e_out, same_routes, e_w = 0.0, True, 0.0
        for i in range(c.layers):
            out, routes = _loop_moe(c, W, i, tr[f"L{i}.ffn_norm"])
            e_out = max(e_out, rel(tr[f"L{i}.h_mlp"] - tr[f"L{i}.h_attn"], out))
            same_routes &= [r[0] for r in routes] == tr[f"L{i}.experts"].tolist()
            e_w = max(e_w, rel(tr[f"L{i}.expert_weights"], np.array([r[1] for r in routes])))
        shapes_ok = all(tr[f"L{i}.experts"].shape == (len(t), c.experts_per_tok)
                        and tr[f"L{i}.experts"].dtype == np.int64
                        and tr[f"L{i}.router_logits"].shape == (len(t), c.experts)
                        and tr[f"L{i}.router_margin"].shape == (len(t),)
                        and np.all(tr[f"L{i}.router_margin"] >= 0) for i in range(c.layers))
        check(f"{tag}/moe/block==per-token-loop", e_out < 1e-12 and same_routes and e_w < 1e-14
              and shapes_ok, f"rel err {e_out:.1e}, weights {e_w:.1e}, routes equal: "
              f"{same_routes}")
        # Expert 0 for everything would differ clearly.
        d0 = rel(rf.ReferenceModel(sm.hf_config_json(c), _all_expert_0(c, W)).forward(t), ref)
        check(f"{tag}/moe/expert-0-everywhere-differs", d0 > 1e-2, f"rel diff {d0:.1e}")
        # Few tokens leave experts idle: changing an idle one (last layer) keeps
        # the logits to the bit; changing a routed one moves them.
        few = t[:max(1, (c.experts - 1) // c.experts_per_tok)]
        ftr: dict = {}
        base = m.forward(few, trace=ftr)
        last = c.layers - 1
        used = sorted(set(ftr[f"L{last}.experts"].ravel().tolist()))
        idle = [e for e in range(c.experts) if e not in used]
        proj = "mlp.experts.{}.down_proj" if c.arch == "qwen3moe" else \
            "block_sparse_moe.experts.{}.w2"

        def changed(e: int) -> np.ndarray:
            key = f"model.layers.{last}.{proj.format(e)}.weight"
            return rf.ReferenceModel(sm.hf_config_json(c), dict(W, **{key: -2 * W[key]})
                                     ).forward(few)
        d_idle = float(np.abs(changed(idle[0]) - base).max()) if idle else math.inf
        d_used = rel(changed(used[0]), base)
        check(f"{tag}/moe/only-routed-experts-matter", d_idle == 0.0 and d_used > 1e-2,
              f"layer {last} routes {len(few)} tokens to {used}; idle expert {idle[:1]} "
              f"x-2: diff {d_idle:.1e}; routed {used[0]} x-2: rel diff {d_used:.1e}")
        # norm_topk_prob on/off (Qwen3-MoE's switch) changes the output.
        if c.arch == "qwen3moe":
            hf = dict(sm.hf_config_json(c), norm_topk_prob=not c.norm_topk_prob)
            d_n = rel(rf.ReferenceModel(hf, W).forward(t), ref)
            check(f"{tag}/moe/norm_topk_prob-matters", d_n > 1e-3,
                  f"{c.norm_topk_prob} -> {not c.norm_topk_prob}: rel diff {d_n:.1e}")
        # A token's route depends on that token's history only: a ragged step
        # batch (with traces) routes each row as the sequence run alone does.
        m.reset()
        A, B, C = toks(7, c.vocab, 72), toks(5, c.vocab, 73), toks(3, c.vocab, 74)
        m.prefill(A[:4], "a")
        m.prefill(B[:2], "b")
        st = [("b", B[2:]), ("c", C), ("a", A[4:])]
        step_tr: dict = {}
        m.step(st, trace=step_tr)
        ok = True
        for i in range(c.layers):
            got = rf.ReferenceModel.split_rows(st, step_tr[f"L{i}.experts"])
            gw = rf.ReferenceModel.split_rows(st, step_tr[f"L{i}.expert_weights"])
            for sid, full, n in (("a", A, 3), ("b", B, 3), ("c", C, 3)):
                r = m.expert_routes(full)
                ok &= (np.array_equal(got[sid], r["experts"][i][-n:])
                       and rel(gw[sid], r["weights"][i][-n:]) < 1e-12)
        check(f"{tag}/moe/routes-independent-of-batch", bool(ok),
              "step(trace=...) rows == expert_routes of each sequence alone")
        m.reset()
    # The tie rule: equal probabilities go to the lower expert index first.
    ex, w, mg = rf.moe_route(np.array([[1.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0],
                                       [3.0, 1.0, 3.0, 3.0]]), 2, True)
    ex1, w1, _ = rf.moe_route(np.zeros((1, 4)), 2, False)
    check("moe/tie-rule-lower-index-first",
          ex.tolist() == [[1, 2], [0, 1], [0, 2]] and np.allclose(w, 0.5, rtol=0, atol=1e-15)
          and mg.tolist() == [1.0, 0.0, 0.0] and ex1.tolist() == [[0, 1]]
          and np.allclose(w1, 0.25, rtol=0, atol=1e-15))
    # In a model: a router whose rows 1..E-1 all equal row 0 sends every
    # token to experts 0..k-1 (whatever its logits).
    cd, seed = SHAPES["mixtral-tied-mqa"]
    c = sm.make_config(cd)
    W = sm.make_weights(c, seed)
    tied = dict(W)
    for i in range(c.layers):
        key = f"model.layers.{i}.block_sparse_moe.gate.weight"
        tied[key] = np.repeat(W[key][:1], c.experts, axis=0)
    r = rf.ReferenceModel(sm.hf_config_json(c), tied).expert_routes(toks(6, c.vocab, 75))
    check("moe/tie-rule-in-model", bool(np.all(r["experts"] == np.arange(c.experts_per_tok)))
          and np.allclose(r["weights"], 1 / c.experts_per_tok, rtol=0, atol=1e-15))


def check_hf_configs() -> None:
    d = os.path.join(ROOT, "test", "data", "hf_configs")
    if not os.path.isdir(d):
        return
    got = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".json"):
            with open(os.path.join(d, f)) as fh:
                got[f[:-5]] = rf.normalize_config(json.load(fh))
    ok = True
    detail = []
    if "llama-3.1-8b" in got:
        c = got["llama-3.1-8b"]
        ok &= (c.rope_scaling["rope_type"] == "llama3" and c.kv_heads == 8
               and c.head_dim == 128 and c.layer_windows == [None] * 32)
    if "mistral-7b-v0.1" in got:
        c = got["mistral-7b-v0.1"]
        ok &= c.layer_windows == [4096] * 32
    if "qwen2-0.5b" in got:
        c = got["qwen2-0.5b"]
        ok &= c.layer_windows == [None] * c.layers and c.tie_embeddings
    if "qwen3-0.6b" in got:
        c = got["qwen3-0.6b"]
        ok &= (c.qk_norm and c.head_dim == 128 and c.layer_windows == [None] * c.layers
               and c.tie_embeddings)
    for k, c in got.items():
        detail.append(f"{k}: {c.heads}/{c.kv_heads}x{c.head_dim}")
    check("semantics/real-hf-configs-parse", bool(ok) and len(got) > 0, "; ".join(detail))
    # Qwen3-0.6B's config.json, here too so that the check does not depend on
    # test/data: QK-norm, explicit head_dim 128 (heads*head_dim = 2*hidden),
    # null window turned off.
    q3 = {"architectures": ["Qwen3ForCausalLM"], "attention_bias": False,
          "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
          "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
          "initializer_range": 0.02, "intermediate_size": 3072,
          "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
          "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
          "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
          "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
          "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
          "vocab_size": 151936}
    c = rf.normalize_config(q3)
    ok = (c.qk_norm and c.head_dim == 128 and c.heads * c.head_dim == 2 * c.hidden
          and c.layer_windows == [None] * 28 and c.tie_embeddings and c.rope_theta == 1e6)
    # Qwen3Config defaults head_dim to 128 (not hidden/heads); windows as Qwen2's.
    c2 = rf.normalize_config({k: v for k, v in q3.items() if k != "head_dim"})
    ok &= c2.head_dim == 128
    c3 = rf.normalize_config(dict(q3, use_sliding_window=True, sliding_window=4096,
                                  max_window_layers=20))
    ok &= c3.layer_windows == [None] * 20 + [4096] * 8
    ok &= not rf.normalize_config(dict(q3, model_type="qwen2")).qk_norm
    check("semantics/qwen3-hf-config", bool(ok), c.summary())
    # Qwen3-30B-A3B's config.json: QK-norm, 128 experts of 768, top-8
    # renormalized, every layer sparse.
    q3m = {"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False,
           "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
           "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
           "initializer_range": 0.02, "intermediate_size": 6144,
           "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
           "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": True,
           "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
           "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False,
           "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0,
           "router_aux_loss_coef": 0.001, "sliding_window": None, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
           "use_sliding_window": False, "vocab_size": 151936}
    c = rf.normalize_config(q3m)
    ok = (c.qk_norm and c.moe and c.num_experts == 128 and c.experts_per_tok == 8
          and c.moe_intermediate == 768 and c.norm_topk_prob and c.intermediate == 6144
          and c.moe_naming == "qwen3_moe" and c.head_dim == 128
          and c.layer_windows == [None] * 48)
    # Qwen3MoeConfig's defaults: head_dim hidden/heads, norm_topk_prob False.
    c2 = rf.normalize_config({k: v for k, v in q3m.items()
                              if k not in ("head_dim", "norm_topk_prob")})
    ok &= c2.head_dim == 64 and not c2.norm_topk_prob
    refused = []
    for bad in ({"mlp_only_layers": [0, 5]}, {"decoder_sparse_step": 2},
                {"num_experts_per_tok": 129}):
        try:
            rf.normalize_config(dict(q3m, **bad))
        except rf.ReferenceError as e:
            refused.append(str(e))
    ok &= (len(refused) == 3 and "mlp_only_layers" in refused[0]
           and "decoder_sparse_step" in refused[1] and "num_experts_per_tok" in refused[2])
    check("semantics/qwen3moe-hf-config", bool(ok), c.summary())
    # Mixtral-8x7B's config.json: 8 experts of intermediate_size, top-2,
    # always renormalized, window null (a set one applies to every layer).
    mx = {"architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
          "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
          "initializer_range": 0.02, "intermediate_size": 14336,
          "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
          "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
          "num_local_experts": 8, "output_router_logits": False, "rms_norm_eps": 1e-05,
          "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": None,
          "tie_word_embeddings": False, "torch_dtype": "bfloat16",
          "transformers_version": "4.36.0.dev0", "use_cache": True, "vocab_size": 32000}
    c = rf.normalize_config(mx)
    ok = (c.moe and not c.qk_norm and c.num_experts == 8 and c.experts_per_tok == 2
          and c.moe_intermediate == 14336 and c.norm_topk_prob and c.moe_naming == "mixtral"
          and c.head_dim == 128 and c.layer_windows == [None] * 32)
    ok &= rf.normalize_config(dict(mx, sliding_window=4096)).layer_windows == [4096] * 32
    ok &= not rf.normalize_config(dict(mx, model_type="mistral")).moe
    check("semantics/mixtral-hf-config", bool(ok), c.summary())
    # Phi-3-mini-4k-instruct's config.json: no head_dim (3072 / 32 = 96), the
    # window 2047 on every layer, fused projections.
    p3 = {"architectures": ["Phi3ForCausalLM"], "attention_bias": False,
          "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000,
          "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
          "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3",
          "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
          "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0,
          "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
          "sliding_window": 2047, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
          "transformers_version": "4.40.2", "use_cache": True, "vocab_size": 32064}
    c = rf.normalize_config(p3)
    ok = (c.fused_proj and c.head_dim == 96 and c.layer_windows == [2047] * 32
          and not c.tie_embeddings and c.hidden_act == "silu" and not c.post_norms
          and c.norm_offset == 0.0 and c.embed_scale == 1.0)
    refused = []
    for bad in ({"partial_rotary_factor": 0.75},
                {"rope_scaling": {"rope_type": "longrope", "long_factor": [1.0] * 48,
                                  "short_factor": [1.0] * 48}}):
        try:
            rf.normalize_config(dict(p3, **bad))
        except rf.ReferenceError as e:
            refused.append(str(e))
    ok &= len(refused) == 2 and "partial_rotary_factor" in refused[0] and "longrope" in refused[1]
    check("semantics/phi3-hf-config", bool(ok), c.summary())
    # gemma-2-2b's config.json: windows 4096 on the even layers, soft-caps
    # 50 / 30, scalar 256 = head_dim, hidden_activation, tied by default.
    g2 = {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False,
          "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2,
          "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": 30.0,
          "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
          "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
          "initializer_range": 0.02, "intermediate_size": 9216, "max_position_embeddings": 8192,
          "model_type": "gemma2", "num_attention_heads": 8, "num_hidden_layers": 26,
          "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
          "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
          "torch_dtype": "float32", "transformers_version": "4.42.4", "use_cache": True,
          "vocab_size": 256000}
    c = rf.normalize_config(g2)
    ok = (c.layer_windows == [4096, None] * 13 and c.attn_softcap == 50.0
          and c.final_softcap == 30.0 and c.query_pre_attn_scalar == 256.0
          and c.head_dim == 256 and c.tie_embeddings and c.hidden_act == "gelu_pytorch_tanh"
          and c.post_norms and c.norm_offset == 1.0 and c.embed_scale == math.sqrt(2304)
          and not c.layer_local_rope and not c.qk_norm)
    # Gemma2Config's defaults: caps 50 / 30, window 4096, scalar 256.
    c2 = rf.normalize_config({k: v for k, v in g2.items() if k not in (
        "attn_logit_softcapping", "final_logit_softcapping", "sliding_window",
        "query_pre_attn_scalar", "hidden_act")})
    ok &= (c2.attn_softcap, c2.final_softcap, c2.layer_windows[0], c2.query_pre_attn_scalar,
           c2.hidden_act) == (50.0, 30.0, 4096, 256.0, "gelu_pytorch_tanh")
    ok &= rf.normalize_config(dict(g2, attn_logit_softcapping=None)).attn_softcap is None
    check("semantics/gemma2-hf-config", bool(ok), c.summary())
    # gemma-3-1b-it's config.json: 26 layers, pattern 6 (global 5, 11, 17,
    # 23), window 512, local base 10000, global 1e6, QK-norm; gemma-3-4b's
    # text config adds linear:8 (global layers only); layer_types wins.
    g3 = {"architectures": ["Gemma3ForCausalLM"], "attention_bias": False,
          "attention_dropout": 0.0, "attn_logit_softcapping": None, "bos_token_id": 2,
          "cache_implementation": "hybrid", "eos_token_id": [1, 106],
          "final_logit_softcapping": None, "head_dim": 256,
          "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
          "initializer_range": 0.02, "intermediate_size": 6912,
          "max_position_embeddings": 32768, "model_type": "gemma3_text",
          "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
          "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
          "rope_local_base_freq": 10000, "rope_scaling": None, "rope_theta": 1000000,
          "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
          "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144}
    c = rf.normalize_config(g3)
    glob = [i for i, w in enumerate(c.layer_windows) if w is None]
    ok = (glob == [5, 11, 17, 23] and set(c.layer_windows) == {512, None}
          and c.layer_local_rope == [w is not None for w in c.layer_windows]
          and c.rope_local_theta == 10000.0 and c.rope_theta == 1e6 and c.qk_norm
          and c.attn_softcap is None and c.final_softcap is None and c.tie_embeddings
          and c.hidden_act == "gelu_pytorch_tanh" and c.heads * c.head_dim != c.hidden)
    c4 = rf.normalize_config(dict(g3, rope_scaling={"factor": 8.0, "rope_type": "linear"}))
    m4 = ReferenceLike(c4)
    ok &= (np.allclose(m4.inv_freq * 8, 1e6 ** (-np.arange(0, 256, 2) / 256), rtol=1e-14)
           and np.allclose(m4.inv_freq_local, 1e4 ** (-np.arange(0, 256, 2) / 256), rtol=1e-14))
    types = ["full_attention" if i % 3 == 0 else "sliding_attention" for i in range(26)]
    c5 = rf.normalize_config(dict(g3, layer_types=types))
    ok &= (c5.layer_windows == [None if i % 3 == 0 else 512 for i in range(26)]
           and c5.layer_local_rope == [i % 3 != 0 for i in range(26)])
    c6 = rf.normalize_config({k: v for k, v in g3.items() if k not in (
        "sliding_window_pattern", "rope_theta", "rope_local_base_freq")})
    ok &= (c6.layer_windows == c.layer_windows and c6.rope_theta == 1e6
           and c6.rope_local_theta == 10000.0)
    check("semantics/gemma3-hf-config", bool(ok), c.summary())


class ReferenceLike:
    """A RefConfig's RoPE tables without weights."""

    def __init__(self, c):
        self.inv_freq, self.inv_freq_local = rf.rope_inv_freq(c), rf.rope_inv_freq_local(c)


# ------------------------------------------------------------------ CLI, errors

def check_cli(tmp: str) -> None:
    out = os.path.join(tmp, "cli.npy")
    spec = 'synth:{"arch": "qwen2", "seed": 2, "vocab": 300, "tie_embeddings": false}'
    r = subprocess.run([sys.executable, os.path.join(HERE, "reference_forward.py"), spec,
                        "--tokens", "5,6,7", "--decode-steps", "2", "--out", out],
                       capture_output=True, text=True)
    ok = r.returncode == 0 and os.path.exists(out)
    if ok:
        a = np.load(out)
        m = rf.ReferenceModel.from_synth(dict(arch="qwen2", vocab=300, tie_embeddings=False), 2)
        fed = [5, 6, 7]
        ref = [m.prefill(fed)]
        for _ in range(2):
            fed.append(int(np.argmax(ref[-1][-1])))
            ref.append(m.decode(fed[-1])[None])
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("pos ")]
        ok = a.shape == (5, 300) and rel(a, np.vstack(ref)) < 1e-12 and len(lines) == 5 \
            and len(re.findall(r"\b\d+:-?\d+\.\d+", lines[0])) == 5
    check("cli/synth-prompt+decode", ok, (r.stderr or "")[-300:])
    spec = 'synth:{"arch": "gemma3", "seed": 3, "layers": 3, "sliding_window_pattern": 3}'
    r = subprocess.run([sys.executable, os.path.join(HERE, "reference_forward.py"), spec,
                        "--tokens", "5,6,7,8,9,10,11,12,13,14", "--out", out],
                       capture_output=True, text=True)
    ok = r.returncode == 0 and "window [8] on 2 of 3 layers" in r.stdout
    if ok:
        m = rf.ReferenceModel.from_synth(dict(arch="gemma3", layers=3, sliding_window_pattern=3),
                                         3)
        ok = rel(np.load(out), m.forward(list(range(5, 15)))) < 1e-12
    check("cli/synth-gemma3", ok, (r.stderr or r.stdout)[-300:])
    r = subprocess.run([sys.executable, os.path.join(HERE, "reference_forward.py"),
                        os.path.join(tmp, "nope"), "--tokens", "1"], capture_output=True, text=True)
    check("cli/bad-model-exit-2", r.returncode == 2 and "MODEL" in r.stderr, r.stderr[-200:])


def check_errors() -> None:
    c = sm.make_config()
    W = sm.make_weights(c, 1)
    cases = []
    bad = dict(W)
    del bad["model.layers.1.mlp.up_proj.weight"]
    cases.append(("missing tensor", sm.hf_config_json(c), bad, "up_proj.weight: missing"))
    bad = dict(W, **{"model.layers.0.self_attn.q_norm.weight": np.ones(16, np.float32)})
    cases.append(("unknown tensor", sm.hf_config_json(c), bad, "q_norm"))
    cfg = dict(sm.hf_config_json(c), rope_scaling={"rope_type": "yarn", "factor": 4.0})
    cases.append(("yarn", cfg, W, "yarn"))
    c3 = sm.make_config(arch="qwen3", head_dim=32)
    W3 = sm.make_weights(c3, 1)
    bad = {k: a for k, a in W3.items() if k != "model.layers.1.self_attn.k_norm.weight"}
    cases.append(("qwen3 without k_norm", sm.hf_config_json(c3), bad,
                  "layers.1.self_attn.k_norm.weight: missing"))
    bad = dict(W3, **{"model.layers.0.self_attn.q_norm.weight": np.ones(64, np.float32)})
    cases.append(("q_norm [hidden]", sm.hf_config_json(c3), bad,
                  "q_norm.weight: shape (64,), config says (32,)"))
    cm = sm.make_config(arch="qwen3moe", experts=4, moe_intermediate=32)
    Wm = sm.make_weights(cm, 1)
    bad = {k: a for k, a in Wm.items() if k != "model.layers.1.mlp.experts.3.up_proj.weight"}
    cases.append(("qwen3moe without an expert", sm.hf_config_json(cm), bad,
                  "model.layers.1.mlp.experts.3.up_proj.weight: missing"))
    bad = dict(Wm, **{"model.layers.0.mlp.gate_proj.weight": np.ones((128, 64), np.float32)})
    cases.append(("dense MLP in a MoE model", sm.hf_config_json(cm), bad,
                  "mlp.gate_proj.weight: not a tensor"))
    bad = dict(Wm, **{"model.layers.0.mlp.experts.4.down_proj.weight":
                      np.ones((64, 32), np.float32)})
    cases.append(("an expert too many", sm.hf_config_json(cm), bad,
                  "experts.4.down_proj.weight: not a tensor"))
    bad = dict(Wm, **{"model.layers.0.mlp.experts.1.down_proj.weight":
                      np.ones((32, 64), np.float32)})
    cases.append(("expert down_proj transposed", sm.hf_config_json(cm), bad,
                  "experts.1.down_proj.weight: shape (32, 64), config says (64, 32)"))
    cx = sm.make_config(arch="mixtral", experts=3)
    bad = {k: a for k, a in sm.make_weights(cx, 1).items()
           if k != "model.layers.0.block_sparse_moe.gate.weight"}
    cases.append(("mixtral without a router", sm.hf_config_json(cx), bad,
                  "block_sparse_moe.gate.weight: missing"))
    cp = sm.make_config(arch="phi3")
    Wp = sm.make_weights(cp, 1)
    bad = dict(Wp, **{"model.layers.0.self_attn.q_proj.weight": np.ones((64, 64), np.float32)})
    cases.append(("phi3 with an unfused q_proj", sm.hf_config_json(cp), bad,
                  "q_proj.weight: not a tensor"))
    bad = dict(Wp, **{"model.layers.1.mlp.gate_up_proj.weight": np.ones((160, 64), np.float32)})
    cases.append(("phi3 gate_up_proj one half", sm.hf_config_json(cp), bad,
                  "gate_up_proj.weight: shape (160, 64), config says (320, 64)"))
    cg = sm.make_config(arch="gemma3", layers=2)
    bad = {k: a for k, a in sm.make_weights(cg, 1).items()
           if k != "model.layers.1.post_feedforward_layernorm.weight"}
    cases.append(("gemma3 without post_feedforward_layernorm", sm.hf_config_json(cg), bad,
                  "layers.1.post_feedforward_layernorm.weight: missing"))
    bad = dict(W, **{"model.layers.0.pre_feedforward_layernorm.weight": np.ones(64, np.float32)})
    cases.append(("llama with a Gemma norm", sm.hf_config_json(c), bad,
                  "pre_feedforward_layernorm.weight: not a tensor"))
    ok = True
    bad_cases = []
    for name, cfg, w, want in cases:
        try:
            rf.ReferenceModel(cfg, w)
            ok = False
            bad_cases.append(f"{name}: accepted")
        except rf.ReferenceError as e:
            if want not in str(e):
                ok = False
                bad_cases.append(f"{name}: {e}")
    check("errors/rejected-with-names", ok, "; ".join(bad_cases))


# ------------------------------------------------------------------ main

def run(tmp: str, use_llama_cpp: bool) -> None:
    for tag, (cd, seed) in SHAPES.items():
        m = rf.ReferenceModel.from_synth(cd, seed)
        check_incremental(tag, m)
        if tag in ("llama-gqa-tied", "qwen2-bias-untied", "mistral-swa5-linear",
                   "llama-bias-mqa", "qwen3-qknorm-untied", "qwen3moe-untied",
                   "qwen3moe-nonorm-k3", "mixtral-tied-mqa", "phi3-window-mqa",
                   "gemma2-tied", "gemma2-untied-caps", "gemma3-linear-untied"):
            check_ragged(tag, m)
    have = False
    if use_llama_cpp:
        try:
            import llama_cpp  # noqa: F401
            have = True
        except ImportError:
            print("note: llama_cpp not importable: llama.cpp comparisons skipped")
    if have:
        check_llama_cpp(tmp)
    try:
        import gguf  # noqa: F401
        check_hf_vs_gguf(tmp)
    except ImportError:
        print("note: gguf not importable: GGUF checks skipped")
    check_semantics()
    check_qk_norm()
    check_moe(tmp)
    check_gemma()
    check_gguf_gemma_keys()
    check_phi3()
    check_hf_configs()
    check_errors()
    check_cli(tmp)


def main() -> int:
    global QUIET
    ap = argparse.ArgumentParser()
    ap.add_argument("-q", "--quiet", action="store_true", help="print only failures")
    ap.add_argument("--no-llama-cpp", action="store_true")
    ap.add_argument("--keep", help="write the models into this folder and keep them")
    args = ap.parse_args()
    QUIET = args.quiet
    faulthandler.enable()
    t0 = time.time()
    try:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            run(args.keep, not args.no_llama_cpp)
        else:
            with tempfile.TemporaryDirectory(prefix="reference-selftest-") as tmp:
                run(tmp, not args.no_llama_cpp)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        check("no exception", False)
    failed = sum(1 for r in RESULTS if not r[1])
    print(f"# {time.time() - t0:.1f}s")
    print(f"reference selftest: {len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
