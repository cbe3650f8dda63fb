#!/usr/bin/env python3
"""llmc (host artifact) vs llama.cpp (llama-cpp-python) on the same GGUF, side by side.

One invocation measures both engines on the same machine, with the same GGUF, the
same thread count and the same prompt token ids:

  prefill tok/s  P prompt tokens in one batch (P = each --prompt-tokens value)
  decode tok/s   --gen-tokens greedy single-token steps after that prefill (batch 1)

llmc is timed by its own stats line (`llmc run` separates prefill from decode);
llama.cpp is timed in this process around `Llama.eval`. The repeats of the two
engines are interleaved (llmc, llama.cpp, llmc, ...) so that a change in machine
load hits both alike; the table reports medians. It also reports llmc's peak RSS
(per `llmc run` process, from wait4) against the artifact's weight bytes plus its
KV-cache bytes for --ctx.

llama.cpp runs WITHOUT its extra buffer types (weight repacking, including the
AMX path): on VMs that advertise AMX without enabling it, those kernels die with
SIGILL on quantized matmuls (see tools/llamacpp/llamacpp_compat.py). Its numbers are
therefore those of ggml's plain CPU kernels, which may be slower than a llama.cpp
build on a machine where repacking works.

    python3 bench/host_vs_llamacpp.py [--threads T] [--prompt-tokens 128 512] ...

See bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")

# Prompt material: plain prose without newlines or special tokens, repeated as
# needed and cut at a word boundary to exactly P tokens. Prose that keeps going
# makes an early end-of-sequence in the greedy decode unlikely (llmc run is not
# given --ignore-eos, which masks EOS where the llama.cpp loop below feeds it
# back; the actual generated count is reported and checked).
PASSAGE = (
    "The lighthouse keeper climbed the narrow stairs every evening at dusk, counting "
    "the steps as his father had taught him, one hundred and twelve of them, worn "
    "smooth in the middle by a century of boots. At the top he trimmed the wick, "
    "polished the great lens with a soft cloth, and wrote the weather in a leather "
    "book whose first pages were so old that the ink had turned the color of rust. "
    "Ships passed far out on the water, their lights moving slowly along the edge of "
    "the world, and he liked to guess where each one was going: grain to the southern "
    "ports, timber to the cities in the north, letters and machines and people who "
    "would never know his name. In winter the wind came straight off the sea and "
    "pressed against the glass until the whole tower hummed like a struck bell. In "
    "summer the nights were short and full of insects that gathered around the lamp "
    "in clouds. Once a storm tore the door from its hinges and he spent three days "
    "repairing it with planks from a wrecked fishing boat that had washed onto the "
    "rocks below. He kept a garden behind the cottage, potatoes and beans and a row "
    "of stubborn roses, and on market days he walked to the village to trade fish "
    "for bread, coffee, oil for the lamp, and news. The children there asked him "
    "whether he was ever lonely, and he told them that a man with the sea, the sky, "
    "and a light to keep is never alone, although in truth he sometimes talked to "
    "the gulls just to hear a voice answer."
)

STATS_RE = re.compile(
    r"llmc run: prompt (\d+) tokens in ([\d.]+) s \(([\d.]+) tok/s\); generated (\d+) tokens, "
    r"decode ([\d.]+) tok/s; finish: (\S+); (\d+) threads")


def die(msg: str) -> None:
    print(f"host_vs_llamacpp: {msg}", file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- machine

def machine_info() -> dict:
    cpu = "unknown"
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and cpu == "unknown":
                    cpu = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [x for x in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                       "amx_int8", "amx_bf16") if x in flags]
    return dict(nproc=len(os.sched_getaffinity(0)), cpu_count=os.cpu_count(), cpu=cpu,
                isa=isa, loadavg=os.getloadavg())


# ---------------------------------------------------------------- llama.cpp

def import_llama_cpp():
    # llama.cpp's extra buffer types (weight repacking, incl. the AMX one) are
    # off: tools/llamacpp/llamacpp_compat.py says why.
    sys.path.insert(0, os.path.join(REPO, "tools", "llamacpp"))
    from llamacpp_compat import import_llama_cpp
    try:
        return import_llama_cpp()
    except ImportError as e:
        die(f"cannot import llama_cpp (pip install llama-cpp-python): {e}")


class LlamaCppEngine:
    def __init__(self, llama_cpp, C, model: str, threads: int, n_ctx: int, n_batch: int,
                 kv: str):
        kv_type = {"f32": 0, "f16": 1}[kv]
        self.C = C
        self.llm = llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_batch=n_batch,
                                   n_ubatch=n_batch, n_threads=threads,
                                   n_threads_batch=threads, type_k=kv_type, type_v=kv_type,
                                   flash_attn=False, logits_all=False, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def _argmax_last(self) -> int:
        ptr = self.C.llama_get_logits_ith(self.llm.ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))))

    def run(self, ids: list[int], gen: int) -> dict:
        """Prefill `ids` in one batch, then `gen` greedy single-token decode steps.

        EOS is ignored: the argmax token is fed back whatever it is."""
        self.llm.reset()  # n_tokens = 0; eval() drops the KV cells past it
        t0 = time.perf_counter()
        self.llm.eval(ids)
        prefill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        tok = self._argmax_last()
        out = [tok]
        for _ in range(gen):
            self.llm.eval([tok])
            tok = self._argmax_last()
            out.append(tok)
        decode_s = time.perf_counter() - t0
        return dict(prefill_s=prefill_s, prefill_tps=len(ids) / prefill_s, decode_s=decode_s,
                    decode_steps=gen, decode_tps=gen / decode_s, tokens=out)


# ---------------------------------------------------------------- llmc

def run_llmc(llmc: str, artifact: str, text: str, gen: int, threads: int, ctx: int,
             batch: int, env: dict | None = None) -> dict:
    """One `llmc run` process; timings from its stats line, peak RSS from its VmHWM."""
    # -n gen+1: the first token comes from the prefill logits, so gen+1 tokens
    # take exactly `gen` single-token decode steps (the same as the llama.cpp side).
    cmd = [llmc, "run", artifact, "-p", text, "-n", str(gen + 1), "--greedy",
           "--threads", str(threads), "--ctx", str(ctx), "--batch", str(batch)]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        hwm = peak_rss_while_running(p)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    if p.returncode != 0:
        die(f"{' '.join(cmd[:3])} ... failed ({p.returncode}):\n{stderr}")
    m = STATS_RE.search(stderr)
    if not m:
        die(f"no stats line in llmc run's stderr:\n{stderr}")
    prompt_n, prefill_s, prefill_tps, generated, decode_tps, finish, thr = m.groups()
    generated = int(generated)
    return dict(prompt_tokens=int(prompt_n), prefill_s=float(prefill_s),
                prefill_tps=float(prefill_tps), generated=generated,
                decode_steps=generated - 1, decode_tps=float(decode_tps), finish=finish,
                threads=int(thr), maxrss=hwm,
                text=stdout[len(text):] if stdout.startswith(text) else stdout)


def peak_rss_while_running(p: subprocess.Popen) -> int:
    """The child's peak RSS in bytes: its VmHWM, polled until it exits.

    Not getrusage/wait4's ru_maxrss: Linux carries the RSS high-water mark of the
    process image replaced by exec into the child's ru_maxrss, and subprocess
    spawns with vfork, so that would report this (llama.cpp-holding) Python
    process's RSS whenever it is the larger. VmHWM belongs to the exec'd image
    alone. The last poll comes at most ~5 ms before the exit."""
    hwm = 0
    path = f"/proc/{p.pid}/status"
    while p.poll() is None:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]) * 1024)
                        break
        except OSError:
            pass
        time.sleep(0.005)
    return hwm


def llmc_tokenize(llmc: str, model: str, text: str) -> list[int] | None:
    # `llmc run` (without --chat) encodes with BOS-if-the-model-asks and no special parsing.
    r = subprocess.run([llmc, "tokenize", model, "--no-special", "--", text],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return [int(x) for x in r.stdout.split()]


def make_prompt(tokenize, n: int) -> str:
    """Prose cut at a word boundary (padded with ' and') that tokenizes to exactly n ids."""
    words = PASSAGE.split()
    text, i = "", 0
    while True:
        cand = (text + " " + words[i % len(words)]) if text else words[0]
        k = len(tokenize(cand))
        if k > n:
            break
        text, i = cand, i + 1
        if k == n:
            return text
    while len(tokenize(text)) < n:
        text += " and"
    if len(tokenize(text)) != n:
        die(f"could not build a prompt of exactly {n} tokens")
    return text


# ---------------------------------------------------------------- main

def fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"

def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL, help="GGUF file (default: %(default)s)")
    ap.add_argument("--llmc", default=os.path.join(REPO, "build/bin/llmc"),
                    help="llmc executable (default: %(default)s)")
    ap.add_argument("--artifact", help="an artifact compiled from --model (skips llmc compile)")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="threads for both engines (default: nproc = %(default)s)")
    ap.add_argument("--prompt-tokens", type=int, nargs="+", default=[128, 512],
                    help="prompt lengths P to measure (default: 128 512)")
    ap.add_argument("--gen-tokens", type=int, default=64,
                    help="greedy decode steps after the prefill (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per engine; median reported")
    ap.add_argument("--ctx", type=int, default=1024,
                    help="llmc run --ctx (KV-cache capacity, also the RSS budget's KV term)")
    ap.add_argument("--llama-kv", choices=["f32", "f16"], default="f32",
                    help="llama.cpp KV-cache type (default f32, as llmc's artifact)")
    ap.add_argument("--llama-omp-passive", action="store_true",
                    help="set OMP_WAIT_POLICY=passive for llama.cpp (its OpenMP workers "
                         "sleep instead of spinning; helps a lot on a loaded machine)")
    ap.add_argument("--llmc-rt", default=os.path.join(REPO, "build/bin/llmc-rt"),
                    help="runtime-only executable for one extra peak-RSS run per P "
                         "(no LLVM/MLIR libraries mapped); '' to skip (default: %(default)s)")
    ap.add_argument("--no-rss-fill", action="store_true",
                    help="skip the peak-RSS runs that fill the KV cache to --ctx")
    ap.add_argument("--json", help="also write all measurements here")
    return ap.parse_args()


def validate_args(args: argparse.Namespace) -> None:
    if not os.path.isfile(args.model):
        die(f"no model at {args.model} (scripts/fetch-model fetches the default)")
    if not os.access(args.llmc, os.X_OK):
        die(f"no llmc executable at {args.llmc} (cmake --build build)")
    if max(args.prompt_tokens) + args.gen_tokens + 1 >= args.ctx:
        die(f"--ctx {args.ctx} is too small for {max(args.prompt_tokens)} + "
            f"{args.gen_tokens} tokens")
    if args.repeats < 1 or args.gen_tokens < 1 or min(args.prompt_tokens) < 1:
        die("--repeats, --gen-tokens and --prompt-tokens must be positive")


def print_machine(args: argparse.Namespace) -> dict:
    """Prints the CPU, the load and the model; returns machine_info()."""
    mach = machine_info()
    load1 = mach["loadavg"][0]
    print(f"machine: {mach['cpu']}; nproc {mach['nproc']} (cpu_count {mach['cpu_count']}); "
          f"ISA {' '.join(mach['isa']) or '-'}")
    print(f"load average at start: {load1:.2f} {mach['loadavg'][1]:.2f} "
          f"{mach['loadavg'][2]:.2f}")
    if load1 > 1:
        print(f"WARNING: load average {load1:.2f} > 1: other processes compete for the CPUs "
              "and distort these numbers; runs are interleaved, but the engines suffer "
              "unequally (llama.cpp's OpenMP workers spin; see bench/README.md).")
    if args.threads > mach["nproc"]:
        print(f"WARNING: --threads {args.threads} > nproc {mach['nproc']}: oversubscribed.")
    print(f"model: {args.model}")
    return mach


def compile_artifact(args: argparse.Namespace) -> tuple[str, str | None]:
    """(the artifact to time, the temporary folder holding it or None for --artifact)."""
    # llmc artifact: compile once (the compile cache makes a rerun quick).
    tmpdir = None
    artifact = args.artifact
    if not artifact:
        tmpdir = tempfile.mkdtemp(prefix="llmc-bench-")
        artifact = os.path.join(tmpdir, "model.llmc")
        t0 = time.perf_counter()
        r = subprocess.run([args.llmc, "compile", args.model, "-o", artifact],
                           capture_output=True, text=True)
        if r.returncode != 0:
            die(f"llmc compile failed:\n{r.stderr}")
        print(f"llmc compile: {time.perf_counter() - t0:.1f} s -> {artifact}")
    return artifact, tmpdir


@dataclass
class RssBudget:
    """The peak-RSS budget of an artifact: its weight bytes plus its KV cache for --ctx."""
    weight_bytes: int
    layers: int
    kv_heads: int
    head_dim: int
    kv_elt: int
    ctx: int

    @property
    def kv_bytes(self) -> int:
        return 2 * self.layers * self.ctx * self.kv_heads * self.head_dim * self.kv_elt

    @property
    def total(self) -> int:
        return self.weight_bytes + self.kv_bytes

    def verdict(self, x: int) -> str:
        r = x / self.total
        return f"{x / 2**20:.1f} MiB = {r:.2f} x budget ({'below' if r < 1.3 else 'ABOVE'} 1.3)"


def read_manifest(artifact: str, ctx: int) -> tuple[dict, RssBudget]:
    """The artifact's manifest and its peak-RSS budget for `ctx` tokens."""
    with open(os.path.join(artifact, "manifest.json")) as f:
        manifest = json.load(f)
    cfg = manifest["model"]
    weight_bytes = int(manifest["weights"]["size"])
    kv_elt = {"f32": 4, "f16": 2, "bf16": 2}.get(manifest.get("kv_dtype", "f32"), 4)
    layers, kvh = int(cfg["num_hidden_layers"]), int(cfg["num_key_value_heads"])
    head_dim = int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])
    return manifest, RssBudget(weight_bytes=weight_bytes, layers=layers, kv_heads=kvh,
                               head_dim=head_dim, kv_elt=kv_elt, ctx=ctx)


def load_llama_cpp(args: argparse.Namespace, manifest: dict):
    """(llama_cpp, its C API, a vocab-only Llama of --model, OMP_WAIT_POLICY in words).

    Sets OMP_WAIT_POLICY in this process for --llama-omp-passive: take llmc's
    environment before calling this."""
    omp = os.environ.get("OMP_WAIT_POLICY", "default (active)")
    if args.llama_omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "passive"  # read when libgomp loads, below
        omp = "passive"
    llama_cpp, C = import_llama_cpp()
    print(f"llama.cpp: llama-cpp-python {llama_cpp.__version__}, extra buffer types (repack/"
          f"AMX) OFF, flash-attn off, OMP_WAIT_POLICY {omp}, KV {args.llama_kv}; llmc: KV "
          f"{manifest.get('kv_dtype', 'f32')}, activations {manifest.get('activation_dtype')}")
    vocab = llama_cpp.Llama(model_path=args.model, vocab_only=True, verbose=False)
    return llama_cpp, C, vocab, omp


class Bench:
    """What every measurement shares: the arguments, the artifact, llmc's
    environment, and llama.cpp's module, C API and vocab-only model."""

    def __init__(self, args: argparse.Namespace, artifact: str, child_env: dict, llama_cpp, C,
                 vocab):
        self.args, self.artifact, self.child_env = args, artifact, child_env
        self.llama_cpp, self.C, self.vocab = llama_cpp, C, vocab

    def tokenize(self, text: str) -> list[int]:
        # add_bos=True adds BOS only where the model asks for it, as llmc run does.
        return self.vocab.tokenize(text.encode(), add_bos=True, special=False)

    def run_llmc(self, exe: str, text: str, gen: int, P: int) -> dict:
        """`exe run` of the artifact on `text` with the prompt batch P."""
        a = self.args
        return run_llmc(exe, self.artifact, text, gen, a.threads, a.ctx, batch=P,
                        env=self.child_env)


def prompt_and_ids(bench: Bench, P: int) -> tuple[str, list[int]]:
    """The P-token prompt and the ids llama.cpp gets for it (llmc's, where they differ)."""
    text = make_prompt(bench.tokenize, P)
    ids = bench.tokenize(text)
    lids = llmc_tokenize(bench.args.llmc, bench.args.model, text)
    if lids is None:
        print("WARNING: llmc tokenize failed; using llama.cpp's ids for both")
    elif lids != ids:
        print(f"WARNING: llmc and llama.cpp tokenize the P={P} prompt differently "
              f"({len(lids)} vs {len(ids)} ids); llama.cpp gets llmc's ids")
        ids = lids
    return text, ids


def timed_runs(bench: Bench, eng: LlamaCppEngine, text: str, ids: list[int],
               P: int) -> tuple[list[dict], list[dict]]:
    """--repeats runs of each engine, interleaved: (llmc's, llama.cpp's)."""
    args = bench.args
    lm, lc = [], []
    for rep in range(args.repeats):
        a = bench.run_llmc(args.llmc, text, args.gen_tokens, P)
        b = eng.run(ids, args.gen_tokens)
        lm.append(a)
        lc.append(b)
        print(f"  P={P} run {rep + 1}/{args.repeats}: llmc prefill {a['prefill_tps']:.1f} "
              f"decode {a['decode_tps']:.1f} tok/s ({a['generated']} generated, "
              f"{a['finish']}, {a['threads']} thr, RSS {a['maxrss'] / 2**20:.1f} MiB) | "
              f"llama.cpp prefill {b['prefill_tps']:.1f} decode {b['decode_tps']:.1f} tok/s",
              flush=True)
    return lm, lc


def warn_llmc_runs(args: argparse.Namespace, lm: list[dict], P: int) -> None:
    """Warns where llmc's runs did not do what was asked of them."""
    if any(r["prompt_tokens"] != P for r in lm):
        print(f"WARNING: llmc saw {lm[0]['prompt_tokens']} prompt tokens, not {P}")
    if any(r["threads"] != args.threads for r in lm):
        print(f"WARNING: llmc ran {lm[0]['threads']} threads, not {args.threads}")
    short = [r for r in lm if r["decode_steps"] < args.gen_tokens]
    if short:
        print(f"WARNING: llmc stopped early ({short[0]['finish']}) after "
              f"{short[0]['decode_steps']} decode steps < {args.gen_tokens} (EOS is not masked, to "
              "match llama.cpp's greedy text); its decode rate covers fewer steps")


def greedy_text_agreement(vocab, lm: list[dict], lc: list[dict]) -> tuple[int, int]:
    """(characters the last runs' texts share from the start, llmc's text length)."""
    # Sanity: both engines should produce the same greedy continuation
    # (modulo float summation order; a divergence late in the text is normal).
    lc_text = vocab.detokenize(lc[-1]["tokens"][:lm[-1]["generated"]]).decode(
        "utf-8", "replace")
    lm_text = lm[-1]["text"].rstrip("\n")
    same = 0
    while same < min(len(lc_text), len(lm_text)) and lc_text[same] == lm_text[same]:
        same += 1
    return same, len(lm_text)


def summarize_prompt(args: argparse.Namespace, P: int, agree: tuple[int, int], rt: dict | None,
                     lm: list[dict], lc: list[dict]) -> dict:
    """The result of one prompt length: medians, and the runs themselves."""
    same, text_chars = agree
    return dict(
        P=P, text_agree_chars=same, text_chars=text_chars, llmc_rt=rt,
        llmc=dict(prefill_tps=statistics.median(r["prefill_tps"] for r in lm),
                  decode_tps=statistics.median(r["decode_tps"] for r in lm),
                  decode_steps=min(r["decode_steps"] for r in lm),
                  maxrss=max(r["maxrss"] for r in lm), runs=[
                      {k: v for k, v in r.items() if k != "text"} for r in lm]),
        llamacpp=dict(prefill_tps=statistics.median(r["prefill_tps"] for r in lc),
                      decode_tps=statistics.median(r["decode_tps"] for r in lc),
                      decode_steps=args.gen_tokens, runs=[
                          {k: v for k, v in r.items() if k != "tokens"} for r in lc]))


def measure_prompt(bench: Bench, P: int) -> dict:
    """Both engines on a P-token prompt, then one llmc-rt run for its peak RSS.

    llama.cpp's model for P is freed on return, before the next P's is loaded."""
    args = bench.args
    text, ids = prompt_and_ids(bench, P)
    eng = LlamaCppEngine(bench.llama_cpp, bench.C, args.model, args.threads,
                         n_ctx=P + args.gen_tokens + 8, n_batch=P, kv=args.llama_kv)
    eng.run(ids, min(4, args.gen_tokens))  # warm-up (first-touch of mmap'd weights)
    lm, lc = timed_runs(bench, eng, text, ids, P)
    warn_llmc_runs(args, lm, P)
    agree = greedy_text_agreement(bench.vocab, lm, lc)
    rt = None
    if args.llmc_rt and os.access(args.llmc_rt, os.X_OK):
        rt = bench.run_llmc(args.llmc_rt, text, args.gen_tokens, P)
        rt.pop("text")
    return summarize_prompt(args, P, agree, rt, lm, lc)


# ---------------------------------------------------------------- report

def print_rate_table(args: argparse.Namespace, results: list[dict]) -> None:
    """The median rates per P and engine, and their ratios (also stored as r["ratio"])."""
    T = args.threads
    print()
    print(f"median of {args.repeats}; threads {T}; decode = {args.gen_tokens} greedy batch-1 "
          f"steps after the P-token prefill")
    hdr = f"{'P':>5}  {'engine':<10} {'threads':>7} {'prefill tok/s':>14} {'decode tok/s':>13}"
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        a, b = r["llmc"], r["llamacpp"]
        print(f"{r['P']:>5}  {'llmc':<10} {T:>7} {fmt_rate(a['prefill_tps']):>14} "
              f"{fmt_rate(a['decode_tps']):>13}"
              + (f"  ({a['decode_steps']} steps)" if a["decode_steps"] < args.gen_tokens else ""))
        print(f"{r['P']:>5}  {'llama.cpp':<10} {T:>7} {fmt_rate(b['prefill_tps']):>14} "
              f"{fmt_rate(b['decode_tps']):>13}")
        rp = a["prefill_tps"] / b["prefill_tps"]
        rd = a["decode_tps"] / b["decode_tps"]
        r["ratio"] = dict(prefill=rp, decode=rd)
        print(f"{r['P']:>5}  {'llmc/l.cpp':<10} {'':>7} {rp:>13.2f}x {rd:>12.2f}x")
    print("(ratio > 1: llmc faster)")
    for r in results:
        print(f"greedy text check P={r['P']}: llmc and llama.cpp agree on the first "
              f"{r['text_agree_chars']} of {r['text_chars']} generated characters")


def print_rss_budget(budget: RssBudget) -> None:
    b = budget
    print()
    print(f"peak RSS budget: weights {b.weight_bytes / 2**20:.1f} MiB (manifest weights.size) + KV "
          f"{b.kv_bytes / 2**20:.1f} MiB (2 x {b.layers} layers x {b.ctx} ctx x {b.kv_heads} "
          f"kv_heads x {b.head_dim} head_dim x {b.kv_elt} B) = {b.total / 2**20:.1f} MiB")


def report_timed_rss(args: argparse.Namespace, budget: RssBudget, results: list[dict]) -> dict:
    """Prints the peak RSS of the timed (and llmc-rt) runs; returns it as the JSON's peak_rss."""
    rss = dict(timed={}, rt={}, fill={})
    print(f"peak RSS of the timed runs (--ctx {args.ctx}; only the KV pages of "
          f"P + {args.gen_tokens} tokens are touched):")
    for r in results:
        rss["timed"][r["P"]] = r["llmc"]["maxrss"]
        line = f"  P={r['P']}: llmc run {budget.verdict(r['llmc']['maxrss'])}"
        if r["llmc_rt"]:
            rss["rt"][r["P"]] = r["llmc_rt"]["maxrss"]
            line += f"; llmc-rt run {budget.verdict(r['llmc_rt']['maxrss'])}"
        print(line)
    return rss


def measure_filled_rss(bench: Bench, budget: RssBudget, rss: dict) -> None:
    """Peak RSS of llmc run and llmc-rt run with the KV cache full, into rss["fill"]."""
    # Fill the KV cache: the budget counts all --ctx tokens of it.
    args = bench.args
    P = max(args.prompt_tokens)
    text = make_prompt(bench.tokenize, P)
    gen = args.ctx - P - 2
    print(f"peak RSS with the KV cache filled (P={P} + {gen + 1} generated of --ctx "
          f"{args.ctx}):")
    for name, exe in (("llmc run", args.llmc), ("llmc-rt run", args.llmc_rt)):
        if not exe or not os.access(exe, os.X_OK):
            continue
        x = bench.run_llmc(exe, text, gen, P)
        rss["fill"][name] = dict(maxrss=x["maxrss"], tokens=P + x["generated"],
                                 finish=x["finish"])
        print(f"  {name}: {budget.verdict(x['maxrss'])} ({P + x['generated']} tokens in context, "
              f"{x['finish']})")


def write_json(args: argparse.Namespace, mach: dict, budget: RssBudget, rss: dict, omp: str,
               results: list[dict]) -> None:
    with open(args.json, "w") as f:
        json.dump(dict(machine=mach, model=args.model, threads=args.threads,
                       repeats=args.repeats, gen_tokens=args.gen_tokens, ctx=args.ctx,
                       llama_kv=args.llama_kv, weight_bytes=budget.weight_bytes,
                       kv_bytes=budget.kv_bytes, peak_rss=rss, omp_wait_policy=omp,
                       results=results), f, indent=1)


def main() -> int:
    args = parse_args()
    validate_args(args)
    mach = print_machine(args)
    artifact, tmpdir = compile_artifact(args)
    manifest, budget = read_manifest(artifact, args.ctx)
    child_env = dict(os.environ)  # llmc's environment: as this script got it
    llama_cpp, C, vocab, omp = load_llama_cpp(args, manifest)
    bench = Bench(args, artifact, child_env, llama_cpp, C, vocab)

    results = [measure_prompt(bench, P) for P in args.prompt_tokens]

    print_rate_table(args, results)
    print_rss_budget(budget)
    rss = report_timed_rss(args, budget, results)
    if not args.no_rss_fill:
        measure_filled_rss(bench, budget, rss)
    if args.json:
        write_json(args, mach, budget, rss, omp, results)
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
