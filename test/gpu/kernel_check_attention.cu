//===- kernel_check_attention.cu - paged attention checks -----------------===//
//
// Paged attention in test/gpu/kernel_check: the decode kernel (its splits
// merged by their last block) and the flash-attention prefill kernel against the host kernel
// and a double-precision softmax, then the prefill kernel's timing.
//
//===----------------------------------------------------------------------===//
#include "kernel_check.cuh"

#include <memory>

//===----------------------------------------------------------------------===//
// Kernels: the wrappers the emitter would write (as in cuda_kernels_test.cpp).
//===----------------------------------------------------------------------===//
template <class A, int SplitKeys, int MaxSplits, bool Mma = false>
__global__ void __launch_bounds__(128, Mma ? 2 : 4)
    attn_decode(lc::step_info s, const A* q, const A* kc, const A* vc, A* o, float* scratch, float scale,
                int window) {
  const lc::attn_scratch sc = lc::attn_scratch_of<NH, HD>(scratch, s.num_tokens, gridDim.x);
  if constexpr (Mma)
    lc::paged_attention_decode_mma<NH, KV, HD, A, SplitKeys, 4, MaxSplits>(s, q, kc, vc, o, sc, scale, window);
  else
    lc::paged_attention_decode<NH, KV, HD, A, SplitKeys, 4, MaxSplits>(s, q, kc, vc, o, sc, scale, window);
}
// The 8B shape (32/8 x 128) as the emitter launches it, for the timing.
template <class A, bool Mma>
__global__ void __launch_bounds__(128, Mma ? 2 : 3)
    attn_decode_8b(lc::step_info s, const A* q, const A* kc, const A* vc, A* o, float* scratch, float scale) {
  const lc::attn_scratch sc = lc::attn_scratch_of<32, 128>(scratch, s.num_tokens, gridDim.x);
  if constexpr (Mma)
    lc::paged_attention_decode_mma<32, 8, 128, A, 64, 4, 32>(s, q, kc, vc, o, sc, scale, 0);
  else
    lc::paged_attention_decode<32, 8, 128, A, 64, 4, 32>(s, q, kc, vc, o, sc, scale, 0);
}
// Flash-attention prefill: __launch_bounds__(256, 1) as the emitter's
// attn_prefill entry (8 warps of 16 query rows; grid (Heads, cdiv(Q, 128), S)).
constexpr int kPrefillWarps = 8, kPrefillRows = 16 * kPrefillWarps;
template <class A, int Heads, int KvHeads, int HeadDim>
__global__ void __launch_bounds__(32 * kPrefillWarps, 1)
    attn_prefill(lc::step_info s, const A* q, const A* kc, const A* vc, A* o, float scale, int window) {
  lc::paged_attention_prefill<Heads, KvHeads, HeadDim, A, kPrefillWarps>(s, q, kc, vc, o, scale, window);
}

//===----------------------------------------------------------------------===//
// Paged attention, block_size 16: the decode kernel (splits merged in it) for
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

// MaxSplits > 0: the emitter's capped splits (grid min(splits, MaxSplits),
// a token's share of the keys widening past the cap). The splits merge in the last block of each (heads, token): the ticket counters
// start at zero, as the cache write leaves them, and the partials start as
// NaN garbage, which a merge reading a partial nobody wrote would show.
template <class A, int SplitKeys, int MaxSplits = 0, bool Mma = false>
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
  const int splits = std::min((max_keys + SplitKeys - 1) / SplitKeys, MaxSplits > 0 ? MaxSplits : 1 << 30);
  DBuf<A> dq(qa.size()), dkc(kca.size()), dvc(vca.size()), dout(static_cast<size_t>(T) * Q);
  dq.up(qa);
  dkc.up(kca);
  dvc.up(vca);
  CK(cudaMemset(dout.p, 0xff, dout.n * sizeof(A)));
  const size_t counters = (static_cast<size_t>(T) * NH + 3) / 4 * 4;
  DBuf<float> scratch(4 + counters + static_cast<size_t>(T) * NH * splits * (HD + 2));
  CK(cudaMemset(scratch.p, 0xff, scratch.n * sizeof(float)));
  CK(cudaMemset(scratch.p + 4, 0, counters * sizeof(float)));
  DevStep ds(hs);
  attn_decode<A, SplitKeys, MaxSplits, Mma><<<dim3(splits, KV, T), 128>>>(
      ds.s, dq.p, dkc.p, dvc.p, dout.p, scratch.p, scale, window);
  LAUNCHED();
  std::string shape = "ctx{";
  for (int s = 0; s < S; ++s) shape += std::to_string(ctx[s]) + (s + 1 < S ? "," : "}");
  shape += " T=" + std::to_string(T) + " SK=" + std::to_string(SplitKeys) + " splits=" + std::to_string(splits);
  if (MaxSplits > 0) shape += " max=" + std::to_string(MaxSplits);
  if (window > 0) shape += " win=" + std::to_string(window);
  const std::string name = Mma ? "paged_attention_decode_mma" : "paged_attention_decode";
  report(name + (splits > 1 ? " (merged splits)" : " (1 split)"), shape, tr::name, to_float(dout.down()), host, &f64,
         tr::tol, Q);
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
  attn_prefill<A, Heads, KvHeads, HeadDim>
      <<<dim3(Heads, (longest + kPrefillRows - 1) / kPrefillRows, S), 32 * kPrefillWarps>>>(
      ds.s, dq.p, dkc.p, dvc.p, dout.p, scale, window);
  LAUNCHED();
  std::string shape = std::to_string(Heads) + "/" + std::to_string(KvHeads) + "x" + std::to_string(HeadDim) +
                      " q/ctx";
  for (int s = 0; s < S; ++s) shape += " " + std::to_string(qlen[s]) + "/" + std::to_string(ctx[s]);
  if (window > 0) shape += " win=" + std::to_string(window);
  report("paged_attention_prefill", shape, tr::name, to_float(dout.down()), host, &f64, tr::tol, QW);
}

template <class A> void decode_attention_checks(std::mt19937& rng) {
  // Decode: one query per sequence, contexts 1, 17, 300, 2048 in one step.
  check_attention<A, 256>({1, 17, 300, 2048}, {1, 1, 1, 1}, 0, rng);
  check_attention<A, 128>({1, 17, 300, 2048}, {1, 1, 1, 1}, 0, rng);
  check_attention<A, 128>({1, 17, 300, 2048}, {1, 1, 1, 1}, 100, rng);
  check_attention<A, 256>({1, 17, 200}, {1, 1, 1}, 0, rng);  // one split: direct output
  check_attention<A, 256>({300, 33}, {13, 33}, 0, rng);      // prefill chunks through the decode kernel
  // The emitter's split choice: 64 keys per split up to 32 splits, wider past.
  check_attention<A, 64, 32>({1, 5, 64, 65, 300, 2048}, {1, 1, 1, 1, 1, 1}, 0, rng);
  check_attention<A, 64, 32>({1, 17, 3000, 4100}, {1, 1, 1, 1}, 0, rng);
  check_attention<A, 64, 32>({1, 17, 300, 4100}, {1, 1, 1, 1}, 1000, rng);
  check_attention<A, 64, 8>({40, 3000}, {9, 16}, 0, rng);
  // The tensor-core decode kernel: splits of 64 keys up to 4 (one 16-key
  // chunk per warp up to 256 keys, several past: 3000 keys give 750 a split),
  // windows, several queries per sequence.
  check_attention<A, 64, 4, true>({1, 15, 16, 17, 300, 3000}, {1, 1, 1, 1, 1, 1}, 0, rng);
  check_attention<A, 64, 4, true>({1, 17, 300, 4100}, {1, 1, 1, 1}, 1000, rng);
  check_attention<A, 64, 4, true>({40, 3000}, {9, 16}, 0, rng);
  check_attention<A, 64, 32, true>({1, 17, 3000, 4100}, {1, 1, 1, 1}, 0, rng);

}
template void decode_attention_checks<__half>(std::mt19937&);
template void decode_attention_checks<__nv_bfloat16>(std::mt19937&);

template <class A> void prefill_attention_checks(std::mt19937& rng) {
  // One step: a decode token (1 query, 40 context), fresh prefills of 17 and
  // 64 tokens, positions 300..499 of a 500-token context and 204..332 of 333
  // (chunks after earlier ones: prior context, a first row off the 64 grid).
  const std::vector<int> ctx = {40, 17, 64, 500, 333, 700}, qlen = {1, 17, 64, 200, 129, 300};
  for (int window : {0, 100}) {
    check_attention_prefill<A, NH, KV, HD>(ctx, qlen, window, rng); // SmolLM2
    check_attention_prefill<A, 32, 8, 128>(ctx, qlen, window, rng); // Llama-3-8B
  }
}
template void prefill_attention_checks<__half>(std::mt19937&);
template void prefill_attention_checks<__nv_bfloat16>(std::mt19937&);

// Timing: the flash-attention prefill kernel on one sequence of T tokens
// (Llama-3-8B shape 32/8 x 128, bf16, causal, block_size 16, shuffled
// blocks) as TFLOP/s of 4 * T^2/2 * HeadDim * Heads (QK^T and PV over the
// causal half). Printed, not asserted.
// The timings' inputs: one step of the 8B shape (32/8 x 128, bf16) whose
// sequence i has context ctx[i] and its last qlen[i] positions as queries,
// random Q and K/V in shuffled cache blocks, on the device.
struct TimingStep8b {
  using A = __nv_bfloat16;
  static constexpr int Heads = 32, KvHeads = 8, D = 128;
  HostStep hs;
  std::unique_ptr<DBuf<A>> q, kc, vc, out;
  std::unique_ptr<DevStep> ds;
  TimingStep8b(const std::vector<int>& ctx, const std::vector<int>& qlen, unsigned seed) {
    std::mt19937 rng(seed);
    const int num_blocks = attention_step(ctx, qlen, rng, hs);
    const size_t cache_elems = static_cast<size_t>(num_blocks) * kBlockSize * KvHeads * D;
    std::vector<A> qa, kca, vca;
    std::vector<float> qf, kcf, vcf;
    random_act<A>(static_cast<size_t>(hs.T) * Heads * D, rng, -4.0f, 4.0f, qa, qf);
    random_act<A>(cache_elems, rng, -1.0f, 1.0f, kca, kcf);
    random_act<A>(cache_elems, rng, -1.0f, 1.0f, vca, vcf);
    auto up = [](const std::vector<A>& h) {
      auto d = std::make_unique<DBuf<A>>(h.size());
      d->up(h);
      return d;
    };
    q = up(qa);
    kc = up(kca);
    vc = up(vca);
    out = std::make_unique<DBuf<A>>(qa.size());
    ds = std::make_unique<DevStep>(hs);
  }
};

// Timing: decode attention of B sequences of C tokens each (8B shape
// 32/8 x 128, bf16, one query per sequence), the FFMA kernel and the
// tensor-core one, as GB/s of the K/V bytes read (B * C * 8 * 128 * 2 * 2),
// with the emitter's most splits (64 keys each, 32 at most) and with the
// runtime's (the fewest whose blocks reach 3 per SM: SelectLaunches,
// kAttentionFillBlocksPerSm), which the report predicts faster once B * 8
// blocks fill the GPU. Printed, not asserted.
void time_decode_attention(int B, int C) {
  using A = TimingStep8b::A;
  constexpr int Heads = TimingStep8b::Heads, KvHeads = TimingStep8b::KvHeads, D = TimingStep8b::D;
  const TimingStep8b in(std::vector<int>(B, C), std::vector<int>(B, 1), 4243);
  const int most = std::min((C + 63) / 64, 32);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int fill = std::min(most, std::max(1, (3 * sms + KvHeads * B - 1) / (KvHeads * B)));
  const size_t counters = (static_cast<size_t>(B) * Heads + 3) / 4 * 4;
  DBuf<float> scratch(4 + counters + static_cast<size_t>(B) * Heads * most * (D + 2));
  CK(cudaMemset(scratch.p, 0, scratch.n * sizeof(float)));
  const float scale = static_cast<float>(1.0 / std::sqrt(double(D)));
  const double kv_bytes = double(B) * C * KvHeads * D * 2 * sizeof(A);
  std::vector<int> split_counts = {most};
  if (fill != most) split_counts.push_back(fill);
  for (int splits : split_counts)
  for (int mma = 0; mma < 2; ++mma) {
    auto launch = [&] {
      // The counters go back to zero after each launch (the last block's),
      // as between steps.
      if (mma)
        attn_decode_8b<A, true><<<dim3(splits, KvHeads, B), 128>>>(in.ds->s, in.q->p, in.kc->p, in.vc->p, in.out->p,
                                                                  scratch.p, scale);
      else
        attn_decode_8b<A, false><<<dim3(splits, KvHeads, B), 128>>>(in.ds->s, in.q->p, in.kc->p, in.vc->p, in.out->p,
                                                                   scratch.p, scale);
      CK(cudaMemset(scratch.p + 4, 0, counters * sizeof(float)));
    };
    const double sec = seconds_per_launch(launch);
    std::printf("%-40s B=%d C=%d, grid %dx8x%d: %8.2f us %7.1f GB/s of K/V (incl. a counter memset)\n",
                mma ? "paged_attention_decode_mma 32/8x128 bf16" : "paged_attention_decode 32/8x128 bf16", B,
                C, splits, B, sec * 1e6, kv_bytes / sec / 1e9);
  }
}

void time_prefill(int T) {
  using A = TimingStep8b::A;
  constexpr int Heads = TimingStep8b::Heads, KvHeads = TimingStep8b::KvHeads, D = TimingStep8b::D;
  const TimingStep8b in({T}, {T}, 4242);
  const float scale = static_cast<float>(1.0 / std::sqrt(double(D)));
  const dim3 grid(Heads, (T + kPrefillRows - 1) / kPrefillRows, 1);
  auto launch = [&] {
    attn_prefill<A, Heads, KvHeads, D>
        <<<grid, 32 * kPrefillWarps>>>(in.ds->s, in.q->p, in.kc->p, in.vc->p, in.out->p, scale, 0);
  };
  const double sec = seconds_per_launch(launch);
  const double flops = 4.0 * double(T) * T / 2.0 * D * Heads;
  std::printf("%-40s T=%d causal, grid %dx%dx1: %8.2f us %7.1f TFLOP/s (4 * T^2/2 * %d * %d flops)\n",
              "paged_attention_prefill 32/8x128 bf16", T, grid.x, grid.y, sec * 1e6, flops / sec / 1e12, D,
              Heads);
}
