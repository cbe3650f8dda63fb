#!/usr/bin/env bash
# The GPU check: one prepared script for a GPU machine that has nvcc, g++
# and Python (numpy; PyTorch optional) but no MLIR and no network.
#
#   stage 1  the CUDA kernel templates (compiler/Target/Kernels/cuda/
#            llmc_cuda_kernels.cuh), built by nvcc from test/gpu/
#            kernel_check*.cu, against the host kernels and double loops,
#            then the decode GEMV timed against cudaMemcpy bandwidth and the
#            flash-attention prefill kernel in TFLOP/s;
#   stage 2  compiled artifacts end to end (test/gpu/e2e_check.py) over the
#            payload scripts/gpu-payload.sh built on a machine without a GPU
#            (build-gpu-payload/: llmc-rt, synthetic models with float64
#            reference logits and their model files, SmolLM2- and
#            Llama-3-8B-shaped dummy-weight artifacts): GPU logits vs the
#            float64 reference, a PyTorch float32 reference computed here
#            (test/gpu/torch_reference.py; SKIPPED without PyTorch) and the
#            host backend,
#            then prefill/decode tokens/s and the fraction of copy bandwidth.
#
#   scripts/gpu-check.sh [--no-timing] [--skip-kernels] [--skip-e2e]
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# CUDA_ARCH (default: the GPU's, from nvidia-smi), LLMC_GPU_CHECK_BUILD
# (default: build-gpu-check), LLMC_GPU_PAYLOAD (default: build-gpu-payload).
# Exit status: 0 all passed, 1 a check failed, 2 a CUDA or tool error, 3 a
# harness error; a build error stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_kernels=0 skip_e2e=0 timing=()
for a in "$@"; do
  case $a in
    --skip-kernels) skip_kernels=1 ;;
    --skip-e2e) skip_e2e=1 ;;
    --no-timing) timing=(--no-timing) ;;
    *) echo "gpu-check: unknown flag $a" >&2; exit 3 ;;
  esac
done
payload=${LLMC_GPU_PAYLOAD:-build-gpu-payload}
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
  - paged_attention_prefill (flash attention, tensor cores), 9/3 x 64 and
    Llama-3-8B's 32/8 x 128: one step of queries 1/17/64/200/129 tokens
    (contexts 40/17/64/500/333, i.e. chunks after prior context), shuffled
    blocks of 16, window 0 and 100, vs the host kernel and a double loop
  - the halves around a cuBLASLt GEMM: gemm_operand (rms_norm prologue,
    f32 and bf16 norm weight, K = 576 and 4096, with and without an x_rows
    gather; no_prologue gather) and gemm_epilogue (store_epilogue 960,
    silu_mul_epilogue 1536 over 3072) on a random f32 D
  Tolerance: max |gpu - ref| / max |ref| per output, 5e-3 f16, 2e-2 bf16.
Timing: decode GEMV (T = 1, f16) over gate_up and lm_head, q4_1 and q8_0,
  L2-cold (rotating weight copies) and L2-warm, vs cudaMemcpy D2D;
  paged_attention_prefill on one 2048-token sequence (32/8 x 128, bf16,
  causal) in TFLOP/s (4 * T^2/2 * 128 * 32 flops). Printed, not asserted.
Stage 2 (e2e_check.py) runs the NVRTC-built PTX of real artifacts.
NOT checked here:
  - kernels of stage 1 are built by nvcc from the header, not through
    NVRTCCompiler (stage 2 runs the NVRTC PTX of the artifacts);
  - the float64 references were computed with numpy where the payload was
    built; the PyTorch float32 reference (stage 2) is computed here only
    when torch imports, else SKIPPED;
  - weight formats f32/f16/bf16/q4_0/q5_0/q5_1 and f32 activations (the
    synthetic shape of the unit tests) are not run; k-quants do not exist;
  - no compute-sanitizer pass; only this one GPU architecture.
TXT

status=0
if (( ! skip_kernels )); then
echo "--- build ($arch, $nvcc)"
"$cxx" -std=c++17 -O2 -march=native -fopenmp -Wno-aggressive-loop-optimizations \
  -Icompiler/Target/Kernels/host -Icore/include/llmc/core/artifact -Icore/include/llmc/core/format \
  -c test/gpu/host_ref.cpp -o "$out/host_ref.o" &
pids=($!) objs=()
# The parts of kernel_check (test/gpu/kernel_check.cu lists them), one nvcc
# each, in parallel.
for part in kernel_check kernel_check_harness kernel_check_linear kernel_check_norm_rope \
            kernel_check_attention kernel_check_gemm_halves; do
  "$nvcc" -std=c++17 -O3 -arch="$arch" -Icompiler/Target/Kernels/cuda -Icore/include/llmc/core/format \
    -Xcompiler -fopenmp,-O3 -c "test/gpu/$part.cu" -o "$out/$part.o" &
  pids+=($!) objs+=("$out/$part.o")
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$nvcc" -arch="$arch" "${objs[@]}" "$out/host_ref.o" -o "$out/kernel_check" -Xcompiler -fopenmp
echo "--- run"
"$out/kernel_check" "${timing[@]}" || status=$?
fi

if (( ! skip_e2e )); then
  echo "=== stage 2: artifacts end to end ($payload) ==="
  if [[ ! -x "$payload/bin/llmc-rt" ]]; then
    echo "gpu-check: no payload at $payload (build it with scripts/gpu-payload.sh where MLIR is)" >&2
    exit 3
  fi
  # cuBLASLt for --gemm=cublaslt (llmc-rt dlopens it): the toolkit's, else
  # the one PyTorch's wheels bring, unless LLMC_CUBLASLT_LIBRARY names one.
  if [[ -z "${LLMC_CUBLASLT_LIBRARY:-}" ]]; then
    wheel=$(python3 -c "import nvidia.cublas as c; print(list(c.__path__)[0] + '/lib')" 2>/dev/null || true)
    for lib in /usr/local/cuda/lib64/libcublasLt.so.1[0-9] "$wheel"/libcublasLt.so.1[0-9]; do
      if [[ -e "$lib" ]]; then export LLMC_CUBLASLT_LIBRARY=$lib; break; fi
    done
  fi
  echo "cuBLASLt: ${LLMC_CUBLASLT_LIBRARY:-none found, the loader searches}"
  python3 test/gpu/e2e_check.py "$payload" "${timing[@]}" || { s=$?; (( s > status )) && status=$s; }
fi
exit $status
