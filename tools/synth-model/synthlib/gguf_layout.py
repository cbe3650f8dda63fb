"""How HF tensors map onto a GGUF file: names, the Q/K row permutation,
llama3's rope_freqs and the per-tensor plan."""
from __future__ import annotations

import math
import re

import numpy as np

from .config import GEMMA_ARCHES, Config, SynthError, llama_cpp_attn_scalar, make_config
from .gguf_types import _gguf_qtype, _matrix_type
from .weights import moe_tensor_names, tensor_specs


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
    # Phi-3's fused projections (Q, K, V rows; gate, then up rows), as
    # convert_hf_to_gguf.py maps them: attn_qkv, and ffn_up 2 * n_ff rows.
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",
}
# Gemma 2 / 3's four norms per layer: HF post_attention_layernorm is the norm
# after attention (not the MLP's input, as in llama); pre_feedforward_layernorm
# is the MLP's input.
_GEMMA_GGUF_NAMES = {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}


def gguf_name(hf_name: str, arch: str | None = None) -> str:
    """GGUF tensor name of an HF tensor name (a MoE router's too; single
    experts have none: they live in the stacked ffn_*_exps tensors). arch
    (a synth arch): gemma2 / gemma3 name their norms differently."""
    if arch in GEMMA_ARCHES:
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf_name)
        if m and m.group(2) in _GEMMA_GGUF_NAMES:
            return f"blk.{m.group(1)}.{_GEMMA_GGUF_NAMES[m.group(2)]}"
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf_name)
    if m and m.group(2) in _GGUF_NAMES:
        return f"blk.{m.group(1)}.{_GGUF_NAMES[m.group(2)]}"
    if m and m.group(2) in ("mlp.gate.weight", "block_sparse_moe.gate.weight"):
        return f"blk.{m.group(1)}.{MOE_GGUF_ROUTER}"
    raise SynthError(f"no GGUF name for tensor {hf_name!r}")


# Architectures llama.cpp runs with NEOX (rotate-half) RoPE, as HF does: their
# Q/K rows stay in HF order. The others get LlamaModel.permute for GGML's
# interleaved RoPE.
NEOX_ARCHES = ("qwen2", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3")

# A MoE layer's GGUF tensors after ffn_norm, as convert_hf_to_gguf.py names
# them: the router (ffn_gate_inp, [E, hidden], always f32 as llama-quantize
# leaves it), then the experts stacked along a new first numpy axis, expert m
# at index m: ffn_gate_exps / ffn_up_exps [E, I, hidden], ffn_down_exps
# [E, hidden, I] (GGML dims reversed: ne = [hidden, I, E] / [I, hidden, E]).
MOE_GGUF_ROUTER = "ffn_gate_inp.weight"
MOE_GGUF_EXPERTS = (("gate", "ffn_gate_exps.weight"), ("up", "ffn_up_exps.weight"),
                    ("down", "ffn_down_exps.weight"))


def gguf_arch(cfg: Config) -> str:
    """general.architecture: llama.cpp converts Mistral and Mixtral as "llama"
    (Mixtral with llama.expert_count), Qwen3-MoE as "qwen3moe"; phi3, gemma2
    and gemma3 as themselves."""
    return cfg.arch if cfg.arch in NEOX_ARCHES else "llama"


def check_gguf_expressible(cfg: Config) -> None:
    """Raises SynthError for a config no GGUF can express: qwen3moe without
    norm_topk_prob (llama.cpp's qwen3moe always renormalizes the top-k
    routing weights, and has no key to say otherwise); gemma2 untied
    (llama.cpp's gemma2 always uses token_embd as the output head, and
    convert_hf_to_gguf.py drops lm_head); gemma2 / gemma3 with a
    query_pre_attn_scalar other than the one llama.cpp uses (no key carries it)."""
    if cfg.arch == "qwen3moe" and not cfg.norm_topk_prob:
        raise SynthError("norm_topk_prob (--no-norm-topk-prob): llama.cpp's qwen3moe always "
                         "renormalizes the top-k routing weights, so a GGUF cannot express "
                         "a model without it; write it with --format hf")
    if cfg.arch == "gemma2" and not cfg.tie_embeddings:
        raise SynthError("tie_embeddings (--no-tie-embeddings): llama.cpp's gemma2 always uses "
                         "token_embd as the output head (convert_hf_to_gguf.py drops "
                         "lm_head), so a GGUF cannot express an untied gemma2; write it "
                         "with --format hf")
    if cfg.gemma and cfg.query_pre_attn_scalar != llama_cpp_attn_scalar(cfg):
        raise SynthError(f"query_pre_attn_scalar (--query-pre-attn-scalar): llama.cpp's "
                         f"{cfg.arch} reads no key for it and scales the scores by "
                         f"1/sqrt({llama_cpp_attn_scalar(cfg):g}) here, so a GGUF cannot "
                         f"express {cfg.query_pre_attn_scalar:g}; write it with --format hf")


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
    rope_freqs entry has hf None. A MoE layer's stacked expert tensors have hf
    None too, and hf_experts: the HF names of experts 0..E-1 in stack order."""
    c = make_config(cfg)
    _gguf_qtype(gguf_type)
    check_gguf_expressible(c)
    plan = []
    specs = tensor_specs(c)
    for s in specs[:1]:
        plan.append({"hf": s.name, "gguf": gguf_name(s.name, c.arch), "shape": list(s.shape),
                     "type": _matrix_type(gguf_type, s.shape), "permuted": False})
    rs = c.rope_scaling
    if rs and rs.get("rope_type") == "llama3":
        plan.append({"hf": None, "gguf": "rope_freqs.weight", "shape": [c.head_dim // 2],
                     "type": "f32", "permuted": False})
    shapes = {s.name: s.shape for s in specs}
    stacked: set[str] = set()   # single experts' HF names: they go into the stacks
    if c.moe:
        for i in range(c.layers):
            n = moe_tensor_names(c, i)
            for role, _ in MOE_GGUF_EXPERTS:
                stacked.update(n[role])
    for s in specs[1:]:
        if s.name in stacked:
            continue
        permuted = (c.arch not in NEOX_ARCHES
                    and re.search(r"\.(q|k)_proj\.(weight|bias)$", s.name) is not None)
        router = c.moe and s.name.endswith(".gate.weight")
        plan.append({"hf": s.name, "gguf": gguf_name(s.name, c.arch), "shape": list(s.shape),
                     "type": "f32" if router else _matrix_type(gguf_type, s.shape),
                     "permuted": permuted})
        if router:
            # The layer's experts follow its router: gate, up, down stacks
            # (whatever the HF module order), expert m at index m of axis 0.
            i = int(re.fullmatch(r"model\.layers\.(\d+)\..*", s.name).group(1))
            n = moe_tensor_names(c, i)
            for role, gname in MOE_GGUF_EXPERTS:
                shape = [c.experts, *shapes[n[role][0]]]
                plan.append({"hf": None, "hf_experts": list(n[role]),
                             "gguf": f"blk.{i}.{gname}", "shape": shape,
                             "type": _matrix_type(gguf_type, tuple(shape)),
                             "permuted": False})
    return plan


def gemma_norm_offset(c: Config, name: str) -> float:
    """What the GGUF adds to an HF tensor: 1 for a Gemma norm weight (HF
    stores w, Gemma computes with 1 + w, convert_hf_to_gguf.py stores 1 + w;
    exact in float32 for this tool's weights), else 0."""
    return 1.0 if c.gemma and name.endswith("norm.weight") else 0.0


def _gguf_layout(c: Config, name: str, w: np.ndarray) -> np.ndarray:
    """HF layout -> the layout the GGUF stores (Q/K rows permuted for llama;
    Gemma's norm weights + 1). q_norm / k_norm exist only in NEOX
    architectures (qwen3, gemma3), so stay in their order."""
    if gemma_norm_offset(c, name):
        return np.asarray(w, np.float32) + np.float32(1.0)
    if c.arch in NEOX_ARCHES:
        return w
    if re.search(r"\.q_proj\.(weight|bias)$", name):
        return permute_qk(w, c.heads, c.heads)
    if re.search(r"\.k_proj\.(weight|bias)$", name):
        return permute_qk(w, c.heads, c.kv_heads)
    return w


def plan_source(c: Config, p: dict, weights: dict[str, np.ndarray]) -> np.ndarray:
    """The array a plan entry stores, in GGUF layout, before encoding: an HF
    tensor (Q/K rows permuted for llama), or a MoE layer's experts stacked
    along a new first axis (np.stack of hf_experts, expert m at index m)."""
    if p.get("hf_experts"):
        return np.stack([np.asarray(weights[n], np.float32) for n in p["hf_experts"]])
    if p["hf"] is None:
        return llama3_rope_freqs(c)
    return _gguf_layout(c, p["hf"], weights[p["hf"]])
