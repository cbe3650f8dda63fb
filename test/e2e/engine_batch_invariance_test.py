#!/usr/bin/env python3
"""Batch invariance of the serving engine, end to end.

64 requests with mixed prompt lengths (1 to 600 tokens) and output lengths
(1 to 120), half greedy and half sampled with a fixed per-request seed, go
through `llmc run --prompts-file` twice:

  batched  all submitted together, a token budget of 64 per step (prompts are
           chunked and mixed with other requests' decode tokens) and a KV
           cache a quarter of what they need (requests are preempted and
           recomputed);
  alone    one request at a time (--max-seqs 1), each prompt in one chunk,
           a cache that holds it.

Host backend (synthetic models, a mixture of experts among them, and
SmolLM2-135M Q4_1 when its GGUF is in
~/.cache/llmc/models): every request's tokens, and the logprobs of its tokens
to the bit, must be identical: the host kernels compute each row the same
whatever else is in the step.

CUDA backend under CPU emulation (the generated CUDA kernels built for the
CPU, run by the runtime's CUDA executor through the fake driver), the same
64-request workload on the synthetic llama: prefill GEMMs and decode GEMVs
sum in different orders there, so the tokens must be identical or differ
only after a near-tie: where a request's tokens first differ, on the logits
after the tokens both agree on (teacher-forced, alone), a greedy request's
top-2 gap must be under 1e-2 of the logit range, and a sampled request's
random draw must lie within 1e-2 of probability of an edge of the interval
it picks. Each such case is printed. The batched run schedules
asynchronously (each step submitted while the one before is in flight, its
decoding requests fed that step's picks on the device), with the fake
driver deferring stream work to the next synchronization (FAKE_CUDA_DEFER),
and must report steps scheduled ahead and tokens fed; it is repeated one
step at a time (--no-async-scheduling): the same tokens and logprobs to the
bit. It is repeated with --cuda-graphs (decode-only steps replayed from captured graphs): the same
tokens and logprobs to the bit; that run also samples every request's
tokens on the host from copied logits (--no-device-sampling), where the
others ran the device sampler (greedy and seeded draws alike).

With --tp N the synthetic models are compiled for N tensor-parallel ranks
and every run goes through `mpirun -np N`: rank 0's engine schedules, the
other ranks run its steps, and the host checks above hold as they are (with
two ranks an all-reduce adds a + b, which no algorithm can reorder). With
--pp M as well, M pipeline stages (TP x PP ranks): the engine's mixed
steps are cut into micro-batches that flow through the stages, and the
checks still hold as they are.

Each request must have exactly one result in each run, matched by id: a
result missing or doubled fails the case. Exits 0 when every case passes,
77 (skip) when nothing ran because its inputs are missing (said loudly), 1
on any failure or when -k matches nothing (test/e2e/tally.py).

  python3 test/e2e/engine_batch_invariance_test.py --llmc build/bin/llmc \\
      [--fake-driver build/test/unit/libllmc_fake_cuda.so] [-k NAME] [--keep DIR]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from tally import Tally

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
SMOLLM2 = os.path.expanduser("~/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf")
NEAR_TIE = 1e-2
TP = 1  # --tp
PP = 1  # --pp

# name -> synth options (GGUF, q8_0 blocks: the q8-activation GEMMs run)
MODELS = {
    "llama-gqa-q8_0": ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4",
                       "--kv-heads", "2", "--intermediate", "256", "--layers", "2",
                       "--max-position", "1024", "--gguf-type", "q8_0"],
    "qwen2-f32": ["--arch", "qwen2", "--vocab", "320", "--hidden", "128", "--heads", "4",
                  "--kv-heads", "1", "--intermediate", "192", "--layers", "2",
                  "--max-position", "1024", "--gguf-type", "f32"],
    # A mixture of experts: a token's route (top 2 of 8) and its experts'
    # sums must not depend on what else the step holds. Experts 128 wide, so
    # that TP=2's halves are whole q8_0 blocks.
    "qwen3moe-q8_0": ["--arch", "qwen3moe", "--vocab", "300", "--hidden", "128", "--heads", "4",
                      "--kv-heads", "2", "--head-dim", "32", "--experts", "8",
                      "--experts-per-tok", "2", "--moe-intermediate", "128", "--layers", "2",
                      "--max-position", "1024", "--gguf-type", "q8_0"],
}


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr[-3000:]}")
    return r


def workload(vocab, n, max_prompt, seed, sampled=True, max_output=120):
    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        # Lengths that start, end and straddle blocks, and a spread to max.
        length = rng.choice([1, 2, 15, 16, 17, 63, 64, 65, max_prompt]) if i % 3 == 0 \
            else rng.randint(1, max_prompt)
        req = {"id": i, "prompt_token_ids": [rng.randrange(2, vocab) for _ in range(length)],
               "max_tokens": rng.randint(1, max_output), "temperature": 0, "ignore_eos": True}
        # Half ask for logprobs (compared to the bit). The runner picks every
        # request's token itself (on a GPU, the device sampler), and the
        # logprobs asked for.
        if i % 4 < 2:
            req["logprobs"] = 1
        if sampled and i % 2:
            req.update(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=1000 + i)
        reqs.append(req)
    return reqs


def blocks_needed(reqs, block_size):
    return sum((len(r["prompt_token_ids"]) + r["max_tokens"] + block_size - 1) // block_size
               for r in reqs)


# `mpirun -np N` (and the environment Open MPI needs as root) for --tp N.
LAUNCH = []
LAUNCH_ENV = None


def run_engine(exe, art, reqs, work, tag, extra, env=None):
    path = os.path.join(work, f"{tag}.in.jsonl")
    with open(path, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    out = os.path.join(work, f"{tag}.out.jsonl")
    threads = "1" if LAUNCH else "2"
    r = run([*LAUNCH, exe, "run", art, "--prompts-file", path, "-o", out, "--no-verify",
             "--threads", threads, *extra], env=env or LAUNCH_ENV)
    results = [json.loads(line) for line in open(out)]
    return results, r.stderr


def by_request(name, side, results, want_ids):
    """{id: result} of one run, ids as strings (the runner echoes a request's
    id as a string); None (with a FAIL line naming the ids) unless it holds
    exactly one result for each request submitted."""
    want_ids = [str(i) for i in want_ids]
    got, dup = {}, []
    for r in results:
        rid = str(r.get("id"))
        if rid in got:
            dup.append(rid)
        got[rid] = r
    missing = sorted(set(want_ids) - set(got), key=lambda i: (len(i), i))
    extra = sorted(set(got) - set(want_ids), key=lambda i: (len(i), i))
    if missing or extra or dup:
        print(f"FAIL {name}: the {side} run returned {len(results)} results for {len(want_ids)} "
              f"requests (missing ids {missing[:10]}, unknown {extra[:10]}, twice {dup[:10]})")
        return None
    return got


def compare(name, ids, batched, alone, budget, near_tie_check=None):
    """True when each request submitted (ids) has one result on each side and
    its tokens agree (or, with near_tie_check, differ only after a near-tie
    it confirms)."""
    b_by_id = by_request(name, "batched", batched, ids)
    a_by_id = by_request(name, "alone", alone, ids)
    if b_by_id is None or a_by_id is None:
        return False
    ok = True
    same = 0
    preempted = sum(r.get("usage", {}).get("preemptions", 0) for r in batched)
    for rid in map(str, ids):
        b, a = b_by_id[rid], a_by_id[rid]
        if "error" in b or "error" in a:
            print(f"FAIL {name}: request {rid}: {b.get('error') or a.get('error')}")
            ok = False
            continue
        if b["token_ids"] == a["token_ids"]:
            # The logprobs too, to the bit: a kernel whose sums depend on the
            # batch shows here long before it flips a token.
            lb = [x["logprob"] for x in b.get("logprobs", [])]
            la = [x["logprob"] for x in a.get("logprobs", [])]
            if near_tie_check is None and lb != la:
                worst = max((abs(x - y) for x, y in zip(lb, la)), default=float("inf"))
                print(f"FAIL {name}: request {rid}: same tokens, but logprobs differ by up "
                      f"to {worst:.3g} ({len(lb)} vs {len(la)} of them)")
                ok = False
                continue
            same += 1
            continue
        j = next((k for k, (x, y) in enumerate(zip(b["token_ids"], a["token_ids"])) if x != y),
                 min(len(b["token_ids"]), len(a["token_ids"])))
        if near_tie_check is None or j >= min(len(b["token_ids"]), len(a["token_ids"])):
            print(f"FAIL {name}: request {rid} differs at output token {j}: batched "
                  f"{b['token_ids'][j:j + 4]}, alone {a['token_ids'][j:j + 4]}")
            ok = False
            continue
        tie, why = near_tie_check(rid, a["token_ids"][:j])
        print(f"{'NEAR-TIE' if tie else 'FAIL'} {name}: request {rid} differs at output token "
              f"{j} (batched {b['token_ids'][j]}, alone {a['token_ids'][j]}): {why}")
        ok = ok and tie
    if preempted == 0:
        print(f"FAIL {name}: the batched run preempted nothing; the cache was meant to force it")
        ok = False
    print(f"{'PASS' if ok else 'FAIL'} {name}: {same}/{len(ids)} requests token-identical "
          f"batched (budget {budget}, {preempted} preemptions) and alone", flush=True)
    return ok


def check_host(exe, name, art, vocab, work, max_prompt=600, n=64):
    reqs = workload(vocab, n, max_prompt, seed=len(name))
    quarter = max(blocks_needed(reqs, 16) // 4,
                  max((len(r["prompt_token_ids"]) + r["max_tokens"] + 15) // 16 for r in reqs))
    batched, _ = run_engine(exe, art, reqs, work, name + "-batched",
                            ["--max-batch-tokens", "64", "--max-seqs", "64",
                             "--kv-blocks", str(quarter)])
    alone, _ = run_engine(exe, art, reqs, work, name + "-alone",
                          ["--max-seqs", "1", "--max-batch-tokens", str(max_prompt + 64)])
    mesh = (f" tp={TP}" if TP > 1 else "") + (f" pp={PP}" if PP > 1 else "")
    return compare(f"{name} [host{mesh}]", [r["id"] for r in reqs], batched, alone, 64)


def check_host_model(a, exe, name, opts, vocab, work):
    """One synthetic model, compiled for the mesh of --tp/--pp."""
    model = os.path.join(work, name + ".gguf")
    run([sys.executable, SYNTH, "--format", "gguf", "--out", model, "--seed", "5"] + opts)
    art = os.path.join(work, name + ".llmc")
    run([a.llmc, "compile", model, "-o", art] + (["--tp", str(TP)] if TP > 1 else []) +
        (["--pp", str(PP)] if PP > 1 else []))
    return check_host(exe, name, art, vocab, work)


def check_smollm2(a, exe, work):
    """SmolLM2-135M Q4_1 when fetched; None (skipped, said so) otherwise."""
    if not os.path.exists(SMOLLM2):
        print(f"SKIPPED smollm2: {SMOLLM2} not found (scripts/fetch-model fetches it)")
        return None
    art = os.path.join(work, "smollm2.llmc")
    run([a.llmc, "compile", SMOLLM2, "-o", art])
    return check_host(exe, "smollm2-135m-q4_1", art, 49152, work)


def mt19937_64(seed):
    """std::mt19937_64's outputs, as the sampler draws them (checked in
    check_cuda_emu against the value the C++ standard gives)."""
    n, m, mask = 312, 156, (1 << 64) - 1
    mt = [seed & mask]
    for i in range(1, n):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & mask)
    idx = n
    while True:
        if idx == n:
            for i in range(n):
                x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % n] & 0x7FFFFFFF)
                mt[i] = mt[(i + m) % n] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            idx = 0
        y = mt[idx]
        idx += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        yield y


def emu_near_tie(exe, art, reqs, work, env):
    """Whether a request's first differing token follows a near-tie, judged
    on the logits after its prompt and the tokens both runs agree on
    (teacher-forced, alone). Greedy: the top-2 gap is under NEAR_TIE of the
    logit range. Sampled: the request's draw for that token (the sampler's
    mt19937_64 from the request's seed, the n-th draw for the n-th token)
    lies within NEAR_TIE of probability of an edge of the interval it picks
    in the sampler's distribution (all ids in ascending order: top_k 0,
    top_p 1, min_p 0), so logits that move the edge a little flip the pick."""
    by_id = {r["id"]: r for r in reqs}

    def check(rid, prefix):
        req = by_id[int(rid)]
        tokens = req["prompt_token_ids"] + prefix
        out = os.path.join(work, f"tie-{rid}.f32")
        run([exe, "logits", art, "--backend=cuda", "--tokens", ",".join(map(str, tokens)),
             "-o", out], env=env)
        row = np.fromfile(out, dtype=np.float32).reshape(len(tokens), -1)[-1].astype(np.float64)
        if req["temperature"] == 0:
            top = np.sort(row)[-2:]
            gap, span = top[1] - top[0], row.max() - row.min()
            return gap < NEAR_TIE * span, (f"top-2 gap {gap:.3g}, logit range {span:.3g} "
                                           f"({gap / span:.2e} of it)")
        draws = mt19937_64(req["seed"])
        for _ in prefix:
            next(draws)
        u = (next(draws) >> 11) * 2.0 ** -53
        weights = np.exp((row - row.max()) / req["temperature"])
        cdf = np.cumsum(weights) / weights.sum()
        pick = int(np.searchsorted(cdf, u, side="right"))
        lo, hi = (cdf[pick - 1] if pick else 0.0), cdf[pick]
        edge = min(u - lo, hi - u)
        return edge < NEAR_TIE, (f"draw {u:.6f} is {edge:.3g} of probability from an edge of "
                                 f"token {pick}'s interval [{lo:.6f}, {hi:.6f})")
    return check


def check_cuda_emu(args, exe, work):
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    import cuda_emu_logits_test as emu  # noqa: E402
    name = "llama-gqa-q8_0"
    model = os.path.join(work, name + ".gguf")
    if not os.path.exists(model):
        run([sys.executable, SYNTH, "--format", "gguf", "--out", model, "--seed", "5"] + MODELS[name])
    art = os.path.join(work, name + "-cuda.llmc")
    run([args.llmc, "compile", model, "--target=host,sm_90", "--dtype=f16",
         "--host-activations=f32", "-o", art])
    so = emu.build_emulation(art, args.cxx)
    draws = mt19937_64(5489)
    for _ in range(9999):
        next(draws)
    assert next(draws) == 9981545732273789042, "mt19937_64 differs from std::mt19937_64"
    env = dict(os.environ, LLMC_CUDA_DRIVER=args.fake_driver, FAKE_CUDA_KERNELS=so,
               LLMC_NO_EXEC_RT="1")
    reqs = workload(300, 64, 600, seed=3)
    quarter = max(blocks_needed(reqs, 16) // 4,
                  max((len(r["prompt_token_ids"]) + r["max_tokens"] + 15) // 16 for r in reqs))
    cuda = ["--backend=cuda"]
    # Asynchronous scheduling (the default where the artifact has the token
    # feed): each step is submitted while the one before is in flight, its
    # requests fed the tokens that step picks on the device. The fake
    # driver defers stream work to the next synchronization, so that a
    # page-locked buffer reused too early gives wrong tokens.
    deferred = dict(env, FAKE_CUDA_DEFER="1")
    batched, log = run_engine(exe, art, reqs, work, "emu-batched",
                              cuda + ["--max-batch-tokens", "64", "--max-seqs", "64",
                                      "--kv-blocks", str(quarter)], deferred)
    fed = re.search(r"(\d+) steps scheduled ahead, (\d+) tokens fed on the device", log)
    overlapped = fed is not None and int(fed.group(1)) > 0 and int(fed.group(2)) > 0
    print(f"{'PASS' if overlapped else 'FAIL'} {name} [cuda, emulated]: asynchronous "
          f"scheduling ran ({fed.group(0) if fed else 'no statistics line: ' + log[-300:]})",
          flush=True)
    alone, _ = run_engine(exe, art, reqs, work, "emu-alone",
                          cuda + ["--max-seqs", "1", "--max-batch-tokens", "664"], env)
    ok = compare(f"{name} [cuda, emulated]", [r["id"] for r in reqs], batched, alone, 64,
                 emu_near_tie(exe, art, reqs, work, env)) and overlapped
    # One step at a time, the same steps' work: the same tokens and
    # logprobs to the bit as scheduled ahead.
    one, _ = run_engine(exe, art, reqs, work, "emu-one-at-a-time",
                        cuda + ["--no-async-scheduling", "--max-batch-tokens", "64", "--max-seqs",
                                "64", "--kv-blocks", str(quarter)], deferred)
    ok = same_results(f"{name} [cuda, emulated]", reqs, one, "--no-async-scheduling", batched,
                      "scheduled ahead, tokens fed on the device") and ok
    # The batched run again with decode-only steps replayed from captured
    # CUDA graphs, and the requests' tokens sampled on the host from copied
    # logits instead of by the device sampler: the same tokens and
    # logprobs to the bit (each step's logits are the same bits).
    # The decode steps pad to the graphs' batch-size buckets, captured at
    # load: the runner names them.
    graphs, log = run_engine(exe, art, reqs, work, "emu-graphs",
                             cuda + ["--cuda-graphs", "--no-device-sampling", "--max-batch-tokens",
                                     "64", "--max-seqs", "64", "--kv-blocks", str(quarter)], env)
    captured = re.search(r"decode steps of 1 to \d+ sequences as CUDA graphs \([^)]*\)", log)
    print(f"{'PASS' if captured else 'FAIL'} {name} [cuda, emulated] --cuda-graphs: "
          f"{captured.group(0) if captured else 'no graphs captured: ' + log[-300:]}", flush=True)
    same = same_results(f"{name} [cuda, emulated]", reqs, graphs,
                        "--cuda-graphs --no-device-sampling (graph replay, padded to buckets, "
                        "tokens picked on the host)", batched, "without")
    return ok and same and bool(captured)


def same_results(name, reqs, got, got_what, want, want_what):
    """Whether every request's tokens and logprobs in `got` are `want`'s to
    the bit; prints a PASS or FAIL line."""
    ids = [r["id"] for r in reqs]
    got_by_id = by_request(f"{name} {got_what}", "got", got, ids)
    want_by_id = by_request(f"{name} {want_what}", "want", want, ids)
    same = got_by_id is not None and want_by_id is not None and all(
        (got_by_id[i]["token_ids"], got_by_id[i].get("logprobs")) ==
        (want_by_id[i]["token_ids"], want_by_id[i].get("logprobs")) for i in map(str, ids))
    print(f"{'PASS' if same else 'FAIL'} {name} {got_what}: "
          f"{'the same' if same else 'DIFFERENT'} tokens and logprobs as {want_what}", flush=True)
    return same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--fake-driver", help="libllmc_fake_cuda.so: also run the CUDA path emulated")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("-k", help="only cases whose name contains this")
    ap.add_argument("--only", choices=["host", "cuda"],
                    help="only the host cases or only the emulated CUDA case (ctest runs them apart, "
                         "in parallel)")
    ap.add_argument("--keep", help="keep models and artifacts in DIR")
    ap.add_argument("--tp", type=int, default=1,
                    help="compile the synthetic models for N tensor-parallel ranks and run them "
                         "under mpirun -np N (host only)")
    ap.add_argument("--pp", type=int, default=1,
                    help="compile the synthetic models for M pipeline stages (with --tp: TP x PP "
                         "ranks) and run them under mpirun (host only)")
    a = ap.parse_args()
    global TP, PP, LAUNCH, LAUNCH_ENV
    TP, PP = a.tp, a.pp
    if TP * PP > 1:
        if shutil.which("mpirun") is None:
            print("SKIPPED: --tp/--pp need mpirun (install openmpi-bin; scripts/setup does)")
            return 77
        LAUNCH = [shutil.which("mpirun"), "-np", str(TP * PP), "--oversubscribe"]
        LAUNCH_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        a.only = "host"
    rt = os.path.join(os.path.dirname(a.llmc), "llmc-rt")
    exe = rt if os.path.exists(rt) else a.llmc
    work = a.keep or tempfile.mkdtemp(prefix="llmc-invariance-")
    os.makedirs(work, exist_ok=True)
    tally = Tally(a.k)
    try:
        for name, opts in MODELS.items():
            if a.only == "cuda" or not tally.wants(name):
                continue
            vocab = int(opts[opts.index("--vocab") + 1])
            tally.attempt(name, lambda: check_host_model(a, exe, name, opts, vocab, work))
        if a.only != "cuda" and TP * PP == 1 and tally.wants("smollm2"):
            tally.attempt("smollm2", lambda: check_smollm2(a, exe, work))
        if a.only != "host" and tally.wants("cuda-emu"):
            if a.fake_driver:
                tally.attempt("cuda-emu", lambda: check_cuda_emu(a, exe, work))
            else:
                print("SKIPPED cuda-emu: no --fake-driver given")
                tally.record("cuda-emu", None)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return tally.exit_status()

if __name__ == "__main__":
    sys.exit(main())
