//===- kernel_check_linear.cu - GEMV / GEMM / embed checks ----------------===//
//
// The linear family of test/gpu/kernel_check: the decode GEMV and the prefill
// tensor-core GEMM with their fused prologues/epilogues, and embed (the
// kernels that read the quantized weights); then the decode GEMV timing.
//
//===----------------------------------------------------------------------===//
#include "kernel_check.cuh"

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

// The tensor-core GEMM in the tiles llmc-select-gemm-tiles picks: 64-token
// tiles up to 128 tokens, 128-token tiles past it (128 weight rows for the
// wide gate/up and LM head, 64 for the others). A fused norm runs first,
// into an A operand, as the emitter's `operand` launch does.
// Built with -DLLMC_CHECK_WGMMA for sm_90a (gpu-check.sh's second stage-1
// binary on a Hopper GPU), the same tiles on wgmma, as llmc-select-gemm-tiles
// picks them for sm_90a: warpgroups of 64 token rows, the narrow tile of
// decoded weights on one warpgroup over two token blocks.
#ifdef LLMC_CHECK_WGMMA
using SmallTile = lc::gemm_tile<64, 64, 4, 1, 4, 1, false, true>;
using WideTile = lc::gemm_tile<128, 128, 8, 1, 3, 1, false, true>;
using NarrowTile = lc::gemm_tile<128, 64, 4, 1, 4, 1, false, true>;
using SplitTile = lc::gemm_tile<64, 64, 4, 1, 4, 3, false, true>;
#else
using SmallTile = lc::gemm_tile<64, 64, 2, 2, 4>;
using WideTile = lc::gemm_tile<128, 128, 2, 4, 3>;
using NarrowTile = lc::gemm_tile<128, 64, 2, 2, 4>;
// Split K: down's K (1,536, 48 steps of 32) over 3 blocks of 16 steps per
// output tile, meeting in the ticketed reduction (gemm_split).
using SplitTile = lc::gemm_tile<64, 64, 2, 2, 4, 3>;
#endif
#define TILE_LB __launch_bounds__(Tile::Threads, Tile::Threads == 256 ? 2 : 3)
template <class A>
__global__ void LB gemm_norm_operand(int T, const A* x, const void* nw, A* a) {
  lc::gemm_operand<H, A>(T, nullptr, x, lc::rms_norm_prologue<H>{nw, kEps}, a);
}
template <class F, class A, class Tile>
__global__ void TILE_LB gemm_qkv(int T, const A* x, const void* w, A* y) {
  lc::gemm_mma<F, QKV, H, A, Tile>(T, nullptr, x, w, lc::store_epilogue<QKV, A>{y});
}
template <class F, class A, class Tile>
__global__ void TILE_LB gemm_o_residual(int T, const A* x, const void* w, const A* r, A* y) {
  lc::gemm_mma<F, H, Q, A, Tile>(T, nullptr, x, w, residual_epilogue<A, H>{r, y});
}
template <class F, class A, class Tile>
__global__ void TILE_LB gemm_gate_up_silu(int T, const A* x, const void* w, A* y) {
  lc::gemm_mma<F, I, H, A, Tile>(T, nullptr, x, w, lc::silu_mul_epilogue<I, A>{y});
}
template <class F, class A, class Tile>
__global__ void TILE_LB gemm_down_residual(int T, const A* x, const void* w, const A* r, A* y) {
  lc::gemm_mma<F, H, I, A, Tile>(T, nullptr, x, w, residual_epilogue<A, H>{r, y});
}
template <class F, class A, class Tile>
__global__ void TILE_LB gemm_down_residual_split(int T, const A* x, const void* w, const A* r, A* y,
                                                 float* part, int* tickets) {
  lc::gemm_mma<F, H, I, A, Tile>(T, nullptr, x, w, residual_epilogue<A, H>{r, y},
                                 lc::gemm_split{part, tickets});
}
template <class F, class A, class Tile>
__global__ void TILE_LB gemm_lm_head(lc::step_info s, const A* x, const void* w, float* l) {
  lc::gemm_mma<F, V, H, A, Tile>(s.num_logits, s.logits_rows, x, w, logits_epilogue<V>{l});
}
template <class Tile> static dim3 tile_grid(int nout, int P, int rows) {
  return dim3((rows + Tile::BM - 1) / Tile::BM, (nout + Tile::BN / P - 1) / (Tile::BN / P),
              Tile::KSplit);
}

template <class F, class A> __global__ void LB embed_k(lc::step_info s, const void* table, A* y) {
  lc::embed<F, V, H, A>(s, table, y);
}

//===----------------------------------------------------------------------===//
// double-precision reference.
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
  // The tensor-core GEMM's tile, as the emitter's launch conditions pick it.
  const bool large = (kind == Lin::lm_head ? rowsOut : T) > 128;
  // A fused norm: into the A operand first (the GEMM reads plain rows).
  DBuf<A> dop(norm && mma ? xa.size() : 1);
  if (norm && mma) {
    gemm_norm_operand<A><<<T, blk>>>(T, dx.p, dnw.p, dop.p);
    LAUNCHED();
  }
  const A* gx = norm && mma ? dop.p : dx.p;
  if (kind == Lin::lm_head) {
    DBuf<float> dl(static_cast<size_t>(rowsOut) * V);
    CK(cudaMemset(dl.p, 0xff, dl.n * sizeof(float))); // NaN: unwritten outputs fail
    if (mma && large)
      gemm_lm_head<F, A, WideTile><<<tile_grid<WideTile>(V, 1, rowsOut), WideTile::Threads>>>(ds.s, dx.p, w.d, dl.p);
    else if (mma)
      gemm_lm_head<F, A, SmallTile><<<tile_grid<SmallTile>(V, 1, rowsOut), SmallTile::Threads>>>(ds.s, dx.p, w.d, dl.p);
    else gemv_lm_head<F, A><<<gemv_grid(V), blk>>>(ds.s, dx.p, w.d, dnw.p, dl.p);
    LAUNCHED();
    got = dl.down();
  } else {
    DBuf<A> dy(static_cast<size_t>(T) * outW);
    CK(cudaMemset(dy.p, 0xff, dy.n * sizeof(A))); // NaN
    switch (kind) {
    case Lin::qkv_norm:
      if (mma && large) gemm_qkv<F, A, NarrowTile><<<tile_grid<NarrowTile>(QKV, 1, T), NarrowTile::Threads>>>(T, gx, w.d, dy.p);
      else if (mma) gemm_qkv<F, A, SmallTile><<<tile_grid<SmallTile>(QKV, 1, T), SmallTile::Threads>>>(T, gx, w.d, dy.p);
      else gemv_qkv_norm<F, A><<<gemv_grid(QKV), blk>>>(T, dx.p, w.d, dnw.p, dy.p);
      break;
    case Lin::o_residual:
      if (mma && large) gemm_o_residual<F, A, NarrowTile><<<tile_grid<NarrowTile>(H, 1, T), NarrowTile::Threads>>>(T, gx, w.d, dr.p, dy.p);
      else if (mma) gemm_o_residual<F, A, SmallTile><<<tile_grid<SmallTile>(H, 1, T), SmallTile::Threads>>>(T, gx, w.d, dr.p, dy.p);
      else gemv_o_residual<F, A><<<gemv_grid(H), blk>>>(T, dx.p, w.d, dr.p, dy.p);
      break;
    case Lin::gate_up_silu:
      if (mma && large) gemm_gate_up_silu<F, A, WideTile><<<tile_grid<WideTile>(I, 2, T), WideTile::Threads>>>(T, gx, w.d, dy.p);
      else if (mma) gemm_gate_up_silu<F, A, SmallTile><<<tile_grid<SmallTile>(I, 2, T), SmallTile::Threads>>>(T, gx, w.d, dy.p);
      else gemv_gate_up_silu<F, A><<<gemv_grid(I), blk>>>(T, dx.p, w.d, dnw.p, dy.p);
      break;
    case Lin::down_residual:
      if (mma && large) gemm_down_residual<F, A, NarrowTile><<<tile_grid<NarrowTile>(H, 1, T), NarrowTile::Threads>>>(T, gx, w.d, dr.p, dy.p);
      else if (mma) {
        // Split K, run twice: the second run finds the tickets the first
        // left at zero, or its reduction never runs and the NaNs stay.
        const dim3 g = tile_grid<SplitTile>(H, 1, T);
        DBuf<float> part(size_t(g.x) * g.y * g.z * SplitTile::BM * SplitTile::BN);
        DBuf<int> tickets(size_t(g.x) * g.y);
        CK(cudaMemset(tickets.p, 0, tickets.n * sizeof(int)));
        for (int run = 0; run < 2; ++run) {
          CK(cudaMemset(dy.p, 0xff, dy.n * sizeof(A)));
          gemm_down_residual_split<F, A, SplitTile><<<g, SplitTile::Threads>>>(T, gx, w.d, dr.p, dy.p, part.p, tickets.p);
          LAUNCHED();
        }
        for (int t : tickets.down())
          if (t != 0) { std::fprintf(stderr, "split-K ticket left at %d\n", t); std::exit(1); }
      }
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
  const bool split = mma && !large && kind == Lin::down_residual;
  report(std::string(mma ? (large ? "gemm_mma(128) " : split ? "gemm_mma(64, 3 splits) " : "gemm_mma(64) ") : "gemv ") + lin_name(kind), shape,
         std::string(tr::name) + "/" + W.name, got, host, &f64, tr::tol, outW);
}

// embed: rows of the [49152, 576] table; ids -1 and 49152 give zero rows.
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
  // Two blocks of one warp per token: the 72 groups of a row dealt over the
  // blocks and, past 64, a second trip.
  embed_k<F, A><<<dim3(T, 2), 32>>>(ds.s, W.lm.d, dy.p);
  LAUNCHED();
  report("embed", "T=37 ids incl. -1, 49152 [49152,576]", std::string(tr::name) + "/" + W.name,
         to_float(dy.down()), host, &f64, tr::tol, H);
}

template <class F, class A> void linear_checks(const ModelWeights& W, std::mt19937& rng) {
  for (int T : {1, 8})
    for (Lin k : {Lin::qkv_norm, Lin::o_residual, Lin::gate_up_silu, Lin::down_residual, Lin::lm_head,
                  Lin::t8_gate_up_silu})
      check_linear<F, A>(k, false, W, T, rng);
  for (int T : {64, 77, 512})
    for (Lin k : {Lin::qkv_norm, Lin::o_residual, Lin::gate_up_silu, Lin::down_residual, Lin::lm_head})
      check_linear<F, A>(k, true, W, T, rng);
  check_embed<F, A>(W, rng);
}

template void linear_checks<lc::fmt::q4_1, __half>(const ModelWeights&, std::mt19937&);
template void linear_checks<lc::fmt::q8_0, __half>(const ModelWeights&, std::mt19937&);
template void linear_checks<lc::fmt::q4_1, __nv_bfloat16>(const ModelWeights&, std::mt19937&);
template void linear_checks<lc::fmt::q8_0, __nv_bfloat16>(const ModelWeights&, std::mt19937&);

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

// The decode timing of main: gate_up and lm_head, q4_1 then q8_0.
void time_decode_gemv(const ModelWeights& w41, const ModelWeights& w80) {
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
  for (const ModelWeights* m : {&w41, &w80}) {
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
}
