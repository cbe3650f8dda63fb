"""Writing GGUF files (from seeded weights or an HF folder), and the weights
a GGUF of a given type holds after dequantization."""
from __future__ import annotations

import os
import tempfile

import numpy as np

from .config import CHAT_TEMPLATE, Config, SynthError, make_config
from .files import _umask_mode
from .gguf_layout import (gemma_norm_offset, gguf_arch, gguf_tensor_plan, llama3_rope_freqs,
                          plan_source, unpermute_qk)
from .gguf_types import _dequantize, _encode_gguf_tensor, _file_type, _gguf
from .hf import read_hf_config, read_hf_weights
from .vocab import Vocab, build_vocab, vocab_from_tokenizer_files
from .weights import make_weights


def gguf_model_name(c: Config) -> str:
    """general.name: "synth-<arch>", but "synth-phi 3" for phi3: llama.cpp's
    vocabulary loader applies Phi-3 token quirks (it looks up "</s>", which
    this vocabulary lacks, and fails) to any model whose name contains
    "phi3" or "phi-3"."""
    return "synth-phi 3" if c.arch == "phi3" else f"synth-{c.arch}"


def write_gguf_weights(path: str, cfg: Config, weights: dict[str, np.ndarray],
                       vocab: Vocab, chat_template: str | None,
                       gguf_type: str = "f32") -> None:
    """Writes a GGUF file from HF-layout weights and a vocabulary."""
    g = _gguf()
    c = make_config(cfg)
    plan = gguf_tensor_plan(c, gguf_type)
    for p in plan:
        for name, shape in ([(p["hf"], p["shape"])] if p["hf"] is not None else
                            [(n, p["shape"][1:]) for n in p.get("hf_experts", [])]):
            if name not in weights:
                raise SynthError(f"weights: {name} is missing")
            if list(weights[name].shape) != list(shape):
                raise SynthError(f"weights: {name} has shape {weights[name].shape}, "
                                 f"config says {tuple(shape)}")
    if len(vocab.tokens) != c.vocab:
        raise SynthError(f"vocab: tokenizer has {len(vocab.tokens)} tokens, config says {c.vocab}")
    arch = gguf_arch(c)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".synth-", suffix=".gguf.tmp")
    os.close(fd)
    try:
        w = g.GGUFWriter(tmp, arch)
        w.add_name(gguf_model_name(c))
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
        if c.moe:
            # As convert_hf_to_gguf.py: expert_count / expert_used_count for
            # both; qwen3moe's expert width apart from the (unused) dense
            # feed_forward_length, mixtral's is feed_forward_length itself.
            w.add_expert_count(c.experts)
            w.add_expert_used_count(c.experts_per_tok)
            if c.arch == "qwen3moe":
                w.add_expert_feed_forward_length(c.moe_intermediate)
        rs = c.rope_scaling
        if rs and rs.get("rope_type") == "linear":
            w.add_rope_scaling_type(g.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(float(rs["factor"]))
        if c.arch == "phi3":
            # As convert_hf_to_gguf.py's Phi3MiniModel: the original context
            # (= max_position: no long-context scaling), and the window always,
            # 0 for none. llama.cpp's phi3 ignores the window (its SWA is
            # disabled), as llama's does Mistral's.
            w.add_rope_scaling_orig_ctx_len(c.max_position)
            w.add_sliding_window(c.sliding_window or 0)
        elif c.arch == "gemma2":
            # llama.cpp's gemma2: SWA on even layers (pattern 2, no key), the
            # scores and the logits always soft-capped.
            w.add_attn_logit_softcapping(c.attn_softcap)
            w.add_final_logit_softcapping(c.final_softcap)
            w.add_sliding_window(c.sliding_window)
        elif c.arch == "gemma3":
            # rope.freq_base is the global layers' base (rope.scaling.* scales
            # them only); the sliding layers have rope.freq_base_swa, unscaled.
            # No window key when every layer is global (pattern 1), and the
            # pattern only where it is not llama.cpp's default 6, as
            # convert_hf_to_gguf.py (which never writes it) leaves it.
            w.add_rope_freq_base_swa(c.rope_local_theta)
            if c.sliding_window_pattern != 1:
                w.add_sliding_window(c.sliding_window)
                if c.sliding_window_pattern != 6:
                    w.add_sliding_window_pattern(c.sliding_window_pattern)
            if c.final_softcap is not None:
                w.add_final_logit_softcapping(c.final_softcap)
        elif c.sliding_window is not None:
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
            if p["hf"] is None and not p.get("hf_experts"):
                data, raw = llama3_rope_freqs(c), None
            else:
                data, raw = _encode_gguf_tensor(plan_source(c, p, weights), p["type"])
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
    in HF names and HF layout (Q/K permutation undone, MoE expert stacks
    split back into one tensor per expert, Gemma's norms minus the 1 the GGUF
    adds). Equal to make_weights for f32."""
    c = make_config(cfg)
    W = make_weights(c, seed)
    got = {}
    for p in gguf_tensor_plan(c, gguf_type):
        if p.get("hf_experts"):
            stored = _dequantize(plan_source(c, p, W), p["type"])
            for m, name in enumerate(p["hf_experts"]):
                got[name] = stored[m]
        elif p["hf"] is not None:
            stored = _dequantize(plan_source(c, p, W), p["type"])
            if gemma_norm_offset(c, p["hf"]):   # Gemma: the GGUF's 1 + w, back to w
                stored = stored - np.float32(gemma_norm_offset(c, p["hf"]))
            if p["permuted"]:
                heads_kv = c.heads if ".q_proj." in p["hf"] else c.kv_heads
                stored = unpermute_qk(stored, c.heads, heads_kv)
            got[p["hf"]] = stored
    return {name: got[name] for name in W}   # model order, as make_weights
