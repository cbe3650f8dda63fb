//===- kernel_check.cuh - shared harness of the kernel check --------------===//
//
// What every part of test/gpu/kernel_check (see kernel_check.cu) shares: the
// SmolLM2-135M shapes, the CUDA error macros, device buffers, random
// activations and GGUF weights, the result table, and the step_info
// builders. Each kernel wrapper template is defined in the one .cu file that
// launches it, so no __global__ instantiation is compiled into two objects.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llmc_cuda_kernels.cuh"

#include "host_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace lc = llmc::cuda;

//===----------------------------------------------------------------------===//
// SmolLM2-135M shapes.
//===----------------------------------------------------------------------===//
constexpr int H = 576, NH = 9, KV = 3, HD = 64, I = 1536, V = 49152;
constexpr int QKV = (NH + 2 * KV) * HD, Q = NH * HD, KVW = KV * HD;
constexpr double kTheta = 100000.0; // SmolLM2 rope_theta
constexpr float kEps = 1e-5f;
constexpr int kBlockSize = 16;

#define LB __launch_bounds__(128, 4)

//===----------------------------------------------------------------------===//
// Host helpers (kernel_check_harness.cu).
//===----------------------------------------------------------------------===//
struct Row {
  std::string kernel, shape, dtype;
  double err_host, err_f64, tol;
  bool pass;
};
extern std::vector<Row> g_rows;

// Prints every recorded row and the count of failures.
void print_table();
// Prints the failed CUDA call, the table so far, and exits with status 2.
[[noreturn]] void cuda_fatal(const char* what, cudaError_t e, const char* file, int line);
#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) cuda_fatal(#x, e_, __FILE__, __LINE__);                \
  } while (0)
#define LAUNCHED()                                                                \
  do {                                                                            \
    CK(cudaGetLastError());                                                       \
    CK(cudaDeviceSynchronize());                                                  \
  } while (0)

// Seconds per call of `launch` (kernel launches on the default stream):
// three warm-up calls, then the mean over `iters` between two events.
template <class F> double seconds_per_launch(F&& launch, int iters = 20) {
  for (int i = 0; i < 3; ++i) launch();
  LAUNCHED();
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) launch();
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaGetLastError());
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms * 1e-3 / iters;
}

template <class T> struct DBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DBuf(size_t n_) : n(n_) { CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T))); }
  DBuf(const DBuf&) = delete;
  DBuf& operator=(const DBuf&) = delete;
  ~DBuf() { cudaFree(p); }
  void up(const T* h) { CK(cudaMemcpy(p, h, n * sizeof(T), cudaMemcpyHostToDevice)); }
  void up(const std::vector<T>& h) { up(h.data()); }
  std::vector<T> down() const {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

template <class A> struct act_traits;
template <> struct act_traits<__half> {
  static constexpr const char* name = "f16";
  static constexpr double tol = 5e-3;
  static __half from(float v) { return __float2half_rn(v); }
  static float to(__half v) { return __half2float(v); }
};
template <> struct act_traits<__nv_bfloat16> {
  static constexpr const char* name = "bf16";
  static constexpr double tol = 2e-2;
  static __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
  static float to(__nv_bfloat16 v) { return __bfloat162float(v); }
};

// n uniform values in [lo, hi), rounded to Act; f gets the rounded values.
template <class A>
void random_act(size_t n, std::mt19937& rng, float lo, float hi, std::vector<A>& a,
                std::vector<float>& f) {
  std::uniform_real_distribution<float> u(lo, hi);
  a.resize(n);
  f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = act_traits<A>::from(u(rng));
    f[i] = act_traits<A>::to(a[i]);
  }
}
template <class A> std::vector<float> to_float(const std::vector<A>& a) {
  std::vector<float> f(a.size());
  for (size_t i = 0; i < a.size(); ++i) f[i] = act_traits<A>::to(a[i]);
  return f;
}

// GGUF q4_1 / q8_0 blocks: random quants, f16 scales (and q4_1 mins) of
// random sign and magnitude in [0.005, 0.1] (RandomWeights in
// test/unit/kernels/host_kernels_test_util.h; divided by 8 for q8_0).
std::vector<uint8_t> random_weights(ref::WFmt f, int64_t rows, int64_t K, std::mt19937& rng);

struct Weight {
  int rows = 0, K = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> deq; // dequantized by the host format (ggml semantics)
  void* d = nullptr;
  void make(ref::WFmt f, int rows_, int K_, std::mt19937& rng) {
    rows = rows_;
    K = K_;
    bytes = random_weights(f, rows, K, rng);
    deq.resize(static_cast<size_t>(rows) * K);
    ref::dequant(f, bytes.data(), rows, K, deq.data());
    CK(cudaMalloc(&d, bytes.size()));
    CK(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  ~Weight() {
    if (d) cudaFree(d);
  }
};
struct ModelWeights {
  ref::WFmt fmt;
  const char* name;
  Weight qkv, o, gu, down, lm;
};

// Records a row; on failure prints where the errors are (width = columns).
void report(const std::string& kernel, const std::string& shape, const std::string& dtype,
            const std::vector<float>& got, const std::vector<float>& host, const std::vector<double>* f64,
            double tol, int width);

//===----------------------------------------------------------------------===//
// Device step_info from host arrays.
//===----------------------------------------------------------------------===//
struct HostStep {
  int T = 0, S = 1, num_logits = 0, max_blocks = 0, block_size = kBlockSize;
  std::vector<int> tokens, positions, query_starts, context_lens, block_tables, slot_mapping, logits_rows;
  ref::Step ref() const {
    ref::Step s;
    s.T = T;
    s.S = S;
    s.num_logits = num_logits;
    s.max_blocks = max_blocks;
    s.block_size = block_size;
    auto p = [](const std::vector<int>& v) { return v.empty() ? nullptr : v.data(); };
    s.tokens = p(tokens);
    s.positions = p(positions);
    s.query_starts = p(query_starts);
    s.context_lens = p(context_lens);
    s.block_tables = p(block_tables);
    s.slot_mapping = p(slot_mapping);
    s.logits_rows = p(logits_rows);
    return s;
  }
};
struct DevStep {
  int* d = nullptr;
  lc::step_info s{};
  explicit DevStep(const HostStep& h) {
    const std::vector<const std::vector<int>*> parts = {&h.tokens,       &h.positions,    &h.query_starts,
                                                        &h.context_lens, &h.block_tables, &h.slot_mapping,
                                                        &h.logits_rows};
    size_t total = 0;
    for (auto* v : parts) total += v->size();
    CK(cudaMalloc(&d, std::max<size_t>(total, 1) * sizeof(int)));
    std::vector<const int*> ptr;
    size_t off = 0;
    for (auto* v : parts) {
      if (!v->empty()) CK(cudaMemcpy(d + off, v->data(), v->size() * sizeof(int), cudaMemcpyHostToDevice));
      ptr.push_back(v->empty() ? nullptr : d + off);
      off += v->size();
    }
    s.num_tokens = h.T;
    s.num_seqs = h.S;
    s.num_logits = h.num_logits;
    s.max_blocks = h.max_blocks;
    s.block_size = h.block_size;
    s.tokens = ptr[0];
    s.positions = ptr[1];
    s.query_starts = ptr[2];
    s.context_lens = ptr[3];
    s.block_tables = ptr[4];
    s.slot_mapping = ptr[5];
    s.logits_rows = ptr[6];
  }
  DevStep(const DevStep&) = delete;
  ~DevStep() { cudaFree(d); }
};

//===----------------------------------------------------------------------===//
// double-precision references.
//===----------------------------------------------------------------------===//
// rms_norm over H = 576 columns (kernel_check_harness.cu).
std::vector<double> f64_rms_norm(const std::vector<float>& x, int T, const float* w);
inline std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }
inline double silu(double g) { return g / (1.0 + std::exp(-g)); }
inline float silu_f(float g) { return g / (1.0f + std::exp(-g)); }

//===----------------------------------------------------------------------===//
// The checks, in the order main runs them. Each draws from `rng` in a fixed
// order, so the inputs depend on every check run before it.
//===----------------------------------------------------------------------===//
// kernel_check_linear.cu: decode GEMV (T = 1, 8) and prefill gemm_mma
// (T = 64, 77, 512) of the five linear layers, then embed; F = lc::fmt::q4_1
// or q8_0, A = __half or __nv_bfloat16.
template <class F, class A> void linear_checks(const ModelWeights& W, std::mt19937& rng);
// kernel_check_norm_rope.cu: rms_norm, rope, rope_qkv_cache_write,
// kv_cache_write. dinv: the RoPE inverse frequencies on the device, inv on
// the host.
template <class A> void norm_rope_cache_checks(const double* dinv, const double* inv, std::mt19937& rng);
// kernel_check_attention.cu: paged_attention_decode (+ reduce) and
// paged_attention_prefill.
template <class A> void decode_attention_checks(std::mt19937& rng);
template <class A> void prefill_attention_checks(std::mt19937& rng);
// kernel_check_gemm_halves.cu: gemm_operand and gemm_epilogue.
template <class A> void gemm_half_checks(std::mt19937& rng);

// Timing, printed, not asserted: the decode GEMV of gate_up and lm_head for
// both weight sets vs cudaMemcpy D2D (kernel_check_linear.cu), and the
// prefill attention kernel on one T-token sequence (kernel_check_attention.cu).
void time_decode_gemv(const ModelWeights& w41, const ModelWeights& w80);
void time_prefill(int T);
void time_decode_attention(int B, int C);
