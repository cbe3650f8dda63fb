#!/usr/bin/env python3
"""Seeded synthetic transformer LMs as Hugging Face folders and GGUF files.

A test tool: every output is a pure function of (shape, seed, output options),
so the same command writes byte-identical files. See README.md beside this file
for the weight scheme, the vocabulary and the exact layout of both formats.

Module API (for other test scripts):
    cfg = make_config(arch="qwen2", vocab=300, ...)   # validated Config
    make_weights(cfg, seed) -> {HF name: float32 array in HF layout}
    write_hf(path, cfg, seed, shards=1)
    write_gguf(path, cfg, seed, gguf_type="f32")
    gguf_from_hf(hf_dir, path, gguf_type="f32")
    read_hf_weights(hf_dir) -> {HF name: float32 array}   (no `safetensors` needed)
    read_hf_config(hf_dir) -> Config
    dequantized_weights(cfg, seed, gguf_type) -> weights as a GGUF of that
        type holds them after dequantization, in HF names and HF layout
    build_vocab(cfg.vocab) -> Vocab (tokens, merges, special ids, encode())
    permute_qk(w, n_head, n_head_kv) / unpermute_qk(...)   (llama.cpp's permute)

Needs numpy; GGUF output also needs the PyPI `gguf` package (imported lazily).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import heapq
import json
import math
import os
import re
import sys
import tempfile
from typing import Any, Iterable

import numpy as np

ARCHES = ("llama", "qwen2", "mistral")
HF_DTYPES = {"f32": ("F32", "float32"), "f16": ("F16", "float16"),
             "bf16": ("BF16", "bfloat16")}
GGUF_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k")
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
BOS_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# The pattern of GPT-2's pre-tokenizer (what HF's ByteLevel(use_regex=true) and
# llama.cpp's "gpt-2" pre-tokenizer use).
GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")
# The same pattern for ASCII text, usable with Python's `re` (no \p classes).
_GPT2_PATTERN_ASCII = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+"""
    r"""|\s+(?!\S)|\s+""")
TRANSFORMERS_VERSION = "4.46.0"  # written into config.json for realism only


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
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None      # None | {"rope_type": "linear"|"llama3", ...}
    dtype: str = "f32"                    # HF tensor dtype: f32 | f16 | bf16
    max_position: int = 512
    sliding_window: int | None = None     # mistral only
    rms_norm_eps: float = 1e-5

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


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
    if c.sliding_window is not None:
        if c.arch != "mistral":
            raise SynthError("sliding_window: only --arch mistral has a sliding window here")
        if c.sliding_window <= 0:
            raise SynthError(f"sliding_window: must be positive, got {c.sliding_window}")
    if c.dtype not in HF_DTYPES:
        raise SynthError(f"dtype: {c.dtype!r} is not one of {', '.join(HF_DTYPES)}")
    if not c.rope_theta > 0:
        raise SynthError(f"rope_theta: must be positive, got {c.rope_theta}")
    c.rope_theta = float(c.rope_theta)
    c.rms_norm_eps = float(c.rms_norm_eps)
    _check_rope_scaling(c.rope_scaling)
    return c


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


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str                 # HF name
    shape: tuple[int, ...]    # HF layout: [out, in] for projections
    init: str                 # "uniform" | "norm" | "zero"
    std: float                # standard deviation (uniform) / spread (norm)


def tensor_specs(cfg: Config) -> list[TensorSpec]:
    """The model's tensors in HF names and layout, in model order."""
    c = make_config(cfg)
    H, I, V, D = c.hidden, c.intermediate, c.vocab, c.head_dim
    q, kv = c.heads * D, c.kv_heads * D
    specs = [TensorSpec("model.embed_tokens.weight", (V, H), "uniform", 1.0)]
    for i in range(c.layers):
        p = f"model.layers.{i}."
        specs.append(TensorSpec(p + "input_layernorm.weight", (H,), "norm", 0.1))
        specs.append(TensorSpec(p + "self_attn.q_proj.weight", (q, H), "uniform", H ** -0.5))
        if c.qkv_bias:
            specs.append(TensorSpec(p + "self_attn.q_proj.bias", (q,), "uniform", 0.1))
        specs.append(TensorSpec(p + "self_attn.k_proj.weight", (kv, H), "uniform", H ** -0.5))
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
        specs.append(TensorSpec(p + "post_attention_layernorm.weight", (H,), "norm", 0.1))
        specs.append(TensorSpec(p + "mlp.gate_proj.weight", (I, H), "uniform", H ** -0.5))
        specs.append(TensorSpec(p + "mlp.up_proj.weight", (I, H), "uniform", H ** -0.5))
        specs.append(TensorSpec(p + "mlp.down_proj.weight", (H, I), "uniform", I ** -0.5))
    specs.append(TensorSpec("model.norm.weight", (H,), "norm", 0.1))
    if not c.tie_embeddings:
        specs.append(TensorSpec("lm_head.weight", (V, H), "uniform", H ** -0.5))
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
    1 + uniform(-0.1, 0.1); zero tensors are zero.
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
            w = _uniform(seed, s.name, n, s.std, center=1.0)
        else:
            w = _uniform(seed, s.name, n, s.std * math.sqrt(3.0))
        out[s.name] = _round_to_dtype(w.reshape(s.shape), c.dtype)
    return out


# --------------------------------------------------------------------------
# Vocabulary: byte-level BPE trained on a small built-in text
# --------------------------------------------------------------------------

# Written for this tool. ASCII only, so the ASCII form of the GPT-2 pattern
# splits it exactly as the real one does.
BUILTIN_TEXT = """\
The little town sat at the edge of a wide river, and every morning the people
of the town walked down to the water to see what the night had brought. Some
days there was nothing but mist and the slow sound of the current. Other days
there were boats, and the boats carried bread, salt, iron, paper and news from
the cities in the north. The children liked the news best, because the news
came with stories, and the stories were always longer than the news itself.

A compiler is a program that reads a program and writes another one. It turns
the words that a person can read into the instructions that a machine can run.
A good compiler checks what it reads, says clearly what is wrong, and makes the
result fast without changing what it means. The first part of a compiler reads
the text and builds a tree; the middle part rewrites the tree into simpler and
simpler forms; the last part chooses the instructions, the registers and the
memory for every value. Each part can be tested on its own, and each test
should be small, quick and repeatable.

When the weather turned cold in the autumn, the river became quiet. The boats
stopped coming, the market closed early, and the people stayed inside with
their books, their lamps and their long conversations about the year that had
passed. They talked about the harvest, the prices, the new bridge that was
still not finished, and the old teacher who had finally decided to retire after
forty years of teaching the same songs to three generations of children.

Numbers are words too: one, two, three, four, five, six, seven, eight, nine and
ten; 1, 2, 3, 4, 5, 6, 7, 8, 9 and 10; 12, 24, 48, 96, 128, 256, 512, 1024 and
2048. A model that reads text must learn that 2 + 2 = 4, that a list can be
written as [a, b, c], that a question ends with "?", and that a story often
begins with "Once upon a time". It must also learn where one word ends and the
next one starts, which is harder than it looks in many languages.

In the spring the ice broke, the water rose, and the first boat of the year
came around the bend with its flags up and its crew singing. Everyone in the
town ran to the river. The captain stepped onto the stones, raised his hand,
and said: "We have letters, seeds, tools, and a new teacher for the school."
The children cheered, the dogs barked, and the old teacher smiled, because he
knew that the songs would go on without him.
"""

_WORD_SEP = re.compile(r"[^A-Za-z]+")


@functools.lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
          + list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _pretokenize(text: str) -> list[str]:
    try:
        import regex  # the real pattern where available
        return regex.findall(GPT2_PATTERN, text)
    except ImportError:
        if not text.isascii():
            raise SynthError("pre-tokenizing non-ASCII text needs the `regex` module")
        return _GPT2_PATTERN_ASCII.findall(text)


@functools.lru_cache(maxsize=1)
def _all_merges() -> tuple[tuple[str, str], ...]:
    """Every BPE merge the built-in text yields, in order (deterministic).

    Classic BPE over pre-tokenized words: repeatedly merge the most frequent
    adjacent pair; ties go to the lexicographically smallest pair. Merges are
    prefix-stable, so a smaller vocabulary takes the first merges of this list.
    """
    assert BUILTIN_TEXT.isascii()
    b2u = bytes_to_unicode()
    counts: dict[str, int] = {}
    for w in _GPT2_PATTERN_ASCII.findall(BUILTIN_TEXT):
        counts[w] = counts.get(w, 0) + 1
    words = [[b2u[b] for b in w.encode()] for w in sorted(counts)]
    freqs = [counts[w] for w in sorted(counts)]
    pair_count: dict[tuple[str, str], int] = {}
    where: dict[tuple[str, str], set[int]] = {}

    def add_word(i: int, sign: int) -> None:
        sym = words[i]
        for a, b in zip(sym, sym[1:]):
            p = (a, b)
            pair_count[p] = pair_count.get(p, 0) + sign * freqs[i]
            if sign > 0:
                where.setdefault(p, set()).add(i)

    for i in range(len(words)):
        add_word(i, 1)
    heap = [(-n, p) for p, n in pair_count.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while heap:
        neg, p = heapq.heappop(heap)
        if pair_count.get(p, 0) != -neg or -neg <= 0:
            continue  # stale entry
        merges.append(p)
        a, b = p
        touched = set()
        for i in sorted(where.get(p, ())):
            sym = words[i]
            if not any(x == a and y == b for x, y in zip(sym, sym[1:])):
                continue
            touched.update(zip(sym, sym[1:]))
            add_word(i, -1)
            new, j = [], 0
            while j < len(sym):
                if j + 1 < len(sym) and sym[j] == a and sym[j + 1] == b:
                    new.append(a + b)
                    j += 2
                else:
                    new.append(sym[j])
                    j += 1
            words[i] = new
            add_word(i, 1)
            touched.update(zip(new, new[1:]))
        touched.add(p)
        for q in touched:
            n = pair_count.get(q, 0)
            if n > 0:
                heapq.heappush(heap, (-n, q))
    return tuple(merges)


@dataclasses.dataclass
class Vocab:
    tokens: list[str]                 # id -> token text (GPT-2 byte-level form)
    token_types: list[int]            # GGUF: 1 normal, 3 control
    merges: list[str]                 # "a b", by rank
    special: dict[str, int]           # special token text -> id
    bos_id: int
    eos_id: int
    pad_id: int
    n_reserved: int = 0               # <|reserved_N|> fillers (vocab > merges)

    def encode(self, text: str) -> list[int]:
        """Reference byte-level BPE encoding (no special-token parsing)."""
        b2u = bytes_to_unicode()
        ranks = {tuple(m.split(" ")): r for r, m in enumerate(self.merges)}
        ids = {t: i for i, t in enumerate(self.tokens)}
        out = []
        for piece in _pretokenize(text):
            sym = [b2u[b] for b in piece.encode()]
            while len(sym) > 1:
                best = min(range(len(sym) - 1),
                           key=lambda j: ranks.get((sym[j], sym[j + 1]), math.inf))
                if (sym[best], sym[best + 1]) not in ranks:
                    break
                a, b = sym[best], sym[best + 1]
                new, j = [], 0
                while j < len(sym):
                    if j + 1 < len(sym) and sym[j] == a and sym[j + 1] == b:
                        new.append(a + b)
                        j += 2
                    else:
                        new.append(sym[j])
                        j += 1
                sym = new
            out.extend(ids[s] for s in sym)
        return out

    def decode(self, ids: Iterable[int]) -> str:
        u2b = {u: b for b, u in bytes_to_unicode().items()}
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.token_types[i] == 3:
                out += t.encode()
            else:
                out += bytes(u2b[ch] for ch in t)
        return out.decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=16)
def _build_vocab_cached(size: int) -> Vocab:
    n_special = len(SPECIAL_TOKENS)
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    seen = set(tokens)
    merges: list[str] = []
    want = size - n_special
    for a, b in _all_merges():
        if len(tokens) >= want:
            break
        merges.append(f"{a} {b}")
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    types = [1] * len(tokens)
    n_reserved = 0
    while len(tokens) < want:
        tokens.append(f"<|reserved_{n_reserved}|>")
        types.append(3)
        n_reserved += 1
    special = {}
    for t in SPECIAL_TOKENS:
        special[t] = len(tokens)
        tokens.append(t)
        types.append(3)
    return Vocab(tokens, types, merges, special, special[BOS_TOKEN], special[EOS_TOKEN],
                 special[PAD_TOKEN], n_reserved)


def build_vocab(size: int) -> Vocab:
    """The deterministic vocabulary of `size` tokens: 256 byte tokens (ids
    0..255 in byte order), the merged tokens of the built-in text, filler
    <|reserved_N|> control tokens if the text runs out of merges, then
    <|endoftext|>, <|im_start|>, <|im_end|> as the last three ids."""
    if size < 256 + len(SPECIAL_TOKENS):
        raise SynthError(f"vocab: {size} is below {256 + len(SPECIAL_TOKENS)}")
    v = _build_vocab_cached(int(size))
    return dataclasses.replace(v, tokens=list(v.tokens), token_types=list(v.token_types),
                               merges=list(v.merges), special=dict(v.special))


def max_merge_vocab() -> int:
    """The largest vocab size that needs no <|reserved_N|> filler."""
    return len(set(a + b for a, b in _all_merges())) + 256 + len(SPECIAL_TOKENS)


def tokenizer_json(v: Vocab) -> dict:
    model_vocab = {}
    added = []
    for i, t in enumerate(v.tokens):
        if v.token_types[i] == 3:
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
        else:
            model_vocab[t] = i
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": dict(byte_level),
        "post_processor": dict(byte_level, trim_offsets=False),
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": model_vocab, "merges": list(v.merges)},
    }


def vocab_from_tokenizer_files(folder: str) -> tuple[Vocab, str | None]:
    """Reads tokenizer.json (+ tokenizer_config.json) back into a Vocab."""
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    model = tj.get("model", {})
    if model.get("type") != "BPE":
        raise SynthError(f"{folder}/tokenizer.json: model.type is not BPE")
    by_id: dict[int, tuple[str, int]] = {i: (t, 1) for t, i in model["vocab"].items()}
    for a in tj.get("added_tokens", []):
        by_id[a["id"]] = (a["content"], 3 if a.get("special") else 4)
    n = len(by_id)
    if sorted(by_id) != list(range(n)):
        raise SynthError(f"{folder}/tokenizer.json: token ids are not 0..{n - 1}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    tokens = [by_id[i][0] for i in range(n)]
    types = [by_id[i][1] for i in range(n)]
    tc_path = os.path.join(folder, "tokenizer_config.json")
    tc = {}
    if os.path.exists(tc_path):
        with open(tc_path, encoding="utf-8") as f:
            tc = json.load(f)
    ids = {t: i for i, t in enumerate(tokens)}

    def tok_id(key: str, default: str) -> int:
        t = tc.get(key, default)
        if isinstance(t, dict):
            t = t.get("content")
        return ids[t]

    special = {t: i for i, t in enumerate(tokens) if types[i] == 3}
    v = Vocab(tokens, types, merges, special, tok_id("bos_token", BOS_TOKEN),
              tok_id("eos_token", EOS_TOKEN), tok_id("pad_token", PAD_TOKEN),
              sum(1 for t in tokens if t.startswith("<|reserved_")))
    return v, tc.get("chat_template")


# --------------------------------------------------------------------------
# Hugging Face folder
# --------------------------------------------------------------------------

def hf_config_json(cfg: Config) -> dict:
    c = make_config(cfg)
    v = build_vocab(c.vocab)
    arch_name = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "mistral": "MistralForCausalLM"}[c.arch]
    d: dict[str, Any] = {"architectures": [arch_name]}
    if c.arch in ("llama", "qwen2"):
        d["attention_bias"] = bool(c.qkv_bias)
    d["attention_dropout"] = 0.0
    d["bos_token_id"] = v.bos_id
    d["eos_token_id"] = v.eos_id
    d["head_dim"] = c.head_dim
    d["hidden_act"] = "silu"
    d["hidden_size"] = c.hidden
    d["initializer_range"] = 0.02
    d["intermediate_size"] = c.intermediate
    d["max_position_embeddings"] = c.max_position
    if c.arch == "qwen2":
        d["max_window_layers"] = c.layers
    if c.arch == "llama":
        d["mlp_bias"] = False
    d["model_type"] = c.arch
    d["num_attention_heads"] = c.heads
    d["num_hidden_layers"] = c.layers
    d["num_key_value_heads"] = c.kv_heads
    if c.arch == "llama":
        d["pretraining_tp"] = 1
    d["rms_norm_eps"] = c.rms_norm_eps
    d["rope_scaling"] = dict(c.rope_scaling) if c.rope_scaling else None
    d["rope_theta"] = c.rope_theta
    if c.arch == "mistral":
        d["sliding_window"] = c.sliding_window
    if c.arch == "qwen2":
        # Real Qwen2 configs carry a window that use_sliding_window turns off.
        d["sliding_window"] = c.max_position
    d["tie_word_embeddings"] = bool(c.tie_embeddings)
    d["torch_dtype"] = HF_DTYPES[c.dtype][1]
    d["transformers_version"] = TRANSFORMERS_VERSION
    d["use_cache"] = True
    if c.arch == "qwen2":
        d["use_sliding_window"] = False
    d["vocab_size"] = c.vocab
    return d


def config_from_hf_json(d: dict) -> Config:
    """The Config a config.json written by this tool came from."""
    arch = d.get("model_type")
    if arch not in ARCHES:
        raise SynthError(f"config.json: model_type {arch!r} is not one of {', '.join(ARCHES)}")
    dtype = {v[1]: k for k, v in HF_DTYPES.items()}.get(d.get("torch_dtype", "float32"))
    if dtype is None:
        raise SynthError(f"config.json: torch_dtype {d.get('torch_dtype')!r} unsupported")
    rs = d.get("rope_scaling")
    if rs is not None:
        rs = dict(rs)
        if "rope_type" not in rs and "type" in rs:
            rs["rope_type"] = rs.pop("type")
    sw = d.get("sliding_window") if arch == "mistral" else None
    return make_config(
        arch=arch, vocab=d["vocab_size"], hidden=d["hidden_size"],
        intermediate=d["intermediate_size"], layers=d["num_hidden_layers"],
        heads=d["num_attention_heads"],
        kv_heads=d.get("num_key_value_heads", d["num_attention_heads"]),
        head_dim=d.get("head_dim"), tie_embeddings=bool(d.get("tie_word_embeddings", False)),
        qkv_bias=True if arch == "qwen2" else bool(d.get("attention_bias", False)),
        rope_theta=d.get("rope_theta", 10000.0), rope_scaling=rs, dtype=dtype,
        max_position=d.get("max_position_embeddings", 2048), sliding_window=sw,
        rms_norm_eps=d.get("rms_norm_eps", 1e-6))


def _tensor_bytes(a: np.ndarray, dtype: str) -> bytes:
    if dtype == "f32":
        return np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "f16":
        return np.ascontiguousarray(a.astype("<f2")).tobytes()
    return _f32_to_bf16_bits(a).astype("<u2").tobytes()


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_atomic(path: str, chunks: Iterable[bytes]) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".synth-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_safetensors(path: str, tensors: dict[str, np.ndarray], dtype: str) -> None:
    """Writes one .safetensors file by hand.

    Layout: u64 little-endian header length N, N bytes of JSON (padded with
    spaces so that the data starts at an 8-byte boundary), then the tensors
    back to back in name order with no gaps (the safetensors spec forbids
    holes). Each tensor is 8-byte aligned when the sizes before it are
    multiples of 8 bytes (true for the usual shapes); see README.
    """
    st_dtype = HF_DTYPES[dtype][0]
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name in sorted(tensors):
        b = _tensor_bytes(tensors[name], dtype)
        header[name] = {"dtype": st_dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    _write_atomic(path, [len(h).to_bytes(8, "little"), h, *blobs])


def _split_shards(names: list[str], sizes: list[int], n: int) -> list[list[str]]:
    if n > len(names):
        raise SynthError(f"shards: {n} is more than the {len(names)} tensors")
    total = sum(sizes)
    groups: list[list[str]] = [[] for _ in range(n)]
    cum = 0
    for name, s in zip(names, sizes):
        groups[min(n - 1, int((cum + s / 2) * n // total))].append(name)
        cum += s
    if any(not g for g in groups):  # a huge tensor swallowed a shard: split by count
        groups = [[] for _ in range(n)]
        for i, name in enumerate(names):
            groups[i * n // len(names)].append(name)
    return groups


def write_hf_weights(path: str, weights: dict[str, np.ndarray], dtype: str,
                     shards: int = 1) -> list[str]:
    """Writes the safetensors file(s) (+ index when sharded); returns file names."""
    os.makedirs(path, exist_ok=True)
    if shards < 1:
        raise SynthError(f"shards: must be >= 1, got {shards}")
    esize = {"f32": 4, "f16": 2, "bf16": 2}[dtype]
    names = list(weights)
    if shards == 1:
        write_safetensors(os.path.join(path, "model.safetensors"), weights, dtype)
        return ["model.safetensors"]
    groups = _split_shards(names, [weights[n].size * esize for n in names], shards)
    files = []
    weight_map = {}
    for i, g in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(path, fname), {n: weights[n] for n in g}, dtype)
        files.append(fname)
        for n in g:
            weight_map[n] = fname
    index = {"metadata": {"total_size": sum(weights[n].size * esize for n in names)},
             "weight_map": dict(sorted(weight_map.items()))}
    _write_json(os.path.join(path, "model.safetensors.index.json"), index)
    return files


def _write_json(path: str, obj: Any) -> None:
    _write_atomic(path, [(json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()])


def write_hf(path: str, cfg: Config | dict, seed: int, shards: int = 1) -> None:
    """Writes a Hugging Face model folder: config.json, generation_config.json,
    model.safetensors (or shards + index), tokenizer.json,
    tokenizer_config.json, special_tokens_map.json."""
    c = make_config(cfg)
    v = build_vocab(c.vocab)
    w = make_weights(c, seed)
    os.makedirs(path, exist_ok=True)
    # Drop stale weight files of an earlier write with another shard count.
    for f in os.listdir(path):
        if re.fullmatch(r"model(-\d{5}-of-\d{5})?\.safetensors|model\.safetensors\.index\.json", f):
            os.unlink(os.path.join(path, f))
    write_hf_weights(path, w, c.dtype, shards)
    _write_json(os.path.join(path, "config.json"), hf_config_json(c))
    _write_json(os.path.join(path, "generation_config.json"),
                {"bos_token_id": v.bos_id, "eos_token_id": v.eos_id,
                 "transformers_version": TRANSFORMERS_VERSION})
    _write_json(os.path.join(path, "tokenizer.json"), tokenizer_json(v))
    added_decoder = {str(i): {"content": t, "lstrip": False, "normalized": False,
                              "rstrip": False, "single_word": False, "special": True}
                     for i, t in enumerate(v.tokens) if v.token_types[i] == 3}
    _write_json(os.path.join(path, "tokenizer_config.json"), {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added_decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": v.tokens[v.bos_id],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": v.tokens[v.eos_id],
        "model_max_length": c.max_position,
        "pad_token": v.tokens[v.pad_id],
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    })
    _write_json(os.path.join(path, "special_tokens_map.json"), {
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": v.tokens[v.bos_id],
        "eos_token": v.tokens[v.eos_id],
        "pad_token": v.tokens[v.pad_id],
    })


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """{name: float32 array} from one .safetensors file (F32/F16/BF16)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise SynthError(f"{path}: too short for a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if 8 + n > len(data):
        raise SynthError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        raw = data[base + s:base + e]
        shape = tuple(info["shape"])
        if info["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4").astype(np.float32)
        elif info["dtype"] == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float32)
        elif info["dtype"] == "BF16":
            a = _bf16_bits_to_f32(np.frombuffer(raw, "<u2"))
        else:
            raise SynthError(f"{path}: {name}: dtype {info['dtype']} unsupported")
        if a.size != math.prod(shape):
            raise SynthError(f"{path}: {name}: {a.size} values for shape {shape}")
        out[name] = a.reshape(shape)
    return out


def read_hf_weights(folder: str) -> dict[str, np.ndarray]:
    """{HF name: float32 array} of a folder (single file or sharded)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out: dict[str, np.ndarray] = {}
    for fn in files:
        out.update(read_safetensors(os.path.join(folder, fn)))
    return out


def read_hf_config(folder: str) -> Config:
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return config_from_hf_json(json.load(f))


# --------------------------------------------------------------------------
# GGUF
# --------------------------------------------------------------------------

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


def gguf_arch(cfg: Config) -> str:
    """general.architecture: llama.cpp converts Mistral as "llama"."""
    return "qwen2" if cfg.arch == "qwen2" else "llama"


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


def _gguf():
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise SynthError("GGUF output needs the PyPI `gguf` package "
                         "(pip install gguf)") from None
    return gguf


def _gguf_qtype(gguf_type: str):
    g = _gguf()
    if gguf_type not in GGUF_TYPES:
        known = getattr(g.GGMLQuantizationType, gguf_type.upper(), None)
        if known is not None:
            try:
                block = g.GGML_QUANT_SIZES[known][0]
                g.quants.quantize(np.zeros((1, block * 8), np.float32), known)
                can = "can quantize to it, but this tool does not offer it"
            except Exception:  # noqa: BLE001  (NotImplementedError in gguf-py)
                can = "cannot quantize to it"
            raise SynthError(
                f"gguf-type: {gguf_type} is a GGML type that this tool does not write "
                f"(the installed gguf-py {_gguf_version()} {can}); supported: "
                f"{', '.join(GGUF_TYPES)}")
        raise SynthError(f"gguf-type: {gguf_type!r} is not one of {', '.join(GGUF_TYPES)}")
    return getattr(g.GGMLQuantizationType, gguf_type.upper())


def _gguf_version() -> str:
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # noqa: BLE001
        return "?"


def _matrix_type(gguf_type: str, shape: tuple[int, ...]) -> str:
    """The GGUF type a 2D tensor gets: gguf_type, or f16 where its rows are not
    a whole number of quantization blocks (as convert_hf_to_gguf.py does)."""
    if len(shape) != 2:
        return "f32"
    if gguf_type in ("f32", "f16", "bf16"):
        return gguf_type
    g = _gguf()
    block = g.GGML_QUANT_SIZES[_gguf_qtype(gguf_type)][0]
    return gguf_type if shape[1] % block == 0 else "f16"


def _encode_gguf_tensor(a: np.ndarray, ttype: str):
    """-> (array for GGUFWriter.add_tensor, raw_dtype or None)."""
    g = _gguf()
    if ttype == "f32":
        return np.ascontiguousarray(a, dtype=np.float32), None
    if ttype == "f16":
        return np.ascontiguousarray(a, dtype=np.float16), None
    qt = _gguf_qtype(ttype)
    if ttype in ("q2_k", "q3_k"):  # gguf-py cannot quantize k-quants: kquant.py
        return getattr(_kquant(), ttype)(np.ascontiguousarray(a, dtype=np.float32)), qt
    try:
        q = g.quants.quantize(np.ascontiguousarray(a, dtype=np.float32), qt)
    except (NotImplementedError, getattr(g.quants, "QuantError", NotImplementedError)) as e:
        raise SynthError(f"gguf-type {ttype}: the installed gguf package cannot "
                         f"quantize to it ({e})") from None
    return q, qt


@functools.lru_cache(maxsize=None)
def _kquant():
    """kquant.py beside this file, however this file was imported."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kquant.py")
    spec = importlib.util.spec_from_file_location("llmc_synth_kquant", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dequantize(a: np.ndarray, ttype: str) -> np.ndarray:
    if ttype == "f32":
        return a.astype(np.float32)
    if ttype == "f16":
        return a.astype(np.float16).astype(np.float32)
    g = _gguf()
    q, qt = _encode_gguf_tensor(a, ttype)
    return g.quants.dequantize(q, qt).reshape(a.shape).astype(np.float32)


def _file_type(gguf_type: str):
    g = _gguf()
    return {"f32": g.LlamaFileType.ALL_F32, "f16": g.LlamaFileType.MOSTLY_F16,
            "bf16": g.LlamaFileType.MOSTLY_BF16, "q8_0": g.LlamaFileType.MOSTLY_Q8_0,
            "q4_0": g.LlamaFileType.MOSTLY_Q4_0, "q4_1": g.LlamaFileType.MOSTLY_Q4_1,
            "q5_0": g.LlamaFileType.MOSTLY_Q5_0, "q5_1": g.LlamaFileType.MOSTLY_Q5_1,
            "q2_k": g.LlamaFileType.MOSTLY_Q2_K, "q3_k": g.LlamaFileType.MOSTLY_Q3_K_M}[gguf_type]


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
        permuted = (c.arch != "qwen2"
                    and re.search(r"\.(q|k)_proj\.(weight|bias)$", s.name) is not None)
        plan.append({"hf": s.name, "gguf": gguf_name(s.name), "shape": list(s.shape),
                     "type": _matrix_type(gguf_type, s.shape), "permuted": permuted})
    return plan


def _gguf_layout(c: Config, name: str, w: np.ndarray) -> np.ndarray:
    """HF layout -> the layout the GGUF stores (Q/K rows permuted for llama)."""
    if c.arch == "qwen2":
        return w
    if re.search(r"\.q_proj\.(weight|bias)$", name):
        return permute_qk(w, c.heads, c.heads)
    if re.search(r"\.k_proj\.(weight|bias)$", name):
        return permute_qk(w, c.heads, c.kv_heads)
    return w


def write_gguf_weights(path: str, cfg: Config, weights: dict[str, np.ndarray],
                       vocab: Vocab, chat_template: str | None,
                       gguf_type: str = "f32") -> None:
    """Writes a GGUF file from HF-layout weights and a vocabulary."""
    g = _gguf()
    c = make_config(cfg)
    plan = gguf_tensor_plan(c, gguf_type)
    for p in plan:
        if p["hf"] is not None and p["hf"] not in weights:
            raise SynthError(f"weights: {p['hf']} is missing")
        if p["hf"] is not None and list(weights[p["hf"]].shape) != p["shape"]:
            raise SynthError(f"weights: {p['hf']} has shape {weights[p['hf']].shape}, "
                             f"config says {tuple(p['shape'])}")
    if len(vocab.tokens) != c.vocab:
        raise SynthError(f"vocab: tokenizer has {len(vocab.tokens)} tokens, config says {c.vocab}")
    arch = gguf_arch(c)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".synth-", suffix=".gguf.tmp")
    os.close(fd)
    try:
        w = g.GGUFWriter(tmp, arch)
        w.add_name(f"synth-{c.arch}")
        w.add_file_type(_file_type(gguf_type))
        w.add_quantization_version(g.GGML_QUANT_VERSION)
        w.add_context_length(c.max_position)
        w.add_embedding_length(c.hidden)
        w.add_block_count(c.layers)
        w.add_feed_forward_length(c.intermediate)
        w.add_head_count(c.heads)
        w.add_head_count_kv(c.kv_heads)
        w.add_layer_norm_rms_eps(c.rms_norm_eps)
        w.add_rope_freq_base(c.rope_theta)
        w.add_key_length(c.head_dim)
        w.add_value_length(c.head_dim)
        w.add_rope_dimension_count(c.head_dim)
        w.add_vocab_size(c.vocab)
        rs = c.rope_scaling
        if rs and rs.get("rope_type") == "linear":
            w.add_rope_scaling_type(g.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(float(rs["factor"]))
        if c.sliding_window is not None:
            w.add_sliding_window(c.sliding_window)  # llama.cpp's llama arch ignores it
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt-2")
        w.add_token_list(vocab.tokens)
        w.add_token_types(vocab.token_types)
        w.add_token_merges(vocab.merges)
        w.add_bos_token_id(vocab.bos_id)
        w.add_eos_token_id(vocab.eos_id)
        w.add_pad_token_id(vocab.pad_id)
        w.add_add_bos_token(False)
        w.add_add_eos_token(False)
        if chat_template:
            w.add_chat_template(chat_template)
        for p in plan:
            if p["hf"] is None:
                data, raw = llama3_rope_freqs(c), None
            else:
                a = _gguf_layout(c, p["hf"], weights[p["hf"]])
                data, raw = _encode_gguf_tensor(a, p["type"])
            if raw is None:
                w.add_tensor(p["gguf"], data)
            else:
                w.add_tensor(p["gguf"], data, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_gguf(path: str, cfg: Config | dict, seed: int, gguf_type: str = "f32") -> None:
    """Writes the GGUF form of the model make_weights(cfg, seed) describes."""
    c = make_config(cfg)
    write_gguf_weights(path, c, make_weights(c, seed), build_vocab(c.vocab),
                       CHAT_TEMPLATE, gguf_type)


def gguf_from_hf(hf_dir: str, path: str, gguf_type: str = "f32") -> Config:
    """Converts an HF folder written by this tool into GGUF; returns its Config."""
    c = read_hf_config(hf_dir)
    vocab, template = vocab_from_tokenizer_files(hf_dir)
    write_gguf_weights(path, c, read_hf_weights(hf_dir), vocab, template, gguf_type)
    return c


def dequantized_weights(cfg: Config | dict, seed: int,
                        gguf_type: str) -> dict[str, np.ndarray]:
    """The weights as a GGUF of gguf_type holds them after dequantization,
    in HF names and HF layout (Q/K permutation undone). Equal to
    make_weights for f32."""
    c = make_config(cfg)
    plan = {p["hf"]: p for p in gguf_tensor_plan(c, gguf_type) if p["hf"]}
    out = {}
    for name, a in make_weights(c, seed).items():
        p = plan[name]
        stored = _dequantize(_gguf_layout(c, name, a), p["type"])
        if p["permuted"]:
            heads_kv = c.heads if ".q_proj." in name else c.kv_heads
            stored = unpermute_qk(stored, c.heads, heads_kv)
        out[name] = stored
    return out


# --------------------------------------------------------------------------
# Description
# --------------------------------------------------------------------------

def describe(cfg: Config | dict, fmt: str, gguf_type: str = "f32", shards: int = 1) -> dict:
    """A JSON-able summary: config, vocabulary and tensor list of the output."""
    c = make_config(cfg)
    v = build_vocab(c.vocab)
    d: dict[str, Any] = {
        "format": fmt,
        "config": c.to_dict(),
        "hf_config": hf_config_json(c),
        "vocab": {"size": len(v.tokens), "merges": len(v.merges),
                  "reserved_fillers": v.n_reserved, "special": v.special,
                  "bos_id": v.bos_id, "eos_id": v.eos_id, "pad_id": v.pad_id},
    }
    if fmt == "hf":
        dt = HF_DTYPES[c.dtype][0]
        d["shards"] = shards
        d["tensors"] = [{"name": s.name, "shape": list(s.shape), "dtype": dt}
                        for s in tensor_specs(c)]
    else:
        d["gguf_arch"] = gguf_arch(c)
        d["gguf_type"] = gguf_type
        d["tensors"] = [{"name": p["gguf"], "hf_name": p["hf"], "shape": p["shape"],
                         "ggml_shape": p["shape"][::-1], "dtype": p["type"],
                         "qk_permuted": p["permuted"]}
                        for p in gguf_tensor_plan(c, gguf_type)]
    d["n_params"] = sum(math.prod(s.shape) for s in tensor_specs(c))
    return d


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Write a seeded synthetic transformer LM as a Hugging Face "
                    "folder or a GGUF file (same seed -> byte-identical output).")
    p.add_argument("--format", choices=("hf", "gguf"), required=True)
    p.add_argument("--out", help="output folder (hf) or file (gguf)")
    p.add_argument("--from-hf", metavar="FOLDER",
                   help="convert an HF folder written by this tool (with --format gguf); "
                        "the shape options are then taken from its config.json")
    p.add_argument("--describe", action="store_true",
                   help="print a JSON summary (config, tensors) to stdout; "
                        "writes nothing unless --out is given")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arch", choices=ARCHES, default="llama")
    p.add_argument("--vocab", type=int, default=300)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--intermediate", type=int, default=160)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=None,
                   help="default hidden/heads (16 with the defaults)")
    p.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--qkv-bias", action=argparse.BooleanOptionalAction, default=None,
                   help="default: on for qwen2 (required there), off otherwise")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--rope-scaling", default="none",
                   help="none | linear:F | llama3:F,low,high,orig")
    p.add_argument("--rms-eps", type=float, default=1e-5)
    p.add_argument("--dtype", choices=tuple(HF_DTYPES), default="f32",
                   help="HF tensor dtype (all tensors)")
    p.add_argument("--gguf-type", type=str.lower, default="f32",
                   help=f"GGUF type of the 2D matrices ({' | '.join(GGUF_TYPES)}); "
                        "norms, biases stay f32")
    p.add_argument("--shards", type=int, default=1,
                   help="HF: number of safetensors shards (>1 adds an index)")
    p.add_argument("--max-position", type=int, default=512)
    p.add_argument("--sliding-window", type=int, default=None, help="mistral only")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.from_hf:
            if args.format != "gguf":
                raise SynthError("--from-hf converts to GGUF: use --format gguf")
            cfg = read_hf_config(args.from_hf)
        else:
            cfg = make_config(
                arch=args.arch, vocab=args.vocab, hidden=args.hidden,
                intermediate=args.intermediate, layers=args.layers, heads=args.heads,
                kv_heads=args.kv_heads, head_dim=args.head_dim,
                tie_embeddings=args.tie_embeddings, qkv_bias=args.qkv_bias,
                rope_theta=args.rope_theta,
                rope_scaling=parse_rope_scaling(args.rope_scaling),
                dtype=args.dtype, max_position=args.max_position,
                sliding_window=args.sliding_window, rms_norm_eps=args.rms_eps)
        if args.format == "gguf":
            _gguf_qtype(args.gguf_type)  # fails early when gguf is missing
        if not args.out and not args.describe:
            raise SynthError("--out is required (or --describe alone)")
        if args.describe:
            json.dump(describe(cfg, args.format, args.gguf_type, args.shards),
                      sys.stdout, indent=2)
            sys.stdout.write("\n")
        if args.out:
            if args.format == "hf":
                write_hf(args.out, cfg, args.seed, args.shards)
            elif args.from_hf:
                gguf_from_hf(args.from_hf, args.out, args.gguf_type)
            else:
                write_gguf(args.out, cfg, args.seed, args.gguf_type)
            for p in gguf_tensor_plan(cfg, args.gguf_type) if args.format == "gguf" else []:
                if len(p["shape"]) == 2 and p["type"] != args.gguf_type:
                    print(f"synth_model: note: {p['gguf']} stored as {p['type']} "
                          f"(row of {p['shape'][1]} is not whole {args.gguf_type} blocks)",
                          file=sys.stderr)
    except SynthError as e:
        print(f"synth_model: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
