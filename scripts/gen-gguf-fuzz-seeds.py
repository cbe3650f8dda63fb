#!/usr/bin/env python3
"""Writes the seed corpus of test/fuzz/gguf_fuzzer.cc: tiny GGUF files (each
under 4 KiB) that together reach every part of the reader, the config mapping
and every dequantizer. Written with struct alone, no gguf package needed.
    python3 scripts/gen-gguf-fuzz-seeds.py
"""
import os
import random
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fuzz", "corpus", "gguf")

# GGUF value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FIXED = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
         BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (block elements, block bytes), the formats llmc supports.
GGML = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20), 6: (32, 22),
        7: (32, 24), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
        14: (256, 210)}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        elem, items = v
        out = struct.pack("<IQ", elem, len(items))
        for item in items:
            out += value(elem, item)
        return out
    return struct.pack(FIXED[t], v)


def gguf(kvs, tensors, version=3, alignment=32, rng=None):
    """kvs: [(key, type, value)]; tensors: [(name, ne, ggml_type)]."""
    rng = rng or random.Random(0)
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + value(t, v)
    offset, datas = 0, []
    for name, ne, gt in tensors:
        elems = 1
        for d in ne:
            elems *= d
        be, bb = GGML[gt]
        size = elems // be * bb
        offset = (offset + alignment - 1) // alignment * alignment
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", gt, offset)
        datas.append((offset, bytes(rng.getrandbits(8) for _ in range(size))))
        offset += size
    out += b"\0" * (-len(out) % alignment)
    data = bytearray(offset)
    for off, d in datas:
        data[off:off + len(d)] = d
    return out + bytes(data)


def llama_kvs(arch, extra=()):
    kvs = [("general.architecture", STR, arch),
           (f"{arch}.block_count", U32, 1),
           (f"{arch}.context_length", U32, 256),
           (f"{arch}.embedding_length", U32, 32),
           (f"{arch}.feed_forward_length", U32, 32),
           (f"{arch}.attention.head_count", U32, 4),
           (f"{arch}.attention.head_count_kv", U32, 2),
           (f"{arch}.attention.layer_norm_rms_epsilon", F32, 1e-5),
           (f"{arch}.rope.freq_base", F32, 10000.0),
           ("tokenizer.ggml.model", STR, "gpt2"),
           ("tokenizer.ggml.tokens", ARR, (STR, ["<s>", "a", "b", "c", "ab", "bc", "abc", "</s>"])),
           ("tokenizer.ggml.token_type", ARR, (I32, [3, 1, 1, 1, 1, 1, 1, 3])),
           ("tokenizer.ggml.merges", ARR, (STR, ["a b", "b c", "ab c"]))]
    return kvs + list(extra)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(1234)
    seeds = {}
    seeds["empty_v3"] = gguf([], [])
    seeds["every_type_v2"] = gguf(
        [("u8", U8, 200), ("i8", I8, -3), ("u16", U16, 60000), ("i16", I16, -300),
         ("u32", U32, 7), ("i32", I32, -7), ("f32", F32, 0.5), ("bool", BOOL, 1),
         ("str", STR, "hello"), ("u64", U64, 1 << 40), ("i64", I64, -(1 << 40)),
         ("f64", F64, 2.5), ("a.u8", ARR, (U8, [1, 2])), ("a.f64", ARR, (F64, [1.0])),
         ("a.bool", ARR, (BOOL, [0, 1])), ("a.str", ARR, (STR, ["x", ""])),
         ("a.i64", ARR, (I64, [-1])), ("a.empty", ARR, (U32, []))],
        [("t", [4, 2], 0)], version=2, rng=rng)
    h = 32  # hidden size of the tiny models
    # A subset of a layer (the seeds stay small; every format has its own seed).
    llama_tensors = [("token_embd.weight", [h, 8], 8), ("output_norm.weight", [h], 0),
                     ("blk.0.attn_norm.weight", [h], 0), ("blk.0.attn_q.weight", [h, h], 2),
                     ("blk.0.attn_k.weight", [h, 16], 3), ("blk.0.ffn_norm.weight", [h], 1)]
    seeds["llama_tiny"] = gguf(llama_kvs("llama"), llama_tensors, rng=rng)
    seeds["qwen2_tiny_untied"] = gguf(
        llama_kvs("qwen2", [("qwen2.attention.sliding_window", U32, 128)]),
        llama_tensors[:4] + [("blk.0.attn_q.bias", [h], 0), ("output.weight", [h, 8], 8)], rng=rng)
    seeds["llama_rope_linear"] = gguf(
        llama_kvs("llama", [("llama.rope.scaling.type", STR, "linear"),
                            ("llama.rope.scaling.factor", F32, 4.0),
                            ("llama.attention.key_length", U32, 8),
                            ("llama.vocab_size", U32, 8)]), [], rng=rng)
    # One tensor of every format llmc dequantizes, with a larger alignment.
    seeds["every_format_align64"] = gguf(
        [("general.alignment", U32, 64)],
        [(f"t{gt}", [GGML[gt][0] if GGML[gt][0] > 1 else 4], gt) for gt in sorted(GGML)],
        alignment=64, rng=rng)
    seeds["kquants_two_rows"] = gguf([], [("q2", [256, 2], 10), ("q6", [256, 2], 14)], rng=rng)
    # A truncated file, so the corpus also starts on an error path.
    seeds["truncated"] = seeds["llama_tiny"][:300]
    for name, data in seeds.items():
        assert len(data) < 4096, (name, len(data))
        with open(os.path.join(OUT, name + ".gguf"), "wb") as f:
            f.write(data)
        print(f"{name}.gguf: {len(data)} bytes")


if __name__ == "__main__":
    main()
