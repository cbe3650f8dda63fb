// Host kernel tests, q8 activations: the rounding of activations to 8-bit
// blocks and linear/lm_head with integer dot products, for the 32-element
// block formats. See host_kernels_test_util.h for the references, the
// tolerances and the pools.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "host_kernels_test_util.h"

namespace {

using namespace llmc::host_test;

//===----------------------------------------------------------------------===//
// q8 activations (integer dot products) for the 32-element block formats
//===----------------------------------------------------------------------===//

// The rounding rule, written out independently: per 32 values, d = amax/127
// and q = round-half-even(x * 127 / amax).
struct TestQ8Row {
  std::vector<float> d, s;
  std::vector<int> q;
};
TestQ8Row QuantizeQ8(const float* x, int64_t k) {
  TestQ8Row r;
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::nearbyint(x[32 * b + i] * id));
      r.q.push_back(q);
      sum += q;
    }
    r.d.push_back(amax / 127.0f);
    r.s.push_back(amax / 127.0f * static_cast<float>(sum));
  }
  return r;
}

template <class Fmt>
class HostQ8Test : public ::testing::Test {};
using Q8Formats = ::testing::Types<fmt::q8_0, fmt::q4_0, fmt::q4_1, fmt::q5_0, fmt::q5_1>;
TYPED_TEST_SUITE(HostQ8Test, Q8Formats, FormatNames);

TEST(HostQ8Quantize, MatchesTheRoundingRule) {
  std::mt19937 rng(5);
  auto x = RandomFloats(32 * 6, rng, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) x[32 * 2 + i] = 0.0f;        // an all-zero block
  x[32 * 3 + 7] = 100.0f;                                    // one outlier
  for (int i = 0; i < 32; ++i) x[32 * 4 + i] = 0.5f * (i - 16) / 127.0f * 127.0f;  // ties
  std::vector<lh::block_q8> y(6);
  lh::detail::quantize_row_q8(x.data(), y.data(), 32 * 6);
  const TestQ8Row want = QuantizeQ8(x.data(), 32 * 6);
  for (int b = 0; b < 6; ++b) {
    EXPECT_FLOAT_EQ(y[b].d, want.d[b]) << "block " << b;
    EXPECT_NEAR(y[b].s, want.s[b], 1e-5 * std::fabs(want.s[b])) << "block " << b;
    for (int i = 0; i < 32; ++i) EXPECT_EQ(int(y[b].q[i]), want.q[32 * b + i]) << b << "," << i;
  }
}

// linear<..., Q8 = true> against the dequantized weights times the
// activations rounded by the rule above (the integer sums are exact; the
// tolerance covers f32 scales and accumulation).
TYPED_TEST(HostQ8Test, LinearMatchesQuantizedReference) {
  using Fmt = TypeParam;
  constexpr int64_t N = 37, K = 96;
  uint32_t seed = 700;
  for (int64_t T : {1, 3, 17})
    for (Pool p : kAllPools) {
      std::mt19937 rng(seed++);
      const auto w = RandomWeights<Fmt>(N, K, rng);
      const auto ref = Reference<Fmt>(w, N * K);
      const auto x = RandomFloats(T * K, rng);
      std::vector<float> y(T * N, kNaN);
      Step s;
      MakeTokens(s, T);
      lh::linear<Fmt, N, K, false, fmt::f32, float, true>(s.Get(p), x.data(), w.data(), nullptr,
                                                          y.data());
      Checker c(std::string("linear q8 ") + Fmt::name + " T=" + std::to_string(T) + " " +
                PoolName(p));
      for (int64_t t = 0; t < T; ++t) {
        const TestQ8Row xq = QuantizeQ8(x.data() + t * K, K);
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double xv = double(xq.q[k]) * xq.d[k / 32];
            want += double(ref[n * K + k]) * xv;
            mag += std::fabs(double(ref[n * K + k]) * xv);
          }
          c.Check(y[t * N + n], want, 1e-5 * mag, At(t, n));
        }
      }
      // And the rounding stays small against the exact product.
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          exact += double(ref[n * K + k]) * x[k];
          mag += std::fabs(double(ref[n * K + k]) * x[k]);
        }
        EXPECT_LE(std::fabs(y[n] - exact), 0.02 * mag) << Fmt::name << " row " << n;
      }
    }
}

TYPED_TEST(HostQ8Test, LmHeadMatchesQuantizedReference) {
  using Fmt = TypeParam;
  constexpr int64_t Hidden = 64, Vocab = 45;
  std::mt19937 rng(31);
  const auto w = RandomWeights<Fmt>(Vocab, Hidden, rng);
  const auto ref = Reference<Fmt>(w, Vocab * Hidden);
  const int64_t T = 5;
  const std::vector<int32_t> rows = {4, 0, -1, 2};
  for (Pool p : kAllPools) {
    const auto x = RandomFloats(T * Hidden, rng);
    Step s;
    MakeTokens(s, T);
    s.logits_rows = rows;
    std::vector<float> logits(rows.size() * Vocab, kNaN);
    lh::lm_head<Fmt, Vocab, Hidden, float, true>(s.Get(p), x.data(), w.data(), logits.data());
    Checker c(std::string("lm_head q8 ") + Fmt::name + " " + PoolName(p));
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool valid = rows[i] >= 0 && rows[i] < T;
      const TestQ8Row xq = QuantizeQ8(x.data() + (valid ? rows[i] : 0) * Hidden, Hidden);
      for (int64_t v = 0; v < Vocab; ++v) {
        double want = 0, mag = 0;
        for (int64_t k = 0; valid && k < Hidden; ++k) {
          const double xv = double(xq.q[k]) * xq.d[k / 32];
          want += double(ref[v * Hidden + k]) * xv;
          mag += std::fabs(double(ref[v * Hidden + k]) * xv);
        }
        c.Check(logits[i * Vocab + v], want, 1e-5 * mag, At(int64_t(i), v));
      }
    }
  }
}

}  // namespace
