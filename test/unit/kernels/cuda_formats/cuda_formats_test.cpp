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
#include "llmc_cuda_dot_q8.cuh"
#include "llmc_cuda_mma_weights.cuh"

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <random>
#include <string>
#include <utility>
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


// The int8-dot chunks of gemv_q8 (llmc_cuda_dot_q8.cuh): for random rows and
// random activations quantized as the GEMV stages them (per 32 elements, dx
// = amax / 127, xq = rint(x / dx), s = dx * sum xq), the chunk dots summed
// over a row must equal sum_i w_i * dx * xq_i with w from core's
// dequantizer, computed in double: the int8 activations are the only
// approximation of the kernel, and this reference makes the same one, so
// any layout or offset error shows far above the float-rounding bound.
template <class Dot> void checkDot(int k) {
  using Fmt = typename Dot::Fmt;
  std::mt19937 rng(99 + k);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<u8> bytes = randomRow<Fmt>(k, rng);
    // Two rows back to back, the second checked, so that a row that does
    // not start 16-byte aligned (q6_K's 2-byte-aligned blocks) is covered.
    std::vector<u8> two(bytes.size() * 2 + 16);
    u8 *row = two.data() + bytes.size();
    std::memcpy(row, bytes.data(), bytes.size());
    std::vector<float> w(k);
    ASSERT_TRUE(Dequantize(Fmt::name, bytes.data(), bytes.size(), k, w.data()).ok());
    std::vector<float> x(k);
    for (float &v : x) v = normal(rng);
    std::vector<int> xq(k / 4);
    std::vector<float2> xs(k / 32);
    double want = 0, scale = 0;
    for (int b = 0; b < k / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
      const float dx = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int q = static_cast<int>(std::rint(x[32 * b + i] * inv));
        sum += q;
        reinterpret_cast<signed char *>(xq.data())[32 * b + i] = static_cast<signed char>(q);
        want += double(w[32 * b + i]) * double(dx) * q;
        scale += std::fabs(double(w[32 * b + i]) * double(dx) * q);
      }
      xs[b] = make_float2(dx, dx * static_cast<float>(sum));
    }
    double got = 0;
    for (int c = 0; c < k / Dot::kElems; ++c) {
      u32 words[Dot::kWords];
      Dot::load(row, c, words);
      got += Dot::dot(words, c, xq.data() + c * Dot::kElems / 4, xs.data() + c * Dot::kElems / 32);
    }
    ASSERT_NEAR(got, want, 2e-6 * scale + 1e-9) << Fmt::name << " trial " << trial;
  }
}

TEST(CudaDotQ8OnHost, EveryChunkFormat) {
  checkDot<q8::q4_0>(512);
  checkDot<q8::q4_1>(512);
  checkDot<q8::q5_0>(512);
  checkDot<q8::q5_1>(512);
  checkDot<q8::q8_0>(512);
  checkDot<q8::q4_K>(512);
  checkDot<q8::q5_K>(512);
  checkDot<q8::q6_K>(512);
  checkDot<q8::q6_K>(768);  // an odd number of blocks: rows 2-byte aligned
}

TEST(CudaDotQ8OnHost, Dp4aIsSigned) {
  EXPECT_EQ(q8::dp4a(0x0102ff80, 0x7f01ff02, 10), 10 + 1 * 127 + 2 * 1 + (-1) * (-1) + (-128) * 2);
  EXPECT_EQ(q8::spread4(0xfu), 0x10101010u);
  EXPECT_EQ(q8::spread4(0x5u), 0x00100010u);
}

// The pair decoders of the tensor-core GEMM (llmc_cuda_mma_weights.cuh)
// must give, bit for bit (up to the sign of zero), the activation-type rounding of the float
// decoder's weights, which is what gemm_mma stored before them: on random
// rows, and on rows whose scales are any finite f16 (subnormals and values
// whose products overflow f16 included), so that the bf16 split of the
// scale is exercised across the exponent range.
template <class Fmt, class Act> void checkMmaWeights(int k, bool any_scale) {
  using W = mmaw::of<Fmt>;
  static_assert(W::value, "a format with a pair decoder");
  std::mt19937 rng(7 + k + any_scale);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<u8> row = randomRow<Fmt>(k, rng);
    if (any_scale) {
      for (int blk = 0; blk < k / Fmt::block_elems; ++blk) {
        uint16_t h;
        do h = static_cast<uint16_t>(bits(rng)); while ((h & 0x7c00) == 0x7c00); // finite
        row[blk * Fmt::block_bytes] = static_cast<u8>(h & 0xff);
        row[blk * Fmt::block_bytes + 1] = static_cast<u8>(h >> 8);
      }
    }
    for (int g = 0; g < k / 8; ++g) {
      u32 words[4];
      W::template decode8<Act>(row.data(), g, words);
      float want[8];
      Fmt::decode8(row.data(), g, want);
      for (int i = 0; i < 8; ++i) {
        const u16 got = static_cast<u16>(words[i / 2] >> (16 * (i & 1)));
        const Act w = from_float<Act>(want[i]);
        u16 want_bits;
        std::memcpy(&want_bits, &w, 2);
        // Zero's sign may differ (d_hi * 0 + d_lo * 0 is +0 when their
        // signs differ); the mma cannot tell.
        if ((got & 0x7fff) == 0 && (want_bits & 0x7fff) == 0) continue;
        ASSERT_EQ(got, want_bits) << Fmt::name << (std::is_same<Act, __half>::value ? " f16" : " bf16")
                                  << " trial " << trial << " element " << 8 * g + i << " = " << want[i];
      }
    }
  }
}

// What gemm_mma stores for group g of a row when it decodes by group: the
// pair decoder's words where the format has one, else the float decoder's
// values packed to Act.
template <class Fmt, class Act> void groupWords(const u8* row, int g, u32 (&out)[4]) {
  if constexpr (mmaw::of<Fmt>::value) {
    mmaw::of<Fmt>::template decode8<Act>(row, g, out);
  } else {
    float v[8];
    Fmt::decode8(row, g, v);
    for (int i = 0; i < 4; ++i) out[i] = mmaw::floats2<Act>(v[2 * i], v[2 * i + 1]);
  }
}

// An Act pair's two halves as floats.
template <class Act> std::pair<float, float> pairFloats(u32 w) {
  const typename mmaw::pair_type<Act>::T2 p = mmaw::pair_ops<Act>::in(w);
  return {to_float(p.x), to_float(p.y)};
}

// decode_step (a whole 32-element step of a row) gives the group decoder's
// words for every group it covers, at every step (q4_0: the block's offset
// past a word alternates 0, 2 with kt; q4_K: all 8 sub-blocks of a
// super-block), with 4 groups and with 2 (first 0 and 1). q4_0's are the
// same bits. q4_K's pair arithmetic (D and M rounded to Act) is within
// eps (15 |D| + |M| + 2 |w|) of the float decoder's value w rounded to Act,
// eps Act's relative rounding (2^-8 bf16, 2^-11 f16): D and M's roundings
// plus both results' own. That stays below D, the step between
// neighbouring quants, while M < 80 D in bf16 (most of the random
// sub-blocks), so a wrong nibble, sub-block or scale fails.
template <class Fmt, class Act> void checkStepDecoder(int k) {
  using W = mmaw::step_decoder<Fmt>;
  constexpr bool exact = std::is_same<Fmt, fmt::q4_0>::value;
  const double eps = std::is_same<Act, __half>::value ? 0x1p-11 : 0x1p-8;
  ASSERT_TRUE(W::step_rows(k));
  std::mt19937 rng(11 + k);
  double worst = 0; // q4_K: the largest error as a share of its bound
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<u8> bytes = randomRow<Fmt>(k, rng);
    std::vector<uint4> aligned((bytes.size() + 15) / 16 + 1); // 16-byte aligned, as the GEMM's rows
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    const u8* row = reinterpret_cast<const u8*>(aligned.data());
    typename W::step_state state{}, halves[2]{}; // kept across a quartet's steps, as the GEMM's loop does
    for (int kt = 0; kt < k / 32; ++kt) {
      double scales = 0; // q4_K: 15 |D| + |M|
      if constexpr (!exact) {
        float d, m;
        fmt::k4_scale_min(row + (kt >> 3) * Fmt::block_bytes, kt & 7, &d, &m);
        scales = 15.0 * std::fabs(d) + std::fabs(m);
      }
      auto expect = [&](u32 got, u32 want, const std::string& where) {
        if constexpr (exact) {
          EXPECT_EQ(got, want) << where;
        } else {
          const auto [g0, g1] = pairFloats<Act>(got);
          const auto [w0, w1] = pairFloats<Act>(want);
          const double bound = eps * (scales + 2.0 * std::max(std::fabs(w0), std::fabs(w1)));
          const double err = std::max(std::fabs(double(g0) - w0), std::fabs(double(g1) - w1));
          EXPECT_LE(err, bound) << where << ": got " << g0 << ", " << g1 << " want " << w0 << ", " << w1;
          if (bound > 0) worst = std::max(worst, err / bound);
        }
      };
      u32 want[4][4], all[16];
      for (int g = 0; g < 4; ++g) groupWords<Fmt, Act>(row, 4 * kt + g, want[g]);
      W::template decode_step<Act, 4>(row, kt, 0, all);
      for (int g = 0; g < 4; ++g)
        for (int i = 0; i < 4; ++i)
          expect(all[4 * g + i], want[g][i], "kt " + std::to_string(kt) + " group " + std::to_string(g));
      for (int first = 0; first < 2; ++first) {
        u32 two[8];
        W::template decode_step<Act, 2>(row, kt, first, two);
        for (int c = 0; c < 2; ++c)
          for (int i = 0; i < 4; ++i)
            expect(two[4 * c + i], want[first + 2 * c][i],
                   "kt " + std::to_string(kt) + " first " + std::to_string(first));
      }
      // The GEMM's unrolled loops decode with the phase kt % 4 known and
      // what phase 0 shares kept in one step_state: the same bits as the
      // step decoded alone. The words of phases 1-3 carry no header (a
      // stale one here, so that reading it fails).
      {
        typename W::template step_words<4> sw;
        W::template step_load<4>(row, kt, 0, kt & 3, sw);
        if constexpr (!exact) {
          if (kt & 3) sw.head = make_uint4(0x3c003c00u, 0x3c003c00u, 0x01010101u, 0x02020202u);
        }
        u32 phased[16];
        W::template step_decode<Act, 4>(sw, kt, kt & 3, state, phased);
        for (int i = 0; i < 16; ++i)
          EXPECT_EQ(phased[i], all[i]) << "kt " << kt << " word " << i << ", phase " << (kt & 3);
        // Two groups a thread (the 64-row tiles' case), each half of the
        // row with its own state, as two threads hold them.
        for (int first = 0; first < 2; ++first) {
          typename W::template step_words<2> sw2;
          W::template step_load<2>(row, kt, first, kt & 3, sw2);
          if constexpr (!exact) {
            if (kt & 3) sw2.head = make_uint4(0x3c003c00u, 0x3c003c00u, 0x01010101u, 0x02020202u);
          }
          u32 two[8];
          W::template step_decode<Act, 2>(sw2, kt, kt & 3, halves[first], two);
          for (int c = 0; c < 2; ++c)
            for (int i = 0; i < 4; ++i)
              EXPECT_EQ(two[4 * c + i], all[4 * (first + 2 * c) + i])
                  << "kt " << kt << " first " << first << ", phase " << (kt & 3);
        }
      }
      if (::testing::Test::HasFailure()) return; // the first step that fails, not every one
    }
  }
  if (!exact) {
    EXPECT_GT(worst, 0.0) << "q4_K's pair decode was expected to differ from the float one somewhere";
  }
}

TEST(CudaMmaWeightsOnHost, StepDecoderMatchesGroups) {
  checkStepDecoder<fmt::q4_0, __nv_bfloat16>(512);
  checkStepDecoder<fmt::q4_0, __half>(512);
  checkStepDecoder<fmt::q4_K, __nv_bfloat16>(1024);
  checkStepDecoder<fmt::q4_K, __half>(1024);
  EXPECT_FALSE(mmaw::step_decoder<fmt::q4_0>::step_rows(96)); // 3 blocks a row: rows 2-byte aligned
  EXPECT_FALSE(mmaw::step_decoder<fmt::q4_K>::step_rows(512 + 64));
  EXPECT_FALSE(mmaw::step_decoder<fmt::q8_0>::value);
}

TEST(CudaMmaWeightsOnHost, PairDecodersAreBitExact) {
  checkMmaWeights<fmt::q4_0, __nv_bfloat16>(512, false);
  checkMmaWeights<fmt::q4_0, __half>(512, false);
  checkMmaWeights<fmt::q4_0, __nv_bfloat16>(512, true);
  checkMmaWeights<fmt::q4_0, __half>(512, true);
}

TEST(CudaMmaWeightsOnHost, BytePermMatchesPrmt) {
  EXPECT_EQ(mmaw::byte_perm(0x44332211u, 0, 0x4140), 0x00220011u);
  EXPECT_EQ(mmaw::byte_perm(0x44332211u, 0, 0x4342), 0x00440033u);
  EXPECT_EQ(mmaw::byte_perm(0x44332211u, 0x88776655u, 0x7531), 0x88664422u);
}

} // namespace
} // namespace llmc::cuda
