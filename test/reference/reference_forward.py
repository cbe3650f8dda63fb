#!/usr/bin/env python3
"""An independent float64 reference forward pass for Llama-family decoders.

Pure numpy. It shares no code with llmc (neither the compiler's codegen nor the
runtime): tests use it to check llmc's logits. It computes what Hugging Face
transformers computes for LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM,
Phi3ForCausalLM, Gemma2ForCausalLM and Gemma3ForCausalLM (text)
(see README.md beside this file for the exact semantics and the places where it
deliberately differs, e.g. float64 everywhere).

    import sys; sys.path.insert(0, "test/reference")
    import reference_forward as rf

    m = rf.ReferenceModel.from_hf_folder("/tmp/tiny-llama")
    m = rf.ReferenceModel.from_gguf("/tmp/tiny-llama.gguf")      # dequantized, Q/K unpermuted
    m = rf.ReferenceModel.from_synth({"arch": "qwen2"}, seed=2, gguf_type="q8_0")
    full = m.forward([1, 2, 3])            # [3, vocab] float64, no state
    pre = m.prefill([1, 2], seq_id=0)      # [2, vocab]; starts sequence 0 afresh
    dec = m.decode(3, seq_id=0)            # [vocab]; == full[2] to ~1e-15
    flat = m.step([(0, [4]), (7, [5, 6, 7])])   # ragged batch -> [4, vocab]
    r = m.expert_routes([1, 2, 3])         # MoE: per layer, each token's experts / weights

CLI:
    reference_forward.py MODEL --tokens 1,2,3 [--decode-steps N] [--out logits.npy]
MODEL is an HF folder, a .gguf file, or 'synth:{"arch": "llama", "seed": 1}'.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
from typing import Any, Iterable, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SYNTH_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "tools", "synth-model"))


class ReferenceError(Exception):
    """A config, weight set or request the reference cannot evaluate; the
    message says what is wrong."""


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------

@dataclasses.dataclass
class RefConfig:
    """The model constants the forward pass needs, normalized."""
    model_type: str
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict | None          # HF dict with "rope_type"; None = default RoPE
    hidden_act: str
    tie_embeddings: bool
    layer_windows: list                # per layer: sliding window (int) or None
    max_position: int
    # llama.cpp's rope_freqs tensor (GGUF llama3 scaling): per frequency, the
    # divisor of the default inverse frequency. When set it replaces
    # rope_scaling's llama3 rule, as llama.cpp does.
    rope_freqs: np.ndarray | None = None
    # Qwen3's QK-norm: q and k get a per-head RMSNorm over head_dim (weights
    # self_attn.q_norm / k_norm, [head_dim], shared by all heads) before RoPE.
    qk_norm: bool = False
    # Sparse mixture of experts (Qwen3-MoE, Mixtral), on when num_experts > 0:
    # every layer's MLP is a router [num_experts, hidden] and num_experts
    # SwiGLU experts moe_intermediate wide; each token goes to experts_per_tok
    # of them (see moe_route). moe_naming says which HF tensor names the layer
    # has: "qwen3_moe" (mlp.gate, mlp.experts.M.gate_proj/up_proj/down_proj)
    # or "mixtral" (block_sparse_moe.gate, block_sparse_moe.experts.M.w1/w3/w2).
    num_experts: int = 0
    experts_per_tok: int = 0
    moe_intermediate: int = 0
    norm_topk_prob: bool = True        # renormalize the top-k weights to sum 1
    moe_naming: str = ""
    # Gemma 2 / 3 (model_type gemma2, gemma3_text; GGUF gemma2, gemma3):
    # x0 = embed * embed_scale (sqrt(hidden)); every RMSNorm (q_norm / k_norm
    # included) computes with (norm_offset + w): 1 for HF's zero-centred
    # weights, 0 for a GGUF's (which stores 1 + w); post_norms: the attention
    # output goes through post_attention_layernorm before the residual add,
    # the MLP's input is pre_feedforward_layernorm and its output goes through
    # post_feedforward_layernorm; scores q.k * query_pre_attn_scalar^-0.5
    # (None: head_dim), then attn_softcap * tanh(scores / attn_softcap) before
    # the mask; logits final_softcap * tanh(logits / final_softcap).
    embed_scale: float = 1.0
    norm_offset: float = 0.0
    post_norms: bool = False
    query_pre_attn_scalar: float | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # Gemma 3's local layers: per layer, True where it uses default RoPE at
    # rope_local_theta (no scaling, no rope_freqs) instead of rope_theta with
    # rope_scaling. None: every layer uses the global RoPE.
    rope_local_theta: float | None = None
    layer_local_rope: list | None = None
    # Phi-3: fused self_attn.qkv_proj [(heads + 2 kv_heads) * head_dim, hidden]
    # (Q rows, then K, then V) and mlp.gate_up_proj [2 intermediate, hidden]
    # (gate rows, then up), no biases.
    fused_proj: bool = False

    @property
    def moe(self) -> bool:
        return self.num_experts > 0

    def local_rope(self, layer: int) -> bool:
        """Whether layer uses the local (rope_local_theta) RoPE."""
        return bool(self.layer_local_rope and self.layer_local_rope[layer])

    def summary(self) -> str:
        win = sorted({w for w in self.layer_windows if w})
        return (f"{self.model_type}: vocab {self.vocab}, hidden {self.hidden}, "
                f"ffn {self.intermediate}, layers {self.layers}, heads {self.heads}/"
                f"{self.kv_heads} x {self.head_dim}, act {self.hidden_act}, "
                f"theta {self.rope_theta:g}, scaling {self.rope_scaling}, "
                f"{'tied' if self.tie_embeddings else 'untied'}"
                + (", qk-norm" if self.qk_norm else "")
                + (f", moe {self.experts_per_tok} of {self.num_experts} experts x "
                   f"{self.moe_intermediate}"
                   + ("" if self.norm_topk_prob else " (top-k weights not renormalized)")
                   if self.moe else "")
                + (f", window {win} on {sum(1 for w in self.layer_windows if w)} of "
                   f"{self.layers} layers" if win else "")
                + (f", local rope theta {self.rope_local_theta:g}" if self.layer_local_rope
                   and any(self.layer_local_rope) else "")
                + (f", embed x{self.embed_scale:g}, norm (w + {self.norm_offset:g}), post-norms, "
                   f"scores x {self.query_pre_attn_scalar or self.head_dim:g}^-0.5"
                   if self.post_norms else "")
                + (f", attn softcap {self.attn_softcap:g}" if self.attn_softcap else "")
                + (f", final softcap {self.final_softcap:g}" if self.final_softcap else "")
                + (", fused qkv / gate_up" if self.fused_proj else ""))


def _norm_rope_scaling(rs: dict | None) -> dict | None:
    if rs is None:
        return None
    rs = dict(rs)
    if "rope_type" not in rs and "type" in rs:  # HF's backward-compatible key
        rs["rope_type"] = rs.pop("type")
    kind = rs.get("rope_type", "default")
    if kind == "default":
        return None
    if kind == "linear":
        if "factor" not in rs:
            raise ReferenceError("rope_scaling: linear lacks 'factor'")
    elif kind == "llama3":
        need = ("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings")
        missing = [k for k in need if k not in rs]
        if missing:
            raise ReferenceError(f"rope_scaling: llama3 lacks {', '.join(missing)}")
    else:
        raise ReferenceError(f"rope_scaling: rope_type {kind!r} is not supported "
                             "(default, linear and llama3 are)")
    return rs


def _moe_from_hf(d: dict, model_type: str, layers: int, inter: int) -> dict:
    """RefConfig's MoE fields of an HF config (empty for dense models), with
    transformers' defaults for missing keys (Qwen3MoeConfig: 128 experts, 8 per
    token, 768 wide, norm_topk_prob False; MixtralConfig: 8 experts, 2 per
    token). Qwen3-MoE with dense layers (mlp_only_layers, decoder_sparse_step)
    is refused."""
    if model_type == "qwen3_moe":
        only = d.get("mlp_only_layers") or []
        step = int(d.get("decoder_sparse_step", 1) or 1)
        e = int(d.get("num_experts", 128))
        if only or step != 1 or e <= 0:
            raise ReferenceError(
                f"config.json: qwen3_moe with dense MLP layers (mlp_only_layers {only}, "
                f"decoder_sparse_step {step}, num_experts {e}) is not supported: only "
                "models whose every layer is sparse (mlp_only_layers [], "
                "decoder_sparse_step 1)")
        out = dict(num_experts=e, experts_per_tok=int(d.get("num_experts_per_tok", 8)),
                   moe_intermediate=int(d.get("moe_intermediate_size", 768)),
                   norm_topk_prob=bool(d.get("norm_topk_prob", False)),
                   moe_naming="qwen3_moe")
    elif model_type == "mixtral":
        out = dict(num_experts=int(d.get("num_local_experts", 8)),
                   experts_per_tok=int(d.get("num_experts_per_tok", 2)),
                   moe_intermediate=inter, norm_topk_prob=True, moe_naming="mixtral")
    else:
        return {}
    if not 0 < out["experts_per_tok"] <= out["num_experts"]:
        raise ReferenceError(f"config.json: num_experts_per_tok {out['experts_per_tok']} "
                             f"is not in 1..{out['num_experts']}")
    return out


def config_from_hf(d: dict) -> RefConfig:
    """A RefConfig from a Hugging Face config.json dict (Llama, Mistral, Qwen2,
    Qwen3, Qwen3-MoE, Mixtral, Phi-3, Gemma 2, Gemma 3 text)."""
    try:
        hidden, heads = int(d["hidden_size"]), int(d["num_attention_heads"])
        layers = int(d["num_hidden_layers"])
        vocab, inter = int(d["vocab_size"]), int(d["intermediate_size"])
    except KeyError as e:
        raise ReferenceError(f"config.json: missing {e.args[0]}") from None
    model_type = d.get("model_type", "llama")
    gemma = model_type in GEMMA_MODEL_TYPES
    kv = int(d.get("num_key_value_heads") or heads)
    # Qwen3Config's head_dim defaults to 128, Gemma2Config's and
    # Gemma3TextConfig's 256; the others (Qwen3MoeConfig included) derive it.
    head_dim = int(d.get("head_dim") or {"qwen3": 128, "gemma2": 256, "gemma3_text": 256}.get(
        model_type, hidden // heads))
    # Sliding windows, per layer, as transformers decides them.
    sw = d.get("sliding_window", 4096 if gemma else None)
    pattern = int(d.get("sliding_window_pattern") or 6)   # Gemma3TextConfig's default
    if d.get("layer_types") is not None:
        sliding = [t == "sliding_attention" for t in d["layer_types"]]
    elif model_type == "gemma2":
        sliding = [i % 2 == 0 for i in range(layers)]     # HF: not bool(layer_idx % 2)
    elif model_type == "gemma3_text":
        sliding = [bool((i + 1) % pattern) for i in range(layers)]
    else:
        sliding = None
    if sliding is not None:
        windows = [sw if t else None for t in sliding]
    elif model_type in ("mistral", "mixtral", "phi3"):
        windows = [sw] * layers
    elif model_type in ("qwen2", "qwen3", "qwen3_moe"):
        # Qwen2/3: only with use_sliding_window, and only layers >= max_window_layers.
        on = bool(d.get("use_sliding_window", False)) and sw is not None
        mwl = int(d.get("max_window_layers", layers))
        windows = [sw if on and i >= mwl else None for i in range(layers)]
    else:
        windows = [None] * layers
    windows = [int(w) if w else None for w in windows]
    if len(windows) != layers:
        raise ReferenceError(f"config.json: layer_types has {len(windows)} entries "
                             f"for {layers} layers")
    rs = _norm_rope_scaling(d.get("rope_scaling"))
    if rs is not None and model_type in ("phi3", "gemma2"):
        raise ReferenceError(f"config.json: {model_type} with rope_scaling {rs} is not "
                             "supported (Phi-3's longrope; Gemma2 has none)")
    if model_type == "phi3" and float(d.get("partial_rotary_factor", 1.0) or 1.0) != 1.0:
        raise ReferenceError("config.json: phi3 with partial_rotary_factor "
                             f"{d['partial_rotary_factor']} (partial rotary) is not supported")
    extra: dict = {}
    if gemma:
        extra = dict(
            embed_scale=math.sqrt(hidden), norm_offset=1.0, post_norms=True,
            query_pre_attn_scalar=float(d.get("query_pre_attn_scalar", 256)),
            attn_softcap=_softcap(d, "attn_logit_softcapping",
                                  50.0 if model_type == "gemma2" else None),
            final_softcap=_softcap(d, "final_logit_softcapping",
                                   30.0 if model_type == "gemma2" else None))
        if model_type == "gemma3_text":
            extra.update(rope_local_theta=float(d.get("rope_local_base_freq", 10000.0)),
                         layer_local_rope=list(sliding))
    if model_type == "phi3":
        extra = dict(fused_proj=True)
    return RefConfig(
        model_type=model_type, vocab=vocab, hidden=hidden, intermediate=inter,
        layers=layers, heads=heads, kv_heads=kv, head_dim=head_dim,
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        rope_theta=float(d.get("rope_theta", 1e6 if model_type == "gemma3_text" else 10000.0)),
        rope_scaling=rs,
        # Gemma's MLPs read hidden_activation (Gemma2 configs carry hidden_act too).
        hidden_act=(d.get("hidden_activation") or d.get("hidden_act") or "gelu_pytorch_tanh")
        if gemma else d.get("hidden_act", "silu"),
        # Gemma ties by default (Gemma2Config, Gemma3TextConfig).
        tie_embeddings=bool(d.get("tie_word_embeddings", gemma)),
        layer_windows=windows,
        max_position=int(d.get("max_position_embeddings", 2048)),
        qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3_text"),
        **_moe_from_hf(d, model_type, layers, inter), **extra)


# HF model types of Gemma 2 / 3 (Gemma3ForCausalLM's text config).
GEMMA_MODEL_TYPES = ("gemma2", "gemma3_text")


def _softcap(d: dict, key: str, default: float | None) -> float | None:
    """A soft-capping value of an HF config (null or absent: default), which
    must be positive."""
    v = d.get(key, default)
    if v is None:
        return None
    if not float(v) > 0:
        raise ReferenceError(f"config.json: {key} {v!r} must be positive or null")
    return float(v)


def config_from_synth(d: dict) -> RefConfig:
    """A RefConfig from synth_model's Config fields (a filled-in Config dict)."""
    head_dim = d.get("head_dim") or d["hidden"] // d["heads"]
    rs = d.get("rope_scaling")
    if isinstance(rs, str):
        raise ReferenceError("config: pass synth configs through synth_model.make_config "
                             "first (rope_scaling is still a CLI string)")
    arch = d.get("arch", "llama")
    moe: dict = {}
    if arch in ("qwen3moe", "mixtral"):
        if not d.get("experts") or not d.get("experts_per_tok"):
            raise ReferenceError("config: pass synth configs through synth_model.make_config "
                                 "first (the MoE fields are not filled in)")
        moe = dict(num_experts=int(d["experts"]), experts_per_tok=int(d["experts_per_tok"]),
                   moe_intermediate=int(d["moe_intermediate"] if arch == "qwen3moe"
                                        else d["intermediate"]),
                   norm_topk_prob=bool(d.get("norm_topk_prob", True)),
                   moe_naming="qwen3_moe" if arch == "qwen3moe" else "mixtral")
    extra: dict = {}
    sw, layers = d.get("sliding_window"), d["layers"]
    windows = [sw] * layers
    if arch in ("gemma2", "gemma3"):
        need = ["query_pre_attn_scalar"] + (["sliding_window_pattern", "rope_local_theta"]
                                            if arch == "gemma3" else ["attn_softcap"])
        if sw is None or any(d.get(k) is None for k in need):
            raise ReferenceError("config: pass synth configs through synth_model.make_config "
                                 "first (the Gemma fields are not filled in)")
        if arch == "gemma2":
            sliding = [i % 2 == 0 for i in range(layers)]
        else:
            sliding = [bool((i + 1) % int(d["sliding_window_pattern"])) for i in range(layers)]
        windows = [sw if t else None for t in sliding]
        extra = dict(embed_scale=math.sqrt(d["hidden"]), norm_offset=1.0, post_norms=True,
                     query_pre_attn_scalar=float(d["query_pre_attn_scalar"]),
                     attn_softcap=d.get("attn_softcap"), final_softcap=d.get("final_softcap"))
        if arch == "gemma3":
            extra.update(rope_local_theta=float(d["rope_local_theta"]),
                         layer_local_rope=sliding)
    if arch == "phi3":
        extra = dict(fused_proj=True)
    gemma_theta = 1e6 if arch == "gemma3" else 10000.0
    return RefConfig(
        model_type=arch, vocab=d["vocab"], hidden=d["hidden"],
        intermediate=d["intermediate"], layers=layers, heads=d["heads"],
        kv_heads=d.get("kv_heads") or d["heads"], head_dim=head_dim,
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-5)),
        rope_theta=float(d.get("rope_theta") or gemma_theta),
        rope_scaling=_norm_rope_scaling(rs),
        hidden_act="gelu_pytorch_tanh" if arch in ("gemma2", "gemma3") else "silu",
        tie_embeddings=bool(d.get("tie_embeddings", True)),
        layer_windows=windows,
        max_position=int(d.get("max_position", 512)),
        qk_norm=arch in ("qwen3", "qwen3moe", "gemma3"), **moe, **extra)


def normalize_config(cfg: Any) -> RefConfig:
    """Accepts a RefConfig, an HF config.json dict, or synth_model Config
    (object or dict of its fields)."""
    if isinstance(cfg, RefConfig):
        return cfg
    if dataclasses.is_dataclass(cfg):
        cfg = dataclasses.asdict(cfg)
    if not isinstance(cfg, dict):
        raise ReferenceError(f"config: expected a dict, got {type(cfg).__name__}")
    if "hidden_size" in cfg:
        return config_from_hf(cfg)
    if "hidden" in cfg:
        return config_from_synth(cfg)
    raise ReferenceError("config: neither an HF config.json dict (hidden_size) "
                         "nor a synth_model Config (hidden)")


# --------------------------------------------------------------------------
# Primitive math (float64)
# --------------------------------------------------------------------------

def rope_inv_freq(c: RefConfig) -> np.ndarray:
    """Inverse frequencies [head_dim/2], as transformers' ROPE_INIT_FUNCTIONS
    compute them (here in float64): default, linear (inv_freq / factor) and
    llama3 (_compute_llama3_parameters). With c.rope_freqs (GGUF), llama.cpp's
    rule: default inv_freq / rope_freqs."""
    d = c.head_dim
    inv = 1.0 / (c.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    if c.rope_freqs is not None:
        f = np.asarray(c.rope_freqs, np.float64)
        if f.shape != inv.shape:
            raise ReferenceError(f"rope_freqs: shape {f.shape}, want {inv.shape}")
        inv = inv / f
        if c.rope_scaling and c.rope_scaling["rope_type"] == "linear":
            inv = inv / float(c.rope_scaling["factor"])
        return inv
    rs = c.rope_scaling
    if rs is None:
        return inv
    if rs["rope_type"] == "linear":
        return inv / float(rs["factor"])
    # llama3
    factor = float(rs["factor"])
    lo, hi = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    old = float(rs["original_max_position_embeddings"])
    lo_wl, hi_wl = old / lo, old / hi
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > lo_wl, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < hi_wl) & ~(wavelen > lo_wl)
    return np.where(medium, smoothed, scaled)


def rope_inv_freq_local(c: RefConfig) -> np.ndarray | None:
    """Gemma 3's local layers: default inverse frequencies at rope_local_theta
    (no scaling, no rope_freqs), as HF's rotary_emb_local; None without."""
    if c.rope_local_theta is None:
        return None
    d = c.head_dim
    return 1.0 / (c.rope_local_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))


def rope_cos_sin(inv_freq: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [n, head_dim] as HF builds them: emb = cat(freqs, freqs)."""
    freqs = np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [n, heads, head_dim]; HF's rotate-half convention:
    x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)."""
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float, offset: float = 0.0) -> np.ndarray:
    """HF LlamaRMSNorm: w * x / sqrt(mean(x^2) + eps). offset 1: Gemma's
    RMSNorm, (1 + w) * x / sqrt(mean(x^2) + eps), for its zero-centred weights."""
    var = np.mean(x * x, axis=-1, keepdims=True)
    if offset:
        w = offset + w
    return w * (x / np.sqrt(var + eps))


def softcap(x: np.ndarray, cap: float | None) -> np.ndarray:
    """Gemma's soft-capping: cap * tanh(x / cap); identity when cap is None."""
    return x if cap is None else cap * np.tanh(x / cap)


_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), accurate in relative terms on both sides, no overflow."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def activation(name: str, x: np.ndarray) -> np.ndarray:
    """transformers' ACT2FN for the activations decoders use."""
    if name in ("silu", "swish"):
        return x * _sigmoid(x)
    if name == "gelu":  # exact (erf)
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):  # tanh approximation
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                        * (x + 0.044715 * x * x * x)))
    if name == "quick_gelu":
        return x * _sigmoid(1.702 * x)
    if name == "relu":
        return np.maximum(x, 0.0)
    raise ReferenceError(f"hidden_act: {name!r} is not supported")


def softmax_masked(scores: np.ndarray, visible: np.ndarray) -> np.ndarray:
    s = np.where(visible, scores, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return s / s.sum(axis=-1, keepdims=True)


def moe_route(logits: np.ndarray, k: int, norm_topk_prob: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A MoE router's choice for each row of logits [T, E] (float64), as HF's
    Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock make it: p = softmax over
    all E experts; the k experts of largest p, in descending p; their weights
    p[topk], divided by their sum when norm_topk_prob.

    Ties (equal p) go to the lower expert index first, in the ranking and so
    in the choice (a stable sort of -p). Ranking by p is ranking by the
    logits (softmax is monotone) except where two distinct logits round to
    one p.

    Returns (experts [T, k] int64, weights [T, k] float64, margin [T]): margin
    is the logit of the k-th chosen expert minus the largest logit not chosen
    (inf when k == E), i.e. how far the choice is from a tie; a low-precision
    implementation may choose differently only where it is small."""
    logits = np.asarray(logits, np.float64)
    E = logits.shape[-1]
    if not 0 < k <= E:
        raise ReferenceError(f"moe: top-{k} of {E} experts")
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = z / z.sum(axis=-1, keepdims=True)
    order = np.argsort(-p, axis=-1, kind="stable")
    top = order[:, :k]
    w = np.take_along_axis(p, top, axis=-1)
    if norm_topk_prob:
        w = w / w.sum(axis=-1, keepdims=True)
    if k < E:
        margin = (np.take_along_axis(logits, order[:, k - 1:k], axis=-1)
                  - np.take_along_axis(logits, order[:, k:k + 1], axis=-1))[:, 0]
    else:
        margin = np.full(len(logits), np.inf)
    return top.astype(np.int64), w, margin


def visible_mask(q_pos: np.ndarray, k_pos: np.ndarray, window: int | None) -> np.ndarray:
    """[nq, nk]: causal, and with a window (Mistral semantics) only keys at
    positions > q_pos - window, i.e. the last `window` keys including itself."""
    q, k = np.asarray(q_pos)[:, None], np.asarray(k_pos)[None, :]
    m = k <= q
    if window:
        m &= k > q - window
    return m


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

_LAYER_TENSORS = {  # HF suffix -> (shape as a function of config, required)
    "input_layernorm.weight": (lambda c: (c.hidden,), True),
    "self_attn.q_proj.weight": (lambda c: (c.heads * c.head_dim, c.hidden), True),
    "self_attn.k_proj.weight": (lambda c: (c.kv_heads * c.head_dim, c.hidden), True),
    "self_attn.v_proj.weight": (lambda c: (c.kv_heads * c.head_dim, c.hidden), True),
    "self_attn.o_proj.weight": (lambda c: (c.hidden, c.heads * c.head_dim), True),
    "self_attn.q_proj.bias": (lambda c: (c.heads * c.head_dim,), False),
    "self_attn.k_proj.bias": (lambda c: (c.kv_heads * c.head_dim,), False),
    "self_attn.v_proj.bias": (lambda c: (c.kv_heads * c.head_dim,), False),
    "self_attn.o_proj.bias": (lambda c: (c.hidden,), False),
    "post_attention_layernorm.weight": (lambda c: (c.hidden,), True),
    "mlp.gate_proj.weight": (lambda c: (c.intermediate, c.hidden), True),
    "mlp.up_proj.weight": (lambda c: (c.intermediate, c.hidden), True),
    "mlp.down_proj.weight": (lambda c: (c.hidden, c.intermediate), True),
    "mlp.gate_proj.bias": (lambda c: (c.intermediate,), False),   # mlp_bias
    "mlp.up_proj.bias": (lambda c: (c.intermediate,), False),
    "mlp.down_proj.bias": (lambda c: (c.hidden,), False),
}
# Qwen3's QK-norm weights: required with qk_norm, and otherwise not used (so
# rejected, rather than silently computing a model without them).
_QK_NORM_TENSORS = {
    "self_attn.q_norm.weight": (lambda c: (c.head_dim,), True),
    "self_attn.k_norm.weight": (lambda c: (c.head_dim,), True),
}
# Gemma 2 / 3's extra norms (post_attention_layernorm is then the norm after
# attention, pre_feedforward_layernorm the MLP's input).
_POST_NORM_TENSORS = {
    "pre_feedforward_layernorm.weight": (lambda c: (c.hidden,), True),
    "post_feedforward_layernorm.weight": (lambda c: (c.hidden,), True),
}
# Phi-3's layer: fused projections, no biases.
_FUSED_LAYER_TENSORS = {
    "input_layernorm.weight": (lambda c: (c.hidden,), True),
    "self_attn.qkv_proj.weight": (lambda c: ((c.heads + 2 * c.kv_heads) * c.head_dim,
                                             c.hidden), True),
    "self_attn.o_proj.weight": (lambda c: (c.hidden, c.heads * c.head_dim), True),
    "post_attention_layernorm.weight": (lambda c: (c.hidden,), True),
    "mlp.gate_up_proj.weight": (lambda c: (2 * c.intermediate, c.hidden), True),
    "mlp.down_proj.weight": (lambda c: (c.hidden, c.intermediate), True),
}
# A MoE layer's HF names, per RefConfig.moe_naming: (router, expert prefix
# with {m} for the expert index, (gate, up, down) projection names).
MOE_NAMES = {
    "qwen3_moe": ("mlp.gate.weight", "mlp.experts.{m}.", ("gate_proj", "up_proj", "down_proj")),
    "mixtral": ("block_sparse_moe.gate.weight", "block_sparse_moe.experts.{m}.",
                ("w1", "w3", "w2")),
}


def moe_tensor_names(c: RefConfig, layer: int) -> dict:
    """{"router": name, "gate" / "up" / "down": [name for expert 0..E-1]} of
    one MoE layer, in HF names."""
    router, prefix, projs = MOE_NAMES[c.moe_naming]
    p = f"model.layers.{layer}."
    out: dict = {"router": p + router}
    for role, proj in zip(("gate", "up", "down"), projs):
        out[role] = [p + prefix.format(m=m) + proj + ".weight" for m in range(c.num_experts)]
    return out


_IGNORED = re.compile(r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq")


def _check_weights(c: RefConfig, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float64 copies of the weights; every tensor must be known and used, and
    every required one present with the right shape."""
    want: dict[str, tuple[tuple[int, ...], bool]] = {
        "model.embed_tokens.weight": ((c.vocab, c.hidden), True),
        "model.norm.weight": ((c.hidden,), True),
        "lm_head.weight": ((c.vocab, c.hidden), not c.tie_embeddings),
    }
    layer_tensors = dict(_FUSED_LAYER_TENSORS if c.fused_proj else _LAYER_TENSORS,
                         **(_QK_NORM_TENSORS if c.qk_norm else {}),
                         **(_POST_NORM_TENSORS if c.post_norms else {}))
    if c.moe:
        if c.moe_naming not in MOE_NAMES:
            raise ReferenceError(f"config: moe_naming {c.moe_naming!r} is not one of "
                                 f"{', '.join(MOE_NAMES)}")
        if not 0 < c.experts_per_tok <= c.num_experts:
            raise ReferenceError(f"config: experts_per_tok {c.experts_per_tok} is not in "
                                 f"1..{c.num_experts}")
        # The sparse block replaces the dense MLP (whose tensors are then unused).
        layer_tensors = {k: v for k, v in layer_tensors.items() if not k.startswith("mlp.")}
    for i in range(c.layers):
        for suffix, (shape, req) in layer_tensors.items():
            want[f"model.layers.{i}.{suffix}"] = (shape(c), req)
        if c.moe:
            n = moe_tensor_names(c, i)
            I = c.moe_intermediate
            want[n["router"]] = ((c.num_experts, c.hidden), True)
            for role, shape in (("gate", (I, c.hidden)), ("up", (I, c.hidden)),
                                ("down", (c.hidden, I))):
                for name in n[role]:
                    want[name] = (shape, True)
    problems = []
    out = {}
    for name, a in weights.items():
        if _IGNORED.fullmatch(name):
            continue
        if name not in want:
            problems.append(f"{name}: not a tensor this reference uses")
            continue
        a = np.asarray(a)
        if tuple(a.shape) != tuple(want[name][0]):
            problems.append(f"{name}: shape {tuple(a.shape)}, config says {want[name][0]}")
            continue
        out[name] = a.astype(np.float64)
    for name, (_, req) in want.items():
        if req and name not in out and not any(p.startswith(name + ":") for p in problems):
            problems.append(f"{name}: missing")
    if problems:
        raise ReferenceError("weights: " + "; ".join(problems[:8])
                             + (f" (+{len(problems) - 8} more)" if len(problems) > 8 else ""))
    if c.tie_embeddings:
        out.pop("lm_head.weight", None)   # HF ties lm_head to the embedding
    return out


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

class _Seq:
    """One sequence's KV cache: per layer, K (after RoPE) and V, [len, kv_heads, head_dim]."""

    def __init__(self, c: RefConfig):
        e = np.zeros((0, c.kv_heads, c.head_dim))
        self.k = [e] * c.layers
        self.v = [e] * c.layers
        self.tokens: list[int] = []

    def copy(self) -> "_Seq":
        s = _Seq.__new__(_Seq)
        s.k, s.v, s.tokens = list(self.k), list(self.v), list(self.tokens)
        return s


class ReferenceModel:
    """float64 Llama-family decoder (Phi-3 and Gemma 2 / 3 included) with HF
    transformers semantics.

    Stateless: forward(tokens). Stateful, per sequence id (the semantic view
    of a paged KV cache): prefill, extend, decode, step (ragged batch), fork,
    truncate, free, kv, context_len.
    """

    def __init__(self, cfg_dict: Any, weights: dict[str, np.ndarray]):
        self.cfg = normalize_config(cfg_dict)
        c = self.cfg
        if c.heads % c.kv_heads:
            raise ReferenceError(f"config: kv_heads {c.kv_heads} does not divide heads {c.heads}")
        if c.head_dim % 2:
            raise ReferenceError(f"config: head_dim {c.head_dim} is odd")
        activation(c.hidden_act, np.zeros(1))   # rejects unknown activations early
        if c.layer_local_rope is not None and len(c.layer_local_rope) != c.layers:
            raise ReferenceError(f"config: layer_local_rope has {len(c.layer_local_rope)} "
                                 f"entries for {c.layers} layers")
        if c.layer_local_rope and any(c.layer_local_rope) and c.rope_local_theta is None:
            raise ReferenceError("config: local-RoPE layers without rope_local_theta")
        self.W = _check_weights(c, weights)
        self.inv_freq = rope_inv_freq(c)
        self.inv_freq_local = rope_inv_freq_local(c)
        self._seqs: dict[Any, _Seq] = {}

    # ------------------------------------------------------------- loaders
    @classmethod
    def from_hf_folder(cls, path: str) -> "ReferenceModel":
        """config.json + model*.safetensors (f32/f16/bf16) of an HF folder."""
        sm = _synth()
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            d = json.load(f)
        return cls(d, sm.read_hf_weights(path))

    @classmethod
    def from_synth(cls, cfg: Any, seed: int, gguf_type: str | None = None) -> "ReferenceModel":
        """synth_model's model for (cfg, seed): the HF weights, or with gguf_type
        what a GGUF of that type holds (dequantized, in HF layout)."""
        sm = _synth()
        c = sm.make_config(cfg)
        W = sm.make_weights(c, seed) if gguf_type is None else sm.dequantized_weights(
            c, seed, gguf_type)
        return cls(sm.hf_config_json(c), W)

    @classmethod
    def from_gguf(cls, path: str, use_sliding_window: bool = True) -> "ReferenceModel":
        """A GGUF (llama, qwen2, qwen3, qwen3moe, phi3, gemma2 or gemma3
        architecture; llama with expert_count is Mixtral), every tensor
        dequantized by gguf-py and brought back to HF names and layout: Q/K
        rows unpermuted for llama (convert_hf_to_gguf permutes them for GGML's
        interleaved RoPE), the stacked ffn_*_exps split into one tensor per
        expert; Gemma's norms kept as stored (1 + w, used with norm_offset 0).
        A llama3 rope_freqs tensor is used as llama.cpp uses it.
        use_sliding_window: apply `<arch>.attention.sliding_window` (a Mistral
        or Phi-3 model's window; llama.cpp's llama and phi3 ignore it)."""
        cfg, W = read_gguf(path, use_sliding_window)
        return cls(cfg, W)

    # ----------------------------------------------------------- helpers
    def _lin(self, p: str, name: str, x: np.ndarray) -> np.ndarray:
        y = x @ self.W[p + name + ".weight"].T
        b = self.W.get(p + name + ".bias")
        return y if b is None else y + b

    def _tokens(self, tokens: Iterable[int]) -> np.ndarray:
        t = np.asarray(list(tokens), dtype=np.int64)
        if t.ndim != 1:
            raise ReferenceError("tokens: must be a flat list of ids")
        if t.size and (t.min() < 0 or t.max() >= self.cfg.vocab):
            raise ReferenceError(f"tokens: ids must be in [0, {self.cfg.vocab}), got "
                                 f"{int(t.min())}..{int(t.max())}")
        return t

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        """RMSNorm of x with the weight `name` (Gemma: with 1 + w from HF)."""
        return rms_norm(x, self.W[name], self.cfg.rms_norm_eps, self.cfg.norm_offset)

    def _embed(self, t: np.ndarray) -> np.ndarray:
        """The embedding rows of tokens t, times embed_scale (Gemma: sqrt(hidden))."""
        x = self.W["model.embed_tokens.weight"][t]
        return x * self.cfg.embed_scale if self.cfg.embed_scale != 1.0 else x

    def _head(self, x: np.ndarray) -> np.ndarray:
        x = self._norm(x, "model.norm.weight")
        head = self.W.get("lm_head.weight", self.W["model.embed_tokens.weight"])
        return softcap(x @ head.T, self.cfg.final_softcap)

    def _scores(self, s: np.ndarray) -> np.ndarray:
        """Raw scores q.k -> the softmax's input before the mask: / sqrt(head_dim),
        or * query_pre_attn_scalar^-0.5 (Gemma), then soft-capped (Gemma 2)."""
        c = self.cfg
        if c.query_pre_attn_scalar is None:
            s = s / math.sqrt(c.head_dim)
        else:
            s = s * c.query_pre_attn_scalar ** -0.5
        return softcap(s, c.attn_softcap)

    def _rope_tables(self, pos: np.ndarray) -> list:
        """Per layer (cos, sin) at positions pos: the local table for Gemma 3's
        local layers, the global one for the others."""
        g = rope_cos_sin(self.inv_freq, pos)
        loc = (rope_cos_sin(self.inv_freq_local, pos)
               if self.inv_freq_local is not None else None)
        return [loc if self.cfg.local_rope(i) else g for i in range(self.cfg.layers)]

    def _proj(self, p: str, which: str, h: np.ndarray) -> np.ndarray:
        """The q / k / v projection of h (which: "q" | "k" | "v"); Phi-3: its
        rows of the fused qkv_proj (Q, then K, then V)."""
        c = self.cfg
        if not c.fused_proj:
            return self._lin(p, f"self_attn.{which}_proj", h)
        q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
        a, b = {"q": (0, q), "k": (q, q + kv), "v": (q + kv, q + 2 * kv)}[which]
        return h @ self.W[p + "self_attn.qkv_proj.weight"][a:b].T

    def _qk_norm(self, p: str, which: str, x: np.ndarray) -> np.ndarray:
        """Qwen3's / Gemma 3's QK-norm of q or k (which: "q" | "k"), x [n,
        heads, head_dim]: RMSNorm over head_dim of each head with the one
        weight all heads share (HF Qwen3RMSNorm / Gemma3RMSNorm on the
        [.., heads, head_dim] view; Gemma's with 1 + w). Identity without
        qk_norm. Applied before RoPE."""
        if not self.cfg.qk_norm:
            return x
        return self._norm(x, f"{p}self_attn.{which}_norm.weight")

    def _project_qk(self, p: str, h: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                    tr: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """q [n, heads, head_dim] and k [n, kv_heads, head_dim] of normed
        hidden h: projection (+ bias), QK-norm (Qwen3, Gemma 3), then RoPE. tr,
        if given, receives q_norm / k_norm (after the norm, before RoPE)."""
        c, n = self.cfg, len(h)
        q = self._proj(p, "q", h).reshape(n, c.heads, c.head_dim)
        k = self._proj(p, "k", h).reshape(n, c.kv_heads, c.head_dim)
        q, k = self._qk_norm(p, "q", q), self._qk_norm(p, "k", k)
        if tr is not None and c.qk_norm:
            tr.update({"q_norm": q, "k_norm": k})
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin)

    def _attn_residual(self, p: str, x: np.ndarray, o: np.ndarray,
                       tr: dict | None = None) -> np.ndarray:
        """The residual after attention: x + o_proj(o), the projection first
        through post_attention_layernorm for Gemma (tr, if given, receives it
        as attn_post_norm)."""
        a = self._lin(p, "self_attn.o_proj", o)
        if self.cfg.post_norms:
            a = self._norm(a, p + "post_attention_layernorm.weight")
            if tr is not None:
                tr["attn_post_norm"] = a
        return x + a

    def _mlp(self, p: str, x: np.ndarray, tr: dict | None = None) -> np.ndarray:
        """The residual after the MLP block. tr, if given, receives ffn_norm
        (the MLP's input), Gemma's ffn_post_norm (the MLP's output after
        post_feedforward_layernorm) and, for MoE, the routing (see _moe)."""
        c = self.cfg
        norm = "pre_feedforward_layernorm" if c.post_norms else "post_attention_layernorm"
        h = self._norm(x, p + norm + ".weight")
        if tr is not None:
            tr["ffn_norm"] = h
        if c.moe:
            return x + self._moe(int(p.split(".")[2]), h, tr)
        if c.fused_proj:   # Phi-3: gate rows, then up rows
            gu = h @ self.W[p + "mlp.gate_up_proj.weight"].T
            gate, up = gu[:, :c.intermediate], gu[:, c.intermediate:]
        else:
            gate, up = self._lin(p, "mlp.gate_proj", h), self._lin(p, "mlp.up_proj", h)
        y = self._lin(p, "mlp.down_proj", activation(c.hidden_act, gate) * up)
        if c.post_norms:
            y = self._norm(y, p + "post_feedforward_layernorm.weight")
            if tr is not None:
                tr["ffn_post_norm"] = y
        return x + y

    def _moe(self, layer: int, h: np.ndarray, tr: dict | None = None) -> np.ndarray:
        """HF's sparse MoE block on normed rows h [T, hidden]: router logits
        h Wr^T, moe_route (softmax over all experts, top-k, renormalized with
        norm_topk_prob), then sum_k w_k * down_k(act(gate_k(h)) * up_k(h)).
        Each row is routed on its own (no capacity, nothing dropped), so a
        token's route never depends on the other rows of the batch. tr, if
        given, receives router_logits [T, E], experts [T, k] (int64, in
        descending weight), expert_weights [T, k] and router_margin [T]."""
        c = self.cfg
        n = moe_tensor_names(c, layer)
        logits = h @ self.W[n["router"]].T
        top, w, margin = moe_route(logits, c.experts_per_tok, c.norm_topk_prob)
        if tr is not None:
            tr.update({"router_logits": logits, "experts": top, "expert_weights": w,
                       "router_margin": margin})
        out = np.zeros_like(h)
        for e in range(c.num_experts):
            rows, slot = np.nonzero(top == e)   # a row picks an expert at most once
            if rows.size == 0:
                continue
            hs = h[rows]
            g = activation(c.hidden_act, hs @ self.W[n["gate"][e]].T)
            y = (g * (hs @ self.W[n["up"][e]].T)) @ self.W[n["down"][e]].T
            out[rows] += w[rows, slot][:, None] * y
        return out

    # ------------------------------------------------------ full sequence
    def forward(self, tokens: Sequence[int], trace: dict | None = None) -> np.ndarray:
        """Logits [len, vocab] of one whole sequence from position 0, without
        any cache (full T x T causal mask, KV heads repeated as HF's repeat_kv).
        trace: if a dict, receives named intermediates (embed, L{i}.attn_norm,
        L{i}.q_norm/k_norm (Qwen3 only: after QK-norm, before RoPE), L{i}.q/k
        (after RoPE), L{i}.v, L{i}.attn (before o_proj), L{i}.h_attn (residual
        after attention), L{i}.ffn_norm (the MLP's input), L{i}.h_mlp,
        final_norm; MoE models also L{i}.router_logits [T, E], L{i}.experts
        [T, k] int64 (each token's experts, in descending weight; ties to the
        lower index), L{i}.expert_weights [T, k] (the weights they get, after
        renormalization) and L{i}.router_margin [T] (see moe_route))."""
        c = self.cfg
        t = self._tokens(tokens)
        T = len(t)
        pos = np.arange(T)
        ropes = self._rope_tables(pos)
        rep = c.heads // c.kv_heads
        x = self._embed(t)
        tr = trace if trace is not None else {}
        tr["embed"] = x
        for i in range(c.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, p + "input_layernorm.weight")
            qk_tr: dict = {}
            q, k = self._project_qk(p, h, *ropes[i], qk_tr)
            tr.update({f"L{i}.{name}": a for name, a in qk_tr.items()})
            v = self._proj(p, "v", h).reshape(T, c.kv_heads, c.head_dim)
            kr, vr = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)  # repeat_kv
            s = self._scores(np.einsum("thd,shd->hts", q, kr))
            a = softmax_masked(s, visible_mask(pos, pos, c.layer_windows[i])[None])
            o = np.einsum("hts,shd->thd", a, vr).reshape(T, c.heads * c.head_dim)
            tr.update({f"L{i}.attn_norm": h, f"L{i}.q": q, f"L{i}.k": k, f"L{i}.v": v,
                       f"L{i}.attn": o})
            at_tr: dict = {}
            x = self._attn_residual(p, x, o, at_tr)
            tr.update({f"L{i}.{name}": a for name, a in at_tr.items()})
            tr[f"L{i}.h_attn"] = x
            mlp_tr: dict = {}
            x = self._mlp(p, x, mlp_tr)
            tr.update({f"L{i}.{name}": a for name, a in mlp_tr.items()})
            tr[f"L{i}.h_mlp"] = x
        tr["final_norm"] = self._norm(x, "model.norm.weight")
        return self._head(x)

    # ---------------------------------------------------- cached (paged) API
    def step(self, batch: Sequence[tuple[Any, Sequence[int]]],
             logits_rows: Sequence[int] | None = None,
             trace: dict | None = None) -> np.ndarray:
        """One runtime step over a ragged batch: [(seq_id, new tokens), ...].

        A seq_id not seen before starts a new sequence at position 0; a known
        one continues where its cache ends. The tokens are flattened sequence
        after sequence, as the runtime's `tokens` argument; the projections
        and the MLP run on all rows together, attention per sequence against
        its cache (which receives this step's K/V first). Returns logits
        [T, vocab] for all rows, or [len(logits_rows), vocab]. trace: if a
        dict, receives L{i}.ffn_norm and (MoE) L{i}.router_logits / experts /
        expert_weights / router_margin over the T flattened rows, as
        forward's trace names them."""
        c = self.cfg
        ids = [sid for sid, _ in batch]
        if len(set(ids)) != len(ids):
            raise ReferenceError(f"step: a sequence appears twice in one batch: {ids}")
        toks = [self._tokens(tk) for _, tk in batch]
        if any(len(tk) == 0 for tk in toks):
            raise ReferenceError("step: every batch entry needs at least one token")
        seqs = [self._seqs.get(sid) or _Seq(c) for sid in ids]  # new ids start empty
        starts = np.cumsum([0] + [len(tk) for tk in toks])
        T = int(starts[-1])
        flat = np.concatenate(toks)
        pos = np.concatenate([np.arange(len(s.tokens), len(s.tokens) + len(tk))
                              for s, tk in zip(seqs, toks)])
        ropes = self._rope_tables(pos)
        rep = c.heads // c.kv_heads
        # Work on copies of the cache lists so that an error leaves state intact.
        new_k = [list(s.k) for s in seqs]
        new_v = [list(s.v) for s in seqs]
        x = self._embed(flat)
        for i in range(c.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, p + "input_layernorm.weight")
            q, k = self._project_qk(p, h, *ropes[i])
            v = self._proj(p, "v", h).reshape(T, c.kv_heads, c.head_dim)
            o = np.empty((T, c.heads, c.head_dim))
            for j in range(len(seqs)):
                a, b = starts[j], starts[j + 1]
                # Write this step's K/V into the cache (slot_mapping), then attend.
                K = np.concatenate([new_k[j][i], k[a:b]])
                V = np.concatenate([new_v[j][i], v[a:b]])
                new_k[j][i], new_v[j][i] = K, V
                qs = q[a:b].reshape(b - a, c.kv_heads, rep, c.head_dim)  # head = g*rep + r
                s = self._scores(np.einsum("ngrd,lgd->grnl", qs, K))
                vis = visible_mask(pos[a:b], np.arange(len(K)), c.layer_windows[i])
                w = softmax_masked(s, vis[None, None])
                o[a:b] = np.einsum("grnl,lgd->ngrd", w, V).reshape(b - a, c.heads, c.head_dim)
            x = self._attn_residual(p, x, o.reshape(T, c.heads * c.head_dim))
            mlp_tr: dict = {}
            x = self._mlp(p, x, mlp_tr)
            if trace is not None:
                trace.update({f"L{i}.{name}": a for name, a in mlp_tr.items()})
        if logits_rows is not None:
            rows = np.asarray(list(logits_rows), dtype=np.int64)
            if rows.size and (rows.min() < 0 or rows.max() >= T):
                raise ReferenceError(f"logits_rows: rows must be in [0, {T})")
            x = x[rows]
        out = self._head(x)
        for j, (sid, s) in enumerate(zip(ids, seqs)):
            s.k, s.v = new_k[j], new_v[j]
            s.tokens.extend(int(t) for t in toks[j])
            self._seqs[sid] = s
        return out

    def expert_routes(self, tokens: Sequence[int]) -> dict:
        """A MoE model's routing of one sequence from position 0 (forward's
        trace, stacked over layers): {"experts": [layers, T, k] int64 (each
        token's experts in descending weight, ties to the lower index),
        "weights": [layers, T, k] float64 (after renormalization),
        "margin": [layers, T] (logit of the k-th chosen minus the best one not
        chosen: where it is small, a low-precision router may choose otherwise)}.
        For a ragged batch, step(batch, trace={}) gives the same keys per layer
        over the flattened rows."""
        c = self.cfg
        if not c.moe:
            raise ReferenceError("expert_routes: this model has no experts")
        tr: dict = {}
        self.forward(tokens, trace=tr)
        return {"experts": np.stack([tr[f"L{i}.experts"] for i in range(c.layers)]),
                "weights": np.stack([tr[f"L{i}.expert_weights"] for i in range(c.layers)]),
                "margin": np.stack([tr[f"L{i}.router_margin"] for i in range(c.layers)])}

    def batch_inputs(self, batch: Sequence[tuple[Any, Sequence[int]]]) -> dict:
        """The runtime's semantic step inputs for `batch` given the current
        state (call before step): tokens, positions, query_starts, context_lens."""
        toks = [list(map(int, tk)) for _, tk in batch]
        past = [self.context_len(sid) for sid, _ in batch]
        qs = np.cumsum([0] + [len(t) for t in toks]).astype(np.int32)
        return {
            "tokens": np.array([t for tk in toks for t in tk], np.int32),
            "positions": np.array([p + i for p, tk in zip(past, toks)
                                   for i in range(len(tk))], np.int32),
            "query_starts": qs,
            "context_lens": np.array([p + len(tk) for p, tk in zip(past, toks)], np.int32),
        }

    @staticmethod
    def split_rows(batch: Sequence[tuple[Any, Sequence[int]]], flat: np.ndarray) -> dict:
        """{seq_id: its rows of step()'s full [T, vocab] result}."""
        out, a = {}, 0
        for sid, tk in batch:
            out[sid] = flat[a:a + len(tk)]
            a += len(tk)
        return out

    def extend(self, tokens: Sequence[int], seq_id: Any = 0) -> np.ndarray:
        """Appends tokens to a sequence (chunked prefill); logits [n, vocab]."""
        return self.step([(seq_id, tokens)])

    def prefill(self, tokens: Sequence[int], seq_id: Any = 0) -> np.ndarray:
        """Starts seq_id afresh (dropping any cache it had); logits [n, vocab]."""
        self._seqs.pop(seq_id, None)
        return self.step([(seq_id, tokens)])

    def decode(self, token: int, seq_id: Any = 0) -> np.ndarray:
        """One token appended to seq_id; logits [vocab]."""
        if seq_id not in self._seqs:
            raise ReferenceError(f"decode: sequence {seq_id!r} has no prefill")
        return self.step([(seq_id, [token])])[0]

    def fork(self, src: Any, dst: Any) -> None:
        """dst gets a copy of src's cache (prefix sharing / copy-on-write)."""
        if src not in self._seqs:
            raise ReferenceError(f"fork: no sequence {src!r}")
        self._seqs[dst] = self._seqs[src].copy()

    def truncate(self, seq_id: Any, length: int) -> None:
        """Keeps the first `length` cached tokens of seq_id."""
        s = self._seqs[seq_id]
        s.k = [k[:length] for k in s.k]
        s.v = [v[:length] for v in s.v]
        s.tokens = s.tokens[:length]

    def free(self, seq_id: Any) -> None:
        self._seqs.pop(seq_id, None)

    def reset(self) -> None:
        self._seqs.clear()

    def context_len(self, seq_id: Any) -> int:
        s = self._seqs.get(seq_id)
        return 0 if s is None else len(s.tokens)

    def seq_tokens(self, seq_id: Any) -> list[int]:
        return list(self._seqs[seq_id].tokens)

    def kv(self, seq_id: Any, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """(K after RoPE, V) of one layer, [len, kv_heads, head_dim], HF
        rotate-half layout (a GGUF-layout cache holds K's halves interleaved)."""
        s = self._seqs[seq_id]
        return s.k[layer], s.v[layer]


# --------------------------------------------------------------------------
# GGUF reading (gguf-py), independent of synth_model's writer
# --------------------------------------------------------------------------

_GGUF_TO_HF_LAYER = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_output.bias": "self_attn.o_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}


# A MoE layer's GGUF tensors: the router and the experts stacked along the
# first numpy axis (expert m at index m; GGML ne = [cols, rows, experts]).
_GGUF_MOE = {"ffn_gate_inp.weight": "router", "ffn_gate_exps.weight": "gate",
             "ffn_up_exps.weight": "up", "ffn_down_exps.weight": "down"}


def _split_experts(path: str, c: RefConfig, layer: int, gguf_suffix: str,
                   a: np.ndarray) -> dict[str, np.ndarray]:
    """{HF name: array} of one MoE tensor of layer: the router as it is, a
    stack [E, rows, cols] split into E per-expert matrices."""
    n = moe_tensor_names(c, layer)
    role = _GGUF_MOE[gguf_suffix]
    if role == "router":
        return {n["router"]: a}
    if a.ndim != 3 or a.shape[0] != c.num_experts:
        raise ReferenceError(f"{path}: blk.{layer}.{gguf_suffix} has numpy shape "
                             f"{a.shape}, want [{c.num_experts}, rows, cols]")
    return {name: a[m] for m, name in enumerate(n[role])}


# The GGUF architectures read_gguf knows.
GGUF_ARCHES = ("llama", "qwen2", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3")
# Per architecture, GGUF layer names that map to other HF names than llama's:
# Phi-3's fused attn_qkv and ffn_up (gate rows, then up: 2 * n_ff rows);
# Gemma's four norms (its ffn_norm is pre_feedforward_layernorm, and HF's
# post_attention_layernorm is the norm after attention).
_GEMMA_TO_HF = {"post_attention_norm.weight": "post_attention_layernorm.weight",
                "ffn_norm.weight": "pre_feedforward_layernorm.weight",
                "post_ffw_norm.weight": "post_feedforward_layernorm.weight"}
_GGUF_TO_HF_ARCH = {
    "phi3": {"attn_qkv.weight": "self_attn.qkv_proj.weight",
             "ffn_up.weight": "mlp.gate_up_proj.weight"},
    "gemma2": _GEMMA_TO_HF,
    "gemma3": _GEMMA_TO_HF,
}
# llama.cpp recognises the 27B Gemmas by their layer count, and scales their
# scores by 1/sqrt(hidden / heads) instead of 1/sqrt(head_dim).
_LLAMA_CPP_27B_LAYERS = {"gemma2": 46, "gemma3": 62}


def _gguf_gemma(path: str, arch: str, field, raw: dict, hidden: int, heads: int,
                head_dim: int, layers: int, use_sliding_window: bool) -> tuple[dict, list]:
    """(RefConfig fields, per-layer windows) of a gemma2 / gemma3 GGUF, as
    llama.cpp's llama_model_gemma2/3::load_arch_hparams read them: the norm
    weights as stored (1 + w: norm_offset 0); the SWA pattern from
    attention.sliding_window_pattern (a count n: layer i slides iff
    i % n < n - 1; or a per-layer bool array), default 2 (gemma2) / 6
    (gemma3); gemma2's window default 4096 and soft-caps default 50 / 30 (it
    always soft-caps); gemma3 slides only with attention.sliding_window > 0,
    its sliding layers use rope.freq_base_swa (default 10000), unscaled, and
    its logits are soft-capped only with final_logit_softcapping; the score
    scale llama.cpp's: head_dim, hidden // heads for the 27B layer counts."""
    if arch == "gemma2" and "output.weight" in raw:
        raise ReferenceError(f"{path}: gemma2 with output.weight: llama.cpp's gemma2 always "
                             "uses token_embd as the head (and would not load this file)")
    sw = field(f"{arch}.attention.sliding_window")
    if arch == "gemma2" and sw is None:
        sw = 4096
    swa = bool(sw) and int(sw) > 0
    pat = field(f"{arch}.attention.sliding_window_pattern", 2 if arch == "gemma2" else 6)
    if isinstance(pat, list):
        if len(pat) < layers:
            raise ReferenceError(f"{path}: attention.sliding_window_pattern has {len(pat)} "
                                 f"entries for {layers} layers")
        sliding = [bool(x) for x in pat[:layers]]
    else:
        n = int(pat)
        sliding = [n == 0 or i % n < n - 1 for i in range(layers)]
    if not swa:
        sliding = [False] * layers
    windows = [int(sw) if t and use_sliding_window else None for t in sliding]
    scalar = float(hidden // heads if layers == _LLAMA_CPP_27B_LAYERS[arch] else head_dim)
    final = field(f"{arch}.final_logit_softcapping", 30.0 if arch == "gemma2" else None)
    extra = dict(embed_scale=math.sqrt(hidden), norm_offset=0.0, post_norms=True,
                 query_pre_attn_scalar=scalar,
                 attn_softcap=float(field(f"{arch}.attn_logit_softcapping", 50.0))
                 if arch == "gemma2" else None,
                 final_softcap=float(final) if final else None)
    local = field(f"{arch}.rope.freq_base_swa", None if arch == "gemma2" else 10000.0)
    if local is not None and any(sliding):
        extra.update(rope_local_theta=float(local), layer_local_rope=list(sliding))
    return extra, windows


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of convert_hf_to_gguf's LlamaModel.permute: within each head,
    GGML's interleaved pair rows (2i, 2i+1) back to rotate-half rows (i, i+d/2)."""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def read_gguf(path: str, use_sliding_window: bool = True) -> tuple[RefConfig, dict]:
    """(RefConfig, {HF name: float32 array in HF layout}) of a GGUF file."""
    try:
        import gguf
    except ImportError:
        raise ReferenceError("reading GGUF needs the PyPI `gguf` package") from None
    r = gguf.GGUFReader(path)

    def field(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        if hasattr(f, "contents"):
            return f.contents()
        return f.parts[f.data[0]].tolist()

    arch = field("general.architecture")
    if arch not in GGUF_ARCHES:
        raise ReferenceError(f"{path}: general.architecture {arch!r} is not one of "
                             f"{', '.join(GGUF_ARCHES)}")
    raw = {}
    for t in r.tensors:
        shape = [int(x) for x in t.shape][::-1]   # GGML order reversed = numpy order
        raw[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
    hidden = int(field(f"{arch}.embedding_length"))
    heads = int(field(f"{arch}.attention.head_count"))
    kv = int(field(f"{arch}.attention.head_count_kv", heads))
    head_dim = int(field(f"{arch}.attention.key_length", hidden // heads))
    layers = int(field(f"{arch}.block_count"))
    vocab = raw["token_embd.weight"].shape[0]
    rs = None
    if field(f"{arch}.rope.scaling.type") == "linear":
        rs = {"rope_type": "linear", "factor": float(field(f"{arch}.rope.scaling.factor"))}
    elif field(f"{arch}.rope.scaling.type") not in (None, "none"):
        raise ReferenceError(f"{path}: rope.scaling.type "
                             f"{field(f'{arch}.rope.scaling.type')!r} is not supported")
    sw = field(f"{arch}.attention.sliding_window") if use_sliding_window else None
    extra: dict = {}
    windows = [int(sw) if sw else None] * layers
    if arch in ("gemma2", "gemma3"):
        extra, windows = _gguf_gemma(path, arch, field, raw, hidden, heads, head_dim, layers,
                                     use_sliding_window)
        if rs is not None and arch == "gemma2":
            raise ReferenceError(f"{path}: gemma2 with rope scaling is not supported")
    if arch == "phi3":
        extra = dict(fused_proj=True)
        if int(field("phi3.rope.dimension_count", head_dim)) != head_dim:
            raise ReferenceError(f"{path}: phi3 with rope.dimension_count "
                                 f"{field('phi3.rope.dimension_count')} != head_dim {head_dim} "
                                 "(partial rotary) is not supported")
        if rs is not None:
            raise ReferenceError(f"{path}: phi3 with rope scaling is not supported")
    # MoE: qwen3moe, or llama with experts (Mixtral). llama.cpp renormalizes
    # the top-k weights in both (no key says otherwise).
    n_exp = int(field(f"{arch}.expert_count", 0) or 0)
    moe: dict = {}
    if arch == "qwen3moe" and n_exp <= 0:
        raise ReferenceError(f"{path}: qwen3moe without {arch}.expert_count")
    if n_exp and arch not in ("llama", "qwen3moe"):
        raise ReferenceError(f"{path}: {arch}.expert_count in a {arch} model")
    if n_exp:
        ff = field(f"{arch}.expert_feed_forward_length") if arch == "qwen3moe" else None
        moe = dict(num_experts=n_exp,
                   experts_per_tok=int(field(f"{arch}.expert_used_count", 0) or 0),
                   moe_intermediate=int(ff if ff is not None
                                        else field(f"{arch}.feed_forward_length")),
                   norm_topk_prob=True,
                   moe_naming="qwen3_moe" if arch == "qwen3moe" else "mixtral")
    cfg = RefConfig(
        model_type=arch, vocab=vocab, hidden=hidden,
        intermediate=int(field(f"{arch}.feed_forward_length")), layers=layers,
        heads=heads, kv_heads=kv, head_dim=head_dim,
        rms_norm_eps=float(field(f"{arch}.attention.layer_norm_rms_epsilon")),
        rope_theta=float(field(f"{arch}.rope.freq_base", 10000.0)),
        rope_scaling=rs,
        hidden_act="gelu_pytorch_tanh" if arch in ("gemma2", "gemma3") else "silu",
        tie_embeddings="output.weight" not in raw,
        layer_windows=windows,
        max_position=int(field(f"{arch}.context_length", 2048)),
        rope_freqs=raw.pop("rope_freqs.weight", None),
        qk_norm=arch in ("qwen3", "qwen3moe", "gemma3"), **moe, **extra)
    to_hf = dict(_GGUF_TO_HF_LAYER, **_GGUF_TO_HF_ARCH.get(arch, {}))
    W = {}
    for name, a in raw.items():
        if name == "token_embd.weight":
            W["model.embed_tokens.weight"] = a
        elif name == "output_norm.weight":
            W["model.norm.weight"] = a
        elif name == "output.weight":
            W["lm_head.weight"] = a
        else:
            m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
            if m and cfg.moe and m.group(2) in _GGUF_MOE:
                W.update(_split_experts(path, cfg, int(m.group(1)), m.group(2), a))
                continue
            if not m or m.group(2) not in to_hf:
                raise ReferenceError(f"{path}: tensor {name!r} is not one this reference knows")
            hf = to_hf[m.group(2)]
            if arch == "llama" and m.group(2).startswith(("attn_q.", "attn_k.")):
                a = _unpermute(a, heads if m.group(2).startswith("attn_q.") else kv)
            W[f"model.layers.{m.group(1)}.{hf}"] = a
    return cfg, W


def _synth():
    """tools/synth-model's module (HF folders' safetensors reader, synthetic
    weights): from the checkout, else from sys.path (a GPU payload carries it
    in py/), else a ReferenceError that says what is missing."""
    if os.path.isfile(os.path.join(SYNTH_DIR, "synth_model.py")) and SYNTH_DIR not in sys.path:
        sys.path.insert(0, SYNTH_DIR)
    try:
        import synth_model
    except ImportError as e:
        raise ReferenceError(
            f"reading HF folders needs tools/synth-model (synth_model.py, synthlib/, "
            f"kquant.py): not at {SYNTH_DIR} and not importable ({e}); copy it beside "
            f"test/reference, or use a payload from scripts/gpu-payload.sh (py/)") from e
    return synth_model


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------

def load_model(spec: str) -> ReferenceModel:
    """An HF folder, a .gguf file, or 'synth:{json}' (make_config fields plus
    "seed" and optional "gguf_type")."""
    if spec.startswith("synth:"):
        d = json.loads(spec[len("synth:"):] or "{}")
        seed = int(d.pop("seed", 0))
        gt = d.pop("gguf_type", None)
        return ReferenceModel.from_synth(d, seed, gt)
    if os.path.isdir(spec):
        return ReferenceModel.from_hf_folder(spec)
    if spec.endswith(".gguf") and os.path.isfile(spec):
        return ReferenceModel.from_gguf(spec)
    raise ReferenceError(f"MODEL: {spec!r} is not an HF folder, a .gguf file or synth:{{...}}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", metavar="MODEL",
                    help="HF folder, .gguf file, or 'synth:{\"arch\": \"qwen2\", \"seed\": 2}'")
    ap.add_argument("--tokens", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--decode-steps", type=int, default=0,
                    help="greedy decode steps after the prompt (each feeds the argmax)")
    ap.add_argument("--out", help="save all logits [prompt + steps, vocab] float64 as .npy")
    ap.add_argument("--top", type=int, default=5, help="how many top tokens to print")
    args = ap.parse_args(argv)
    try:
        tokens = [int(x) for x in args.tokens.split(",") if x.strip()]
    except ValueError:
        print(f"error: --tokens: not a comma-separated list of integers: {args.tokens!r}",
              file=sys.stderr)
        return 2
    if not tokens:
        print("error: --tokens: empty", file=sys.stderr)
        return 2
    try:
        m = load_model(args.model)
        print(f"# {m.cfg.summary()}")
        rows = list(m.prefill(tokens))
        fed = list(tokens)
        for _ in range(args.decode_steps):
            nxt = int(np.argmax(rows[-1]))
            fed.append(nxt)
            rows.append(m.decode(nxt))
    except (ReferenceError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logits = np.stack(rows)
    for i, row in enumerate(logits):
        top = np.argsort(-row, kind="stable")[:args.top]
        kind = "prompt" if i < len(tokens) else "decode"
        nxt = f" -> next {fed[i + 1]}" if i + 1 < len(fed) else ""
        print(f"pos {i:4d} {kind} token {fed[i]:6d}{nxt}: "
              + "  ".join(f"{int(t)}:{row[t]:.6f}" for t in top))
    if args.out:
        np.save(args.out, logits)
        print(f"# wrote {args.out}: {logits.shape} float64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
