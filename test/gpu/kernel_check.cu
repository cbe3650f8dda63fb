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
//===----------------------------------------------------------------------===//
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
// Kernels: the wrappers the emitter would write (as in cuda_kernels_test.cpp).
//===----------------------------------------------------------------------===//
template <class A, int N> struct residual_epilogue {
  static constexpr int kRows = 1;
  const A* res;
  A* y;
  __device__ static int row(int n, int) { return n; }
  __device__ void operator()(int t, int n, const float (&acc)[1]) const {
    const float t0 = acc[0];
    const float t1 = lc::to_float(res[(long long)t * N + n]);
    auto e0 = t0 + t1;
    y[(long long)t * N + n] = lc::from_float<A>(e0);
  }
};
template <int N> struct logits_epilogue {
  static constexpr int kRows = 1;
  float* logits;
  __device__ static int row(int n, int) { return n; }
  __device__ void operator()(int i, int n, const float (&acc)[1]) const {
    logits[(long long)i * N + n] = acc[0];
  }
};

template <class F, class A>
__global__ void LB gemv_qkv_norm(int T, const A* x, const void* w, const void* nw, A* y) {
  lc::gemv<F, QKV, H, 4, 4, A>(T, nullptr, x, w, lc::rms_norm_prologue<H>{nw, kEps},
                               lc::store_epilogue<QKV, A>{y});
}
template <class F, class A>
__global__ void LB gemv_o_residual(int T, const A* x, const void* w, const A* r, A* y) {
  lc::gemv<F, H, Q, 4, 4, A>(T, nullptr, x, w, lc::no_prologue{}, residual_epilogue<A, H>{r, y});
}
template <class F, class A>
__global__ void LB gemv_gate_up_silu(int T, const A* x, const void* w, const void* nw, A* y) {
  lc::gemv<F, I, H, 4, 4, A>(T, nullptr, x, w, lc::rms_norm_prologue<H>{nw, kEps},
                             lc::silu_mul_epilogue<I, A>{y});
}
template <class F, class A>
__global__ void LB gemv_down_residual(int T, const A* x, const void* w, const A* r, A* y) {
  lc::gemv<F, H, I, 4, 4, A>(T, nullptr, x, w, lc::no_prologue{}, residual_epilogue<A, H>{r, y});
}
template <class F, class A>
__global__ void LB gemv_lm_head(lc::step_info s, const A* x, const void* w, const void* nw, float* l) {
  lc::gemv<F, V, H, 4, 4, A>(s.num_logits, s.logits_rows, x, w, lc::rms_norm_prologue<H>{nw, kEps},
                             logits_epilogue<V>{l});
}
template <class F, class A>
__global__ void LB gemv_t8_gate_up_silu(int T, const A* x, const void* w, A* y) {
  lc::gemv<F, I, H, 8, 4, A>(T, nullptr, x, w, lc::no_prologue{}, lc::silu_mul_epilogue<I, A>{y});
}

template <class F, class A>
__global__ void LB gemm_qkv_norm(int T, const A* x, const void* w, const void* nw, A* y) {
  lc::gemm_mma<F, QKV, H, A>(T, nullptr, x, w, lc::rms_norm_prologue<H>{nw, kEps},
                             lc::store_epilogue<QKV, A>{y});
}
template <class F, class A>
__global__ void LB gemm_o_residual(int T, const A* x, const void* w, const A* r, A* y) {
  lc::gemm_mma<F, H, Q, A>(T, nullptr, x, w, lc::no_prologue{}, residual_epilogue<A, H>{r, y});
}
template <class F, class A>
__global__ void LB gemm_gate_up_silu(int T, const A* x, const void* w, const void* nw, A* y) {
  lc::gemm_mma<F, I, H, A>(T, nullptr, x, w, lc::rms_norm_prologue<H>{nw, kEps},
                           lc::silu_mul_epilogue<I, A>{y});
}
template <class F, class A>
__global__ void LB gemm_down_residual(int T, const A* x, const void* w, const A* r, A* y) {
  lc::gemm_mma<F, H, I, A>(T, nullptr, x, w, lc::no_prologue{}, residual_epilogue<A, H>{r, y});
}
template <class F, class A>
__global__ void LB gemm_lm_head(lc::step_info s, const A* x, const void* w, float* l) {
  lc::gemm_mma<F, V, H, A>(s.num_logits, s.logits_rows, x, w, lc::no_prologue{}, logits_epilogue<V>{l});
}

template <class A, class WF> __global__ void LB norm_rms(int T, const A* x, const void* w, A* y) {
  lc::rms_norm<H, WF, A, 128>(T, x, w, y, kEps);
}
template <class A, lc::rope_style S>
__global__ void LB rope_k(lc::step_info s, const A* x, A* y, const double* inv) {
  lc::rope<NH, HD, S, A>(s, x, y, inv);
}
template <class A, lc::rope_style S>
__global__ void LB rope_qkv_cache(lc::step_info s, const A* qkv, A* q, A* kc, A* vc, const double* inv) {
  lc::rope_qkv_cache_write<NH, KV, HD, S, A>(s, qkv, q, kc, vc, inv);
}
template <class A>
__global__ void LB cache_write(lc::step_info s, const A* k, const A* v, A* kc, A* vc) {
  lc::kv_cache_write<KV, HD, A>(s, k, v, kc, vc);
}
template <class A, int SplitKeys>
__global__ void LB attn_decode(lc::step_info s, const A* q, const A* kc, const A* vc, A* o, float* po,
                               float* pml, float scale, int window) {
  lc::paged_attention_decode<NH, KV, HD, A, SplitKeys, 4>(s, q, kc, vc, o, po, pml, scale, window);
}
template <class A> __global__ void LB attn_reduce(int splits, const float* po, const float* pml, A* o) {
  lc::paged_attention_reduce<NH, HD, A>(splits, po, pml, o);
}
template <class F, class A> __global__ void LB embed_k(lc::step_info s, const void* table, A* y) {
  lc::embed<F, V, H, A>(s, table, y);
}
// Flash-attention prefill: __launch_bounds__(128, 2) as the emitter's
// attn_prefill entry (head_dim 128 needs more than 128 registers).
template <class A, int Heads, int KvHeads, int HeadDim>
__global__ void __launch_bounds__(128, 2) attn_prefill(lc::step_info s, const A* q, const A* kc, const A* vc,
                                                       A* o, float scale, int window) {
  lc::paged_attention_prefill<Heads, KvHeads, HeadDim, A>(s, q, kc, vc, o, scale, window);
}
// The halves around a cuBLASLt GEMM, as the emitter's lt_pre / lt_epi entries.
template <class A, int K, class WF>
__global__ void LB operand_norm(int rows, const int* x_rows, const A* x, const void* nw, A* a) {
  const auto pro = lc::rms_norm_prologue<K, WF>{nw, kEps};
  lc::gemm_operand<K, A>(rows, x_rows, x, pro, a);
}
template <class A, int K> __global__ void LB operand_plain(int rows, const int* x_rows, const A* x, A* a) {
  lc::gemm_operand<K, A>(rows, x_rows, x, lc::no_prologue{}, a);
}
template <class A> __global__ void LB epilogue_store(int rows, const float* d, A* y) {
  const lc::store_epilogue<QKV, A> epi{y};
  lc::gemm_epilogue<QKV, QKV>(rows, d, epi);
}
template <class A> __global__ void LB epilogue_silu_mul(int rows, const float* d, A* y) {
  const lc::silu_mul_epilogue<I, A> epi{y};
  lc::gemm_epilogue<I, 2 * I>(rows, d, epi);
}

//===----------------------------------------------------------------------===//
// Host helpers.
//===----------------------------------------------------------------------===//
struct Row {
  std::string kernel, shape, dtype;
  double err_host, err_f64, tol;
  bool pass;
};
static std::vector<Row> g_rows;

static void print_table() {
  std::printf("\n%-34s %-44s %-11s %10s %10s %8s  %s\n", "kernel", "shape", "dtype", "err/host",
              "err/f64", "tol", "result");
  std::printf("%s\n", std::string(130, '-').c_str());
  int fails = 0;
  for (const Row& r : g_rows) {
    char f64[32];
    if (std::isnan(r.err_f64)) std::snprintf(f64, sizeof f64, "-");
    else std::snprintf(f64, sizeof f64, "%.2e", r.err_f64);
    std::printf("%-34s %-44s %-11s %10.2e %10s %8.0e  %s\n", r.kernel.c_str(), r.shape.c_str(),
                r.dtype.c_str(), r.err_host, f64, r.tol, r.pass ? "PASS" : "FAIL");
    fails += !r.pass;
  }
  std::printf("%s\n%zu checks, %d failed (err = max |gpu - ref| / max |ref| per output tensor)\n",
              std::string(130, '-').c_str(), g_rows.size(), fails);
}

[[noreturn]] static void cuda_fatal(const char* what, cudaError_t e, const char* file, int line) {
  std::fprintf(stderr, "\nCUDA ERROR: %s failed at %s:%d: %s (%s)\n", what, file, line,
               cudaGetErrorString(e), cudaGetErrorName(e));
  std::fprintf(stderr, "(the checks after the last table row did not run)\n");
  print_table();
  std::exit(2);
}
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
static void random_act(size_t n, std::mt19937& rng, float lo, float hi, std::vector<A>& a,
                       std::vector<float>& f) {
  std::uniform_real_distribution<float> u(lo, hi);
  a.resize(n);
  f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = act_traits<A>::from(u(rng));
    f[i] = act_traits<A>::to(a[i]);
  }
}
template <class A> static std::vector<float> to_float(const std::vector<A>& a) {
  std::vector<float> f(a.size());
  for (size_t i = 0; i < a.size(); ++i) f[i] = act_traits<A>::to(a[i]);
  return f;
}

static uint16_t f16_bits(float v) {
  const __half h = __float2half_rn(v);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// GGUF q4_1 / q8_0 blocks: random quants, f16 scales (and q4_1 mins) of
// random sign and magnitude in [0.005, 0.1] (host_kernels_test's
// RandomWeights; divided by 8 for q8_0).
static std::vector<uint8_t> random_weights(ref::WFmt f, int64_t rows, int64_t K, std::mt19937& rng) {
  const int bb = f == ref::WFmt::q4_1 ? 20 : 34;
  const size_t bytes = static_cast<size_t>(rows * (K / 32) * bb);
  std::vector<uint8_t> w(bytes);
  for (size_t i = 0; i < bytes; i += 4) {
    const uint32_t r = rng();
    std::memcpy(w.data() + i, &r, std::min<size_t>(4, bytes - i));
  }
  // q8_0 scales 8x smaller: |w| <= 1.6 as for q4_1 (with the RandomWeights
  // range, q8_0 weights reach +-12.7 and silu(g) * u overflows f16).
  const float div = f == ref::WFmt::q8_0 ? 8.0f : 1.0f;
  std::uniform_real_distribution<float> mag(0.005f / div, 0.1f / div);
  const int64_t blocks = rows * (K / 32);
  for (int64_t b = 0; b < blocks; ++b)
    for (int off = 0; off < (f == ref::WFmt::q4_1 ? 4 : 2); off += 2) {
      const float v = (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
      const uint16_t h = f16_bits(v);
      std::memcpy(w.data() + b * bb + off, &h, 2);
    }
  return w;
}

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

// Max |got - ref| / max |ref|; NaN or Inf in got gives +inf.
template <class R> static double rel_err(const std::vector<float>& got, const R* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::fabs(double(got[i]) - double(ref[i])));
    den = std::max(den, std::fabs(double(ref[i])));
  }
  return den > 0 ? num / den : num;
}

// Records a row; on failure prints where the errors are (width = columns).
static void report(const std::string& kernel, const std::string& shape, const std::string& dtype,
                   const std::vector<float>& got, const std::vector<float>& host,
                   const std::vector<double>* f64, double tol, int width) {
  const size_t n = got.size();
  if (host.size() != n || (f64 && f64->size() != n)) {
    std::printf("INTERNAL: size mismatch in %s\n", kernel.c_str());
    std::exit(3);
  }
  const double eh = rel_err(got, host.data(), n);
  const double ef = f64 ? rel_err(got, f64->data(), n) : NAN;
  const bool pass = eh <= tol && (!f64 || ef <= tol);
  g_rows.push_back({kernel, shape, dtype, eh, ef, tol, pass});
  if (f64) { // the two references must agree far below the tolerance
    const double hf = rel_err(host, f64->data(), n);
    if (!(hf <= tol / 4))
      std::printf("  HARNESS WARNING: %s %s: host kernel vs f64 reference differ by %.2e\n", kernel.c_str(),
                  shape.c_str(), hf);
  }
  std::printf("  %-34s %-44s %-11s err/host %.2e err/f64 %.2e  %s\n", kernel.c_str(), shape.c_str(),
              dtype.c_str(), eh, ef, pass ? "PASS" : "FAIL");
  if (pass) return;
  // Failure detail: count of bad elements, first few, bad rows and columns.
  double den = 0;
  for (size_t i = 0; i < n; ++i) den = std::max(den, std::fabs(double(host[i])));
  const double lim = tol * (den > 0 ? den : 1);
  size_t bad = 0;
  std::vector<int> bad_rows, bad_cols;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(got[i]) - double(host[i]));
    if (!(d <= lim)) {
      if (bad < 8)
        std::printf("      [t=%zu, n=%zu] gpu %.6g host %.6g%s\n", i / width, i % width, got[i], host[i],
                    f64 ? (" f64 " + std::to_string((*f64)[i])).c_str() : "");
      ++bad;
      const int r = static_cast<int>(i / width), c = static_cast<int>(i % width);
      if (bad_rows.empty() || bad_rows.back() != r) bad_rows.push_back(r);
      if (std::find(bad_cols.begin(), bad_cols.end(), c) == bad_cols.end() && bad_cols.size() < 4096)
        bad_cols.push_back(c);
    }
  }
  std::sort(bad_cols.begin(), bad_cols.end());
  bad_rows.erase(std::unique(bad_rows.begin(), bad_rows.end()), bad_rows.end());
  std::printf("      %zu of %zu elements off by more than tol * max|ref| (%.3g); %zu distinct rows, "
              "%zu distinct columns; rows:", bad, n, lim, bad_rows.size(), bad_cols.size());
  for (size_t i = 0; i < std::min<size_t>(bad_rows.size(), 12); ++i) std::printf(" %d", bad_rows[i]);
  std::printf("%s; columns:", bad_rows.size() > 12 ? " ..." : "");
  for (size_t i = 0; i < std::min<size_t>(bad_cols.size(), 16); ++i) std::printf(" %d", bad_cols[i]);
  std::printf("%s\n", bad_cols.size() > 16 ? " ..." : "");
}

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
// y[t, n] = sum_k x[t, k] W[n, k]; x in double, W dequantized f32.
static void f64_linear(const std::vector<double>& x, int T, const std::vector<float>& W, int N, int K,
                       std::vector<double>& y) {
  y.assign(static_cast<size_t>(T) * N, 0.0);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* w = W.data() + static_cast<size_t>(n) * K;
    for (int t = 0; t < T; ++t) {
      const double* xr = x.data() + static_cast<size_t>(t) * K;
      double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int k = 0; k < K; k += 4) {
        a0 += xr[k] * w[k];
        a1 += xr[k + 1] * w[k + 1];
        a2 += xr[k + 2] * w[k + 2];
        a3 += xr[k + 3] * w[k + 3];
      }
      y[static_cast<size_t>(t) * N + n] = (a0 + a1) + (a2 + a3);
    }
  }
}
static std::vector<double> f64_rms_norm(const std::vector<float>& x, int T, const float* w) {
  std::vector<double> y(static_cast<size_t>(T) * H);
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int k = 0; k < H; ++k) ss += double(x[t * H + k]) * x[t * H + k];
    const double r = 1.0 / std::sqrt(ss / H + double(kEps));
    for (int k = 0; k < H; ++k) y[t * H + k] = double(x[t * H + k]) * r * w[k];
  }
  return y;
}
static std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }
static double silu(double g) { return g / (1.0 + std::exp(-g)); }
static float silu_f(float g) { return g / (1.0f + std::exp(-g)); }

//===----------------------------------------------------------------------===//
// The linear family: decode GEMV and prefill tensor-core GEMM, with their
// fused prologues/epilogues.
//===----------------------------------------------------------------------===//
enum class Lin { qkv_norm, o_residual, gate_up_silu, down_residual, lm_head, t8_gate_up_silu };
static const char* lin_name(Lin k) {
  switch (k) {
  case Lin::qkv_norm: return "qkv_norm";
  case Lin::o_residual: return "o_residual";
  case Lin::gate_up_silu: return "gate_up_silu";
  case Lin::down_residual: return "down_residual";
  case Lin::lm_head: return "lm_head";
  case Lin::t8_gate_up_silu: return "t8_gate_up_silu";
  }
  return "?";
}

template <class F, class A>
static void check_linear(Lin kind, bool mma, const ModelWeights& W, int T, std::mt19937& rng) {
  using tr = act_traits<A>;
  const bool norm = kind == Lin::qkv_norm || kind == Lin::gate_up_silu || (kind == Lin::lm_head && !mma);
  const Weight& w = kind == Lin::qkv_norm ? W.qkv
                    : kind == Lin::o_residual ? W.o
                    : kind == Lin::down_residual ? W.down
                    : kind == Lin::lm_head ? W.lm
                                           : W.gu;
  const int K = w.K;
  const int outW = kind == Lin::qkv_norm ? QKV : (kind == Lin::gate_up_silu || kind == Lin::t8_gate_up_silu) ? I
                                       : kind == Lin::lm_head ? V : H;
  // Inputs.
  std::vector<A> xa, ra;
  std::vector<float> xf, rf;
  random_act<A>(static_cast<size_t>(T) * K, rng, -1.0f, 1.0f, xa, xf);
  random_act<A>(static_cast<size_t>(T) * H, rng, -1.0f, 1.0f, ra, rf);
  std::vector<float> nw(H);
  std::uniform_real_distribution<float> un(0.5f, 1.5f);
  for (float& v : nw) v = un(rng);
  HostStep hs;
  hs.T = T;
  if (kind == Lin::lm_head) {
    // A permuted subset of the rows (and a repeat) as logits_rows.
    std::vector<int> perm(T);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int M = T == 1 ? 1 : T <= 8 ? 3 : std::min(T, 80);
    hs.logits_rows.assign(perm.begin(), perm.begin() + std::min(M, T));
    if (T > 1) hs.logits_rows.push_back(hs.logits_rows[0]);
    hs.num_logits = static_cast<int>(hs.logits_rows.size());
  }
  const int rowsOut = kind == Lin::lm_head ? hs.num_logits : T;

  // Host-kernel reference (f32).
  const ref::Step rs = hs.ref();
  std::vector<float> xin = xf;
  std::vector<double> xin64 = to_double(xf);
  if (norm) {
    ref::rms_norm(false, rs, xf.data(), nw.data(), xin.data(), kEps);
    xin64 = f64_rms_norm(xf, T, nw.data());
  }
  std::vector<float> host(static_cast<size_t>(rowsOut) * outW);
  std::vector<double> f64(host.size());
  if (kind == Lin::lm_head) {
    ref::lm_head(W.fmt, rs, xin.data(), w.bytes.data(), host.data());
    std::vector<double> xs(static_cast<size_t>(rowsOut) * K), y;
    for (int i = 0; i < rowsOut; ++i)
      std::copy_n(xin64.data() + static_cast<size_t>(hs.logits_rows[i]) * K, K, xs.data() + static_cast<size_t>(i) * K);
    f64_linear(xs, rowsOut, w.deq, V, K, f64);
  } else {
    const int N = w.rows;
    std::vector<float> y(static_cast<size_t>(T) * N);
    if (!ref::linear(W.fmt, N, K, rs, xin.data(), w.bytes.data(), y.data())) {
      std::printf("INTERNAL: linear %dx%d not instantiated\n", N, K);
      std::exit(3);
    }
    std::vector<double> y64;
    f64_linear(xin64, T, w.deq, N, K, y64);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < outW; ++n) {
        const size_t o = static_cast<size_t>(t) * outW + n;
        if (kind == Lin::gate_up_silu || kind == Lin::t8_gate_up_silu) {
          host[o] = silu_f(y[t * N + n]) * y[t * N + n + I];
          f64[o] = silu(y64[t * N + n]) * y64[t * N + n + I];
        } else if (kind == Lin::o_residual || kind == Lin::down_residual) {
          host[o] = y[t * N + n] + rf[t * H + n];
          f64[o] = y64[t * N + n] + rf[t * H + n];
        } else {
          host[o] = y[t * N + n];
          f64[o] = y64[t * N + n];
        }
      }
  }

  // GPU.
  DBuf<A> dx(xa.size()), dr(ra.size());
  dx.up(xa);
  dr.up(ra);
  DBuf<float> dnw(H);
  dnw.up(nw);
  DevStep ds(hs);
  std::vector<float> got;
  const dim3 blk(128);
  auto gemv_grid = [](int nout) { return dim3((nout + 3) / 4); };
  auto mma_grid = [](int nout, int P, int rows) { return dim3((nout + 64 / P - 1) / (64 / P), (rows + 63) / 64); };
  if (kind == Lin::lm_head) {
    DBuf<float> dl(static_cast<size_t>(rowsOut) * V);
    CK(cudaMemset(dl.p, 0xff, dl.n * sizeof(float))); // NaN: unwritten outputs fail
    if (mma) gemm_lm_head<F, A><<<mma_grid(V, 1, rowsOut), blk>>>(ds.s, dx.p, w.d, dl.p);
    else gemv_lm_head<F, A><<<gemv_grid(V), blk>>>(ds.s, dx.p, w.d, dnw.p, dl.p);
    LAUNCHED();
    got = dl.down();
  } else {
    DBuf<A> dy(static_cast<size_t>(T) * outW);
    CK(cudaMemset(dy.p, 0xff, dy.n * sizeof(A))); // NaN
    switch (kind) {
    case Lin::qkv_norm:
      if (mma) gemm_qkv_norm<F, A><<<mma_grid(QKV, 1, T), blk>>>(T, dx.p, w.d, dnw.p, dy.p);
      else gemv_qkv_norm<F, A><<<gemv_grid(QKV), blk>>>(T, dx.p, w.d, dnw.p, dy.p);
      break;
    case Lin::o_residual:
      if (mma) gemm_o_residual<F, A><<<mma_grid(H, 1, T), blk>>>(T, dx.p, w.d, dr.p, dy.p);
      else gemv_o_residual<F, A><<<gemv_grid(H), blk>>>(T, dx.p, w.d, dr.p, dy.p);
      break;
    case Lin::gate_up_silu:
      if (mma) gemm_gate_up_silu<F, A><<<mma_grid(I, 2, T), blk>>>(T, dx.p, w.d, dnw.p, dy.p);
      else gemv_gate_up_silu<F, A><<<gemv_grid(I), blk>>>(T, dx.p, w.d, dnw.p, dy.p);
      break;
    case Lin::down_residual:
      if (mma) gemm_down_residual<F, A><<<mma_grid(H, 1, T), blk>>>(T, dx.p, w.d, dr.p, dy.p);
      else gemv_down_residual<F, A><<<gemv_grid(H), blk>>>(T, dx.p, w.d, dr.p, dy.p);
      break;
    case Lin::t8_gate_up_silu:
      gemv_t8_gate_up_silu<F, A><<<gemv_grid(I), blk>>>(T, dx.p, w.d, dy.p);
      break;
    default: break;
    }
    LAUNCHED();
    got = to_float(dy.down());
  }
  char shape[96];
  std::snprintf(shape, sizeof shape, "T=%d%s [%d,%d]x[%d,%d]%s", T,
                kind == Lin::lm_head ? (" rows=" + std::to_string(rowsOut)).c_str() : "",
                kind == Lin::lm_head ? rowsOut : T, K, w.rows, K,
                kind == Lin::t8_gate_up_silu ? " MaxT=8" : mma ? "" : " MaxT=4");
  report(std::string(mma ? "gemm_mma " : "gemv ") + lin_name(kind), shape,
         std::string(tr::name) + "/" + W.name, got, host, &f64, tr::tol, outW);
}

//===----------------------------------------------------------------------===//
// Norm, RoPE, cache writes, embedding.
//===----------------------------------------------------------------------===//
template <class A> static void check_rms_norm(bool bf16w, std::mt19937& rng) {
  using tr = act_traits<A>;
  const int T = 37;
  std::vector<A> xa;
  std::vector<float> xf;
  random_act<A>(static_cast<size_t>(T) * H, rng, -2.0f, 2.0f, xa, xf);
  std::vector<float> wf(H);
  std::uniform_real_distribution<float> un(0.5f, 1.5f);
  std::vector<uint16_t> wb(H);
  for (int i = 0; i < H; ++i) {
    wf[i] = un(rng);
    if (bf16w) {
      const __nv_bfloat16 b = __float2bfloat16_rn(wf[i]);
      std::memcpy(&wb[i], &b, 2);
      wf[i] = __bfloat162float(b);
    }
  }
  HostStep hs;
  hs.T = T;
  std::vector<float> host(xf.size());
  ref::rms_norm(bf16w, hs.ref(), xf.data(), bf16w ? static_cast<const void*>(wb.data()) : wf.data(),
                host.data(), kEps);
  std::vector<double> f64 = f64_rms_norm(xf, T, wf.data());
  DBuf<A> dx(xa.size()), dy(xa.size());
  dx.up(xa);
  DBuf<float> dwf(H);
  DBuf<uint16_t> dwb(H);
  dwf.up(wf);
  dwb.up(wb);
  if (bf16w) norm_rms<A, lc::fmt::bf16><<<T, 128>>>(T, dx.p, dwb.p, dy.p);
  else norm_rms<A, lc::fmt::f32><<<T, 128>>>(T, dx.p, dwf.p, dy.p);
  LAUNCHED();
  report("rms_norm", "T=37 hidden=576", std::string(tr::name) + "/w " + (bf16w ? "bf16" : "f32"),
         to_float(dy.down()), host, &f64, tr::tol, H);
}

static std::vector<int> rope_positions(int T, std::mt19937& rng) {
  std::vector<int> p = {0, 1, 2, 8191, 4095, 100};
  std::uniform_int_distribution<int> u(0, 8191);
  while (static_cast<int>(p.size()) < T) p.push_back(u(rng));
  p.resize(T);
  return p;
}
// Rotates `heads` heads of x (row stride ld, column offset off) in double.
static void f64_rope(int heads, bool inter, int T, const std::vector<int>& pos, const std::vector<float>& x,
                     int ld, int off, const double* inv, std::vector<double>& out /*[T, heads*64]*/) {
  out.assign(static_cast<size_t>(T) * heads * HD, 0.0);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < HD / 2; ++j) {
        const int ia = inter ? 2 * j : j, ib = inter ? 2 * j + 1 : j + HD / 2;
        const double ang = double(pos[t]) * inv[j], c = std::cos(ang), s = std::sin(ang);
        const double a = x[static_cast<size_t>(t) * ld + off + h * HD + ia];
        const double b = x[static_cast<size_t>(t) * ld + off + h * HD + ib];
        out[(static_cast<size_t>(t) * heads + h) * HD + ia] = a * c - b * s;
        out[(static_cast<size_t>(t) * heads + h) * HD + ib] = b * c + a * s;
      }
}

template <class A, lc::rope_style S> static void check_rope(const double* dinv, const double* inv, std::mt19937& rng) {
  using tr = act_traits<A>;
  const bool inter = S == lc::rope_style::interleaved;
  const int T = 37;
  std::vector<A> xa;
  std::vector<float> xf;
  random_act<A>(static_cast<size_t>(T) * Q, rng, -1.0f, 1.0f, xa, xf);
  HostStep hs;
  hs.T = T;
  hs.positions = rope_positions(T, rng);
  std::vector<float> host(xf.size());
  ref::rope(NH, inter, hs.ref(), xf.data(), host.data(), kTheta);
  std::vector<double> f64;
  f64_rope(NH, inter, T, hs.positions, xf, Q, 0, inv, f64);
  DBuf<A> dx(xa.size()), dy(xa.size());
  dx.up(xa);
  DevStep ds(hs);
  rope_k<A, S><<<T, 128>>>(ds.s, dx.p, dy.p, dinv);
  LAUNCHED();
  report(std::string("rope ") + (inter ? "interleaved" : "half"), "T=37 9x64 pos<=8191 theta=1e5",
         tr::name, to_float(dy.down()), host, &f64, tr::tol, Q);
}

template <class A, lc::rope_style S>
static void check_rope_qkv_cache(const double* dinv, const double* inv, std::mt19937& rng) {
  using tr = act_traits<A>;
  const bool inter = S == lc::rope_style::interleaved;
  const int T = 37, slots = 16 * kBlockSize;
  std::vector<A> qa, ka, va;
  std::vector<float> qf, kf, vf;
  random_act<A>(static_cast<size_t>(T) * QKV, rng, -1.0f, 1.0f, qa, qf);
  random_act<A>(static_cast<size_t>(slots) * KVW, rng, -1.0f, 1.0f, ka, kf); // prior cache contents
  random_act<A>(static_cast<size_t>(slots) * KVW, rng, -1.0f, 1.0f, va, vf);
  HostStep hs;
  hs.T = T;
  hs.positions = rope_positions(T, rng);
  std::vector<int> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int t = 0; t < T; ++t) hs.slot_mapping.push_back(t % 5 == 2 ? -1 : perm[t]);
  // Host: rope of the Q part and of the K part (contiguous copies), V copied.
  std::vector<float> xq(static_cast<size_t>(T) * Q), xk(static_cast<size_t>(T) * KVW);
  for (int t = 0; t < T; ++t) {
    std::copy_n(qf.data() + static_cast<size_t>(t) * QKV, Q, xq.data() + static_cast<size_t>(t) * Q);
    std::copy_n(qf.data() + static_cast<size_t>(t) * QKV + Q, KVW, xk.data() + static_cast<size_t>(t) * KVW);
  }
  std::vector<float> hq(xq.size()), hk(xk.size());
  ref::rope(NH, inter, hs.ref(), xq.data(), hq.data(), kTheta);
  ref::rope(KV, inter, hs.ref(), xk.data(), hk.data(), kTheta);
  std::vector<double> fq, fk;
  f64_rope(NH, inter, T, hs.positions, qf, QKV, 0, inv, fq);
  f64_rope(KV, inter, T, hs.positions, qf, QKV, Q, inv, fk);
  std::vector<float> hkc = kf, hvc = vf;
  std::vector<double> fkc = to_double(kf), fvc = to_double(vf);
  for (int t = 0; t < T; ++t) {
    const int s = hs.slot_mapping[t];
    if (s < 0) continue;
    for (int i = 0; i < KVW; ++i) {
      hkc[static_cast<size_t>(s) * KVW + i] = hk[static_cast<size_t>(t) * KVW + i];
      fkc[static_cast<size_t>(s) * KVW + i] = fk[static_cast<size_t>(t) * KVW + i];
      hvc[static_cast<size_t>(s) * KVW + i] = fvc[static_cast<size_t>(s) * KVW + i] =
          qf[static_cast<size_t>(t) * QKV + Q + KVW + i];
    }
  }
  DBuf<A> dqkv(qa.size()), dq(static_cast<size_t>(T) * Q), dkc(ka.size()), dvc(va.size());
  dqkv.up(qa);
  dkc.up(ka);
  dvc.up(va);
  CK(cudaMemset(dq.p, 0xff, dq.n * sizeof(A)));
  DevStep ds(hs);
  rope_qkv_cache<A, S><<<T, 128>>>(ds.s, dqkv.p, dq.p, dkc.p, dvc.p, dinv);
  LAUNCHED();
  const std::string name = std::string("rope_qkv_cache_write ") + (inter ? "interl." : "half");
  const char* shape = "T=37 qkv 960 -> q 576, cache 256 slots";
  report(name + " q_out", shape, tr::name, to_float(dq.down()), hq, &fq, tr::tol, Q);
  report(name + " kcache", shape, tr::name, to_float(dkc.down()), hkc, &fkc, tr::tol, KVW);
  report(name + " vcache", shape, tr::name, to_float(dvc.down()), hvc, &fvc, tr::tol, KVW);
}

template <class A> static void check_kv_cache_write(std::mt19937& rng) {
  using tr = act_traits<A>;
  const int T = 37, slots = 16 * kBlockSize;
  std::vector<A> ka, va, kca, vca;
  std::vector<float> kf, vf, kcf, vcf;
  random_act<A>(static_cast<size_t>(T) * KVW, rng, -1.0f, 1.0f, ka, kf);
  random_act<A>(static_cast<size_t>(T) * KVW, rng, -1.0f, 1.0f, va, vf);
  random_act<A>(static_cast<size_t>(slots) * KVW, rng, -1.0f, 1.0f, kca, kcf);
  random_act<A>(static_cast<size_t>(slots) * KVW, rng, -1.0f, 1.0f, vca, vcf);
  HostStep hs;
  hs.T = T;
  std::vector<int> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int t = 0; t < T; ++t) hs.slot_mapping.push_back(t % 6 == 1 ? -1 : perm[t]);
  for (int t = 0; t < T; ++t)
    if (hs.slot_mapping[t] >= 0)
      for (int i = 0; i < KVW; ++i) {
        kcf[static_cast<size_t>(hs.slot_mapping[t]) * KVW + i] = kf[static_cast<size_t>(t) * KVW + i];
        vcf[static_cast<size_t>(hs.slot_mapping[t]) * KVW + i] = vf[static_cast<size_t>(t) * KVW + i];
      }
  DBuf<A> dk(ka.size()), dv(va.size()), dkc(kca.size()), dvc(vca.size());
  dk.up(ka);
  dv.up(va);
  dkc.up(kca);
  dvc.up(vca);
  DevStep ds(hs);
  cache_write<A><<<T, 128>>>(ds.s, dk.p, dv.p, dkc.p, dvc.p);
  LAUNCHED();
  report("kv_cache_write kcache", "T=37 -> 256 slots (some -1)", tr::name, to_float(dkc.down()), kcf,
         nullptr, tr::tol, KVW);
  report("kv_cache_write vcache", "T=37 -> 256 slots (some -1)", tr::name, to_float(dvc.down()), vcf,
         nullptr, tr::tol, KVW);
}

template <class F, class A> static void check_embed(const ModelWeights& W, std::mt19937& rng) {
  using tr = act_traits<A>;
  const int T = 37;
  HostStep hs;
  hs.T = T;
  hs.tokens = {0, V - 1, -1, V, 12345};
  std::uniform_int_distribution<int> u(0, V - 1);
  while (static_cast<int>(hs.tokens.size()) < T) hs.tokens.push_back(u(rng));
  std::vector<float> host(static_cast<size_t>(T) * H);
  ref::embed(W.fmt, hs.ref(), W.lm.bytes.data(), host.data());
  std::vector<double> f64(host.size(), 0.0);
  for (int t = 0; t < T; ++t)
    if (hs.tokens[t] >= 0 && hs.tokens[t] < V)
      for (int k = 0; k < H; ++k) f64[t * H + k] = W.lm.deq[static_cast<size_t>(hs.tokens[t]) * H + k];
  DBuf<A> dy(host.size());
  CK(cudaMemset(dy.p, 0xff, dy.n * sizeof(A)));
  DevStep ds(hs);
  embed_k<F, A><<<T, 128>>>(ds.s, W.lm.d, dy.p);
  LAUNCHED();
  report("embed", "T=37 ids incl. -1, 49152 [49152,576]", std::string(tr::name) + "/" + W.name,
         to_float(dy.down()), host, &f64, tr::tol, H);
}

//===----------------------------------------------------------------------===//
// Paged attention, block_size 16: the decode kernel (+ split reduction) for
// GQA 9/3 and the flash-attention prefill kernel for 9/3 x 64 and 32/8 x 128.
// Sequence s has context ctx[s] and its last qlen[s] positions as queries.
//===----------------------------------------------------------------------===//
// The step: each sequence's blocks drawn from a shuffled pool of physical
// blocks (5 spare), its queries at positions ctx - qlen .. ctx - 1 with the
// slots of those positions. Returns the number of physical blocks.
static int attention_step(const std::vector<int>& ctx, const std::vector<int>& qlen, std::mt19937& rng,
                          HostStep& hs) {
  const int S = static_cast<int>(ctx.size());
  hs = HostStep{};
  hs.S = S;
  hs.block_size = kBlockSize;
  int total_blocks = 0, max_blocks = 0;
  for (int c : ctx) {
    const int nb = (c + kBlockSize - 1) / kBlockSize;
    total_blocks += nb;
    max_blocks = std::max(max_blocks, nb);
  }
  const int num_blocks = total_blocks + 5;
  std::vector<int> pool(num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng); // scattered physical blocks
  hs.max_blocks = max_blocks;
  hs.block_tables.assign(static_cast<size_t>(S) * max_blocks, 0);
  int next = 0, T = 0;
  hs.query_starts.push_back(0);
  for (int s = 0; s < S; ++s) {
    const int nb = (ctx[s] + kBlockSize - 1) / kBlockSize;
    for (int b = 0; b < nb; ++b) hs.block_tables[s * max_blocks + b] = pool[next++];
    for (int i = 0; i < qlen[s]; ++i) {
      const int pos = ctx[s] - qlen[s] + i;
      hs.positions.push_back(pos);
      hs.slot_mapping.push_back(hs.block_tables[s * max_blocks + pos / kBlockSize] * kBlockSize + pos % kBlockSize);
      ++T;
    }
    hs.query_starts.push_back(T);
    hs.context_lens.push_back(ctx[s]);
  }
  hs.T = T;
  return num_blocks;
}

// This step's K/V rows [T, kvw] = what the cache already holds at their slots
// (the GPU path writes them with a cache-write kernel first).
static void step_kv_rows(const HostStep& hs, const std::vector<float>& cache, int kvw, std::vector<float>& rows) {
  rows.resize(static_cast<size_t>(hs.T) * kvw);
  for (int t = 0; t < hs.T; ++t)
    std::copy_n(cache.data() + static_cast<size_t>(hs.slot_mapping[t]) * kvw, kvw,
                rows.data() + static_cast<size_t>(t) * kvw);
}

// The double-precision reference: token t of sequence s attends to cache
// positions first .. last (last = min(positions[t], ctx - 1), first = 0 or
// last - window + 1) of its kv head h / (heads / kv_heads), exact softmax.
// q [T, heads * hd], caches [blocks, 16, kv_heads, hd]. Returns the longest
// key range.
static int f64_attention(const HostStep& hs, int heads, int kv_heads, int hd, const std::vector<float>& qf,
                         const std::vector<float>& kcf, const std::vector<float>& vcf, double scale, int window,
                         std::vector<double>& out) {
  const int T = hs.T, qw = heads * hd, kvw = kv_heads * hd, mb = hs.max_blocks;
  out.assign(static_cast<size_t>(T) * qw, 0.0);
  std::vector<int> seq(T), first(T), last(T);
  int max_keys = 1;
  for (int t = 0; t < T; ++t) {
    int s = 0;
    while (hs.query_starts[s + 1] <= t) ++s;
    seq[t] = s;
    last[t] = std::min(hs.positions[t], hs.context_lens[s] - 1);
    first[t] = window > 0 ? std::max(0, last[t] - window + 1) : 0;
    max_keys = std::max(max_keys, last[t] - first[t] + 1);
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int t = 0; t < T; ++t) {
    const int s = seq[t];
    std::vector<double> sc(last[t] - first[t] + 1);
    for (int h = 0; h < heads; ++h) {
      const int g = h / (heads / kv_heads);
      double m = -1e300;
      for (int p = first[t]; p <= last[t]; ++p) {
        const size_t row = (static_cast<size_t>(hs.block_tables[s * mb + p / kBlockSize]) * kBlockSize +
                            p % kBlockSize) * kvw + g * hd;
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(qf[static_cast<size_t>(t) * qw + h * hd + i]) * kcf[row + i];
        sc[p - first[t]] = d * scale;
        m = std::max(m, sc[p - first[t]]);
      }
      double l = 0;
      for (double& v : sc) l += (v = std::exp(v - m));
      double* o = out.data() + static_cast<size_t>(t) * qw + h * hd;
      for (int p = first[t]; p <= last[t]; ++p) {
        const size_t row = (static_cast<size_t>(hs.block_tables[s * mb + p / kBlockSize]) * kBlockSize +
                            p % kBlockSize) * kvw + g * hd;
        for (int i = 0; i < hd; ++i) o[i] += sc[p - first[t]] / l * vcf[row + i];
      }
    }
  }
  return max_keys;
}

template <class A, int SplitKeys>
static void check_attention(const std::vector<int>& ctx, const std::vector<int>& qlen, int window,
                            std::mt19937& rng) {
  using tr = act_traits<A>;
  const int S = static_cast<int>(ctx.size());
  HostStep hs;
  const int num_blocks = attention_step(ctx, qlen, rng, hs);
  const int T = hs.T;
  const size_t cache_elems = static_cast<size_t>(num_blocks) * kBlockSize * KVW;
  std::vector<A> qa, kca, vca;
  std::vector<float> qf, kcf, vcf;
  random_act<A>(static_cast<size_t>(T) * Q, rng, -4.0f, 4.0f, qa, qf);
  random_act<A>(cache_elems, rng, -1.0f, 1.0f, kca, kcf);
  random_act<A>(cache_elems, rng, -1.0f, 1.0f, vca, vcf);
  std::vector<float> kf, vf;
  step_kv_rows(hs, kcf, KVW, kf);
  step_kv_rows(hs, vcf, KVW, vf);
  const float scale = 0.125f; // 1/sqrt(64)
  std::vector<float> host(static_cast<size_t>(T) * Q), hkc = kcf, hvc = vcf;
  ref::paged_attention(hs.ref(), qf.data(), kf.data(), vf.data(), hkc.data(), hvc.data(), host.data(), scale,
                       window);
  std::vector<double> f64;
  const int max_keys = f64_attention(hs, NH, KV, HD, qf, kcf, vcf, scale, window, f64);
  const int splits = (max_keys + SplitKeys - 1) / SplitKeys;
  DBuf<A> dq(qa.size()), dkc(kca.size()), dvc(vca.size()), dout(static_cast<size_t>(T) * Q);
  dq.up(qa);
  dkc.up(kca);
  dvc.up(vca);
  CK(cudaMemset(dout.p, 0xff, dout.n * sizeof(A)));
  DBuf<float> po(static_cast<size_t>(T) * NH * splits * HD), pml(static_cast<size_t>(T) * NH * splits * 2);
  DevStep ds(hs);
  attn_decode<A, SplitKeys><<<dim3(splits, KV, T), 128>>>(ds.s, dq.p, dkc.p, dvc.p, dout.p, po.p, pml.p, scale,
                                                           window);
  LAUNCHED();
  if (splits > 1) {
    attn_reduce<A><<<dim3(NH, T), HD>>>(splits, po.p, pml.p, dout.p);
    LAUNCHED();
  }
  std::string shape = "ctx{";
  for (int s = 0; s < S; ++s) shape += std::to_string(ctx[s]) + (s + 1 < S ? "," : "}");
  shape += " T=" + std::to_string(T) + " SK=" + std::to_string(SplitKeys) + " splits=" + std::to_string(splits);
  if (window > 0) shape += " win=" + std::to_string(window);
  report(splits > 1 ? "paged_attention_decode+reduce" : "paged_attention_decode (1 split)", shape, tr::name,
         to_float(dout.down()), host, &f64, tr::tol, Q);
}

// The prefill kernel on one step of several sequences: grid (cdiv(longest
// query, 64), Heads, S) as the emitter launches it, so that blocks past a
// shorter sequence's query exit; scale 1/sqrt(HeadDim).
template <class A, int Heads, int KvHeads, int HeadDim>
static void check_attention_prefill(const std::vector<int>& ctx, const std::vector<int>& qlen, int window,
                                    std::mt19937& rng) {
  using tr = act_traits<A>;
  constexpr int QW = Heads * HeadDim, KW = KvHeads * HeadDim;
  const int S = static_cast<int>(ctx.size());
  HostStep hs;
  const int num_blocks = attention_step(ctx, qlen, rng, hs);
  const int T = hs.T;
  const size_t cache_elems = static_cast<size_t>(num_blocks) * kBlockSize * KW;
  std::vector<A> qa, kca, vca;
  std::vector<float> qf, kcf, vcf;
  random_act<A>(static_cast<size_t>(T) * QW, rng, -4.0f, 4.0f, qa, qf);
  random_act<A>(cache_elems, rng, -1.0f, 1.0f, kca, kcf);
  random_act<A>(cache_elems, rng, -1.0f, 1.0f, vca, vcf);
  std::vector<float> kf, vf;
  step_kv_rows(hs, kcf, KW, kf);
  step_kv_rows(hs, vcf, KW, vf);
  const float scale = static_cast<float>(1.0 / std::sqrt(double(HeadDim)));
  std::vector<float> host(static_cast<size_t>(T) * QW), hkc = kcf, hvc = vcf;
  if (!ref::paged_attention(Heads, KvHeads, HeadDim, hs.ref(), qf.data(), kf.data(), vf.data(), hkc.data(),
                            hvc.data(), host.data(), scale, window)) {
    std::printf("INTERNAL: host paged_attention %d/%d x %d not instantiated\n", Heads, KvHeads, HeadDim);
    std::exit(3);
  }
  std::vector<double> f64;
  f64_attention(hs, Heads, KvHeads, HeadDim, qf, kcf, vcf, scale, window, f64);
  const int longest = *std::max_element(qlen.begin(), qlen.end());
  DBuf<A> dq(qa.size()), dkc(kca.size()), dvc(vca.size()), dout(static_cast<size_t>(T) * QW);
  dq.up(qa);
  dkc.up(kca);
  dvc.up(vca);
  CK(cudaMemset(dout.p, 0xff, dout.n * sizeof(A))); // NaN: unwritten rows fail
  DevStep ds(hs);
  attn_prefill<A, Heads, KvHeads, HeadDim><<<dim3((longest + 63) / 64, Heads, S), 128>>>(
      ds.s, dq.p, dkc.p, dvc.p, dout.p, scale, window);
  LAUNCHED();
  std::string shape = std::to_string(Heads) + "/" + std::to_string(KvHeads) + "x" + std::to_string(HeadDim) +
                      " q/ctx";
  for (int s = 0; s < S; ++s) shape += " " + std::to_string(qlen[s]) + "/" + std::to_string(ctx[s]);
  if (window > 0) shape += " win=" + std::to_string(window);
  report("paged_attention_prefill", shape, tr::name, to_float(dout.down()), host, &f64, tr::tol, QW);
}

//===----------------------------------------------------------------------===//
// The halves around a cuBLASLt GEMM: gemm_operand (A operand = activation
// rows through the prologue, gathered through x_rows) and gemm_epilogue (the
// epilogue functor over the f32 product D [rows, NW]).
//===----------------------------------------------------------------------===//
// x [37, K] in [-2, 2]; with `gather`, x_rows = 13 permuted rows and a repeat.
// norm: rms_norm_prologue<K, WF> with weights in [0.5, 1.5] (bf16-rounded for
// a bf16 WF); else no_prologue (a gathered copy).
template <class A, int K, class WF> static void check_gemm_operand(bool norm, bool gather, std::mt19937& rng) {
  using tr = act_traits<A>;
  constexpr bool bf16w = std::is_same<WF, lc::fmt::bf16>::value;
  const int T = 37;
  std::vector<A> xa;
  std::vector<float> xf;
  random_act<A>(static_cast<size_t>(T) * K, rng, -2.0f, 2.0f, xa, xf);
  std::vector<float> wf(K);
  std::vector<uint16_t> wb(K);
  std::uniform_real_distribution<float> un(0.5f, 1.5f);
  for (int i = 0; i < K; ++i) {
    wf[i] = un(rng);
    const __nv_bfloat16 b = __float2bfloat16_rn(wf[i]);
    std::memcpy(&wb[i], &b, 2);
    if (bf16w) wf[i] = __bfloat162float(b);
  }
  std::vector<int> x_rows;
  if (gather) {
    std::vector<int> perm(T);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    x_rows.assign(perm.begin(), perm.begin() + 13);
    x_rows.push_back(x_rows[0]);
  }
  const int rows = gather ? static_cast<int>(x_rows.size()) : T;
  auto src = [&](int i) { return gather ? x_rows[i] : i; };
  // Host kernel (rms_norm over all T rows, then the gather) and double.
  HostStep hs;
  hs.T = T;
  std::vector<float> normed = xf;
  if (norm && !ref::rms_norm(K, bf16w, hs.ref(), xf.data(), bf16w ? static_cast<const void*>(wb.data()) : wf.data(),
                             normed.data(), kEps)) {
    std::printf("INTERNAL: host rms_norm<%d> not instantiated\n", K);
    std::exit(3);
  }
  std::vector<float> host(static_cast<size_t>(rows) * K);
  std::vector<double> f64(host.size());
  for (int i = 0; i < rows; ++i) {
    const int t = src(i);
    double r = 1.0;
    if (norm) {
      double ss = 0;
      for (int k = 0; k < K; ++k) ss += double(xf[static_cast<size_t>(t) * K + k]) * xf[static_cast<size_t>(t) * K + k];
      r = 1.0 / std::sqrt(ss / K + double(kEps));
    }
    for (int k = 0; k < K; ++k) {
      host[static_cast<size_t>(i) * K + k] = normed[static_cast<size_t>(t) * K + k];
      f64[static_cast<size_t>(i) * K + k] = double(xf[static_cast<size_t>(t) * K + k]) * r * (norm ? wf[k] : 1.0f);
    }
  }
  DBuf<A> dx(xa.size()), da(host.size());
  dx.up(xa);
  DBuf<float> dwf(K);
  DBuf<uint16_t> dwb(K);
  dwf.up(wf);
  dwb.up(wb);
  DBuf<int> drows(x_rows.size());
  if (gather) drows.up(x_rows);
  CK(cudaMemset(da.p, 0xff, da.n * sizeof(A))); // NaN
  const int* xr = gather ? drows.p : nullptr;
  if (norm) operand_norm<A, K, WF><<<rows, 128>>>(rows, xr, dx.p, bf16w ? static_cast<const void*>(dwb.p) : dwf.p, da.p);
  else operand_plain<A, K><<<rows, 128>>>(rows, xr, dx.p, da.p);
  LAUNCHED();
  char shape[96];
  std::snprintf(shape, sizeof shape, "K=%d rows=%d%s", K, rows, gather ? " x_rows (13 of 37 + repeat)" : "");
  report(norm ? std::string("gemm_operand rms_norm w ") + (bf16w ? "bf16" : "f32") : "gemm_operand no_prologue",
         shape, tr::name, to_float(da.down()), host, &f64, tr::tol, K);
}

// D [77, NW] f32 in [-6, 6]; store_epilogue<960> over NW = 960 columns, or
// silu_mul_epilogue<1536> over NW = 3072 (gate columns n, up n + 1536).
template <class A> static void check_gemm_epilogue(bool silu_mul, std::mt19937& rng) {
  using tr = act_traits<A>;
  const int rows = 77, cols = silu_mul ? I : QKV, nw = silu_mul ? 2 * I : QKV;
  std::vector<float> d(static_cast<size_t>(rows) * nw);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  for (float& v : d) v = u(rng);
  std::vector<float> host(static_cast<size_t>(rows) * cols);
  std::vector<double> f64(host.size());
  for (int t = 0; t < rows; ++t)
    for (int n = 0; n < cols; ++n) {
      const size_t o = static_cast<size_t>(t) * cols + n, i = static_cast<size_t>(t) * nw + n;
      if (silu_mul) {
        host[o] = silu_f(d[i]) * d[i + I];
        f64[o] = silu(d[i]) * d[i + I];
      } else {
        host[o] = d[i];
        f64[o] = d[i];
      }
    }
  DBuf<float> dd(d.size());
  dd.up(d);
  DBuf<A> dy(host.size());
  CK(cudaMemset(dy.p, 0xff, dy.n * sizeof(A))); // NaN
  const dim3 grid((cols + 127) / 128, rows);
  if (silu_mul) epilogue_silu_mul<A><<<grid, 128>>>(rows, dd.p, dy.p);
  else epilogue_store<A><<<grid, 128>>>(rows, dd.p, dy.p);
  LAUNCHED();
  char shape[96];
  std::snprintf(shape, sizeof shape, "rows=%d D[%d,%d] f32 -> [%d,%d]", rows, rows, nw, rows, cols);
  report(silu_mul ? "gemm_epilogue silu_mul_epilogue" : "gemm_epilogue store_epilogue", shape, tr::name,
         to_float(dy.down()), host, &f64, tr::tol, cols);
}

//===----------------------------------------------------------------------===//
// Timing: decode GEMV (T = 1) over a weight, L2-cold by rotating over copies
// of it that together exceed 256 MiB, vs cudaMemcpy D2D.
//===----------------------------------------------------------------------===//
static double memcpy_bandwidth() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 20;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) CK(cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaFree(a);
  cudaFree(b);
  const double gbs = 2.0 * bytes * iters / (ms * 1e-3) / 1e9; // read + write
  std::printf("cudaMemcpy D2D 1 GiB: %.1f GB/s (read + write bytes / time)\n", gbs);
  return gbs;
}

template <class F, class Launch>
static void time_gemv(const char* what, const Weight& w, double copy_gbs, Launch launch) {
  const size_t bytes = w.bytes.size();
  const int copies = static_cast<int>(std::max<size_t>(2, ((size_t(256) << 20) + bytes - 1) / bytes));
  uint8_t* buf;
  CK(cudaMalloc(&buf, bytes * copies));
  for (int c = 0; c < copies; ++c) CK(cudaMemcpy(buf + c * bytes, w.d, bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto run = [&](int iters, bool rotate) {
    for (int i = 0; i < copies; ++i) launch(buf + (rotate ? i : 0) * bytes); // warm-up
    CK(cudaGetLastError());
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; ++i) launch(buf + (rotate ? i % copies : 0) * bytes);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1e-3 / iters;
  };
  const int iters = std::max(copies * 2, 400);
  const double cold = run(iters, true), hot = run(iters, false);
  std::printf("%-40s %7.2f MB  L2-cold (%3d copies): %8.2f us %7.1f GB/s = %5.1f %% of copy | "
              "same weight (L2-warm): %8.2f us %7.1f GB/s\n",
              what, bytes / 1e6, copies, cold * 1e6, bytes / cold / 1e9, 100.0 * bytes / cold / 1e9 / copy_gbs,
              hot * 1e6, bytes / hot / 1e9);
  cudaFree(buf);
}

// Timing: the flash-attention prefill kernel on one sequence of T tokens
// (Llama-3-8B shape 32/8 x 128, bf16, causal, block_size 16, shuffled
// blocks) as TFLOP/s of 4 * T^2/2 * HeadDim * Heads (QK^T and PV over the
// causal half). Printed, not asserted.
static void time_prefill(int T) {
  using A = __nv_bfloat16;
  constexpr int Heads = 32, KvHeads = 8, D = 128;
  std::mt19937 rng(4242);
  HostStep hs;
  const int num_blocks = attention_step({T}, {T}, rng, hs);
  const size_t cache_elems = static_cast<size_t>(num_blocks) * kBlockSize * KvHeads * D;
  std::vector<A> qa, kca, vca;
  std::vector<float> qf, kcf, vcf;
  random_act<A>(static_cast<size_t>(T) * Heads * D, rng, -4.0f, 4.0f, qa, qf);
  random_act<A>(cache_elems, rng, -1.0f, 1.0f, kca, kcf);
  random_act<A>(cache_elems, rng, -1.0f, 1.0f, vca, vcf);
  DBuf<A> dq(qa.size()), dkc(kca.size()), dvc(vca.size()), dout(qa.size());
  dq.up(qa);
  dkc.up(kca);
  dvc.up(vca);
  DevStep ds(hs);
  const float scale = static_cast<float>(1.0 / std::sqrt(double(D)));
  const dim3 grid((T + 63) / 64, Heads, 1);
  auto launch = [&] {
    attn_prefill<A, Heads, KvHeads, D><<<grid, 128>>>(ds.s, dq.p, dkc.p, dvc.p, dout.p, scale, 0);
  };
  for (int i = 0; i < 3; ++i) launch(); // warm-up
  LAUNCHED();
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int iters = 20;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) launch();
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaGetLastError());
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double sec = ms * 1e-3 / iters;
  const double flops = 4.0 * double(T) * T / 2.0 * D * Heads;
  std::printf("%-40s T=%d causal, grid %dx%dx1: %8.2f us %7.1f TFLOP/s (4 * T^2/2 * %d * %d flops)\n",
              "paged_attention_prefill 32/8x128 bf16", T, grid.x, grid.y, sec * 1e6, flops / sec / 1e12, D,
              Heads);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

//===----------------------------------------------------------------------===//
template <class F, class A> static void linear_checks(const ModelWeights& W, std::mt19937& rng) {
  for (int T : {1, 8})
    for (Lin k : {Lin::qkv_norm, Lin::o_residual, Lin::gate_up_silu, Lin::down_residual, Lin::lm_head,
                  Lin::t8_gate_up_silu})
      check_linear<F, A>(k, false, W, T, rng);
  for (int T : {64, 77, 512})
    for (Lin k : {Lin::qkv_norm, Lin::o_residual, Lin::gate_up_silu, Lin::down_residual, Lin::lm_head})
      check_linear<F, A>(k, true, W, T, rng);
  check_embed<F, A>(W, rng);
}

template <class A> static void other_checks(const double* dinv, const double* inv, std::mt19937& rng) {
  check_rms_norm<A>(false, rng);
  check_rms_norm<A>(true, rng);
  check_rope<A, lc::rope_style::half>(dinv, inv, rng);
  check_rope<A, lc::rope_style::interleaved>(dinv, inv, rng);
  check_rope_qkv_cache<A, lc::rope_style::half>(dinv, inv, rng);
  check_rope_qkv_cache<A, lc::rope_style::interleaved>(dinv, inv, rng);
  check_kv_cache_write<A>(rng);
  // Decode: one query per sequence, contexts 1, 17, 300, 2048 in one step.
  check_attention<A, 256>({1, 17, 300, 2048}, {1, 1, 1, 1}, 0, rng);
  check_attention<A, 128>({1, 17, 300, 2048}, {1, 1, 1, 1}, 0, rng);
  check_attention<A, 128>({1, 17, 300, 2048}, {1, 1, 1, 1}, 100, rng);
  check_attention<A, 256>({1, 17, 200}, {1, 1, 1}, 0, rng);  // one split: direct output
  check_attention<A, 256>({300, 33}, {13, 33}, 0, rng);      // prefill chunks through the decode kernel
}

// The flash-attention prefill kernel and the cuBLASLt GEMM halves.
template <class A> static void prefill_and_gemm_half_checks(std::mt19937& rng) {
  // One step: a decode token (1 query, 40 context), fresh prefills of 17 and
  // 64 tokens, positions 300..499 of a 500-token context and 204..332 of 333
  // (chunks after earlier ones: prior context, a first row off the 64 grid).
  const std::vector<int> ctx = {40, 17, 64, 500, 333}, qlen = {1, 17, 64, 200, 129};
  for (int window : {0, 100}) {
    check_attention_prefill<A, NH, KV, HD>(ctx, qlen, window, rng); // SmolLM2
    check_attention_prefill<A, 32, 8, 128>(ctx, qlen, window, rng); // Llama-3-8B
  }
  check_gemm_operand<A, H, lc::fmt::f32>(true, false, rng);
  check_gemm_operand<A, H, lc::fmt::f32>(true, true, rng);
  check_gemm_operand<A, 4096, lc::fmt::bf16>(true, false, rng);
  check_gemm_operand<A, 4096, lc::fmt::bf16>(true, true, rng);
  check_gemm_operand<A, H, lc::fmt::f32>(false, true, rng);
  check_gemm_epilogue<A>(false, rng);
  check_gemm_epilogue<A>(true, rng);
}

int main(int argc, char** argv) {
  bool timing = true;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--no-timing") timing = false;
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
  other_checks<__half>(dinv.p, inv, rng);
  other_checks<__nv_bfloat16>(dinv.p, inv, rng);
  prefill_and_gemm_half_checks<__half>(rng);
  prefill_and_gemm_half_checks<__nv_bfloat16>(rng);
  print_table();

  if (timing) {
    std::printf("\ntiming (decode, T = 1, f16 activations; bytes = weight bytes read once):\n");
    const double cbw = memcpy_bandwidth();
    DBuf<__half> x(H), y(I);
    std::vector<__half> xh(H, __float2half_rn(0.5f));
    x.up(xh);
    DBuf<float> nw(H), logits(V);
    nw.up(std::vector<float>(H, 1.0f));
    HostStep hs;
    hs.T = 1;
    hs.num_logits = 1;
    hs.logits_rows = {0};
    DevStep ds(hs);
    for (ModelWeights* m : {&w41, &w80}) {
      const std::string gu = std::string("gemv gate_up_silu+norm ") + m->name + " [3072,576]";
      const std::string lm = std::string("gemv lm_head+norm ") + m->name + " [49152,576]";
      if (m->fmt == ref::WFmt::q4_1) {
        time_gemv<lc::fmt::q4_1>(gu.c_str(), m->gu, cbw, [&](const void* w) {
          gemv_gate_up_silu<lc::fmt::q4_1, __half><<<(I + 3) / 4, 128>>>(1, x.p, w, nw.p, y.p);
        });
        time_gemv<lc::fmt::q4_1>(lm.c_str(), m->lm, cbw, [&](const void* w) {
          gemv_lm_head<lc::fmt::q4_1, __half><<<(V + 3) / 4, 128>>>(ds.s, x.p, w, nw.p, logits.p);
        });
      } else {
        time_gemv<lc::fmt::q8_0>(gu.c_str(), m->gu, cbw, [&](const void* w) {
          gemv_gate_up_silu<lc::fmt::q8_0, __half><<<(I + 3) / 4, 128>>>(1, x.p, w, nw.p, y.p);
        });
        time_gemv<lc::fmt::q8_0>(lm.c_str(), m->lm, cbw, [&](const void* w) {
          gemv_lm_head<lc::fmt::q8_0, __half><<<(V + 3) / 4, 128>>>(ds.s, x.p, w, nw.p, logits.p);
        });
      }
    }
    std::printf("\ntiming (prefill attention, one sequence, bf16):\n");
    time_prefill(2048);
  }
  int fails = 0;
  for (const Row& r : g_rows) fails += !r.pass;
  std::printf("\n%s\n", fails ? "RESULT: FAIL" : "RESULT: all checks passed");
  return fails ? 1 : 0;
}
