//===- cuda_formats_test.cpp - the CUDA weight decoders, run on the host --===//
//
// llmc_cuda_formats.cuh compiles for the host too, so every `fmt::` decoder
// of the CUDA kernel library runs here, without a GPU: on seeded random
// blocks (random bytes with finite f16 scales), decode8 over every group of
// a row must give exactly what core's dequantizer gives (bit-exact
// with ggml's dequantize_row_*), up to float rounding of a fused
// multiply-add. load1 of the plain formats too.
//
//===----------------------------------------------------------------------===//
#include "llmc_cuda_formats.cuh"

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace llmc::cuda {
namespace {

// A random row of `k` elements in `Fmt`: random bytes, with every f16 field
// (scales, mins) replaced by a finite value of a typical magnitude.
template <class Fmt> std::vector<u8> randomRow(int k, std::mt19937 &rng) {
  std::vector<u8> row(Fmt::row_bytes(k));
  std::uniform_int_distribution<int> byte(0, 255);
  for (u8 &b : row)
    b = static_cast<u8>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  auto putHalf = [&](u8 *p) {
    uint16_t h = FloatToHalf(scale(rng));
    p[0] = static_cast<u8>(h & 0xff);
    p[1] = static_cast<u8>(h >> 8);
  };
  std::string name = Fmt::name;
  if (name == "f32") {
    for (int i = 0; i < k; ++i) {
      float v = scale(rng);
      std::memcpy(row.data() + 4 * i, &v, 4);
    }
  } else if (name == "f16") {
    for (int i = 0; i < k; ++i)
      putHalf(row.data() + 2 * i);
  } else if (name == "bf16") {
    for (int i = 0; i < k; ++i) {
      uint16_t b = FloatToBF16(scale(rng));
      row[2 * i] = static_cast<u8>(b & 0xff);
      row[2 * i + 1] = static_cast<u8>(b >> 8);
    }
  } else {
    for (int blk = 0; blk < k / Fmt::block_elems; ++blk) {
      u8 *b = row.data() + blk * Fmt::block_bytes;
      if constexpr (Fmt::block_bytes == 210) { // q6_k: d comes last
        putHalf(b + 208);
      } else if constexpr (Fmt::block_bytes == 84) { // q2_k: d, dmin last
        putHalf(b + 80);
        putHalf(b + 82);
      } else if constexpr (Fmt::block_bytes == 110) { // q3_k: d last
        putHalf(b + 108);
      } else {
        putHalf(b);
        if (name == "q4_1" || name == "q5_1" || name == "q4_k" || name == "q5_k")
          putHalf(b + 2);
      }
    }
  }
  return row;
}

template <class Fmt> void checkFormat(int k) {
  std::mt19937 rng(1234 + k);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<u8> row = randomRow<Fmt>(k, rng);
    std::vector<float> want(k);
    ASSERT_TRUE(Dequantize(Fmt::name, row.data(), row.size(), k, want.data()).ok()) << Fmt::name;
    for (int g = 0; g < k / 8; ++g) {
      float got[8];
      Fmt::decode8(row.data(), g, got);
      for (int i = 0; i < 8; ++i) {
        float w = want[8 * g + i];
        // ggml computes d * q + m as two roundings, the decoders may fuse
        // them: one rounding of difference at most.
        ASSERT_NEAR(got[i], w, 1e-6f * std::max(1.0f, std::fabs(w)))
            << Fmt::name << " trial " << trial << " element " << 8 * g + i;
      }
    }
  }
}

TEST(CudaFormatsOnHost, PlainFloats) {
  checkFormat<fmt::f32>(64);
  checkFormat<fmt::f16>(64);
  checkFormat<fmt::bf16>(64);
  std::mt19937 rng(7);
  std::vector<u8> row = randomRow<fmt::f16>(16, rng);
  std::vector<float> want(16);
  ASSERT_TRUE(Dequantize("f16", row.data(), row.size(), 16, want.data()).ok());
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(fmt::f16::load1(row.data(), i), want[i]);
}

TEST(CudaFormatsOnHost, LegacyBlocks) {
  checkFormat<fmt::q8_0>(128);
  checkFormat<fmt::q4_0>(128);
  checkFormat<fmt::q4_1>(128);
  checkFormat<fmt::q5_0>(128);
  checkFormat<fmt::q5_1>(128);
}

TEST(CudaFormatsOnHost, KQuants) {
  checkFormat<fmt::q2_K>(512);
  checkFormat<fmt::q3_K>(512);
  checkFormat<fmt::q4_K>(512);
  checkFormat<fmt::q5_K>(512);
  checkFormat<fmt::q6_K>(512);
}

// The quantize pass's formats: real quantized rows (QuantizeGroupwise on
// random floats), decoded against DequantizeGroupwise.
template <template <int> class Fmt, int G> void checkGroupwise(const char *format) {
  constexpr int k = 512;
  std::mt19937 rng(G);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(k);
  for (float &v : x)
    v = normal(rng);
  std::vector<u8> row(Fmt<G>::row_bytes(k));
  ASSERT_TRUE(QuantizeGroupwise(format, G, x.data(), k, row.data(), row.size()).ok());
  std::vector<float> want(k);
  ASSERT_TRUE(DequantizeGroupwise(format, G, row.data(), row.size(), k, want.data()).ok());
  for (int g = 0; g < k / 8; ++g) {
    float got[8];
    Fmt<G>::decode8(row.data(), g, got);
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(got[i], want[8 * g + i]) << format << G << " element " << 8 * g + i;
  }
}

TEST(CudaFormatsOnHost, GroupwiseIntegers) {
  checkGroupwise<fmt::i8, 32>("i8");
  checkGroupwise<fmt::i8, 64>("i8");
  checkGroupwise<fmt::i8, 128>("i8");
  checkGroupwise<fmt::i4, 32>("i4");
  checkGroupwise<fmt::i4, 64>("i4");
  checkGroupwise<fmt::i4, 128>("i4");
}

TEST(CudaFormatsOnHost, HalfConversions) {
  for (uint16_t h : {0x0000, 0x3c00, 0xbc00, 0x7bff, 0x0001, 0x8400})
    EXPECT_EQ(f16_bits(h), HalfToFloat(h)) << h;
  for (uint16_t b : {0x0000, 0x3f80, 0xbf80, 0x7f7f, 0x0001})
    EXPECT_EQ(bf16_to_float(b), BF16ToFloat(b)) << b;
}

} // namespace
} // namespace llmc::cuda
