#!/usr/bin/env python3
"""`llmc serve` under load: 200 concurrent streaming clients, 2,000 requests.

On a synthetic model, with the official `openai` client (asyncio, one
connection per client): prompts of 1 to 400 token ids, outputs of 1 to 64
tokens, half greedy and half sampled with a fixed per-request seed, every
request asking for the logprob of each token. The server runs with a KV cache
smaller than the load wants, so requests are also preempted and recomputed.

Passes when:
  - no request fails and every stream ends with [DONE], its chunks carrying
    one id and choice 0;
  - every response equals the same request served alone (`llmc run
    --prompts-file --max-seqs 1`): the same text, finish reason and token
    count, and the logprob of every token to the bit;
  - the server's peak RSS stays under --max-rss-mib (reported either way);
  - at the end /metrics says nothing runs or waits and the KV cache is empty.

Exits 0 on pass, 1 on failure, 77 when the `openai` package is missing.

  python3 test/e2e/serve_load_test.py --llmc build/bin/llmc [--clients 200]
      [--requests 2000] [--keep DIR]
"""
import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as H  # noqa: E402

try:
    import openai
    try:
        import httpx
    except ImportError:  # newer openai releases depend on the httpx2 fork
        import httpx2 as httpx
except ImportError:
    openai = None

KEY = "load-test"


def workload(n, seed):
    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        length = rng.choice([1, 15, 16, 17, 400]) if i % 7 == 0 else rng.randint(1, 400)
        r = {"id": i, "prompt_token_ids": [rng.randrange(2, 300) for _ in range(length)],
             "max_tokens": rng.randint(1, 64), "temperature": 0, "logprobs": 1}
        if i % 2:
            r.update(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=5000 + i)
        reqs.append(r)
    return reqs


def served_alone(exe, art, reqs, work):
    path = os.path.join(work, "alone.in.jsonl")
    with open(path, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    out = os.path.join(work, "alone.out.jsonl")
    H.run([exe, "run", art, "--prompts-file", path, "-o", out, "--max-seqs", "1", "--threads", "2",
           "--no-verify"])
    return [json.loads(line) for line in open(out)]


async def one(client, model, r, results, sem):
    async with sem:
        body = dict(model=model, prompt=r["prompt_token_ids"], max_tokens=r["max_tokens"],
                    temperature=r["temperature"], logprobs=1, stream=True,
                    stream_options={"include_usage": True})
        if "seed" in r:
            body.update(seed=r["seed"], top_p=r["top_p"])
        text, lps, finish, usage, ids, indexes = "", [], None, None, set(), set()
        try:
            stream = await client.completions.create(**body)
            async for ch in stream:
                ids.add(ch.id)
                if ch.usage:
                    usage = ch.usage
                for c in ch.choices:
                    indexes.add(c.index)
                    text += c.text or ""
                    if c.logprobs and c.logprobs.token_logprobs:
                        lps.extend(c.logprobs.token_logprobs)
                    finish = c.finish_reason or finish
            results[r["id"]] = {"text": text, "logprobs": lps, "finish": finish,
                                "tokens": usage.completion_tokens if usage else None,
                                "ids": len(ids), "indexes": sorted(indexes)}
        except Exception as e:  # counted as an error, never lost
            results[r["id"]] = {"error": f"{type(e).__name__}: {e}"}


async def drive(base, model, reqs, clients):
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    http = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(600.0))
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=KEY, http_client=http,
                                max_retries=0)
    results = {}
    sem = asyncio.Semaphore(clients)
    await asyncio.gather(*(one(client, model, r, results, sem) for r in reqs))
    await http.aclose()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(H.ROOT, "build", "bin", "llmc"))
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--max-rss-mib", type=int, default=256)
    ap.add_argument("--keep")
    a = ap.parse_args()
    if openai is None:
        print("SKIPPED: the `openai` Python package is missing (scripts/setup installs it)")
        return 77
    exe = H.runtime_exe(a.llmc)
    work = a.keep or tempfile.mkdtemp(prefix="llmc-serve-load-")
    os.makedirs(work, exist_ok=True)
    failures = []
    srv = None
    try:
        art = H.synthetic_artifact(a.llmc, work)
        reqs = workload(a.requests, seed=17)
        t0 = time.time()
        alone = served_alone(exe, art, reqs, work)
        t_alone = time.time() - t0
        # 384 blocks of 16 tokens: a fifth of what 128 running requests
        # of up to 464 tokens can want, so some are preempted.
        srv = H.Server(exe, art, ["--threads", "2", "--max-seqs", "128", "--kv-blocks", "384",
                                  "--api-key", KEY, "--max-queue", str(a.requests)], work, "load")
        rss0, _ = srv.rss_kib()
        peak = [rss0]
        stop = threading.Event()
        def sample():
            while not stop.wait(0.2):
                try:
                    peak[0] = max(peak[0], srv.rss_kib()[0])
                except (OSError, KeyError):
                    return
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.time()
        results = asyncio.run(drive(srv.base, "synth", reqs, a.clients))
        t_load = time.time() - t0
        stop.set()
        _, hwm = srv.rss_kib()
        errors = [(i, r["error"]) for i, r in results.items() if "error" in r]
        lost = [r["id"] for r in reqs if r["id"] not in results]
        bad = []
        for r, ref in zip(reqs, alone):
            got = results.get(r["id"])
            if not got or "error" in got:
                continue
            want_finish = {"eos": "stop", "stop": "stop", "length": "length"}.get(ref["finish_reason"])
            want_lps = [x["logprob"] for x in ref.get("logprobs", [])]
            if (got["text"] != ref["text"] or got["finish"] != want_finish or
                    got["tokens"] != len(ref["token_ids"]) or got["logprobs"] != want_lps or
                    got["ids"] != 1 or got["indexes"] != [0]):
                bad.append(r["id"])
        tokens = sum(r.get("tokens") or 0 for r in results.values())
        _, _, m = H.http(srv.base, "GET", "/metrics", None, {"Authorization": f"Bearer {KEY}"})
        running = H.metric(m, "llmc:num_requests_running")
        waiting = H.metric(m, "llmc:num_requests_waiting")
        kv = H.metric(m, "llmc:kv_cache_usage_perc")
        preempted = H.metric(m, "llmc:num_preemptions_total")
        print(f"{len(reqs)} requests from {a.clients} concurrent streaming clients in {t_load:.1f} s "
              f"({tokens} tokens, {tokens / t_load:.0f} tok/s, {preempted:.0f} preemptions); "
              f"served alone in {t_alone:.1f} s")
        print(f"server RSS {rss0 / 1024:.0f} MiB idle, {peak[0] / 1024:.0f} MiB sampled peak, "
              f"VmHWM {hwm / 1024:.0f} MiB (limit {a.max_rss_mib} MiB)")
        for i, e in errors[:5]:
            print(f"  request {i}: {e}")
        for i in bad[:5]:
            print(f"  request {i}: got {results[i]} want {alone[i]}")
        checks = [
            (not errors and not lost, f"{len(errors)} errors, {len(lost)} lost"),
            (not bad, f"{len(bad)} responses differ from the request served alone"),
            (hwm / 1024 < a.max_rss_mib, f"peak RSS {hwm / 1024:.0f} MiB"),
            (running == 0 and waiting == 0 and kv == 0,
             f"at the end: running {running:.0f}, waiting {waiting:.0f}, KV usage {kv}"),
        ]
        for ok, what in checks:
            print(f"{'PASS' if ok else 'FAIL'} {what}")
            if not ok:
                failures.append(what)
        rc = srv.stop()
        if rc != 0:
            failures.append(f"server exit {rc}")
        srv = None
    except Exception as e:
        failures.append(f"harness: {type(e).__name__}: {e}")
        print(f"FAIL harness: {type(e).__name__}: {e}")
        if srv:
            print(srv.tail())
    finally:
        if srv:
            srv.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("PASS" if not failures else f"FAIL: {'; '.join(failures)}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
