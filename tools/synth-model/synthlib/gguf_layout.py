"""How HF tensors map onto a GGUF file: names, the Q/K row permutation,
llama3's rope_freqs and the per-tensor plan."""
from __future__ import annotations

import math
import re

import numpy as np

from .config import Config, SynthError, make_config
from .gguf_types import _gguf_qtype, _matrix_type
from .weights import tensor_specs


def permute_qk(w: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py's LlamaModel.permute: HF rotate-half
    row order -> GGML's interleaved (normal-mode) RoPE row order. Called as
    permute(q, n_head, n_head) and permute(k, n_head, n_kv_head); works on
    weights [out, in] and biases [out]."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def unpermute_qk(w: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """The inverse of permute_qk."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


_GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf_name: str) -> str:
    """GGUF tensor name of an HF tensor name."""
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf_name)
    if m and m.group(2) in _GGUF_NAMES:
        return f"blk.{m.group(1)}.{_GGUF_NAMES[m.group(2)]}"
    raise SynthError(f"no GGUF name for tensor {hf_name!r}")


# Architectures llama.cpp runs with NEOX (rotate-half) RoPE, as HF does: their
# Q/K rows stay in HF order. The others get LlamaModel.permute for GGML's
# interleaved RoPE.
NEOX_ARCHES = ("qwen2", "qwen3")


def gguf_arch(cfg: Config) -> str:
    """general.architecture: llama.cpp converts Mistral as "llama"."""
    return cfg.arch if cfg.arch in NEOX_ARCHES else "llama"


def llama3_rope_freqs(cfg: Config) -> np.ndarray:
    """GGUF rope_freqs.weight for llama3 scaling: per frequency pair, the
    divisor of HF's inverse frequency (1 = unchanged, factor = fully scaled),
    as convert_hf_to_gguf.py computes it, from rope_scaling's own
    original_max_position_embeddings."""
    rs = cfg.rope_scaling
    dim = cfg.head_dim
    freqs = 1.0 / (cfg.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)

def gguf_tensor_plan(cfg: Config | dict, gguf_type: str = "f32") -> list[dict]:
    """[{hf, gguf, shape (numpy order), type, permuted}] in file order; the
    rope_freqs entry has hf None."""
    c = make_config(cfg)
    _gguf_qtype(gguf_type)
    plan = []
    specs = tensor_specs(c)
    for s in specs[:1]:
        plan.append({"hf": s.name, "gguf": gguf_name(s.name), "shape": list(s.shape),
                     "type": _matrix_type(gguf_type, s.shape), "permuted": False})
    rs = c.rope_scaling
    if rs and rs.get("rope_type") == "llama3":
        plan.append({"hf": None, "gguf": "rope_freqs.weight", "shape": [c.head_dim // 2],
                     "type": "f32", "permuted": False})
    for s in specs[1:]:
        permuted = (c.arch not in NEOX_ARCHES
                    and re.search(r"\.(q|k)_proj\.(weight|bias)$", s.name) is not None)
        plan.append({"hf": s.name, "gguf": gguf_name(s.name), "shape": list(s.shape),
                     "type": _matrix_type(gguf_type, s.shape), "permuted": permuted})
    return plan


def _gguf_layout(c: Config, name: str, w: np.ndarray) -> np.ndarray:
    """HF layout -> the layout the GGUF stores (Q/K rows permuted for llama).
    q_norm / k_norm exist only in NEOX architectures (qwen3), so stay as they are."""
    if c.arch in NEOX_ARCHES:
        return w
    if re.search(r"\.q_proj\.(weight|bias)$", name):
        return permute_qk(w, c.heads, c.heads)
    if re.search(r"\.k_proj\.(weight|bias)$", name):
        return permute_qk(w, c.heads, c.kv_heads)
    return w
