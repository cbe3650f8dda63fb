#!/usr/bin/env python3
"""Load generator for OpenAI-compatible servers: `llmc serve` vs llama.cpp's llama-server.

Each concurrency level C runs N requests (--requests, default max(4*C, 8)) in a
closed loop: C workers, each sending its next request as soon as the previous
one finished. Every request is a streaming completion (`stream=True`,
`stream_options={"include_usage": true}`), temperature 0, with `ignore_eos`
(sent in the body; llama-server and llmc serve honour it) so that every
request produces exactly its max_tokens. Per request it measures

  TTFT  time from sending the request to the first non-empty content chunk;
  ITL   the gaps between consecutive content chunks; a chunk may carry more
        than one token, so when the server's usage says n tokens came in k < n
        chunks each gap is divided by (n-1)/(k-1) (the mean tokens per gap);
  E2E   time from sending to the end of the stream;
  output tokens from usage.completion_tokens (else the number of chunks);
  errors with their message.
Requests are not retried. Each opens its own connection (`Connection: close`)
unless --keepalive: connect time on localhost is negligible, and llama-server
drops kept-alive connections after streamed responses.

Per level it reports requests ok/errors, the duration (first send to last
end), output tokens/s and requests/s over that duration, TTFT p50/p90/p99,
ITL p50/p90/p99 and E2E p50/p99 over the successful requests.

Workload: --workload FILE.jsonl, one request per line, either
{"prompt": "...", "max_tokens": N} or {"prompt_len": P, "output_len": G} (a
prompt of about P tokens of common English words, a different one per request
from a fixed seed, so prefix caches do not help), used in turn; without it a
built-in mix of lengths (DEFAULT_MIX). Both servers get the same requests in
the same order. Literal prompts are sent as given: if they repeat, a server's
prefix cache may shorten their TTFT.

Peer build, outside the repository (llama.cpp c392e5094 at ~/.cache/llmc/peer/llama.cpp;
LLAMA_BUILD_SERVER must be ON, a build dir configured with it OFF has no
llama-server target: "ninja: error: unknown target"):
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DCMAKE_BUILD_TYPE=Release \\
      -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_SERVER=ON
  cmake --build llama.cpp/build --target llama-server     # -> llama.cpp/build/bin/llama-server

Needs the `openai` package (python3 -m pip install openai).

Examples
  # a server that is already running
  python3 bench/serve_bench.py --base-url http://127.0.0.1:8091/v1 --concurrency 1,4 --requests 8
  # side by side: the script starts and stops both servers for every level,
  # alternating which goes first, and prints both plus ratios
  python3 bench/serve_bench.py --llmc build/bin/llmc --llmc-artifact MODEL.llmc \\
      --llama-server ~/.cache/llmc/peer/llama.cpp/build/bin/llama-server \\
      --gguf ~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --concurrency 1,16,64
  (give only one of the two servers' flags to benchmark that one, started by the script)
"""
import argparse
import asyncio
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    from openai import AsyncOpenAI
except ImportError:
    sys.exit("serve_bench.py needs the openai package: python3 -m pip install openai")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MIX = [(32, 64), (128, 64), (256, 32), (64, 128), (512, 32), (16, 96)]  # (prompt_len, output_len)
WORDS = sorted(set(("the of and to in is was for that on as with by he it at from his an were are which this be "
         "or has had first one their its new after who they have her she two been other when there all "
         "during into school time may years more most only over city some world would where later up "
         "such used many can state about national out known university united then made team group "
         "under game people year back well three also season film company part found house music "
         "work river water small life long line high area home music number light field early story "
         "power name country order great place town point war family great road system series book "
         "water game local major station public church north south east west day night old young").split()))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def synth_prompt(n_tokens, rng):
    return " ".join(rng.choice(WORDS) for _ in range(max(1, n_tokens)))


def load_workload(path):
    """Items {prompt (None: synthesize per request), max_tokens, prompt_len (estimate)}."""
    items = []
    if path is None:
        return [{"prompt": None, "max_tokens": g, "prompt_len": p} for p, g in DEFAULT_MIX]
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            if "prompt" in d:
                # rough token estimate (used only to size llama-server's context)
                items.append({"prompt": d["prompt"], "max_tokens": int(d.get("max_tokens", 128)),
                              "prompt_len": len(d["prompt"]) // 3 + 1})
            elif "prompt_len" in d:
                items.append({"prompt": None,
                              "max_tokens": int(d.get("output_len", 128)), "prompt_len": int(d["prompt_len"])})
            else:
                sys.exit(f"{path}:{ln}: need 'prompt' or 'prompt_len'")
    if not items:
        sys.exit(f"{path}: no requests")
    return items


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def one_request(client, args, model, item):
    r = {"ok": False, "ttft": None, "itl": [], "e2e": None, "out_tokens": 0, "error": None}
    t0 = time.perf_counter()
    times, usage = [], None
    try:
        common = dict(model=model, max_tokens=item["max_tokens"], temperature=0, stream=True,
                      stream_options={"include_usage": True},
                      extra_body={"ignore_eos": True} if args.ignore_eos else None)
        if args.chat:
            stream = await client.chat.completions.create(
                messages=[{"role": "user", "content": item["prompt"]}], **common)
        else:
            stream = await client.completions.create(prompt=item["prompt"], **common)
        async for chunk in stream:
            now = time.perf_counter()
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices or []:
                text = (c.delta.content if c.delta else None) if args.chat else c.text
                if text:
                    times.append(now)
        t1 = time.perf_counter()
    except Exception as e:  # network errors, HTTP errors, malformed stream
        r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return r
    if not times:
        r["error"] = "no content in the stream"
        return r
    n = usage.completion_tokens if usage is not None and usage.completion_tokens else len(times)
    gaps = [b - a for a, b in zip(times, times[1:])]
    if len(times) > 1 and n > len(times):
        f = (n - 1) / (len(times) - 1)
        gaps = [g / f for g in gaps]
    r.update(ok=True, ttft=times[0] - t0, itl=gaps, e2e=t1 - t0, out_tokens=n,
             prompt_tokens=usage.prompt_tokens if usage is not None else None)
    return r


def make_requests(workload, conc, n_req):
    """The level's requests, the same for every server. Synthesized prompts differ per request
    (seeded by level and index) so that no server's prefix cache can serve one from another."""
    reqs = []
    for i in range(n_req):
        w = workload[i % len(workload)]
        prompt = w["prompt"] or synth_prompt(w["prompt_len"], random.Random(conc * 1000003 + i))
        reqs.append({"prompt": prompt, "max_tokens": w["max_tokens"]})
    return reqs


async def run_level(base_url, args, workload, conc, n_req):
    reqs = make_requests(workload, conc, n_req)
    # One connection per request unless --keepalive: llama-server (c392e5094) closes the socket
    # after every streamed response without saying `Connection: close`, and a client that reuses
    # the connection then fails now and then ("Server disconnected without sending a response").
    headers = None if args.keepalive else {"Connection": "close"}
    client = AsyncOpenAI(base_url=base_url, api_key=args.api_key, max_retries=0, timeout=args.timeout,
                         default_headers=headers)
    try:
        model = args.model or (await client.models.list()).data[0].id
        for i in range(args.warmup):  # not measured: page in weights, first-call setup
            w = await one_request(client, args, model, {"prompt": "Hello", "max_tokens": 8})
            if not w["ok"]:
                log(f"  warmup request failed: {w['error']}")
        queue = list(range(n_req))
        results = [None] * n_req

        async def worker():
            while queue:
                i = queue.pop(0)
                results[i] = await one_request(client, args, model, reqs[i])

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(conc)))
        dur = time.perf_counter() - t0
    finally:
        await client.close()
    ok = [r for r in results if r["ok"]]
    errs = [r["error"] for r in results if not r["ok"]]
    ms = lambda xs: [x * 1000 for x in xs]
    ttft, itl, e2e = ms(r["ttft"] for r in ok), ms(g for r in ok for g in r["itl"]), ms(r["e2e"] for r in ok)
    out = sum(r["out_tokens"] for r in ok)
    return {"concurrency": conc, "model": model, "requests": n_req, "ok": len(ok), "errors": len(errs),
            "error_samples": sorted(set(errs))[:5], "duration_s": dur, "output_tokens": out,
            "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
            "output_tok_per_s": out / dur if dur > 0 else 0.0, "req_per_s": len(ok) / dur if dur > 0 else 0.0,
            "ttft_ms": {f"p{p}": pct(ttft, p) for p in (50, 90, 99)},
            "itl_ms": {f"p{p}": pct(itl, p) for p in (50, 90, 99)},
            "e2e_ms": {f"p{p}": pct(e2e, p) for p in (50, 99)}}


# ---------------------------------------------------------------- managed servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, cmd, port):
        self.name, self.cmd, self.port = name, cmd, port
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.logf = tempfile.NamedTemporaryFile(prefix=f"serve_bench_{name}_", suffix=".log", delete=False)
        self.proc = None

    def log_tail(self, n=30):
        with open(self.logf.name, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def start(self, timeout):
        log(f"  starting {self.name}: {shlex.join(self.cmd)}")
        try:
            self.proc = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        except OSError as e:
            raise RuntimeError(f"{self.name}: cannot start {self.cmd[0]}: {e}")
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with status {self.proc.returncode} before it was "
                                   f"ready; log {self.logf.name}, last lines:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"{self.name} not healthy after {timeout}s; log {self.logf.name}, "
                           f"last lines:\n{self.log_tail()}")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def server_for(kind, args, workload, conc):
    port = free_port()
    # The same KV-cache capacity for both: llama-server splits -c evenly over its --parallel
    # slots, so every slot gets the largest request's need (prompt estimate + output, with
    # margin for the chat template/BOS); llmc gets as many tokens in 16-token blocks.
    need = max(int(w["prompt_len"] * 1.25) + w["max_tokens"] + 64 for w in workload)
    ctx = conc * (((need + 255) // 256) * 256)
    if kind == "llmc":
        cmd = [args.llmc, "serve", args.llmc_artifact, "--host", "127.0.0.1", "--port", str(port),
               "--threads", str(args.threads), "--max-seqs", str(conc),
               "--kv-blocks", str(ctx // 16)] + shlex.split(args.llmc_args)
    else:
        cmd = [args.llama_server, "-m", args.gguf, "--host", "127.0.0.1", "--port", str(port),
               "-t", str(args.threads), "--parallel", str(conc), "-c", str(ctx), "-cb", "--no-webui"]
        cmd += shlex.split(args.llama_args)
    return Server(kind, cmd, port)


# ---------------------------------------------------------------- report

def fmt(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def print_rows(hdr, rows):
    w = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    for row in [hdr] + rows:
        print("  ".join(str(x).rjust(n) for x, n in zip(row, w)))


def print_table(results):
    hdr = ("server", "C", "ok", "err", "dur s", "out tok/s", "req/s", "TTFT p50", "p90", "p99",
           "ITL p50", "p90", "p99", "E2E p50", "p99")
    rows = []
    for name, res in results.items():
        for r in res:
            t, i, e = r["ttft_ms"], r["itl_ms"], r["e2e_ms"]
            rows.append((name, r["concurrency"], r["ok"], r["errors"], fmt(r["duration_s"], 2),
                         fmt(r["output_tok_per_s"]), fmt(r["req_per_s"], 2), fmt(t["p50"]), fmt(t["p90"]),
                         fmt(t["p99"]), fmt(i["p50"], 2), fmt(i["p90"], 2), fmt(i["p99"], 2),
                         fmt(e["p50"], 0), fmt(e["p99"], 0)))
    print("latencies in ms")
    print_rows(hdr, rows)
    for name, res in results.items():
        for r in res:
            for m in r["error_samples"]:
                print(f"{name} C={r['concurrency']} error: {m}")


def print_ratios(results):
    def ratio(a, b):
        return "-" if not a or not b else f"{a / b:.2f}"
    cols = [("out tok/s", lambda r: r["output_tok_per_s"], True), ("req/s", lambda r: r["req_per_s"], True)]
    for name, key in (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("E2E", "e2e_ms")):
        for p in ("p50", "p99"):
            cols.append((f"{name} {p}", lambda r, key=key, p=p: r[key][p], False))
    peer = {r["concurrency"]: r for r in results["llama-server"]}
    rows = []
    for x in results["llmc"]:
        y = peer.get(x["concurrency"])
        if y is not None:  # throughput llmc/peer, latency peer/llmc
            rows.append([x["concurrency"]] + [ratio(get(x), get(y)) if higher_better else ratio(get(y), get(x))
                                              for _, get, higher_better in cols])
    print("\nratios, >1 = llmc better: throughput llmc/llama-server, latency llama-server/llmc")
    print_rows(["C"] + [c[0] for c in cols], rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="an already running server, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--model", help="model name to send (default: first id of GET /v1/models)")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--concurrency", default="1", help="comma list, e.g. 1,16,64")
    ap.add_argument("--requests", type=int, help="requests per level (default max(4*C, 8))")
    ap.add_argument("--workload", help="JSONL workload (format: see the header of this file); default: built-in mix")
    ap.add_argument("--chat", action="store_true", help="use /v1/chat/completions instead of /v1/completions")
    ap.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                    help="do not send ignore_eos (outputs may then end early)")
    ap.add_argument("--keepalive", action="store_true",
                    help="reuse HTTP connections (default: a new connection per request, see run_level)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured requests before each level")
    ap.add_argument("--timeout", type=float, default=600, help="per-request timeout, s")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of tables")
    g = ap.add_argument_group("managed servers (started and stopped per concurrency level)")
    g.add_argument("--llmc", default=os.path.join(ROOT, "build/bin/llmc"), help="llmc binary (default build/bin/llmc)")
    g.add_argument("--llmc-artifact", help="artifact for `llmc serve`; enables the llmc server")
    g.add_argument("--llmc-args", default="", help="extra arguments for `llmc serve`")
    g.add_argument("--llama-server", help="llama-server binary; with --gguf enables the llama.cpp server")
    g.add_argument("--gguf", help="GGUF model for llama-server")
    g.add_argument("--llama-args", default="", help="extra arguments for llama-server")
    g.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both servers")
    g.add_argument("--startup-timeout", type=float, default=180)
    args = ap.parse_args()

    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    workload = load_workload(args.workload)
    kinds = []
    if args.llmc_artifact:
        kinds.append("llmc")
    if args.llama_server or args.gguf:
        if not (args.llama_server and args.gguf):
            sys.exit("llama-server needs both --llama-server BIN and --gguf FILE")
        kinds.append("llama-server")
    if kinds and args.base_url:
        sys.exit("give either --base-url (a running server) or managed-server flags, not both")
    if not kinds and not args.base_url:
        sys.exit("give --base-url, or --llmc-artifact and/or --llama-server/--gguf")

    results, failed = {}, False
    for li, conc in enumerate(levels):
        n_req = args.requests or max(4 * conc, 8)
        order = kinds if li % 2 == 0 else kinds[::-1]  # alternate who goes first
        for kind in order or ["server"]:
            log(f"[{kind}] concurrency {conc}, {n_req} requests")
            srv = r = None
            try:
                if kind == "server":
                    base = args.base_url
                else:
                    srv = server_for(kind, args, workload, conc)
                    srv.start(args.startup_timeout)
                    base = srv.base_url
                r = asyncio.run(run_level(base, args, workload, conc, n_req))
                if srv is not None:
                    r["server_cmd"] = shlex.join(srv.cmd)
            except Exception as e:  # server failed to start, or unreachable (--base-url)
                log(f"[{kind}] {type(e).__name__}: {e}")
                failed = True
                r = None
            finally:
                if srv is not None:
                    srv.stop()
                    if r is not None and r["errors"] == 0:  # keep the log when something went wrong
                        os.unlink(srv.logf.name)
                    elif r is not None:
                        log(f"  {kind} log kept: {srv.logf.name}")
            if r is None:
                continue
            results.setdefault(kind, []).append(r)
            failed |= r["errors"] > 0
            log(f"  ok {r['ok']}/{n_req}, {r['output_tok_per_s']:.1f} out tok/s, "
                f"TTFT p50 {fmt(r['ttft_ms']['p50'])} ms, ITL p50 {fmt(r['itl_ms']['p50'], 2)} ms")

    if args.json:
        print(json.dumps({"workload": args.workload or "builtin", "threads": args.threads if kinds else None,
                          "results": results}, indent=2))
    elif results:
        print_table(results)
        if len(results) == 2:
            print_ratios(results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
