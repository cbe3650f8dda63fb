//===- WeightSliceTest.cpp - one rank's slice of a stored tensor ----------===//
#include "Artifact/WeightSlice.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace llmc {
namespace {

std::vector<uint8_t> bytesOf(const std::vector<float> &v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> floatsOf(const std::vector<uint8_t> &b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(rng);
  return v;
}

// Rows of a [5, 3] f32 matrix in slices of 2: the last slice is row 4 and a
// zero row of padding.
TEST(WeightSlice, RowsWithPaddedLastSlice) {
  std::vector<float> m = randomFloats(15, 1);
  std::vector<uint8_t> stored = bytesOf(m);
  for (int64_t piece = 0; piece < 3; ++piece) {
    absl::StatusOr<std::vector<uint8_t>> s =
        SliceStoredTensor(stored.data(), stored.size(), "f32", {2, 3}, /*dim=*/0, piece);
    ASSERT_TRUE(s.ok()) << s.status();
    std::vector<float> got = floatsOf(*s);
    ASSERT_EQ(got.size(), 6u);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        int64_t row = piece * 2 + r;
        float want = row < 5 ? m[row * 3 + c] : 0.0f;
        EXPECT_EQ(got[r * 3 + c], want) << "piece " << piece << " row " << r << " col " << c;
      }
  }
}

// Columns of a [3, 8] f32 matrix: piece 1 of width 4 is columns 4..7 of
// every row.
TEST(WeightSlice, ColumnsOfEveryRow) {
  std::vector<float> m = randomFloats(24, 2);
  std::vector<uint8_t> stored = bytesOf(m);
  absl::StatusOr<std::vector<uint8_t>> s =
      SliceStoredTensor(stored.data(), stored.size(), "f32", {3, 4}, /*dim=*/1, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<float> got = floatsOf(*s);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(got[r * 4 + c], m[r * 8 + 4 + c]);
}

// A GGUF block format is sliced by whole blocks: q8_0 keeps 34 bytes per 32
// elements, so piece 1 of width 32 is the second block of each row, bytes
// and all (scales included).
TEST(WeightSlice, ColumnsOfQuantizedBlocks) {
  const int64_t rows = 2, blockBytes = 34;
  std::vector<uint8_t> stored(rows * 2 * blockBytes);
  std::mt19937 rng(3);
  for (uint8_t &b : stored)
    b = uint8_t(rng());
  absl::StatusOr<std::vector<uint8_t>> s =
      SliceStoredTensor(stored.data(), stored.size(), "q8_0", {rows, 32}, /*dim=*/1, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), size_t(rows * blockBytes));
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(0, std::memcmp(s->data() + r * blockBytes,
                             stored.data() + r * 2 * blockBytes + blockBytes, blockBytes));
}

TEST(WeightSlice, ColumnsThatCutABlockAreAnError) {
  std::vector<uint8_t> stored(2 * 34);
  absl::StatusOr<std::vector<uint8_t>> s =
      SliceStoredTensor(stored.data(), stored.size(), "q8_0", {1, 16}, /*dim=*/1, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not whole q8_0 blocks of 32"), std::string::npos)
      << s.status();
}

// A vector (a bias) is one row: piece 1 of 2 elements of a 6-vector.
TEST(WeightSlice, Vector) {
  std::vector<float> v = randomFloats(6, 4);
  std::vector<uint8_t> stored = bytesOf(v);
  absl::StatusOr<std::vector<uint8_t>> s =
      SliceStoredTensor(stored.data(), stored.size(), "f32", {2}, /*dim=*/0, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(floatsOf(*s), (std::vector<float>{v[2], v[3]}));
}

TEST(WeightSlice, BytesThatAreNotWholeRowsAreAnError) {
  std::vector<uint8_t> stored(4 * 7); // 7 floats are not rows of 3
  absl::StatusOr<std::vector<uint8_t>> s =
      SliceStoredTensor(stored.data(), stored.size(), "f32", {2, 3}, /*dim=*/0, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not whole rows of 3 f32 elements"), std::string::npos)
      << s.status();
}

TEST(WeightSlice, GroupwiseFormatsAreNotStored) {
  std::vector<uint8_t> stored(64);
  EXPECT_FALSE(SliceStoredTensor(stored.data(), stored.size(), "i4", {1, 32}, 1, 0).ok());
}

} // namespace
} // namespace llmc
