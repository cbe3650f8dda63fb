// Hand-built blocks for every format, with the expected values worked out in
// the comments, and the half/bfloat16 conversions at their edges. The golden
// test (dequant_golden_test.cc) covers random blocks against gguf-py.
#include "llmc/core/format/dequantize.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace llmc {
namespace {

// f16 bit patterns used as block scales.
constexpr uint16_t kHalf0_25 = 0x3400, kHalf0_5 = 0x3800, kHalf1 = 0x3C00, kHalf2 = 0x4000,
                   kHalfMinus4 = 0xC400;

void PutHalf(std::vector<uint8_t>& b, size_t at, uint16_t h) {
  b[at] = h & 0xFF;
  b[at + 1] = h >> 8;
}

std::vector<float> DequantizeBlock(std::string_view format, const std::vector<uint8_t>& block,
                                   int64_t count) {
  std::vector<float> out(static_cast<size_t>(count), std::nanf(""));
  absl::Status st = Dequantize(format, block.data(), block.size(), count, out.data());
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// --- 32-element blocks --------------------------------------------------------

TEST(Dequantize, Q8_0) {
  // d = 0.5, then 32 int8 quants q[j] = j - 16, except q[30] = 127, q[31] = -128.
  std::vector<uint8_t> b(34);
  PutHalf(b, 0, kHalf0_5);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  b[2 + 30] = 127;
  b[2 + 31] = 0x80;
  auto y = DequantizeBlock("q8_0", b, 32);
  for (int j = 0; j < 30; ++j) EXPECT_EQ(y[j], (j - 16) * 0.5f) << j;  // y = q * d
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[17], 0.5f);
  EXPECT_EQ(y[30], 63.5f);   // 127 * 0.5
  EXPECT_EQ(y[31], -64.0f);  // -128 * 0.5
}

TEST(Dequantize, Q4_0) {
  // d = 2; byte j holds element j (low nibble, = j) and element j+16 (high
  // nibble, = 15-j); values are stored plus 8: y = (q - 8) * d.
  std::vector<uint8_t> b(18);
  PutHalf(b, 0, kHalf2);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock("q4_0", b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;
    EXPECT_EQ(y[j + 16], (7 - j) * 2.0f) << j;
  }
  EXPECT_EQ(y[0], -16.0f);   // (0 - 8) * 2
  EXPECT_EQ(y[15], 14.0f);   // (15 - 8) * 2
  EXPECT_EQ(y[16], 14.0f);   // high nibble of byte 0 is 15
  EXPECT_EQ(y[31], -16.0f);  // high nibble of byte 15 is 0
}

TEST(Dequantize, Q4_1) {
  // d = 0.5, m = -4; nibbles as in q4_0 without offset: y = q * d + m.
  std::vector<uint8_t> b(20);
  PutHalf(b, 0, kHalf0_5);
  PutHalf(b, 2, kHalfMinus4);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock("q4_1", b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 4.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 4.0f) << j;
  }
  EXPECT_EQ(y[0], -4.0f);   // 0 * 0.5 - 4
  EXPECT_EQ(y[15], 3.5f);   // 15 * 0.5 - 4
  EXPECT_EQ(y[31], -4.0f);  // high nibble of byte 15 is 0
}

TEST(Dequantize, Q5_0) {
  // d = 1; qh = 0x00018001 (bytes 01 80 01 00): bits 0, 15 and 16 set, so
  // elements 0, 15 and 16 get a fifth bit (+16). Nibbles: element j = j,
  // element j+16 = 15-j. y = (q5 - 16) * d.
  std::vector<uint8_t> b(22);
  PutHalf(b, 0, kHalf1);
  const uint32_t qh = 0x00018001;
  std::memcpy(&b[2], &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = DequantizeBlock("q5_0", b, 32);
  EXPECT_EQ(y[0], 0.0f);     // (0 | 16) - 16
  EXPECT_EQ(y[1], -15.0f);   // 1 - 16
  EXPECT_EQ(y[14], -2.0f);   // 14 - 16
  EXPECT_EQ(y[15], 15.0f);   // (15 | 16) - 16
  EXPECT_EQ(y[16], 15.0f);   // (15 | 16) - 16: bit 16 belongs to element 16
  EXPECT_EQ(y[17], -2.0f);   // 14 - 16
  EXPECT_EQ(y[31], -16.0f);  // 0 - 16
}

TEST(Dequantize, Q5_1) {
  // d = 0.25, m = 1; qh = 0xF0000000: elements 28..31 get +16. Both nibbles
  // of byte j are j. y = q5 * d + m.
  std::vector<uint8_t> b(24);
  PutHalf(b, 0, kHalf0_25);
  PutHalf(b, 2, kHalf1);
  const uint32_t qh = 0xF0000000;
  std::memcpy(&b[4], &qh, 4);
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | (j << 4));
  auto y = DequantizeBlock("q5_1", b, 32);
  EXPECT_EQ(y[0], 1.0f);    // 0 * 0.25 + 1
  EXPECT_EQ(y[15], 4.75f);  // 15 * 0.25 + 1
  EXPECT_EQ(y[27], 3.75f);  // element 27 = nibble 11, no fifth bit: 11 * 0.25 + 1
  EXPECT_EQ(y[28], 8.0f);   // (12 | 16) * 0.25 + 1 = 28 * 0.25 + 1
  EXPECT_EQ(y[31], 8.75f);  // (15 | 16) * 0.25 + 1
}

// --- 256-element k-quant super-blocks -------------------------------------------
// Element e of a q2_k/q3_k block: half h = e / 128, 2-bit field j = (e % 128)
// / 32, group g = (e % 32) / 16, l = e % 16; quant byte qs[32h + 16g + l] and
// sub-block scale 8h + 2j + g.

TEST(Dequantize, Q2_K) {
  // scales[s] = ((s % 8) + 1) | ((s / 2) << 4): scale s%8+1, min s/2.
  // qs all 0xE4 (fields 0,1,2,3 = 0,1,2,3), except qs[5] = qs[51] = 0x1B
  // (fields 3,2,1,0). d = 0.5, dmin = 0.25. y = (d*scale) * q - dmin*min.
  std::vector<uint8_t> b(84);
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>(((s % 8) + 1) | ((s / 2) << 4));
  for (int k = 0; k < 64; ++k) b[16 + k] = 0xE4;
  b[16 + 5] = 0x1B;
  b[16 + 32 + 16 + 3] = 0x1B;
  PutHalf(b, 80, kHalf0_5);
  PutHalf(b, 82, kHalf0_25);
  auto y = DequantizeBlock("q2_k", b, 256);
  EXPECT_EQ(y[0], 0.0f);      // s 0: scale 1, min 0; q 0
  EXPECT_EQ(y[5], 1.5f);      // s 0; qs[5] field 0 = 3: 0.5*1*3
  EXPECT_EQ(y[37], 2.75f);    // j 1, l 5, s 2: scale 3, min 1; qs[5] field 1 = 2: 1.5*2 - 0.25
  EXPECT_EQ(y[127], 11.25f);  // j 3, g 1, l 15, s 7: scale 8, min 3; q 3: 4*3 - 0.75
  EXPECT_EQ(y[192], 3.5f);    // h 1, j 2, s 12: scale 5, min 6; q 2: 2.5*2 - 1.5
  EXPECT_EQ(y[243], -1.75f);  // h 1, j 3, g 1, l 3, s 15: scale 8, min 7; qs[51] field 3 = 0
  EXPECT_EQ(y[255], 10.25f);  // s 15; q 3: 4*3 - 1.75
}

TEST(Dequantize, Q3_K) {
  // Scales: stored 6-bit values 24 + s (scale s - 8 after the -32 offset).
  // Low nibbles: bytes 0..7 = (s << 4) | (8 + s) (low nibble: scale s,
  // 24+s = 0b01_1000 + s; high nibble: scale s+8, 32+s = 0b10_0000 + s).
  // High bits: bytes 8..11 = 0xA5 (fields 1,1,2,2 for scales k, k+4, k+8, k+12).
  // hmask all 0xFF (no -4) except hmask[3] bit 0 (element 3) and hmask[18]
  // bit 7 (h 1, j 3: element 128 + 96 + 16 + 2 = 242). qs all 0xE4 (q = j).
  // d = 0.5. y = (d * scale) * (q - (high bit clear ? 4 : 0)).
  std::vector<uint8_t> b(110);
  for (int k = 0; k < 32; ++k) b[k] = 0xFF;
  b[3] = 0xFE;
  b[16 + 2] = 0x7F;
  for (int k = 0; k < 64; ++k) b[32 + k] = 0xE4;
  for (int s = 0; s < 8; ++s) b[96 + s] = static_cast<uint8_t>((s << 4) | (8 + s));
  for (int k = 0; k < 4; ++k) b[104 + k] = 0xA5;
  PutHalf(b, 108, kHalf0_5);
  auto y = DequantizeBlock("q3_k", b, 256);
  EXPECT_EQ(y[3], 16.0f);    // s 0: scale -8, dl -4; q 0 - 4: -4 * -4
  EXPECT_EQ(y[4], 0.0f);     // s 0; q 0 (high bit set)
  EXPECT_EQ(y[40], -3.0f);   // j 1, s 2: scale -6, dl -3; q 1
  EXPECT_EQ(y[127], -1.5f);  // j 3, g 1, s 7: scale -1, dl -0.5; q 3
  EXPECT_EQ(y[181], 1.5f);   // h 1, j 1, g 1, s 11: scale 3, dl 1.5; q 1
  EXPECT_EQ(y[242], -3.5f);  // s 15: scale 7, dl 3.5; q 3 - 4 = -1
  EXPECT_EQ(y[255], 10.5f);  // s 15; q 3: 3.5 * 3
}

// q4_k/q5_k scales and mins: sc = {1, 2, 3, 4, 17, 33, 49, 63}, m = {0, 5, 10,
// 15, 20, 40, 50, 63}. Bytes 0..3: sc[j] | (sc[j+4] >> 4) << 6; bytes 4..7:
// m[j] | (m[j+4] >> 4) << 6; bytes 8..11: (sc[j+4] & 15) | (m[j+4] & 15) << 4.
constexpr uint8_t kK4Scales[12] = {0x41, 0x82, 0xC3, 0xC4, 0x40, 0x85,
                                   0xCA, 0xCF, 0x41, 0x81, 0x21, 0xFF};

TEST(Dequantize, Q4_K) {
  // d = 1, dmin = 0.5. qs[k]: low nibble k % 16, high nibble 15 - k % 16.
  // Chunk c = e / 64: low nibbles of qs[32c + l] are elements 64c + l (sub-block
  // 2c), high nibbles 64c + 32 + l (sub-block 2c + 1). y = d*sc * q - dmin*m.
  std::vector<uint8_t> b(144);
  PutHalf(b, 0, kHalf1);
  PutHalf(b, 2, kHalf0_5);
  std::memcpy(&b[4], kK4Scales, 12);
  for (int k = 0; k < 128; ++k) b[16 + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  auto y = DequantizeBlock("q4_k", b, 256);
  EXPECT_EQ(y[5], 5.0f);      // sub 0: sc 1, m 0; q 5
  EXPECT_EQ(y[35], 21.5f);    // sub 1: sc 2, m 5; q 15 - 3 = 12: 24 - 2.5
  EXPECT_EQ(y[81], -2.0f);    // c 1, l 17, sub 2: sc 3, m 10; q 1: 3 - 5
  EXPECT_EQ(y[133], 75.0f);   // c 2, sub 4: sc 17, m 20; q 5: 85 - 10
  EXPECT_EQ(y[160], 475.0f);  // sub 5: sc 33, m 40; q 15: 495 - 20
  EXPECT_EQ(y[202], 465.0f);  // c 3, l 10, sub 6: sc 49, m 50; q 10: 490 - 25
  EXPECT_EQ(y[255], -31.5f);  // sub 7: sc 63, m 63; q 0: 0 - 31.5
}

TEST(Dequantize, Q5_K) {
  // As q4_k, plus qh: the fifth bit of element 64c + 32*half + l is bit
  // 2c + half of qh[l]. qh[0] = 0xFF, qh[2] = 0x01, qh[3] = 0x80, others 0.
  std::vector<uint8_t> b(176);
  PutHalf(b, 0, kHalf1);
  PutHalf(b, 2, kHalf0_5);
  std::memcpy(&b[4], kK4Scales, 12);
  b[16 + 0] = 0xFF;
  b[16 + 2] = 0x01;
  b[16 + 3] = 0x80;
  for (int k = 0; k < 128; ++k) b[48 + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  auto y = DequantizeBlock("q5_k", b, 256);
  EXPECT_EQ(y[0], 16.0f);      // sub 0: sc 1; q 0 + 16
  EXPECT_EQ(y[1], 1.0f);       // qh[1] = 0: q 1
  EXPECT_EQ(y[2], 18.0f);      // qh[2] bit 0: q 2 + 16
  EXPECT_EQ(y[32], 59.5f);     // sub 1: sc 2, m 5; qh[0] bit 1: q 15 + 16 = 31: 62 - 2.5
  EXPECT_EQ(y[34], 23.5f);     // qh[2] bit 1 clear: q 13: 26 - 2.5
  EXPECT_EQ(y[227], 1732.5f);  // c 3 high, l 3, sub 7: sc 63, m 63; qh[3] bit 7: q 12 + 16 = 28
  EXPECT_EQ(y[255], -31.5f);   // q 0: -31.5
}

TEST(Dequantize, Q6_K) {
  // ql all 0x21 (low nibble 1, high 2) except ql[69] = 0xF0; qh all 0xE4
  // (fields 0,1,2,3 = 0,1,2,3); int8 scales sc[i] = i - 7; d = 0.5.
  // In half h, for l < 32: element l = low nibble of ql[64h+l] + field 0 << 4,
  // l+32 = low of ql[64h+l+32] + field 1 << 4, l+64 = high of ql[64h+l] +
  // field 2 << 4, l+96 = high of ql[64h+l+32] + field 3 << 4; minus 32;
  // scale index 8h + l/16 + 2k for the k-th of these. y = (d * sc) * q.
  // So with these bytes: q = 1-32 = -31, 1+16-32 = -15, 2+32-32 = 2, 2+48-32 = 18.
  std::vector<uint8_t> b(210);
  for (int k = 0; k < 128; ++k) b[k] = 0x21;
  b[64 + 5] = 0xF0;
  for (int k = 0; k < 64; ++k) b[128 + k] = 0xE4;
  for (int i = 0; i < 16; ++i) b[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 7));
  PutHalf(b, 208, kHalf0_5);
  auto y = DequantizeBlock("q6_k", b, 256);
  EXPECT_EQ(y[0], 108.5f);    // sc 0 = -7: -3.5 * -31
  EXPECT_EQ(y[17], 93.0f);    // l 17: sc 1 = -6: -3 * -31
  EXPECT_EQ(y[32], 37.5f);    // k 1: sc 2 = -5: -2.5 * -15
  EXPECT_EQ(y[84], -2.0f);    // k 2, l 20: sc 5 = -2: -1 * 2
  EXPECT_EQ(y[127], 0.0f);    // k 3, l 31: sc 7 = 0
  EXPECT_EQ(y[133], -16.0f);  // h 1, l 5: ql[69] low nibble 0: q -32; sc 8 = 1: 0.5 * -32
  EXPECT_EQ(y[197], 37.5f);   // h 1, l 5, k 2: high nibble 15 + 32 - 32 = 15; sc 12 = 5: 2.5 * 15
  EXPECT_EQ(y[255], 72.0f);   // h 1, l 31, k 3: sc 15 = 8: 4 * 18
}

TEST(Dequantize, EachBlockUsesItsOwnScaleAndOutputSlot) {
  // Two q4_0 blocks: d = 1 then d = 0.5, all nibbles 9 (q - 8 = 1).
  std::vector<uint8_t> b(36, 0x99);
  PutHalf(b, 0, kHalf1);
  PutHalf(b, 18, kHalf0_5);
  auto y = DequantizeBlock("q4_0", b, 64);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 1.0f) << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(y[i], 0.5f) << i;
}

TEST(Dequantize, PlainFloats) {
  const float f[3] = {1.5f, -0.0f, std::numeric_limits<float>::infinity()};
  std::vector<uint8_t> b(12);
  std::memcpy(b.data(), f, 12);
  auto y = DequantizeBlock("f32", b, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Bits(y[i]), Bits(f[i]));

  std::vector<uint8_t> h = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00};  // 1, -2, 2^-24
  auto yh = DequantizeBlock("f16", h, 3);
  EXPECT_EQ(yh[0], 1.0f);
  EXPECT_EQ(yh[1], -2.0f);
  EXPECT_EQ(yh[2], 0x1p-24f);

  std::vector<uint8_t> bf = {0x80, 0x3F, 0x49, 0x40};  // 1, 3.140625
  auto yb = DequantizeBlock("bf16", bf, 2);
  EXPECT_EQ(yb[0], 1.0f);
  EXPECT_EQ(yb[1], 3.140625f);
}

TEST(Dequantize, Errors) {
  std::vector<uint8_t> b(256, 0);
  std::vector<float> out(256);
  auto err = [&](std::string_view fmt, size_t bytes, int64_t count) {
    absl::Status st = Dequantize(fmt, b.data(), bytes, count, out.data());
    EXPECT_FALSE(st.ok()) << fmt;
    return std::string(st.message());
  };
  EXPECT_EQ(err("q4_2", 18, 32),
            "dequantize: unknown or unsupported format 'q4_2' (supported: f32, f16, bf16, q8_0, "
            "q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k)");
  EXPECT_NE(err("i8", 18, 32).find("'i8'"), std::string::npos);  // llmc's group-wise formats
  EXPECT_NE(err("", 18, 32).find("format ''"), std::string::npos);
  EXPECT_EQ(err("q4_0", 36, 33),
            "dequantize q4_0: count 33 is not a whole number of 32-element blocks");
  EXPECT_EQ(err("q6_k", 210, 128),
            "dequantize q6_k: count 128 is not a whole number of 256-element blocks");
  EXPECT_EQ(err("f32", 16, -4), "dequantize f32: count -4 is negative");
  EXPECT_EQ(err("q4_0", 17, 32), "dequantize q4_0: 32 elements need 18 bytes, got 17");
  EXPECT_EQ(err("f16", 7, 4), "dequantize f16: 4 elements need 8 bytes, got 7");
  EXPECT_NE(err("f32", 16, int64_t{1} << 62).find("got 16"), std::string::npos);  // no overflow
  EXPECT_TRUE(Dequantize("q4_k", nullptr, 0, 0, nullptr).ok());                   // nothing to do
}

// --- Half and bfloat16 ----------------------------------------------------------

TEST(Half, ToFloat) {
  EXPECT_EQ(Bits(HalfToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);  // 0x155 / 1024 + 1, times 2^-2
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);         // largest finite
  EXPECT_EQ(HalfToFloat(0x0400), 0x1p-14f);         // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);         // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), 1023 * 0x1p-24f);  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x8001), -0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(HalfToFloat(0x7E00)), 0x7FC00000u);  // quiet NaN
  EXPECT_EQ(Bits(HalfToFloat(0xFE01)), 0xFFC02000u);  // sign and payload kept
  EXPECT_EQ(Bits(HalfToFloat(0x7D00)),
            0x7FA00000u);  // signalling NaN kept as is (like ggml's C path)
}

TEST(Half, FromFloatRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  // Ties between neighbours 2^-10 apart around 1: to the even mantissa.
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3C00);             // tie: 0x3C00 is even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);         // tie: 0x3C02 is even
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);  // above the tie
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f - 0x1p-23f), 0x3C00);  // below the tie
  // Tie between 0x3FFF (odd) and 2.0: rounds up, the carry moving into the exponent.
  EXPECT_EQ(FloatToHalf(2.0f - 0x1p-11f), 0x4000);
  // Overflow: 65504 is the largest half; from 65520 (the tie with 2^16) up: inf.
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  // Subnormals: units of 2^-24, ties to even.
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);            // tie between 0 and 1: 0
  EXPECT_EQ(FloatToHalf(0x1.000002p-25f), 0x0001);     // just above the tie
  EXPECT_EQ(FloatToHalf(3 * 0x1p-25f), 0x0002);        // 1.5 units: tie, to 2
  EXPECT_EQ(FloatToHalf(5 * 0x1p-25f), 0x0002);        // 2.5 units: tie, to 2
  EXPECT_EQ(FloatToHalf(1023.5f * 0x1p-24f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(FloatToHalf(-0x1p-24f), 0x8001);
  EXPECT_EQ(FloatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // NaNs stay NaNs, quiet, with the sign and top payload bits.
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::quiet_NaN()), 0x7E00);
  EXPECT_EQ(FloatToHalf(std::bit_cast<float>(0x7F800001u)), 0x7E00);  // payload below the kept bits
  EXPECT_EQ(FloatToHalf(std::bit_cast<float>(0xFFA02000u)), 0xFF01);
}

TEST(Half, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    uint16_t back = FloatToHalf(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(back))) << std::hex << h;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      EXPECT_EQ(back, h) << std::hex << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's _Float16 conversion is IEEE round-to-nearest-even: compare on
// random floats across the whole range and densely around the half range.
TEST(Half, MatchesCompilerFloat16) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_int_distribution<uint32_t> near(0x32000000u, 0x47FFFFFFu);  // 2^-27 .. 2^16
  for (int i = 0; i < 300000; ++i) {
    uint32_t bits = i % 2 ? any(rng) : (near(rng) | (any(rng) & 0x80000000u));
    float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);
    ASSERT_EQ(FloatToHalf(f), std::bit_cast<uint16_t>(ref)) << std::hex << bits;
  }
}
#endif

TEST(BF16, ToFloat) {
  EXPECT_EQ(BF16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BF16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(BF16ToFloat(0x0001), 0x1p-133f);  // smallest subnormal
  EXPECT_EQ(Bits(BF16ToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(BF16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(BF16ToFloat(0x7FC1)), 0x7FC10000u);
}

TEST(BF16, FromFloatRoundsToNearestEven) {
  auto from = [](uint32_t bits) { return FloatToBF16(std::bit_cast<float>(bits)); };
  EXPECT_EQ(FloatToBF16(1.0f), 0x3F80);
  EXPECT_EQ(from(0x3F808000), 0x3F80);  // tie: 0x3F80 is even
  EXPECT_EQ(from(0x3F818000), 0x3F82);  // tie: 0x3F82 is even
  EXPECT_EQ(from(0x3F808001), 0x3F81);  // above the tie
  EXPECT_EQ(from(0x3F807FFF), 0x3F80);  // below the tie
  EXPECT_EQ(from(0x7F7FFFFF), 0x7F80);  // the largest float rounds to infinity
  EXPECT_EQ(from(0x80000000), 0x8000);
  EXPECT_EQ(from(0x00008000), 0x0000);  // subnormal tie: to even 0
  EXPECT_EQ(from(0x00018000), 0x0002);  // subnormal tie: to even 2
  EXPECT_EQ(from(0xFF800000), 0xFF80);  // -inf
  EXPECT_EQ(from(0x7F800001), 0x7FC0);  // signalling NaN: made quiet
  EXPECT_EQ(from(0xFFC12345), 0xFFC1);  // quiet NaN: truncated, not rounded
}

}  // namespace
}  // namespace llmc
