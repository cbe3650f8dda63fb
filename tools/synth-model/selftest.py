#!/usr/bin/env python3
"""Self-test of synth_model.py. Runs in seconds; exits non-zero on failure.

Checks, for several shapes: byte-identical output for the same seed; an
independent safetensors parse (layout, alignment, values == make_weights);
config.json and tokenizer files; GGUF keys, tensor names, shapes, types and
dequantized values (exact for f32, within the quantization error otherwise);
GGUF == gguf_from_hf(HF folder) byte for byte; that the GGUF under GGML's
interleaved RoPE computes the same logits as the HF folder under rotate-half
RoPE (float64 numpy forward passes); for qwen3, llama.cpp's tensor set and
that its QK-norm weights matter; for the MoE arches (qwen3moe, mixtral), the
router / expert tensors in both forms (the GGUF's stacked ffn_*_exps, expert m
at index m), a per-token routing loop in the forward pass, and that routing,
the experts and norm_topk_prob all matter; for phi3 / gemma2 / gemma3,
llama.cpp's keys and tensors, Gemma's +1 norms, the GGUF read back == the HF
folder bit for bit, and that every feature (soft-caps, windows, per-layer
RoPE, post-norms, fused row order, ...) matters; and, when llama-cpp-python is
installed, that llama.cpp loads each GGUF, tokenizes like the reference BPE and
computes the same logits.

    python3 tools/synth-model/selftest.py [-v] [--keep DIR] [--no-llama-cpp]
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synth_model as sm  # noqa: E402

VERBOSE = False
try:
    import regex  # noqa: F401
    HAVE_REGEX = True
except ImportError:
    HAVE_REGEX = False
RESULTS: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    RESULTS.append((name, bool(ok), detail))
    if VERBOSE or not ok:
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    return ok


# Shapes under test.
SHAPES = {
    # GQA, tied embeddings, the tool's defaults; HF f32 in 2 shards.
    "llama-gqa-tied": dict(cfg=dict(arch="llama"), seed=1, shards=2),
    # Qwen2, QKV bias, untied, vocab 300; HF f16.
    "qwen2-bias-untied": dict(cfg=dict(arch="qwen2", vocab=300, hidden=64, heads=4,
                                       kv_heads=2, tie_embeddings=False, dtype="f16",
                                       intermediate=128, layers=2),
                              seed=2, shards=1),
    # head_dim 128 MHA, untied, llama3 RoPE scaling; HF bf16 in 3 shards.
    "llama-mha-hd128": dict(cfg=dict(arch="llama", vocab=400, hidden=256, heads=2,
                                     kv_heads=2, head_dim=128, intermediate=320, layers=2,
                                     tie_embeddings=False, dtype="bf16",
                                     rope_theta=500000.0,
                                     rope_scaling="llama3:8,1,4,64",
                                     max_position=1024),
                            seed=3, shards=3),
    # Mistral with a sliding window and linear RoPE scaling; head_dim != hidden/heads.
    "mistral-swa-linear": dict(cfg=dict(arch="mistral", vocab=320, hidden=96, heads=6,
                                        kv_heads=2, head_dim=32, intermediate=192,
                                        layers=3, sliding_window=4096,
                                        rope_scaling="linear:2", tie_embeddings=False),
                               seed=4, shards=1),
    # Llama with attention_bias (zero o_proj bias), tied.
    "llama-bias": dict(cfg=dict(arch="llama", qkv_bias=True, hidden=64, heads=4,
                                kv_heads=1, layers=1), seed=5, shards=1),
    # Qwen3 (QK-norm, no bias), untied, heads*head_dim = 2*hidden as in real
    # Qwen3 checkpoints, Qwen3's theta and eps; HF bf16 in 2 shards.
    "qwen3-qknorm-untied": dict(cfg=dict(arch="qwen3", vocab=300, hidden=64, heads=4,
                                         kv_heads=2, head_dim=32, intermediate=128,
                                         layers=2, tie_embeddings=False, dtype="bf16",
                                         rope_theta=1000000.0, rms_norm_eps=1e-6),
                                seed=6, shards=2),
    # Qwen3 tied, MQA, head_dim = hidden/heads, 3 layers; HF f32.
    "qwen3-qknorm-tied-mqa": dict(cfg=dict(arch="qwen3", vocab=320, hidden=64, heads=4,
                                           kv_heads=1, intermediate=160, layers=3),
                                  seed=7, shards=1),
    # Qwen3-MoE: QK-norm, 6 experts of 32 (!= hidden), top-2 renormalized,
    # untied, head_dim 32; HF bf16 in 2 shards.
    "qwen3moe-untied": dict(cfg=dict(arch="qwen3moe", vocab=300, hidden=64, heads=4,
                                     kv_heads=2, head_dim=32, intermediate=128, layers=2,
                                     experts=6, experts_per_tok=2, moe_intermediate=32,
                                     tie_embeddings=False, dtype="bf16",
                                     rope_theta=1000000.0, rms_norm_eps=1e-6),
                            seed=8, shards=2),
    # Qwen3-MoE without norm_topk_prob, top-3 of 5: HF only (no GGUF can say it).
    "qwen3moe-nonorm-k3": dict(cfg=dict(arch="qwen3moe", vocab=300, hidden=64, heads=4,
                                        kv_heads=2, intermediate=128, layers=1, experts=5,
                                        experts_per_tok=3, moe_intermediate=64,
                                        norm_topk_prob=False),
                               seed=9, shards=1, hf_only="norm_topk_prob"),
    # Mixtral: llama attention (Q/K permuted in the GGUF), 4 experts of 96,
    # top-2, tied, MQA; HF f16.
    "mixtral-tied-mqa": dict(cfg=dict(arch="mixtral", vocab=320, hidden=64, heads=4,
                                      kv_heads=1, intermediate=96, layers=2, experts=4,
                                      experts_per_tok=2, dtype="f16", rope_theta=1000000.0),
                             seed=10, shards=1),
    # Phi-3: fused qkv_proj / gate_up_proj, untied, GQA; HF bf16 in 2 shards.
    "phi3-untied": dict(cfg=dict(arch="phi3", vocab=300, hidden=64, heads=4, kv_heads=2,
                                 intermediate=128, layers=2, tie_embeddings=False,
                                 dtype="bf16"), seed=11, shards=2),
    # Phi-3 tied, MQA, a window of 6 on every layer (llama.cpp's phi3 ignores
    # it), 3 layers; HF f16.
    "phi3-window-mqa": dict(cfg=dict(arch="phi3", vocab=320, hidden=64, heads=4, kv_heads=1,
                                     intermediate=96, layers=3, sliding_window=6,
                                     dtype="f16"), seed=12, shards=1),
    # Gemma 2: tied, head_dim 32 (!= hidden/heads), window 8 on layers 0 and 2,
    # qk_gain 3 (scores nearer the attention soft-cap), eps 1e-6; HF bf16 in 2 shards.
    "gemma2-tied": dict(cfg=dict(arch="gemma2", vocab=300, hidden=64, heads=4, kv_heads=2,
                                 head_dim=32, intermediate=128, layers=3, qk_gain=3.0,
                                 dtype="bf16", rms_norm_eps=1e-6), seed=13, shards=2),
    # Gemma 2 untied, small soft-caps, MQA: HF only (llama.cpp's gemma2 always
    # uses the embedding as its head).
    "gemma2-untied-caps": dict(cfg=dict(arch="gemma2", vocab=300, hidden=64, heads=4,
                                        kv_heads=1, intermediate=96, layers=2,
                                        tie_embeddings=False, attn_softcap=5.0,
                                        final_softcap=3.0, sliding_window=5),
                               seed=14, shards=1, hf_only="tie_embeddings"),
    # Gemma 3: the real pattern 6 over 6 layers (only layer 5 global), tied,
    # head_dim 32, window 8; HF f32.
    "gemma3-pattern6": dict(cfg=dict(arch="gemma3", vocab=320, hidden=64, heads=4,
                                     kv_heads=2, head_dim=32, intermediate=128, layers=6,
                                     rms_norm_eps=1e-6), seed=15, shards=1),
    # Gemma 3: pattern 2 (layers 1, 3 global), linear:4 on the global layers,
    # a final soft-cap, window 6, untied, MQA, qk_gain 1.5; HF f16.
    "gemma3-linear-untied": dict(cfg=dict(arch="gemma3", vocab=300, hidden=64, heads=4,
                                          kv_heads=1, intermediate=96, layers=4,
                                          sliding_window_pattern=2, sliding_window=6,
                                          rope_scaling="linear:4", final_softcap=15.0,
                                          tie_embeddings=False, qk_gain=1.5, dtype="f16"),
                                 seed=16, shards=1),
}
# Architectures with their own checks (check_new_arch) and longer prompts
# (24 tokens: the windows of 5 to 8 keys matter).
NEW_ARCHES = ("phi3", "gemma2", "gemma3")


# ---------------------------------------------------------------- safetensors

def parse_safetensors_independently(path: str) -> tuple[dict, dict]:
    """A separate minimal reader: returns ({name: f64 array}, layout facts)."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", None)
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    contiguous = spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    facts = {"data_start_aligned": base % 8 == 0,
             "contiguous": contiguous,
             "ends_at_eof": base + spans[-1][1] == len(data),
             "all_aligned": all((base + s) % 8 == 0 for s, _, _ in spans),
             "metadata": meta}
    out = {}
    for name, v in header.items():
        s, e = v["data_offsets"]
        raw = np.frombuffer(data, dtype=np.uint8, count=e - s, offset=base + s)
        if v["dtype"] == "F32":
            a = raw.view("<f4").astype(np.float64)
        elif v["dtype"] == "F16":
            a = raw.view("<f2").astype(np.float64)
        elif v["dtype"] == "BF16":
            a = (raw.view("<u2").astype(np.uint32) << 16).view("<f4").astype(np.float64)
        else:
            raise ValueError(v["dtype"])
        out[name] = a.reshape(v["shape"])
    return out, facts


def check_hf(tag: str, folder: str, cfg: sm.Config, seed: int, shards: int) -> None:
    files = sorted(os.listdir(folder))
    want = {"config.json", "generation_config.json", "tokenizer.json",
            "tokenizer_config.json", "special_tokens_map.json"}
    if shards == 1:
        want.add("model.safetensors")
    else:
        want.add("model.safetensors.index.json")
        want.update(f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1))
    check(f"{tag}/hf/files", set(files) == want, f"{files}")

    weights = sm.make_weights(cfg, seed)
    got: dict = {}
    facts_all = []
    st_files = [f for f in files if f.endswith(".safetensors")]
    for f in st_files:
        w, facts = parse_safetensors_independently(os.path.join(folder, f))
        facts_all.append(facts)
        got.update(w)
    check(f"{tag}/hf/safetensors-layout",
          all(f["data_start_aligned"] and f["contiguous"] and f["ends_at_eof"]
              and f["metadata"] == {"format": "pt"} for f in facts_all), str(facts_all))
    check(f"{tag}/hf/safetensors-8byte-aligned", all(f["all_aligned"] for f in facts_all))
    check(f"{tag}/hf/tensor-names", list(sorted(got)) == sorted(weights),
          f"{sorted(set(got) ^ set(weights))}")
    exact = all(got[k].shape == weights[k].shape
                and np.array_equal(got[k], weights[k].astype(np.float64)) for k in weights)
    check(f"{tag}/hf/values==make_weights", exact)
    mine = sm.read_hf_weights(folder)
    check(f"{tag}/hf/read_hf_weights", all(np.array_equal(mine[k], weights[k]) for k in weights)
          and set(mine) == set(weights))
    if shards > 1:
        idx = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
        esize = {"f32": 4, "f16": 2, "bf16": 2}[cfg.dtype]
        check(f"{tag}/hf/index", set(idx["weight_map"]) == set(weights)
              and idx["metadata"]["total_size"] == sum(w.size * esize for w in weights.values()))

    c = json.load(open(os.path.join(folder, "config.json")))
    arch_cls = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                "mistral": "MistralForCausalLM", "qwen3": "Qwen3ForCausalLM",
                "qwen3moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM",
                "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
                "gemma3": "Gemma3ForCausalLM"}[cfg.arch]
    model_type = {"qwen3moe": "qwen3_moe", "gemma3": "gemma3_text"}.get(cfg.arch, cfg.arch)
    v = sm.build_vocab(cfg.vocab)
    # Phi-3 configs carry no head_dim (HF derives hidden / heads); Gemma's MLP
    # reads hidden_activation (gemma2 configs carry hidden_act too, gemma3's not).
    act = {"gemma2": "gelu_pytorch_tanh", "gemma3": None}.get(cfg.arch, "silu")
    ok = (c["model_type"] == model_type and c["architectures"] == [arch_cls]
          and c["vocab_size"] == cfg.vocab and c["hidden_size"] == cfg.hidden
          and c["intermediate_size"] == cfg.intermediate
          and c["num_hidden_layers"] == cfg.layers
          and c["num_attention_heads"] == cfg.heads
          and c["num_key_value_heads"] == cfg.kv_heads
          and c.get("head_dim") == (None if cfg.arch == "phi3" else cfg.head_dim)
          and c["tie_word_embeddings"] == cfg.tie_embeddings
          and c["torch_dtype"] == sm.HF_DTYPES[cfg.dtype][1]
          and c["rope_theta"] == cfg.rope_theta and c["rope_scaling"] == cfg.rope_scaling
          and c["max_position_embeddings"] == cfg.max_position
          and c["bos_token_id"] == v.bos_id and c["eos_token_id"] == v.eos_id
          and c.get("hidden_act") == act and "rms_norm_eps" in c)
    if cfg.arch == "phi3":
        # The keys Phi3Config reads (and convert_hf_to_gguf's
        # original_max_position_embeddings), as Phi-3-mini's config.
        ok = (ok and c["sliding_window"] == cfg.sliding_window
              and c["original_max_position_embeddings"] == cfg.max_position
              and c["partial_rotary_factor"] == 1.0 and c["attention_bias"] is False
              and cfg.heads * cfg.head_dim == cfg.hidden)
    if cfg.arch in ("gemma2", "gemma3"):
        ok = (ok and c["hidden_activation"] == "gelu_pytorch_tanh"
              and c["query_pre_attn_scalar"] == cfg.query_pre_attn_scalar == cfg.head_dim
              and c["sliding_window"] == cfg.sliding_window and c["attention_bias"] is False
              and c["final_logit_softcapping"] == cfg.final_softcap
              and c["cache_implementation"] == "hybrid")
    if cfg.arch == "gemma2":
        ok = (ok and c["attn_logit_softcapping"] == cfg.attn_softcap
              and "layer_types" not in c and "sliding_window_pattern" not in c)
    if cfg.arch == "gemma3":
        # Both the 4.50 key and 4.53's layer_types, which must agree with it.
        types = ["sliding_attention" if (i + 1) % cfg.sliding_window_pattern
                 else "full_attention" for i in range(cfg.layers)]
        ok = (ok and c["attn_logit_softcapping"] is None
              and c["sliding_window_pattern"] == cfg.sliding_window_pattern
              and c["layer_types"] == types and "full_attention" in types
              and "sliding_attention" in types
              and c["rope_local_base_freq"] == cfg.rope_local_theta == 10000.0
              and c["transformers_version"] == "4.53.0")
    if cfg.arch == "qwen2":
        ok = ok and c["attention_bias"] is True and c["use_sliding_window"] is False
    if cfg.arch == "mistral":
        ok = ok and c["sliding_window"] == cfg.sliding_window and "attention_bias" not in c
    if cfg.arch == "llama":
        ok = ok and c["attention_bias"] == cfg.qkv_bias
    if cfg.arch == "qwen3":
        # The keys Qwen3Config reads, with its inactive window as real configs
        # carry it; transformers knows qwen3 from 4.51 on.
        ok = (ok and c["attention_bias"] is False and c["use_sliding_window"] is False
              and c["sliding_window"] is None and c["max_window_layers"] == cfg.layers
              and c["transformers_version"] == "4.51.0")
    if cfg.arch == "qwen3moe":
        # The keys Qwen3MoeConfig reads: every layer sparse, the experts'
        # width apart from the dense intermediate_size.
        ok = (ok and c["attention_bias"] is False and c["use_sliding_window"] is False
              and c["sliding_window"] is None and c["max_window_layers"] == cfg.layers
              and c["num_experts"] == cfg.experts
              and c["num_experts_per_tok"] == cfg.experts_per_tok
              and c["moe_intermediate_size"] == cfg.moe_intermediate
              and c["norm_topk_prob"] is cfg.norm_topk_prob
              and c["decoder_sparse_step"] == 1 and c["mlp_only_layers"] == []
              and c["output_router_logits"] is False and c["router_aux_loss_coef"] == 0.001
              and c["transformers_version"] == "4.51.0" and "num_local_experts" not in c)
    if cfg.arch == "mixtral":
        ok = (ok and c["num_local_experts"] == cfg.experts
              and c["num_experts_per_tok"] == cfg.experts_per_tok
              and c["sliding_window"] is None and "attention_bias" not in c
              and c["output_router_logits"] is False and "router_aux_loss_coef" in c
              and "num_experts" not in c and "moe_intermediate_size" not in c)
    check(f"{tag}/hf/config.json", ok, json.dumps(c))
    # (qk_gain is in the weights only, no config carries it)
    check(f"{tag}/hf/config-roundtrip", sm.read_hf_config(folder) == sm.make_config(
        cfg, qk_gain=1.0))

    tj = json.load(open(os.path.join(folder, "tokenizer.json")))
    model = tj["model"]
    ids = list(model["vocab"].values()) + [a["id"] for a in tj["added_tokens"]]
    id_to_tok = {i: t for t, i in model["vocab"].items()}
    id_to_tok.update({a["id"]: a["content"] for a in tj["added_tokens"]})
    merges_ok = all(len(m.split(" ")) == 2 and m.split(" ")[0] in model["vocab"]
                    and m.split(" ")[1] in model["vocab"]
                    and m.replace(" ", "") in model["vocab"] for m in model["merges"])
    specials = {a["content"]: a["id"] for a in tj["added_tokens"]}
    check(f"{tag}/hf/tokenizer.json",
          model["type"] == "BPE" and sorted(ids) == list(range(cfg.vocab))
          and tj["pre_tokenizer"]["type"] == "ByteLevel" and tj["pre_tokenizer"]["use_regex"]
          and tj["decoder"]["type"] == "ByteLevel" and merges_ok
          and [id_to_tok[i] for i in range(256)] == [sm.bytes_to_unicode()[b] for b in range(256)]
          and specials.get("<|endoftext|>") == cfg.vocab - 3
          and specials.get("<|im_start|>") == cfg.vocab - 2
          and specials.get("<|im_end|>") == cfg.vocab - 1,
          f"{len(ids)} ids, {len(model['merges'])} merges")
    try:  # the official safetensors library (its validating parser), where installed
        from safetensors import deserialize
        off = {}
        for f in st_files:
            for name, t in deserialize(open(os.path.join(folder, f), "rb").read()):
                off[name] = t
        st_dtype = sm.HF_DTYPES[cfg.dtype][0]
        same = set(off) == set(weights) and all(
            off[k]["dtype"].upper() == st_dtype and list(off[k]["shape"]) == list(weights[k].shape)
            and bytes(off[k]["data"]) == sm._tensor_bytes(weights[k], cfg.dtype)
            for k in weights)
        check(f"{tag}/hf/official-safetensors-loads", same)
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001
        check(f"{tag}/hf/official-safetensors-loads", False, repr(e))
    try:  # the official tokenizers library, where installed
        import tokenizers
        tk = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        text = "The compiler reads the text, and 2 + 2 = 4!\nOnce upon a time..."
        if HAVE_REGEX:  # the reference encoder needs `regex` for non-ASCII text
            text += " \u00e9\u00e8 \U0001F600 caf\u00e9"
        ref = sm.build_vocab(cfg.vocab)
        got_ids = tk.encode(text).ids
        chat = "<|im_start|>user\nhi<|im_end|>"
        chat_ids = tk.encode(chat).ids
        check(f"{tag}/hf/tokenizers-encode==reference",
              got_ids == ref.encode(text) and tk.decode(got_ids) == text
              and tk.get_vocab_size() == cfg.vocab
              and chat_ids[0] == ref.special["<|im_start|>"]
              and chat_ids[-1] == ref.special["<|im_end|>"],
              f"{len(got_ids)} tokens" if got_ids == ref.encode(text)
              else f"{got_ids} vs {ref.encode(text)}; {chat_ids}")
    except ImportError:
        pass
    tc = json.load(open(os.path.join(folder, "tokenizer_config.json")))
    try:  # the chat template renders as ChatML, where jinja2 is installed
        import jinja2
        out = jinja2.Environment().from_string(tc["chat_template"]).render(
            messages=[{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Hi"}], add_generation_prompt=True)
        check(f"{tag}/hf/chat_template-renders", out == (
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n"), repr(out))
    except ImportError:
        pass
    check(f"{tag}/hf/tokenizer_config.json",
          tc["bos_token"] == "<|endoftext|>" and tc["eos_token"] == "<|im_end|>"
          and "<|im_start|>" in tc["chat_template"] and tc["add_bos_token"] is False)


# ----------------------------------------------------------------------- GGUF

def gguf_field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    return f.contents() if hasattr(f, "contents") else f.parts[f.data[0]].tolist()


def check_gguf(tag: str, path: str, cfg: sm.Config, seed: int, gguf_type: str) -> None:
    import gguf
    r = gguf.GGUFReader(path)
    arch = sm.gguf_arch(cfg)
    v = sm.build_vocab(cfg.vocab)
    kv = {
        "general.architecture": arch,
        f"{arch}.context_length": cfg.max_position,
        f"{arch}.embedding_length": cfg.hidden,
        f"{arch}.block_count": cfg.layers,
        f"{arch}.feed_forward_length": cfg.intermediate,
        f"{arch}.attention.head_count": cfg.heads,
        f"{arch}.attention.head_count_kv": cfg.kv_heads,
        f"{arch}.attention.key_length": cfg.head_dim,
        f"{arch}.attention.value_length": cfg.head_dim,
        f"{arch}.rope.dimension_count": cfg.head_dim,
        f"{arch}.vocab_size": cfg.vocab,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.bos_token_id": v.bos_id,
        "tokenizer.ggml.eos_token_id": v.eos_id,
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.chat_template": sm.CHAT_TEMPLATE,
    }
    if cfg.moe:
        # convert_hf_to_gguf.py's keys: qwen3moe keeps the dense intermediate
        # in feed_forward_length and the experts' width apart; llama (Mixtral)
        # has its experts feed_forward_length wide.
        kv[f"{arch}.expert_count"] = cfg.experts
        kv[f"{arch}.expert_used_count"] = cfg.experts_per_tok
        if cfg.arch == "qwen3moe":
            kv[f"{arch}.expert_feed_forward_length"] = cfg.moe_intermediate
    bad = {k: (gguf_field(r, k), want) for k, want in kv.items() if gguf_field(r, k) != want}
    eps = gguf_field(r, f"{arch}.attention.layer_norm_rms_epsilon")
    base = gguf_field(r, f"{arch}.rope.freq_base")
    if not (eps is not None and math.isclose(eps, cfg.rms_norm_eps, rel_tol=1e-6)):
        bad["eps"] = (eps, cfg.rms_norm_eps)
    if not (base is not None and math.isclose(base, cfg.rope_theta, rel_tol=1e-6)):
        bad["freq_base"] = (base, cfg.rope_theta)
    rs = cfg.rope_scaling
    if rs and rs["rope_type"] == "linear":
        if gguf_field(r, f"{arch}.rope.scaling.type") != "linear" or not math.isclose(
                gguf_field(r, f"{arch}.rope.scaling.factor"), rs["factor"]):
            bad["rope.scaling"] = "linear keys"
    if cfg.sliding_window and gguf_field(r, f"{arch}.attention.sliding_window") != cfg.sliding_window:
        bad["sliding_window"] = gguf_field(r, f"{arch}.attention.sliding_window")
    bad.update(new_arch_key_problems(r, cfg))
    check(f"{tag}/gguf-{gguf_type}/keys", not bad, str(bad))
    toks = gguf_field(r, "tokenizer.ggml.tokens")
    types = gguf_field(r, "tokenizer.ggml.token_type")
    merges = gguf_field(r, "tokenizer.ggml.merges")
    check(f"{tag}/gguf-{gguf_type}/vocab", toks == v.tokens and types == v.token_types
          and merges == v.merges, f"{len(toks or [])} tokens")

    plan = sm.gguf_tensor_plan(cfg, gguf_type)
    tensors = {t.name: t for t in r.tensors}
    check(f"{tag}/gguf-{gguf_type}/tensor-names",
          list(tensors) == [p["gguf"] for p in plan], f"{list(tensors)}")
    if cfg.arch == "qwen3":
        # Spelled out here rather than taken from the plan: llama.cpp's qwen3
        # loads exactly these per layer (no biases), the norms f32 [head_dim].
        want = [f"blk.0.{n}.weight" for n in (
            "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
            "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
        got = [n for n in tensors if n.startswith("blk.0.")]
        norms = [tensors[f"blk.{i}.attn_{qk}_norm.weight"] for i in range(cfg.layers)
                 for qk in "qk"]
        check(f"{tag}/gguf-{gguf_type}/qwen3-layer-tensors",
              got == want and all(t.tensor_type.name == "F32"
                                  and [int(x) for x in t.shape] == [cfg.head_dim]
                                  for t in norms), f"{got}")
        # llama.cpp runs qwen3 with NEOX RoPE: the arch must say so, and the
        # Q/K rows stay in HF order (no LlamaModel.permute).
        hf = sm.make_weights(cfg, seed)
        same_rows = gguf_type != "f32" or all(
            np.array_equal(np.asarray(tensors[f"blk.{i}.attn_{x}.weight"].data).reshape(
                hf[f"model.layers.{i}.self_attn.{x}_proj.weight"].shape),
                hf[f"model.layers.{i}.self_attn.{x}_proj.weight"])
            for i in range(cfg.layers) for x in "qk")
        check(f"{tag}/gguf-{gguf_type}/qwen3-neox-unpermuted",
              gguf_field(r, "general.architecture") == "qwen3" and same_rows)
    if cfg.moe:
        check_gguf_moe(tag, r, cfg, seed, gguf_type)
    if cfg.arch in NEW_ARCHES:
        check_gguf_new_arch_tensors(tag, r, cfg, gguf_type)
    weights = sm.make_weights(cfg, seed)
    deq_api = sm.dequantized_weights(cfg, seed, gguf_type)
    shapes_ok = types_ok = True
    worst = 0.0
    exact_api = True
    for p in plan:
        t = tensors.get(p["gguf"])
        if t is None:
            continue
        shapes_ok &= [int(x) for x in t.shape] == p["shape"][::-1]
        types_ok &= t.tensor_type.name.lower() == p["type"]
        a = gguf.quants.dequantize(t.data, t.tensor_type).reshape(p["shape"]).astype(np.float64)
        if p.get("hf_experts"):  # a MoE layer's experts, stacked: expert m at [m]
            src32 = np.stack([weights[n] for n in p["hf_experts"]])
            exact_api &= np.array_equal(a, np.stack([deq_api[n] for n in p["hf_experts"]]))
        elif p["hf"] is None:  # rope_freqs
            exact_api &= np.array_equal(a, sm.llama3_rope_freqs(cfg))
            continue
        else:
            if p["permuted"]:
                a = sm.unpermute_qk(a, cfg.heads,
                                    cfg.heads if ".q_proj." in p["hf"] else cfg.kv_heads)
            src32 = weights[p["hf"]]
            if cfg.arch in ("gemma2", "gemma3") and p["hf"].endswith("norm.weight"):
                # Gemma: the GGUF holds 1 + w (convert_hf_to_gguf adds 1), exactly.
                src32 = np.float32(1.0) + src32
                exact_api &= np.array_equal(a - 1.0, deq_api[p["hf"]])
            else:
                exact_api &= np.array_equal(a, deq_api[p["hf"]])
        src = src32.astype(np.float64)
        if p["type"] in ("f32", "f16", "bf16") or len(p["shape"]) == 1:
            # Float types: exactly the source rounded to nearest (even).
            want = sm._round_to_dtype(src32, p["type"]).astype(np.float64)
            if not np.array_equal(a, want):
                worst = math.inf
        else:
            # Allowed error per element: one quantization step of its block
            # (plus the f16 scale's rounding), relative to the block's range.
            # k-quants: the 256-element super-block's range (their sub-block
            # scales are themselves quantized).
            blk = 256 if p["type"].endswith("_k") else 32
            rows = src.reshape(-1, blk)
            rng = np.abs(rows).max(axis=1, keepdims=True) * (
                2 if p["type"] in ("q4_1", "q5_1", "q2_k", "q4_k", "q5_k") else 1)
            levels = {"q8_0": 127, "q5_0": 16, "q5_1": 31, "q4_0": 8, "q4_1": 15, "q2_k": 3,
                      "q3_k": 4, "q4_k": 15, "q5_k": 31, "q6_k": 32}[p["type"]]
            err = np.abs(a.reshape(rows.shape) - rows) / np.maximum(rng / levels, 1e-30)
            worst = max(worst, float(err.max()))
    check(f"{tag}/gguf-{gguf_type}/tensor-shapes+types", shapes_ok and types_ok)
    if gguf_type in ("f32", "f16", "bf16"):
        check(f"{tag}/gguf-{gguf_type}/values-exact", worst == 0.0)
    else:
        check(f"{tag}/gguf-{gguf_type}/values-within-quant-error", worst <= 1.01,
              f"worst error {worst:.3f} steps")
    check(f"{tag}/gguf-{gguf_type}/dequantized_weights-api", exact_api)


def new_arch_key_problems(r, cfg: sm.Config) -> dict:
    """The keys llama.cpp's phi3 / gemma2 / gemma3 loaders read, spelled out
    here: {key: (found, wanted)} of those that are wrong (absent where they
    must not be: wanted None)."""
    a = cfg.arch
    want: dict = {}
    if a == "phi3":
        # convert_hf_to_gguf.py's Phi3MiniModel: the original context, the
        # window always (0: none; llama.cpp's phi3 ignores it).
        want = {"phi3.rope.scaling.original_context_length": cfg.max_position,
                "phi3.attention.sliding_window": cfg.sliding_window or 0}
    elif a == "gemma2":
        want = {"gemma2.attn_logit_softcapping": cfg.attn_softcap,
                "gemma2.final_logit_softcapping": cfg.final_softcap,
                "gemma2.attention.sliding_window": cfg.sliding_window,
                "gemma2.attention.sliding_window_pattern": None,   # llama.cpp: 2
                "gemma2.rope.freq_base_swa": None}                 # = freq_base
    elif a == "gemma3":
        n = cfg.sliding_window_pattern
        want = {"gemma3.rope.freq_base_swa": cfg.rope_local_theta,
                "gemma3.attention.sliding_window": cfg.sliding_window if n != 1 else None,
                # absent = llama.cpp's default 6, as convert_hf_to_gguf leaves it
                "gemma3.attention.sliding_window_pattern": n if n not in (1, 6) else None,
                "gemma3.final_logit_softcapping": cfg.final_softcap,
                "gemma3.attn_logit_softcapping": None}
    bad = {}
    for k, w in want.items():
        got = gguf_field(r, k)
        if not (got == w if w is None or isinstance(w, int) else
                got is not None and math.isclose(got, w, rel_tol=1e-6)):
            bad[k] = (got, w)
    return bad


# Per layer, the tensors llama.cpp's loaders create (llama_model_phi3 /
# gemma2 / gemma3::load_arch_tensors), in this tool's file order, spelled out
# here; norms f32.
NEW_ARCH_LAYER_TENSORS = {
    "phi3": ("attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"),
    "gemma2": ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "post_attention_norm",
               "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm"),
    "gemma3": ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
               "attn_k_norm", "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up",
               "ffn_down", "post_ffw_norm"),
}


def check_gguf_new_arch_tensors(tag: str, r, cfg: sm.Config, gguf_type: str) -> None:
    """phi3 / gemma2 / gemma3: each layer holds exactly llama.cpp's tensors
    with its shapes (phi3: attn_qkv [q + 2 kv, hidden], ffn_up [2 I, hidden];
    Gemma: attn_q_norm / attn_k_norm [head_dim]), norms f32; no output.weight
    for a tied model (gemma2 never has one)."""
    tensors = {t.name: t for t in r.tensors}
    H, I, D = cfg.hidden, cfg.intermediate, cfg.head_dim
    q, kv = cfg.heads * D, cfg.kv_heads * D
    shapes = {"attn_norm": [H], "attn_qkv": [q + 2 * kv, H], "attn_output": [H, q],
              "ffn_norm": [H], "ffn_up": [2 * I, H] if cfg.arch == "phi3" else [I, H],
              "ffn_down": [H, I], "attn_q": [q, H], "attn_k": [kv, H], "attn_v": [kv, H],
              "attn_q_norm": [D], "attn_k_norm": [D], "post_attention_norm": [H],
              "ffn_gate": [I, H], "post_ffw_norm": [H]}
    detail = []
    for i in range(cfg.layers):
        got = [n.split(".", 2)[2] for n in tensors if n.startswith(f"blk.{i}.")]
        want = [f"{n}.weight" for n in NEW_ARCH_LAYER_TENSORS[cfg.arch]]
        if got != want:
            detail.append(f"blk.{i}: {got}")
        for n in NEW_ARCH_LAYER_TENSORS[cfg.arch]:
            t = tensors[f"blk.{i}.{n}.weight"]
            if [int(x) for x in t.shape][::-1] != shapes[n]:
                detail.append(f"blk.{i}.{n}: numpy shape {[int(x) for x in t.shape][::-1]}")
            if n.endswith("norm") and t.tensor_type.name != "F32":
                detail.append(f"blk.{i}.{n}: {t.tensor_type.name}")
    if ("output.weight" in tensors) == cfg.tie_embeddings:
        detail.append("output.weight present" if cfg.tie_embeddings else "output.weight missing")
    check(f"{tag}/gguf-{gguf_type}/{cfg.arch}-layer-tensors", not detail,
          "; ".join(detail) or f"{len(NEW_ARCH_LAYER_TENSORS[cfg.arch])} per layer")


# GGUF layer tensor -> HF name, per arch (spelled out here, apart from
# synth_model's tables): how the GGUF form is read back in gguf_form_forward.
GGUF_TO_HF_NEW = {
    "phi3": {"attn_norm": "input_layernorm", "attn_qkv": "self_attn.qkv_proj",
             "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_up": "mlp.gate_up_proj", "ffn_down": "mlp.down_proj"},
    "gemma": {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
              "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
              "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
              "ffn_norm": "pre_feedforward_layernorm", "ffn_gate": "mlp.gate_proj",
              "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
              "post_ffw_norm": "post_feedforward_layernorm"},
}


def gguf_form_forward(tag: str, path: str, cfg: sm.Config, tokens: list[int],
                      ref: np.ndarray) -> None:
    """The f32 GGUF read back (names mapped here, Gemma's norms used as
    stored: 1 + w) computes the HF folder's logits bit for bit."""
    import gguf
    r = gguf.GGUFReader(path)
    table = GGUF_TO_HF_NEW["phi3" if cfg.arch == "phi3" else "gemma"]
    W = {}
    for t in r.tensors:
        a = np.asarray(t.data, np.float32).reshape([int(x) for x in t.shape][::-1])
        if t.name == "token_embd.weight":
            W["model.embed_tokens.weight"] = a
        elif t.name == "output_norm.weight":
            W["model.norm.weight"] = a
        elif t.name == "output.weight":
            W["lm_head.weight"] = a
        else:
            _, i, n, _ = t.name.split(".")
            W[f"model.layers.{i}.{table[n]}.weight"] = a
    got = forward(cfg, W, tokens, interleaved=False, gguf_norms=True)
    err = float(np.abs(got - ref).max())
    check(f"{tag}/gguf-f32/forward==hf", err == 0.0 and set(W) == set(sm.make_weights(cfg, 0)),
          f"the GGUF's tensors{' (norms 1 + w)' if cfg.arch != 'phi3' else ''} give the HF "
          f"logits: max abs diff {err:.1e}")


def check_gguf_moe(tag: str, r, cfg: sm.Config, seed: int, gguf_type: str) -> None:
    """The MoE tensors as llama.cpp loads them, spelled out here rather than
    taken from the plan: per layer ffn_gate_inp (router, f32 whatever the
    type, numpy [E, hidden]), then ffn_gate_exps / ffn_up_exps [E, I, hidden]
    and ffn_down_exps [E, hidden, I] in gguf_type (f16 where rows are not whole
    blocks), expert m at index m of the first numpy axis; no dense ffn_*."""
    tensors = {t.name: t for t in r.tensors}
    E, H, I = cfg.experts, cfg.hidden, cfg.expert_intermediate
    floats = ("f32", "f16", "bf16")
    block = 256 if gguf_type.endswith("_k") else 32

    def mtype(cols: int) -> str:  # rows not whole blocks: f16, as convert_hf_to_gguf
        return "F16" if gguf_type not in floats and cols % block else gguf_type.upper()
    detail = []
    for i in range(cfg.layers):
        names = [n for n in tensors if n.startswith(f"blk.{i}.")]
        tail = [n.split(".", 2)[2] for n in names if ".ffn_" in n]
        if tail != ["ffn_norm.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
                    "ffn_up_exps.weight", "ffn_down_exps.weight"]:
            detail.append(f"blk.{i}: {tail}")
        for name, np_shape, ttype in (("ffn_gate_inp", [E, H], "F32"),
                                      ("ffn_gate_exps", [E, I, H], mtype(H)),
                                      ("ffn_up_exps", [E, I, H], mtype(H)),
                                      ("ffn_down_exps", [E, H, I], mtype(I))):
            t = tensors[f"blk.{i}.{name}.weight"]
            got = ([int(x) for x in t.shape], t.tensor_type.name)
            if got != (np_shape[::-1], ttype):
                detail.append(f"{name}: {got}, want {(np_shape[::-1], ttype)}")
    check(f"{tag}/gguf-{gguf_type}/moe-tensors", not detail,
          "; ".join(detail) or f"{cfg.layers} layers, router F32, gate/up stacks {mtype(H)}, "
          f"down {mtype(I)}")
    if gguf_type != "f32":
        return
    # f32: each stack holds the HF experts in index order, bit for bit (HF names
    # spelled out here, independent of synth_model's name tables).
    W = sm.make_weights(cfg, seed)
    if cfg.arch == "qwen3moe":
        hf = {"ffn_gate_inp": "mlp.gate", "ffn_gate_exps": "mlp.experts.{m}.gate_proj",
              "ffn_up_exps": "mlp.experts.{m}.up_proj",
              "ffn_down_exps": "mlp.experts.{m}.down_proj"}
    else:
        hf = {"ffn_gate_inp": "block_sparse_moe.gate",
              "ffn_gate_exps": "block_sparse_moe.experts.{m}.w1",
              "ffn_up_exps": "block_sparse_moe.experts.{m}.w3",
              "ffn_down_exps": "block_sparse_moe.experts.{m}.w2"}
    same = True
    for i in range(cfg.layers):
        for g, h in hf.items():
            a = np.asarray(tensors[f"blk.{i}.{g}.weight"].data)
            if g == "ffn_gate_inp":
                same &= np.array_equal(a, W[f"model.layers.{i}.{h}.weight"])
            else:
                same &= all(np.array_equal(a[m], W[f"model.layers.{i}.{h.format(m=m)}.weight"])
                            for m in range(cfg.experts))
    check(f"{tag}/gguf-f32/moe-stacks==hf-experts-in-order", same)


# ----------------------------------------------------------- forward passes

def rope_inv_freq(cfg: sm.Config) -> np.ndarray:
    d = cfg.head_dim
    inv = cfg.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.rope_scaling
    if rs and rs["rope_type"] == "linear":
        inv = inv / rs["factor"]
    elif rs and rs["rope_type"] == "llama3":
        inv = inv / sm.llama3_rope_freqs(cfg).astype(np.float64)
    return inv


# A MoE layer's HF names (spelled out here, apart from synth_model's tables):
# router, and per expert {m} the gate, up and down projections.
MOE_HF = {"qwen3moe": ("mlp.gate", "mlp.experts.{m}.gate_proj", "mlp.experts.{m}.up_proj",
                       "mlp.experts.{m}.down_proj"),
          "mixtral": ("block_sparse_moe.gate", "block_sparse_moe.experts.{m}.w1",
                      "block_sparse_moe.experts.{m}.w3", "block_sparse_moe.experts.{m}.w2")}


def moe_per_token(cfg: sm.Config, W: dict, layer: int, h: np.ndarray,
                  routes: list | None = None) -> np.ndarray:
    """The sparse MoE block as a plain loop over tokens: softmax over all
    experts, the top k (ties to the lower index), weights renormalized when
    norm_topk_prob, sum of w * down(silu(gate h) * up h). routes, if given,
    receives this layer's [(experts, weights, router logits) per token]."""
    router, gate, up, down = (f"model.layers.{layer}.{n}" for n in MOE_HF[cfg.arch])
    out = np.zeros_like(h)
    chosen = []
    for t in range(len(h)):
        logits = W[router + ".weight"] @ h[t]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = sorted(range(cfg.experts), key=lambda e: (-p[e], e))[:cfg.experts_per_tok]
        w = np.array([p[e] for e in top])
        if cfg.norm_topk_prob:
            w /= w.sum()
        chosen.append((top, w, logits))
        for e, we in zip(top, w):
            g = W[gate.format(m=e) + ".weight"] @ h[t]
            u = W[up.format(m=e) + ".weight"] @ h[t]
            out[t] += we * (W[down.format(m=e) + ".weight"] @ (g / (1 + np.exp(-g)) * u))
    if routes is not None:
        routes.append(chosen)
    return out


def semantics(cfg: sm.Config) -> dict:
    """The knobs of HF's forward pass for cfg, spelled out here from HF's rules
    (not from synth_model's layer_windows / layer_rope_thetas): per-layer
    windows (gemma2: even layers slide, HF's `not layer_idx % 2`; gemma3:
    layer i is global iff (i + 1) % sliding_window_pattern == 0), per-layer
    inverse frequencies (gemma3's sliding layers: rope_local_theta, unscaled),
    Gemma's embedding scale, norm offset (HF computes with 1 + w), post-norms,
    score scale and soft-caps, and the MLP activation. forward() takes a
    copy with a knob changed: what a reader with that bug would compute."""
    L, gem = cfg.layers, cfg.arch in ("gemma2", "gemma3")
    if cfg.arch == "gemma2":
        windows = [cfg.sliding_window if i % 2 == 0 else None for i in range(L)]
    elif cfg.arch == "gemma3":
        windows = [cfg.sliding_window if (i + 1) % cfg.sliding_window_pattern else None
                   for i in range(L)]
    else:
        windows = [cfg.sliding_window] * L
    glob = rope_inv_freq(cfg)
    local = (cfg.rope_local_theta ** (-np.arange(0, cfg.head_dim, 2, dtype=np.float64)
                                      / cfg.head_dim)) if cfg.arch == "gemma3" else None
    return dict(windows=windows,
                inv_freq=[local if cfg.arch == "gemma3" and w else glob for w in windows],
                embed_scale=math.sqrt(cfg.hidden) if gem else 1.0,
                norm_offset=1.0 if gem else 0.0, post_norms=gem,
                score_scale=cfg.query_pre_attn_scalar ** -0.5 if gem else None,
                attn_softcap=cfg.attn_softcap, final_softcap=cfg.final_softcap,
                act="gelu_tanh" if gem else "silu")


def act_fn(name: str, x: np.ndarray) -> np.ndarray:
    if name == "silu":
        return x / (1 + np.exp(-x))
    if name == "gelu_tanh":   # HF gelu_pytorch_tanh
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu_erf":
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    raise ValueError(name)


def forward(cfg: sm.Config, W: dict, tokens: list[int], interleaved: bool,
            routes: list | None = None, sem: dict | None = None,
            gguf_norms: bool = False) -> np.ndarray:
    """float64 logits [T, vocab]. interleaved=False: HF semantics (rotate-half
    RoPE on HF weights). interleaved=True: GGML normal-mode RoPE, pairs
    (2i, 2i+1), on the weights as the GGUF stores them. MoE layers run
    moe_per_token (routes, if given, receives each layer's routing). sem:
    semantics(cfg) or a broken copy. gguf_norms: Gemma's norm weights as the
    GGUF stores them (1 + w, used as they are). Phi-3's fused qkv_proj /
    gate_up_proj are split here by rows (Q, K, V; gate, up)."""
    sem = semantics(cfg) if sem is None else sem
    W = {k: np.asarray(v, np.float64) for k, v in W.items()}
    T, H, nh, nkv, d = len(tokens), cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim
    eps = cfg.rms_norm_eps
    offset = 0.0 if gguf_norms else sem["norm_offset"]

    def rope(x, inv):  # [T, heads, d]
        ang = np.arange(T)[:, None] * inv[None, :]       # [T, d/2]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        if interleaved:
            a, b = x[..., 0::2], x[..., 1::2]
            out = np.empty_like(x)
            out[..., 0::2] = a * cos - b * sin
            out[..., 1::2] = a * sin + b * cos
            return out
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (w + offset)

    def cap(x, c):
        return x if c is None else c * np.tanh(x / c)

    x = W["model.embed_tokens.weight"][tokens] * sem["embed_scale"]
    for i in range(cfg.layers):
        p = f"model.layers.{i}."
        mask = np.tril(np.ones((T, T), bool))
        if sem["windows"][i]:
            mask &= (np.arange(T)[:, None] - np.arange(T)[None, :]) < sem["windows"][i]
        h = rms(x, W[p + "input_layernorm.weight"])

        def lin(name, inp):
            y = inp @ W[p + name + ".weight"].T
            return y + W[p + name + ".bias"] if p + name + ".bias" in W else y
        if p + "self_attn.qkv_proj.weight" in W:   # Phi-3: Q rows, K rows, V rows
            qkv = lin("self_attn.qkv_proj", h)
            q = qkv[:, :nh * d].reshape(T, nh, d)
            k = qkv[:, nh * d:(nh + nkv) * d].reshape(T, nkv, d)
            v = qkv[:, (nh + nkv) * d:].reshape(T, nkv, d)
        else:
            q = lin("self_attn.q_proj", h).reshape(T, nh, d)
            k = lin("self_attn.k_proj", h).reshape(T, nkv, d)
            v = lin("self_attn.v_proj", h).reshape(T, nkv, d)
        if p + "self_attn.q_norm.weight" in W:  # Qwen3, Gemma 3: per-head RMSNorm before RoPE
            q = rms(q, W[p + "self_attn.q_norm.weight"])
            k = rms(k, W[p + "self_attn.k_norm.weight"])
        q, k = rope(q, sem["inv_freq"][i]), rope(k, sem["inv_freq"][i])
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        s = np.einsum("thd,shd->hts", q, k)
        s = s / math.sqrt(d) if sem["score_scale"] is None else s * sem["score_scale"]
        s = cap(s, sem["attn_softcap"])
        s = np.where(mask[None], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", s, v).reshape(T, nh * d)
        a = lin("self_attn.o_proj", o)
        if sem["post_norms"]:   # Gemma: post_attention_layernorm after attention
            a = rms(a, W[p + "post_attention_layernorm.weight"])
        x = x + a
        if cfg.arch in ("gemma2", "gemma3"):
            h = rms(x, W[p + "pre_feedforward_layernorm.weight"])
        else:
            h = rms(x, W[p + "post_attention_layernorm.weight"])
        if cfg.moe:
            x = x + moe_per_token(cfg, W, i, h, routes)
            continue
        if p + "mlp.gate_up_proj.weight" in W:   # Phi-3: gate rows, then up rows
            gu = lin("mlp.gate_up_proj", h)
            g, u = gu[:, :cfg.intermediate], gu[:, cfg.intermediate:]
        else:
            g, u = lin("mlp.gate_proj", h), lin("mlp.up_proj", h)
        y = lin("mlp.down_proj", act_fn(sem["act"], g) * u)
        if sem["post_norms"]:   # Gemma: post_feedforward_layernorm after the MLP
            y = rms(y, W[p + "post_feedforward_layernorm.weight"])
        x = x + y
    x = rms(x, W["model.norm.weight"])
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return cap(x @ head.T, sem["final_softcap"])


def gguf_layout_weights(cfg: sm.Config, W: dict) -> dict:
    """HF-named weights in the GGUF's row order, read back from the file's view."""
    return {k: sm._gguf_layout(cfg, k, v) for k, v in W.items()}


def check_rope_equivalence(tag: str, cfg: sm.Config, seed: int, tokens: list[int]) -> np.ndarray:
    W = sm.make_weights(cfg, seed)
    ref = forward(cfg, W, tokens, interleaved=False)
    if cfg.moe:
        check_moe(tag, cfg, seed, W, tokens, ref)
    if cfg.arch in ("qwen2", "qwen3", "qwen3moe") + NEW_ARCHES:
        # NEOX RoPE in llama.cpp, no permutation.
        check(f"{tag}/logits-finite", bool(np.isfinite(ref).all()))
        if cfg.qk_norm:
            check_qk_norm(tag, cfg, seed, W, tokens, ref)
        if cfg.arch in NEW_ARCHES:
            check_new_arch(tag, cfg, seed, W, tokens, ref)
        return ref
    g = forward(cfg, gguf_layout_weights(cfg, W), tokens, interleaved=True)
    err = float(np.abs(g - ref).max() / np.abs(ref).max())
    check(f"{tag}/permuted-QK+interleaved-RoPE==HF", err < 1e-12, f"rel err {err:.2e}")
    # And the permutation matters (guards against a no-op permute).
    wrong = forward(cfg, W, tokens, interleaved=True)
    check(f"{tag}/unpermuted-would-differ",
          float(np.abs(wrong - ref).max() / np.abs(ref).max()) > 1e-3)
    return ref


def check_qk_norm(tag: str, cfg: sm.Config, seed: int, W: dict, tokens: list[int],
                  ref: np.ndarray) -> None:
    """q_norm / k_norm: [head_dim], their own wide spread around 1 (times
    qk_gain; Gemma 3: the weight it computes with, 1 + w, of the stored
    zero-centred w), distinct per layer and from each other, and each one
    moves the logits."""
    names = [f"model.layers.{i}.self_attn.{n}_norm.weight"
             for i in range(cfg.layers) for n in "qk"]
    off = 1.0 if cfg.arch == "gemma3" else 0.0
    ok = all(W[n].shape == (cfg.head_dim,) for n in names)
    lo = min(float((W[n] + off).min()) / cfg.qk_gain for n in names)
    hi = max(float((W[n] + off).max()) / cfg.qk_gain for n in names)
    distinct = len({W[n].tobytes() for n in names}) == len(names)
    check(f"{tag}/qk-norm-weights", ok and 0.7 <= lo and hi <= 1.3 and hi - lo > 0.4
          and distinct, f"range [{lo:.3f}, {hi:.3f}] (/ qk_gain {cfg.qk_gain:g}"
          f"{', of 1 + w' if off else ''}), {len(names)} distinct: {distinct}")
    for n in ("q", "k"):
        # Layer 0's (Gemma 3: every layer's; a deep stack of Gemma's
        # normalized residual adds damps one layer's change)
        layers = range(cfg.layers) if off else range(1)
        ones = {f"model.layers.{i}.self_attn.{n}_norm.weight":
                np.full(cfg.head_dim, 1.0 - off, np.float32) for i in layers}
        diff = float(np.abs(forward(cfg, dict(W, **ones), tokens, interleaved=False) - ref).max()
                     / np.abs(ref).max())
        check(f"{tag}/{n}_norm-matters", diff > 1e-2,
              f"{n}_norm computing with ones{' (every layer)' if off else ''}: rel diff "
              f"{diff:.1e}")
    swapped = dict(W)
    for i in range(cfg.layers):
        q, k = (f"model.layers.{i}.self_attn.{n}_norm.weight" for n in "qk")
        swapped[q], swapped[k] = W[k], W[q]
    diff = float(np.abs(forward(cfg, swapped, tokens, interleaved=False) - ref).max()
                 / np.abs(ref).max())
    check(f"{tag}/q_norm-k_norm-swap-matters", diff > 1e-2, f"rel diff {diff:.1e}")
    # qk_gain: QK-norm would cancel it on the projections, so it scales the norms.
    # (In f32: the gained values are drawn, not multiplied, so only f32 rounding
    # separates them.)
    W1 = sm.make_weights(sm.make_config(cfg, dtype="f32"), seed)
    g = sm.make_weights(sm.make_config(cfg, dtype="f32", qk_gain=3.0), seed)
    check(f"{tag}/qk_gain-scales-qk-norms",
          all(np.allclose(g[n] + off, 3 / cfg.qk_gain * (W1[n] + off), rtol=1e-6)
              for n in names)
          and all(np.array_equal(g[k], W1[k]) for k in W1 if k not in names))


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def check_new_arch(tag: str, cfg: sm.Config, seed: int, W: dict, tokens: list[int],
                   ref: np.ndarray) -> None:
    """phi3 / gemma2 / gemma3: the weights as HF stores them, synth_model's
    per-layer windows and RoPE bases as HF decides them, and that every
    feature matters: each knob of semantics() changed (what a reader with that
    bug computes), or the fused rows reordered, moves the logits by > 1e-3
    (most by far more)."""
    sem = semantics(cfg)
    check(f"{tag}/layer-windows+rope-bases==hf-rules",
          cfg.layer_windows == sem["windows"]
          and all(np.array_equal(rope_inv_freq_of(cfg, th, i), sem["inv_freq"][i])
                  for i, th in enumerate(cfg.layer_rope_thetas)),
          f"windows {cfg.layer_windows}, bases {cfg.layer_rope_thetas}")
    moved: dict[str, float] = {}

    least: dict[str, float] = {}

    def broken(label: str, sem2: dict | None = None, W2: dict | None = None,
               at_least: float = 1e-3) -> None:
        moved[label] = rel_diff(forward(cfg, W if W2 is None else W2, tokens,
                                        interleaved=False, sem=sem2), ref)
        least[label] = at_least
    H, D, L = cfg.hidden, cfg.head_dim, cfg.layers
    if cfg.arch == "phi3":
        q, kv, I = cfg.heads * D, cfg.kv_heads * D, cfg.intermediate
        # The fused tensors are llama's q/k/v and gate/up, stacked by rows:
        # split, a llama model computes the same logits.
        split = {}
        for k_, a in W.items():
            if k_.endswith("qkv_proj.weight"):
                p_ = k_[:-len("qkv_proj.weight")]
                split.update({p_ + "q_proj.weight": a[:q], p_ + "k_proj.weight": a[q:q + kv],
                              p_ + "v_proj.weight": a[q + kv:]})
            elif k_.endswith("gate_up_proj.weight"):
                p_ = k_[:-len("gate_up_proj.weight")]
                split.update({p_ + "gate_proj.weight": a[:I], p_ + "up_proj.weight": a[I:]})
            else:
                split[k_] = a
        llama = sm.make_config(cfg, arch="llama", rope_theta=cfg.rope_theta,
                               sliding_window=None)
        e = rel_diff(forward(llama, split, tokens, interleaved=False,
                             sem=dict(semantics(llama), windows=sem["windows"])), ref)
        check(f"{tag}/phi3==llama-with-split-tensors", e < 1e-13, f"rel err {e:.1e}")
        # The Q/K rows carry qk_gain, the V rows not (drawn, not multiplied).
        g3 = sm.make_weights(sm.make_config(cfg, dtype="f32", qk_gain=3.0), seed)
        W1 = sm.make_weights(sm.make_config(cfg, dtype="f32"), seed)
        qkv = [n for n in W1 if n.endswith("qkv_proj.weight")]
        check(f"{tag}/qk_gain-scales-q-k-rows-only",
              all(np.allclose(g3[n][:q + kv], 3 * W1[n][:q + kv], rtol=1e-6)
                  and np.array_equal(g3[n][q + kv:], W1[n][q + kv:]) for n in qkv)
              and all(np.array_equal(g3[n], W1[n]) for n in W1 if n not in qkv))
        kv_swap, q_roll, gu_swap = dict(W), dict(W), dict(W)
        for i in range(L):
            p_ = f"model.layers.{i}."
            a = W[p_ + "self_attn.qkv_proj.weight"]
            kv_swap[p_ + "self_attn.qkv_proj.weight"] = np.concatenate(
                [a[:q], a[q + kv:], a[q:q + kv]])
            q_roll[p_ + "self_attn.qkv_proj.weight"] = np.concatenate(
                [np.roll(a[:q], D, axis=0), a[q:]])
            b = W[p_ + "mlp.gate_up_proj.weight"]
            gu_swap[p_ + "mlp.gate_up_proj.weight"] = np.concatenate([b[I:], b[:I]])
        broken("K and V rows of qkv_proj swapped", W2=kv_swap)
        broken("Q heads of qkv_proj rotated by one", W2=q_roll)
        broken("gate and up halves of gate_up_proj swapped", W2=gu_swap)
        if cfg.sliding_window:
            broken("no window", dict(sem, windows=[None] * L))
    else:
        norms = [n for n in W if n.endswith("norm.weight")]
        wq = max(float(np.abs(W[n]).max()) for n in norms if "_norm" not in n.split(".")[-2])
        exact = all(np.array_equal((np.float32(1) + W[n]).astype(np.float64),
                                   1.0 + W[n].astype(np.float64)) for n in norms)
        check(f"{tag}/gemma-norms-zero-centred+exact", 0.05 < wq <= 0.101 and exact,
              f"layer norms |w| up to {wq:.3f}; 1 + w exact in float32 for all "
              f"{len(norms)}: {exact}")
        broken("norm weights without the +1", dict(sem, norm_offset=0.0))
        broken("no embedding scale", dict(sem, embed_scale=1.0))
        broken("no post-attention / post-feedforward norms", dict(sem, post_norms=False))
        broken("scores x (hidden/heads)^-0.5", dict(sem, score_scale=(H / cfg.heads) ** -0.5)
               if D != H // cfg.heads else dict(sem, score_scale=(2 * D) ** -0.5))
        broken("silu instead of gelu", dict(sem, act="silu"))
        # The two GELUs differ by < 2e-4 per element: a small, but clear move.
        broken("exact (erf) gelu instead of tanh", dict(sem, act="gelu_erf"), at_least=1e-5)
        broken("no windows", dict(sem, windows=[None] * L))
        broken("window on every layer", dict(sem, windows=[cfg.sliding_window] * L))
        broken("window one key wider", dict(sem, windows=[w and w + 1 for w in sem["windows"]]))
        if cfg.final_softcap:
            broken("no final soft-cap", dict(sem, final_softcap=None))
        if cfg.arch == "gemma2":
            broken("no attention soft-cap", dict(sem, attn_softcap=None))
            broken("odd layers slide, not even", dict(
                sem, windows=[None if w else cfg.sliding_window for w in sem["windows"]]))
        else:
            n = cfg.sliding_window_pattern
            broken("global layers at i % pattern == 0", dict(
                sem, windows=[None if i % n == 0 else cfg.sliding_window for i in range(L)]))
            broken("rope_theta on every layer", dict(
                sem, inv_freq=[rope_inv_freq(cfg)] * L))
            broken("rope_local_theta on every layer", dict(
                sem, inv_freq=[sem["inv_freq"][0]] * L))
            if cfg.rope_scaling:
                f = cfg.rope_scaling["factor"]
                broken("linear scaling on the local layers too", dict(
                    sem, inv_freq=[v / f if w else v for v, w in
                                   zip(sem["inv_freq"], sem["windows"])]))
                broken("no linear scaling", dict(sem, inv_freq=[
                    v if w else v * f for v, w in zip(sem["inv_freq"], sem["windows"])]))
            qk1 = {n: (W[n] - 1.0).astype(np.float32) for n in norms
                   if n.endswith(("q_norm.weight", "k_norm.weight"))}
            broken("q_norm / k_norm without the +1", W2=dict(W, **qk1))
    check(f"{tag}/{cfg.arch}-features-matter", all(moved[k] > least[k] for k in moved),
          "; ".join(f"{k}: {v:.1e}" for k, v in moved.items()))


def rope_inv_freq_of(cfg: sm.Config, theta: float, layer: int) -> np.ndarray:
    """Layer's inverse frequencies from synth_model's layer_rope_thetas: the
    global ones (rope_inv_freq, with scaling) where theta is rope_theta and
    the layer is global; else unscaled at theta."""
    if theta == cfg.rope_theta and (cfg.arch != "gemma3" or cfg.layer_windows[layer] is None):
        return rope_inv_freq(cfg)
    return theta ** (-np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim)


def check_moe(tag: str, cfg: sm.Config, seed: int, W: dict, tokens: list[int],
              ref: np.ndarray) -> None:
    """The MoE weights make routing decisive and the experts distinct, and
    every part of the block matters: which expert (all experts = expert 0
    moves the logits), only the routed ones (changing an expert no token
    picks changes nothing, a picked one changes the logits), and
    norm_topk_prob."""
    E, k, H = cfg.experts, cfg.experts_per_tok, cfg.hidden
    routers = [W[f"model.layers.{i}.{MOE_HF[cfg.arch][0]}.weight"] for i in range(cfg.layers)]
    std = float(np.std(np.stack(routers)))
    want_std = sm.ROUTER_GAIN / math.sqrt(H)
    names = [f"model.layers.{i}.{n.format(m=m)}.weight" for i in range(cfg.layers)
             for n in MOE_HF[cfg.arch][1:] for m in range(E)]
    distinct = len({W[n].tobytes() for n in names}) == len(names)
    check(f"{tag}/moe-weights", all(r.shape == (E, H) for r in routers)
          and abs(std / want_std - 1) < 0.1 and distinct,
          f"router std {std:.3f} (want {want_std:.3f}), {len(names)} expert matrices "
          f"distinct: {distinct}")
    routes: list = []
    again = forward(cfg, W, tokens, interleaved=False, routes=routes)
    weights_ok = all(len(top) == k == len(set(top)) and np.all(w > 0)
                     and (abs(w.sum() - 1) < 1e-12 if cfg.norm_topk_prob else w.sum() < 1)
                     for layer in routes for top, w, _ in layer)
    used = [sorted({e for top, _, _ in layer for e in top}) for layer in routes]
    check(f"{tag}/moe-routes", np.array_equal(again, ref) and weights_ok
          and all(len(u) > 1 for u in used), f"experts used per layer: {used}")
    # Decisive routing: the router logits spread (std ~ ROUTER_GAIN = 2.5),
    # and the k-th chosen logit is typically well above the next one.
    logits = np.array([lg for layer in routes for _, _, lg in layer])
    srt = -np.sort(-logits, axis=1)
    gap = srt[:, k - 1] - srt[:, k] if k < E else np.full(len(srt), np.inf)
    check(f"{tag}/moe-router-decisive", logits.std() > 1.5 and np.median(gap) > 0.3,
          f"router logit std {logits.std():.2f}, k-th vs next gap median "
          f"{np.median(gap):.2f}, min {gap.min():.3f} over {len(gap)} token-layers")
    # Every expert replaced by expert 0 (what "expert 0 for everything" computes).
    gate0 = dict(W)
    for i in range(cfg.layers):
        for n in MOE_HF[cfg.arch][1:]:
            for m in range(1, E):
                gate0[f"model.layers.{i}.{n.format(m=m)}.weight"] = \
                    W[f"model.layers.{i}.{n.format(m=0)}.weight"]
    d0 = float(np.abs(forward(cfg, gate0, tokens, interleaved=False) - ref).max()
               / np.abs(ref).max())
    check(f"{tag}/moe-expert-0-everywhere-differs", d0 > 1e-2, f"rel diff {d0:.1e}")
    # Few tokens pick few experts: changing one no token routes to (in the
    # last layer) leaves the logits as they were, bit for bit; a routed one
    # moves them.
    few = tokens[:max(1, (E - 1) // k)]
    rts: list = []
    base = forward(cfg, W, few, interleaved=False, routes=rts)
    last = cfg.layers - 1
    picked = sorted({e for top, _, _ in rts[last] for e in top})
    idle = [e for e in range(E) if e not in picked]
    down = f"model.layers.{last}.{MOE_HF[cfg.arch][3]}.weight"

    def with_expert(e: int) -> np.ndarray:
        w2 = dict(W, **{down.format(m=e): -2.0 * W[down.format(m=e)]})
        return forward(cfg, w2, few, interleaved=False)
    d_idle = float(np.abs(with_expert(idle[0]) - base).max()) if idle else math.inf
    d_used = float(np.abs(with_expert(picked[0]) - base).max() / np.abs(base).max())
    check(f"{tag}/moe-only-routed-experts-matter", d_idle == 0.0 and d_used > 1e-2,
          f"{len(few)} tokens use experts {picked} of layer {last}: idle expert {idle[:1]} "
          f"changed: diff {d_idle:.1e}; routed expert {picked[0]} changed: rel diff "
          f"{d_used:.1e}")
    # norm_topk_prob: on and off give other logits (for mixtral, which always
    # renormalizes, the same weights run as qwen3moe's routing would).
    flip = sm.make_config(cfg, norm_topk_prob=not cfg.norm_topk_prob) \
        if cfg.arch == "qwen3moe" else None
    if flip is not None:
        d_norm = float(np.abs(forward(flip, W, tokens, interleaved=False) - ref).max()
                       / np.abs(ref).max())
        check(f"{tag}/moe-norm_topk_prob-matters", d_norm > 1e-3,
              f"norm_topk_prob {cfg.norm_topk_prob} -> {flip.norm_topk_prob}: rel diff "
              f"{d_norm:.1e}")


# ---------------------------------------------------------------- llama.cpp

def llama_cpp_check(tag: str, path: str, cfg: sm.Config, ref: np.ndarray | None,
                    tokens: list[int], text: str, tol: float) -> None:
    # llama.cpp's extra buffer types (weight repacking, incl. the AMX one) are
    # off: tools/llamacpp/llamacpp_compat.py says why.
    sys.path.insert(0, os.path.join(HERE, "..", "llamacpp"))
    from llamacpp_compat import import_llama_cpp
    llama_cpp, _ = import_llama_cpp()
    kw = dict(model_path=path, n_ctx=64, verbose=False, logits_all=True, n_threads=2)
    try:
        llm = llama_cpp.Llama(type_k=0, type_v=0, **kw)  # f32 KV cache
    except TypeError:
        llm = llama_cpp.Llama(**kw)
    v = sm.build_vocab(cfg.vocab)
    lt = llm.tokenize(text.encode(), add_bos=False, special=False)
    check(f"{tag}/llama.cpp/tokenize==reference", lt == v.encode(text),
          f"{len(lt)} tokens" if lt == v.encode(text) else f"{lt} vs {v.encode(text)}")
    chat = "<|im_start|>user\nhi<|im_end|>"
    st = llm.tokenize(chat.encode(), add_bos=False, special=True)
    check(f"{tag}/llama.cpp/special-tokens",
          st[0] == v.special["<|im_start|>"] and st[-1] == v.special["<|im_end|>"], f"{st}")
    check(f"{tag}/llama.cpp/n_vocab", llm.n_vocab() == cfg.vocab)
    llm.reset()
    llm.eval(tokens)
    logits = np.array(llm.scores[:len(tokens)], dtype=np.float64)
    finite = bool(np.isfinite(logits).all())
    check(f"{tag}/llama.cpp/eval-finite", finite)
    if ref is not None and finite:
        err = float(np.abs(logits - ref).max() / np.abs(ref).max())
        same_argmax = float((logits.argmax(-1) == ref.argmax(-1)).mean())
        check(f"{tag}/llama.cpp/logits==reference", err < tol,
              f"max rel err {err:.2e} (tol {tol:g}), argmax agreement {same_argmax:.2f}")
    del llm


# --------------------------------------------------------------------- main

def files_equal(a: str, b: str) -> bool:
    if os.path.isdir(a):
        fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
        return fa == fb and all(files_equal(os.path.join(a, f), os.path.join(b, f)) for f in fa)
    return open(a, "rb").read() == open(b, "rb").read()


def run(tmp: str, use_llama_cpp: bool) -> None:
    try:
        import gguf  # noqa: F401
        have_gguf = True
    except ImportError:
        have_gguf = False
    check("gguf package importable", have_gguf, "pip install gguf")
    have_llama = False
    if use_llama_cpp:
        try:
            import llama_cpp  # noqa: F401
            have_llama = True
        except ImportError:
            pass
    text = "The compiler reads the text, and 2 + 2 = 4!\nOnce upon a time..."
    if HAVE_REGEX:
        text += " \u00e9\u00e8 \U0001F600 caf\u00e9"

    # Vocabulary basics.
    v = sm.build_vocab(300)
    ids = v.encode(text)
    check("vocab/encode-decode-roundtrip", v.decode(ids) == text)
    check("vocab/prefix-stable", sm.build_vocab(400).tokens[:297] == v.tokens[:297])
    big = sm.build_vocab(sm.max_merge_vocab() + 5)
    check("vocab/reserved-filler", big.n_reserved == 5 and len(big.tokens) == sm.max_merge_vocab() + 5)
    check("vocab/unique-tokens", len(set(big.tokens)) == len(big.tokens))

    for tag, spec in SHAPES.items():
        cfg = sm.make_config(spec["cfg"])
        seed, shards = spec["seed"], spec["shards"]
        hf_a, hf_b, hf_c = (os.path.join(tmp, f"{tag}-hf-{x}") for x in "abc")
        sm.write_hf(hf_a, cfg, seed, shards)
        sm.write_hf(hf_b, cfg, seed, shards)
        sm.write_hf(hf_c, cfg, seed + 1, shards)
        check(f"{tag}/hf/deterministic", files_equal(hf_a, hf_b))
        check(f"{tag}/hf/seed-changes-weights", not files_equal(hf_a, hf_c))
        check_hf(tag, hf_a, cfg, seed, shards)
        tokens = v.encode(text)[:24 if cfg.arch in NEW_ARCHES else 12]
        ref = check_rope_equivalence(tag, cfg, seed, tokens)
        if spec.get("hf_only"):
            # No GGUF can express it (qwen3moe without norm_topk_prob; gemma2
            # untied): refused, naming the field, and nothing written.
            if have_gguf:
                try:
                    sm.write_gguf(os.path.join(tmp, f"{tag}.gguf"), cfg, seed, "f32")
                    refused, msg = False, ""
                except sm.SynthError as e:
                    refused, msg = spec["hf_only"] in str(e), str(e)
                check(f"{tag}/gguf-refused", refused
                      and not os.path.exists(os.path.join(tmp, f"{tag}.gguf")), msg[:120])
            continue
        if not have_gguf:
            continue
        types = ["f32", "q8_0"] if tag != "llama-gqa-tied" else list(sm.GGUF_TYPES)
        if cfg.moe:  # the stacked experts quantized; q4_k: rows of 32/64 fall back to f16
            types = ["f32", "q8_0", "q4_0"] + (["q4_k"] if cfg.arch == "qwen3moe" else [])
        for gt in types:
            ga = os.path.join(tmp, f"{tag}-{gt}.gguf")
            gb = os.path.join(tmp, f"{tag}-{gt}-again.gguf")
            gc = os.path.join(tmp, f"{tag}-{gt}-from-hf.gguf")
            sm.write_gguf(ga, cfg, seed, gt)
            sm.write_gguf(gb, cfg, seed, gt)
            sm.gguf_from_hf(hf_a, gc, gt)
            check(f"{tag}/gguf-{gt}/deterministic", files_equal(ga, gb))
            check(f"{tag}/gguf-{gt}/==from-hf", files_equal(ga, gc))
            check_gguf(tag, ga, cfg, seed, gt)
            if gt == "f32" and cfg.arch in NEW_ARCHES:
                gguf_form_forward(tag, ga, cfg, tokens, ref)
            if have_llama and gt in ("f32", "q8_0"):
                # f32: only float rounding differs from the float64 reference.
                # q8_0: compare to the reference run on the dequantized weights.
                # phi3: llama.cpp ignores the window (its phi3 SWA is disabled).
                lc_cfg = (sm.make_config(cfg, sliding_window=None)
                          if cfg.arch == "phi3" else cfg)
                r = ref if gt == "f32" and lc_cfg == cfg else forward(
                    lc_cfg, sm.dequantized_weights(cfg, seed, gt), tokens, interleaved=False)
                llama_cpp_check(f"{tag}/{gt}", ga, cfg, r, tokens, text,
                                tol=1e-3 if gt == "f32" else 5e-2)
    if not have_llama:
        print("note: llama-cpp-python not importable: llama.cpp load/eval checks skipped")

    # CLI.
    S = [sys.executable, os.path.join(HERE, "synth_model.py")]
    r = subprocess.run(S + ["--format", "gguf", "--describe", "--arch", "qwen2",
                            "--no-tie-embeddings", "--gguf-type", "q8_0"],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        d = json.loads(r.stdout)
        ok = (d["hf_config"]["model_type"] == "qwen2" and d["gguf_arch"] == "qwen2"
              and any(t["name"] == "blk.0.attn_q.bias" and t["dtype"] == "f32" for t in d["tensors"])
              and any(t["name"] == "output.weight" and t["dtype"] == "q8_0" for t in d["tensors"]))
    check("cli/describe", ok, r.stderr[-300:])
    r = subprocess.run(S + ["--format", "gguf", "--describe", "--arch", "qwen3",
                            "--head-dim", "32", "--gguf-type", "q8_0"],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        d = json.loads(r.stdout)
        t = {x["name"]: x for x in d["tensors"]}
        hc = d["hf_config"]
        ok = (hc["model_type"] == "qwen3" and hc["architectures"] == ["Qwen3ForCausalLM"]
              and hc["head_dim"] == 32 and hc["attention_bias"] is False
              and d["gguf_arch"] == "qwen3" and d["qk_norm"] is True
              and t["blk.1.attn_q_norm.weight"]["dtype"] == "f32"
              and t["blk.1.attn_k_norm.weight"]["ggml_shape"] == [32]
              and t["blk.0.attn_q.weight"]["dtype"] == "q8_0"
              and not any(x["qk_permuted"] or x["name"].endswith(".bias") for x in t.values()))
    check("cli/describe-qwen3", ok, r.stderr[-300:])
    for arch, extra, gguf_arch in (
            ("qwen3moe", ["--experts", "4", "--experts-per-tok", "3", "--moe-intermediate", "32"],
             "qwen3moe"),
            ("mixtral", ["--experts", "4", "--intermediate", "96"], "llama")):
        r = subprocess.run(S + ["--format", "gguf", "--describe", "--arch", arch,
                                "--gguf-type", "q4_0"] + extra, capture_output=True, text=True)
        ok = r.returncode == 0
        if ok:
            d = json.loads(r.stdout)
            t = {x["name"]: x for x in d["tensors"]}
            I = 32 if arch == "qwen3moe" else 96
            k = 3 if arch == "qwen3moe" else 2
            ok = (d["gguf_arch"] == gguf_arch and d["moe"] == {
                      "experts": 4, "experts_per_tok": k, "expert_intermediate": I,
                      "norm_topk_prob": True}
                  and t["blk.1.ffn_gate_inp.weight"]["dtype"] == "f32"
                  and t["blk.1.ffn_gate_inp.weight"]["ggml_shape"] == [64, 4]
                  and t["blk.1.ffn_gate_exps.weight"]["ggml_shape"] == [64, I, 4]
                  and t["blk.1.ffn_up_exps.weight"]["ggml_shape"] == [64, I, 4]
                  and t["blk.1.ffn_down_exps.weight"]["ggml_shape"] == [I, 64, 4]
                  and t["blk.1.ffn_down_exps.weight"]["dtype"] == "q4_0"
                  and len(t["blk.0.ffn_up_exps.weight"]["hf_experts"]) == 4
                  and not any(".ffn_gate.weight" in n for n in t)
                  and d["hf_config"]["num_experts_per_tok"] == k)
        check(f"cli/describe-{arch}", ok, r.stderr[-300:])
    # phi3 / gemma2 / gemma3: the fused tensors, the per-layer windows and
    # RoPE bases, Gemma's +1 norms, the configs' keys.
    r = subprocess.run(S + ["--format", "gguf", "--describe", "--arch", "phi3",
                            "--kv-heads", "1", "--sliding-window", "16"],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        d = json.loads(r.stdout)
        t = {x["name"]: x for x in d["tensors"]}
        ok = (d["gguf_arch"] == "phi3" and d["fused_proj"] is True
              and d["hf_config"]["architectures"] == ["Phi3ForCausalLM"]
              and "head_dim" not in d["hf_config"] and d["hf_config"]["sliding_window"] == 16
              and t["blk.0.attn_qkv.weight"]["ggml_shape"] == [64, 64 + 2 * 16]
              and t["blk.0.attn_qkv.weight"]["hf_name"]
              == "model.layers.0.self_attn.qkv_proj.weight"
              and t["blk.1.ffn_up.weight"]["ggml_shape"] == [64, 2 * 160]
              and "blk.0.ffn_gate.weight" not in t and "blk.0.attn_q.weight" not in t
              and d["layer_windows"] == [16, 16]
              and not any(x["qk_permuted"] or x["plus_one"] for x in t.values()))
    check("cli/describe-phi3", ok, r.stderr[-300:])
    r = subprocess.run(S + ["--format", "gguf", "--describe", "--arch", "gemma3", "--layers", "6",
                            "--sliding-window-pattern", "3", "--rope-scaling", "linear:8"],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        d = json.loads(r.stdout)
        t = {x["name"]: x for x in d["tensors"]}
        hc = d["hf_config"]
        ok = (d["gguf_arch"] == "gemma3" and hc["model_type"] == "gemma3_text"
              and hc["architectures"] == ["Gemma3ForCausalLM"]
              and d["layer_windows"] == [8, 8, None, 8, 8, None]
              and d["layer_rope_thetas"] == [1e4, 1e4, 1e6, 1e4, 1e4, 1e6]
              and hc["layer_types"][2] == "full_attention" and hc["sliding_window_pattern"] == 3
              and hc["rope_scaling"] == {"factor": 8.0, "rope_type": "linear"}
              and hc["rope_theta"] == 1e6 and hc["rope_local_base_freq"] == 1e4
              and d["gemma"]["embed_scale"] == 8.0 and d["qk_norm"] is True
              and t["blk.0.post_attention_norm.weight"]["hf_name"]
              == "model.layers.0.post_attention_layernorm.weight"
              and t["blk.0.ffn_norm.weight"]["hf_name"]
              == "model.layers.0.pre_feedforward_layernorm.weight"
              and t["blk.0.post_ffw_norm.weight"]["plus_one"] is True
              and t["blk.0.attn_k_norm.weight"]["plus_one"] is True
              and t["output_norm.weight"]["plus_one"] is True
              and t["blk.0.attn_q.weight"]["plus_one"] is False
              and "output.weight" not in t)
    check("cli/describe-gemma3", ok, r.stderr[-300:])
    r = subprocess.run(S + ["--format", "hf", "--describe", "--arch", "gemma2", "--layers", "3"],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        d = json.loads(r.stdout)
        hc = d["hf_config"]
        ok = (hc["attn_logit_softcapping"] == 50.0 and hc["final_logit_softcapping"] == 30.0
              and hc["query_pre_attn_scalar"] == 16 and hc["sliding_window"] == 8
              and d["layer_windows"] == [8, None, 8] and hc["tie_word_embeddings"] is True
              and hc["hidden_activation"] == "gelu_pytorch_tanh"
              and any(x["name"] == "model.layers.2.post_feedforward_layernorm.weight"
                      for x in d["tensors"]))
    check("cli/describe-gemma2", ok, r.stderr[-300:])
    out1, out2 = os.path.join(tmp, "cli1"), os.path.join(tmp, "cli2")
    for o in (out1, out2):
        subprocess.run(S + ["--format", "hf", "--out", o, "--seed", "7", "--dtype", "bf16",
                            "--shards", "2"], check=True)
    check("cli/hf-deterministic", files_equal(out1, out2))
    if have_gguf:
        g1, g2 = os.path.join(tmp, "cli1.gguf"), os.path.join(tmp, "cli2.gguf")
        subprocess.run(S + ["--format", "gguf", "--out", g1, "--seed", "7", "--dtype", "bf16",
                            "--gguf-type", "q4_0"], check=True)
        subprocess.run(S + ["--format", "gguf", "--from-hf", out1, "--out", g2,
                            "--gguf-type", "q4_0"], check=True)
        check("cli/from-hf==direct", files_equal(g1, g2))
        r = subprocess.run(S + ["--format", "gguf", "--out", os.path.join(tmp, "odd.gguf"),
                                "--intermediate", "72", "--gguf-type", "q8_0"],
                           capture_output=True, text=True)
        check("cli/non-block-rows-fall-back-to-f16", r.returncode == 0
              and "ffn_down.weight stored as f16" in r.stderr, r.stderr[-300:])
        r = subprocess.run(S + ["--format", "gguf", "--out", os.path.join(tmp, "k.gguf"),
                                "--gguf-type", "iq4_nl"], capture_output=True, text=True)
        check("cli/rejects --gguf-type iq4_nl", r.returncode == 2 and "iq4_nl" in r.stderr
              and not os.path.exists(os.path.join(tmp, "k.gguf")), r.stderr.strip()[-200:])
        # A GGUF cannot say "no top-k renormalization" (llama.cpp's qwen3moe
        # always renormalizes): refused, nothing written; the HF form is fine.
        nn = os.path.join(tmp, "nonorm.gguf")
        r = subprocess.run(S + ["--format", "gguf", "--out", nn, "--arch", "qwen3moe",
                                "--no-norm-topk-prob"], capture_output=True, text=True)
        r2 = subprocess.run(S + ["--format", "hf", "--out", os.path.join(tmp, "nonorm-hf"),
                                 "--arch", "qwen3moe", "--no-norm-topk-prob"],
                            capture_output=True, text=True)
        hfc = (json.load(open(os.path.join(tmp, "nonorm-hf", "config.json")))
               if r2.returncode == 0 else {})
        check("cli/qwen3moe-no-norm-topk-prob: gguf refused, hf written",
              r.returncode == 2 and "norm_topk_prob" in r.stderr and "llama.cpp" in r.stderr
              and not os.path.exists(nn) and hfc.get("norm_topk_prob") is False,
              (r.stderr + r2.stderr).strip()[-300:])
        # The router keeps f32 silently; stacks with rows that are not whole
        # blocks get the same note as any matrix.
        r = subprocess.run(S + ["--format", "gguf", "--out", os.path.join(tmp, "moe-odd.gguf"),
                                "--arch", "qwen3moe", "--moe-intermediate", "48",
                                "--gguf-type", "q8_0"], capture_output=True, text=True)
        check("cli/moe-non-block-rows-note", r.returncode == 0
              and "blk.0.ffn_down_exps.weight stored as f16 (row of 48" in r.stderr
              and "ffn_gate_inp" not in r.stderr and "ffn_up_exps" not in r.stderr,
              r.stderr[-300:])
        # Gemma's score scalar: llama.cpp reads no key for it (head_dim here),
        # so another one is HF only.
        qs = os.path.join(tmp, "qscalar.gguf")
        r = subprocess.run(S + ["--format", "gguf", "--out", qs, "--arch", "gemma2",
                                "--query-pre-attn-scalar", "24"], capture_output=True, text=True)
        r2 = subprocess.run(S + ["--format", "hf", "--out", os.path.join(tmp, "qscalar-hf"),
                                 "--arch", "gemma2", "--query-pre-attn-scalar", "24"],
                            capture_output=True, text=True)
        hfc = (json.load(open(os.path.join(tmp, "qscalar-hf", "config.json")))
               if r2.returncode == 0 else {})
        check("cli/gemma2-query-pre-attn-scalar: gguf refused, hf written",
              r.returncode == 2 and "query_pre_attn_scalar" in r.stderr and "llama.cpp" in r.stderr
              and not os.path.exists(qs) and hfc.get("query_pre_attn_scalar") == 24,
              (r.stderr + r2.stderr).strip()[-300:])
    for bad, why in ((["--arch", "qwen2", "--no-qkv-bias"], "qkv_bias"),
                     (["--arch", "qwen3", "--qkv-bias"], "qkv_bias"),
                     (["--arch", "qwen3", "--sliding-window", "8"], "sliding_window"),
                     (["--heads", "4", "--kv-heads", "3"], "kv_heads"),
                     (["--vocab", "100"], "vocab"),
                     (["--rope-scaling", "yarn:4"], "rope-scaling"),
                     (["--arch", "llama", "--sliding-window", "8"], "sliding_window"),
                     (["--arch", "llama", "--experts", "4"], "--experts"),
                     (["--arch", "qwen3", "--experts-per-tok", "1"], "--experts-per-tok"),
                     (["--arch", "mistral", "--no-norm-topk-prob"], "--norm-topk-prob"),
                     (["--arch", "qwen2", "--moe-intermediate", "32"], "--moe-intermediate"),
                     (["--arch", "mixtral", "--experts", "2", "--experts-per-tok", "3"],
                      "--experts-per-tok"),
                     (["--arch", "qwen3moe", "--experts", "0"], "--experts"),
                     (["--arch", "mixtral", "--moe-intermediate", "32"], "--moe-intermediate"),
                     (["--arch", "mixtral", "--no-norm-topk-prob"], "norm_topk_prob"),
                     (["--arch", "mixtral", "--qkv-bias"], "qkv_bias"),
                     (["--arch", "qwen3moe", "--qkv-bias"], "qkv_bias"),
                     (["--arch", "phi3", "--head-dim", "32"], "head_dim"),
                     (["--arch", "phi3", "--qkv-bias"], "qkv_bias"),
                     (["--arch", "phi3", "--rope-scaling", "linear:2"], "rope_scaling"),
                     (["--arch", "gemma2", "--rope-scaling", "linear:2"], "rope_scaling"),
                     (["--arch", "gemma3", "--rope-scaling", "llama3:8,1,4,64"], "rope_scaling"),
                     (["--arch", "gemma2", "--qkv-bias"], "qkv_bias"),
                     (["--arch", "gemma2", "--sliding-window-pattern", "3"],
                      "--sliding-window-pattern"),
                     (["--arch", "gemma3", "--sliding-window-pattern", "0"],
                      "--sliding-window-pattern"),
                     (["--arch", "gemma3", "--attn-softcap", "50"], "--attn-softcap"),
                     (["--arch", "gemma2", "--attn-softcap", "0"], "--attn-softcap"),
                     (["--arch", "llama", "--final-softcap", "30"], "--final-softcap"),
                     (["--arch", "qwen3", "--rope-local-theta", "10000"], "--rope-local-theta"),
                     (["--arch", "mistral", "--query-pre-attn-scalar", "16"],
                      "--query-pre-attn-scalar"),
                     (["--arch", "qwen2", "--sliding-window", "8"], "sliding_window"),
                     (["--arch", "gemma2", "--sliding-window", "0"], "sliding_window")):
        r = subprocess.run(S + ["--format", "hf", "--out", os.path.join(tmp, "bad")] + bad,
                           capture_output=True, text=True)
        check(f"cli/rejects {' '.join(bad)}", r.returncode == 2 and why in r.stderr,
              r.stderr.strip()[-200:])


def main() -> int:
    global VERBOSE
    ap = argparse.ArgumentParser()
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--keep", help="write into this folder and keep it")
    ap.add_argument("--no-llama-cpp", action="store_true")
    args = ap.parse_args()
    VERBOSE = args.verbose
    faulthandler.enable()
    t0 = time.time()
    try:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            run(args.keep, not args.no_llama_cpp)
        else:
            with tempfile.TemporaryDirectory(prefix="synth-selftest-") as tmp:
                run(tmp, not args.no_llama_cpp)
    except Exception:
        traceback.print_exc()
        check("no exception", False)
    failed = [r for r in RESULTS if not r[1]]
    print(f"synth-model selftest: {len(RESULTS) - len(failed)} passed, {len(failed)} failed "
          f"({time.time() - t0:.1f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
