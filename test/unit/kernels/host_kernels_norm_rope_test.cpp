// Host kernel tests, norms and RoPE: rms_norm, layer_norm and rope (every
// scaling, both styles) against their formulas. See host_kernels_test_util.h
// for the references, the tolerances and the pools.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "host_kernels_test_util.h"

namespace {

using namespace llmc::host_test;

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

template <int64_t H, class WFmt>
void CheckRmsNorm(int64_t T, Pool p, bool in_place, uint32_t seed, float amp = 1.0f) {
  std::mt19937 rng(seed);
  const auto w = RandomWeights<WFmt>(1, H, rng);
  const auto wref = Reference<WFmt>(w, H);
  const auto x = RandomFloats(T * H, rng, -3.0f * amp, 2.0f * amp);
  std::vector<float> out = in_place ? x : std::vector<float>(T * H, kNaN);
  Step s;
  MakeTokens(s, T);
  const double eps = 1e-5;
  lh::rms_norm<H, WFmt>(s.Get(p), in_place ? out.data() : x.data(), w.data(), out.data(), eps);
  Checker c("rms_norm H=" + std::to_string(H) + " " + WFmt::name + " T=" + std::to_string(T) +
            " " + PoolName(p));
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(x[t * H + i]) * x[t * H + i];
    const double r = 1.0 / std::sqrt(ss / H + eps);
    for (int64_t i = 0; i < H; ++i) {
      const double want = double(x[t * H + i]) * r * wref[i];
      c.Check(out[t * H + i], want, 1e-5 * std::fabs(want) + 1e-30, At(t, i));
    }
  }
}

TEST(HostNormTest, RmsNormMatchesReference) {
  uint32_t seed = 700;
  for (Pool p : kAllPools)
    for (int64_t T : {1, 3, 17, 40}) {
      CheckRmsNorm<576, fmt::f32>(T, p, false, seed++);
      CheckRmsNorm<576, fmt::f16>(T, p, true, seed++);
      CheckRmsNorm<100, fmt::bf16>(T, p, false, seed++);
      CheckRmsNorm<1030, fmt::f32>(T, p, true, seed++);
      // Inputs so small that eps changes the result by ~50%.
      CheckRmsNorm<64, fmt::f32>(T, p, false, seed++, 2e-3f);
    }
}

template <int64_t H, bool HasBias, class WFmt>
void CheckLayerNorm(int64_t T, Pool p, bool in_place, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  const auto w = RandomWeights<WFmt>(1, H, rng);
  const auto b = RandomWeights<WFmt>(1, H, rng);
  const auto wref = Reference<WFmt>(w, H);
  const auto bref = Reference<WFmt>(b, H);
  const auto x = RandomFloats(T * H, rng, lo, hi);
  std::vector<float> out = in_place ? x : std::vector<float>(T * H, kNaN);
  Step s;
  MakeTokens(s, T);
  const double eps = 1e-5;
  lh::layer_norm<H, HasBias, WFmt>(s.Get(p), in_place ? out.data() : x.data(), w.data(),
                                   HasBias ? b.data() : nullptr, out.data(), eps);
  Checker c("layer_norm H=" + std::to_string(H) + " " + WFmt::name + " T=" + std::to_string(T) +
            " " + PoolName(p));
  for (int64_t t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < H; ++i) mean += x[t * H + i];
    mean /= H;
    for (int64_t i = 0; i < H; ++i) var += (x[t * H + i] - mean) * (x[t * H + i] - mean);
    const double r = 1.0 / std::sqrt(var / H + eps);
    for (int64_t i = 0; i < H; ++i) {
      const double bi = HasBias ? bref[i] : 0.0;
      const double want = (x[t * H + i] - mean) * r * wref[i] + bi;
      // (x - mean) is rounded in f32: the error scales with |x| + |mean|.
      const double tol =
          1e-5 * ((std::fabs(x[t * H + i]) + std::fabs(mean)) * r * std::fabs(wref[i]) +
                  std::fabs(bi));
      c.Check(out[t * H + i], want, tol, At(t, i));
    }
  }
}

TEST(HostNormTest, LayerNormMatchesReference) {
  uint32_t seed = 800;
  for (Pool p : kAllPools)
    for (int64_t T : {1, 3, 17}) {
      // Non-zero means; in the first two a spread so small that eps matters.
      CheckLayerNorm<768, true, fmt::f32>(T, p, false, seed++, 0.995f, 1.005f);
      CheckLayerNorm<768, false, fmt::f32>(T, p, true, seed++, 0.995f, 1.005f);
      CheckLayerNorm<50, true, fmt::bf16>(T, p, false, seed++, -1.0f, 3.0f);
      CheckLayerNorm<50, true, fmt::f16>(T, p, true, seed++, -1.0f, 3.0f);
    }
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// Inverse frequencies from the formulas (Hugging Face's
// _compute_default/_linear/_llama3_parameters, llama.cpp's freq_factors).
std::vector<double> RefInvFreq(int64_t head_dim, double theta, const lh::rope_scaling& sc,
                               const std::vector<float>& factors) {
  const double pi = std::acos(-1.0);
  std::vector<double> inv(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
    if (sc.kind == lh::rope_scaling_kind::linear) f = f / sc.factor;
    if (sc.kind == lh::rope_scaling_kind::llama3) {
      const double low_wavelen = sc.original_max_position / sc.low_freq_factor;
      const double high_wavelen = sc.original_max_position / sc.high_freq_factor;
      const double wavelen = 2 * pi / f;
      const double scaled = wavelen > low_wavelen ? f / sc.factor : f;
      const double smooth = (sc.original_max_position / wavelen - sc.low_freq_factor) /
                            (sc.high_freq_factor - sc.low_freq_factor);
      const double smoothed = (1 - smooth) * scaled / sc.factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
    if (!factors.empty()) f /= factors[i];
    inv[i] = f;
  }
  return inv;
}

template <int64_t Heads, int64_t D, lh::rope_style Style>
void CheckRope(const lh::rope_scaling& sc, bool use_factors, bool in_place, Pool p, uint32_t seed,
               int32_t shift = 0, double theta = 500000.0) {
  std::mt19937 rng(seed);
  constexpr int64_t W = Heads * D, T = 13;
  std::vector<float> factors;
  if (use_factors) factors = RandomFloats(D / 2, rng, 1.0f, 8.0f);
  const auto x = RandomFloats(T * W, rng);
  Step s;
  MakeTokens(s, T);
  int32_t positions[T] = {0, 1, 2, 7, 100, 1000, 4095, 8191, 8192, 30000, 131071, 200000, 5};
  for (int32_t& pos : positions) pos += shift;
  s.positions.assign(positions, positions + T);
  std::vector<float> out = in_place ? x : std::vector<float>(T * W, kNaN);
  lh::rope<Heads, D, Style>(s.Get(p), in_place ? out.data() : x.data(), out.data(), theta, sc,
                            use_factors ? factors.data() : nullptr);
  const auto inv = RefInvFreq(D, theta, sc, factors);
  Checker c(std::string("rope ") + (Style == lh::rope_style::half ? "half" : "interleaved") +
            " D=" + std::to_string(D) + " scaling=" + std::to_string(int(sc.kind)) +
            (use_factors ? " freq_factors" : "") + " " + PoolName(p));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Heads; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double a = positions[t] * inv[i];
        int64_t i0, i1;
        if (Style == lh::rope_style::half) {
          i0 = i;
          i1 = i + D / 2;
        } else {
          i0 = 2 * i;
          i1 = 2 * i + 1;
        }
        const double x0 = x[t * W + h * D + i0], x1 = x[t * W + h * D + i1];
        const double tol = 1e-5 * (std::fabs(x0) + std::fabs(x1));
        c.Check(out[t * W + h * D + i0], x0 * std::cos(a) - x1 * std::sin(a), tol, At(t, i0));
        c.Check(out[t * W + h * D + i1], x1 * std::cos(a) + x0 * std::sin(a), tol, At(t, i1));
      }
}

TEST(HostRopeTest, LlamaThreeScalingCoversAllRegimes) {
  // Sanity of the test itself: with theta 5e5 and head_dim 64 the llama3
  // parameters below keep some frequencies, scale some and smooth some.
  const lh::rope_scaling sc{lh::rope_scaling_kind::llama3, 8.0, 1.0, 4.0, 8192};
  const auto plain = RefInvFreq(64, 500000.0, {}, {});
  const auto scaled = RefInvFreq(64, 500000.0, sc, {});
  int kept = 0, divided = 0, smoothed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    if (scaled[i] == plain[i]) ++kept;
    else if (std::fabs(scaled[i] - plain[i] / 8) < 1e-18) ++divided;
    else ++smoothed;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(HostRopeTest, MatchesFormulas) {
  const lh::rope_scaling none{};
  const lh::rope_scaling linear{lh::rope_scaling_kind::linear, 4.0, 1.0, 4.0, 8192};
  const lh::rope_scaling llama3{lh::rope_scaling_kind::llama3, 8.0, 1.0, 4.0, 8192};
  uint32_t seed = 900;
  for (Pool p : kAllPools)
    for (const auto* sc : {&none, &linear, &llama3})
      for (bool factors : {false, true}) {
        if (factors && sc != &none) continue;
        for (bool in_place : {false, true}) {
          CheckRope<3, 64, lh::rope_style::half>(*sc, factors, in_place, p, seed++);
          CheckRope<3, 64, lh::rope_style::interleaved>(*sc, factors, in_place, p, seed++);
          CheckRope<2, 20, lh::rope_style::half>(*sc, factors, in_place, p, seed++);
          CheckRope<2, 20, lh::rope_style::interleaved>(*sc, factors, in_place, p, seed++);
        }
      }
}

// rope keeps the cos/sin rows of the last positions and configuration on the
// calling thread: a call whose positions or theta differ from the previous
// call's, with everything else equal, must not reuse them.
TEST(HostRopeTest, CachedRowsFollowPositionsAndTheta) {
  const lh::rope_scaling none{};
  uint32_t seed = 1900;
  for (Pool p : kAllPools)
    for (double theta : {10000.0, 10000.0, 500000.0})
      for (int32_t shift : {3, 1, 0, 0, 3}) {
        CheckRope<3, 64, lh::rope_style::half>(none, false, false, p, seed++, shift, theta);
        CheckRope<2, 20, lh::rope_style::interleaved>(none, false, true, p, seed++, shift, theta);
      }
}

}  // namespace
