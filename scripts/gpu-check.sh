#!/usr/bin/env bash
# The GPU check: one prepared script for a GPU machine that has nvcc, g++
# and Python (numpy; PyTorch optional) but no MLIR and no network.
#
#   stage 1  the CUDA kernel templates (compiler/Target/Kernels/cuda/
#            llmc_cuda_kernels.cuh), built by nvcc from test/gpu/
#            kernel_check*.cu, against the host kernels and double loops,
#            then the decode GEMV timed against cudaMemcpy bandwidth, the
#            flash-attention prefill kernel in TFLOP/s and decode attention
#            over 64 sequences of 4,096 tokens (FFMA and tensor-core
#            kernels) in GB/s of K/V; on Hopper (sm_90) the GEMM checks
#            again built for sm_90a with the tiles on wgmma;
#   stage 2  compiled artifacts end to end (test/gpu/e2e_check.py) over the
#            payload scripts/gpu-payload.sh built on a machine without a GPU
#            (build-gpu-payload/: llmc-rt, synthetic models with float64
#            reference logits and their model files, SmolLM2- and
#            Llama-3-8B-shaped dummy-weight artifacts): GPU logits vs the
#            float64 reference, a PyTorch float32 reference computed here
#            (test/gpu/torch_reference.py; SKIPPED without PyTorch) and the
#            host backend,
#            then prefill/decode tokens/s and the fraction of copy bandwidth;
#   stage 3  tensor parallelism: the payload's TP=2 artifact on two GPUs
#            (mpirun -np 2, NCCL) against its TP=1 artifact on one, when
#            nvidia-smi lists 2+ GPUs and mpirun is there (else it says why
#            it is skipped).
#   stage 4  pipeline parallelism: the payload's PP=2 artifact as two ranks
#            (on one GPU when there is one) against its TP=1 artifact
#   stage 5  kernel times vs the performance model: ncu times each kernel of
#            a few decode steps of the payload's Llama-3-8B-shape artifact,
#            and scripts/kernel-model-check.py sets them beside what
#            `llmc-rt inspect --kernels --json` predicts per launch, then the
#            time between kernels from a graph-replayed bench's step time;
#            then each GEMM of a 512-token prefill (q4_0, q4_k and bf16
#            weights): time, TFLOP/s, DRAM bytes read against its weight
#            bytes, and cuBLASLt on the bf16 weights in the same run, as
#            ratios (scripts/gemm-table.py) (printed, not asserted; SKIPPED
#            without ncu)
#   stage 6  the serving engine on the Llama-3-8B shape: `llmc-rt bench
#            --serving`, 256 requests of 128 prompt and 128 output tokens
#            at once, scheduled asynchronously and one step at a time,
#            their output tok/s beside the lock-step decode of 256
#            sequences (tg128@d128@b256), and the host's time per step
#            against the runner's (issue 27's goal: under 10%) (printed,
#            not asserted)
#
#   scripts/gpu-check.sh [--no-timing] [--skip-kernels] [--skip-e2e] [--skip-tp]
#                        [--skip-model] [--skip-serving]
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
# CUDA_ARCH (default: the GPU's, from nvidia-smi), LLMC_GPU_CHECK_BUILD
# (default: build-gpu-check), LLMC_GPU_PAYLOAD (default: build-gpu-payload),
# NCU (stage 5; default: ncu on PATH, else the toolkit's or Nsight Compute's),
# LLMC_NCCL_LIBRARY (default: the toolkit's libnccl.so.2, else the
# nvidia-nccl wheel's, else the loader's search).
# It ends with one line per stage: PASSED, FAILED, ERROR, or SKIPPED and
# why, so that a stage that did not run is never read as one that passed.
# Exit status: 0 every stage ran and passed, 1 a check failed, 2 a CUDA or
# tool error, 3 a harness error, 4 nothing failed but a stage, or some
# checks of one, were skipped (the summary says which and why); a build
# error stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."

skip_kernels=0 skip_e2e=0 skip_tp=0 skip_model=0 skip_serving=0 timing=()
for a in "$@"; do
  case $a in
    --skip-kernels) skip_kernels=1 ;;
    --skip-e2e) skip_e2e=1 ;;
    --skip-tp) skip_tp=1 ;;
    --skip-model) skip_model=1 ;;
    --skip-serving) skip_serving=1 ;;
    --no-timing) timing=(--no-timing) ;;
    *) echo "gpu-check: unknown flag $a" >&2; exit 3 ;;
  esac
done
payload=${LLMC_GPU_PAYLOAD:-build-gpu-payload}
# The payload's sm_90a artifacts share the q4_0 8B artifact's tokenizer
# (gpu-payload.sh left their copies out, to stay under the carry limit).
if [[ -f "$payload/peer/shared-tokenizer.txt" ]]; then
  while read -r a; do
    cp -n "$payload/llama3-8b-shape.llmc/tokenizer/tokenizer.json" "$payload/peer/$a/tokenizer/"
  done <"$payload/peer/shared-tokenizer.txt"
fi
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cxx=${CXX:-g++}
out=${LLMC_GPU_CHECK_BUILD:-build-gpu-check}
arch=${CUDA_ARCH:-}
if [[ -z "$arch" ]]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
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
  - stage 1 decodes q4_1 and q8_0 only; stage 2's artifacts add q4_0,
    q4_K, q5_0, f16 and bf16 weights; f32 activations, q5_1, q2_K, q3_K,
    q5_K, q6_K and i8/i4 run only under the CPU emulation (ctest);
  - no compute-sanitizer pass; only this one GPU architecture.
TXT

status=0
summary=()
# stage_result NAME RC [WHY]: one line of the final summary; RC 0 passed,
# 77 skipped (WHY says why), 1 failed, else an error of that status.
stage_result() {
  local name=$1 rc=$2 why=${3:-}
  case $rc in
    0) summary+=("PASSED   $name${why:+ ($why)}") ;;
    77) summary+=("SKIPPED  $name: $why") ;;
    1) summary+=("FAILED   $name"); (( status < 1 )) && status=1 ;;
    *) summary+=("ERROR    $name (exit $rc)"); (( rc > status )) && status=$rc ;;
  esac
  return 0
}
if (( skip_kernels )); then
  stage_result "stage 1, kernel templates" 77 "--skip-kernels"
else
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
rc=0
"$out/kernel_check" "${timing[@]}" || rc=$?
# On Hopper, the GEMM checks again with the tiles on wgmma (sm_90a, the
# tiles llmc-select-gemm-tiles picks for --target=sm_90a).
if [[ "$arch" == sm_90 ]]; then
  echo "--- build (sm_90a, the GEMM tiles on wgmma)"
  # -arch=sm_90a would also build compute_90 PTX, without wgmma.
  sm90a=(-gencode arch=compute_90a,code=sm_90a)
  pids=() wobjs=()
  for part in kernel_check kernel_check_harness kernel_check_linear kernel_check_norm_rope \
              kernel_check_attention kernel_check_gemm_halves; do
    "$nvcc" -std=c++17 -O3 "${sm90a[@]}" -DLLMC_CHECK_WGMMA -Icompiler/Target/Kernels/cuda \
      -Icore/include/llmc/core/format -Xcompiler -fopenmp,-O3 -c "test/gpu/$part.cu" \
      -o "$out/$part-wgmma.o" &
    pids+=($!) wobjs+=("$out/$part-wgmma.o")
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  "$nvcc" "${sm90a[@]}" "${wobjs[@]}" "$out/host_ref.o" -o "$out/kernel_check_wgmma" -Xcompiler -fopenmp
  echo "--- run (GEMM tiles on wgmma)"
  "$out/kernel_check_wgmma" --only-linear --no-timing || rc=$?
fi
stage_result "stage 1, kernel templates" "$rc"
fi

# llmc-rt links Open MPI's libmpi (tensor-parallel ranks); a machine
# without Open MPI runs it on the payload's copy.
if [[ -d "$payload/lib/mpi-fallback" ]] && ! ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40 '; then
  export LD_LIBRARY_PATH="$payload/lib/mpi-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if (( skip_e2e )); then
  stage_result "stage 2, artifacts end to end" 77 "--skip-e2e"
elif [[ ! -x "$payload/bin/llmc-rt" ]]; then
  echo "gpu-check: no payload at $payload (build it with scripts/gpu-payload.sh where MLIR is)" >&2
  stage_result "stage 2, artifacts end to end" 3
else
  echo "=== stage 2: artifacts end to end ($payload) ==="
  # cuBLASLt for --gemm=cublaslt (llmc-rt dlopens it): the toolkit's, else
  # the one PyTorch's wheels bring, unless LLMC_CUBLASLT_LIBRARY names one.
  if [[ -z "${LLMC_CUBLASLT_LIBRARY:-}" ]]; then
    wheel=$(python3 -c "import nvidia.cublas as c; print(list(c.__path__)[0] + '/lib')" 2>/dev/null || true)
    for lib in /usr/local/cuda/lib64/libcublasLt.so.1[0-9] "$wheel"/libcublasLt.so.1[0-9]; do
      if [[ -e "$lib" ]]; then export LLMC_CUBLASLT_LIBRARY=$lib; break; fi
    done
  fi
  echo "cuBLASLt: ${LLMC_CUBLASLT_LIBRARY:-none found, the loader searches}"
  e2e_log=$(mktemp)
  set +e
  python3 test/gpu/e2e_check.py "$payload" "${timing[@]}" 2>&1 | tee "$e2e_log"
  rc=${PIPESTATUS[0]}
  set -e
  # e2e_check.py's last line says whether a torch comparison was skipped.
  stage_result "stage 2, artifacts end to end" "$rc" \
    "$(tail -1 "$e2e_log" | grep -o '[0-9]* torch f32 comparison(s) SKIPPED' || true)"
  rm -f "$e2e_log"
fi

# The logits in DIR/NAME.f32 for each NAME (the runs of LABEL, the last
# with --cuda-graphs) against DIR/tp1.f32 and the float64 reference: bf16
# tolerance, max |got - tp1| / max |tp1| per row < 2e-2, top-1 >= 0.98.
compare_to_tp1() {
  python3 - "$@" <<'PY'
import sys
import numpy as np
d, ref, label, *names = sys.argv[1:]
r = np.load(ref)
want, prefill = r["logits"].astype(np.float64), int(r["prefill"])
rows, vocab = want.shape
get = lambda n: np.fromfile(f"{d}/{n}.f32", dtype=np.float32).reshape(rows, vocab).astype(np.float64)
def err(a, b):
    return np.abs(a - b).max(axis=1) / np.maximum(np.abs(b).max(axis=1), 1e-30)
tp1, ok = get("tp1"), True
for name in names:
    got = get(name)
    e, e_ref = err(got, tp1), err(got, want)
    top1 = float((got.argmax(1) == tp1.argmax(1)).mean())
    good = bool(np.isfinite(got).all()) and e.max() < 2e-2 and top1 >= 0.98 and e_ref.max() < 2e-2
    ok &= good
    same = open(f"{d}/{name}.f32", "rb").read() == open(f"{d}/tp1.f32", "rb").read()
    print(f"{'PASS' if good else 'FAIL'} {label}{' --cuda-graphs' if 'graphs' in name else ''} vs "
          f"TP=1 (bf16): max rel err {e.max():.2e} (prefill {e[:prefill].max():.2e}, decode "
          f"{e[prefill:].max():.2e}), top-1 {top1:.3f}{', the same bytes' if same else ''}; vs "
          f"float64 reference {e_ref.max():.2e} (TP=1: {err(tp1, want).max():.2e})")
same = open(f"{d}/{names[0]}.f32", "rb").read() == open(f"{d}/{names[-1]}.f32", "rb").read()
print(f"     {label} with and without CUDA graphs: {'the same bytes' if same else 'different bytes'}")
sys.exit(0 if ok else 1)
PY
}

# Runs LABEL's artifact (ARTIFACT under `mpirun -np 2`) and the TP=1 one on
# the payload's reference tokens, launch by launch and with --cuda-graphs,
# and compares (compare_to_tp1). Says why it skips without mpirun or the
# artifacts; exit 2 when a run fails.
ranks_vs_tp1() {
  local label=$1 art=$2 name=$3
  local tp1="$payload/synth/qwen2-bias-bf16.llmc" ref="$payload/synth/qwen2-bias-bf16.ref.npz"
  if ! command -v mpirun >/dev/null; then
    skip_why="$label runs its ranks under mpirun, and this machine has none (install openmpi-bin)"
    echo "skipped: $skip_why"
    return 77
  fi
  if [[ ! -d "$art" || ! -d "$tp1" || ! -f "$ref" ]]; then
    skip_why="the payload has no $label artifact (rebuild it with scripts/gpu-payload.sh)"
    echo "skipped: $skip_why"
    return 77
  fi
  local env=(LD_LIBRARY_PATH="$payload/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LLMC_NO_EXEC_RT=1)
  local mpi=(mpirun -np 2 --oversubscribe -x LD_LIBRARY_PATH -x LLMC_NO_EXEC_RT)
  [[ -n "${LLMC_NCCL_LIBRARY:-}" ]] && mpi+=(-x LLMC_NCCL_LIBRARY)
  (( EUID == 0 )) && mpi+=(--allow-run-as-root)
  local dir tokens prefill
  dir=$(mktemp -d)
  read -r tokens prefill < <(python3 -c "
import numpy as np; r = np.load('$ref'); print(','.join(map(str, r['tokens'].tolist())), int(r['prefill']))")
  local args=(--tokens "$tokens" --prefill "$prefill" --backend=cuda --no-verify)
  env "${env[@]}" "$payload/bin/llmc-rt" logits "$tp1" "${args[@]}" -o "$dir/tp1.f32" || return 2
  env "${env[@]}" "${mpi[@]}" "$payload/bin/llmc-rt" logits "$art" "${args[@]}" \
    -o "$dir/$name.f32" || return 2
  env "${env[@]}" "${mpi[@]}" "$payload/bin/llmc-rt" logits "$art" "${args[@]}" --cuda-graphs \
    -o "$dir/$name-graphs.f32" || return 2
  compare_to_tp1 "$dir" "$ref" "$label" "$name" "$name-graphs"
  local s=$?
  rm -rf "$dir"
  return $s
}

# Stage 3: a TP=2 artifact on two GPUs, its collectives through NCCL (the
# CUDA executor dlopens libnccl.so.2), against TP=1 on one GPU: a prefill of
# 40 tokens and 24 decode steps, launch by launch and with --cuda-graphs.
# Tolerance as for bf16 elsewhere: max |tp2 - tp1| / max |tp1| per row
# < 2e-2, top-1 >= 0.98; both also against the float64 reference.
tp_check() {
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if (( gpus < 2 )); then
    skip_why="TP=2 needs 2 GPUs, this machine has ${gpus:-0}"
    echo "skipped: $skip_why"
    return 77
  fi
  if [[ -z "${LLMC_NCCL_LIBRARY:-}" ]]; then
    local wheel lib
    wheel=$(python3 -c "import nvidia.nccl as n; print(list(n.__path__)[0] + '/lib')" 2>/dev/null || true)
    for lib in /usr/local/cuda/lib64/libnccl.so.2 /usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2 \
               "$wheel"/libnccl.so.2; do
      if [[ -e "$lib" ]]; then export LLMC_NCCL_LIBRARY=$lib; break; fi
    done
  fi
  echo "NCCL: ${LLMC_NCCL_LIBRARY:-none found here, the loader searches (libnccl.so.2)}"
  ranks_vs_tp1 TP=2 "$payload/tp/qwen2-bias-bf16-tp2.llmc" tp2
}

# Stage 4: a PP=2 artifact, its two stages as two ranks on the GPUs there
# are (both on GPU 0 of a one-GPU machine), the hidden state sent between
# them through host memory and MPI: against TP=1, as stage 3 (on the
# emulation the bytes are TP=1's). No NCCL: each stage is one rank.
pp_check() { ranks_vs_tp1 PP=2 "$payload/tp/qwen2-bias-bf16-pp2.llmc" pp2; }

if (( skip_tp )); then
  stage_result "stage 3, TP=2 on two GPUs" 77 "--skip-tp"
  stage_result "stage 4, PP=2 as two ranks" 77 "--skip-tp"
else
  echo "=== stage 3: tensor parallelism, TP=2 on two GPUs (mpirun, NCCL) ==="
  skip_why="" rc=0
  tp_check || rc=$?
  stage_result "stage 3, TP=2 on two GPUs" "$rc" "$skip_why"
  echo "=== stage 4: pipeline parallelism, PP=2 (mpirun; stages share a GPU when there is one) ==="
  skip_why="" rc=0
  pp_check || rc=$?
  stage_result "stage 4, PP=2 as two ranks" "$rc" "$skip_why"
fi

# Stage 5: each kernel's time against the performance model. ncu times
# every launch of a short decode run of the payload's Llama-3-8B-shape
# artifact (batch 1, a one-token prompt and $model_tg steps; ncu replays
# each kernel, so few; --clock-control none: the clocks of a real run, which
# the model assumes); the predictions are `inspect --kernels --json` of the
# same artifact at that batch and context; scripts/kernel-model-check.py
# prints both per kernel, flagging ratios outside 30% (printed, not
# asserted). The runtime times kernels with events only inside `llmc tune`
# (per step entry, not per launch), so without ncu the stage is skipped.
# have_gpu_and_8b_payload RT ART: 0 when a GPU and the payload's llmc-rt
# and 8B-shape artifact are there; else sets skip_why, says so, returns 77.
have_gpu_and_8b_payload() {
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    skip_why="no GPU (nvidia-smi lists none)"
  elif [[ ! -x "$1" || ! -d "$2" ]]; then
    skip_why="no payload llmc-rt and llama3-8b-shape.llmc at $payload (scripts/gpu-payload.sh)"
  else
    return 0
  fi
  echo "skipped: $skip_why"
  return 77
}
model_tg=4
model_check() {
  local art="$payload/llama3-8b-shape.llmc" rt="$payload/bin/llmc-rt" ncu=${NCU:-} inspect
  have_gpu_and_8b_payload "$rt" "$art" || return 77
  if [[ -z "$ncu" ]]; then
    ncu=$(command -v ncu || true)
    # The last one there wins: the toolkit's, else the newest Nsight Compute.
    if [[ -z "$ncu" ]]; then
      for c in /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/nsight-compute*/ncu /usr/local/cuda/bin/ncu; do
        if [[ -x "$c" ]]; then ncu=$c; fi
      done
    fi
  fi
  if [[ -z "$ncu" || ! -x "$ncu" ]]; then
    skip_why="ncu not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute; or set NCU)"
    echo "skipped: $skip_why"
    return 77
  fi
  # The payload carries llmc-rt, whose inspect is llmc's; an llmc there wins.
  inspect=$rt
  [[ -x "$payload/bin/llmc" ]] && inspect=$payload/bin/llmc
  local env=(LD_LIBRARY_PATH="$payload/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LLMC_NO_EXEC_RT=1)
  local csv="$out/kernel-times.csv" pred="$out/kernel-predictions.json" log="$out/kernel-times.log"
  echo "--- predictions: $inspect inspect $art --kernels --json --decode=1,$model_tg"
  env "${env[@]}" "$inspect" inspect "$art" --kernels --json --decode=1,$model_tg >"$pred" || return 2
  echo "--- $ncu over llmc-rt bench (tg$model_tg at batch 1, one run, no warmup)"
  rm -f "$csv"
  local rc=0
  env "${env[@]}" timeout 600 "$ncu" --csv --print-units base --metrics gpu__time_duration.sum \
    --clock-control none --target-processes all --log-file "$csv" \
    "$rt" bench "$art" --backend=cuda -p 0 -n $model_tg -B 1 -r 1 --no-warmup --no-verify \
    >"$log" 2>&1 || rc=$?
  tail -20 "$log"
  if grep -qs 'ERR_NVGPUCTRPERM' "$log" "$csv"; then
    skip_why="ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM: run as root or allow profiling)"
    echo "skipped: $skip_why"
    return 77
  fi
  if (( rc != 0 )); then
    echo "gpu-check: ncu over llmc-rt bench failed (exit $rc; $log, $csv)" >&2
    return 2
  fi
  # The same decode steps without the profiler, replayed from CUDA graphs,
  # then also with programmatic dependent launch: their wall time less the
  # kernels' is the time between kernels, which the model's per-launch
  # fixed_s leaves out (64 steps: contexts up to 64 keys, one attention
  # split, the kernels ncu timed).
  local step_us="" mode
  for mode in "" --pdl; do
    local bench_json="$out/step-time${mode}.json" us=""
    echo "--- $rt bench --cuda-graphs $mode (tg64 at batch 1, no profiler): the step's wall time"
    if env "${env[@]}" timeout 300 "$rt" bench "$art" --backend=cuda -p 0 -n 64 -B 1 -r 3 --no-verify \
        --cuda-graphs $mode --json >"$bench_json" 2>>"$log"; then
      us=$(python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))["tests"][0]; print(1e6 / t["avg_ts"])' \
        "$bench_json" || true)
    fi
    if [[ -z "$us" ]]; then
      echo "gpu-check: no step time from $bench_json (see $log)"
    elif [[ -z "$mode" ]]; then
      step_us=$us
    else
      echo "step with --pdl: $us us (without: ${step_us:-?} us)"
      echo "--pdl $us ${step_us:-?}" >"$out/step-time-pdl.txt"
    fi
  done
  echo "--- measured ($csv) vs predicted ($pred)"
  rc=0
  python3 scripts/kernel-model-check.py --measured "$csv" --predicted "$pred" ${step_us:+--step-us "$step_us"} \
    | tee "$out/kernel-model-check.txt" || rc=$?
  (( rc == 0 )) || return 3  # kernel-model-check.py: 2 is bad input, the harness's
  # The summary line says how many were within 30% ("N kernel(s) with ...").
  skip_why=$(grep -o '^[0-9]* kernel(s) with a prediction, [0-9]* outside 30%' "$out/kernel-model-check.txt" || true)
  gemm_tables || skip_why="$skip_why; the GEMM tables failed (see above)"
  return 0
}

# Each GEMM of a 512-token prefill under ncu, with its DRAM bytes: the
# generated GEMMs of the q4_0, q4_k and bf16 artifacts (bf16 also for
# sm_90a: on wgmma), and cuBLASLt's on
# the bf16 one (--gemm=cublaslt), then scripts/gemm-table.py per artifact
# against that peer. Uses model_check's $ncu, $inspect and $env.
gemm_tables() {
  local peer="$payload/peer/llama3-8b-shape-bf16.llmc" metrics=gpu__time_duration.sum,dram__bytes_read.sum
  profile_prefill() {  # ARTIFACT CSV JSON [extra bench flags]: 1 on failure
    local art=$1 csv=$2 json=$3
    shift 3
    env "${env[@]}" "$inspect" inspect "$art" --kernels --json --prefill=512 >"$json" || return 1
    rm -f "$csv"
    env "${env[@]}" timeout 600 "$ncu" --csv --print-units base --metrics "$metrics" \
      --clock-control none --target-processes all --log-file "$csv" \
      "$rt" bench "$art" --backend=cuda -p 512 -n 0 -r 1 --no-warmup --no-verify "$@" \
      >>"$log" 2>&1 || return 1
  }
  if [[ ! -d "$peer" ]]; then
    echo "gpu-check: no $peer for the GEMM tables (scripts/gpu-payload.sh)"
    return 1
  fi
  echo "--- GEMMs of a 512-token prefill (ncu: $metrics)"
  profile_prefill "$peer" "$out/gemm-cublaslt.csv" "$out/gemm-bf16.json" --gemm=cublaslt || {
    echo "gpu-check: ncu over the cuBLASLt prefill failed ($log)"; return 1; }
  local ok=0 art name
  for art in "$payload/llama3-8b-shape.llmc" "$payload/llama3-8b-shape-q4_k.llmc" "$peer" \
             "$payload"/peer/llama3-8b-shape-*-sm90a.llmc; do
    [[ -d "$art" ]] || continue
    [[ "$art" != *sm90a.llmc || "$arch" == sm_90 ]] || continue  # sm_90a runs on cc 9.0 only
    name=$(basename "$art" .llmc)
    if ! profile_prefill "$art" "$out/gemm-$name.csv" "$out/gemm-$name.json"; then
      echo "gpu-check: ncu over $name's prefill failed ($log)"
      ok=1
      continue
    fi
    python3 scripts/gemm-table.py --measured "$out/gemm-$name.csv" --predicted "$out/gemm-$name.json" \
      --peer "$out/gemm-cublaslt.csv" --peer-predicted "$out/gemm-bf16.json" --markdown \
      | tee "$out/gemm-table-$name.md" || ok=1
  done
  return $ok
}
# run_stage NAME SKIPPED FLAG TITLE FUNCTION: runs FUNCTION as the stage NAME
# (its exit status and skip_why into the summary), or records it skipped
# by FLAG when SKIPPED is 1.
run_stage() {
  if (( $2 )); then
    stage_result "$1" 77 "$3"
    return
  fi
  echo "=== $4 ==="
  skip_why="" rc=0
  "$5" || rc=$?
  stage_result "$1" "$rc" "$skip_why"
}
run_stage "stage 5, kernel times vs the model" "$skip_model" --skip-model \
  "stage 5: kernel times (ncu) vs the performance model" model_check

# Stage 6: the serving engine on the 8B shape (issue 27). Timings are
# printed beside each other, never asserted.
serving_check() {
  local art="$payload/llama3-8b-shape.llmc" rt="$payload/bin/llmc-rt"
  have_gpu_and_8b_payload "$rt" "$art" || return 77
  local env=(LD_LIBRARY_PATH="$payload/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LLMC_NO_EXEC_RT=1)
  local serving="$out/serving.json" lockstep="$out/serving-lockstep.json"
  local one="$out/serving-one-at-a-time.json" graphs="$out/serving-graphs.json"
  local mode flag dest
  for mode in async one graphs; do
    case $mode in
      async) flag="" dest=$serving ;;
      one) flag=--no-async-scheduling dest=$one ;;
      graphs) flag=--cuda-graphs dest=$graphs ;;  # a graph per batch-size bucket, at load
    esac
    echo "--- $rt bench --serving: 256 requests, 128 in, 128 out, all at once ($mode)"
    env "${env[@]}" timeout 600 "$rt" bench "$art" --backend=cuda --serving --requests 256 \
      --input-len 128 --output-len 128 --max-seqs 256 --no-verify --no-progress --json \
      $flag >"$dest" || return 2
  done
  echo "--- $rt bench: tg128 at depth 128, 256 sequences in lock step"
  env "${env[@]}" timeout 600 "$rt" bench "$art" --backend=cuda -p 0 -n 128 -d 128 -B 256 -r 1 \
    --no-verify --json >"$lockstep" || return 2
  python3 - "$serving" "$lockstep" "$one" "$graphs" <<'PY' | tee "$out/serving.md"
import json, sys
s, l, o, g = (json.load(open(p)) for p in sys.argv[1:5])
tg = l["tests"][-1]
print("| measure | value |\n|---|---:|")
print(f"| serving: output tok/s | {s['output_tokens_per_s']:.0f} |")
print(f"| serving, one step at a time (--no-async-scheduling): output tok/s | "
      f"{o['output_tokens_per_s']:.0f} |")
print(f"| asynchronous / one at a time | {s['output_tokens_per_s'] / o['output_tokens_per_s']:.2f} |")
print(f"| serving with --cuda-graphs (bucketed, captured at load): output tok/s | "
      f"{g['output_tokens_per_s']:.0f} ({g['output_tokens_per_s'] / s['output_tokens_per_s']:.2f}x "
      f"without) |")
print(f"| steps scheduled ahead | {s['steps_ahead_share'] * 100:.0f}% ({s['fed_tokens']} tokens fed) |")
print(f"| serving: generation tok/s (decode-only steps) | {s['generation_tokens_per_s']:.0f} |")
print(f"| lock step {tg['test']}: tok/s | {tg['avg_ts']:.0f} |")
print(f"| serving / lock step (generation) | {s['generation_tokens_per_s'] / tg['avg_ts']:.2f} |")
for name, r in (("one at a time", o), ("asynchronous", s)):
    print(f"| {name}: runner ms/step (Submit + Collect's wait) | {r['runner_ms_per_step']:.3f} |")
    print(f"| {name}: host ms/step (in Step, outside the runner) | {r['host_ms_per_step']:.3f} |")
share = o["host_share_of_runner"]
print(f"| one at a time: host / runner time | {share * 100:.1f}% (goal < 10%: "
      f"{'met' if share < 0.1 else 'MISSED, before the overlap'}) |")
PY
}
run_stage "stage 6, serving on the 8B shape" "$skip_serving" --skip-serving \
  "stage 6: the serving engine on the Llama-3-8B shape" serving_check

echo "=== gpu-check summary ==="
printf '%s\n' "${summary[@]}"
skipped=0
# A stage skipped, or one that passed with some of its checks skipped.
for line in "${summary[@]}"; do [[ $line == *SKIPPED* ]] && skipped=1; done
if (( status == 0 && skipped )); then
  echo "gpu-check: nothing failed, but not every check ran (exit 4): a skip is not a pass"
  exit 4
fi
echo "gpu-check: $( (( status == 0 )) && echo 'every stage ran and passed' || echo "exit $status")"
exit $status
