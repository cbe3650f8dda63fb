"""Shared constants, the error type and the validated model Config."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

ARCHES = ("llama", "qwen2", "mistral", "qwen3", "qwen3moe", "mixtral", "phi3", "gemma2",
          "gemma3")
# Architectures with a QK-norm: a per-head RMSNorm of q and k (weights
# self_attn.q_norm / k_norm, [head_dim], shared by all heads) before RoPE
# (gemma3: Gemma's norm, weight used as 1 + w).
QK_NORM_ARCHES = ("qwen3", "qwen3moe", "gemma3")
# Gemma 2 / 3: embeddings scaled by sqrt(hidden); every RMSNorm computes with
# (1 + w), its weight stored zero-centred in HF (the GGUF stores 1 + w); four
# norms per layer (input, post_attention, pre_feedforward, post_feedforward);
# GeGLU (gelu tanh) MLP; scores scaled by query_pre_attn_scalar^-0.5; sliding
# windows on some layers (gemma2: even layers; gemma3: all but every
# sliding_window_pattern-th); gemma2 soft-caps the attention scores and the
# logits; gemma3 has QK-norm, and its sliding layers their own RoPE base.
GEMMA_ARCHES = ("gemma2", "gemma3")
# Architectures whose projections are fused (Phi-3): self_attn.qkv_proj
# (Q rows, then K, then V) and mlp.gate_up_proj (gate rows, then up).
FUSED_ARCHES = ("phi3",)
# Architectures that may have a sliding window (--sliding-window).
WINDOW_ARCHES = ("mistral", "mixtral", "phi3", "gemma2", "gemma3")
# Defaults of the Gemma options: a small window, so that tests of a few dozen
# tokens exercise it; gemma2's soft-caps and gemma3's layer pattern and RoPE
# bases are those of the real checkpoints.
GEMMA_DEFAULTS = {"sliding_window": 8, "attn_softcap": 50.0, "final_softcap": 30.0,
                  "sliding_window_pattern": 6, "rope_local_theta": 10000.0,
                  "gemma3_rope_theta": 1000000.0}
# llama.cpp's gemma2 / gemma3 scale the scores by 1/sqrt(head_dim), except for
# the 27B models (recognised by their layer count), where it uses
# 1/sqrt(hidden / heads) (integer division): llama_model_gemma2/3::load_arch_hparams.
LLAMA_CPP_27B_LAYERS = {"gemma2": 46, "gemma3": 62}
# Mixture-of-experts architectures: every layer's MLP is a sparse MoE block
# (a router [experts, hidden], then experts_per_tok SwiGLU experts per token).
#   qwen3moe: HF Qwen3MoeSparseMoeBlock (mlp.gate, mlp.experts.M.{gate,up,down}_proj),
#             experts moe_intermediate wide, norm_topk_prob as configured;
#   mixtral:  HF MixtralSparseMoeBlock (block_sparse_moe.gate,
#             block_sparse_moe.experts.M.{w1,w3,w2}), experts intermediate wide,
#             top-k weights always renormalized.
MOE_ARCHES = ("qwen3moe", "mixtral")
# Defaults of the MoE options (small: tests build models of a few layers; the
# expert width differs from the default hidden 64, so that a transposed expert
# matrix cannot go unnoticed).
MOE_DEFAULTS = {"experts": 8, "experts_per_tok": 2, "moe_intermediate": 96}
# HF model_type where it is not the arch name.
HF_MODEL_TYPES = {"qwen3moe": "qwen3_moe", "gemma3": "gemma3_text"}
HF_DTYPES = {"f32": ("F32", "float32"), "f16": ("F16", "float16"),
             "bf16": ("BF16", "bfloat16")}
GGUF_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k",
              "q4_k", "q5_k", "q6_k")
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
BOS_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
TRANSFORMERS_VERSION = "4.46.0"  # written into config.json for realism only
# The first transformers release that knows an architecture, where newer than
# TRANSFORMERS_VERSION (a config.json claiming an older one would be odd).
# gemma3: 4.53.0 writes both sliding_window_pattern and layer_types, as here.
_FIRST_TRANSFORMERS = {"qwen3": "4.51.0", "qwen3moe": "4.51.0", "gemma3": "4.53.0"}


def transformers_version(arch: str) -> str:
    """The transformers_version written into config.json for arch."""
    return _FIRST_TRANSFORMERS.get(arch, TRANSFORMERS_VERSION)


class SynthError(Exception):
    """A bad option or an unsupported combination; the message says which."""


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------

@dataclasses.dataclass
class Config:
    arch: str = "llama"
    vocab: int = 300
    hidden: int = 64
    intermediate: int = 160
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int | None = None          # None: hidden // heads
    tie_embeddings: bool = True
    qkv_bias: bool | None = None          # None: True for qwen2, else False
    rope_theta: float | None = None       # None: 10000 (gemma3: 1e6, its global layers')
    rope_scaling: dict | None = None      # None | {"rope_type": "linear"|"llama3", ...}
    dtype: str = "f32"                    # HF tensor dtype: f32 | f16 | bf16
    max_position: int = 512
    # mistral, mixtral, phi3 (every layer; default none); gemma2, gemma3 (their
    # sliding layers; default GEMMA_DEFAULTS' 8).
    sliding_window: int | None = None
    rms_norm_eps: float = 1e-5
    # Multiplies the spread of q_proj and k_proj (not written to any config:
    # the weights carry it). Attention scores grow by its square, so a gain
    # of a few gives the peaked attention of trained models, whose row maxima
    # jump far between key tiles (what lazy softmax rescaling must handle).
    # With QK-norm (qwen3) the norm would cancel a gain on the projections, so
    # the gain scales the q_norm and k_norm weights instead.
    qk_gain: float = 1.0
    # Mixture of experts (MOE_ARCHES only; None on the others, and filled in
    # with MOE_DEFAULTS on MoE arches).
    experts: int | None = None            # E: experts per layer
    experts_per_tok: int | None = None    # k: experts each token is routed to
    moe_intermediate: int | None = None   # qwen3moe: expert width (mixtral: intermediate)
    # qwen3moe: renormalize the k routing weights to sum 1 (default True);
    # mixtral always does (True, and False is rejected).
    norm_topk_prob: bool | None = None
    # Gemma (GEMMA_ARCHES only; None on the others, filled in from
    # GEMMA_DEFAULTS on Gemma arches).
    # gemma3: layer i is global iff (i + 1) % sliding_window_pattern == 0.
    sliding_window_pattern: int | None = None
    rope_local_theta: float | None = None       # gemma3: the sliding layers' RoPE base
    attn_softcap: float | None = None           # gemma2: attn_logit_softcapping
    final_softcap: float | None = None          # gemma2 (required), gemma3 (optional)
    # gemma2, gemma3: scores * query_pre_attn_scalar^-0.5 (default: what
    # llama.cpp uses, see llama_cpp_attn_scalar: head_dim for all but 27B shapes).
    query_pre_attn_scalar: float | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def gemma(self) -> bool:
        """Whether this is a Gemma 2 / 3 model (see GEMMA_ARCHES)."""
        return self.arch in GEMMA_ARCHES

    @property
    def fused_proj(self) -> bool:
        """Whether q/k/v and gate/up are fused tensors (Phi-3)."""
        return self.arch in FUSED_ARCHES

    @property
    def layer_windows(self) -> list:
        """Per layer: its sliding window (int) or None (global attention).
        gemma2: even layers slide (HF: not layer_idx % 2); gemma3: layer i is
        global iff (i + 1) % sliding_window_pattern == 0; mistral, mixtral,
        phi3: every layer has the window, if any."""
        w = self.sliding_window
        if self.arch == "gemma2":
            return [w if i % 2 == 0 else None for i in range(self.layers)]
        if self.arch == "gemma3":
            n = self.sliding_window_pattern
            return [None if (i + 1) % n == 0 else w for i in range(self.layers)]
        return [w] * self.layers

    @property
    def layer_rope_thetas(self) -> list:
        """Per layer: the RoPE base (gemma3's sliding layers: rope_local_theta,
        unscaled; the others rope_theta with rope_scaling)."""
        if self.arch != "gemma3":
            return [self.rope_theta] * self.layers
        return [self.rope_local_theta if w else self.rope_theta for w in self.layer_windows]

    @property
    def qk_norm(self) -> bool:
        """Whether q and k get a per-head RMSNorm before RoPE (Qwen3, Gemma 3)."""
        return self.arch in QK_NORM_ARCHES

    @property
    def moe(self) -> bool:
        """Whether every layer's MLP is a sparse mixture of experts."""
        return self.arch in MOE_ARCHES

    @property
    def expert_intermediate(self) -> int | None:
        """The width of each expert (qwen3moe: moe_intermediate; mixtral:
        intermediate); None for dense arches."""
        if not self.moe:
            return None
        return self.moe_intermediate if self.arch == "qwen3moe" else self.intermediate

    @property
    def hf_model_type(self) -> str:
        """config.json's model_type (qwen3moe: qwen3_moe)."""
        return HF_MODEL_TYPES.get(self.arch, self.arch)


def make_config(cfg: Config | dict | None = None, **overrides: Any) -> Config:
    """Returns a validated Config with defaults filled in (a new object).

    Accepts a Config, a dict of Config fields, or keyword fields.
    """
    if cfg is None:
        fields: dict = {}
    elif isinstance(cfg, Config):
        fields = cfg.to_dict()
    elif isinstance(cfg, dict):
        fields = dict(cfg)
    else:
        raise SynthError(f"config must be a Config or a dict, not {type(cfg).__name__}")
    fields.update(overrides)
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise SynthError(f"unknown config field(s): {', '.join(unknown)}")
    c = Config(**fields)
    if isinstance(c.rope_scaling, str):
        c.rope_scaling = parse_rope_scaling(c.rope_scaling)
    if c.arch not in ARCHES:
        raise SynthError(f"arch: {c.arch!r} is not one of {', '.join(ARCHES)}")
    for name in ("vocab", "hidden", "intermediate", "layers", "heads", "kv_heads",
                 "max_position"):
        v = getattr(c, name)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise SynthError(f"{name}: must be a positive integer, got {v!r}")
    min_vocab = 256 + len(SPECIAL_TOKENS)
    if c.vocab < min_vocab:
        raise SynthError(f"vocab: {c.vocab} is below {min_vocab} "
                         "(256 byte tokens + 3 special tokens)")
    if c.heads % c.kv_heads:
        raise SynthError(f"kv_heads: {c.kv_heads} does not divide heads {c.heads}")
    if c.head_dim is None:
        if c.hidden % c.heads:
            raise SynthError(f"head_dim: not given and hidden {c.hidden} is not a "
                             f"multiple of heads {c.heads}")
        c.head_dim = c.hidden // c.heads
    if c.head_dim <= 0 or c.head_dim % 2:
        raise SynthError(f"head_dim: must be positive and even (RoPE), got {c.head_dim}")
    if c.qkv_bias is None:
        c.qkv_bias = c.arch == "qwen2"
    if c.arch == "qwen2" and not c.qkv_bias:
        raise SynthError("qkv_bias: Qwen2 always has q/k/v biases (HF Qwen2Attention "
                         "hard-codes bias=True); use --arch llama for a bias-free model")
    if c.arch == "mistral" and c.qkv_bias:
        raise SynthError("qkv_bias: HF Mistral has no attention biases; "
                         "use --arch llama (attention_bias) or qwen2")
    if c.arch in ("qwen3", "qwen3moe") and c.qkv_bias:
        # Not supported rather than half-supported: HF Qwen3's attention_bias
        # also biases o_proj, and llama.cpp's qwen3 loads no attention biases.
        raise SynthError(f"qkv_bias: {c.arch} here has no attention biases (HF Qwen3's "
                         "attention_bias would also bias o_proj, and llama.cpp's qwen3 "
                         "loads none); use --arch qwen2 or llama (attention_bias)")
    if c.arch == "mixtral" and c.qkv_bias:
        raise SynthError("qkv_bias: HF Mixtral has no attention biases; "
                         "use --arch llama (attention_bias) or qwen2")
    if c.arch in FUSED_ARCHES + GEMMA_ARCHES and c.qkv_bias:
        why = ("HF Phi3's projections have none" if c.arch == "phi3" else
               "HF Gemma's attention_bias would also bias o_proj")
        raise SynthError(f"qkv_bias: {c.arch} has no attention biases here ({why}, and "
                         f"llama.cpp's {c.arch} loads none)")
    if c.arch == "phi3" and c.heads * c.head_dim != c.hidden:
        raise SynthError(f"head_dim: phi3 needs heads * head_dim == hidden ({c.heads} * "
                         f"{c.head_dim} != {c.hidden}): HF Phi3 derives head_dim as "
                         "hidden/heads, and llama.cpp's phi3 makes Q and attn_output "
                         "hidden wide")
    _check_moe(c)
    _check_gemma(c)
    if c.sliding_window is not None:
        if c.arch not in WINDOW_ARCHES:
            raise SynthError(f"sliding_window: only --arch {', '.join(WINDOW_ARCHES)} have "
                             "a sliding window here")
        if (not isinstance(c.sliding_window, (int, np.integer))
                or isinstance(c.sliding_window, bool) or c.sliding_window <= 0):
            raise SynthError(f"sliding_window: must be a positive integer, got "
                             f"{c.sliding_window!r}")
        c.sliding_window = int(c.sliding_window)
    if c.dtype not in HF_DTYPES:
        raise SynthError(f"dtype: {c.dtype!r} is not one of {', '.join(HF_DTYPES)}")
    if c.rope_theta is None:
        c.rope_theta = GEMMA_DEFAULTS["gemma3_rope_theta"] if c.arch == "gemma3" else 10000.0
    if not c.rope_theta > 0:
        raise SynthError(f"rope_theta: must be positive, got {c.rope_theta}")
    c.rope_theta = float(c.rope_theta)
    if not 0 < c.qk_gain < math.inf:
        raise SynthError(f"qk_gain: must be positive and finite, got {c.qk_gain}")
    c.qk_gain = float(c.qk_gain)
    c.rms_norm_eps = float(c.rms_norm_eps)
    _check_rope_scaling(c.rope_scaling)
    if c.rope_scaling and c.arch in ("phi3", "gemma2"):
        why = "HF Phi3 knows only longrope" if c.arch == "phi3" else "HF Gemma2 has none"
        raise SynthError(f"rope_scaling (--rope-scaling): {c.arch} has no RoPE scaling here "
                         f"({why})")
    if c.rope_scaling and c.arch == "gemma3" and c.rope_scaling["rope_type"] != "linear":
        raise SynthError("rope_scaling (--rope-scaling): gemma3 takes none or linear:F "
                         "(scaling its global layers, as HF Gemma3 and llama.cpp do)")
    return c


def llama_cpp_attn_scalar(c: Config) -> float:
    """The query_pre_attn_scalar llama.cpp's gemma2 / gemma3 use (they read no
    key for it): head_dim, except hidden // heads for the 27B models, which
    llama.cpp recognises by their layer count (46 / 62)."""
    if c.layers == LLAMA_CPP_27B_LAYERS.get(c.arch):
        return float(c.hidden // c.heads)
    return float(c.head_dim)


def _check_gemma(c: Config) -> None:
    """Validates the Gemma fields in place: fills the defaults on gemma2 /
    gemma3, rejects them where they do not apply. Messages name the field
    and its CLI option."""
    opts = {"sliding_window_pattern": ("--sliding-window-pattern", ("gemma3",)),
            "rope_local_theta": ("--rope-local-theta", ("gemma3",)),
            "attn_softcap": ("--attn-softcap", ("gemma2",)),
            "final_softcap": ("--final-softcap", GEMMA_ARCHES),
            "query_pre_attn_scalar": ("--query-pre-attn-scalar", GEMMA_ARCHES)}
    for f, (opt, arches) in opts.items():
        if getattr(c, f) is not None and c.arch not in arches:
            why = (" (llama.cpp's gemma3 has no attention soft-capping, and "
                   "convert_hf_to_gguf.py asserts it is null)"
                   if f == "attn_softcap" and c.arch == "gemma3" else "")
            raise SynthError(f"{f} ({opt}): only --arch {' / '.join(arches)}, not "
                             f"{c.arch}{why}")
    if not c.gemma:
        return
    if c.sliding_window is None:
        c.sliding_window = GEMMA_DEFAULTS["sliding_window"]
    if c.arch == "gemma2":
        for f in ("attn_softcap", "final_softcap"):
            if getattr(c, f) is None:
                setattr(c, f, GEMMA_DEFAULTS[f])
    else:
        if c.sliding_window_pattern is None:
            c.sliding_window_pattern = GEMMA_DEFAULTS["sliding_window_pattern"]
        if c.rope_local_theta is None:
            c.rope_local_theta = GEMMA_DEFAULTS["rope_local_theta"]
        v = c.sliding_window_pattern
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise SynthError(f"sliding_window_pattern (--sliding-window-pattern): must be "
                             f"a positive integer, got {v!r}")
        c.sliding_window_pattern = int(v)
        if not 0 < c.rope_local_theta < math.inf:
            raise SynthError(f"rope_local_theta (--rope-local-theta): must be positive, got "
                             f"{c.rope_local_theta}")
        c.rope_local_theta = float(c.rope_local_theta)
    if c.query_pre_attn_scalar is None:
        c.query_pre_attn_scalar = llama_cpp_attn_scalar(c)
    for f, opt in (("attn_softcap", "--attn-softcap"), ("final_softcap", "--final-softcap"),
                   ("query_pre_attn_scalar", "--query-pre-attn-scalar")):
        v = getattr(c, f)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not 0 < v < math.inf:
            raise SynthError(f"{f} ({opt}): must be positive and finite, got {v!r}")
        setattr(c, f, float(v))


def _check_moe(c: Config) -> None:
    """Validates the MoE fields in place: fills the defaults on MoE arches,
    rejects them on the others. Messages name the field and its CLI option."""
    opts = {"experts": "--experts", "experts_per_tok": "--experts-per-tok",
            "moe_intermediate": "--moe-intermediate",
            "norm_topk_prob": "--norm-topk-prob/--no-norm-topk-prob"}
    if not c.moe:
        for f, opt in opts.items():
            if getattr(c, f) is not None:
                raise SynthError(f"{f} ({opt}): only the mixture-of-experts arches "
                                 f"({', '.join(MOE_ARCHES)}) have experts, not {c.arch}")
        return
    if c.arch == "mixtral":
        if c.moe_intermediate is not None:
            raise SynthError("moe_intermediate (--moe-intermediate): mixtral's experts are "
                             "intermediate wide (HF MixtralConfig has no "
                             "moe_intermediate_size); use --intermediate")
        if c.norm_topk_prob is False:
            raise SynthError("norm_topk_prob (--no-norm-topk-prob): HF Mixtral always "
                             "renormalizes the top-k routing weights; only qwen3moe can "
                             "turn that off")
        c.norm_topk_prob = True
    else:
        if c.moe_intermediate is None:
            c.moe_intermediate = MOE_DEFAULTS["moe_intermediate"]
        if c.norm_topk_prob is None:
            c.norm_topk_prob = True
    if c.experts is None:
        c.experts = MOE_DEFAULTS["experts"]
    if c.experts_per_tok is None:
        c.experts_per_tok = MOE_DEFAULTS["experts_per_tok"]
    for f in ("experts", "experts_per_tok", "moe_intermediate"):
        v = getattr(c, f)
        if v is None and f == "moe_intermediate":
            continue
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise SynthError(f"{f} ({opts[f]}): must be a positive integer, got {v!r}")
        setattr(c, f, int(v))
    if c.experts_per_tok > c.experts:
        raise SynthError(f"experts_per_tok (--experts-per-tok): {c.experts_per_tok} is more "
                         f"than the {c.experts} experts (--experts)")
    if not isinstance(c.norm_topk_prob, (bool, np.bool_)):
        raise SynthError(f"norm_topk_prob (--norm-topk-prob): must be true or false, "
                         f"got {c.norm_topk_prob!r}")
    c.norm_topk_prob = bool(c.norm_topk_prob)


def parse_rope_scaling(text: str | None) -> dict | None:
    """'none' | 'linear:F' | 'llama3:F,low,high,orig' -> HF rope_scaling dict."""
    if text is None or text == "none":
        return None
    kind, _, args = text.partition(":")
    try:
        vals = [float(x) for x in args.split(",")] if args else []
    except ValueError:
        raise SynthError(f"rope-scaling: cannot parse numbers in {text!r}") from None
    if kind == "linear" and len(vals) == 1:
        return {"factor": vals[0], "rope_type": "linear"}
    if kind == "llama3" and len(vals) == 4:
        if vals[3] != int(vals[3]):
            raise SynthError("rope-scaling: llama3 original context must be an integer")
        return {"factor": vals[0], "low_freq_factor": vals[1],
                "high_freq_factor": vals[2],
                "original_max_position_embeddings": int(vals[3]),
                "rope_type": "llama3"}
    raise SynthError(f"rope-scaling: {text!r} is not none, linear:F or "
                     "llama3:F,low,high,orig")


def _check_rope_scaling(rs: dict | None) -> None:
    if rs is None:
        return
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        if not rs.get("factor", 0) > 0:
            raise SynthError("rope_scaling: linear needs factor > 0")
    elif kind == "llama3":
        need = ("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings")
        missing = [k for k in need if k not in rs]
        if missing:
            raise SynthError(f"rope_scaling: llama3 lacks {', '.join(missing)}")
        if not rs["high_freq_factor"] > rs["low_freq_factor"]:
            raise SynthError("rope_scaling: llama3 needs high_freq_factor > low_freq_factor")
        if not rs["factor"] > 0:
            raise SynthError("rope_scaling: llama3 needs factor > 0")
    else:
        raise SynthError(f"rope_scaling: type {kind!r} is not linear or llama3")
