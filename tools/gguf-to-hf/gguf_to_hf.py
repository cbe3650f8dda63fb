#!/usr/bin/env python3
"""Dequantize a llama-architecture GGUF into a Hugging Face folder.

    python3 tools/gguf-to-hf/gguf_to_hf.py MODEL.gguf OUT_DIR [--dtype f16|bf16|f32]

Writes config.json, model.safetensors (every tensor dequantized by gguf-py and
stored in DTYPE under its HF name; Q/K rows brought back from GGML's
interleaved-pair RoPE order to HF's rotate-half order, undoing
convert_hf_to_gguf's permute), tokenizer.json (byte-level BPE from
tokenizer.ggml.tokens/merges, control tokens as added special tokens) and
tokenizer_config.json (BOS/EOS, chat template).

Why: llmc's quantize pass works on HF checkpoints, and the quantization
accuracy test needs one whose numbers can be compared with a GGUF everybody
has (SmolLM2-135M's Q4_1). Only gpt2-style (byte-level BPE) vocabularies with
the pre-tokenizers below are converted; anything else is refused.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np

LAYER = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}

# tokenizer.ggml.pre -> HF pre-tokenizer steps before ByteLevel.
PRE = {
    "gpt2": [],
    "smollm": [{"type": "Digits", "individual_digits": True}],
    "starcoder": [{"type": "Digits", "individual_digits": True}],
}

DTYPES = {"f16": (np.float16, "F16", "float16"), "bf16": (None, "BF16", "bfloat16"),
          "f32": (np.float32, "F32", "float32")}


def fail(msg):
    sys.exit(f"gguf_to_hf: {msg}")


def unpermute(w, n_head):
    """GGML's interleaved pair rows (2i, 2i+1) of each head back to HF's
    rotate-half rows (i, i + d/2): the inverse of convert_hf_to_gguf's permute."""
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def to_bytes(a, dtype):
    if dtype == "bf16":  # round to nearest even, as torch does
        u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        return u.tobytes()
    return np.ascontiguousarray(a, dtype=DTYPES[dtype][0]).tobytes()


def write_safetensors(path, tensors, dtype):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        b = to_bytes(a, dtype)
        header[name] = {"dtype": DTYPES[dtype][1], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16")
    a = ap.parse_args()
    try:
        import gguf
    except ImportError:
        fail("needs the PyPI `gguf` package (scripts/setup installs it)")
    r = gguf.GGUFReader(a.gguf)

    def field(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        return f.contents()

    arch = field("general.architecture")
    if arch != "llama":
        fail(f"{a.gguf}: general.architecture {arch!r} is not llama")
    heads = int(field("llama.attention.head_count"))
    kv = int(field("llama.attention.head_count_kv", heads))
    hidden = int(field("llama.embedding_length"))

    tensors = {}
    for t in r.tensors:
        shape = [int(x) for x in t.shape][::-1]  # GGML order reversed = numpy order
        w = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        if t.name == "token_embd.weight":
            tensors["model.embed_tokens.weight"] = w
        elif t.name == "output_norm.weight":
            tensors["model.norm.weight"] = w
        elif t.name == "output.weight":
            tensors["lm_head.weight"] = w
        elif t.name == "rope_freqs.weight":
            fail(f"{a.gguf}: rope_freqs (llama3 RoPE scaling) is not converted")
        else:
            m = re.fullmatch(r"blk\.(\d+)\.(.+)", t.name)
            if not m or m.group(2) not in LAYER:
                fail(f"{a.gguf}: tensor {t.name!r} has no Hugging Face name here")
            if m.group(2).startswith(("attn_q.", "attn_k.")):
                w = unpermute(w, heads if m.group(2).startswith("attn_q.") else kv)
            tensors[f"model.layers.{m.group(1)}.{LAYER[m.group(2)]}"] = w
    tied = "lm_head.weight" not in tensors

    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, a.dtype)
    bos, eos = field("tokenizer.ggml.bos_token_id"), field("tokenizer.ggml.eos_token_id")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(field("llama.feed_forward_length")),
        "num_hidden_layers": int(field("llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": int(field("llama.attention.key_length", hidden // heads)),
        "rms_norm_eps": float(field("llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(field("llama.rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "max_position_embeddings": int(field("llama.context_length", 2048)),
        "vocab_size": tensors["model.embed_tokens.weight"].shape[0],
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "attention_bias": "model.layers.0.self_attn.q_proj.bias" in tensors,
        "mlp_bias": False,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": DTYPES[a.dtype][2],
    }
    with open(os.path.join(a.out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)

    if field("tokenizer.ggml.model") != "gpt2":
        fail(f"{a.gguf}: tokenizer.ggml.model {field('tokenizer.ggml.model')!r} is not gpt2")
    pre = field("tokenizer.ggml.pre", "gpt2")
    if pre not in PRE:
        fail(f"{a.gguf}: tokenizer.ggml.pre {pre!r} is not one of {sorted(PRE)}")
    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    merges = field("tokenizer.ggml.merges")
    control = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL
    added = [{"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, (tok, ty) in enumerate(zip(tokens, types)) if ty == control]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": PRE[pre] + [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": True}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {tok: i for i, tok in enumerate(tokens)}, "merges": list(merges)},
    }
    with open(os.path.join(a.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    tcfg = {"add_bos_token": bool(field("tokenizer.ggml.add_bos_token", False)),
            "bos_token": tokens[bos] if bos is not None else None,
            "eos_token": tokens[eos] if eos is not None else None,
            "model_max_length": config["max_position_embeddings"],
            "tokenizer_class": "GPT2Tokenizer"}
    if field("tokenizer.chat_template"):
        tcfg["chat_template"] = field("tokenizer.chat_template")
    with open(os.path.join(a.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tcfg, f, ensure_ascii=False, indent=2)
    print(f"gguf_to_hf: wrote {a.out} ({len(tensors)} tensors, {a.dtype}, "
          f"{'tied' if tied else 'untied'} embeddings)")


if __name__ == "__main__":
    main()
