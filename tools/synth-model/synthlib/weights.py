"""The model's tensor list and its seeded, platform-independent weights."""
from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np

from .config import Config, SynthError, make_config


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str                 # HF name
    shape: tuple[int, ...]    # HF layout: [out, in] for projections
    init: str                 # "uniform" | "norm" | "zero"
    std: float                # standard deviation (uniform) / spread (norm)
    center: float = 1.0       # norm only: the values are center + uniform(-std, std)
    # norm only: the stored value is (center + uniform) - offset, in float32.
    # Gemma stores its norm weights zero-centred (offset 1) and computes with
    # 1 + w, which is then exact in float32 (also after rounding to f16/bf16):
    # the GGUF's 1 + w holds the same numbers.
    offset: float = 0.0
    # uniform only: row blocks with their own std, ((rows, std), ...) summing
    # to shape[0], drawn from the tensor's one stream (a fused projection:
    # Phi-3's qkv_proj, whose Q and K rows carry qk_gain). Empty: std throughout.
    row_stds: tuple = ()


def tensor_specs(cfg: Config) -> list[TensorSpec]:
    """The model's tensors in HF names and layout, in model order."""
    c = make_config(cfg)
    H, I, V, D = c.hidden, c.intermediate, c.vocab, c.head_dim
    q, kv = c.heads * D, c.kv_heads * D
    # QK-norm cancels any scale of q_proj/k_proj, so qk_gain moves to the norms.
    proj_gain = 1.0 if c.qk_norm else c.qk_gain
    norm_gain = c.qk_gain if c.qk_norm else 1.0
    specs = [TensorSpec("model.embed_tokens.weight", (V, H), "uniform", 1.0)]
    if c.fused_proj:
        return specs + _phi3_specs(c)
    if c.gemma:
        return specs + _gemma_specs(c)
    for i in range(c.layers):
        p = f"model.layers.{i}."
        specs.append(TensorSpec(p + "input_layernorm.weight", (H,), "norm", 0.1))
        specs.append(TensorSpec(p + "self_attn.q_proj.weight", (q, H), "uniform",
                                proj_gain * H ** -0.5))
        if c.qkv_bias:
            specs.append(TensorSpec(p + "self_attn.q_proj.bias", (q,), "uniform", 0.1))
        specs.append(TensorSpec(p + "self_attn.k_proj.weight", (kv, H), "uniform",
                                proj_gain * H ** -0.5))
        if c.qkv_bias:
            specs.append(TensorSpec(p + "self_attn.k_proj.bias", (kv,), "uniform", 0.1))
        specs.append(TensorSpec(p + "self_attn.v_proj.weight", (kv, H), "uniform", H ** -0.5))
        if c.qkv_bias:
            specs.append(TensorSpec(p + "self_attn.v_proj.bias", (kv,), "uniform", 0.1))
        specs.append(TensorSpec(p + "self_attn.o_proj.weight", (H, q), "uniform", q ** -0.5))
        if c.qkv_bias and c.arch == "llama":
            # HF Llama's attention_bias also gives o_proj a bias; it is zero so
            # that the model is "Q/K/V bias only".
            specs.append(TensorSpec(p + "self_attn.o_proj.bias", (H,), "zero", 0.0))
        if c.qk_norm:
            # HF Qwen3Attention's q_norm / k_norm (after o_proj in its module
            # order). A wider spread than the other norms (0.3, not 0.1), so that
            # dropping or swapping them moves the logits clearly.
            for n in ("q_norm", "k_norm"):
                specs.append(TensorSpec(p + f"self_attn.{n}.weight", (D,), "norm",
                                        0.3 * norm_gain, center=norm_gain))
        specs.append(TensorSpec(p + "post_attention_layernorm.weight", (H,), "norm", 0.1))
        if c.moe:
            specs.extend(moe_layer_specs(c, i))
            continue
        specs.append(TensorSpec(p + "mlp.gate_proj.weight", (I, H), "uniform", H ** -0.5))
        specs.append(TensorSpec(p + "mlp.up_proj.weight", (I, H), "uniform", H ** -0.5))
        specs.append(TensorSpec(p + "mlp.down_proj.weight", (H, I), "uniform", I ** -0.5))
    specs.append(TensorSpec("model.norm.weight", (H,), "norm", 0.1))
    if not c.tie_embeddings:
        specs.append(TensorSpec("lm_head.weight", (V, H), "uniform", H ** -0.5))
    return specs


def _phi3_specs(c: Config) -> list[TensorSpec]:
    """Phi-3's layers, final norm and head (HF Phi3DecoderLayer): fused
    self_attn.qkv_proj [q + 2 kv, hidden] (Q rows, then K, then V; qk_gain on
    the Q and K rows), o_proj, fused mlp.gate_up_proj [2 I, hidden] (gate rows,
    then up), down_proj; llama's norms."""
    H, I, V, D = c.hidden, c.intermediate, c.vocab, c.head_dim
    q, kv = c.heads * D, c.kv_heads * D
    g = c.qk_gain * H ** -0.5
    specs = []
    for i in range(c.layers):
        p = f"model.layers.{i}."
        specs += [
            TensorSpec(p + "input_layernorm.weight", (H,), "norm", 0.1),
            TensorSpec(p + "self_attn.qkv_proj.weight", (q + 2 * kv, H), "uniform", H ** -0.5,
                       row_stds=((q, g), (kv, g), (kv, H ** -0.5))),
            TensorSpec(p + "self_attn.o_proj.weight", (H, q), "uniform", q ** -0.5),
            TensorSpec(p + "post_attention_layernorm.weight", (H,), "norm", 0.1),
            TensorSpec(p + "mlp.gate_up_proj.weight", (2 * I, H), "uniform", H ** -0.5),
            TensorSpec(p + "mlp.down_proj.weight", (H, I), "uniform", I ** -0.5)]
    specs.append(TensorSpec("model.norm.weight", (H,), "norm", 0.1))
    if not c.tie_embeddings:
        specs.append(TensorSpec("lm_head.weight", (V, H), "uniform", H ** -0.5))
    return specs


def _gemma_specs(c: Config) -> list[TensorSpec]:
    """Gemma 2 / 3's layers, final norm and head (HF Gemma2/3DecoderLayer
    order). Every norm weight is stored zero-centred (Gemma computes with
    1 + w): (1 + uniform(-0.1, 0.1)) - 1, exactly; gemma3's q_norm / k_norm
    (1 + uniform(-0.3, 0.3)) * qk_gain - 1."""
    H, I, V, D = c.hidden, c.intermediate, c.vocab, c.head_dim
    q, kv = c.heads * D, c.kv_heads * D
    proj_gain = 1.0 if c.qk_norm else c.qk_gain
    norm_gain = c.qk_gain if c.qk_norm else 1.0

    def norm(name: str, n: int, spread: float = 0.1, center: float = 1.0) -> TensorSpec:
        return TensorSpec(name, (n,), "norm", spread, center=center, offset=1.0)
    specs = []
    for i in range(c.layers):
        p = f"model.layers.{i}."
        specs += [
            norm(p + "input_layernorm.weight", H),
            TensorSpec(p + "self_attn.q_proj.weight", (q, H), "uniform", proj_gain * H ** -0.5),
            TensorSpec(p + "self_attn.k_proj.weight", (kv, H), "uniform", proj_gain * H ** -0.5),
            TensorSpec(p + "self_attn.v_proj.weight", (kv, H), "uniform", H ** -0.5),
            TensorSpec(p + "self_attn.o_proj.weight", (H, q), "uniform", q ** -0.5)]
        if c.qk_norm:
            specs += [norm(p + f"self_attn.{n}.weight", D, 0.3 * norm_gain, norm_gain)
                      for n in ("q_norm", "k_norm")]
        specs += [
            norm(p + "post_attention_layernorm.weight", H),
            norm(p + "pre_feedforward_layernorm.weight", H),
            TensorSpec(p + "mlp.gate_proj.weight", (I, H), "uniform", H ** -0.5),
            TensorSpec(p + "mlp.up_proj.weight", (I, H), "uniform", H ** -0.5),
            TensorSpec(p + "mlp.down_proj.weight", (H, I), "uniform", I ** -0.5),
            norm(p + "post_feedforward_layernorm.weight", H)]
    specs.append(norm("model.norm.weight", H))
    if not c.tie_embeddings:
        specs.append(TensorSpec("lm_head.weight", (V, H), "uniform", H ** -0.5))
    return specs


# The router's spread relative to the other projections (std ROUTER_GAIN /
# sqrt(hidden)): its logits get a standard deviation of about ROUTER_GAIN, so
# the top-k choice is decisive (a near tie between the k-th and the next expert
# is rare) while the k chosen weights stay far from one-hot (renormalizing them
# matters).
ROUTER_GAIN = 2.5

# HF names of a MoE layer's parts: (router, expert prefix, (gate, up, down)).
MOE_NAMES = {
    "qwen3moe": ("mlp.gate.weight", "mlp.experts", ("gate_proj", "up_proj", "down_proj")),
    "mixtral": ("block_sparse_moe.gate.weight", "block_sparse_moe.experts", ("w1", "w3", "w2")),
}


def moe_tensor_names(cfg: Config, layer: int) -> dict:
    """HF names of one MoE layer: {"router": name, "gate" / "up" / "down":
    [name of expert 0, 1, ..., E-1]}."""
    c = make_config(cfg)
    if not c.moe:
        raise SynthError(f"{c.arch} has no experts")
    router, experts, projs = MOE_NAMES[c.arch]
    p = f"model.layers.{layer}."
    out: dict = {"router": p + router}
    for role, proj in zip(("gate", "up", "down"), projs):
        out[role] = [f"{p}{experts}.{m}.{proj}.weight" for m in range(c.experts)]
    return out


def moe_layer_specs(c: Config, layer: int) -> list[TensorSpec]:
    """A MoE layer's MLP tensors in HF module order: the router, then expert by
    expert its gate, up and down projections (qwen3moe: gate_proj, up_proj,
    down_proj; mixtral: w1, w2, w3 as MixtralBlockSparseTop2MLP declares them)."""
    H, I = c.hidden, c.expert_intermediate
    n = moe_tensor_names(c, layer)
    specs = [TensorSpec(n["router"], (c.experts, H), "uniform", ROUTER_GAIN * H ** -0.5)]
    shapes = {"gate": ((I, H), H ** -0.5), "up": ((I, H), H ** -0.5),
              "down": ((H, I), I ** -0.5)}
    order = ("gate", "up", "down") if c.arch == "qwen3moe" else ("gate", "down", "up")
    for m in range(c.experts):
        for role in order:
            shape, std = shapes[role]
            specs.append(TensorSpec(n[role][m], shape, "uniform", std))
    return specs


def _stream_ints(seed: int, name: str, n: int) -> np.ndarray:
    """n odd int32 values m in (-2^23, 2^23), uniform over the odd integers,
    a function of (seed, name) only.

    Built from PCG64's raw 64-bit output (a fixed algorithm, stable across
    numpy versions and platforms, unlike Generator's distribution methods):
    each 64-bit word gives two 32-bit halves (low first), whose top 23 bits
    k give m = 2k + 1 - 2^23.
    """
    words = np.frombuffer(hashlib.sha256(name.encode()).digest()[:16], dtype="<u4")
    ss = np.random.SeedSequence([int(seed), *[int(w) for w in words]])
    raw = np.random.PCG64(ss).random_raw((n + 1) // 2)
    halves = raw.astype("<u8", copy=False).view("<u4")[:n]
    m = halves >> np.uint32(8)          # 24 bits: 2k or 2k + 1
    m |= np.uint32(1)                   # 2k + 1
    m = m.view(np.int32)
    m -= np.int32(1 << 23)
    return m


def _uniform(seed: int, name: str, n: int, halfwidth: float, center: float = 0.0
             ) -> np.ndarray:
    """float32 values center + halfwidth * m / 2^23 (m from _stream_ints),
    computed in float32 with IEEE rounding only: m is exact in float32, the
    product with the float32 constant halfwidth/2^23 is one rounding, and the
    addition of center another. So the same seed gives the same bits anywhere.
    """
    scale = np.float32(halfwidth / (1 << 23))
    out = _stream_ints(seed, name, n).astype(np.float32)
    out *= scale
    if center:
        out += np.float32(center)
    return out


def _round_to_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """float32 -> the nearest value representable in dtype, as float32."""
    if dtype == "f32":
        return a
    if dtype == "f16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return _bf16_bits_to_f32(_f32_to_bf16_bits(a))
    raise SynthError(f"dtype: {dtype!r}")


def _f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((b + (((b >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)


def _bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(np.float32)


def make_weights(cfg: Config | dict, seed: int) -> dict[str, np.ndarray]:
    """{HF name: float32 array in HF layout}, in model order.

    The values are exactly those the HF folder stores (already rounded to
    cfg.dtype). Each tensor is drawn from its own stream keyed by (seed, name),
    so changing e.g. the layer count leaves the other tensors unchanged.
    Scheme: uniform with the stated std (half-width std*sqrt(3)); norm weights
    1 + uniform(-0.1, 0.1) (q_norm / k_norm: 1 + uniform(-0.3, 0.3), times
    qk_gain), Gemma's minus 1 (stored zero-centred); zero tensors are zero.
    MoE routers have ROUTER_GAIN times the usual spread; every expert has its
    own stream, so no two are alike. Phi-3's fused qkv_proj has per-row-block
    spreads (row_stds) within its one stream.
    """
    c = make_config(cfg)
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SynthError(f"seed: must be a non-negative integer, got {seed!r}")
    out: dict[str, np.ndarray] = {}
    for s in tensor_specs(c):
        n = math.prod(s.shape)
        if s.init == "zero":
            w = np.zeros(s.shape, np.float32)
        elif s.init == "norm":
            w = _uniform(seed, s.name, n, s.std, center=s.center)
            if s.offset:
                w -= np.float32(s.offset)   # offset + w is then exact in float32
        elif s.row_stds:
            m = _stream_ints(seed, s.name, n).astype(np.float32).reshape(s.shape[0], -1)
            a = 0
            for rows, std in s.row_stds:
                m[a:a + rows] *= np.float32(std * math.sqrt(3.0) / (1 << 23))
                a += rows
            if a != s.shape[0]:
                raise SynthError(f"{s.name}: row_stds cover {a} of {s.shape[0]} rows")
            w = m
        else:
            w = _uniform(seed, s.name, n, s.std * math.sqrt(3.0))
        out[s.name] = _round_to_dtype(w.reshape(s.shape), c.dtype)
    return out
