#!/usr/bin/env bash
# GPU check of the CUDA kernel templates (compiler/Target/Kernels/cuda/
# llmc_cuda_kernels.cuh): builds test/gpu/kernel_check.cu with nvcc (no MLIR,
# no CMake, no NVRTC) and runs every template on the GPU against the host
# kernels (llmc_host_kernels.h) and double-precision loops, then times the
# decode GEMV against cudaMemcpy bandwidth. Needs an sm_80+ GPU, nvcc, g++.
#
#   scripts/gpu-check.sh [--no-timing]
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# CUDA_ARCH (default: the GPU's, from nvidia-smi), LLMC_GPU_CHECK_BUILD
# (default: build-gpu-check). Exit status: 0 all passed, 1 a check failed,
# 2 a CUDA error, 3 a harness error; a build error stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cxx=${CXX:-g++}
out=${LLMC_GPU_CHECK_BUILD:-build-gpu-check}
arch=${CUDA_ARCH:-}
if [[ -z "$arch" ]]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ -n "$cap" ]] || { echo "gpu-check: no GPU found by nvidia-smi (set CUDA_ARCH to only build)" >&2; exit 2; }
  arch=sm_$cap
fi
mkdir -p "$out"

cat <<'TXT'
=== llmc GPU check: CUDA kernel templates vs host kernels ===
Checks (each on seeded random inputs, SmolLM2-135M shapes: hidden 576,
9/3 heads x 64, intermediate 1536, vocab 49152; weights random GGUF q4_1 and
q8_0 blocks; activations f16 and bf16), GPU output vs the host kernels
(f32, Q8 = false) on the same inputs and vs a double-precision loop:
  - gemv (decode, T = 1 and 8, MaxT 4; gate_up also MaxT 8): qkv + fused
    rms_norm prologue, o + residual, gate_up + norm + silu*mul, down +
    residual, lm_head + norm over logits_rows
  - gemm_mma (prefill, tensor cores, T = 64, 77, 512): the same five
    (lm_head without prologue, over a permuted subset of rows)
  - embed (ids incl. out-of-range), rms_norm (f32 and bf16 weight),
    rope (half, interleaved), rope_qkv_cache_write (both styles; q_out and
    both caches, negative slots), kv_cache_write
  - paged_attention_decode (+ reduce when split), block_size 16, GQA 9/3,
    contexts 1/17/300/2048 in one step (SplitKeys 256 and 128, window 0 and
    100), a one-split step, and prefill chunks through the decode kernel
  Tolerance: max |gpu - ref| / max |ref| per output, 5e-3 f16, 2e-2 bf16.
Timing: decode GEMV (T = 1, f16) over gate_up and lm_head, q4_1 and q8_0,
  L2-cold (rotating weight copies) and L2-warm, vs cudaMemcpy D2D.
NOT checked here:
  - no end-to-end model run and no logits vs PyTorch: there is no CUDA
    emitter / executor yet;
  - kernels are built by nvcc from the header, not through NVRTCCompiler
    (the unit tests compile the same header with NVRTC);
  - weight formats f32/f16/bf16/q4_0/q5_0/q5_1 and f32 activations (the
    synthetic shape of the unit tests) are not run; k-quants do not exist;
  - no compute-sanitizer pass; only this one GPU architecture.
TXT

echo "--- build ($arch, $nvcc)"
"$cxx" -std=c++17 -O2 -march=native -fopenmp -Wno-aggressive-loop-optimizations \
  -Icompiler/Target/Kernels/host -Iruntime/include/llmc/runtime/artifact \
  -c test/gpu/host_ref.cpp -o "$out/host_ref.o" &
"$nvcc" -std=c++17 -O3 -arch="$arch" -Icompiler/Target/Kernels/cuda \
  -Xcompiler -fopenmp,-O3 -c test/gpu/kernel_check.cu -o "$out/kernel_check.o"
wait $!
"$nvcc" -arch="$arch" "$out/kernel_check.o" "$out/host_ref.o" -o "$out/kernel_check" -Xcompiler -fopenmp
echo "--- run"
exec "$out/kernel_check" "$@"
