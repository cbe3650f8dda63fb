#!/usr/bin/env python3
"""llmc's serving engine vs llama.cpp's batched decoding, side by side.

For each concurrency B (--batches), B requests of --prompt-tokens prompt
tokens and --gen-tokens output tokens run on both engines, with the same
GGUF, the same thread count, on the same machine, alternating engines per B
so that a change in machine load hits both alike:

  llmc       `llmc bench ARTIFACT --serving --requests B --input-len P
             --output-len G --json` (all B submitted at once; the engine
             chunks and batches them); its generation tokens/s counts the
             decode-only steps (every running request decoding one token).
  llama.cpp  `llama-batched-bench -npp P -ntg G -npl B` (B sequences
             prefilled, then decoded together); its S_TG t/s is the same
             quantity: B * G over the decode phase's time.

Both also report their whole-run throughput (llmc: output tokens over the
run; llama.cpp: S t/s, prompt and output tokens over the run).

Build the peer outside the repository, e.g.
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release \\
      -DLLAMA_CURL=OFF -DGGML_NATIVE=ON && cmake --build llama.cpp/build --target llama-batched-bench

  python3 bench/serving_vs_llamacpp.py --gguf MODEL.gguf --artifact MODEL.llmc \\
      --llama-batched-bench llama.cpp/build/bin/llama-batched-bench [--threads 2] \\
      [--batches 1,4,16,64] [--json]
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}")
    return r


def llmc_run(args, b):
    blocks = b * ((args.prompt_tokens + args.gen_tokens + 15) // 16) + 16
    r = run([args.llmc, "bench", args.artifact, "--serving", "--requests", str(b), "--input-len",
             str(args.prompt_tokens), "--output-len", str(args.gen_tokens), "--threads",
             str(args.threads), "--max-seqs", str(max(b, 1)), "--kv-blocks", str(blocks),
             "--no-verify", "--no-progress", "--json"])
    j = json.loads(r.stdout)
    return {"gen_tps": j["generation_tokens_per_s"], "run_tps": j["total_tokens_per_s"],
            "ttft_p50_ms": j["ttft_ms"]["p50"], "itl_p50_ms": j["itl_ms"]["p50"],
            "duration_s": j["duration_s"]}


ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)"
                 r"\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")


def llama_run(args, b):
    ctx = b * (args.prompt_tokens + args.gen_tokens) + 256
    r = run([args.llama_batched_bench, "-m", args.gguf, "-c", str(ctx), "-b", "2048", "-ub", "512",
             "-npp", str(args.prompt_tokens), "-ntg", str(args.gen_tokens), "-npl", str(b), "-t",
             str(args.threads), "-tb", str(args.threads)])
    for line in r.stdout.splitlines() + r.stderr.splitlines():
        m = ROW.match(line.strip())
        if m and int(m.group(3)) == b:
            return {"gen_tps": float(m.group(8)), "run_tps": float(m.group(10)),
                    "pp_tps": float(m.group(6))}
    raise RuntimeError(f"no result row for B={b} in llama-batched-bench's output:\n{r.stdout}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--artifact", required=True, help="the llmc artifact compiled from --gguf")
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc-rt"))
    ap.add_argument("--llama-batched-bench", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for b in [int(x) for x in args.batches.split(",")]:
        ours = llmc_run(args, b)
        peer = llama_run(args, b)
        rows.append({"concurrency": b, "llmc": ours, "llama.cpp": peer,
                     "gen_ratio": ours["gen_tps"] / peer["gen_tps"]})
        if not args.json:
            print(f"B={b:3d}: llmc {ours['gen_tps']:8.1f} gen tok/s, llama.cpp {peer['gen_tps']:8.1f}"
                  f" (S_TG): ratio {rows[-1]['gen_ratio']:.2f}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"gguf": args.gguf, "threads": args.threads,
                          "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
                          "rows": rows}, indent=2))
        return 0
    print(f"SmolLM2-class serving, {args.threads} threads, {args.prompt_tokens}-token prompts, "
          f"{args.gen_tokens} output tokens each")
    print("| concurrent | llmc gen tok/s | llama.cpp S_TG t/s | ratio | llmc run tok/s | "
          "llama.cpp run t/s | llmc TTFT p50 ms |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['concurrency']} | {r['llmc']['gen_tps']:.1f} | {r['llama.cpp']['gen_tps']:.1f} | "
              f"{r['gen_ratio']:.2f} | {r['llmc']['run_tps']:.1f} | {r['llama.cpp']['run_tps']:.1f} | "
              f"{r['llmc']['ttft_p50_ms']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
