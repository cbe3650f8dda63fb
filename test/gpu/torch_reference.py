"""A float32 PyTorch forward pass of the models test/reference describes
(Llama, Mistral, Qwen2 decoders), for the GPU check: GPU logits vs a PyTorch
float32 reference of the same seeded weights.

The weights come from reference_forward.ReferenceModel's loaders (from_gguf:
dequantized by gguf-py, Q/K rows back in HF order; from_hf_folder;
from_synth); everything after that is computed here in torch, float32, on
CUDA when there is one (TF32 off), else on the CPU: the RoPE inverse
frequencies (default, linear, llama3, and GGUF's rope_freqs divisors), RMSNorm,
rotate-half RoPE, GQA attention with the causal mask and a sliding window,
the SwiGLU MLP, Q/K/V (and any other) biases, tied embeddings. It reads only
ref_model.cfg and ref_model.W, never reference_forward's math.

    import sys; sys.path[:0] = ["test/reference", "test/gpu"]
    import reference_forward as rf, torch_reference as tr
    m = rf.ReferenceModel.from_gguf("model.gguf")
    logits = tr.forward(m, [1, 2, 3])     # [3, vocab] float32 numpy

test/gpu/check_torch_reference.py checks it against the float64 reference.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def inv_freq(cfg, device) -> torch.Tensor:
    """[head_dim/2] float32, as transformers' ROPE_INIT_FUNCTIONS (default,
    linear, llama3) compute them; with GGUF rope_freqs, llama.cpp's rule
    (default inverse frequencies divided by rope_freqs)."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=device)
                                    .float() / d))
    rs = cfg.rope_scaling
    kind = rs.get("rope_type", "default") if rs else "default"
    if cfg.rope_freqs is not None:
        inv = inv / torch.as_tensor(np.asarray(cfg.rope_freqs), dtype=torch.float32,
                                    device=device).reshape(inv.shape)
        return inv / float(rs["factor"]) if kind == "linear" else inv
    if kind == "default":
        return inv
    if kind == "linear":
        return inv / float(rs["factor"])
    if kind != "llama3":
        raise ValueError(f"rope_scaling {kind!r} is not supported")
    # transformers' _compute_llama3_parameters
    factor = float(rs["factor"])
    low, high = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    old_ctx = float(rs["original_max_position_embeddings"])
    low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_ctx / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, inv_l)


def _act(name: str, x: torch.Tensor) -> torch.Tensor:
    if name in ("silu", "swish"):
        return F.silu(x)
    if name == "gelu":
        return F.gelu(x)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return F.gelu(x, approximate="tanh")
    if name == "quick_gelu":
        return x * torch.sigmoid(1.702 * x)
    if name == "relu":
        return F.relu(x)
    raise ValueError(f"hidden_act {name!r} is not supported")


def _rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def weights(ref_model, device=None) -> dict[str, torch.Tensor]:
    """ref_model.W (float64 numpy, HF names) as float32 tensors on device."""
    device = device or default_device()
    return {k: torch.as_tensor(np.asarray(v), dtype=torch.float32, device=device)
            for k, v in ref_model.W.items()}


@torch.no_grad()
def forward(ref_model, tokens: Sequence[int], device=None,
            W: dict[str, torch.Tensor] | None = None) -> np.ndarray:
    """Logits [len(tokens), vocab] float32 of one sequence from position 0
    (full causal forward, no cache), like ReferenceModel.forward.
    W: weights(ref_model, device) when calling several times."""
    c = ref_model.cfg
    device = torch.device(device) if device is not None else default_device()
    W = W if W is not None else weights(ref_model, device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False   # float32 means float32
    try:
        t = torch.as_tensor(list(map(int, tokens)), dtype=torch.int64, device=device)
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= c.vocab):
            raise ValueError(f"tokens must be in [0, {c.vocab})")
        T, H, KV, D = t.numel(), c.heads, c.kv_heads, c.head_dim

        def lin(name, x):
            b = W.get(name + ".bias")
            return F.linear(x, W[name + ".weight"], b)

        pos = torch.arange(T, device=device)
        freqs = pos[:, None].float() * inv_freq(c, device)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)           # [T, D]
        cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
        causal = pos[None, :] <= pos[:, None]             # [q, k]
        x = F.embedding(t, W["model.embed_tokens.weight"])
        for i in range(c.layers):
            p = f"model.layers.{i}."
            h = _rms_norm(x, W[p + "input_layernorm.weight"], c.rms_norm_eps)
            q = lin(p + "self_attn.q_proj", h).view(T, H, D)
            k = lin(p + "self_attn.k_proj", h).view(T, KV, D)
            v = lin(p + "self_attn.v_proj", h).view(T, KV, D)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            # GQA: query head j reads KV head j // (H / KV).
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            mask = causal
            win = c.layer_windows[i]
            if win:   # Mistral: the last `win` keys, the query's own included
                mask = mask & (pos[None, :] > pos[:, None] - win)
            s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D)
            s = s.masked_fill(~mask[None], float("-inf")).softmax(dim=-1)
            o = torch.einsum("hqk,khd->qhd", s, v).reshape(T, H * D)
            x = x + lin(p + "self_attn.o_proj", o)
            h = _rms_norm(x, W[p + "post_attention_layernorm.weight"], c.rms_norm_eps)
            g = _act(c.hidden_act, lin(p + "mlp.gate_proj", h))
            x = x + lin(p + "mlp.down_proj", g * lin(p + "mlp.up_proj", h))
        x = _rms_norm(x, W["model.norm.weight"], c.rms_norm_eps)
        head = W.get("lm_head.weight", W["model.embed_tokens.weight"])   # tied
        return (x @ head.T).float().cpu().numpy()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
