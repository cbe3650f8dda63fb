#!/usr/bin/env python3
"""Generates the tokenizer goldens: llama.cpp's token ids for every string of
test/data/tokenizer/corpus.jsonl, from llama-cpp-python (an independent
reference; a test-only dependency, never a runtime one).

    pip install llama-cpp-python
    scripts/gen-tokenizer-goldens.py [--model PATH] [--out PATH]

The model defaults to SmolLM2-135M-Instruct (GGUF Q4_1, which
scripts/fetch-model fetches) at $HOME/.cache/llmc/models/. Only the vocabulary is loaded.

Besides the model as it is (smollm2_expected.jsonl), the script derives
vocabulary-only GGUF variants of it, so that llama.cpp is also the reference
for tokenizer paths SmolLM2 itself does not take
(test/unit/runtime/tokenizer/smollm2_variants_test.cc builds the same
variants in C++):
  pre-<NAME>   tokenizer.ggml.pre set to NAME (gpt-2, llama-bpe, qwen2, default)
  as-spm       the vocabulary recast as a SentencePiece ("llama") model: each
               normal token's bytes with spaces as U+2581 (tokens that are not
               valid UTF-8, or repeat an earlier text, become unused
               "[UNUSED_<id>]"), score -id, control tokens kept, the 256
               <0xXX> byte tokens appended; BOS added, space prefix on.

Each output line holds, for one corpus entry:
  id, add_bos            the corpus id; the add_bos flag used (llama.cpp's
                         add_special: BOS only if the model asks for it)
  ids_plain              tokenize(text, special=False)
  ids_special            tokenize(text, special=True) (parse special tokens)
  roundtrip_plain        detokenize(ids_plain) == text
  roundtrip_special      detokenize(ids_special, special=True) == text
  detokenized_hex        llama_detokenize(ids_plain, remove_special=True,
                         unparse_special=False): llama.cpp's own detokenizer
                         (with its clean-up of spaces), as hex bytes
The header line ({"meta": ...}) records the model, the variant and the
llama-cpp-python version.
"""

import argparse
import json
import os
import struct
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = Path(os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf"))


PRE_VARIANTS = ["gpt-2", "llama-bpe", "qwen2", "default"]

# GGUF metadata value types (scalar struct formats); 8 = string, 9 = array.
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_STRING, GGUF_ARRAY, GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL = 8, 9, 5, 6, 7


def read_gguf_metadata(path: Path) -> list:
    """[key, type, value] of every metadata pair; arrays as (elem_type, list)."""
    data = path.read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        value = struct.unpack_from("<" + fmt, data, pos)[0]
        pos += struct.calcsize("<" + fmt)
        return value

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return data[pos - n:pos]

    def value(t):
        if t == GGUF_STRING:
            return string()
        if t == GGUF_ARRAY:
            elem = take("I")
            return (elem, [value(elem) for _ in range(take("Q"))])
        return take(GGUF_SCALARS[t])

    assert data[:4] == b"GGUF", f"{path}: not a GGUF file"
    pos = 4
    take("I")  # version
    take("Q")  # tensor count
    pairs = []
    for _ in range(take("Q")):
        key = string().decode()
        t = take("I")
        pairs.append([key, t, value(t)])
    return pairs


def write_vocab_gguf(path: Path, pairs: list) -> None:
    """A GGUF v3 file with the given metadata and no tensors (enough for vocab_only)."""
    out = bytearray(b"GGUF") + struct.pack("<IQQ", 3, 0, len(pairs))

    def string(b):
        out.extend(struct.pack("<Q", len(b)) + b)

    def value(t, v):
        if t == GGUF_STRING:
            string(v)
        elif t == GGUF_ARRAY:
            elem, items = v
            out.extend(struct.pack("<IQ", elem, len(items)))
            for item in items:
                value(elem, item)
        else:
            out.extend(struct.pack("<" + GGUF_SCALARS[t], v))

    for key, t, v in pairs:
        string(key.encode())
        out.extend(struct.pack("<I", t))
        value(t, v)
    path.write_bytes(bytes(out))


def byte_level_decoder() -> dict:
    """GPT-2's printable character -> byte mapping of byte-level BPE tokens."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[chr(b)] = b
        else:
            mapping[chr(256 + extra)] = b
            extra += 1
    return mapping


def spm_variant(pairs: list) -> list:
    """The vocabulary recast as a SentencePiece model (see the module doc)."""
    meta = {k: (t, v) for k, t, v in pairs}
    tokens = [t.decode("utf-8") for t in meta["tokenizer.ggml.tokens"][1][1]]
    types = meta["tokenizer.ggml.token_type"][1][1]
    decode = byte_level_decoder()
    new_tokens, new_types, scores, seen = [], [], [], set()
    for i, (text, kind) in enumerate(zip(tokens, types)):
        piece = None
        if kind == 3:  # control
            piece = text
        else:
            try:
                piece = bytes(decode[c] for c in text).decode("utf-8").replace(" ", "\u2581")
            except (KeyError, UnicodeDecodeError):
                piece = None
        if piece is None or piece in seen:
            piece, kind, score = f"[UNUSED_{i}]", 5, 0.0
        else:
            score = 0.0 if kind == 3 else -float(i)
        seen.add(piece)
        new_tokens.append(piece)
        new_types.append(kind)
        scores.append(score)
    for b in range(256):
        piece = f"<0x{b:02X}>"
        assert piece not in seen, piece
        new_tokens.append(piece)
        new_types.append(6)
        scores.append(0.0)
    drop = {"tokenizer.ggml.merges", "tokenizer.ggml.pre", "tokenizer.ggml.add_space_prefix",
            "tokenizer.ggml.add_bos_token", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type", "tokenizer.ggml.scores"}
    out = [p for p in pairs if p[0] not in drop]
    out += [
        ["tokenizer.ggml.model", GGUF_STRING, b"llama"],
        ["tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, [t.encode("utf-8") for t in new_tokens])],
        ["tokenizer.ggml.scores", GGUF_ARRAY, (GGUF_FLOAT32, scores)],
        ["tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_INT32, new_types)],
        ["tokenizer.ggml.add_bos_token", GGUF_BOOL, True],
    ]
    return out


def variant_pairs(pairs: list, variant: str) -> list:
    if variant == "as-spm":
        return spm_variant(pairs)
    assert variant.startswith("pre-")
    out = [p for p in pairs if p[0] != "tokenizer.ggml.pre"]
    out.append(["tokenizer.ggml.pre", GGUF_STRING, variant[4:].encode()])
    return out


def corpus_bytes(entry: dict) -> bytes:
    # Entries that are not valid UTF-8 are stored as hex.
    if "hex" in entry:
        return bytes.fromhex(entry["hex"])
    return entry["text"].encode("utf-8")


def detokenize_llama_cpp(llm, ids: list) -> bytes:
    """llama.cpp's llama_detokenize, which (unlike Llama.detokenize) applies
    the vocabulary's space clean-up."""
    import ctypes
    import llama_cpp

    tokens = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 16 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_detokenize(llm._model.vocab, tokens, len(ids), buf, size, True, False)
        if n >= 0:
            return buf.raw[:n]
        size = -n


def write_goldens(llm, entries: list, out_path: Path, meta: dict, add_bos: bool) -> None:
    with out_path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"meta": meta}) + "\n")
        for entry in entries:
            text = corpus_bytes(entry)
            plain = llm.tokenize(text, add_bos=add_bos, special=False)
            special = llm.tokenize(text, add_bos=add_bos, special=True)
            row = {
                "id": entry["id"],
                "add_bos": add_bos,
                "ids_plain": plain,
                "ids_special": special,
                "roundtrip_plain": llm.detokenize(plain) == text,
                "roundtrip_special": llm.detokenize(special, special=True) == text,
                "detokenized_hex": detokenize_llama_cpp(llm, plain).hex(),
            }
            out.write(json.dumps(row) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--corpus", type=Path, default=ROOT / "test/data/tokenizer/corpus.jsonl")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "test/data/tokenizer")
    parser.add_argument("--add-bos", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--variants", default="all",
                        help="comma-separated variants besides the model itself (pre-NAME, as-spm), 'all' or 'none'")
    args = parser.parse_args()

    try:
        import llama_cpp
        from llama_cpp import Llama
    except ImportError:
        print("error: llama-cpp-python is not installed (pip install llama-cpp-python)", file=sys.stderr)
        return 1
    if not args.model.is_file():
        print(f"error: model not found: {args.model}", file=sys.stderr)
        return 1

    # split("\n"), not splitlines(): texts hold U+2028 and U+0085 unescaped.
    lines = args.corpus.read_text(encoding="utf-8").split("\n")
    entries = [json.loads(line) for line in lines if line.strip()]
    variants = {"all": [f"pre-{p}" for p in PRE_VARIANTS] + ["as-spm"], "none": []}.get(
        args.variants, [v for v in args.variants.split(",") if v])
    base_meta = {
        "model": args.model.name,
        "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        "corpus": args.corpus.name,
        "entries": len(entries),
    }

    llm = Llama(model_path=str(args.model), vocab_only=True, verbose=False)
    out = args.out_dir / "smollm2_expected.jsonl"
    write_goldens(llm, entries, out, {**base_meta, "variant": "none"}, args.add_bos)
    print(f"wrote {out}")

    pairs = read_gguf_metadata(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            path = Path(tmp) / f"{variant}.gguf"
            write_vocab_gguf(path, variant_pairs(pairs, variant))
            llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
            out = args.out_dir / f"smollm2_{variant}_expected.jsonl"
            write_goldens(llm, entries, out, {**base_meta, "variant": variant}, args.add_bos)
            print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
