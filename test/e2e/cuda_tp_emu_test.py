#!/usr/bin/env python3
"""Tensor parallelism on the CUDA backend, without a GPU: two ranks under
mpirun run a TP=2 artifact's generated CUDA kernels under CPU emulation
(test/cuda-emu, as cuda_emu_logits_test.py does) through the runtime's real
CUDA executor, with the collectives going through the NCCL loader to the
fake NCCL (test/unit/runtime/cuda/fake/fake_nccl.cc), which runs them over
MPI on the fake driver's memory, ordered on its stream.

  llmc compile MODEL --target=host,sm_90 [--tp 2] -o ...
  llmc-rt logits tp1.llmc --backend=cuda ...                (one process)
  mpirun -np 2 llmc-rt logits tp2.llmc --backend=cuda ...   (two ranks, fake NCCL)

For a prefill (20 tokens: the tensor-core GEMMs, the flash-attention
prefill kernel) and 4 decode steps (the GEMVs, split attention):
  - TP=2's logits equal TP=1's on the same backend within the bf16
    tolerance of cuda_emu_logits_test.py (max |tp2 - tp1| / max |tp1| per
    row < 2e-2; top-1 >= 0.98), and both match the float64 reference within
    it too. bf16: the row-parallel partial sums are rounded to bf16 before
    the all-reduce adds them; the LM head's logits slices are f32 whatever
    the activations (every buffer of logits rows is), gathered and laid
    out on the device (cuMemcpy2DAsync). An f32-activation model is held
    to 1e-4.
  - The fake NCCL saw exactly the calls the plan asks for, on both ranks,
    in order: per step 2 x layers all-reduces of T x hidden elements in the
    activation type, then one all-gather of L x ceil(vocab / 2) f32.
  - With --cuda-graphs the decode steps replay the collectives from graphs
    and the logits are the same bytes: the NCCL calls are exactly those the
    captures at load record (a step of each batch-size bucket, largest
    first) and the prefill's, none for the decode steps that replay bucket
    1's graph.
  - Failures end every rank with a message: the artifact run without
    mpirun, no NCCL library, and a rank whose collective never completes
    (LLMC_NCCL_TIMEOUT=3: the deadline names the step).

Pipeline stages on the CUDA backend: a PP=2 artifact (one layer per stage)
runs as two ranks, a TP=2 x PP=2 one as four, each stage's ranks with their
stage's emulated kernels (mpirun's MPMD form: one FAKE_CUDA_KERNELS per
stage), the hidden state sent between stages through host memory and MPI,
each stage's all-reduces within its own TP group (the fake NCCL splits the
world by unique id), the logits coming back to rank 0: they must be the
bytes TP=1 (TP=2) gives, since the stages run the same kernels on the same
values, launch by launch and with --cuda-graphs (which a stage's steps do
not use: they stop for the host transfer). The serving engine over PP=2
(12 requests, half sampled, prompts chunked) gives TP=1's tokens and
logprobs to the bit one step at a time, and completes every request with
two steps in flight.

Skips (exit 77, saying why) without mpirun, the CUDA toolkit's headers
(the emulation needs cuda_fp16.h) or the fake NCCL (built only where MPI is).

  python3 test/e2e/cuda_tp_emu_test.py --llmc build/bin/llmc \\
      --fake-driver build/test/unit/libllmc_fake_cuda.so \\
      --fake-nccl build/test/unit/libllmc_fake_nccl.so [--keep DIR]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

from tally import Tally

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import reference_forward as rf  # noqa: E402
from cuda_emu_logits_test import TOLERANCE, TOP1, build_emulation, cuda_include  # noqa: E402

SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
PREFILL = 20
DECODE = 4
LAYERS = 2
HIDDEN = 128
VOCAB = 301  # odd: rank 1's slice of the LM head is padded

# name -> (synth options, --dtype)
CASES = {
    "llama-gqa-bf16": (["--arch", "llama", "--vocab", str(VOCAB), "--hidden", str(HIDDEN),
                        "--heads", "4", "--kv-heads", "2", "--intermediate", "256",
                        "--layers", str(LAYERS), "--dtype", "bf16"], "bf16"),
    "llama-f32": (["--arch", "llama", "--vocab", str(VOCAB), "--hidden", str(HIDDEN),
                   "--heads", "4", "--kv-heads", "2", "--intermediate", "256",
                   "--layers", str(LAYERS)], "f32"),
}


def run(cmd, env=None, expect_ok=True, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if expect_ok and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def mpirun(n, env):
    """mpirun for n ranks on this machine, passing the emulation's variables."""
    cmd = [shutil.which("mpirun"), "-np", str(n), "--oversubscribe"]
    for var in ("LLMC_CUDA_DRIVER", "FAKE_CUDA_KERNELS", "LLMC_NCCL_LIBRARY", "FAKE_NCCL_LOG",
                "FAKE_NCCL_FAIL", "LLMC_NCCL_TIMEOUT", "LLMC_NO_EXEC_RT"):
        if var in env:
            cmd += ["-x", var]
    return cmd


def logits_cmd(rt, art, tokens, out, extra=()):
    return [rt, "logits", art, "--backend=cuda", "--tokens", ",".join(map(str, tokens)),
            "--prefill", str(PREFILL), "-o", out, *extra]


def read_logits(path, rows):
    return np.fromfile(path, dtype=np.float32).reshape(rows, VOCAB).astype(np.float64)


def row_rel_err(got, want):
    return np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)


def read_log(prefix, rank):
    with open(f"{prefix}.rank{rank}") as f:
        return [line.split() for line in f.read().splitlines()]


def step_collectives(dtype, t):
    """The collectives of a step of t tokens: (kind, dtype, count). The
    hidden rows are all-reduced in the activation type; the logits slices,
    f32 whatever it is, are gathered in f32 (one logits row per token)."""
    piece = (VOCAB + 1) // 2
    return [("all_reduce", dtype, t * HIDDEN)] * (2 * LAYERS) + [("all_gather", "f32", t * piece)]


def expected_runs(dtype):
    """The collectives the plan asks for, step by step."""
    runs = []
    for t in [PREFILL] + [1] * DECODE:
        runs += step_collectives(dtype, t)
    return runs


# The decode batch-size buckets the runner captures a CUDA graph of at load
# (cuda_step_plan.h, CudaGraphBuckets): `logits` takes up to 256 rows.
GRAPH_BUCKETS = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]


def expected_calls(dtype, graphs):
    """The NCCL calls a rank makes: one per collective run launch by launch;
    with --cuda-graphs, those the captures at load record, one bucket's
    step after another from the largest (a bucket's rows each), then the
    prefill's (not captured), and none for the decode steps, which replay
    bucket 1's graph."""
    runs = expected_runs(dtype)
    if not graphs:
        return runs
    calls = []
    for b in reversed(GRAPH_BUCKETS):
        calls += step_collectives(dtype, b)
    return calls + step_collectives(dtype, PREFILL)


def check_calls(prefix, dtype, graphs):
    """The fake NCCL's log of each rank: the expected runs, in order, and the
    expected calls (expected_calls), exactly."""
    want = expected_runs(dtype)
    want_calls = expected_calls(dtype, graphs)
    ok = True
    for rank in (0, 1):
        lines = read_log(prefix, rank)
        init = lines[0] == ["init", "2", str(rank)]
        runs = [(w[1], w[2], int(w[3])) for w in lines if w[0] == "run"]
        calls = [(w[1], w[2], int(w[3])) for w in lines if w[0] == "call"]
        reduces = sum(1 for r in runs if r[0] == "all_reduce")
        gathers = sum(1 for r in runs if r[0] == "all_gather")
        good = init and runs == want and calls == want_calls
        ok &= good
        print(f"{'PASS' if good else 'FAIL'}   rank {rank}: {reduces} all-reduces "
              f"({reduces // (1 + DECODE)} per step = 2 x {LAYERS} layers) and {gathers} "
              f"all-gathers (1 per step) ran, {len(calls)} calls (want {len(want_calls)}"
              f"{', graph replays' if graphs else ''}); as the plan asks: "
              f"{'yes' if runs == want else 'NO'}", flush=True)
        if runs != want:
            print(f"    got {runs[:8]}...\n    want {want[:8]}...")
        if calls != want_calls:
            print(f"    calls {calls[:8]}...\n    want  {want_calls[:8]}...")
    return ok


def check_case(args, rt, name, work):
    opts, dtype = CASES[name]
    model = os.path.join(work, name)
    run([sys.executable, SYNTH, "--format", "hf", "--out", model, "--seed", "9"] + opts)
    ref = rf.ReferenceModel.from_hf_folder(model)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    tokens = [int(t) for t in rng.integers(0, VOCAB, PREFILL + DECODE)]
    want = ref.forward(tokens)
    base_env = dict(os.environ, LLMC_CUDA_DRIVER=args.fake_driver, LLMC_NO_EXEC_RT="1",
                    OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    got = {}
    arts = {}
    for tp in (1, 2):
        art = arts[tp] = os.path.join(work, f"{name}-tp{tp}.llmc")
        run([args.llmc, "compile", model, "--target=host,sm_90", f"--dtype={dtype}",
             "-o", art] + (["--tp", "2"] if tp > 1 else []))
        env = dict(base_env, FAKE_CUDA_KERNELS=build_emulation(art, args.cxx))
        out = os.path.join(work, f"{name}-tp{tp}.f32")
        if tp == 1:
            run(logits_cmd(rt, art, tokens, out), env=env)
        else:
            env.update(LLMC_NCCL_LIBRARY=args.fake_nccl,
                       FAKE_NCCL_LOG=os.path.join(work, f"{name}-nccl"))
            r = run(mpirun(2, env) + logits_cmd(rt, art, tokens, out), env=env)
            if "rank 0 of 2, collectives by NCCL" not in r.stderr:
                raise RuntimeError(f"the CUDA runner does not say it runs as rank 0 of 2:\n"
                                   f"{r.stderr[-500:]}")
            tp2_env = env
        got[tp] = read_logits(out, len(tokens))
    tol = TOLERANCE[dtype]
    err = row_rel_err(got[2], got[1])
    ref_err = {tp: float(row_rel_err(got[tp], want).max()) for tp in (1, 2)}
    top1 = float((got[2].argmax(1) == got[1].argmax(1)).mean())
    ok = (bool(np.isfinite(got[2]).all()) and err.max() < tol and top1 >= TOP1[dtype]
          and max(ref_err.values()) < tol)
    print(f"{'PASS' if ok else 'FAIL'} {name}: TP=2 vs TP=1 (CUDA, emulated) max rel err "
          f"{err.max():.2e} (prefill {err[:PREFILL].max():.2e}, decode {err[PREFILL:].max():.2e}; "
          f"tolerance {tol:.0e}), top-1 agree {top1:.3f}; vs float64 reference: TP=1 "
          f"{ref_err[1]:.2e}, TP=2 {ref_err[2]:.2e}", flush=True)
    ok &= check_calls(tp2_env["FAKE_NCCL_LOG"], dtype, graphs=False)

    # The decode steps again as CUDA graphs: the collectives are captured
    # with the launches and replayed.
    for f in glob.glob(tp2_env["FAKE_NCCL_LOG"] + ".rank*"):
        os.remove(f)
    graphs_out = os.path.join(work, f"{name}-tp2-graphs.f32")
    run(mpirun(2, tp2_env) + logits_cmd(rt, arts[2], tokens, graphs_out, ["--cuda-graphs"]),
        env=tp2_env)
    same = open(graphs_out, "rb").read() == open(os.path.join(work, f"{name}-tp2.f32"),
                                                  "rb").read()
    print(f"{'PASS' if same else 'FAIL'} {name} TP=2 --cuda-graphs: "
          f"{'the same' if same else 'DIFFERENT'} logits as launch by launch", flush=True)
    ok &= same
    ok &= check_calls(tp2_env["FAKE_NCCL_LOG"], dtype, graphs=True)
    return ok, arts[2], tp2_env, tokens


def stage_ranks(kernels, tp, argv):
    """mpirun's MPMD form: `tp` ranks per pipeline stage, each stage's ranks
    running `argv` with that stage's emulated kernels (kernels[stage])."""
    cmd = [shutil.which("mpirun"), "--oversubscribe"]
    for var in ("LLMC_CUDA_DRIVER", "LLMC_NO_EXEC_RT", "LLMC_NCCL_LIBRARY"):
        cmd += ["-x", var]
    for stage, so in enumerate(kernels):
        cmd += ([":"] if stage else []) + ["-np", str(tp), "env", f"FAKE_CUDA_KERNELS={so}", *argv]
    return cmd


def check_pipeline(args, rt, name, work):
    """PP=2 on the CUDA backend gives TP=1's logits to the bit, and TP=2 x
    PP=2 gives TP=2's (check_case's, in `work`)."""
    opts, dtype = CASES[name]
    model = os.path.join(work, name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    tokens = [int(t) for t in rng.integers(0, VOCAB, PREFILL + DECODE)]
    env = dict(os.environ, LLMC_CUDA_DRIVER=args.fake_driver, LLMC_NO_EXEC_RT="1",
               LLMC_NCCL_LIBRARY=args.fake_nccl, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    ok = True
    for tp in (1, 2):
        want_out = os.path.join(work, f"{name}-tp{tp}.f32")
        art = os.path.join(work, f"{name}-tp{tp}-pp2.llmc")
        run([args.llmc, "compile", model, "--target=host,sm_90", f"--dtype={dtype}", "--pp", "2",
             "--tp", str(tp), "-o", art])
        # Each stage's ranks run its own kernels: mpirun's MPMD form.
        kernels = [build_emulation(art, args.cxx),
                   build_emulation(os.path.join(art, "stages", "1"), args.cxx)]
        want = open(want_out, "rb").read()
        for extra in ([], ["--cuda-graphs"]):
            out = os.path.join(work, f"{name}-tp{tp}-pp2{''.join(extra)}.f32")
            r = run(stage_ranks(kernels, tp, logits_cmd(rt, art, tokens, out, extra)), env=env)
            same = open(out, "rb").read() == want
            err = row_rel_err(read_logits(out, len(tokens)), read_logits(want_out, len(tokens)))
            said = "pipeline stage 0 of 2" in r.stderr
            ok &= same and said
            print(f"{'PASS' if same and said else 'FAIL'} {name}: TP={tp} x PP=2 on CUDA "
                  f"(emulated, {' '.join(extra) or 'launch by launch'}) vs TP={tp}: "
                  f"{'the same bytes' if same else f'DIFFERENT (max rel err {err.max():.2e})'}"
                  f"{'' if said else '; rank 0 does not say it runs pipeline stage 0 of 2'}",
                  flush=True)
        if tp == 1:
            ok &= check_pipeline_engine(args, rt, name, work, art, kernels, env)
    return ok


def check_pipeline_engine(args, rt, name, work, art, kernels, env):
    """The serving engine over the PP=2 artifact on CUDA: 12 requests (half
    sampled) with chunked prompts, one step at a time (--steps-in-flight 1)
    and a budget under a micro-batch (32 tokens), so each step is the one
    TP=1 runs: the same tokens and logprobs to the bit. Then two steps in
    flight (the default): every request completes with its full length."""
    rng = np.random.default_rng(7)
    reqs = []
    for i in range(12):
        req = {"prompt_token_ids": [int(t) for t in rng.integers(2, VOCAB, int(rng.integers(1, 41)))],
               "max_tokens": int(rng.integers(1, 13)), "temperature": 0, "ignore_eos": True,
               "logprobs": 1}
        if i % 2:
            req.update(temperature=0.8, seed=100 + i)
        reqs.append(req)
    prompts = os.path.join(work, f"{name}-engine.jsonl")
    with open(prompts, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in reqs)
    flags = ["--backend=cuda", "--prompts-file", prompts, "--no-verify", "--max-batch-tokens", "32"]

    def results(path):
        return [(r["token_ids"], [x["logprob"] for x in r["logprobs"]]) for r in
                (json.loads(line) for line in open(path))]
    one = os.path.join(work, f"{name}-tp1.llmc")
    want_out = os.path.join(work, f"{name}-engine-tp1.jsonl")
    run([rt, "run", one, *flags, "-o", want_out],
        env=dict(env, FAKE_CUDA_KERNELS=os.path.join(one, "kernels_emu.so")))
    want = results(want_out)
    ok = True
    for depth in ("1", "2"):
        out = os.path.join(work, f"{name}-engine-pp2-{depth}.jsonl")
        run(stage_ranks(kernels, 1, [rt, "run", art, *flags, "--steps-in-flight", depth, "-o",
                                     out]), env=env)
        got = results(out)
        if depth == "1":
            good = got == want
            what = "the same tokens and logprobs as TP=1" if good else "DIFFERENT from TP=1"
        else:
            good = [len(t) for t, _ in got] == [r["max_tokens"] for r in reqs]
            same = sum(g[0] == w[0] for g, w in zip(got, want))
            what = (f"every request complete ({same}/12 with TP=1's tokens; other steps, "
                    f"other kernel paths)" if good else "requests incomplete")
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name}: the engine over PP=2 on CUDA (emulated, "
              f"--steps-in-flight {depth}): {what}", flush=True)
    return ok


def check_failures(rt, art, env, tokens, work):
    """Each failure ends every rank, quickly, with a message that names it."""
    out = os.path.join(work, "failure.f32")
    env = {k: v for k, v in env.items() if k != "FAKE_NCCL_LOG"}
    cases = [
        ("the TP=2 artifact without mpirun", logits_cmd(rt, art, tokens, out), env,
         ["is split over 2 ranks (llmc compile --tp 2 --pp 1)", "mpirun -np 2"]),
        ("no NCCL library", None, dict(env, LLMC_NCCL_LIBRARY="/nonexistent/libnccl.so.2"),
         ["whose collectives on GPUs need NCCL", "libnccl.so.2 not found",
          "/nonexistent/libnccl.so.2", "ending all ranks"]),
        # Rank 1's 7th collective (the 2nd all-reduce of the first decode
        # step: CUDA step 8) never completes.
        ("a collective that never completes", None,
         dict(env, FAKE_NCCL_FAIL="hang:1:7", LLMC_NCCL_TIMEOUT="3"),
         ["llmc: rank 1 of 2: CUDA step 8 (all_reduce_sum of 128", "did not complete within 3 s",
          "ending all ranks"]),
        ("a collective that fails later (asynchronous error)", None,
         dict(env, FAKE_NCCL_FAIL="async:1:5"),
         ["llmc: rank 1 of 2:", "ncclRemoteError", "ending all ranks"]),
    ]
    ok = True
    for what, cmd, case_env, expect in cases:
        cmd = cmd or mpirun(2, case_env) + logits_cmd(rt, art, tokens, out)
        start = time.monotonic()
        r = run(cmd, env=case_env, expect_ok=False, timeout=120)
        took = time.monotonic() - start
        text = r.stdout + r.stderr
        missing = [e for e in expect if e not in text]
        good = r.returncode != 0 and not missing and took < 60
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} error, {what}: exit {r.returncode} in {took:.1f} s, "
              f"message {'found' if not missing else 'MISSING ' + repr(missing)}", flush=True)
        if missing:
            print(text[-1500:])
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--fake-driver", default=os.path.join(ROOT, "build", "test", "unit",
                                                          "libllmc_fake_cuda.so"))
    ap.add_argument("--fake-nccl", default=os.path.join(ROOT, "build", "test", "unit",
                                                        "libllmc_fake_nccl.so"))
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--keep", help="keep models and artifacts in DIR")
    args = ap.parse_args()
    if shutil.which("mpirun") is None:
        print("SKIPPED: no mpirun (install openmpi-bin; scripts/setup does)")
        return 77
    if not os.path.exists(os.path.join(cuda_include(), "cuda_fp16.h")):
        print(f"SKIPPED: no CUDA toolkit headers at {cuda_include()} (cuda_fp16.h): the "
              f"emulation cannot build the kernels")
        return 77
    if not os.path.exists(args.fake_nccl):
        print(f"SKIPPED: no fake NCCL at {args.fake_nccl} (it is built only where CMake found "
              f"MPI: install libopenmpi-dev)")
        return 77
    rt = os.path.join(os.path.dirname(args.llmc), "llmc-rt")
    if not os.path.exists(rt):
        rt = args.llmc
    work = args.keep or tempfile.mkdtemp(prefix="llmc-cuda-tp-")
    os.makedirs(work, exist_ok=True)
    tally = Tally()
    try:
        for name in CASES:
            case = {}

            def tp2(name=name, case=case):
                ok, case["art"], case["env"], case["tokens"] = check_case(args, rt, name, work)
                return ok

            tally.attempt(name, tp2)
            tally.attempt(f"{name} pipeline", lambda: check_pipeline(args, rt, name, work))
            if name == "llama-gqa-bf16" and case.get("art"):
                tally.attempt("errors", lambda: check_failures(rt, case["art"], case["env"],
                                                               case["tokens"], work))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return tally.exit_status()

if __name__ == "__main__":
    sys.exit(main())
