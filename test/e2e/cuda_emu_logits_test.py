#!/usr/bin/env python3
"""The CUDA backend end to end, without a GPU: generated CUDA kernels run on
the CPU under emulation, through the runtime's real CUDA executor.

For each synthetic model: `llmc compile --target=host,sm_90` writes the CUDA
source of the model (kernels/cuda/src); the host C++ compiler builds that
source for the CPU with test/cuda-emu/cuda_emu.h (CUDA keywords as C++, each
thread of a block a fiber, warps in lock step at shuffles and mma.sync); the
fake CUDA driver (test/unit/runtime/cuda/fake, FAKE_CUDA_KERNELS) runs each
cuLaunchKernel of `llmc-rt logits --backend=cuda` through it. The logits of a
prefill (the tensor-core GEMM path: T > 4; one of 3 tokens, the
several-token GEMV) and of decode steps (the GEMV path) are compared with the
float64 reference (test/reference) on the same weights. One case runs past 256 tokens of context, so attention splits and
their merge in the last block of each head run too; prefills past 128 tokens take
the GEMM's 128-token tiles (one with gate/up rows enough for the 128 x 128,
8-warp tile); prefills past 16 tokens take the
flash-attention kernel, one of them with a sliding window inside its tiles.
One case runs again with --cuda-graphs: decode steps captured and replayed
as graphs must give the same logits to the bit; and again with --pdl
(programmatic dependent launch through the fake's cuLaunchKernelEx), the
same. One (bf16 weights) runs
again with --gemm=cublaslt on the fake cuBLASLt, which multiplies on the CPU:
the generated halves around the library call (gemm_operand, gemm_epilogue)
against the reference; then `llmc tune` writes tune.json and --gemm=auto
follows it. One (f32) runs `llmc perplexity` on the device, whose prompt
logprobs the device sampler computes (forced picks), against the perplexity
of the same device's `llmc logits` rows in float64 (relative 1e-5).

Tolerance, max |cuda - ref| / max |ref| per row: 2e-2 with bf16 activations
and KV cache, 1e-2 with f16, 1e-4 with f32; top-1 agreement >= 0.98 with
16-bit activations (near-ties of random models flip), 1.0 with f32.

What this does not check: timing, the GPU's memory model (concurrency), the
PTX that NVRTC and ptxas make from the same source (the lit tests compile it).

  python3 test/e2e/cuda_emu_logits_test.py --llmc build/bin/llmc \\
      --fake-driver build/test/unit/libllmc_fake_cuda.so [-k NAME] [--keep DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

from tally import Tally

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "reference"))
import reference_forward as rf  # noqa: E402

SYNTH = os.path.join(ROOT, "tools", "synth-model", "synth_model.py")
EMU = os.path.join(ROOT, "test", "cuda-emu")
TOLERANCE = {"bf16": 2e-2, "f16": 1e-2, "f32": 1e-4}
TOP1 = {"bf16": 0.98, "f16": 0.98, "f32": 1.0}


def kquant_case(gguf_type, dtype, layers=1, decode=3, intermediate=512, prefill=20):
    """A Llama whose every matrix is in 256-element k-quant blocks."""
    return (["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4",
             "--kv-heads", "2", "--head-dim", "64", "--intermediate", str(intermediate),
             "--layers", str(layers), "--gguf-type", gguf_type],
            "gguf", dtype, prefill, decode)


# name -> (synth options, model kind, --dtype, prefill tokens, decode tokens)
CASES = {
    "llama-gqa-hd64-q8_0-bf16": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
         "--head-dim", "64", "--intermediate", "384", "--layers", "2", "--gguf-type", "q8_0"],
        "gguf", "bf16", 20, 6),
    "qwen2-bias-f16": (
        ["--arch", "qwen2", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "256", "--layers", "2", "--dtype", "bf16"],
        "hf", "f16", 30, 4),
    # Qwen3's per-head Q/K norms (their own kernels): bf16 activations over
    # q8_0 matrices, Q twice as wide as the hidden size.
    "qwen3-qknorm-q8_0-bf16": (
        ["--arch", "qwen3", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--head-dim", "64", "--intermediate", "256", "--layers", "2", "--gguf-type", "q8_0"],
        "gguf", "bf16", 20, 4),
    "qwen3-qknorm-hf-f32": (
        ["--arch", "qwen3", "--vocab", "300", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
         "--head-dim", "32", "--intermediate", "192", "--layers", "2", "--no-tie-embeddings"],
        "hf", "f32", 12, 4),
    # Mixtures of experts: Qwen3-MoE's top 2 of 8 over q8_0 experts in bf16,
    # Mixtral's top 2 of 4 in f32 from an HF folder.
    "qwen3moe-q8_0-bf16": (
        ["--arch", "qwen3moe", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads",
         "2", "--head-dim", "32", "--experts", "8", "--experts-per-tok", "2",
         "--moe-intermediate", "96", "--layers", "2", "--gguf-type", "q8_0"],
        "gguf", "bf16", 20, 4),
    "mixtral-hf-f32": (
        ["--arch", "mixtral", "--vocab", "300", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "160", "--experts", "4", "--experts-per-tok", "2", "--layers", "2"],
        "hf", "f32", 12, 4),
    # Phi-3's fused tensors as row slices; Gemma 2's soft-caps in the decode
    # and flash-prefill attention and the LM head's epilogue; Gemma 3's
    # sliding and global layers with their own RoPE bases.
    "phi3-fused-q8_0-bf16": (
        ["--arch", "phi3", "--vocab", "320", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "256", "--layers", "2", "--no-tie-embeddings", "--gguf-type", "q8_0"],
        "gguf", "bf16", 20, 4),
    "gemma2-softcap-f16": (
        ["--arch", "gemma2", "--vocab", "320", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--head-dim", "32", "--intermediate", "256", "--layers", "2", "--sliding-window", "9",
         "--attn-softcap", "3", "--final-softcap", "10", "--qk-gain", "2", "--gguf-type", "f16"],
        "gguf", "f16", 40, 4),
    "gemma2-softcap-q8_0-f32": (
        ["--arch", "gemma2", "--vocab", "320", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--head-dim", "32", "--intermediate", "256", "--layers", "2", "--sliding-window", "9",
         "--attn-softcap", "3", "--final-softcap", "10", "--qk-gain", "4", "--gguf-type", "q8_0"],
        "gguf", "f32", 40, 4),
    "llama3-scaled-hd16-f32": (
        ["--arch", "llama", "--vocab", "333", "--hidden", "128", "--heads", "8", "--kv-heads", "2",
         "--intermediate", "256", "--layers", "2", "--rope-scaling", "llama3:8,1,4,16",
         "--max-position", "512", "--gguf-type", "q4_1"],
        "gguf", "f32", 12, 4),
    "mistral-window-q5_0-long": (
        ["--arch", "mistral", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "1",
         "--intermediate", "256", "--layers", "1", "--sliding-window", "300", "--max-position", "512",
         "--gguf-type", "q5_0"],
        "gguf", "bf16", 270, 3),
    # bf16 weights and activations: the GEMMs cuBLASLt may run (CUBLASLT_CASES).
    "llama-bf16-weights": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "256", "--layers", "2", "--dtype", "bf16"],
        "hf", "bf16", 20, 4),
    # The smallest k-quants (every matrix in 256-element blocks).
    "llama-q2_k-f16": kquant_case("q2_k", "f16"),
    "llama-q3_k-bf16": kquant_case("q3_k", "bf16"),
    # Q4_K_M's two formats (q4_k matrices; llama.cpp keeps some in q6_k),
    # and q5_k: the k-quants with 6-bit scales and mins in 12 bytes.
    "llama-q4_k-bf16": kquant_case("q4_k", "bf16", layers=2, decode=4),
    "llama-q6_k-f16": kquant_case("q6_k", "f16"),
    "llama-q5_k-bf16": kquant_case("q5_k", "bf16"),
    # Gate/up rows (2 x 4,224) reach the 128 x 128, 8-warp tile of the
    # tensor-core GEMM past 128 tokens (llmc-select-gemm-tiles: 64 x 132 rows).
    "llama-wide-gemm-q8_0-bf16": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "4224", "--layers", "1", "--gguf-type", "q8_0"],
        "gguf", "bf16", 140, 2),
    # q4_0, the format the tensor-core GEMM decodes straight to bf16 pairs
    # (llmc_cuda_mma_weights.cuh), in prefill (40 tokens) and decode.
    "llama-q4_0-bf16": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "384", "--layers", "2", "--gguf-type", "q4_0"],
        "gguf", "bf16", 40, 3),
    # A 3-token prefill: the several-token GEMV (2..4 tokens), its rows
    # quantized once by the xq8 launch (gemv_q8_operand) and copied by every
    # block (gemv_q8_staged), the LM head's gathered through logits_rows.
    "llama-q4_0-prefill3-bf16": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "256", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "384", "--layers", "2", "--gguf-type", "q4_0"],
        "gguf", "bf16", 3, 2),
    # A down projection long in K (2,048: 64 steps of 32) and short in rows
    # (128): llmc-select-gemm-tiles splits its small tile's K 4 ways, so the
    # 40-token prefill runs the split-K GEMM and its ticketed reduction.
    "llama-splitk-q4_k-bf16": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "2048", "--layers", "2", "--gguf-type", "q4_k"],
        "gguf", "bf16", 40, 3),
    # A prefill the sliding window cuts inside the flash-attention tiles:
    # two 128-row query tiles, the second starting past key 0 (its first
    # row's window); the last warp of the first tile sees only the last 7
    # keys of its first key tile (window start 57 of 0..63).
    "mistral-window56-prefill-bf16": (
        ["--arch", "mistral", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "256", "--layers", "1", "--sliding-window", "56", "--max-position",
         "512", "--gguf-type", "f16"],
        "gguf", "bf16", 200, 3),
    # Peaked attention (scores x 16): row maxima jump by more than 2^8
    # between key tiles, so the prefill kernel's lazy rescaling of O runs
    # past the first tile. f16: bf16's rounding of such scores alone nears
    # the bf16 tolerance.
    "llama-peaked-attn-f16": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "256", "--layers", "1", "--qk-gain", "4", "--gguf-type", "f16"],
        "gguf", "f16", 200, 3),
    # Wide gate/up rows (the 128 x 128 large tile) in the activation type
    # (2 x 4,224, copied by cp.async) and in q4_K (2 x 4,352, K of whole
    # super-blocks: decoded a step of a row at a time, the loop unrolled).
    "llama-wide-gemm-bf16-weights": (
        ["--arch", "llama", "--vocab", "300", "--hidden", "128", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "4224", "--layers", "1", "--dtype", "bf16"],
        "hf", "bf16", 140, 2),
    "llama-wide-gemm-q4_k-bf16": kquant_case("q4_k", "bf16", decode=2, intermediate=4352,
                                             prefill=140),
}

# Cases run again compiled for sm_90a (`NAME@sm_90a`), where
# llmc-select-gemm-tiles puts the large tile on Hopper's warpgroup MMA for
# weights in the activation type and for wide tiles of any format: the
# emulation's wgmma reads the ring through the descriptors as the hardware
# does (64-byte swizzle, its stride), so a tile the descriptor does not
# describe fails here (an SBO of 1,024, or every warpgroup reading the
# first's rows: error 1.6). Tiles: 128 x 64 on two warpgroups (f16
# copied), 128 x 128 (bf16 copied; q8_0 decoded by groups, q4_K by steps,
# while the products run), and 128 x 64 of decoded weights on one
# warpgroup, two 64-row blocks of tokens each (f16 under bf16, and the wide
# cases' other projections); and the small tile, one warpgroup over 64
# tokens, with K split over blocks (llama-splitk-q4_k-bf16) and the LM
# head's rows gathered. The manifest must name wgmma in a launch's variant,
# or the case fails: it would test nothing.
WGMMA_CASES = {"llama-peaked-attn-f16", "mistral-window56-prefill-bf16",
               "llama-wide-gemm-bf16-weights", "llama-wide-gemm-q8_0-bf16",
               "llama-wide-gemm-q4_k-bf16", "llama-splitk-q4_k-bf16", "llama-q4_0-bf16"}


# Cases also run with --cuda-graphs (must match the launch-by-launch logits).
GRAPH_CASES = {"llama-gqa-hd64-q8_0-bf16"}
# Cases whose `llmc perplexity --backend=cuda` (prompt logprobs computed by
# the device sampler as forced picks; no logits leave the device) must give
# the perplexity of the same device's `llmc logits` rows, in float64.
PERPLEXITY_CASES = {"llama3-scaled-hd16-f32"}
# Cases also run with --gemm=cublaslt on the fake cuBLASLt (test/unit: it
# multiplies on the CPU in f32): the generated pre/epi launches around it
# must give the reference's logits within the same tolerance, prefill and
# decode, launch by launch and as CUDA graphs.
# With 16-bit activations every GEMM has a cuBLASLt alternative; quantized
# weights are dequantized into its B operand first (lt_deq).
CUBLASLT_CASES = {"llama-bf16-weights", "llama-q4_k-bf16"}


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def cuda_include():
    for var in ("LLMC_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.path.join(os.environ[var], "include")
    return "/usr/local/cuda/include"


def build_emulation(art, cxx):
    """The artifact's CUDA source built for the CPU; returns the object's path."""
    src = os.path.join(art, "kernels", "cuda", "src")
    out = os.path.join(art, "kernels_emu.so")
    # -fno-strict-aliasing: the kernels read 16-bit arrays through u32/uint4
    # pointers, as CUDA code does; host compilers may miscompile that at -O2.
    run([cxx, "-std=c++17", "-O1", "-fno-strict-aliasing", "-shared", "-fPIC", "-w",
         "-DLLMC_CUDA_EMULATE",
         "-include", os.path.join(EMU, "cuda_emu.h"), "-I", src, "-I", cuda_include(),
         "-I", EMU, os.path.join(EMU, "cuda_emu.cc"), "-x", "c++",
         os.path.join(src, "kernels.cu"), "-o", out])
    return out


def check(args, name, work):
    name, _, target = name.partition("@")
    target = target or "sm_90"
    opts, kind, dtype, prefill, decode = CASES[name]
    model = os.path.join(work, name + (".gguf" if kind == "gguf" else ""))
    if not os.path.exists(model):
        run([sys.executable, SYNTH, "--format", kind, "--out", model, "--seed", "9"] + opts)
    art = os.path.join(work, f"{name}-{target}.llmc")
    run([args.llmc, "compile", model, f"--target=host,{target}", f"--dtype={dtype}",
         "--host-activations=f32", "-o", art])
    if target == "sm_90a":
        with open(os.path.join(art, "manifest.json")) as f:
            wgmma = f.read().count(" wgmma")
        print(f"{'PASS' if wgmma else 'FAIL'} {name}@{target}: {wgmma} GEMM launches on wgmma",
              flush=True)
        if not wgmma:
            return False
    else:
        target = ""
    emu = build_emulation(art, args.cxx)
    ref = rf.ReferenceModel.from_gguf(model) if kind == "gguf" else rf.ReferenceModel.from_hf_folder(model)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    tokens = [int(t) for t in rng.integers(0, ref.cfg.vocab, prefill + decode)]
    out = os.path.join(work, name + ".f32")
    rt = os.path.join(os.path.dirname(args.llmc), "llmc-rt")
    env = dict(os.environ, LLMC_CUDA_DRIVER=args.fake_driver, FAKE_CUDA_KERNELS=emu,
               LLMC_NO_EXEC_RT="1")
    r = run([rt if os.path.exists(rt) else args.llmc, "logits", art, "--backend=cuda", "--tokens",
             ",".join(map(str, tokens)), "--prefill", str(prefill), "-o", out], env=env)
    got = np.fromfile(out, dtype=np.float32).reshape(len(tokens), ref.cfg.vocab).astype(np.float64)
    want = ref.forward(tokens)
    err = np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)
    top1 = float((got.argmax(axis=1) == want.argmax(axis=1)).mean())
    ok = bool(np.isfinite(got).all()) and err.max() < TOLERANCE[dtype] and top1 >= TOP1[dtype]
    name = f"{name}@{target}" if target else name
    print(f"{'PASS' if ok else 'FAIL'} {name}: {dtype} max rel err {err.max():.2e} (prefill "
          f"{err[:prefill].max():.2e}, decode {err[prefill:].max():.2e}; tolerance "
          f"{TOLERANCE[dtype]:.0e}), top-1 {top1:.3f}", flush=True)
    if not ok:
        print(r.stderr[-2000:])
    if name in GRAPH_CASES:
        # The decode steps again, captured once per shape and replayed as
        # CUDA graphs (the fake replays the captured launches), then every
        # step launched with programmatic dependent launch (--pdl: the
        # kernels' griddepcontrol prologue, cuLaunchKernelEx): the same
        # logits to the bit.
        for flag, what in (("--cuda-graphs", "decode steps replayed from graphs"),
                           ("--pdl", "programmatic dependent launches")):
            again = out + flag
            r = run([rt if os.path.exists(rt) else args.llmc, "logits", art, "--backend=cuda", flag,
                     "--tokens", ",".join(map(str, tokens)), "--prefill", str(prefill), "-o", again],
                    env=env)
            same = open(again, "rb").read() == open(out, "rb").read()
            # The runner says what it used: graphs captured at load (a
            # bucket each), or programmatic launches.
            used = ("programmatic dependent launch" if flag == "--pdl"
                    else "as CUDA graphs") in r.stderr
            print(f"{'PASS' if same and used else 'FAIL'} {name} {flag}: {what} give "
                  f"{'the same' if same else 'DIFFERENT'} logits"
                  f"{'' if used else '; the runner did NOT say it used them: ' + r.stderr[-300:]}",
                  flush=True)
            same = same and used
            ok = ok and same
    if name in PERPLEXITY_CASES:
        ok = check_perplexity(rt if os.path.exists(rt) else args.llmc, art, model, env, work) and ok
    if name in CUBLASLT_CASES:
        for extra in ([], ["--cuda-graphs"]):
            lt_out = out + ".cublaslt"
            lt_env = dict(env, LLMC_CUBLASLT_LIBRARY=args.fake_cublaslt)
            r = run([rt if os.path.exists(rt) else args.llmc, "logits", art, "--backend=cuda",
                     "--gemm=cublaslt", "--tokens", ",".join(map(str, tokens)), "--prefill",
                     str(prefill), "-o", lt_out] + extra, env=lt_env)
            lt = np.fromfile(lt_out, dtype=np.float32).reshape(len(tokens), ref.cfg.vocab)
            lt_err = np.abs(lt - want).max(axis=1) / np.abs(want).max(axis=1)
            lt_top1 = float((lt.argmax(axis=1) == want.argmax(axis=1)).mean())
            used = "cuBLASLt" in r.stderr
            lt_ok = (used and bool(np.isfinite(lt).all()) and lt_err.max() < TOLERANCE[dtype]
                     and lt_top1 >= TOP1[dtype])
            print(f"{'PASS' if lt_ok else 'FAIL'} {name} --gemm=cublaslt {' '.join(extra)}: max rel "
                  f"err {lt_err.max():.2e} (prefill {lt_err[:prefill].max():.2e}, decode "
                  f"{lt_err[prefill:].max():.2e}), top-1 {lt_top1:.3f}"
                  f"{'' if used else '; the runner did NOT use cuBLASLt: ' + r.stderr[-300:]}",
                  flush=True)
            ok = ok and lt_ok
        ok = ok and check_tune(args, rt, art, env, tokens, prefill, out)
    return ok


def check_perplexity(exe, art, model, env, work, ctx=32, chunks=2):
    """`llmc perplexity` on the device against the device's own logits."""
    rng = np.random.default_rng(5)
    words = ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, int(n)))
             for n in rng.integers(1, 8, 4 * ctx * chunks)]
    text = os.path.join(work, "ppl.txt")
    with open(text, "w") as f:
        f.write(" ".join(words))
    def ids(*flags):
        r = run([exe, "tokenize", model, "--no-special", *flags, "--", open(text).read()])
        return [int(t) for t in r.stdout.split()]
    with_bos, without = ids("--bos"), ids("--no-bos")
    bos = with_bos[0] if len(with_bos) > len(without) else None
    r = run([exe, "perplexity", art, "--backend=cuda", "--file", text, "--ctx", str(ctx),
             "--chunks", str(chunks)], env=env)
    got = float(r.stdout.split("PPL = ")[1].split()[0])
    nll = []
    for c in range(chunks):
        chunk = with_bos[c * ctx:(c + 1) * ctx]
        if bos is not None:
            chunk[0] = bos
        out = os.path.join(work, f"ppl-{c}.f32")
        run([exe, "logits", art, "--backend=cuda", "--tokens", ",".join(map(str, chunk)), "-o", out],
            env=env)
        rows = np.fromfile(out, dtype=np.float32).reshape(ctx, -1).astype(np.float64)
        for i in range(ctx // 2, ctx - 1):
            top = rows[i].max()
            nll.append(-(rows[i][chunk[i + 1]] - top - np.log(np.exp(rows[i] - top).sum())))
    want = float(np.exp(np.mean(nll)))
    ok = abs(got / want - 1) < 1e-5
    print(f"{'PASS' if ok else 'FAIL'} perplexity on the device: {got:.4f}, from the device's "
          f"logits in float64 {want:.6f} (relative {abs(got / want - 1):.1e}, tolerance 1e-5)",
          flush=True)
    return ok


def check_tune(args, rt, art, env, tokens, prefill, own_out):
    """`llmc tune` on the fake (its events time every kernel alike, so it
    keeps the generated GEMMs: ties go to llmc), then --gemm=auto follows the
    file: the own path's logits to the bit; with every choice edited to
    cublaslt, those of --gemm=cublaslt."""
    import json
    env = dict(env, LLMC_CUBLASLT_LIBRARY=args.fake_cublaslt)
    exe = rt if os.path.exists(rt) else args.llmc
    r = run([exe, "tune", art, "--rows", "1,24", "--iters", "1"], env=env)
    tune = json.load(open(os.path.join(art, "tune.json")))
    kernels = tune["kernels"]
    ok = (tune["device"] == "Fake GPU" and len(kernels) == 5 and
          all([e["max_rows"] for e in v] == [1, 24] and all(e["impl"] == "llmc" for e in v)
              for v in kernels.values()))
    def logits(gemm, name):
        path = own_out + name
        r = run([exe, "logits", art, "--backend=cuda", f"--gemm={gemm}", "--tokens",
                 ",".join(map(str, tokens)), "--prefill", str(prefill), "-o", path], env=env)
        return open(path, "rb").read(), r.stderr
    auto, err = logits("auto", ".auto")
    ok = ok and auto == open(own_out, "rb").read() and "llmc tune's choice" in err
    for v in kernels.values():
        for e in v:
            e["impl"] = "cublaslt"
    json.dump(tune, open(os.path.join(art, "tune.json"), "w"))
    auto_lt, _ = logits("auto", ".auto-lt")
    lt, _ = logits("cublaslt", ".lt")
    ok = ok and auto_lt == lt and auto_lt != auto
    print(f"{'PASS' if ok else 'FAIL'} llmc tune: {len(kernels)} GEMM kernels timed at 1 and 24 "
          f"rows; --gemm=auto follows tune.json (own kernels, then cuBLASLt everywhere)", flush=True)
    if not ok:
        print(r.stdout[-3000:], err[-1000:])
    return check_tune_predicted(exe, art, logits, open(own_out, "rb").read(), lt) and ok


def check_tune_predicted(exe, art, logits, own, lt):
    """`llmc tune --predict` (no GPU): the kernel report's choices for an
    H200, which --gemm=auto does not follow on the fake GPU (it names why),
    and follows once the file names the fake's family (every choice edited
    to cublaslt: --gemm=cublaslt's logits)."""
    import json
    path = os.path.join(art, "tune.json")
    r = run([exe, "tune", art, "--predict", "--device=h200", "--rows", "1,24"])
    tune = json.load(open(path))
    kernels = tune["kernels"]
    ok = (r.returncode == 0 and tune["source"] == "predicted" and tune["device"] == "H200" and
          len(kernels) == 5 and all([e["max_rows"] for e in v] == [1, 24] for v in kernels.values()))
    other, err = logits("auto", ".auto-h200")
    ok = ok and other == own and "was predicted for H200, this is Fake GPU" in err
    tune["device"] = "fake gpu"
    for v in kernels.values():
        for e in v:
            e["impl"] = "cublaslt"
    json.dump(tune, open(path, "w"))
    followed, err2 = logits("auto", ".auto-predicted")
    ok = ok and followed == lt and "llmc tune --predict's choice" in err2
    print(f"{'PASS' if ok else 'FAIL'} llmc tune --predict: {len(kernels)} GEMM kernels predicted for "
          f"an H200 (not followed on the fake GPU), then for the fake's family (followed)", flush=True)
    if not ok:
        print(r.stdout[-3000:], r.stderr[-1000:], err[-500:], err2[-500:])
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmc", default=os.path.join(ROOT, "build", "bin", "llmc"))
    ap.add_argument("--fake-driver", default=os.path.join(ROOT, "build", "test", "unit",
                                                          "libllmc_fake_cuda.so"))
    ap.add_argument("--fake-cublaslt", default=os.path.join(ROOT, "build", "test", "unit",
                                                            "libllmc_fake_cublaslt.so"))
    ap.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    ap.add_argument("--keep", help="keep models and artifacts in DIR")
    ap.add_argument("-k", dest="only", help="run the cases whose name contains this")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(cuda_include(), "cuda_fp16.h")):
        print(f"SKIPPED: no CUDA toolkit headers at {cuda_include()} (cuda_fp16.h)")
        return 77
    work = args.keep or tempfile.mkdtemp(prefix="llmc-cuda-emu-")
    os.makedirs(work, exist_ok=True)
    tally = Tally(args.only)
    try:
        for name in list(CASES) + sorted(n + "@sm_90a" for n in WGMMA_CASES):
            if tally.wants(name):
                tally.attempt(name, lambda: check(args, name, work))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return tally.exit_status()


if __name__ == "__main__":
    sys.exit(main())
