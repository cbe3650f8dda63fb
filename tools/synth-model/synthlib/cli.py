"""--describe's summary and the command line of synth_model.py."""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .config import (ARCHES, GEMMA_DEFAULTS, GGUF_TYPES, HF_DTYPES, MOE_DEFAULTS, Config,
                     SynthError, make_config, parse_rope_scaling)
from .gguf_layout import gemma_norm_offset, gguf_arch, gguf_tensor_plan
from .gguf_types import _gguf_qtype
from .gguf_writer import gguf_from_hf, write_gguf
from .hf import hf_config_json, read_hf_config, write_hf
from .vocab import build_vocab
from .weights import tensor_specs


def describe(cfg: Config | dict, fmt: str, gguf_type: str = "f32", shards: int = 1) -> dict:
    """A JSON-able summary: config, vocabulary and tensor list of the output."""
    c = make_config(cfg)
    v = build_vocab(c.vocab)
    d: dict[str, Any] = {
        "format": fmt,
        "config": c.to_dict(),
        "hf_config": hf_config_json(c),
        "qk_norm": c.qk_norm,   # per-head q_norm / k_norm before RoPE (qwen3, qwen3moe, gemma3)
        # Per layer: sliding window (None: global) and RoPE base.
        "layer_windows": c.layer_windows,
        "layer_rope_thetas": c.layer_rope_thetas,
        # Gemma 2 / 3: the softcaps, score scalar, embedding scale and norm offset.
        "gemma": {"attn_softcap": c.attn_softcap, "final_softcap": c.final_softcap,
                  "query_pre_attn_scalar": c.query_pre_attn_scalar,
                  "embed_scale": math.sqrt(c.hidden), "norm_weight_offset": 1.0,
                  "sliding_window_pattern": c.sliding_window_pattern,
                  "rope_local_theta": c.rope_local_theta} if c.gemma else None,
        "fused_proj": c.fused_proj,   # phi3: qkv_proj and gate_up_proj
        # Sparse MoE MLPs (qwen3moe, mixtral), else None.
        "moe": {"experts": c.experts, "experts_per_tok": c.experts_per_tok,
                "expert_intermediate": c.expert_intermediate,
                "norm_topk_prob": c.norm_topk_prob} if c.moe else None,
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
                         "qk_permuted": p["permuted"],
                         # Gemma norms: the GGUF stores the HF weight + 1
                         "plus_one": bool(gemma_norm_offset(c, p["hf"] or "")),
                         # stacked experts: the HF tensors of experts 0..E-1
                         **({"hf_experts": p["hf_experts"]} if p.get("hf_experts") else {})}
                        for p in gguf_tensor_plan(c, gguf_type)]
    d["n_params"] = sum(math.prod(s.shape) for s in tensor_specs(c))
    return d

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
                   help="default: on for qwen2 (required there), off otherwise; "
                        "mistral and qwen3 reject it")
    p.add_argument("--rope-theta", type=float, default=None,
                   help="default 10000 (gemma3: 1e6, its global layers' base)")
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
    p.add_argument("--sliding-window", type=int, default=None,
                   help="mistral, mixtral, phi3: every layer's window (default none); "
                        f"gemma2, gemma3: the sliding layers' (default "
                        f"{GEMMA_DEFAULTS['sliding_window']})")
    p.add_argument("--qk-gain", type=float, default=1.0,
                   help="scale q_proj and k_proj (qwen3, qwen3moe: q_norm and k_norm) by "
                        "this: peaked attention, scores x gain^2")
    gem = p.add_argument_group("Gemma (--arch gemma2 | gemma3 only)")
    gem.add_argument("--sliding-window-pattern", type=int, default=None,
                     help="gemma3: layer i is global iff (i + 1) %% N == 0, the others "
                          f"slide (default {GEMMA_DEFAULTS['sliding_window_pattern']})")
    gem.add_argument("--rope-local-theta", type=float, default=None,
                     help="gemma3: the sliding layers' RoPE base, unscaled "
                          f"(rope_local_base_freq; default {GEMMA_DEFAULTS['rope_local_theta']:g})")
    gem.add_argument("--attn-softcap", type=float, default=None,
                     help="gemma2: attn_logit_softcapping (default "
                          f"{GEMMA_DEFAULTS['attn_softcap']:g})")
    gem.add_argument("--final-softcap", type=float, default=None,
                     help="gemma2: final_logit_softcapping (default "
                          f"{GEMMA_DEFAULTS['final_softcap']:g}); gemma3: default none")
    gem.add_argument("--query-pre-attn-scalar", type=float, default=None,
                     help="scores x S^-0.5 (default: head_dim, what llama.cpp uses; "
                          "another value cannot be written as GGUF)")
    moe = p.add_argument_group("mixture of experts (--arch qwen3moe | mixtral only)")
    moe.add_argument("--experts", type=int, default=None,
                     help=f"experts per layer (default {MOE_DEFAULTS['experts']})")
    moe.add_argument("--experts-per-tok", type=int, default=None,
                     help=f"experts each token is routed to, top-k (default "
                          f"{MOE_DEFAULTS['experts_per_tok']})")
    moe.add_argument("--moe-intermediate", type=int, default=None,
                     help=f"qwen3moe: each expert's width (default "
                          f"{MOE_DEFAULTS['moe_intermediate']}); mixtral's experts are "
                          "--intermediate wide")
    moe.add_argument("--norm-topk-prob", action=argparse.BooleanOptionalAction, default=None,
                     help="qwen3moe: renormalize the top-k routing weights to sum 1 "
                          "(default on; off cannot be written as GGUF: llama.cpp's "
                          "qwen3moe always renormalizes); mixtral always does")
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
                sliding_window=args.sliding_window, rms_norm_eps=args.rms_eps,
                qk_gain=args.qk_gain, experts=args.experts,
                experts_per_tok=args.experts_per_tok,
                moe_intermediate=args.moe_intermediate, norm_topk_prob=args.norm_topk_prob,
                sliding_window_pattern=args.sliding_window_pattern,
                rope_local_theta=args.rope_local_theta, attn_softcap=args.attn_softcap,
                final_softcap=args.final_softcap,
                query_pre_attn_scalar=args.query_pre_attn_scalar)
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
                if (len(p["shape"]) >= 2 and p["type"] != args.gguf_type
                        and not p["gguf"].endswith(".ffn_gate_inp.weight")):  # router: f32
                    print(f"synth_model: note: {p['gguf']} stored as {p['type']} "
                          f"(row of {p['shape'][-1]} is not whole {args.gguf_type} blocks)",
                          file=sys.stderr)
    except SynthError as e:
        print(f"synth_model: error: {e}", file=sys.stderr)
        return 2
    return 0
