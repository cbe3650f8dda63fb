//===- kernel_check_gemm_halves.cu - the halves around cuBLASLt -----------===//
//
// The two kernels around a cuBLASLt GEMM in test/gpu/kernel_check:
// gemm_operand (rms_norm prologue, x_rows gather) and gemm_epilogue
// (store / silu_mul over a random f32 D).
//
//===----------------------------------------------------------------------===//
#include "kernel_check.cuh"

//===----------------------------------------------------------------------===//
// Kernels: the wrappers the emitter would write (as in cuda_kernels_test.cpp).
//===----------------------------------------------------------------------===//
// The halves around a cuBLASLt GEMM, as the emitter's operand / lt_epi entries.
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

template <class A> void gemm_half_checks(std::mt19937& rng) {
  check_gemm_operand<A, H, lc::fmt::f32>(true, false, rng);
  check_gemm_operand<A, H, lc::fmt::f32>(true, true, rng);
  check_gemm_operand<A, 4096, lc::fmt::bf16>(true, false, rng);
  check_gemm_operand<A, 4096, lc::fmt::bf16>(true, true, rng);
  check_gemm_operand<A, H, lc::fmt::f32>(false, true, rng);
  check_gemm_epilogue<A>(false, rng);
  check_gemm_epilogue<A>(true, rng);
}
template void gemm_half_checks<__half>(std::mt19937&);
template void gemm_half_checks<__nv_bfloat16>(std::mt19937&);
