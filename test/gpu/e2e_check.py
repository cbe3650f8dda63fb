"""End-to-end GPU check of compiled artifacts (run by scripts/gpu-check.sh on
a GPU machine, over the payload scripts/gpu-payload.sh built without one).

1. Correctness. Each synthetic model runs teacher-forced (a 40-token
   prefill through the tensor-core GEMMs, then 24 decode steps through the
   GEMVs) on --backend=cuda; its logits are compared with the float64
   reference computed where the payload was built (test/reference), with the
   bf16 tolerance of the issue: max relative error per row (max |gpu - ref|
   / max |ref|) under 2e-2 and top-1 agreement at least 99% over the rows
   that are not near-ties. Each row whose top-1 differs is printed with the
   reference's top-2 gap as a fraction of the row's logit range, the rank
   the GPU gives the reference's pick, and how far apart the reference puts
   the two picks in standard deviations of that row's GPU error: within 4
   is a near-tie (random synthetic models have rows whose two best logits
   differ by less than bf16 rounding moves them); anything else is a fault
   to find. The same rule
   compares them with a PyTorch float32 reference computed here
   (test/gpu/torch_reference.py, on CUDA when torch sees it) from the model
   files in the payload (synth/<name>.model.gguf or .model/, read with
   test/reference's loaders; gguf-py from the payload's py/ when this Python
   lacks it). Without PyTorch that comparison is SKIPPED, said so loudly,
   and not counted as passed. The host backend runs the same artifact as a
   second opinion. The other artifacts (SmolLM2's
   and Llama-3-8B's shapes with dummy weights in q4_1, q4_0 and q4_k, and a
   w4a16 model) compare the GPU with the host backend.
   Each synthetic model runs again with --pdl (programmatic dependent
   launch), launch by launch and as CUDA graphs: the same logits to the bit
   as plain launches, or a race is reported (SKIPPED below sm_90).
   Models with bf16 weights run again with their GEMMs on cuBLASLt
   (--gemm=cublaslt, launch by launch and as CUDA graphs), then `llmc tune`
   times both and --gemm=auto follows its tune.json; all against the
   float64 reference.
   The engine then runs 32 mixed requests (greedy, top-k with top-p and
   min-p, temperature alone; half with logprobs) on each synthetic model
   with the device sampler and again sampling on the host from copied
   logits (--no-device-sampling): greedy tokens equal, seeded draws equal
   but for at most one last-bit boundary case, logprobs within 1e-5.
2. Speed. `llmc-rt bench --json` on the GPU for the dummy-weight artifacts:
   prefill at 512 and 2048 tokens, decode of 1, 8, 64 and 256 sequences
   together (--seqs; on Hopper the q4_0 and q4_k 8B shapes compiled for
   sm_90a too, decode of 1, 64 and 256); decode bandwidth = bytes of
   weights read per step (all but an untied embedding table) over the
   step time, against a measured device-to-device copy (PyTorch if
   present). Then the bf16
   Llama-3-8B shape with the generated GEMMs and with cuBLASLt's, as ratios,
   and the q4_0 and q4_k shapes' prefill on both paths (cuBLASLt after
   dequantizing each weight) as ratios to cuBLASLt on bf16 weights.

Exit status: 0 all checks that ran passed (the last line says whether any
was skipped), 1 a check failed, 2 a tool failed, 3 the harness is
incomplete (files it imports are missing; nothing ran).

    e2e_check.py PAYLOAD [--no-timing] [--backend cuda|host]

--backend host checks this script on a machine without a GPU: the host
backend stands in for the GPU (e.g. e2e_check.py build-gpu-payload
--backend host --no-timing).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time
import traceback

import numpy as np

REL_TOL = 2e-2
TOP1_MIN = 0.99
# A top-1 miss is a near-tie when the reference puts its pick and the
# backend's within this many standard deviations of that row's errors
# (top1_misses, is_near_tie).
NEAR_TIE_SIGMAS = 4.0
# The torch float32 and the numpy float64 references of one model must agree
# far better than the GPU does (check_torch_reference.py measures < 1e-6);
# beyond this the harness, not the GPU, is wrong.
REFS_AGREE = 1e-3
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def banner(lines):
    print("!" * 76)
    for line in lines:
        print(f"!!! {line}")
    print("!" * 76)


class TorchReference:
    """test/gpu/torch_reference.py over the payload's model files; .why
    says why not when PyTorch (or a loader) is missing."""

    def __init__(self, payload):
        self.payload, self.why = payload, None
        try:
            import torch
        except ImportError as e:
            self.why = f"PyTorch is not importable ({e})"
            return
        sys.path[:0] = [os.path.join(REPO, "test", "reference"), os.path.join(REPO, "test", "gpu")]
        sys.path.append(os.path.join(payload, "py"))   # gguf-py, PyYAML: only if not installed
        import reference_forward
        import torch_reference
        self.rf, self.tr = reference_forward, torch_reference
        self.device = str(torch_reference.default_device())
        self.version = torch.__version__

    def logits(self, name, tokens):
        """(float64 [T, vocab], seconds, None), or (None, 0, why skipped)."""
        base = os.path.join(self.payload, "synth", name + ".model")
        t0 = time.time()
        try:
            if os.path.isfile(base + ".gguf"):
                m = self.rf.ReferenceModel.from_gguf(base + ".gguf")
            elif os.path.isdir(base):
                m = self.rf.ReferenceModel.from_hf_folder(base)
            else:
                return None, 0, f"no model file {base}.gguf or {base}/ (payload built before they were added)"
        except self.rf.ReferenceError as e:   # e.g. no gguf-py
            return None, 0, str(e)
        return self.tr.forward(m, tokens).astype(np.float64), time.time() - t0, None


def run(cmd, env):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
        sys.exit(2)
    return r, time.time() - t0


def logits(rt, env, art, tokens, prefill, backend, vocab, extra=()):
    out = os.path.join(art, f"..{os.path.basename(art)}.{backend}.f32")
    _, secs = run([rt, "logits", art, "--tokens", ",".join(map(str, tokens)), "--prefill",
                   str(prefill), "--backend", backend, "--no-verify", "-o", out] + list(extra), env)
    got = np.fromfile(out, dtype=np.float32).reshape(len(tokens), vocab).astype(np.float64)
    os.remove(out)
    return got, secs


def compare(got, want):
    err = np.abs(got - want).max(axis=1) / np.maximum(np.abs(want).max(axis=1), 1e-30)
    top1 = float((got.argmax(axis=1) == want.argmax(axis=1)).mean())
    return float(err.max()), top1, bool(np.isfinite(got).all())


def top1_misses(got, want):
    """For each row whose top-1 differs, a dict: row; gap, the reference's
    top-2 gap as a fraction of the row's logit range; rank, the rank the
    backend under test gives the reference's pick (2 when it is its
    runner-up; tied logits rank alike); sigmas, how far apart the reference
    puts its pick and the backend's, in standard deviations of the
    difference of two errors (sqrt(2) x the RMS error of the row's other
    logits)."""
    out = []
    for r in np.nonzero(got.argmax(axis=1) != want.argmax(axis=1))[0]:
        w, g = want[r], got[r]
        i, j = int(w.argmax()), int(g.argmax())
        top = np.sort(w)[-2:]
        span = max(float(w.max() - w.min()), 1e-30)
        rest = np.ones(len(w), bool)
        rest[[i, j]] = len(w) <= 2
        rms = float(np.sqrt(np.mean((g[rest] - w[rest]) ** 2)))
        apart = float(w[i] - w[j])
        out.append({"row": int(r), "gap": float(top[1] - top[0]) / span,
                    "rank": 1 + int((g > g[i]).sum()),
                    "sigmas": apart / (np.sqrt(2.0) * rms) if rms > 0 else
                    (0.0 if apart == 0 else float("inf"))})
    return out


def is_near_tie(miss):
    """A miss that says nothing of the kernels: the reference puts its pick
    and the backend's within NEAR_TIE_SIGMAS standard deviations of the
    errors the backend shows on the rest of that row, so its rounding swaps
    them at random. A wrong decoding moves the whole row (the max relative
    error check) or puts logits far from where the reference has them."""
    return miss["sigmas"] <= NEAR_TIE_SIGMAS


def explain_top1(got, want, prefill, what="reference"):
    """Prints why each top-1 miss happened; returns the number that are not
    near-ties (each one a decoding or kernel fault to find)."""
    faults = 0
    for m in top1_misses(got, want):
        near = is_near_tie(m)
        faults += not near
        print(f"     row {m['row']} ({'prefill' if m['row'] < prefill else 'decode'}): the "
              f"{what}'s top-2 gap is {m['gap']:.2e} of the row's logit range; its pick ranks "
              f"{m['rank']} here, {m['sigmas']:.1f} sigma of this row's error from the pick "
              f"made here: {'a near-tie' if near else 'NOT a near-tie (a fault to find)'}")
    return faults


def top1_verdict(got, want, floor):
    """Top-1 agreement over the rows that are not near-ties must reach
    `floor`: with bf16 activations random synthetic models have rows whose
    two best logits differ by less than the rounding moves them. (The
    plain top-1 agreement, near-ties counted, is printed beside it.)"""
    if len(got) == 0:
        return False
    faults = sum(1 for m in top1_misses(got, want) if not is_near_tie(m))
    return 1.0 - faults / len(got) >= floor


def manifest(art):
    return json.load(open(os.path.join(art, "manifest.json")))


def copy_bandwidth():
    """Device-to-device copy GB/s (read + write counted), or None."""
    try:
        import torch
    except ImportError:
        return None
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.time()
    reps = 20
    for _ in range(reps):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * n * reps / (time.time() - t0) / 1e9


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Exit status: 0 all checks that ran passed, 1 a check "
                                 "failed, 2 a tool failed.")
    ap.add_argument("payload", help="build-gpu-payload/ (scripts/gpu-payload.sh)")
    ap.add_argument("--no-timing", action="store_true")
    # host: check this script itself on a machine without a GPU.
    ap.add_argument("--backend", default="cuda", choices=["cuda", "host"])
    return ap.parse_args()


class Payload:
    """The payload folder, its llmc-rt, the environment to run it in, and the
    backend under test (--backend)."""

    def __init__(self, path, backend):
        self.path = os.path.abspath(path)
        self.rt = os.path.join(self.path, "bin", "llmc-rt")
        self.env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(self.path, "lib") + ":" +
                        os.environ.get("LD_LIBRARY_PATH", ""), LLMC_NO_EXEC_RT="1")
        self.backend = backend

    def synth_refs(self):
        """(name, artifact, reference .npz path) of each synthetic model, by name."""
        for ref_path in sorted(glob.glob(os.path.join(self.path, "synth", "*.ref.npz"))):
            name = os.path.basename(ref_path)[: -len(".ref.npz")]
            yield name, os.path.join(self.path, "synth", name + ".llmc"), ref_path


class Outcome:
    """What the checks found so far: whether all passed, whether a tool or the
    harness failed, and the torch f32 comparisons by result."""

    def __init__(self):
        self.ok = True
        self.tool_error = False
        self.torch_tally = {"passed": 0, "FAILED": 0, "SKIPPED": 0, "ERROR": 0}
        self.torch_skips = []

    def status(self):
        return 2 if self.tool_error else 0 if self.ok else 1


def check_synthetic(pl, out, tref):
    """Each synthetic model on the backend under test vs the float64 and the
    torch float32 references."""
    print("--- correctness: synthetic models, GPU (bf16) vs the float64 reference (numpy,")
    print("    computed where the payload was built) and a float32 PyTorch reference (here)")
    if tref.why:
        banner([f"{tref.why}:", "GPU vs the PyTorch float32 reference is SKIPPED for every model",
                "(NOT checked, NOT passed); install torch to run it"])
    else:
        print(f"    torch {tref.version} on {tref.device}")
    for name, art, ref_path in pl.synth_refs():
        ref = np.load(ref_path)
        tokens, prefill, want = ref["tokens"].tolist(), int(ref["prefill"]), ref["logits"]
        vocab = want.shape[1]
        gpu, gsecs = logits(pl.rt, pl.env, art, tokens, prefill, pl.backend, vocab)
        host, _ = logits(pl.rt, pl.env, art, tokens, prefill, "host", vocab)
        err, top1, finite = compare(gpu, want)
        herr, htop1, _ = compare(host, want)
        good = finite and err < REL_TOL and top1_verdict(gpu, want, TOP1_MIN)
        out.ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name}: {pl.backend} max rel err {err:.2e} "
              f"(prefill {compare(gpu[:prefill], want[:prefill])[0]:.2e}, decode "
              f"{compare(gpu[prefill:], want[prefill:])[0]:.2e}), top-1 {top1:.3f}; "
              f"host {herr:.2e} / {htop1:.3f}; {gsecs:.1f} s")
        explain_top1(gpu, want, prefill)
        check_vs_torch(pl, out, tref, name, tokens, prefill, gpu, want, finite)
    print("torch f32 reference: " + ", ".join(f"{n} {k}" for k, n in out.torch_tally.items()
                                              if n or k != "ERROR"))


def check_vs_torch(pl, out, tref, name, tokens, prefill, gpu, want, finite):
    """One synthetic model's logits `gpu` vs the torch float32 reference, which
    must itself agree with the float64 one (`want`)."""
    why, tsecs = tref.why, 0
    if not why:
        try:
            tlog, tsecs, why = tref.logits(name, tokens)
        except Exception:   # a harness bug, not a GPU failure
            print(f"ERROR {name} vs torch f32: the torch reference raised")
            traceback.print_exc(file=sys.stdout)
            out.tool_error = True
            out.torch_tally["ERROR"] += 1
            return
    if why:
        out.torch_tally["SKIPPED"] += 1
        out.torch_skips.append(name)
        print(f"SKIP {name} vs torch f32: {'no PyTorch' if why == tref.why else why}")
        return
    terr, ttop1, _ = compare(gpu, tlog)
    refs_err, _, _ = compare(tlog, want)
    tgood = finite and terr < REL_TOL and top1_verdict(gpu, tlog, TOP1_MIN)
    out.ok &= tgood
    out.torch_tally["passed" if tgood else "FAILED"] += 1
    print(f"{'PASS' if tgood else 'FAIL'} {name} vs torch f32 ({tref.device}): {pl.backend} "
          f"max rel err {terr:.2e}, top-1 {ttop1:.3f}; torch f32 vs float64 {refs_err:.1e}"
          f"; {tsecs:.1f} s")
    explain_top1(gpu, tlog, prefill, "torch reference")
    if refs_err >= REFS_AGREE:
        print(f"ERROR {name}: the torch f32 and float64 references disagree ({refs_err:.1e} "
              f">= {REFS_AGREE:g}): the harness or the payload's model file is wrong")
        out.tool_error = True


def check_pdl(pl, out):
    """Each synthetic model with programmatic dependent launch, launch by launch
    and as CUDA graphs: the kernels are deterministic, so the logits must equal
    the plain launches' to the bit; a difference is a race (a kernel touching
    its predecessor's data before griddepcontrol.wait). SKIPPED below sm_90."""
    print("--- correctness: programmatic dependent launch (--pdl), bitwise against plain launches")
    for name, art, ref_path in pl.synth_refs():
        ref = np.load(ref_path)
        tokens, prefill, vocab = ref["tokens"].tolist(), int(ref["prefill"]), ref["logits"].shape[1]
        plain, _ = logits(pl.rt, pl.env, art, tokens, prefill, "cuda", vocab)
        for extra in (["--pdl"], ["--pdl", "--cuda-graphs"]):
            path = os.path.join(art, f"..{os.path.basename(art)}.pdl.f32")
            r = subprocess.run([pl.rt, "logits", art, "--tokens", ",".join(map(str, tokens)),
                                "--prefill", str(prefill), "--backend", "cuda", "--no-verify",
                                "-o", path] + extra, capture_output=True, text=True, env=pl.env)
            if r.returncode != 0 and "needs sm_90" in r.stderr:
                print(f"SKIPPED {name} {' '.join(extra)}: {r.stderr.strip()[-200:]}")
                return
            if r.returncode != 0:
                print(f"FAILED ({r.returncode}): {' '.join(r.args)}\n{r.stderr[-2000:]}")
                out.tool_error = True
                return
            got = np.fromfile(path, dtype=np.float32).reshape(len(tokens), vocab).astype(np.float64)
            os.remove(path)
            same = bool(np.array_equal(got, plain))
            out.ok &= same
            diff = "" if same else f" (max |diff| {np.abs(got - plain).max():.3e})"
            print(f"{'PASS' if same else 'FAIL'} {name} {' '.join(extra)}: "
                  f"{'the same logits' if same else 'DIFFERENT logits'}{diff}")


def check_cublaslt(pl, out):
    """The synthetic models with bf16 weights (those with GEMM kernels) with
    --gemm=cublaslt, then llmc tune and --gemm=auto, vs the float64 reference."""
    print("--- correctness: GEMMs on cuBLASLt (--gemm=cublaslt; models with bf16 weights), "
          "then llmc tune and --gemm=auto")
    for name, art, ref_path in pl.synth_refs():
        if not any("gemm" in k for k in manifest(art)["cuda"]["kernels"]):
            continue
        ref = np.load(ref_path)
        tokens, prefill, want = ref["tokens"].tolist(), int(ref["prefill"]), ref["logits"]
        for extra in (["--gemm=cublaslt"], ["--gemm=cublaslt", "--cuda-graphs"]):
            got, _ = logits(pl.rt, pl.env, art, tokens, prefill, "cuda", want.shape[1], extra)
            err, top1, finite = compare(got, want)
            good = finite and err < REL_TOL and top1_verdict(got, want, TOP1_MIN)
            out.ok &= good
            print(f"{'PASS' if good else 'FAIL'} {name} {' '.join(extra)}: max rel err "
                  f"{err:.2e}, top-1 {top1:.3f}")
            explain_top1(got, want, prefill)
        r, _ = run([pl.rt, "tune", art, "--rows", "1,16,64", "--no-verify"], pl.env)
        print(r.stdout.rstrip())
        got, _ = logits(pl.rt, pl.env, art, tokens, prefill, "cuda", want.shape[1], ["--gemm=auto"])
        err, top1, finite = compare(got, want)
        good = finite and err < REL_TOL and top1_verdict(got, want, TOP1_MIN)
        out.ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name} --gemm=auto (tune.json): max rel err "
              f"{err:.2e}, top-1 {top1:.3f}")
        explain_top1(got, want, prefill)


def runs_sm90a():
    """Whether this GPU runs sm_90a PTX (compute capability 9.0 exactly)."""
    try:
        cap = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.split()
    except OSError:
        return False
    return bool(cap) and cap[0].strip() == "9.0"


def check_wgmma(pl, out):
    """The bf16 8B shape compiled for sm_90a, whose prefill GEMMs run on
    wgmma, against the same weights compiled for sm_90 (mma.sync), both on
    this GPU: a 200-token prefill (past the large tile's 129) and 8 decode
    steps. The first hardware run of the wgmma path; the emulated e2e tests
    check its descriptors on the CPU."""
    base = os.path.join(pl.path, "peer", "llama3-8b-shape-bf16.llmc")
    art = os.path.join(pl.path, "peer", "llama3-8b-shape-bf16-sm90a.llmc")
    if pl.backend != "cuda" or not (os.path.exists(art) and os.path.exists(base)):
        return
    print("--- correctness: prefill GEMMs on wgmma (sm_90a) vs mma.sync (sm_90), bf16 8B shape")
    if not runs_sm90a():
        print("SKIP wgmma: this GPU is not compute capability 9.0, which sm_90a PTX needs")
        return
    vocab = manifest(art)["model"]["vocab_size"]
    tokens = np.random.default_rng(11).integers(0, vocab, 208).tolist()
    got, _ = logits(pl.rt, pl.env, art, tokens, 200, "cuda", vocab)
    want, _ = logits(pl.rt, pl.env, base, tokens, 200, "cuda", vocab)
    err, top1, finite = compare(got, want)
    good = finite and err < REL_TOL and top1_verdict(got, want, TOP1_MIN)
    out.ok &= good
    print(f"{'PASS' if good else 'FAIL'} llama3-8b-shape-bf16 sm_90a (wgmma) vs sm_90 (mma.sync): "
          f"max rel err {err:.2e}, top-1 {top1:.3f}")
    explain_top1(got, want, 200)


def check_vs_host(pl, out):
    """The dummy-weight shapes and the w4a16 model: the backend under test vs
    the host backend, on seeded random tokens."""
    print("--- correctness: dummy-weight shapes and a w4a16 model, GPU vs host backend")
    rng = np.random.default_rng(5)
    for art in sorted(glob.glob(os.path.join(pl.path, "*.llmc"))):
        name = os.path.basename(art)[: -len(".llmc")]
        vocab = manifest(art)["model"]["vocab_size"]
        tokens = rng.integers(0, vocab, 48).tolist()
        gpu, gsecs = logits(pl.rt, pl.env, art, tokens, 32, pl.backend, vocab)
        host, hsecs = logits(pl.rt, pl.env, art, tokens, 32, "host", vocab)
        err, top1, finite = compare(gpu, host)
        good = finite and err < REL_TOL * 2.5 and top1_verdict(gpu, host, 0.9)
        out.ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name}: {pl.backend} vs host max rel err {err:.2e}, "
              f"top-1 {top1:.3f} (bound 5e-2; top-1 0.90 over the rows that are not "
              f"near-ties); gpu {gsecs:.1f} s, host {hsecs:.1f} s")
        explain_top1(gpu, host, 32, "host")


def check_device_sampling(pl, out):
    """The engine on each synthetic model, 32 mixed requests (greedy, top-k
    with top-p and min-p, temperature alone; half with 3 logprobs), once
    with the device sampler (the default) and once sampling on the host
    from copied logits (--no-device-sampling). The logits are the same bits,
    so greedy tokens must agree exactly; a seeded draw may differ only where
    the GPU's expf and the C library's differ in the last bit at a boundary
    of the draw (printed, at most 1 request in 32); logprobs within 1e-5.
    The device-sampled run schedules asynchronously (the default: each step
    submitted while the one before runs, its tokens fed on the device); a
    third run one step at a time (--no-async-scheduling) must give its
    tokens and logprobs to the bit, and so must a fourth with --cuda-graphs
    (decode steps padded to the batch-size buckets captured at load)."""
    print("--- correctness: the device sampler vs the host sampler (engine, 32 mixed requests)")
    for name, art, _ in pl.synth_refs():
        vocab = manifest(art)["model"]["vocab_size"]
        rng = np.random.default_rng(11)
        reqs = []
        for i in range(32):
            req = {"id": i, "prompt_token_ids": rng.integers(2, vocab, 1 + i % 9).tolist(),
                   "max_tokens": 24, "ignore_eos": True, "temperature": 0}
            if i % 3 == 1:
                req.update(temperature=0.8, top_k=40, top_p=0.9, min_p=0.05, seed=500 + i)
            elif i % 3 == 2:
                req.update(temperature=1.1, top_k=0, top_p=1.0, min_p=0.0, seed=900 + i)
            if i % 2:
                req["logprobs"] = 3
            reqs.append(req)
        prompts = os.path.join(art, "..sampling.jsonl")
        with open(prompts, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in reqs)
        results = []
        for extra in ([], ["--no-device-sampling"], ["--no-async-scheduling"], ["--cuda-graphs"]):
            path = os.path.join(art, "..sampling.out.jsonl")
            run([pl.rt, "run", art, "--backend", "cuda", "--no-verify", "--prompts-file", prompts,
                 "-o", path] + extra, pl.env)
            results.append({str(r["id"]): r for r in map(json.loads, open(path))})
            os.remove(path)
        os.remove(prompts)
        device, host, one_at_a_time, graphs = results
        for other, what in ((one_at_a_time, "one step at a time"),
                            (graphs, "with --cuda-graphs (padded to buckets)")):
            same = all((device[k]["token_ids"], device[k].get("logprobs")) ==
                       (other[k]["token_ids"], other[k].get("logprobs"))
                       for k in device) and device.keys() == other.keys()
            out.ok &= same
            print(f"{'PASS' if same else 'FAIL'} {name}: scheduled ahead (tokens fed on the "
                  f"device) {'equals' if same else 'DIFFERS from'} {what}, tokens and logprobs")
        greedy_bad, drawn_differ, lp_err = 0, 0, 0.0
        for r in reqs:
            d, h = device[str(r["id"])], host[str(r["id"])]
            if d["token_ids"] != h["token_ids"]:
                if r["temperature"] == 0:
                    greedy_bad += 1
                else:
                    drawn_differ += 1
                    print(f"  {name} request {r['id']}: a seeded draw differs "
                          f"({d['token_ids'][:6]} vs {h['token_ids'][:6]})")
                continue
            for a, b in zip(d.get("logprobs", []), h.get("logprobs", [])):
                lp_err = max(lp_err, abs(a["logprob"] - b["logprob"]))
        good = greedy_bad == 0 and drawn_differ <= 1 and lp_err <= 1e-5
        out.ok &= good
        print(f"{'PASS' if good else 'FAIL'} {name}: device vs host sampler: {greedy_bad} greedy "
              f"requests differ (bound 0), {drawn_differ} seeded ones (bound 1), logprobs within "
              f"{lp_err:.1e} (bound 1e-5)")


def decode_weight_bytes(m):
    # Bytes a decode step reads: every weight, except an untied
    # embedding table (one row per token).
    tensors = m["weights"]["tensors"]
    names = [t["name"] for t in tensors]
    untied = any("lm_head" in n or n.startswith("output.") for n in names)
    return sum(t["bytes"] for t in tensors
               if not (untied and ("embed_tokens" in t["name"] or "token_embd" in t["name"])))


def bench_dummy_shapes(pl):
    """llmc-rt bench of the dummy-weight artifacts: tokens/s, and for decode
    the weight bandwidth, also as a fraction of a device-to-device copy."""
    print(f"--- speed (llmc-rt bench --backend={pl.backend}; tgN@bB: B sequences decoding together)")
    bw = copy_bandwidth()
    print(f"device-to-device copy: {bw:.0f} GB/s" if bw else "copy bandwidth: no PyTorch, not measured")
    print(f"{'model':32} {'test':12} {'tok/s':>10} {'GB/s':>8} {'of copy':>8}")
    shapes = [(name, "512,2048", "1,8,64,256")
              for name in ("smollm2-shape", "llama3-8b-shape", "llama3-8b-shape-q4_k")]
    # On Hopper the 4-bit 8B shapes again for sm_90a, decode only (their
    # prefill is in the GEMM tables): issue 26's 64 sequences at most 2x
    # the batch-1 step, 256 at 20,000 tok/s or more, on the wgmma tiles.
    if pl.backend == "cuda" and runs_sm90a():
        shapes += [(f"peer/llama3-8b-shape-{w}-sm90a", "0", "1,64,256") for w in ("q4_0", "q4_k")]
    for name, prompts, seqs in shapes:
        art = os.path.join(pl.path, name + ".llmc")
        if not os.path.exists(art):
            continue
        weight_bytes = decode_weight_bytes(manifest(art))
        r, _ = run([pl.rt, "bench", art, "--backend", pl.backend, "--json", "-p", prompts, "-n",
                    "128", "-B", seqs, "-r", "3", "--no-verify"], pl.env)
        for row in json.loads(r.stdout)["tests"]:
            test, tps = row["test"], float(row["avg_ts"])
            line = f"{os.path.basename(name):32} {test:12} {tps:10.1f}"
            if test.startswith("tg") and tps > 0:
                # One step reads every weight once, for all n_seqs tokens.
                gbs = weight_bytes * tps / row.get("n_seqs", 1) / 1e9
                line += f" {gbs:8.0f}" + (f" {gbs / bw:8.1%}" if bw else "")
            print(line)


def bench_gemm_peer(pl):
    """The GEMMs against their peer, cuBLASLt, in one run: the bf16 8B shape
    with every GEMM generated, then every GEMM on cuBLASLt (cuda only)."""
    art = os.path.join(pl.path, "peer", "llama3-8b-shape-bf16.llmc")
    if not (pl.backend == "cuda" and os.path.exists(art)):
        return
    print("--- GEMMs: generated (llmc) vs cuBLASLt, llama3-8b-shape bf16 weights")
    runs = {}
    # The same weights compiled for sm_90a: the prefill GEMMs on wgmma.
    wgmma = os.path.join(pl.path, "peer", "llama3-8b-shape-bf16-sm90a.llmc")
    hopper = runs_sm90a()
    for gemm, a in (("llmc", art), ("cublaslt", art), ("wgmma", wgmma)):
        if not os.path.exists(a) or (gemm == "wgmma" and not hopper):
            continue
        r, _ = run([pl.rt, "bench", a, "--backend", "cuda", "--json", "-p", "512,2048", "-n", "64",
                    "-B", "1,64", "-r", "3", "--no-verify",
                    f"--gemm={'llmc' if gemm == 'wgmma' else gemm}"], pl.env)
        runs[gemm] = {row["test"]: float(row["avg_ts"]) for row in json.loads(r.stdout)["tests"]}
    print(f"{'test':12} {'llmc tok/s':>11} {'cuBLASLt':>10} {'llmc/cuBLASLt':>14} "
          f"{'sm_90a wgmma':>13} {'wgmma/cuBLASLt':>15}")
    for test, tps in runs["llmc"].items():
        lt = runs["cublaslt"].get(test, 0)
        wg = runs.get("wgmma", {}).get(test, 0)
        print(f"{test:12} {tps:11.1f} {lt:10.1f} {tps / lt if lt else float('nan'):14.2f} "
              f"{wg:13.1f} {wg / lt if lt and wg else float('nan'):15.2f}")
    # 4-bit weights' prefill, on the generated GEMMs, on cuBLASLt after
    # dequantizing each weight (lt_deq), and on the faster of the two per
    # GEMM as the kernel report predicts it (auto: the payload's tune.json of
    # `llmc tune --predict --device=h200`; on another GPU it falls back to
    # llmc and says so), against cuBLASLt on bf16 weights (issue 26's goal:
    # at least 0.7).
    base = runs["cublaslt"]
    print(f"{'4-bit prefill':44} {'tok/s':>9} {'/ cuBLASLt bf16':>16}")
    for name in ("llama3-8b-shape.llmc", "llama3-8b-shape-q4_k.llmc",
                 "peer/llama3-8b-shape-q4_0-sm90a.llmc", "peer/llama3-8b-shape-q4_k-sm90a.llmc"):
        q = os.path.join(pl.path, name)
        if not os.path.exists(q) or ("sm90a" in name and not hopper):
            continue
        # sm_90a: the generated GEMMs (on wgmma) only.
        for gemm in ("llmc",) if "sm90a" in name else ("llmc", "cublaslt", "auto"):
            r, _ = run([pl.rt, "bench", q, "--backend", "cuda", "--json", "-p", "512,2048", "-n", "0",
                        "-r", "3", "--no-verify", f"--gemm={gemm}"], pl.env)
            for row in json.loads(r.stdout)["tests"]:
                tps, ref = float(row["avg_ts"]), base.get(row["test"], 0)
                label = os.path.basename(name)[:-5] + ' ' + gemm + ' ' + row['test']
                print(f"{label:44} {tps:9.1f} "
                      f"{tps / ref if ref else float('nan'):16.2f}")


def finish(out, tref):
    """Prints the verdict (loudly about skipped torch comparisons); returns the exit status."""
    if out.torch_skips:
        banner([f"GPU vs the PyTorch float32 reference was SKIPPED for {len(out.torch_skips)} "
                f"model(s): {', '.join(out.torch_skips)}",
                tref.why or "see the SKIP lines above"])
    status = out.status()
    print(f"e2e: {'FAILED' if status == 1 else 'TOOL ERROR' if status else 'passed'}"
          + (f", {len(out.torch_skips)} torch f32 comparison(s) SKIPPED" if out.torch_skips else ""))
    return status


def harness_missing(payload):
    """The files the checks import that are neither in this checkout nor in
    the payload: a copy of the payload without them must say so, not raise
    half-way (as the first H200 run's did without tools/synth-model)."""
    missing = [p for p in ("test/reference/reference_forward.py", "test/gpu/torch_reference.py")
               if not os.path.isfile(os.path.join(REPO, p))]
    if not any(os.path.isfile(p) for p in (
            os.path.join(REPO, "tools", "synth-model", "synth_model.py"),
            os.path.join(payload, "py", "synth_model.py"))):
        missing.append("tools/synth-model/synth_model.py, or the payload's py/synth_model.py "
                       "(scripts/gpu-payload.sh copies it; rebuild the payload)")
    return missing


def main():
    args = parse_args()
    missing = harness_missing(os.path.abspath(args.payload))
    if missing:
        print(f"ERROR: the check cannot run: {REPO} lacks " + "; ".join(missing))
        return 3
    pl = Payload(args.payload, args.backend)
    out = Outcome()
    tref = TorchReference(pl.path)

    check_synthetic(pl, out, tref)
    if pl.backend == "cuda":
        check_pdl(pl, out)
        check_cublaslt(pl, out)
        check_device_sampling(pl, out)
        check_wgmma(pl, out)
    check_vs_host(pl, out)
    if not args.no_timing:
        bench_dummy_shapes(pl)
        bench_gemm_peer(pl)
    return finish(out, tref)


if __name__ == "__main__":
    sys.exit(main())
