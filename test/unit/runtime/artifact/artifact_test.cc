#include "llmc/runtime/artifact/artifact.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "core/artifact/artifact_test_util.h"
#include "llmc/core/artifact/artifact_writer.h"

namespace llmc {
namespace {

namespace fs = std::filesystem;
using test::ExpectError;
using test::ReadFile;
using test::TempFolder;
using test::TensorBytes;
using test::TinyTensors;
using test::WriteFile;

class ArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(folder_.path().empty());
    dir_ = folder_.File("model.llmc");
    auto st = test::WriteTinyArtifact(dir_, &written_);
    ASSERT_TRUE(st.ok()) << st;
  }
  std::string File(const std::string& relative) const { return dir_ + "/" + relative; }

  // Replaces the first `from` in manifest.json with `to`.
  void EditManifest(const std::string& from, const std::string& to) {
    std::string text = ReadFile(File("manifest.json"));
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    WriteFile(File("manifest.json"), text);
  }

  TempFolder folder_;
  std::string dir_;
  Manifest written_;
};

TEST_F(ArtifactTest, OpensWhatTheWriterWrote) {
  auto artifact = Artifact::Open(dir_);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  const Artifact& a = **artifact;
  EXPECT_EQ(a.dir(), dir_);
  EXPECT_EQ(a.Path("weights/rank0.bin"), dir_ + "/weights/rank0.bin");
  const Manifest& m = a.manifest();
  EXPECT_EQ(m.weights.checksum, written_.weights.checksum);
  EXPECT_EQ(m.weights.size, test::TinyManifest().weights.size);
  auto specs = TinyTensors();
  ASSERT_EQ(m.weights.tensors.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<uint8_t> expected = TensorBytes(i, specs[i]);
    const uint8_t* data = a.weight_data(static_cast<int64_t>(i));
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % kWeightAlignment, 0u) << i;
    EXPECT_EQ(m.weights.tensors[i].bytes, expected.size());
    EXPECT_EQ(std::memcmp(data, expected.data(), expected.size()), 0) << specs[i].name;
  }
  EXPECT_EQ(a.weight_data(-1), nullptr);
  EXPECT_EQ(a.weight_data(static_cast<int64_t>(specs.size())), nullptr);
  // No leftovers of the write next to it.
  for (const auto& entry : fs::directory_iterator(folder_.path()))
    EXPECT_EQ(entry.path().filename(), "model.llmc");
}

TEST_F(ArtifactTest, TrailingSlashIsFine) {
  auto artifact = Artifact::Open(dir_ + "//");
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ((*artifact)->dir(), dir_);
}

TEST_F(ArtifactTest, TruncatedWeightFile) {
  uint64_t size = written_.weights.size;
  fs::resize_file(File("weights/rank0.bin"), size - 10);
  auto r = Artifact::Open(dir_);
  ExpectError(
      r, {File("weights/rank0.bin") + ": size is " + std::to_string(size - 10) +
          " bytes but manifest.json says " + std::to_string(size) + ": the file is truncated"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(ArtifactTest, LongerWeightFile) {
  fs::resize_file(File("weights/rank0.bin"), written_.weights.size + 64);
  ExpectError(Artifact::Open(dir_),
              {File("weights/rank0.bin") + ": size is", "not the one the manifest describes"});
}

TEST_F(ArtifactTest, FlippedByteFailsTheChecksum) {
  std::string bytes = ReadFile(File("weights/rank0.bin"));
  bytes[12345] ^= 0x10;
  std::string got = ChecksumHex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  WriteFile(File("weights/rank0.bin"), bytes);
  auto r = Artifact::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), File("weights/rank0.bin") + ": checksum mismatch (expected " +
                                      written_.weights.checksum + ", got " + got +
                                      "): the file is corrupt");
  // Skipping the check opens it (and sees the flipped byte).
  auto unchecked = Artifact::Open(dir_, {.verify_checksum = false});
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
}

TEST_F(ArtifactTest, WrongFormatVersion) {
  EditManifest("\"format_version\": 1", "\"format_version\": 7");
  auto r = Artifact::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            File("manifest.json") +
                ": format_version 7 is not supported by this runtime (it reads version 1); "
                "recompile the model with this llmc");
}

TEST_F(ArtifactTest, WrongHostAbiVersion) {
  EditManifest("\"host_abi_version\": 1", "\"host_abi_version\": 2");
  ExpectError(Artifact::Open(dir_),
              {File("manifest.json") + ": host_abi_version 2 does not match", "(version 1)"});
}

TEST_F(ArtifactTest, MissingHostLibrary) {
  fs::remove(File("kernels/host/kernels.so"));
  ExpectError(Artifact::Open(dir_), {File("kernels/host/kernels.so") +
                                     ": the host kernel library named by the manifest is missing"});
}

TEST_F(ArtifactTest, MissingTokenizer) {
  fs::remove(File("tokenizer/tokenizer.json"));
  ExpectError(Artifact::Open(dir_), {File("tokenizer/tokenizer.json") +
                                     ": the tokenizer named by the manifest is missing"});
}

TEST(ArtifactCudaTest, OpensAndNeedsEveryPtxFile) {
  TempFolder folder;
  std::string dir = folder.File("model.llmc");
  ASSERT_TRUE(test::WriteTinyArtifact(dir, nullptr, test::TinyCudaManifest()).ok());
  auto artifact = Artifact::Open(dir);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ((*artifact)->manifest().cuda.modules.size(), 2u);
  fs::remove(dir + "/kernels/sm_90/kernels.ptx");
  ExpectError(Artifact::Open(dir), {dir + "/kernels/sm_90/kernels.ptx: the sm_90 PTX named by "
                                          "the manifest is missing"});
}

TEST_F(ArtifactTest, MissingWeightFile) {
  fs::remove(File("weights/rank0.bin"));
  ExpectError(Artifact::Open(dir_),
              {File("weights/rank0.bin") + ": the weight file named by manifest.json is missing"});
}

TEST_F(ArtifactTest, MissingManifest) {
  fs::remove(File("manifest.json"));
  auto r = Artifact::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), dir_ + ": not an llmc artifact: manifest.json is missing");
}

TEST_F(ArtifactTest, GarbageManifest) {
  for (const std::string& garbage :
       {std::string(""), std::string("\x00\x01\x02garbage", 10),
        std::string("{\"format_version\": 1"), std::string("null"),
        std::string("{\"format_version\": 1}"), std::string(5000, '{')}) {
    WriteFile(File("manifest.json"), garbage);
    ExpectError(Artifact::Open(dir_), {File("manifest.json") + ": "});
  }
}

TEST_F(ArtifactTest, NotADirectory) {
  ExpectError(Artifact::Open(folder_.File("nowhere")),
              {folder_.File("nowhere") + ": cannot open the artifact"});
  ExpectError(Artifact::Open(File("manifest.json")),
              {File("manifest.json") + ": not an llmc artifact: an artifact is a directory"});
}

// ---- writer ------------------------------------------------------------------

TEST(WeightFileWriter, AlignsPadsAndHashes) {
  TempFolder folder;
  std::string path = folder.File("w/rank0.bin");  // the parent is created
  WeightFileWriter writer;
  ASSERT_TRUE(writer.Open(path).ok());
  std::vector<uint8_t> a(198, 0xAB);  // i8 [3, 64], group 64
  std::vector<uint8_t> b(8, 0xCD);    // f32 [2]
  std::vector<uint8_t> c(4, 0xEF);    // f16 [2]
  auto ta = writer.Add("a", "i8", {3, 64}, 64, a.data(), a.size());
  auto tb = writer.Add("b", "f32", {2}, 0, b.data(), b.size());
  auto tc = writer.Add("c", "f16", {2}, 0, c.data(), c.size());
  ASSERT_TRUE(ta.ok() && tb.ok() && tc.ok());
  EXPECT_EQ(ta->offset, 0u);
  EXPECT_EQ(tb->offset, 256u);
  EXPECT_EQ(tc->offset, 320u);
  EXPECT_EQ(tb->bytes, 8u);
  EXPECT_EQ(writer.size(), 324u);
  ManifestWeights weights;
  weights.file = "kept";
  ASSERT_TRUE(writer.Finish(&weights).ok());
  EXPECT_EQ(weights.file, "kept");
  EXPECT_EQ(weights.size, 324u);
  ASSERT_EQ(weights.tensors.size(), 3u);
  EXPECT_EQ(weights.tensors[1].name, "b");
  EXPECT_EQ(weights.tensors[1].shape, (std::vector<int64_t>{2}));

  std::string file = ReadFile(path);
  ASSERT_EQ(file.size(), 324u);
  EXPECT_EQ(weights.checksum,
            ChecksumHex(reinterpret_cast<const uint8_t*>(file.data()), file.size()));
  for (size_t i = 198; i < 256; ++i) EXPECT_EQ(file[i], 0) << i;  // zero padding
  for (size_t i = 264; i < 320; ++i) EXPECT_EQ(file[i], 0) << i;
  EXPECT_EQ(static_cast<uint8_t>(file[256]), 0xCD);
  EXPECT_EQ(static_cast<uint8_t>(file[320]), 0xEF);

  // Finished: no more tensors.
  ExpectError(writer.Add("d", "f32", {1}, 0, b.data(), 4), {"already finished"});
}

TEST(WeightFileWriter, RejectsBadTensors) {
  TempFolder folder;
  WeightFileWriter writer;
  std::vector<uint8_t> data(4096);
  ExpectError(writer.Add("x", "f32", {4}, 0, data.data(), 16), {"not open"});
  ASSERT_TRUE(writer.Open(folder.File("rank0.bin")).ok());
  ExpectError(
      writer.Add("x", "f32", {4}, 0, data.data(), 12),
      {folder.File("rank0.bin") + ": weight 'x': bytes is 12 but 4 elements of f32 take 16"});
  ExpectError(writer.Add("x", "q4_1", {40}, 0, data.data(), 20),
              {"weight 'x': shape innermost dimension 40 is not a multiple of 32"});
  ExpectError(writer.Add("x", "nf4", {4}, 0, data.data(), 16),
              {"format 'nf4' is not a weight format"});
  ExpectError(writer.Add("", "f32", {4}, 0, data.data(), 16), {"the name is empty"});
  ExpectError(writer.Add("x", "f32", {4}, 0, nullptr, 16), {"no data"});
  ASSERT_TRUE(
      writer.Add("x", "f32", {4}, 0, data.data(), 16).ok());  // earlier failures left no trace
  ExpectError(writer.Add("x", "f32", {4}, 0, data.data(), 16), {"weight 'x': added twice"});
  EXPECT_EQ(writer.size(), 16u);
}

TEST(WriteManifest, RefusesAnInvalidManifest) {
  TempFolder folder;
  Manifest m = test::TinyManifest();
  m.steps[0].kernel = 9;
  ExpectError(WriteManifest(folder.path(), m),
              {folder.File("manifest.json") + ": steps[0].kernel 9"});
  EXPECT_FALSE(fs::exists(folder.File("manifest.json")));
  // Valid, but the weight file is not there.
  m = test::TinyManifest();
  ExpectError(WriteManifest(folder.path(), m), {folder.File("weights/rank0.bin"), "missing"});
  EXPECT_FALSE(fs::exists(folder.File("manifest.json")));
}

TEST(CommitArtifactDir, ReplacesAnOldArtifact) {
  TempFolder folder;
  std::string dir = folder.File("model.llmc");
  ASSERT_TRUE(test::WriteTinyArtifact(dir).ok());
  WriteFile(dir + "/stale-file", "from the first compile");
  ASSERT_TRUE(test::WriteTinyArtifact(dir).ok());
  EXPECT_FALSE(fs::exists(dir + "/stale-file"));
  EXPECT_TRUE(Artifact::Open(dir).ok());
  for (const auto& entry : fs::directory_iterator(folder.path()))
    EXPECT_EQ(entry.path().filename(), "model.llmc");
}

TEST(CommitArtifactDir, ReplacesAnEmptyDirectory) {
  TempFolder folder;
  std::string dir = folder.File("out");
  fs::create_directory(dir);
  ASSERT_TRUE(test::WriteTinyArtifact(dir).ok());
  EXPECT_TRUE(Artifact::Open(dir).ok());
}

TEST(CommitArtifactDir, NeverReplacesSomethingElse) {
  TempFolder folder;
  std::string dir = folder.File("home");
  WriteFile(dir + "/precious.txt", "do not delete");
  ExpectError(test::WriteTinyArtifact(dir), {dir + ": exists and is not an llmc artifact"});
  EXPECT_EQ(ReadFile(dir + "/precious.txt"), "do not delete");
  std::string file = folder.File("a-file");
  WriteFile(file, "x");
  ExpectError(test::WriteTinyArtifact(file), {file + ": exists and is not a directory"});
}

TEST(CommitArtifactDir, RefusesAnUnfinishedArtifact) {
  TempFolder folder;
  std::string tmp = ArtifactTempDir(folder.File("model.llmc"));
  EXPECT_EQ(tmp, folder.File("model.llmc") + ".tmp-" + std::to_string(::getpid()));
  WriteFile(tmp + "/weights/rank0.bin", "partial");
  ExpectError(CommitArtifactDir(tmp, folder.File("model.llmc")),
              {tmp + ": not a finished artifact (manifest.json is missing)"});
  EXPECT_FALSE(fs::exists(folder.File("model.llmc")));
}

}  // namespace
}  // namespace llmc
