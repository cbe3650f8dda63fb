#!/usr/bin/env python3
"""Chunked prefill: what a long prompt's admission does to running decodes.

8 decoders (32-token prompts) start together; at --arrival seconds a
4,000-token prompt arrives. For each --max-batch-tokens budget, the same
workload runs twice through `llmc bench --serving --save-requests`:

  with     the decoders and the long prompt;
  without  the decoders alone (the same prompts, lengths and budget).

With --long-prefill-token-threshold N the long prompt's chunks are at most N
tokens whatever the budget (the knob that bounds the decoders' latency
without shrinking the budget that many decodes or short prompts share).

The window is from the long prompt's arrival to its first token (its whole
prefill). The decoders' inter-token latencies of the tokens they produced in
that window are compared with the latencies of the same tokens (same
decoder, same position, so the same context length) in the run without the
long prompt: p50, p99 and max, and the p99 ratio (the serving issue's goal:
at most 2x). Also the long prompt's time to first token: what a small
budget costs it.

The decoders generate enough tokens to outlast the window (estimated from
the budget; a run where they did not is reported as such, not measured).

  python3 bench/chunked_prefill_itl.py --llmc build/bin/llmc --artifact smol.llmc \\
      [--budgets 4096,512,64,16,12] [--long-prefill-token-threshold N] [--threads 2]
      [--json OUT.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def percentile(values, q):
    """Nearest rank, as `llmc bench --serving` computes it."""
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def run_bench(a, workload, budget, work, tag, kv_blocks):
    wl = os.path.join(work, f"{tag}.workload.jsonl")
    with open(wl, "w") as f:
        for item in workload:
            f.write(json.dumps(item) + "\n")
    saved = os.path.join(work, f"{tag}.requests.jsonl")
    cmd = [a.llmc, "bench", a.artifact, "--serving", "--workload", wl, "--save-requests", saved,
           "--max-batch-tokens", str(budget), "--max-seqs", str(a.decoders + 1),
           "--long-prefill-token-threshold", str(a.long_prefill_token_threshold),
           "--kv-blocks", str(kv_blocks), "--threads", str(a.threads), "--json"] + a.extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    # In arrival order, as written: the decoders first, then the long prompt.
    return [json.loads(line) for line in open(saved)], json.loads(r.stdout)


def measure(a, budget, work):
    chunk = max(1, budget - a.decoders)
    if a.long_prefill_token_threshold > 0:
        chunk = min(chunk, a.long_prefill_token_threshold)
    # Decode steps take tens of ms here; enough tokens to span the arrival and
    # a prefill of long/chunk steps, with room to spare.
    outputs = int(a.arrival / 0.02) + math.ceil(a.long_prompt / chunk) + 64
    decoders = [{"prompt_len": a.decoder_prompt, "output_len": outputs, "arrival": 0}
                for _ in range(a.decoders)]
    long = {"prompt_len": a.long_prompt, "output_len": 1, "arrival": a.arrival}
    # A cache that holds every request whole (16-token blocks): the long
    # prompt must be admitted at once, not wait for blocks or preempt.
    kv_blocks = sum((w["prompt_len"] + w["output_len"] + 15) // 16 for w in decoders + [long]) + 8
    with_long, summary = run_bench(a, decoders + [long], budget, work, f"with-{budget}",
                                   kv_blocks)
    alone, summary_alone = run_bench(a, decoders, budget, work, f"without-{budget}", kv_blocks)
    if summary["preemptions"] or summary_alone["preemptions"]:
        sys.exit(f"budget {budget}: requests were preempted; the comparison assumes none")
    lp = with_long[-1]
    if "error" in lp or not lp["token_times"]:
        sys.exit(f"budget {budget}: the long prompt failed: {lp.get('error')}")
    start, end = lp["arrival"], lp["token_times"][0]
    itl_with, itl_without, outlasted = [], [], True
    for d, base in zip(with_long[:a.decoders], alone):
        times, base_times = d["token_times"], base["token_times"]
        outlasted &= times[-1] >= end
        for k in range(1, len(times)):
            if start < times[k] <= end:
                itl_with.append(times[k] - times[k - 1])
                itl_without.append(base_times[k] - base_times[k - 1])
    # The window is the long prompt's prefill: its length is that prompt's TTFT.
    row = {"budget": budget, "prefill_chunk": chunk, "outlasted": outlasted,
           "long_prompt_ttft_s": end - start,
           "samples": len(itl_with), "steps": summary["steps"]}
    if itl_with:
        for name, v in (("with", itl_with), ("without", itl_without)):
            row[name] = {"p50_ms": 1e3 * percentile(v, 0.5), "p99_ms": 1e3 * percentile(v, 0.99),
                         "max_ms": 1e3 * max(v)}
        row["p99_ratio"] = row["with"]["p99_ms"] / row["without"]["p99_ms"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llmc", default="build/bin/llmc")
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--budgets", default="4096,512,64,16,12",
                    help="--max-batch-tokens values, comma-separated")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--long-prefill-token-threshold", type=int, default=0,
                    help="most prompt tokens of one request per step (0: the budget's rest)")
    ap.add_argument("--decoders", type=int, default=8)
    ap.add_argument("--decoder-prompt", type=int, default=32)
    ap.add_argument("--long-prompt", type=int, default=4000)
    ap.add_argument("--arrival", type=float, default=2.0, help="seconds")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("extra", nargs="*", help="more `llmc bench` flags, after --")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="llmc-chunked-") as work:
        print("| budget | chunk | decoders' ITL without: p50 / p99 / max (ms) | with the long "
              "prompt: p50 / p99 / max (ms) | p99 ratio | long prompt's TTFT (s) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for budget in (int(b) for b in a.budgets.split(",")):
            r = measure(a, budget, work)
            rows.append(r)
            if not r["outlasted"] or not r["samples"]:
                print(f"| {budget} | {r['prefill_chunk']} | the decoders finished before the "
                      f"long prompt's first token: not measured | | | |", flush=True)
                continue
            w, wo = r["with"], r["without"]
            print(f"| {budget} | {r['prefill_chunk']} | {wo['p50_ms']:.0f} / {wo['p99_ms']:.0f} / "
                  f"{wo['max_ms']:.0f} | {w['p50_ms']:.0f} / {w['p99_ms']:.0f} / "
                  f"{w['max_ms']:.0f} | {r['p99_ratio']:.2f} | {r['long_prompt_ttft_s']:.1f} |",
                  flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
