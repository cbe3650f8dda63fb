"""The vocabulary: a byte-level BPE trained on a small built-in text, and
its tokenizer.json form."""
from __future__ import annotations

import dataclasses
import functools
import heapq
import json
import math
import os
import re
from typing import Iterable

from .config import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS, SynthError

# The pattern of GPT-2's pre-tokenizer (what HF's ByteLevel(use_regex=true) and
# llama.cpp's "gpt-2" pre-tokenizer use).
GPT2_PATTERN = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                r"""|\s+(?!\S)|\s+""")
# The same pattern for ASCII text, usable with Python's `re` (no \p classes).
_GPT2_PATTERN_ASCII = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+"""
    r"""|\s+(?!\S)|\s+""")

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
