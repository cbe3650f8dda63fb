//===- kernel_check.cu - run the CUDA kernel templates against the host ---===//
//
// Standalone check of compiler/Target/Kernels/cuda/llmc_cuda_kernels.cuh on a
// real GPU (built and run by scripts/gpu-check.sh with nvcc; no MLIR, no
// NVRTC, no CMake). Every template is instantiated the way
// test/unit/kernels/cuda_kernels/cuda_kernels_test.cpp instantiates it, for
// SmolLM2-135M (hidden 576, 9/3 heads x 64, intermediate 1536, vocab 49152;
// q4_1 and q8_0 weights as random GGUF blocks with f16 scales in
// +-[0.005, 0.1], / 8 for q8_0; f16 and bf16 activations), launched on seeded random
// inputs, and compared with
//   - the host kernels of llmc_host_kernels.h (f32 activations, Q8 = false)
//     on the same (Act-rounded) inputs, through host_ref.cpp, and
//   - a double-precision loop over the dequantized weights where cheap.
// Also the flash-attention prefill kernel (paged_attention_prefill) for the
// SmolLM2 and the Llama-3-8B (32/8 heads x 128) attention shapes, and the two
// halves around a cuBLASLt GEMM (gemm_operand with the rms_norm prologue and
// the x_rows gather, gemm_epilogue with store / silu_mul on a random f32 D).
// Error measure per output tensor: max |gpu - ref| / max |ref|; tolerance
// 5e-3 for f16 activations, 2e-2 for bf16. Then times the decode GEMV over
// the gate_up weight and the lm_head against cudaMemcpy D2D bandwidth, and
// the prefill attention kernel on 2048 tokens (8B shape, bf16) in TFLOP/s.
// Exit status: 0 all passed, 1 some check failed, 2 a CUDA error.
//
// The parts (built and linked together by scripts/gpu-check.sh):
//   kernel_check.cuh             shapes and the shared harness declarations
//   kernel_check_harness.cu      result table, CUDA errors, random weights
//   kernel_check_linear.cu       GEMV, gemm_mma, embed; GEMV timing
//   kernel_check_norm_rope.cu    rms_norm, rope, cache writes
//   kernel_check_attention.cu    paged attention decode and prefill; timing
//   kernel_check_gemm_halves.cu  gemm_operand, gemm_epilogue
//   kernel_check.cu              main: the checks in order, then timing
//
//===----------------------------------------------------------------------===//
#include "kernel_check.cuh"

template <class A> static void other_checks(const double* dinv, const double* inv, std::mt19937& rng) {
  norm_rope_cache_checks<A>(dinv, inv, rng);
  decode_attention_checks<A>(rng);
}

// The flash-attention prefill kernel and the cuBLASLt GEMM halves.
template <class A> static void prefill_and_gemm_half_checks(std::mt19937& rng) {
  prefill_attention_checks<A>(rng);
  gemm_half_checks<A>(rng);
}

int main(int argc, char** argv) {
  bool timing = true, only_linear = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--no-timing") timing = false;
    // The GEMV/GEMM checks alone (the wgmma build of gpu-check.sh).
    if (std::string(argv[i]) == "--only-linear") only_linear = true;
  }
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, dev));
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  std::printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d, driver %d; host kernels: %s\n", p.name,
              p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem / double(1 << 30), rt, drv,
              ref::simd_name());

  std::mt19937 rng(20240607);
  std::printf("generating weights (q4_1, q8_0: qkv 960x576, o 576x576, gate_up 3072x576, down 576x1536, "
              "lm_head/embed 49152x576)...\n");
  ModelWeights w41{ref::WFmt::q4_1, "q4_1"}, w80{ref::WFmt::q8_0, "q8_0"};
  for (ModelWeights* m : {&w41, &w80}) {
    m->qkv.make(m->fmt, QKV, H, rng);
    m->o.make(m->fmt, H, Q, rng);
    m->gu.make(m->fmt, 2 * I, H, rng);
    m->down.make(m->fmt, H, I, rng);
    m->lm.make(m->fmt, V, H, rng);
  }
  double inv[HD / 2];
  ref::rope_inv_freq(kTheta, inv);
  DBuf<double> dinv(HD / 2);
  dinv.up(inv);

  std::printf("\nchecks (GPU vs host kernels and vs double):\n");
  linear_checks<lc::fmt::q4_1, __half>(w41, rng);
  linear_checks<lc::fmt::q8_0, __half>(w80, rng);
  linear_checks<lc::fmt::q4_1, __nv_bfloat16>(w41, rng);
  linear_checks<lc::fmt::q8_0, __nv_bfloat16>(w80, rng);
  if (!only_linear) {
    other_checks<__half>(dinv.p, inv, rng);
    other_checks<__nv_bfloat16>(dinv.p, inv, rng);
    prefill_and_gemm_half_checks<__half>(rng);
    prefill_and_gemm_half_checks<__nv_bfloat16>(rng);
  }
  print_table();

  if (timing && !only_linear) {
    std::printf("\ntiming (decode, T = 1, f16 activations; bytes = weight bytes read once):\n");
    time_decode_gemv(w41, w80);
    std::printf("\ntiming (prefill attention, one sequence, bf16):\n");
    time_prefill(2048);
    std::printf("\ntiming (decode attention, 64 sequences of 4,096 tokens, bf16):\n");
    time_decode_attention(64, 4096);
  }
  int fails = 0;
  for (const Row& r : g_rows) fails += !r.pass;
  std::printf("\n%s\n", fails ? "RESULT: FAIL" : "RESULT: all checks passed");
  return fails ? 1 : 0;
}
