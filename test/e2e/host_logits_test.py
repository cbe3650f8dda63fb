#!/usr/bin/env python3
"""End-to-end check of the host backend against the float64 reference.

For several synthetic model shapes, in both Hugging Face and GGUF (f32) form:
write the model with tools/synth-model, `llmc compile` it to an artifact, ask
`llmc logits` for the teacher-forced logits of a prompt (one chunked prefill)
followed by 32 single-token decode steps through the paged KV cache (block
size 5, which divides neither the prompt nor the total length), and compare
every row with test/reference's float64 forward pass.

Tolerance: max |llmc - ref| / max |ref| < 1e-6 per row (f32 kernels against a
float64 reference; 3.6e-7 is the most measured on these shapes, README's
"~1e-7").

Each case is also compiled with `--no-fuse` (one kernel per op, no merged
projections) and run on the same tokens: the fused and unfused logits must be
the same bits, since the fuse pass only regroups f32 work and the host
kernels sum each output in one order whatever their group
(docs/architecture.md: "fused = unfused logits bit for bit").

Prints one line per case and ends with "N passed, M failed, S skipped"; exits
1 on any failure or when -k matches nothing (test/e2e/tally.py).
`--perturb REL` adds REL x max|row| to one logit of each fused row, a wrong
kernel that the old bounds (1e-4, 1e-5) let through: ctest runs it with 5e-6
to show that both checks fail on it (e2e/host-logits-catches-5e-6).

  python3 test/e2e/host_logits_test.py --llmc build/bin/llmc [--keep DIR] [-k NAME]
"""
import argparse
import os
import shutil
import subprocess
import sys
import zlib
import tempfile

import numpy as np

from tally import Tally

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
sys.path.insert(0, os.path.join(ROOT, "tools", "synth-model"))
import reference_forward as rf  # noqa: E402

SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
TOLERANCE = 1e-6
PROMPT = 14
DECODE = 32
BLOCK_SIZE = 5

# name -> synth_model.py options. Together they cover GQA and MHA, QKV bias,
# tied and untied embeddings, head_dim 32, 64 and 128, vocabularies that are
# not powers of two, RoPE scaling, a sliding window shorter than the sequence,
# Qwen3's per-head norm of Q and K, and mixtures of experts.
SHAPES = {
    "llama-gqa-tied-hd64": ["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4",
                            "--kv-heads", "2", "--head-dim", "64", "--intermediate", "384",
                            "--layers", "2", "--tie-embeddings"],
    "llama-mha-untied-hd128": ["--arch", "llama", "--vocab", "500", "--hidden", "256", "--heads", "2",
                               "--kv-heads", "2", "--head-dim", "128", "--intermediate", "320",
                               "--layers", "2", "--no-tie-embeddings"],
    "qwen2-bias-untied": ["--arch", "qwen2", "--vocab", "300", "--hidden", "128", "--heads", "4",
                          "--kv-heads", "2", "--intermediate", "256", "--layers", "2",
                          "--no-tie-embeddings", "--rope-theta", "1000000"],
    # bf16 checkpoint (as Qwen2.5 ships): bf16 biases in the merged QKV.
    "qwen2-bias-bf16": ["--arch", "qwen2", "--vocab", "300", "--hidden", "128", "--heads", "4",
                        "--kv-heads", "2", "--intermediate", "256", "--layers", "1",
                        "--dtype", "bf16"],
    # Qwen3: Q and K normed per head before RoPE; 4 heads of 32 make Q
    # twice as wide as the hidden size (Qwen3-0.6B: 16 x 128 over 1024).
    "qwen3-qknorm-hd32": ["--arch", "qwen3", "--vocab", "300", "--hidden", "64", "--heads", "4",
                          "--kv-heads", "2", "--head-dim", "32", "--intermediate", "192",
                          "--layers", "2", "--no-tie-embeddings", "--rope-theta", "1000000"],
    # Mixtures of experts: top-2 of 8 (Qwen3-MoE's norms and routing, experts
    # 96 wide over a hidden size of 64) and top-2 of 4 (Mixtral: Llama's
    # attention, the dense width for the experts).
    "qwen3moe-top2of8": ["--arch", "qwen3moe", "--vocab", "300", "--hidden", "64", "--heads", "4",
                         "--kv-heads", "2", "--head-dim", "32", "--experts", "8",
                         "--experts-per-tok", "2", "--moe-intermediate", "96", "--layers", "2",
                         "--no-tie-embeddings"],
    "mixtral-top2of4": ["--arch", "mixtral", "--vocab", "300", "--hidden", "64", "--heads", "4",
                        "--kv-heads", "2", "--intermediate", "160", "--experts", "4",
                        "--experts-per-tok", "2", "--layers", "2"],
    "llama3-scaled-gqa": ["--arch", "llama", "--vocab", "333", "--hidden", "128", "--heads", "8",
                          "--kv-heads", "2", "--intermediate", "256", "--layers", "3",
                          "--rope-scaling", "llama3:8,1,4,16", "--max-position", "512"],
    "mistral-window": ["--arch", "mistral", "--vocab", "300", "--hidden", "128", "--heads", "4",
                       "--kv-heads", "1", "--intermediate", "256", "--layers", "2",
                       "--sliding-window", "9"],
    # Phi-3: Q/K/V and gate/up each one stored tensor, read as row slices.
    "phi3-fused-window": ["--arch", "phi3", "--vocab", "320", "--hidden", "128", "--heads", "4",
                          "--kv-heads", "2", "--intermediate", "192", "--layers", "2",
                          "--no-tie-embeddings", "--sliding-window", "11"],
    # Gemma 2: scaled embeddings, four norms a layer (HF: 1 + w), GeGLU,
    # layer 0 on a window of 9, scores and logits soft-capped at caps low
    # enough to bend them.
    "gemma2-softcap": ["--arch", "gemma2", "--vocab", "320", "--hidden", "128", "--heads", "4",
                       "--kv-heads", "2", "--head-dim", "32", "--intermediate", "256",
                       "--layers", "2", "--sliding-window", "9", "--attn-softcap", "3",
                       "--final-softcap", "10", "--qk-gain", "4"],
    # Gemma 3: Q/K norms per head, layers 0-1 sliding with base 10000 and
    # layer 2 global with base 1e6 and linear scaling.
    "gemma3-local-global": ["--arch", "gemma3", "--vocab", "320", "--hidden", "128", "--heads",
                            "4", "--kv-heads", "2", "--head-dim", "32", "--intermediate", "256",
                            "--layers", "3", "--sliding-window-pattern", "3",
                            "--sliding-window", "9", "--rope-scaling", "linear:4"],
}


# --sanitize-kernels: the generated kernels are built with ASan + UBSan and
# the runtime (not instrumented) runs with those runtimes preloaded.
KERNEL_CFLAGS = []
RUN_ENV = None


def sanitize_kernels():
    global RUN_ENV
    # -O1 (after llmc's -O3): a quarter of the compile time (18 s -> 4.5 s
    # for a one-layer model), and ASan's recommended level.
    KERNEL_CFLAGS.extend(["--host-cflags=-O1 -fsanitize=address,undefined -fno-omit-frame-pointer "
                          "-fno-sanitize-recover=all"])
    libs = []
    for lib in ("libasan.so", "libubsan.so"):
        path = subprocess.run(["c++", f"-print-file-name={lib}"], capture_output=True,
                              text=True).stdout.strip()
        if not os.path.isabs(path):
            raise RuntimeError(f"no {lib} for the host compiler (c++ -print-file-name={lib})")
        libs.append(path)
    RUN_ENV = dict(os.environ, LD_PRELOAD=" ".join(libs),
                   ASAN_OPTIONS="detect_leaks=0:abort_on_error=1",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def logits(llmc, model, art, tokens, vocab, extra=()):
    """Compiles `model` into `art` (with `extra` compile flags) and returns its
    teacher-forced logits for `tokens`: one chunked prefill, then decode."""
    run([llmc, "compile", model, "-o", art, *KERNEL_CFLAGS, *extra])
    out = art + ".f32"
    # llmc-rt next to llmc: with --sanitize-kernels, the preloaded sanitizer
    # runtimes then meet only the runtime, not LLVM.
    rt = os.path.join(os.path.dirname(llmc), "llmc-rt")
    run([rt if os.path.exists(rt) else llmc, "logits", art, "--tokens",
         ",".join(map(str, tokens)), "--prefill", str(PROMPT),
         "--block-size", str(BLOCK_SIZE), "--threads", "2", "-o", out], env=RUN_ENV)
    return np.fromfile(out, dtype=np.float32).reshape(len(tokens), vocab).astype(np.float64)


def row_rel_err(got, want):
    return np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)


def check(llmc, name, opts, form, work, perturb=0.0):
    model = os.path.join(work, f"{name}.{form}" if form == "gguf" else f"{name}-hf")
    args = [sys.executable, SYNTH, "--format", form, "--out", model, "--seed", "7"] + opts
    if form == "gguf":
        args += ["--gguf-type", "f32"]
    run(args)
    ref = rf.ReferenceModel.from_gguf(model) if form == "gguf" else rf.ReferenceModel.from_hf_folder(model)
    vocab = ref.cfg.vocab
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # same tokens every run
    tokens = [int(t) for t in rng.integers(0, vocab, PROMPT + DECODE)]
    got = logits(llmc, model, os.path.join(work, f"{name}-{form}.llmc"), tokens, vocab)
    if perturb:  # --perturb: a kernel wrong by this much in one logit of each row
        got[:, 0] += perturb * np.abs(got).max(axis=1)
    want = ref.forward(tokens)
    err = row_rel_err(got, want)
    worst = float(err.max())
    top1 = float((got.argmax(axis=1) == want.argmax(axis=1)).mean())
    ok_ref = worst < TOLERANCE
    print(f"{'PASS' if ok_ref else 'FAIL'} {name} [{form}]: max rel err {worst:.2e} "
          f"(prefill {err[:PROMPT].max():.2e}, decode {err[PROMPT:].max():.2e}), top-1 agree {top1:.3f}")

    # The same model without the fuse pass: the fused kernels must compute
    # what the one-op-per-kernel baseline computes.
    unfused = logits(llmc, model, os.path.join(work, f"{name}-{form}-nofuse.llmc"), tokens, vocab,
                     ["--no-fuse"])
    ferr = row_rel_err(got, unfused)
    differ = int((got != unfused).any(axis=1).sum())
    ok_fuse = differ == 0
    print(f"{'PASS' if ok_fuse else 'FAIL'} {name} [{form}] fused vs --no-fuse: "
          f"{'the same bits' if ok_fuse else f'{differ} of {len(got)} rows differ'} (max rel err "
          f"{ferr.max():.2e}: prefill {ferr[:PROMPT].max():.2e}, decode {ferr[PROMPT:].max():.2e}), "
          f"top-1 agree {float((got.argmax(axis=1) == unfused.argmax(axis=1)).mean()):.3f}")
    return ok_ref and ok_fuse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--keep", help="keep models and artifacts in DIR")
    ap.add_argument("-k", help="only shapes whose name contains this")
    ap.add_argument("--sanitize-kernels", action="store_true",
                    help="build the generated kernels with ASan+UBSan and run them under it")
    ap.add_argument("--perturb", type=float, default=0.0, metavar="REL",
                    help="add REL x max|row| to one logit of each fused row: a wrong kernel, "
                         "which the test must fail")
    a = ap.parse_args()
    if a.sanitize_kernels:
        sanitize_kernels()
    work = a.keep or tempfile.mkdtemp(prefix="llmc-e2e-")
    os.makedirs(work, exist_ok=True)
    tally = Tally(a.k)
    try:
        for name, opts in SHAPES.items():
            for form in ("hf", "gguf"):
                case = f"{name} [{form}]"
                if tally.wants(case):
                    tally.attempt(case, lambda: check(a.llmc, name, opts, form, work, a.perturb))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return tally.exit_status()


if __name__ == "__main__":
    sys.exit(main())
