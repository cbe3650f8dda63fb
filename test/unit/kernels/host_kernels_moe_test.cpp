// The host MoE kernel (llmc_host_moe.h) against a double-precision mixture
// of experts written here; that it reads only the chosen experts' weights
// (the others lie on pages it may not read); and that a token's result is
// the same bits whatever else the step holds.
#include <sys/mman.h>
#include <unistd.h>

#include "host_kernels_test_util.h"

namespace llmc::host_test {
namespace {

constexpr int64_t E = 6, K = 2, H = 64, I = 96;

// The reference route of one token: softmax in double over E logits, the K
// largest (lower index first on ties), weights renormalized when `norm`.
// Returns the gap between the K-th chosen and the best other probability.
double RouteRef(const double* logits, bool norm, int64_t* chosen, double* weight) {
  double mx = logits[0], p[E], sum = 0;
  for (int64_t e = 1; e < E; ++e) mx = std::max(mx, logits[e]);
  for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(logits[e] - mx));
  bool taken[E] = {};
  double kept = 0;
  for (int64_t k = 0; k < K; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e)
      if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
    taken[best] = true;
    chosen[k] = best;
    kept += (weight[k] = p[best] / sum);
  }
  if (norm)
    for (int64_t k = 0; k < K; ++k) weight[k] /= kept;
  double other = 0;
  for (int64_t e = 0; e < E; ++e)
    if (!taken[e]) other = std::max(other, p[e] / sum);
  return weight[K - 1] * (norm ? kept : 1.0) - other;
}

template <class Fmt, bool Norm>
void CheckAgainstReference(int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x = RandomFloats(size_t(T * H), rng);
  // A router of wide spread: routes are decisive, rarely near a tie.
  std::vector<float> router = RandomFloats(size_t(E * H), rng, -0.5f, 0.5f);
  std::vector<uint8_t> gate = RandomWeights<Fmt>(E * I, H, rng);
  std::vector<uint8_t> up = RandomWeights<Fmt>(E * I, H, rng);
  std::vector<uint8_t> down = RandomWeights<Fmt>(E * H, I, rng);
  const std::vector<float> g = Reference<Fmt>(gate, E * I * H), u = Reference<Fmt>(up, E * I * H),
                           d = Reference<Fmt>(down, E * H * I);
  for (Pool pool : kAllPools) {
    Step step;
    MakeTokens(step, T);
    std::vector<float> y(size_t(T * H), kNaN);
    lh::moe<fmt::f32, Fmt, Fmt, Fmt, E, K, H, I, Norm>(step.Get(pool), x.data(), router.data(),
                                                       gate.data(), up.data(), down.data(),
                                                       y.data());
    Checker c(std::string(Fmt::name) + (Norm ? " renormalized, " : ", ") + PoolName(pool));
    int64_t near_ties = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x.data() + t * H;
      double logits[E];
      for (int64_t e = 0; e < E; ++e) {
        logits[e] = 0;
        for (int64_t j = 0; j < H; ++j) logits[e] += double(router[e * H + j]) * xt[j];
      }
      int64_t chosen[K];
      double weight[K];
      if (RouteRef(logits, Norm, chosen, weight) < 1e-4) {
        ++near_ties;  // f32 logits may pick the other expert
        continue;
      }
      std::vector<double> ref(H, 0.0), mag(H, 0.0);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t e = chosen[k];
        std::vector<double> h(I);
        double hmag = 0;
        for (int64_t n = 0; n < I; ++n) {
          double a = 0, b = 0;
          for (int64_t j = 0; j < H; ++j) {
            a += double(g[(e * I + n) * H + j]) * xt[j];
            b += double(u[(e * I + n) * H + j]) * xt[j];
          }
          h[n] = a / (1 + std::exp(-a)) * b;
          hmag = std::max(hmag, std::fabs(h[n]));
        }
        for (int64_t j = 0; j < H; ++j) {
          double o = 0, om = 0;
          for (int64_t n = 0; n < I; ++n) {
            o += double(d[(e * H + j) * I + n]) * h[n];
            om += std::fabs(double(d[(e * H + j) * I + n])) * (std::fabs(h[n]) + 1e-3 * hmag);
          }
          ref[j] += weight[k] * o;
          mag[j] += weight[k] * om;
        }
      }
      for (int64_t j = 0; j < H; ++j) c.Check(y[t * H + j], ref[j], 1e-5 * mag[j] + 1e-30, At(t, j));
    }
    EXPECT_LE(near_ties, T / 8) << "the router should rarely tie";
  }
}

TEST(HostMoETest, MatchesADoubleReference) {
  CheckAgainstReference<fmt::f32, true>(1, 1);
  CheckAgainstReference<fmt::f32, true>(13, 2);
  CheckAgainstReference<fmt::f32, false>(13, 3);
  CheckAgainstReference<fmt::q8_0, true>(9, 4);
  CheckAgainstReference<fmt::q4_1, true>(5, 5);
  CheckAgainstReference<fmt::bf16, false>(7, 6);
}

// Each token alone, then all together (in another order of pools): the same
// bits, the q8-activation path included.
template <bool Q8>
void CheckBatchInvariance() {
  std::mt19937 rng(7);
  const int64_t T = 11;
  std::vector<float> x = RandomFloats(size_t(T * H), rng);
  std::vector<float> router = RandomFloats(size_t(E * H), rng, -0.5f, 0.5f);
  std::vector<uint8_t> gate = RandomWeights<fmt::q8_0>(E * I, H, rng);
  std::vector<uint8_t> up = RandomWeights<fmt::q8_0>(E * I, H, rng);
  std::vector<uint8_t> down = RandomWeights<fmt::q8_0>(E * H, I, rng);
  auto run = [&](const float* xs, int64_t n, Pool pool) {
    Step step;
    MakeTokens(step, n);
    std::vector<float> y(size_t(n * H));
    lh::moe<fmt::f32, fmt::q8_0, fmt::q8_0, fmt::q8_0, E, K, H, I, true, Q8, Q8, Q8>(
        step.Get(pool), xs, router.data(), gate.data(), up.data(), down.data(), y.data());
    return y;
  };
  const std::vector<float> together = run(x.data(), T, Pool::kThreaded);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> alone = run(x.data() + t * H, 1, Pool::kNone);
    EXPECT_EQ(std::memcmp(alone.data(), together.data() + t * H, H * sizeof(float)), 0)
        << "token " << t << " differs alone" << (Q8 ? " (q8 activations)" : "");
  }
}

TEST(HostMoETest, ATokensResultDoesNotDependOnItsBatchMates) {
  CheckBatchInvariance<false>();
  CheckBatchInvariance<true>();
}

// Weights whose experts each lie on pages of their own; the experts no token
// chooses are made unreadable, so the kernel faults if it touches them.
class ExpertPages {
 public:
  ExpertPages(const std::vector<uint8_t>& stacked, int64_t per_expert) : per_(per_expert) {
    const int64_t page = sysconf(_SC_PAGESIZE);
    stride_ = (per_expert + page - 1) / page * page;
    base_ = static_cast<uint8_t*>(
        mmap(nullptr, size_t(stride_ * E), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    for (int64_t e = 0; e < E; ++e)
      std::memcpy(base_ + e * stride_, stacked.data() + e * per_expert, size_t(per_expert));
  }
  ~ExpertPages() { munmap(base_, size_t(stride_ * E)); }
  void Forbid(int64_t e) { EXPECT_EQ(mprotect(base_ + e * stride_, size_t(stride_), PROT_NONE), 0); }
  // The stack as the kernel reads it: expert e at e * per_expert bytes. So
  // that each expert starts a page, the bytes must fill whole pages.
  const uint8_t* data() const { return base_; }
  bool contiguous() const { return stride_ == per_; }

 private:
  int64_t per_, stride_;
  uint8_t* base_ = nullptr;
};

TEST(HostMoETest, ReadsOnlyTheChosenExperts) {
  // f32 rows of 1024 columns: one expert of 4 rows is 16 KiB, whole pages.
  constexpr int64_t H2 = 1024, I2 = 4;
  std::mt19937 rng(8);
  const int64_t T = 5;
  std::vector<float> x = RandomFloats(size_t(T * H2), rng, 0.1f, 1.0f);  // all positive
  // Experts 1 and 4 score sum(x) > 0, the others -sum(x): every token picks 1 and 4.
  std::vector<float> router(size_t(E * H2), -1.0f);
  for (int64_t j = 0; j < H2; ++j) router[1 * H2 + j] = router[4 * H2 + j] = 1.0f;
  std::vector<uint8_t> gate = RandomWeights<fmt::f32>(E * I2, H2, rng);
  std::vector<uint8_t> up = RandomWeights<fmt::f32>(E * I2, H2, rng);
  std::vector<uint8_t> down = RandomWeights<fmt::f32>(E * H2, I2, rng);
  ExpertPages g(gate, I2 * H2 * 4), u(up, I2 * H2 * 4), d(down, H2 * I2 * 4);
  ASSERT_TRUE(g.contiguous() && u.contiguous() && d.contiguous());
  std::vector<float> want(size_t(T * H2)), got(size_t(T * H2));
  Step step;
  MakeTokens(step, T);
  lh::moe<fmt::f32, fmt::f32, fmt::f32, fmt::f32, E, K, H2, I2, true>(
      step.Get(Pool::kNone), x.data(), router.data(), g.data(), u.data(), d.data(), want.data());
  for (int64_t e : {0, 2, 3, 5}) {
    g.Forbid(e);
    u.Forbid(e);
    d.Forbid(e);
  }
  for (Pool pool : kAllPools) {
    lh::moe<fmt::f32, fmt::f32, fmt::f32, fmt::f32, E, K, H2, I2, true>(
        step.Get(pool), x.data(), router.data(), g.data(), u.data(), d.data(), got.data());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << PoolName(pool);
  }
}

}  // namespace
}  // namespace llmc::host_test
