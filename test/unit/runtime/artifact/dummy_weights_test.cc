// Dummy weights (dummy_weights.h): deterministic, independent of the thread
// count, in range for every format (checked through the dequantizers), and
// artifacts without a weight file that the writer lays out, the manifest
// checks and Artifact::Open fills.
#include "llmc/runtime/artifact/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/artifact/artifact_test_util.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/core/artifact/artifact_writer.h"
#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/quantize.h"
#include "llmc/core/weight_format.h"

namespace llmc {
namespace {

using test::TempFolder;
using test::WriteFile;

ManifestTensor Tensor(const std::string& name, const std::string& format,
                      std::vector<int64_t> shape, int64_t group = 0) {
  ManifestTensor t;
  t.name = name;
  t.format = format;
  t.shape = std::move(shape);
  t.group = group;
  t.bytes = uint64_t(WeightByteSize(format, test::Elements(t.shape), group));
  return t;
}

// `tensors` laid out as the writer lays them out, seeded `seed`.
ManifestWeights Layout(std::vector<ManifestTensor> tensors, uint64_t seed) {
  ManifestWeights w;
  w.dummy_seed = seed;
  uint64_t offset = 0;
  for (ManifestTensor& t : tensors) {
    t.offset = (offset + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
    offset = t.offset + t.bytes;
  }
  w.size = offset;
  w.tensors = std::move(tensors);
  return w;
}

std::vector<uint8_t> Generate(const ManifestWeights& w, int threads) {
  std::vector<uint8_t> bytes(w.size);
  auto st = GenerateDummyWeights(w, bytes.data(), threads);
  EXPECT_TRUE(st.ok()) << st;
  return bytes;
}

std::vector<float> Values(const ManifestTensor& t, const uint8_t* data) {
  std::vector<float> v(size_t(test::Elements(t.shape)));
  absl::Status st = t.format == "i8" || t.format == "i4"
                        ? DequantizeGroupwise(t.format, t.group, data, t.bytes, int64_t(v.size()),
                                              v.data())
                        : Dequantize(t.format, data, t.bytes, int64_t(v.size()), v.data());
  EXPECT_TRUE(st.ok()) << t.format << ": " << st;
  return v;
}

TEST(DummyWeights, DeterministicWhateverTheThreads) {
  // Several chunks (1 MiB each) in the big one, so threads share a tensor.
  ManifestWeights w = Layout({Tensor("big.weight", "q4_0", {1024, 4096}),
                              Tensor("norm.weight", "f32", {4096}),
                              Tensor("emb.weight", "f16", {1000, 512})},
                             42);
  std::vector<uint8_t> one = Generate(w, 1);
  EXPECT_EQ(one, Generate(w, 4));
  EXPECT_EQ(one, Generate(w, 0));
  // One tensor alone gives the same bytes as in the whole.
  std::vector<uint8_t> alone(w.tensors[2].bytes);
  ASSERT_TRUE(GenerateDummyTensor(w.tensors[2], 42, 2, alone.data()).ok());
  EXPECT_EQ(std::memcmp(alone.data(), one.data() + w.tensors[2].offset, alone.size()), 0);
  // Another seed, other bytes; another index, other bytes.
  w.dummy_seed = 43;
  EXPECT_NE(one, Generate(w, 2));
  std::vector<uint8_t> other(w.tensors[2].bytes);
  ASSERT_TRUE(GenerateDummyTensor(w.tensors[2], 42, 1, other.data()).ok());
  EXPECT_NE(alone, other);
}

struct Range {
  const char* format;
  int64_t group;
  float bound;  // |value| never above
};

TEST(DummyWeights, MatricesInRangeForEveryFormat) {
  // Scales vary in [0.75, 1.25) of the nominal one: q4_0 reaches -8d, q8_0
  // -128d, q5_x +-16d.
  const Range ranges[] = {
      {"f32", 0, 0.02f},         {"f16", 0, 0.0201f},       {"bf16", 0, 0.0201f},
      {"q8_0", 0, 0.0254f},      {"q4_0", 0, 0.0251f},      {"q4_1", 0, 0.0251f},
      {"q5_0", 0, 0.0251f},      {"q5_1", 0, 0.0251f},      {"i8", 32, 0.0254f},
      {"i4", 64, 0.0251f},       {"q4_k", 0, 0.0251f},      {"q5_k", 0, 0.0251f},
      {"q6_k", 0, 0.0251f},      {"q2_k", 0, 0.0188f},      {"q3_k", 0, 0.0251f},
  };
  for (const Range& r : ranges) {
    SCOPED_TRACE(r.format);
    ManifestTensor t = Tensor("layers.0.mlp.up_proj.weight", r.format, {256, 512}, r.group);
    std::vector<uint8_t> bytes(t.bytes);
    ASSERT_TRUE(GenerateDummyTensor(t, 7, 3, bytes.data()).ok());
    std::vector<float> v = Values(t, bytes.data());
    double sum = 0, sq = 0;
    float lo = 1, hi = -1;
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x));
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      sum += x;
      sq += double(x) * x;
    }
    double mean = sum / double(v.size()), rms = std::sqrt(sq / double(v.size()));
    EXPECT_GE(lo, -r.bound);
    EXPECT_LE(hi, r.bound);
    // Centered to within a fiftieth of their spread (7 sampling standard
    // deviations of the mean of 131072 values): q4_0's quants alone average
    // -d/2, a bias of a tenth of the spread that made an 8B-shape model give
    // every token the same argmax, until half the blocks took negative scales.
    EXPECT_LT(std::abs(mean), rms / 50) << "values should center on 0";
    EXPECT_GT(rms, 0.006) << "values should spread (uniform-like)";
    EXPECT_LT(hi - lo, 2.1f * r.bound);
    EXPECT_GT(hi - lo, 0.03f);
  }
}

TEST(DummyWeights, NormsNearOneBiasesSmall) {
  for (const char* format : {"f32", "f16", "bf16"}) {
    SCOPED_TRACE(format);
    ManifestTensor norm = Tensor("model.layers.3.input_layernorm.weight", format, {4096});
    ManifestTensor bias = Tensor("model.layers.0.self_attn.{q,k,v}_proj.bias", format, {384});
    std::vector<uint8_t> nb(norm.bytes), bb(bias.bytes);
    ASSERT_TRUE(GenerateDummyTensor(norm, 1, 0, nb.data()).ok());
    ASSERT_TRUE(GenerateDummyTensor(bias, 1, 1, bb.data()).ok());
    float ulp = std::string(format) == "bf16" ? 0.0079f : 0.001f;  // bf16 steps 2^-7 near 1
    for (float x : Values(norm, nb.data())) {
      ASSERT_GE(x, 0.99f - ulp);
      ASSERT_LE(x, 1.01f + ulp);
    }
    float spread = 0;
    for (float x : Values(bias, bb.data())) {
      ASSERT_LE(std::abs(x), 0.01001f);
      spread = std::max(spread, std::abs(x));
    }
    EXPECT_GT(spread, 0.005f);
  }
}

TEST(DummyWeights, Errors) {
  ManifestTensor k = Tensor("w", "iq2_xxs", {4, 256});
  k.bytes = 4 * 256;
  std::vector<uint8_t> bytes(k.bytes);
  auto st = GenerateDummyTensor(k, 1, 0, bytes.data());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown format 'iq2_xxs'"), std::string::npos) << st;
  ManifestTensor wrong = Tensor("w", "q4_0", {4, 64});
  wrong.bytes += 1;
  st = GenerateDummyTensor(wrong, 1, 0, bytes.data());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bytes is 145"), std::string::npos) << st;
  ManifestWeights w = Layout({Tensor("a", "f32", {64})}, 5);
  w.size -= 4;
  std::vector<uint8_t> small(w.size + 4);
  st = GenerateDummyWeights(w, small.data());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("run past weights.size"), std::string::npos) << st;
}

// The whole path: the writer lays out (no file), the manifest says so, and
// Artifact::Open generates the weights.
TEST(DummyWeightsArtifact, WriteAndOpen) {
  TempFolder folder;
  ASSERT_FALSE(folder.path().empty());
  std::string dir = folder.File("dummy.llmc");
  std::string tmp = ArtifactTempDir(dir);
  Manifest m = test::TinyManifest();
  WeightFileWriter writer;
  ASSERT_TRUE(writer.OpenDummy(99).ok());
  for (const test::TensorSpec& s : test::TinyTensors()) {
    auto t = writer.Add(s.name, s.format, s.shape, s.group, nullptr,
                        uint64_t(WeightByteSize(s.format, test::Elements(s.shape), s.group)));
    ASSERT_TRUE(t.ok()) << t.status();
  }
  uint8_t byte = 0;
  EXPECT_FALSE(writer.Add("x", "f32", {16}, 0, &byte, 64).ok()) << "dummy weights take no data";
  ASSERT_TRUE(writer.Finish(&m.weights).ok());
  EXPECT_EQ(m.weights.file, "");
  EXPECT_EQ(m.weights.checksum, "");
  EXPECT_EQ(m.weights.dummy_seed, 99u);
  EXPECT_EQ(m.weights.size, test::TinyManifest().weights.size);
  WriteFile(tmp + "/" + m.host_library, "\x7f" "ELF not really");
  WriteFile(tmp + "/" + m.tokenizer, "{}");
  ASSERT_TRUE(WriteManifest(tmp, m).ok());
  ASSERT_TRUE(CommitArtifactDir(tmp, dir).ok());
  std::string json = test::ReadFile(dir + "/manifest.json");
  EXPECT_NE(json.find("\"dummy_seed\": 99"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/weights"));

  auto a = Artifact::Open(dir);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->manifest().weights.dummy_seed, 99u);
  ASSERT_NE((*a)->weight_file(), nullptr);
  EXPECT_EQ((*a)->weight_file()->size(), m.weights.size);
  for (size_t i = 0; i < m.weights.tensors.size(); ++i) {
    const ManifestTensor& t = m.weights.tensors[i];
    std::vector<uint8_t> expected(t.bytes);
    ASSERT_TRUE(GenerateDummyTensor(t, 99, i, expected.data()).ok());
    ASSERT_NE((*a)->weight_data(int64_t(i)), nullptr);
    EXPECT_EQ(std::memcmp((*a)->weight_data(int64_t(i)), expected.data(), t.bytes), 0) << t.name;
  }
  // Real manifests do not carry the key at all.
  EXPECT_EQ(ManifestToJson(test::TinyManifest()).find("dummy_seed"), std::string::npos);
}

TEST(DummyWeightsManifest, FileAndSeedAreExclusive) {
  Manifest m = test::TinyManifest();
  m.weights.dummy_seed = 5;  // but file and checksum still set
  auto st = ValidateManifest(m, "m.json");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("weights.file"), std::string::npos) << st;
  EXPECT_NE(st.message().find("dummy_seed"), std::string::npos) << st;
  m.weights.file.clear();
  st = ValidateManifest(m, "m.json");
  EXPECT_NE(st.message().find("weights.checksum"), std::string::npos) << st;
  m.weights.checksum.clear();
  EXPECT_TRUE(ValidateManifest(m, "m.json").ok());
  // Real weights need their file.
  m.weights.dummy_seed = 0;
  st = ValidateManifest(m, "m.json");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("weights.file"), std::string::npos) << st;
  EXPECT_NE(st.message().find("real weights need a weight file"), std::string::npos) << st;
  // The JSON round trip keeps the seed, and rejects a file next to it.
  m.weights.dummy_seed = 0xfedcba9876543210ull;
  auto parsed = ManifestFromJson(ManifestToJson(m), "m.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->weights.dummy_seed, 0xfedcba9876543210ull);
  std::string json = ManifestToJson(m);
  size_t at = json.find("\"file\": \"\"");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 10, "\"file\": \"weights/rank0.bin\"");
  parsed = ManifestFromJson(json, "m.json");
  EXPECT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("weights.file"), std::string::npos) << parsed.status();
}

}  // namespace
}  // namespace llmc
