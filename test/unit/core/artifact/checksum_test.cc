#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "llmc/core/artifact/manifest.h"

namespace llmc {
namespace {

std::string Sum(const std::string& s) {
  return ChecksumHex(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::vector<uint8_t> Pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7);
  return v;
}

std::string Sum(const std::vector<uint8_t>& v) { return ChecksumHex(v.data(), v.size()); }

// Pinned values: the checksum is part of the artifact format, so these may
// only change together with kArtifactFormatVersion. They cover the empty
// input, a tail of 1-7 bytes, whole tail words, exactly one block, and
// blocks plus every kind of tail. They were computed by this code and,
// independently, by a 25-line Python transcription of the algorithm as
// manifest.h documents it; both agreed.
TEST(Checksum, KnownAnswers) {
  EXPECT_EQ(Sum(""), "90c01008637b8cc0");
  EXPECT_EQ(Sum("a"), "f813a32816923c5d");
  EXPECT_EQ(Sum("abc"), "2b6000984744c74c");
  EXPECT_EQ(Sum("llmc-hash64"), "c691bfe269bb4a2f");
  EXPECT_EQ(Sum(Pattern(8)), "abffe50e078dbba8");
  EXPECT_EQ(Sum(Pattern(31)), "ca5cb7aacef847c8");
  EXPECT_EQ(Sum(Pattern(32)), "00bc2120e31dadff");
  EXPECT_EQ(Sum(Pattern(33)), "01ce893d07bf1074");
  EXPECT_EQ(Sum(Pattern(1000)), "1b4ba04e4acee9de");
  EXPECT_EQ(Sum(Pattern(1 << 20)), "40d1dca49b6b1924");
}

TEST(Checksum, IsSixteenLowercaseHexDigits) {
  for (size_t n : {0, 1, 100}) {
    std::string s = Sum(Pattern(n));
    ASSERT_EQ(s.size(), 16u);
    for (char c : s) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << s;
  }
}

TEST(Checksum, EverySingleBitFlipChangesIt) {
  // 75 bytes: two blocks, a whole tail word and a 3-byte tail.
  std::vector<uint8_t> data = Pattern(75);
  std::string base = Sum(data);
  for (size_t byte = 0; byte < data.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      data[byte] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_NE(Sum(data), base) << "byte " << byte << " bit " << bit;
      data[byte] ^= static_cast<uint8_t>(1u << bit);
    }
  }
}

TEST(Checksum, LengthMatters) {
  // Zero padding of the tail must not make a shorter input collide.
  std::vector<uint8_t> zeros(64, 0);
  std::vector<std::string> seen;
  for (size_t n = 0; n <= zeros.size(); ++n) {
    std::string s = ChecksumHex(zeros.data(), n);
    for (const std::string& other : seen) EXPECT_NE(s, other) << n;
    seen.push_back(s);
  }
}

TEST(Checksum, StreamingEqualsOneShot) {
  std::vector<uint8_t> data = Pattern(10007);
  std::string expected = Sum(data);
  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    Checksum64 sum;
    size_t at = 0;
    while (at < data.size()) {
      size_t n = std::min<size_t>(data.size() - at, rng() % (trial < 25 ? 40 : 3000));
      sum.Update(data.data() + at, n);
      at += n;
    }
    EXPECT_EQ(sum.Hex(), expected) << "trial " << trial;
    EXPECT_EQ(sum.size(), data.size());
  }
  // Value() does not disturb the state.
  Checksum64 sum;
  sum.Update(data.data(), 100);
  (void)sum.Value();
  sum.Update(data.data() + 100, data.size() - 100);
  EXPECT_EQ(sum.Hex(), expected);
}

// Not a benchmark: a guard against an accidental byte-at-a-time rewrite.
// Prints the rate; fails only far below it (sanitizer builds are slow).
TEST(Checksum, HashesQuickly) {
  std::vector<uint8_t> data(64 << 20, 0x5a);
  auto start = std::chrono::steady_clock::now();
  std::string s = Sum(data);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double gbps = data.size() / seconds / 1e9;
  std::printf("checksum: %.2f GB/s over %zu MiB (%s)\n", gbps, data.size() >> 20, s.c_str());
  EXPECT_GT(gbps, 0.2);
}

}  // namespace
}  // namespace llmc
