// The group-wise quantizer (i8 symmetric, i4 asymmetric): exact bytes on
// hand-computed groups, round-trip error bounds on random weights, and errors.
#include "llmc/core/format/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "llmc/core/format/dequantize.h"
#include "llmc/core/weight_format.h"

namespace llmc {
namespace {

uint16_t U16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

std::vector<uint8_t> Quantize(std::string_view fmt, int64_t group, const std::vector<float>& x) {
  std::vector<uint8_t> out(WeightByteSize(fmt, static_cast<int64_t>(x.size()), group));
  absl::Status st = QuantizeGroupwise(fmt, group, x.data(), x.size(), out.data(), out.size());
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

std::vector<float> Dequantize(std::string_view fmt, int64_t group, const std::vector<uint8_t>& b,
                              int64_t count) {
  std::vector<float> y(count);
  absl::Status st = DequantizeGroupwise(fmt, group, b.data(), b.size(), count, y.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return y;
}

TEST(QuantizeI8, HandComputedGroup) {
  // max |x| = 12.7 -> s = 0.1 (f16 0.0999755859375); q = round(x / s).
  std::vector<float> x(32, 0.0f);
  x[0] = 12.7f;
  x[1] = -12.7f;
  x[2] = 0.05f;   // 0.05 / 0.09998 = 0.5001 -> 1
  x[3] = -3.0f;   // -30.007 -> -30
  x[31] = 0.149f; // 1.4904 -> 1
  const auto b = Quantize("i8", 32, x);
  ASSERT_EQ(b.size(), 34u);
  EXPECT_EQ(U16(b.data()), FloatToHalf(0.1f));
  const int8_t* q = reinterpret_cast<const int8_t*>(b.data() + 2);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 1);
  EXPECT_EQ(q[3], -30);
  EXPECT_EQ(q[4], 0);
  EXPECT_EQ(q[31], 1);
  const auto y = Dequantize("i8", 32, b, 32);
  const float s = HalfToFloat(FloatToHalf(0.1f));
  EXPECT_EQ(y[0], 127 * s);
  EXPECT_EQ(y[3], -30 * s);
}

TEST(QuantizeI4, HandComputedGroup) {
  // Range [-1, 2] -> s = 3/15 = 0.2 (f16 0.199951171875), z = round(1/s) = 5.
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;  // q = round(-5.0012) + 5 = 0
  x[1] = 2.0f;   // round(10.0024) + 5 = 15
  x[2] = 0.3f;   // round(1.5004) + 5 = 7
  x[16] = 0.5f;  // round(2.5006) + 5 = 8 (high nibble of byte 0)
  x[17] = -0.45f; // round(-2.2506) + 5 = 3 (high nibble of byte 1)
  const auto b = Quantize("i4", 32, x);
  ASSERT_EQ(b.size(), 20u);
  EXPECT_EQ(U16(b.data()), FloatToHalf(0.2f));
  EXPECT_EQ(HalfToFloat(U16(b.data() + 2)), 5.0f);
  const uint8_t* qs = b.data() + 4;
  EXPECT_EQ(qs[0], 0x80);  // element 0 -> 0, element 16 -> 8
  EXPECT_EQ(qs[1], 0x3F);  // element 1 -> 15, element 17 -> 3
  EXPECT_EQ(qs[2], 0x57);  // element 2 -> 7, element 18 (0.0) -> z = 5
  const auto y = Dequantize("i4", 32, b, 32);
  EXPECT_EQ(y[4], 0.0f);  // zeros are exact
  const float s = HalfToFloat(FloatToHalf(0.2f));
  EXPECT_EQ(y[1], 10 * s);
  EXPECT_EQ(y[17], -2 * s);
}

TEST(QuantizeI4, NibbleChunksPerThirtyTwoElements) {
  // Group 64: elements 32..63 live in the second 16-byte chunk.
  std::vector<float> x(64, 0.0f);
  x[0] = 1.5f;    // hi = 1.5, lo = 0 -> s = 0.1, z = 0
  x[33] = 1.0f;   // chunk 1, byte 1, low nibble: 10
  x[50] = 0.2f;   // chunk 1, byte 2, high nibble: 2
  const auto b = Quantize("i4", 64, x);
  ASSERT_EQ(b.size(), 36u);
  EXPECT_EQ(HalfToFloat(U16(b.data() + 2)), 0.0f);
  EXPECT_EQ(b[4 + 16 + 1], 0x0A);
  EXPECT_EQ(b[4 + 16 + 2], 0x20);
}

TEST(QuantizeI4, AllPositiveGroupKeepsZeroInRange) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 1.0f + i / 31.0f;  // 1 .. 2
  const auto y = Dequantize("i4", 32, Quantize("i4", 32, x), 32);
  const float s = 2.0f / 15.0f;
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 0.5f * s * 1.001f) << i;
}

TEST(QuantizeGroupwise, ZeroGroupsStayZero) {
  for (const char* fmt : {"i8", "i4"}) {
    std::vector<float> x(128, 0.0f);
    const auto y = Dequantize(fmt, 128, Quantize(fmt, 128, x), 128);
    for (float v : y) EXPECT_EQ(v, 0.0f) << fmt;
  }
}

// Round-trip error of RTN: at most half a step (plus the f16 rounding of
// the scale, which can push the extreme values one clamp away: bounded by a
// step) for every element, and the mean error well under that.
TEST(QuantizeGroupwise, RoundTripErrorBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 0.02f);
  for (const char* fmt : {"i8", "i4"})
    for (int64_t group : {32, 64, 128}) {
      const int64_t rows = 9, k = 384;
      std::vector<float> x(rows * k);
      for (auto& v : x) v = n(rng);
      const auto b = Quantize(fmt, group, x);
      ASSERT_EQ(static_cast<int64_t>(b.size()), rows * k / group * GroupwiseBlockBytes(fmt, group));
      const auto y = Dequantize(fmt, group, b, rows * k);
      double sum_err = 0, sum_sq = 0;
      for (int64_t g = 0; g < rows * k / group; ++g) {
        float lo = 0, hi = 0, amax = 0;
        for (int64_t i = g * group; i < (g + 1) * group; ++i) {
          lo = std::min(lo, x[i]);
          hi = std::max(hi, x[i]);
          amax = std::max(amax, std::fabs(x[i]));
        }
        const bool i8 = std::string_view(fmt) == "i8";
        const float step = i8 ? amax / 127 : (hi - lo) / 15;
        for (int64_t i = g * group; i < (g + 1) * group; ++i) {
          const float err = std::fabs(y[i] - x[i]);
          EXPECT_LE(err, 0.5f * step * 1.002f + 1e-7f) << fmt << " g" << group << " at " << i;
          sum_err += double(err) * err;
          sum_sq += double(x[i]) * x[i];
        }
      }
      // Relative RMS error: ~1/(127*sqrt(12)*~0.4) for i8, larger for i4.
      const double rel = std::sqrt(sum_err / sum_sq);
      EXPECT_LT(rel, std::string_view(fmt) == "i8" ? 0.01 : 0.15) << fmt << " g" << group;
      EXPECT_GT(rel, 0.0);
    }
}

TEST(QuantizeGroupwise, Errors) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(1000);
  EXPECT_FALSE(QuantizeGroupwise("q4_0", 32, x.data(), 64, out.data(), out.size()).ok());
  EXPECT_FALSE(QuantizeGroupwise("i8", 48, x.data(), 48, out.data(), out.size()).ok());
  EXPECT_FALSE(QuantizeGroupwise("i8", 64, x.data(), 32, out.data(), out.size()).ok());
  EXPECT_FALSE(QuantizeGroupwise("i4", 32, x.data(), 64, out.data(), 39).ok());
  x[5] = NAN;
  absl::Status st = QuantizeGroupwise("i8", 32, x.data(), 64, out.data(), out.size());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("element 5"), std::string_view::npos) << st.message();
  x[5] = 1e7f;  // 1e7 / 127 > 65504: no f16 scale
  st = QuantizeGroupwise("i8", 32, x.data(), 64, out.data(), out.size());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("f16"), std::string_view::npos) << st.message();
  std::vector<float> y(64);
  EXPECT_FALSE(DequantizeGroupwise("i4", 32, out.data(), 39, 64, y.data()).ok());
}

}  // namespace
}  // namespace llmc
