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
    moe_tensor_names(cfg, layer) -> {"router": name, "gate"/"up"/"down": [per expert]}
        (MoE arches qwen3moe / mixtral)
    cfg.layer_windows / cfg.layer_rope_thetas: per layer window and RoPE base
        (gemma2 / gemma3's local and global layers)

Needs numpy; GGUF output also needs the PyPI `gguf` package (imported lazily).

The code lives in the synthlib package beside this file, one module per part
(see synthlib/__init__.py); this file is the entry point and re-exports every
name the single-file version had, private helpers included, so the scripts
that import synth_model keep working.
"""
from __future__ import annotations

import os
import sys

# synthlib sits beside this file; make it importable however this file was
# loaded (run as a script, imported from a folder on sys.path, or by path).
_HERE = os.path.dirname(os.path.abspath(__file__))
if not any(os.path.abspath(p) == _HERE for p in sys.path):
    sys.path.insert(0, _HERE)

from synthlib.cli import _parser, describe, main  # noqa: E402,F401
from synthlib.config import (  # noqa: E402,F401
    ARCHES, BOS_TOKEN, CHAT_TEMPLATE, EOS_TOKEN, FUSED_ARCHES, GEMMA_ARCHES, GEMMA_DEFAULTS,
    GGUF_TYPES, HF_DTYPES, HF_MODEL_TYPES, LLAMA_CPP_27B_LAYERS, MOE_ARCHES, MOE_DEFAULTS,
    PAD_TOKEN, QK_NORM_ARCHES, SPECIAL_TOKENS, TRANSFORMERS_VERSION, WINDOW_ARCHES, Config,
    SynthError, _check_gemma, _check_moe, _check_rope_scaling, llama_cpp_attn_scalar,
    make_config, parse_rope_scaling, transformers_version)
from synthlib.files import _umask_mode, _write_atomic, _write_json  # noqa: E402,F401
from synthlib.gguf_layout import (  # noqa: E402,F401
    _GEMMA_GGUF_NAMES, _GGUF_NAMES, MOE_GGUF_EXPERTS, MOE_GGUF_ROUTER, NEOX_ARCHES,
    _gguf_layout, check_gguf_expressible, gemma_norm_offset, gguf_arch, gguf_name,
    gguf_tensor_plan, llama3_rope_freqs, permute_qk, plan_source, unpermute_qk)
from synthlib.gguf_types import (  # noqa: E402,F401
    _dequantize, _encode_gguf_tensor, _file_type, _gguf, _gguf_qtype, _gguf_version,
    _kquant, _matrix_type)
from synthlib.gguf_writer import (  # noqa: E402,F401
    dequantized_weights, gguf_from_hf, gguf_model_name, write_gguf, write_gguf_weights)
from synthlib.hf import (  # noqa: E402,F401
    HF_ARCHITECTURES, _split_shards, config_from_hf_json, hf_config_json, read_hf_config,
    read_hf_weights, write_hf, write_hf_weights)
from synthlib.safetensors_io import (  # noqa: E402,F401
    _tensor_bytes, read_safetensors, write_safetensors)
from synthlib.vocab import (  # noqa: E402,F401
    _GPT2_PATTERN_ASCII, _WORD_SEP, BUILTIN_TEXT, GPT2_PATTERN, Vocab, _all_merges,
    _build_vocab_cached, _pretokenize, build_vocab, bytes_to_unicode, max_merge_vocab,
    tokenizer_json, vocab_from_tokenizer_files)
from synthlib.weights import (  # noqa: E402,F401
    MOE_NAMES, ROUTER_GAIN, TensorSpec, _bf16_bits_to_f32, _f32_to_bf16_bits,
    _round_to_dtype, _stream_ints, _uniform, make_weights, moe_layer_specs, moe_tensor_names,
    tensor_specs)

if __name__ == "__main__":
    sys.exit(main())
