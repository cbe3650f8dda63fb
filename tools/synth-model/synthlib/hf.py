"""The Hugging Face folder: config.json, tokenizer files and (sharded)
safetensors weights, and reading them back."""
from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from .config import (ARCHES, CHAT_TEMPLATE, HF_DTYPES, HF_MODEL_TYPES, WINDOW_ARCHES, Config,
                     SynthError, make_config, transformers_version)
from .files import _write_json
from .safetensors_io import read_safetensors, write_safetensors
from .vocab import build_vocab, tokenizer_json
from .weights import make_weights


HF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                    "mistral": "MistralForCausalLM", "qwen3": "Qwen3ForCausalLM",
                    "qwen3moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM",
                    "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
                    "gemma3": "Gemma3ForCausalLM"}


def _hf_config_json_new(c: Config, v, arch_name: str) -> dict:
    """config.json of phi3, gemma2, gemma3, with the keys their real
    checkpoints carry (Phi-3-mini, gemma-2-2b, gemma-3-1b), in name order."""
    d: dict[str, Any] = {"architectures": [arch_name], "attention_bias": False,
                         "attention_dropout": 0.0}
    if c.arch == "gemma2":
        d["attn_logit_softcapping"] = c.attn_softcap
    if c.arch == "gemma3":
        d["attn_logit_softcapping"] = None
    d["bos_token_id"] = v.bos_id
    if c.gemma:
        d["cache_implementation"] = "hybrid"
    if c.arch == "phi3":
        d["embd_pdrop"] = 0.0
    d["eos_token_id"] = v.eos_id
    if c.gemma:
        d["final_logit_softcapping"] = c.final_softcap
        d["head_dim"] = c.head_dim   # Phi3 derives it (hidden / heads), as real configs
    if c.arch in ("phi3", "gemma2"):
        d["hidden_act"] = "silu" if c.arch == "phi3" else "gelu_pytorch_tanh"
    if c.gemma:
        d["hidden_activation"] = "gelu_pytorch_tanh"   # what Gemma2/3 MLPs read
    d["hidden_size"] = c.hidden
    d["initializer_range"] = 0.02
    d["intermediate_size"] = c.intermediate
    if c.arch == "gemma3":
        d["layer_types"] = ["sliding_attention" if w else "full_attention"
                            for w in c.layer_windows]
    d["max_position_embeddings"] = c.max_position
    d["model_type"] = c.hf_model_type
    d["num_attention_heads"] = c.heads
    d["num_hidden_layers"] = c.layers
    d["num_key_value_heads"] = c.kv_heads
    if c.arch == "phi3":
        # convert_hf_to_gguf.py requires it (rope.scaling.original_context_length).
        d["original_max_position_embeddings"] = c.max_position
    d["pad_token_id"] = v.pad_id
    if c.arch == "phi3":
        d["partial_rotary_factor"] = 1.0
    if c.gemma:
        q = c.query_pre_attn_scalar
        d["query_pre_attn_scalar"] = int(q) if q == int(q) else q   # real configs: 256
    if c.arch == "phi3":
        d["resid_pdrop"] = 0.0
    d["rms_norm_eps"] = c.rms_norm_eps
    if c.arch == "gemma3":
        d["rope_local_base_freq"] = c.rope_local_theta
    d["rope_scaling"] = dict(c.rope_scaling) if c.rope_scaling else None
    d["rope_theta"] = c.rope_theta
    d["sliding_window"] = c.sliding_window
    if c.arch == "gemma3":
        d["sliding_window_pattern"] = c.sliding_window_pattern
    d["tie_word_embeddings"] = bool(c.tie_embeddings)
    d["torch_dtype"] = HF_DTYPES[c.dtype][1]
    d["transformers_version"] = transformers_version(c.arch)
    d["use_cache"] = True
    d["vocab_size"] = c.vocab
    return d


def hf_config_json(cfg: Config) -> dict:
    c = make_config(cfg)
    v = build_vocab(c.vocab)
    arch_name = HF_ARCHITECTURES[c.arch]
    if c.arch in ("phi3", "gemma2", "gemma3"):
        return _hf_config_json_new(c, v, arch_name)
    qwen3ish = c.arch in ("qwen2", "qwen3", "qwen3moe")
    d: dict[str, Any] = {"architectures": [arch_name]}
    if c.arch in ("llama", "qwen2", "qwen3", "qwen3moe"):
        d["attention_bias"] = bool(c.qkv_bias)
    d["attention_dropout"] = 0.0
    d["bos_token_id"] = v.bos_id
    if c.arch == "qwen3moe":
        d["decoder_sparse_step"] = 1   # every layer sparse (with mlp_only_layers [])
    d["eos_token_id"] = v.eos_id
    # Always explicit: Qwen3Config's default is 128, not hidden/heads.
    d["head_dim"] = c.head_dim
    d["hidden_act"] = "silu"
    d["hidden_size"] = c.hidden
    d["initializer_range"] = 0.02
    # qwen3moe: the dense MLP width of mlp_only_layers (none here), written as
    # real configs carry it; mixtral: each expert's width.
    d["intermediate_size"] = c.intermediate
    d["max_position_embeddings"] = c.max_position
    if qwen3ish:
        d["max_window_layers"] = c.layers
    if c.arch == "llama":
        d["mlp_bias"] = False
    if c.arch == "qwen3moe":
        d["mlp_only_layers"] = []
    d["model_type"] = c.hf_model_type
    if c.arch == "qwen3moe":
        d["moe_intermediate_size"] = c.moe_intermediate
        d["norm_topk_prob"] = bool(c.norm_topk_prob)
    d["num_attention_heads"] = c.heads
    if c.arch == "qwen3moe":
        d["num_experts"] = c.experts
    if c.moe:
        d["num_experts_per_tok"] = c.experts_per_tok
    d["num_hidden_layers"] = c.layers
    d["num_key_value_heads"] = c.kv_heads
    if c.arch == "mixtral":
        d["num_local_experts"] = c.experts
    if c.moe:
        d["output_router_logits"] = False
    if c.arch == "llama":
        d["pretraining_tp"] = 1
    d["rms_norm_eps"] = c.rms_norm_eps
    d["rope_scaling"] = dict(c.rope_scaling) if c.rope_scaling else None
    d["rope_theta"] = c.rope_theta
    if c.moe:
        # Training-only (the aux loss is off in inference); real configs' values.
        d["router_aux_loss_coef"] = 0.001 if c.arch == "qwen3moe" else 0.02
    if c.arch == "mixtral":
        d["router_jitter_noise"] = 0.0
    if c.arch in ("mistral", "mixtral"):
        d["sliding_window"] = c.sliding_window
    if c.arch == "qwen2":
        # Real Qwen2 configs carry a window that use_sliding_window turns off.
        d["sliding_window"] = c.max_position
    if c.arch in ("qwen3", "qwen3moe"):
        d["sliding_window"] = None  # as real Qwen3 configs (use_sliding_window false too)
    d["tie_word_embeddings"] = bool(c.tie_embeddings)
    d["torch_dtype"] = HF_DTYPES[c.dtype][1]
    d["transformers_version"] = transformers_version(c.arch)
    d["use_cache"] = True
    if qwen3ish:
        d["use_sliding_window"] = False
    d["vocab_size"] = c.vocab
    return d


def config_from_hf_json(d: dict) -> Config:
    """The Config a config.json written by this tool came from."""
    model_type = d.get("model_type")
    arch = {v: k for k, v in HF_MODEL_TYPES.items()}.get(model_type, model_type)
    if arch not in ARCHES or model_type != HF_MODEL_TYPES.get(arch, arch):
        known = [HF_MODEL_TYPES.get(a, a) for a in ARCHES]
        raise SynthError(f"config.json: model_type {model_type!r} is not one of "
                         f"{', '.join(known)}")
    dtype = {v[1]: k for k, v in HF_DTYPES.items()}.get(d.get("torch_dtype", "float32"))
    if dtype is None:
        raise SynthError(f"config.json: torch_dtype {d.get('torch_dtype')!r} unsupported")
    rs = d.get("rope_scaling")
    if rs is not None:
        rs = dict(rs)
        if "rope_type" not in rs and "type" in rs:
            rs["rope_type"] = rs.pop("type")
    sw = d.get("sliding_window") if arch in WINDOW_ARCHES else None
    gemma: dict[str, Any] = {}
    if arch == "gemma2":
        gemma = dict(attn_softcap=d.get("attn_logit_softcapping"),
                     final_softcap=d.get("final_logit_softcapping"),
                     query_pre_attn_scalar=d.get("query_pre_attn_scalar"))
    elif arch == "gemma3":
        if d.get("attn_logit_softcapping") is not None:
            raise SynthError("config.json: gemma3_text with attn_logit_softcapping is not "
                             "something this tool writes")
        pattern = d.get("sliding_window_pattern", 6)
        if d.get("layer_types") is not None:
            want = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                    for i in range(d["num_hidden_layers"])]
            if d["layer_types"] != want:
                raise SynthError("config.json: layer_types is not the sliding_window_pattern "
                                 f"{pattern} pattern this tool writes")
        gemma = dict(final_softcap=d.get("final_logit_softcapping"),
                     query_pre_attn_scalar=d.get("query_pre_attn_scalar"),
                     sliding_window_pattern=pattern,
                     rope_local_theta=d.get("rope_local_base_freq", 10000.0))
    moe: dict[str, Any] = {}
    if arch == "qwen3moe":
        if d.get("mlp_only_layers") or d.get("decoder_sparse_step", 1) != 1:
            raise SynthError("config.json: qwen3_moe with dense layers (mlp_only_layers, "
                             "decoder_sparse_step) is not something this tool writes")
        moe = dict(experts=d["num_experts"], experts_per_tok=d["num_experts_per_tok"],
                   moe_intermediate=d["moe_intermediate_size"],
                   norm_topk_prob=bool(d.get("norm_topk_prob", False)))
    elif arch == "mixtral":
        moe = dict(experts=d.get("num_local_experts", 8),
                   experts_per_tok=d.get("num_experts_per_tok", 2))
    return make_config(
        arch=arch, vocab=d["vocab_size"], hidden=d["hidden_size"],
        intermediate=d["intermediate_size"], layers=d["num_hidden_layers"],
        heads=d["num_attention_heads"],
        kv_heads=d.get("num_key_value_heads", d["num_attention_heads"]),
        # Qwen3Config's head_dim defaults to 128, not hidden/heads.
        head_dim=d.get("head_dim", 128 if arch == "qwen3" else None),
        tie_embeddings=bool(d.get("tie_word_embeddings", False)),
        qkv_bias=True if arch == "qwen2" else bool(d.get("attention_bias", False)),
        rope_theta=d.get("rope_theta", 10000.0), rope_scaling=rs, dtype=dtype,
        max_position=d.get("max_position_embeddings", 2048), sliding_window=sw,
        rms_norm_eps=d.get("rms_norm_eps", 1e-6), **moe, **gemma)

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
                 "transformers_version": transformers_version(c.arch)})
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
