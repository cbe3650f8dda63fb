// Host kernel tests, weight formats: the format tags (layout, dequant_row,
// dot) and the kernels that read weights (linear, lm_head, embed), for every
// format, against the runtime's dequantizer. See host_kernels_test_util.h for
// the references, the tolerances and the pools.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "host_kernels_test_util.h"

namespace {

using namespace llmc::host_test;

//===----------------------------------------------------------------------===//
// Weight formats: dequant_row, dot, linear, lm_head, embed
//===----------------------------------------------------------------------===//

template <class Fmt>
constexpr int64_t TestK() {
  // k-quants: two super-blocks; 32-blocks and groups: three; plain: not a
  // multiple of 32 (exercises the tail).
  return Fmt::block_elems == 256 ? 512 : Fmt::block_elems == 1 ? 100 : 3 * Fmt::block_elems;
}

template <class Fmt>
class HostFormatTest : public ::testing::Test {};
using AllFormats = ::testing::Types<fmt::f32, fmt::f16, fmt::bf16, fmt::q8_0, fmt::q4_0, fmt::q4_1,
                                    fmt::q5_0, fmt::q5_1, fmt::q2_k, fmt::q3_k, fmt::q4_k,
                                    fmt::q5_k, fmt::q6_k, fmt::i8<32>, fmt::i8<128>,
                                    fmt::i4<32>, fmt::i4<64>, fmt::i4<128>>;
TYPED_TEST_SUITE(HostFormatTest, AllFormats, FormatNames);

// Compares dequantized values: exact for plain formats, else within 1e-6 of
// the largest magnitude of the element's 32-element group.
void CheckDequantized(Checker& c, bool plain, const float* got, const float* ref, int64_t k,
                      int64_t row) {
  for (int64_t g = 0; g < k; g += 32) {
    double mx = 0;
    for (int64_t i = g; i < std::min(k, g + 32); ++i) mx = std::max(mx, std::fabs(double(ref[i])));
    for (int64_t i = g; i < std::min(k, g + 32); ++i)
      c.Check(got[i], ref[i], plain ? 0.0 : 1e-6 * mx, At(row, i));
  }
}

TYPED_TEST(HostFormatTest, LayoutMatchesRuntimeTable) {
  using Fmt = TypeParam;
  // Dequantize rejects a buffer one byte short of the format's block size,
  // so the tag's block_bytes is exactly the runtime's.
  std::vector<uint8_t> w(Fmt::block_bytes);
  std::vector<float> out(Fmt::block_elems);
  EXPECT_TRUE(RuntimeDequantize<Fmt>(w.data(), w.size(), Fmt::block_elems, out.data()).ok());
  EXPECT_FALSE(RuntimeDequantize<Fmt>(w.data(), w.size() - 1, Fmt::block_elems, out.data()).ok());
  EXPECT_EQ(Fmt::row_bytes(Fmt::block_elems * 3), 3 * Fmt::block_bytes);
}

TYPED_TEST(HostFormatTest, DequantRowMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t K = TestK<Fmt>(), Rows = 5;
  std::mt19937 rng(11);
  const auto w = RandomWeights<Fmt>(Rows, K, rng);
  const auto ref = Reference<Fmt>(w, Rows * K);
  Checker c(std::string(Fmt::name) + " dequant_row");
  std::vector<float> y(K);
  for (int64_t r = 0; r < Rows; ++r) {
    std::fill(y.begin(), y.end(), kNaN);
    Fmt::dequant_row(w.data() + r * Fmt::row_bytes(K), y.data(), K);
    CheckDequantized(c, Fmt::is_plain, y.data(), ref.data() + r * K, K, r);
  }
  EXPECT_EQ(c.checked(), Rows * K);
}

TYPED_TEST(HostFormatTest, DotMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t K = TestK<Fmt>() * 3, Rows = 7;
  std::mt19937 rng(12);
  const auto w = RandomWeights<Fmt>(Rows, K, rng);
  const auto ref = Reference<Fmt>(w, Rows * K);
  const auto x = RandomFloats(K, rng);
  Checker c(std::string(Fmt::name) + " dot");
  for (int64_t r = 0; r < Rows; ++r) {
    double want = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      want += double(ref[r * K + k]) * x[k];
      mag += std::fabs(double(ref[r * K + k]) * x[k]);
    }
    const float got = Fmt::dot(w.data() + r * Fmt::row_bytes(K), x.data(), K);
    c.Check(got, want, 1e-5 * mag, At(r, 0));
  }
}

template <class Fmt, int64_t N, int64_t K, bool HasBias, class BiasFmt = fmt::f32>
void CheckLinear(int64_t T, Pool pool, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto w = RandomWeights<Fmt>(N, K, rng);
  const auto ref = Reference<Fmt>(w, N * K);
  const auto bias = RandomWeights<BiasFmt>(1, N, rng);
  const auto bias_ref = Reference<BiasFmt>(bias, N);
  const auto x = RandomFloats(T * K, rng);
  std::vector<float> y(T * N, kNaN);
  Step s;
  MakeTokens(s, T);
  lh::linear<Fmt, N, K, HasBias, BiasFmt>(s.Get(pool), x.data(), w.data(),
                                          HasBias ? bias.data() : nullptr, y.data());
  Checker c(std::string("linear ") + Fmt::name + " T=" + std::to_string(T) +
            (HasBias ? " +bias " : " ") + PoolName(pool));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double want = HasBias ? bias_ref[n] : 0.0, mag = std::fabs(want);
      for (int64_t k = 0; k < K; ++k) {
        want += double(ref[n * K + k]) * x[t * K + k];
        mag += std::fabs(double(ref[n * K + k]) * x[t * K + k]);
      }
      c.Check(y[t * N + n], want, 1e-5 * mag, At(t, n));
    }
}

TYPED_TEST(HostFormatTest, LinearMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t K = TestK<Fmt>();
  uint32_t seed = 100;
  for (int64_t T : {1, 3, 17})
    for (Pool p : kAllPools) {
      CheckLinear<Fmt, 37, K, false>(T, p, seed++);
      CheckLinear<Fmt, 37, K, true>(T, p, seed++);
    }
}

TYPED_TEST(HostFormatTest, LmHeadMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t Hidden = TestK<Fmt>(), Vocab = 45;
  std::mt19937 rng(21);
  const auto w = RandomWeights<Fmt>(Vocab, Hidden, rng);
  const auto ref = Reference<Fmt>(w, Vocab * Hidden);
  const std::vector<std::pair<int64_t, std::vector<int32_t>>> cases = {
      {1, {0}}, {3, {2, 0}}, {17, {16, 0, 8, -1, 17, 3, 5, 7, 9, 11, 13}}};
  for (const auto& [T, rows] : cases)
    for (Pool p : kAllPools) {
      const auto x = RandomFloats(T * Hidden, rng);
      Step s;
      MakeTokens(s, T);
      s.logits_rows = rows;
      const int64_t M = static_cast<int64_t>(rows.size());
      std::vector<float> logits(M * Vocab, kNaN);
      lh::lm_head<Fmt, Vocab, Hidden>(s.Get(p), x.data(), w.data(), logits.data());
      Checker c(std::string("lm_head ") + Fmt::name + " T=" + std::to_string(T) + " " +
                PoolName(p));
      for (int64_t i = 0; i < M; ++i) {
        const int64_t row = rows[i];
        const bool valid = row >= 0 && row < T;
        for (int64_t v = 0; v < Vocab; ++v) {
          double want = 0, mag = 0;
          for (int64_t k = 0; valid && k < Hidden; ++k) {
            want += double(ref[v * Hidden + k]) * x[row * Hidden + k];
            mag += std::fabs(double(ref[v * Hidden + k]) * x[row * Hidden + k]);
          }
          c.Check(logits[i * Vocab + v], want, 1e-5 * mag, At(i, v));
        }
      }
    }
}

TYPED_TEST(HostFormatTest, EmbedMatchesReferenceAndZeroesBadIds) {
  using Fmt = TypeParam;
  constexpr int64_t Hidden = TestK<Fmt>(), Vocab = 11;
  std::mt19937 rng(31);
  const auto table = RandomWeights<Fmt>(Vocab, Hidden, rng);
  const auto ref = Reference<Fmt>(table, Vocab * Hidden);
  for (int64_t T : {1, 3, 17, 700})
    for (Pool p : kAllPools) {
      Step s;
      MakeTokens(s, T);
      for (int64_t t = 0; t < T; ++t) s.tokens[t] = static_cast<int32_t>(rng() % Vocab);
      if (T >= 17) {
        s.tokens[1] = -1;
        s.tokens[4] = Vocab;
        s.tokens[9] = std::numeric_limits<int32_t>::max();
        s.tokens[T - 1] = std::numeric_limits<int32_t>::min();
      }
      std::vector<float> out(T * Hidden, kNaN);
      lh::embed<Fmt, Vocab, Hidden>(s.Get(p), table.data(), out.data());
      Checker c(std::string("embed ") + Fmt::name + " T=" + std::to_string(T) + " " +
                PoolName(p));
      const std::vector<float> zeros(Hidden, 0.0f);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t id = s.tokens[t];
        const float* want = id >= 0 && id < Vocab ? ref.data() + id * Hidden : zeros.data();
        CheckDequantized(c, Fmt::is_plain, out.data() + t * Hidden, want, Hidden, t);
      }
    }
}

//===----------------------------------------------------------------------===//
// linear: bias formats, larger shapes, an empty step
//===----------------------------------------------------------------------===//

TEST(HostLinearTest, HalfAndBFloatBiases) {
  uint32_t seed = 500;
  for (Pool p : kAllPools)
    for (int64_t T : {1, 9}) {
      CheckLinear<fmt::q8_0, 19, 64, true, fmt::f16>(T, p, seed++);
      CheckLinear<fmt::bf16, 19, 64, true, fmt::bf16>(T, p, seed++);
    }
}

TEST(HostLinearTest, LargerShapesAndTokenCounts) {
  // Several weight-row tiles per chunk (with no pool, one chunk holds all
  // rows) and every token-group size (8, 4, 2, 1).
  uint32_t seed = 600;
  for (Pool p : kAllPools)
    for (int64_t T : {2, 15, 33}) {
      CheckLinear<fmt::q4_k, 300, 1024, true>(T, p, seed++);
      CheckLinear<fmt::q4_1, 257, 576, false>(T, p, seed++);
    }
}

TEST(HostLinearTest, NoTokensWritesNothing) {
  std::vector<float> y(4, 7.0f);
  Step s;
  MakeTokens(s, 0);
  lh::linear<fmt::f32, 2, 2, false>(s.Get(Pool::kThreaded), static_cast<const float*>(nullptr),
                                    nullptr, nullptr, y.data());
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
}

}  // namespace
