// Compares the dequantizers bit for bit with gguf-py's numpy reference (the
// same arithmetic as ggml's dequantize_row_*) on the seeded random blocks
// that scripts/gen-dequant-goldens.py wrote to test/data/dequant/.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "llmc/core/format/dequantize.h"

namespace llmc {
namespace {

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class DequantGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(DequantGolden, MatchesGgufPyBitForBit) {
  const std::string format = GetParam();
  const std::string base = std::string(LLMC_TEST_DATA_DIR) + "/dequant/" + format;
  std::vector<uint8_t> blocks = ReadFile(base + ".bin");
  std::vector<uint8_t> expected_bytes = ReadFile(base + ".f32");
  ASSERT_FALSE(blocks.empty()) << base << ".bin is missing; run scripts/gen-dequant-goldens.py";
  ASSERT_FALSE(expected_bytes.empty()) << base << ".f32 is missing";
  ASSERT_EQ(expected_bytes.size() % 4, 0u);
  const int64_t count = static_cast<int64_t>(expected_bytes.size() / 4);

  std::vector<float> got(static_cast<size_t>(count));
  absl::Status st = Dequantize(format, blocks.data(), blocks.size(), count, got.data());
  ASSERT_TRUE(st.ok()) << st;
  int mismatches = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t want;
    std::memcpy(&want, &expected_bytes[4 * i], 4);
    uint32_t have = std::bit_cast<uint32_t>(got[i]);
    if (want != have && ++mismatches <= 10)
      ADD_FAILURE() << format << " element " << i << ": got " << got[i] << " (0x" << std::hex
                    << have << "), want " << std::bit_cast<float>(want) << " (0x" << want << ")"
                    << std::dec;
  }
  EXPECT_EQ(mismatches, 0) << format << ": " << mismatches << " of " << count << " differ";
}

INSTANTIATE_TEST_SUITE_P(Formats, DequantGolden,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace llmc
