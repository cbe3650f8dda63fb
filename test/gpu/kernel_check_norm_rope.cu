//===- kernel_check_norm_rope.cu - rms_norm, RoPE, cache-write checks -----===//
//
// The element-wise kernels of test/gpu/kernel_check: rms_norm (f32 and bf16
// weight), rope (half, interleaved), rope_qkv_cache_write and kv_cache_write.
//
//===----------------------------------------------------------------------===//
#include "kernel_check.cuh"

//===----------------------------------------------------------------------===//
// Kernels: the wrappers the emitter would write (as in cuda_kernels_test.cpp).
//===----------------------------------------------------------------------===//
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

//===----------------------------------------------------------------------===//
// Norm, RoPE, cache writes.
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

template <class A> void norm_rope_cache_checks(const double* dinv, const double* inv, std::mt19937& rng) {
  check_rms_norm<A>(false, rng);
  check_rms_norm<A>(true, rng);
  check_rope<A, lc::rope_style::half>(dinv, inv, rng);
  check_rope<A, lc::rope_style::interleaved>(dinv, inv, rng);
  check_rope_qkv_cache<A, lc::rope_style::half>(dinv, inv, rng);
  check_rope_qkv_cache<A, lc::rope_style::interleaved>(dinv, inv, rng);
  check_kv_cache_write<A>(rng);
}
template void norm_rope_cache_checks<__half>(const double*, const double*, std::mt19937&);
template void norm_rope_cache_checks<__nv_bfloat16>(const double*, const double*, std::mt19937&);
