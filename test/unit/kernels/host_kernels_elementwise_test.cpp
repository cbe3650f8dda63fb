// Host kernel tests, elementwise kernels (silu, gelu, mul, add, silu_mul)
// against their formulas, and parallel_for itself. See
// host_kernels_test_util.h for the references, the tolerances and the pools.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "host_kernels_test_util.h"

namespace {

using namespace llmc::host_test;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Inputs in [-12, 12] with a few extremes.
std::vector<float> ElementwiseInput(int64_t n, std::mt19937& rng) {
  auto x = RandomFloats(n, rng, -12.0f, 12.0f);
  const float extremes[] = {-100.0f, 100.0f, -88.5f, 88.5f, -87.0f, 1e-6f, -1e-6f, 30.0f, -30.0f};
  for (size_t i = 0; i < std::size(extremes) && i < x.size(); ++i) x[i * 7 % x.size()] = extremes[i];
  return x;
}

double RefSigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

template <int64_t N>
void CheckElementwise(int64_t T, Pool p, bool in_place, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto a = ElementwiseInput(T * N, rng);
  const auto b = RandomFloats(T * N, rng, -3.0f, 3.0f);
  Step s;
  MakeTokens(s, T);
  const auto* st = s.Get(p);
  const std::string suffix = " N=" + std::to_string(N) + " T=" + std::to_string(T) + " " +
                             PoolName(p) + (in_place ? " in place" : "");
  auto run = [&](const char* name, auto kernel, auto ref) {
    std::vector<float> y = in_place ? a : std::vector<float>(T * N, kNaN);
    kernel(in_place ? y.data() : a.data(), y.data());
    Checker c(name + suffix);
    for (int64_t i = 0; i < T * N; ++i) {
      const double want = ref(double(a[i]), double(b[i]));
      c.Check(y[i], want, 1e-5 * std::fabs(want) + 1e-30, At(i / N, i % N));
    }
  };
  run("silu", [&](const float* x, float* y) { lh::silu<N>(st, x, y); },
      [](double x, double) { return x * RefSigmoid(x); });
  run("gelu_erf", [&](const float* x, float* y) { lh::gelu<N, lh::gelu_approx::erf>(st, x, y); },
      [](double x, double) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
  // 0.5 (1 + tanh(u)) computed as sigmoid(2u), which is exact and avoids the
  // cancellation of 1 + tanh(u) for negative u.
  run("gelu_tanh", [&](const float* x, float* y) { lh::gelu<N, lh::gelu_approx::tanh>(st, x, y); },
      [](double x, double) {
        const double u = std::sqrt(2.0 / std::acos(-1.0)) * (x + 0.044715 * x * x * x);
        return x * RefSigmoid(2 * u);
      });
  run("mul", [&](const float* x, float* y) { lh::mul<N>(st, x, b.data(), y); },
      [](double x, double y) { return x * y; });
  run("add", [&](const float* x, float* y) { lh::add<N>(st, x, b.data(), y); },
      [](double x, double y) { return x + y; });
  run("silu_mul", [&](const float* x, float* y) { lh::silu_mul<N>(st, x, b.data(), y); },
      [](double x, double y) { return x * RefSigmoid(x) * y; });
}

TEST(HostElementwiseTest, MatchesFormulas) {
  uint32_t seed = 5000;
  for (Pool p : kAllPools)
    for (bool in_place : {false, true}) {
      CheckElementwise<100>(1, p, in_place, seed++);
      CheckElementwise<100>(3, p, in_place, seed++);
      CheckElementwise<4096>(17, p, in_place, seed++);  // above the parallel threshold
    }
}

//===----------------------------------------------------------------------===//
// parallel_for
//===----------------------------------------------------------------------===//

TEST(HostParallelForTest, CoversTheRangeOnce) {
  for (Pool p : kAllPools)
    for (int64_t n : {0, 1, 7, 1000})
      for (int64_t grain : {0, 1, 3, 64, 5000}) {
        Step s;
        std::vector<std::atomic<int>> hits(n);
        for (auto& h : hits) h = 0;
        std::atomic<int> calls{0};
        lh::parallel_for(s.Get(p), n, grain, [&](int64_t b, int64_t e) {
          ++calls;
          EXPECT_LT(b, e);
          for (int64_t i = b; i < e; ++i) ++hits[i];
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << PoolName(p) << " n=" << n << " grain=" << grain;
        if (n == 0) {
          EXPECT_EQ(calls.load(), 0);
        } else if (p == Pool::kNone || n <= std::max<int64_t>(grain, 1)) {
          EXPECT_EQ(calls.load(), 1);
        }
      }
}

TEST(HostParallelForTest, ReportsTheCodePath) {
#ifdef LLMC_HOST_FORCE_SCALAR
  EXPECT_FALSE(lh::kSimd);
#else
  // host_kernel_tests is built with -march=x86-64-v3.
  EXPECT_TRUE(lh::kSimd);
#endif
}

}  // namespace
