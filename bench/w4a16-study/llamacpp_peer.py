#!/usr/bin/env python3
"""Peer baseline: llama.cpp's own quantizer on the F16 weights dequantized
from SmolLM2-135M-Instruct.Q4_1.gguf.

  python3 /tmp/w4research/llamacpp_peer.py [--only NAME,...]

1. writes /tmp/w4research/gguf/f16.gguf: every tensor of the Q4_1 GGUF
   dequantized by gguf-py, 2-D weights F16, 1-D (norms) F32, all metadata
   copied (general.file_type = 1, MOSTLY_F16);
2. llama_model_quantize -> q8_0, q4_0, q4_1, q4_k_m, q4_0-pure (every
   tensor incl. the tied embedding Q4_0, no Q6_K/Q8_0 promotion);
3. llama.cpp perplexity at ctx 512 on test/data/text/eval-2k.txt with
   scripts/gen-smollm2-goldens.py's load_llama()/perplexity().
"""
import argparse
import collections
import importlib.util
import json
import os
import sys

import numpy as np

ROOT = "/work/main"
SRC = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = os.path.join(ROOT, "test/data/text/eval-2k.txt")
OUT = "/tmp/w4research/gguf"

sys.path.insert(0, os.path.join(ROOT, "tools", "llamacpp"))
from llamacpp_compat import import_llama_cpp  # noqa: E402

spec = importlib.util.spec_from_file_location("goldens", os.path.join(ROOT, "scripts/gen-smollm2-goldens.py"))
G = importlib.util.module_from_spec(spec)
spec.loader.exec_module(G)


def write_f16(dst):
    import gguf
    r = gguf.GGUFReader(SRC)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            w.add_file_type(1)
            continue
        vt = f.types[0]
        sub = f.types[1] if vt == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), vt, sub)
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        a = a.astype(np.float16 if a.ndim == 2 else np.float32)
        w.add_tensor(t.name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def types_of(path):
    import gguf
    r = gguf.GGUFReader(path)
    c = collections.Counter(t.tensor_type.name for t in r.tensors if len(t.shape) == 2)
    emb = [t.tensor_type.name for t in r.tensors if t.name == "token_embd.weight"][0]
    return dict(c), emb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    llama_cpp, C = import_llama_cpp()
    os.makedirs(OUT, exist_ok=True)
    f16 = os.path.join(OUT, "f16.gguf")
    if not os.path.exists(f16):
        write_f16(f16)
    variants = collections.OrderedDict(
        f16=None, q8_0=(C.LLAMA_FTYPE_MOSTLY_Q8_0, False), q4_0=(C.LLAMA_FTYPE_MOSTLY_Q4_0, False),
        q4_1=(C.LLAMA_FTYPE_MOSTLY_Q4_1, False), q4_k_m=(C.LLAMA_FTYPE_MOSTLY_Q4_K_M, False),
        q4_0_pure=(C.LLAMA_FTYPE_MOSTLY_Q4_0, True), q4_1_pure=(C.LLAMA_FTYPE_MOSTLY_Q4_1, True))
    only = set(filter(None, a.only.split(",")))
    text = open(TEXT, encoding="utf-8").read()
    res = {}
    for name, q in variants.items():
        if only and name not in only:
            continue
        path = f16 if q is None else os.path.join(OUT, f"{name}.gguf")
        if q is not None and not os.path.exists(path):
            p = C.llama_model_quantize_default_params()
            p.ftype, p.pure, p.nthread = q[0], q[1], 2
            rc = C.llama_model_quantize(f16.encode(), path.encode(), p)
            if rc != 0:
                sys.exit(f"quantize {name} failed: {rc}")
        llm = G.load_llama(path, 2048)
        add_bos = bool(C.llama_vocab_get_add_bos(C.llama_model_get_vocab(llm.model)))
        toks = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        ppl, _, n = G.perplexity(llm, toks, 512, llm.token_bos(), add_bos)
        del llm
        res[name] = dict(ppl=ppl, types=types_of(path), bytes=os.path.getsize(path))
        print(f"{name:<10} ppl {ppl:.4f}  {res[name]['types']}", flush=True)
    base = res.get("f16", {}).get("ppl")
    for name, r in res.items():
        rise = f"{r['ppl'] / base - 1:+.2%}" if base else "?"
        print(f"| llama.cpp {name} | {r['ppl']:.4f} | {rise} | {r['types'][0]} (embd {r['types'][1]}) |")
    with open(os.path.join(OUT, "results.json"), "a") as f:
        f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
