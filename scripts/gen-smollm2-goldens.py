#!/usr/bin/env python3
"""Generates the SmolLM2-vs-llama.cpp goldens used by
test/e2e/smollm2_vs_llamacpp_test.py, with llama-cpp-python (a test-only
dependency, never a runtime one) on SmolLM2-135M-Instruct Q4_1.

    pip install llama-cpp-python
    scripts/gen-smollm2-goldens.py [--model PATH] [--text PATH] [--out-dir DIR]

Writes (about 0.5 MB in all):

test/data/goldens/smollm2-eval-2k.npz
  text_tokens     int32 [T]    llama.cpp's tokens of test/data/text/eval-2k.txt,
                               tokenize(text, add_bos=True, special=False): BOS
                               only if the model asks for one (SmolLM2 does not:
                               tokenizer.ggml.add_bos_token = false)
  tokens          int32 [N]    the sequence whose logits are stored: the first
                               N = min(T, --max-logits=2048) of text_tokens
                               (the text is ~2,250 tokens, so it is TRUNCATED
                               to 2,048 for the logits)
  top1            int32 [N]    argmax of llama.cpp's logits at each position
                               (row i predicts token i+1, teacher-forced, one
                               sequence from position 0)
  top_ids         int32 [N,32] the 32 most likely ids, most likely first
  top_logprobs    f32   [N,32] their log-probabilities (log-softmax, float64
                               arithmetic on llama.cpp's float32 logits)
  lse             f32   [N]    log-sum-exp of the logits (raw logit = logprob + lse)
  target_logprob  f32   [N-1]  log p(tokens[i+1]) at row i
  ppl_512, ppl_1024            llama.cpp's perplexity at ctx 512 / 1024 (f64 scalars)
  nll_512, nll_1024   f64 [k]  per-chunk summed NLL; count_512, count_1024 scored tokens
  meta            str          JSON: model sha256, llama-cpp-python version, settings

  Perplexity follows llmc perplexity and llama.cpp's perplexity tool exactly:
  the whole text is tokenized once (BOS only when the model adds one); it is cut
  into floor(T/ctx) chunks of ctx tokens; each chunk is evaluated from an empty
  KV cache at positions 0..ctx-1, with its first token replaced by BOS *when the
  model adds BOS* (llama.cpp: `if (add_bos && j == 0) tokens[batch_start] = bos`;
  llmc: `if (tok.add_bos() ...)`) -- for SmolLM2, add_bos is false, so no
  token is replaced; the logits at positions ctx/2 .. ctx-2 (256..510 for ctx
  512) are scored, each predicting the next token; PPL = exp(mean NLL).

test/data/goldens/smollm2-greedy.json
  64 greedy tokens (argmax, stopping early at an end-of-generation token) from
  five fixed prompts: four plain completions (tokenized like `llmc run -p`: BOS
  only if the model adds it, special tokens not parsed) and one chat prompt in
  the ChatML text `llmc run --chat` feeds (the model's default system message,
  then the user turn, then "<|im_start|>assistant\\n"; special tokens parsed).
  Each entry: prompt, chat, prompt_text (what is tokenized), prompt_ids, ids,
  text (detokenized without special tokens), piece_hex (each token's bytes),
  margins (top-1 minus top-2 logit at each step).

llama.cpp settings: n_ctx 2048 (the model's trained context is 8192), n_batch
512, n_threads 2, logits_all, float32 KV cache (type_k = type_v = F32), flash
attention off, and use_extra_bufts = False: llama.cpp's extra buffer types
(weight repacking, incl. the AMX path) die with SIGILL on VMs that advertise
AMX without enabling its tile state (the shared workaround in
tools/llamacpp/llamacpp_compat.py). Matmuls still quantize activations to q8_1 /
q8_0 for the integer dot products, as llama.cpp always does on CPU.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = Path(os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
DEFAULT_TEXT = ROOT / "test" / "data" / "text" / "eval-2k.txt"
DEFAULT_OUT = ROOT / "test" / "data" / "goldens"
TOPK = 32
GREEDY_TOKENS = 64
N_CTX = 2048

# (prompt, chat). The chat one is wrapped the way `llmc run --chat` wraps it.
PROMPTS = [
    ("The capital of France is", False),
    ("Once upon a time, in a small village by the sea, there lived", False),
    ("To make a cup of tea, first", False),
    ("def fibonacci(n):\n", False),
    ("What are three good reasons to learn a second language?", True),
]


def load_llama(path: str, n_ctx: int):
    # See the docstring: the AMX repack path dies with SIGILL on this kind of VM.
    sys.path.insert(0, str(ROOT / "tools" / "llamacpp"))
    from llamacpp_compat import import_llama_cpp
    llama_cpp, _ = import_llama_cpp()
    return llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=512, n_threads=2,
                           n_threads_batch=2, logits_all=True, verbose=False,
                           type_k=0, type_v=0, flash_attn=False)


def logits_of(llm, tokens):
    """Teacher-forced float32 logits [len(tokens), vocab], from an empty cache."""
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[:len(tokens)], dtype=np.float32)


def log_softmax64(logits32):
    x = logits32.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    return x - lse, lse[..., 0]


def perplexity(llm, tokens, ctx, bos_id, add_bos):
    """llama.cpp's perplexity tool (and llmc perplexity); see the docstring."""
    n_chunks = len(tokens) // ctx
    first = ctx // 2
    nlls, counts = [], []
    for c in range(n_chunks):
        chunk = list(tokens[c * ctx:(c + 1) * ctx])
        if add_bos:
            chunk[0] = bos_id
        lp, _ = log_softmax64(logits_of(llm, chunk))
        idx = np.arange(first, ctx - 1)
        nll = -lp[idx, np.array(chunk)[idx + 1]]
        nlls.append(float(nll.sum()))
        counts.append(len(idx))
        print(f"  ctx {ctx} chunk {c + 1}/{n_chunks}: running ppl "
              f"{np.exp(sum(nlls) / sum(counts)):.4f}", file=sys.stderr)
    return float(np.exp(sum(nlls) / sum(counts))), np.array(nlls), int(sum(counts))


def chatml(tokenizer_template_system: str, user: str) -> str:
    # What runtime/src/tokenizer/chat_template.cc ApplyChatTemplate writes for
    # [user] with add_generation_prompt, when the model's template has a
    # default system message (SmolLM2-Instruct's does).
    return (f"<|im_start|>system\n{tokenizer_template_system}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def default_system(llm) -> str:
    tmpl = llm.metadata.get("tokenizer.chat_template", "")
    key = "<|im_start|>system\n"
    i = tmpl.find(key)
    if i < 0:
        raise SystemExit("the model's chat template has no default system message")
    j = tmpl.find("<|im_end|>", i)
    return tmpl[i + len(key):j]


def greedy(llm, prompt_ids, n):
    import llama_cpp.llama_cpp as C
    vocab = C.llama_model_get_vocab(llm.model)
    llm.reset()
    llm.eval(prompt_ids)
    ids, margins = [], []
    for _ in range(n):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        order = np.argsort(-row, kind="stable")[:2]
        t = int(order[0])
        ids.append(t)
        margins.append(float(row[order[0]] - row[order[1]]))
        if C.llama_vocab_is_eog(vocab, t):
            break
        llm.eval([t])
    return ids, margins


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--text", default=str(DEFAULT_TEXT))
    ap.add_argument("--out-dir", default=str(DEFAULT_OUT))
    ap.add_argument("--max-logits", type=int, default=2048)
    ap.add_argument("--llmc", default=str(ROOT / "build" / "bin" / "llmc"),
                    help="used only to cross-check tokenization, when present")
    a = ap.parse_args()
    import llama_cpp

    if not os.path.exists(a.model):
        raise SystemExit(f"{a.model}: not found (scripts/fetch-model downloads it)")
    llm = load_llama(a.model, max(N_CTX, a.max_logits))
    add_bos = bool(llama_cpp.llama_cpp.llama_vocab_get_add_bos(
        llama_cpp.llama_cpp.llama_model_get_vocab(llm.model)))
    bos = llm.token_bos()
    text = Path(a.text).read_text(encoding="utf-8")
    text_tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
    T = len(text_tokens)
    N = min(T, a.max_logits)
    print(f"{a.text}: {T} tokens (add_bos={add_bos}); logits over the first {N}"
          + (" (TRUNCATED)" if N < T else ""), file=sys.stderr)

    if os.path.exists(a.llmc):
        r = subprocess.run([a.llmc, "tokenize", a.model, "--", text], capture_output=True, text=True)
        if r.returncode == 0:
            same = [int(x) for x in r.stdout.split()] == text_tokens
            print(f"llmc tokenize agrees with llama.cpp on the text: {same}", file=sys.stderr)
            if not same:
                raise SystemExit("tokenizations differ; fix that first")

    logits = logits_of(llm, text_tokens[:N])
    lp, lse = log_softmax64(logits)
    top_ids = np.argsort(-logits, axis=1, kind="stable")[:, :TOPK].astype(np.int32)
    top_lp = np.take_along_axis(lp, top_ids, axis=1).astype(np.float32)
    toks = np.array(text_tokens[:N], dtype=np.int32)
    target_lp = lp[np.arange(N - 1), toks[1:]].astype(np.float32)
    print(f"teacher-forced: mean NLL {-target_lp.mean():.4f} (ppl {np.exp(-target_lp.mean()):.3f}) "
          f"over {N - 1} predictions", file=sys.stderr)

    ppl = {}
    for ctx in (512, 1024):
        if T // ctx == 0:
            continue
        ppl[ctx] = perplexity(llm, text_tokens, ctx, bos, add_bos)
        print(f"llama.cpp perplexity ctx {ctx}: {ppl[ctx][0]:.4f} ({ppl[ctx][2]} tokens scored, "
              f"{T // ctx} chunks)", file=sys.stderr)

    sha = hashlib.sha256(Path(a.model).read_bytes()).hexdigest()
    meta = dict(model=os.path.basename(a.model), model_sha256=sha,
                llama_cpp_python=llama_cpp.__version__, text=os.path.relpath(a.text, ROOT),
                text_sha256=hashlib.sha256(text.encode()).hexdigest(), add_bos=add_bos,
                n_text_tokens=T, n_logits=N, truncated=N < T, topk=TOPK,
                settings=dict(n_ctx=max(N_CTX, a.max_logits), n_batch=512, n_threads=2,
                              kv_cache="f32", flash_attn=False, use_extra_bufts=False),
                perplexity_method="llama.cpp perplexity: floor(T/ctx) chunks of ctx tokens, "
                                  "first token -> BOS only if add_bos, score positions "
                                  "ctx/2..ctx-2 predicting the next token")
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arrays = dict(text_tokens=np.array(text_tokens, dtype=np.int32), tokens=toks,
                  top1=top_ids[:, 0].copy(), top_ids=top_ids, top_logprobs=top_lp,
                  lse=lse.astype(np.float32), target_logprob=target_lp,
                  meta=np.array(json.dumps(meta)))
    for ctx, (p, nlls, count) in ppl.items():
        arrays[f"ppl_{ctx}"] = np.float64(p)
        arrays[f"nll_{ctx}"] = nlls
        arrays[f"count_{ctx}"] = np.int64(count)
    np.savez_compressed(out / "smollm2-eval-2k.npz", **arrays)

    system = default_system(llm)
    entries = []
    for prompt, chat in PROMPTS:
        ptext = chatml(system, prompt) if chat else prompt
        pids = llm.tokenize(ptext.encode("utf-8"), add_bos=True, special=chat)
        if os.path.exists(a.llmc):
            cmd = [a.llmc, "tokenize", a.model] + (["--chat"] if chat else ["--no-special"]) + ["--", prompt]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 0 and [int(x) for x in r.stdout.split()] != pids:
                raise SystemExit(f"llmc tokenize disagrees on prompt {prompt!r}: {r.stdout} vs {pids}")
        ids, margins = greedy(llm, pids, GREEDY_TOKENS)
        pieces = [llm.detokenize([t], special=False) for t in ids]
        gen = llm.detokenize(ids, special=False).decode("utf-8", errors="replace")
        entries.append(dict(prompt=prompt, chat=chat, prompt_text=ptext, prompt_ids=pids,
                            ids=ids, text=gen, piece_hex=[p.hex() for p in pieces],
                            margins=[round(m, 5) for m in margins]))
        print(f"--- {prompt!r} (chat={chat}): {len(ids)} tokens\n{gen}", file=sys.stderr)
    with open(out / "smollm2-greedy.json", "w", encoding="utf-8") as f:
        json.dump(dict(meta=dict(model=meta["model"], model_sha256=sha,
                                 llama_cpp_python=llama_cpp.__version__,
                                 max_tokens=GREEDY_TOKENS, settings=meta["settings"],
                                 system=system),
                       prompts=entries), f, indent=1, ensure_ascii=False)
        f.write("\n")
    for name in ("smollm2-eval-2k.npz", "smollm2-greedy.json"):
        print(f"wrote {out / name} ({(out / name).stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
