#include "llmc/core/format/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "safetensors_writer.h"

namespace llmc {
namespace {

using test::BuildSafetensors;
using test::Bytes;
using test::RawSafetensors;
using test::TempFolder;
using test::TensorSpec;

const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

absl::StatusOr<std::vector<SafetensorsTensor>> Parse(const std::string& image,
                                                     const std::string& name = "bad.safetensors") {
  return ParseSafetensorsHeader(U8(image), image.size(), name);
}

// Every error must say which file and which tensor or field is at fault.
template <typename T>
void ExpectError(const absl::StatusOr<T>& result, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(result.ok()) << "expected an error mentioning " << *parts.begin();
  std::string message(result.status().message());
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

// A one-tensor header around `entry`, with `data_size` bytes of data.
std::string OneTensor(const std::string& entry, size_t data_size = 16) {
  return RawSafetensors("{\"w\":" + entry + "}", std::string(data_size, '\0'));
}

std::vector<TensorSpec> AllDtypes() {
  return {
      {"f32", "F32", {2, 3}, Bytes<float>({1.5f, -2.f, 0.f, 3.25f, 4.f, -0.5f})},
      {"f16", "F16", {4}, Bytes<uint16_t>({0x3C00, 0xC000, 0x0000, 0x7BFF})},  // 1, -2, 0, 65504
      {"bf16", "BF16", {2}, Bytes<uint16_t>({0x3F80, 0xC040})},                // 1, -3
      {"i8", "I8", {1, 3}, Bytes<int8_t>({-3, 7, 127})},
  };
}

TEST(SafetensorsHeader, ParsesAllFourDtypes) {
  std::string image = BuildSafetensors(AllDtypes(), R"({"format":"pt"})");
  auto tensors = Parse(image, "all.safetensors");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 4u);
  // Data order, not header (alphabetical) order.
  const SafetensorsTensor& f32 = (*tensors)[0];
  EXPECT_EQ(f32.name, "f32");
  EXPECT_EQ(f32.dtype, "F32");
  EXPECT_EQ(f32.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f32.byte_size, 24u);
  EXPECT_EQ(f32.file, "all.safetensors");
  float values[6];
  std::memcpy(values, f32.data, sizeof(values));
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[5], -0.5f);

  const SafetensorsTensor& f16 = (*tensors)[1];
  EXPECT_EQ(f16.dtype, "F16");
  EXPECT_EQ(f16.byte_size, 8u);
  uint16_t half;
  std::memcpy(&half, f16.data + 2, 2);
  EXPECT_EQ(half, 0xC000);

  const SafetensorsTensor& bf16 = (*tensors)[2];
  EXPECT_EQ(bf16.dtype, "BF16");
  EXPECT_EQ(bf16.shape, (std::vector<int64_t>{2}));
  std::memcpy(&half, bf16.data, 2);
  EXPECT_EQ(half, 0x3F80);

  const SafetensorsTensor& i8 = (*tensors)[3];
  EXPECT_EQ(i8.dtype, "I8");
  EXPECT_EQ(i8.byte_size, 3u);
  EXPECT_EQ(static_cast<int8_t>(i8.data[0]), -3);
  EXPECT_EQ(static_cast<int8_t>(i8.data[2]), 127);
  // Pointers land inside the image, right after the header.
  EXPECT_GE(f32.data, U8(image) + 8);
  EXPECT_LE(i8.data + i8.byte_size, U8(image) + image.size());
}

TEST(SafetensorsHeader, AcceptsScalarsEmptyTensorsAndOtherDtypes) {
  std::string image = BuildSafetensors({
      {"scalar", "F64", {}, Bytes<double>({2.5})},
      {"empty", "F32", {0, 4}, ""},
      {"flags", "BOOL", {2}, std::string("\x01\x00", 2)},
      {"ids", "I64", {1}, Bytes<int64_t>({42})},
  });
  auto tensors = Parse(image);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 4u);
  EXPECT_EQ((*tensors)[0].name, "scalar");
  EXPECT_TRUE((*tensors)[0].shape.empty());
  EXPECT_EQ((*tensors)[0].byte_size, 8u);
  EXPECT_EQ((*tensors)[1].name, "empty");  // zero bytes, sorts at its offset
  EXPECT_EQ((*tensors)[1].byte_size, 0u);
}

TEST(SafetensorsHeader, EmptyHeaderObjectHasNoTensors) {
  auto tensors = Parse(RawSafetensors("{}"));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_TRUE(tensors->empty());
}

TEST(SafetensorsHeader, ErrorTruncatedHeaderLength) {
  ExpectError(Parse(std::string(5, '\0'), "short.safetensors"),
              {"short.safetensors", "5 bytes", "header length"});
}

TEST(SafetensorsHeader, ErrorHeaderLengthPastEndOfFile) {
  std::string image = RawSafetensors("{\"a\":1}");
  image[0] = static_cast<char>(200);  // claims 200 header bytes, 7 follow
  ExpectError(Parse(image, "cut.safetensors"),
              {"cut.safetensors", "header length 200", "past the end of the file"});
}

TEST(SafetensorsHeader, ErrorHeaderLengthOverCap) {
  std::string image = RawSafetensors("{}");
  image[7] = 1;  // 2^56 + 2 bytes
  ExpectError(Parse(image, "huge.safetensors"), {"huge.safetensors", "exceeds the limit"});
}

TEST(SafetensorsHeader, ErrorHeaderNotJson) {
  ExpectError(Parse(RawSafetensors("{\"w\": {dtype"), "junk.safetensors"),
              {"junk.safetensors", "header", "invalid JSON", "line 1"});
}

TEST(SafetensorsHeader, ErrorHeaderNotAnObject) {
  ExpectError(Parse(RawSafetensors("[1, 2]"), "array.safetensors"),
              {"array.safetensors", "header must be a JSON object", "an array"});
}

TEST(SafetensorsHeader, ErrorTensorEntryNotAnObject) {
  ExpectError(Parse(OneTensor("\"F32\"")), {"bad.safetensors", "tensor 'w'", "must be an object"});
}

TEST(SafetensorsHeader, ErrorMissingDtype) {
  ExpectError(Parse(OneTensor(R"({"shape":[4],"data_offsets":[0,16]})")),
              {"bad.safetensors", "tensor 'w'", "missing field 'dtype'"});
}

TEST(SafetensorsHeader, ErrorMissingShape) {
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","data_offsets":[0,16]})")),
              {"bad.safetensors", "tensor 'w'", "missing field 'shape'"});
}

TEST(SafetensorsHeader, ErrorMissingDataOffsets) {
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[4]})")),
              {"bad.safetensors", "tensor 'w'", "missing field 'data_offsets'"});
}

TEST(SafetensorsHeader, ErrorWrongFieldTypes) {
  ExpectError(Parse(OneTensor(R"({"dtype":4,"shape":[4],"data_offsets":[0,16]})")),
              {"tensor 'w'", "'dtype' must be a string"});
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":"4","data_offsets":[0,16]})")),
              {"tensor 'w'", "'shape' must be an array"});
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[4.5],"data_offsets":[0,16]})")),
              {"tensor 'w'", "dimension 0 must be a non-negative integer"});
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[4],"data_offsets":[0]})")),
              {"tensor 'w'", "'data_offsets' must be two non-negative integers", "[0]"});
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[4],"data_offsets":[-4,12]})")),
              {"tensor 'w'", "'data_offsets'", "[-4, 12]"});
}

TEST(SafetensorsHeader, ErrorUnknownDtype) {
  ExpectError(Parse(OneTensor(R"({"dtype":"Q4_K","shape":[4],"data_offsets":[0,16]})")),
              {"bad.safetensors", "tensor 'w'", "unknown dtype 'Q4_K'", "BF16"});
}

TEST(SafetensorsHeader, ErrorOffsetsPastData) {
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[16],"data_offsets":[0,64]})", 16)),
              {"bad.safetensors", "tensor 'w'",
               "data_offsets [0, 64] run past the data section (16 bytes)"});
}

TEST(SafetensorsHeader, ErrorOffsetsReversed) {
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})")),
              {"tensor 'w'", "[8, 4]", "begin is after end"});
}

TEST(SafetensorsHeader, ErrorSizeMismatch) {
  std::string image =
      RawSafetensors(R"({"model.norm.weight":{"dtype":"F32","shape":[576],"data_offsets":[0,10]}})",
                     std::string(10, '\0'));
  ExpectError(Parse(image, "model-00002-of-00002.safetensors"),
              {"model-00002-of-00002.safetensors: tensor 'model.norm.weight': data_offsets [0, 10] "
               "hold 10 bytes but shape [576] of F32 needs 2304"});
}

TEST(SafetensorsHeader, ErrorShapeOverflow) {
  ExpectError(
      Parse(OneTensor(R"({"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,16]})")),
      {"tensor 'w'", "overflows"});
}

TEST(SafetensorsHeader, ErrorOverlappingTensors) {
  std::string image = RawSafetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     std::string(12, '\0'));
  ExpectError(Parse(image, "overlap.safetensors"),
              {"overlap.safetensors", "tensor 'b'", "[4, 12] overlap tensor 'a' at [0, 8]"});
}

TEST(SafetensorsHeader, EmptyTensorsMayShareAnOffset) {
  std::string image = RawSafetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                                     std::string(8, '\0'));
  EXPECT_TRUE(Parse(image).ok());
}

TEST(SafetensorsHeader, ErrorNegativeDimension) {
  ExpectError(Parse(OneTensor(R"({"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]})")),
              {"bad.safetensors", "tensor 'w'", "shape [2, -2]", "dimension 1 is negative"});
}

TEST(SafetensorsHeader, ErrorDuplicateNameInHeader) {
  std::string image = RawSafetensors(R"({"w":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},)"
                                     R"("w":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}})",
                                     std::string(2, '\0'));
  ExpectError(Parse(image), {"bad.safetensors", "tensor 'w'", "appears twice"});
}

TEST(SafetensorsHeader, ErrorMetadataNotStrings) {
  ExpectError(Parse(RawSafetensors(R"({"__metadata__":{"format":"pt","step":3}})")),
              {"bad.safetensors", "'__metadata__'", "key 'step'", "string"});
  ExpectError(Parse(RawSafetensors(R"({"__metadata__":[1]})")),
              {"bad.safetensors", "'__metadata__' must be an object"});
}

class SafetensorsModelTest : public ::testing::Test {
 protected:
  // Two shards plus an index, as transformers writes a sharded checkpoint.
  void WriteSharded(const std::string& index_json) {
    dir_.Write(
        "model-00001-of-00002.safetensors",
        BuildSafetensors({{"model.embed_tokens.weight", "BF16", {4, 2}, std::string(16, '\1')},
                          {"model.layers.0.mlp.up_proj.weight", "I8", {2, 2}, "\1\2\3\4"}}));
    dir_.Write("model-00002-of-00002.safetensors",
               BuildSafetensors({{"model.norm.weight", "F32", {2}, Bytes<float>({0.5f, 2.f})},
                                 {"lm_head.weight", "F16", {4, 2}, std::string(16, '\2')}}));
    dir_.Write("model.safetensors.index.json", index_json);
  }
  static std::string GoodIndex() {
    return R"({"metadata":{"total_size":52},"weight_map":{
      "lm_head.weight":"model-00002-of-00002.safetensors",
      "model.embed_tokens.weight":"model-00001-of-00002.safetensors",
      "model.layers.0.mlp.up_proj.weight":"model-00001-of-00002.safetensors",
      "model.norm.weight":"model-00002-of-00002.safetensors"}})";
  }
  TempFolder dir_;
};

TEST_F(SafetensorsModelTest, OpensSingleFile) {
  std::string path = dir_.Write("weights.safetensors", BuildSafetensors(AllDtypes()));
  auto model = SafetensorsModel::Open(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->tensors().size(), 4u);
  const SafetensorsTensor* bf16 = (*model)->Find("bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->file, path);
  uint16_t first;
  std::memcpy(&first, bf16->data, 2);
  EXPECT_EQ(first, 0x3F80);
  EXPECT_EQ((*model)->Find("missing"), nullptr);
}

TEST_F(SafetensorsModelTest, OpensFolderWithModelSafetensors) {
  dir_.Write("model.safetensors", BuildSafetensors(AllDtypes()));
  auto model = SafetensorsModel::Open(dir_.path());
  ASSERT_TRUE(model.ok()) << model.status();
  const SafetensorsTensor* i8 = (*model)->Find("i8");
  ASSERT_NE(i8, nullptr);
  EXPECT_EQ(i8->shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(static_cast<int8_t>(i8->data[1]), 7);
}

TEST_F(SafetensorsModelTest, OpensShardedFolder) {
  WriteSharded(GoodIndex());
  auto model = SafetensorsModel::Open(dir_.path());
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& tensors = (*model)->tensors();
  ASSERT_EQ(tensors.size(), 4u);
  // Shard by shard, data order within each.
  EXPECT_EQ(tensors[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(tensors[1].name, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(tensors[2].name, "model.norm.weight");
  EXPECT_EQ(tensors[3].name, "lm_head.weight");
  const SafetensorsTensor* norm = (*model)->Find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->file, dir_.File("model-00002-of-00002.safetensors"));
  float values[2];
  std::memcpy(values, norm->data, sizeof(values));
  EXPECT_EQ(values[1], 2.f);
  const SafetensorsTensor* up = (*model)->Find("model.layers.0.mlp.up_proj.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->dtype, "I8");
  EXPECT_EQ(up->data[3], 4);
  // The index can also be named directly.
  EXPECT_TRUE(SafetensorsModel::Open(dir_.File("model.safetensors.index.json")).ok());
}

TEST_F(SafetensorsModelTest, ErrorFolderWithoutWeights) {
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {dir_.path(), "model.safetensors", "model.safetensors.index.json"});
}

TEST_F(SafetensorsModelTest, ErrorMissingFile) {
  ExpectError(SafetensorsModel::Open(dir_.File("nope.safetensors")), {"nope.safetensors"});
}

TEST_F(SafetensorsModelTest, ErrorInShardNamesTheShard) {
  dir_.Write("model.safetensors", RawSafetensors("not json"));
  ExpectError(SafetensorsModel::Open(dir_.path()), {"model.safetensors", "invalid JSON"});
}

TEST_F(SafetensorsModelTest, ErrorIndexPointsToMissingShard) {
  WriteSharded(R"({"weight_map":{
      "model.norm.weight":"model-00002-of-00002.safetensors",
      "model.extra.weight":"model-00003-of-00003.safetensors"}})");
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model.safetensors.index.json", "tensor 'model.extra.weight'",
               "shard 'model-00003-of-00003.safetensors'", "does not exist"});
}

TEST_F(SafetensorsModelTest, ErrorTensorMissingFromShard) {
  WriteSharded(R"({"weight_map":{
      "model.embed_tokens.weight":"model-00001-of-00002.safetensors",
      "model.norm.weight":"model-00001-of-00002.safetensors"}})");
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model.safetensors.index.json", "tensor 'model.norm.weight'",
               "shard 'model-00001-of-00002.safetensors'", "does not contain it"});
}

TEST_F(SafetensorsModelTest, ErrorDuplicateAcrossShards) {
  WriteSharded(GoodIndex());
  dir_.Write("model-00002-of-00002.safetensors",
             BuildSafetensors({{"model.norm.weight", "F32", {2}, Bytes<float>({0.5f, 2.f})},
                               {"model.embed_tokens.weight", "BF16", {4, 2}, std::string(16, '\1')},
                               {"lm_head.weight", "F16", {4, 2}, std::string(16, '\2')}}));
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model-00002-of-00002.safetensors: tensor 'model.embed_tokens.weight'",
               "also appears in", "model-00001-of-00002.safetensors"});
}

TEST_F(SafetensorsModelTest, ErrorBadIndex) {
  WriteSharded(R"({"metadata":{}})");
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model.safetensors.index.json", "missing field 'weight_map'"});
  WriteSharded(R"({"weight_map":{"a":3}})");
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model.safetensors.index.json", "tensor 'a'", "file name"});
  WriteSharded(R"({"weight_map":{"a":"../model.safetensors"}})");
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model.safetensors.index.json", "tensor 'a'", "not a file name"});
  WriteSharded("{\"weight_map\":");
  ExpectError(SafetensorsModel::Open(dir_.path()),
              {"model.safetensors.index.json", "invalid JSON"});
}

}  // namespace
}  // namespace llmc
