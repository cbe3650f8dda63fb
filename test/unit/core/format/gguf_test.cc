#include "llmc/core/format/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "gguf_builder.h"

namespace llmc {
namespace {

using testing::GgufBuilder;
using testing::GgufLayout;

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8;

absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::ParseBytes(bytes.data(), bytes.size(), "test.gguf");
}

// Parses `bytes`, expects failure and checks that the message names the file
// and contains every one of `parts`.
void ExpectError(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> parts) {
  auto r = Parse(bytes);
  ASSERT_FALSE(r.ok()) << "parsed a corrupt file";
  std::string msg(r.status().message());
  EXPECT_EQ(msg.rfind("test.gguf: ", 0), 0u) << msg;
  for (const auto& p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 1);
  return v;
}

// A file with one key of every scalar type, an array of every element type
// and two tensors.
GgufBuilder EveryType(uint32_t version) {
  GgufBuilder b;
  b.Version(version)
      .Str("general.architecture", "llama")
      .U8("t.u8", 200)
      .I8("t.i8", -100)
      .U16("t.u16", 60000)
      .I16("t.i16", -30000)
      .U32("t.u32", 4000000000u)
      .I32("t.i32", -2000000000)
      .U64("t.u64", 1ull << 40)
      .I64("t.i64", -(1ll << 40))
      .F32("t.f32", 0.25f)
      .F64("t.f64", -1e-300)
      .Bool("t.bool", true)
      .Str("t.str", "h\xC3\xA9llo")
      .Array<uint8_t>("a.u8", GgufType::kUint8, {1, 255})
      .Array<int8_t>("a.i8", GgufType::kInt8, {-1, 127})
      .Array<uint16_t>("a.u16", GgufType::kUint16, {65535})
      .Array<int16_t>("a.i16", GgufType::kInt16, {-32768})
      .Array<uint32_t>("a.u32", GgufType::kUint32, {4294967295u, 0})
      .Array<int32_t>("a.i32", GgufType::kInt32, {-5, 6, 7})
      .Array<uint64_t>("a.u64", GgufType::kUint64, {uint64_t{1} << 62})
      .Array<int64_t>("a.i64", GgufType::kInt64, {std::numeric_limits<int64_t>::min()})
      .Array<float>("a.f32", GgufType::kFloat32, {1.5f, -2.0f})
      .Array<double>("a.f64", GgufType::kFloat64, {3.25})
      .Array<uint8_t>("a.bool", GgufType::kBool, {1, 0, 1})
      .StrArray("a.str", {"a", "", "ccc"})
      .Array<uint32_t>("a.empty", GgufType::kUint32, {})
      .Tensor("w.f32", {4, 2}, kF32, Iota(32))
      .Tensor("w.q4_0", {32, 3}, kQ4_0, Iota(3 * 18));
  return b;
}

TEST(GgufReader, ParsesEveryValueTypeV3) {
  GgufLayout layout;
  std::vector<uint8_t> bytes = EveryType(3).Build(&layout);
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status();
  const GgufFile& f = **r;
  EXPECT_EQ(f.path(), "test.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), layout.data_begin);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  ASSERT_EQ(f.metadata().size(), 26u);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");  // file order kept

  // Scalars: the stored type, widened values.
  struct {
    const char* key;
    GgufType type;
  } types[] = {
      {"t.u8", GgufType::kUint8},    {"t.i8", GgufType::kInt8},    {"t.u16", GgufType::kUint16},
      {"t.i16", GgufType::kInt16},   {"t.u32", GgufType::kUint32}, {"t.i32", GgufType::kInt32},
      {"t.u64", GgufType::kUint64},  {"t.i64", GgufType::kInt64},  {"t.f32", GgufType::kFloat32},
      {"t.f64", GgufType::kFloat64}, {"t.bool", GgufType::kBool},  {"t.str", GgufType::kString}};
  for (const auto& t : types) {
    const GgufValue* v = f.Find(t.key);
    ASSERT_NE(v, nullptr) << t.key;
    EXPECT_EQ(v->type, t.type) << t.key;
  }
  EXPECT_EQ(std::get<uint64_t>(f.Find("t.u8")->scalar), 200u);
  EXPECT_EQ(std::get<int64_t>(f.Find("t.i8")->scalar), -100);
  EXPECT_EQ(*f.GetInt("t.u8"), 200);
  EXPECT_EQ(*f.GetInt("t.i8"), -100);
  EXPECT_EQ(*f.GetInt("t.u16"), 60000);
  EXPECT_EQ(*f.GetInt("t.i16"), -30000);
  EXPECT_EQ(*f.GetInt("t.u32"), 4000000000ll);
  EXPECT_EQ(*f.GetInt("t.i32"), -2000000000);
  EXPECT_EQ(*f.GetInt("t.u64"), 1ll << 40);
  EXPECT_EQ(*f.GetInt("t.i64"), -(1ll << 40));
  EXPECT_EQ(*f.GetFloat("t.f32"), 0.25);
  EXPECT_EQ(*f.GetFloat("t.f64"), -1e-300);
  EXPECT_EQ(*f.GetFloat("t.u32"), 4e9);  // integers convert
  EXPECT_EQ(*f.GetBool("t.bool"), true);
  EXPECT_EQ(*f.GetString("t.str"), "h\xC3\xA9llo");

  // Arrays: integers (and bools) in ints, floats in floats, strings in strings.
  auto ints = [&](const char* key) { return **f.GetIntArray(key); };
  EXPECT_EQ(ints("a.u8"), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(ints("a.i8"), (std::vector<int64_t>{-1, 127}));
  EXPECT_EQ(ints("a.u16"), (std::vector<int64_t>{65535}));
  EXPECT_EQ(ints("a.i16"), (std::vector<int64_t>{-32768}));
  EXPECT_EQ(ints("a.u32"), (std::vector<int64_t>{4294967295ll, 0}));
  EXPECT_EQ(ints("a.i32"), (std::vector<int64_t>{-5, 6, 7}));
  EXPECT_EQ(ints("a.u64"), (std::vector<int64_t>{1ll << 62}));
  EXPECT_EQ(ints("a.i64"), (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(ints("a.bool"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_TRUE(ints("a.empty").empty());
  EXPECT_EQ(**f.GetFloatArray("a.f32"), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(**f.GetFloatArray("a.f64"), (std::vector<double>{3.25}));
  EXPECT_EQ(**f.GetStringArray("a.str"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.Find("a.u16")->type, GgufType::kArray);
  EXPECT_EQ(f.Find("a.u16")->array_type, GgufType::kUint16);
  EXPECT_EQ(f.Find("a.bool")->array_type, GgufType::kBool);
  EXPECT_EQ(f.Find("missing"), nullptr);

  // Tensors: shape as stored (innermost first), sizes from the block table,
  // data pointers into the image.
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensorInfo* w = f.FindTensor("w.f32");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->ne, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(w->ggml_type, 0);
  EXPECT_EQ(w->num_elements(), 8);
  EXPECT_EQ(w->byte_size, 32u);
  EXPECT_EQ(w->offset, 0u);
  EXPECT_EQ(f.TensorData(*w), bytes.data() + layout.tensor_data_begin[0]);
  EXPECT_EQ(std::memcmp(f.TensorData(*w), Iota(32).data(), 32), 0);
  const GgufTensorInfo* q = f.FindTensor("w.q4_0");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ne, (std::vector<int64_t>{32, 3}));
  EXPECT_EQ(q->ggml_type, 2);
  EXPECT_EQ(q->num_elements(), 96);
  EXPECT_EQ(q->byte_size, 3u * 18);
  EXPECT_EQ(q->offset, 32u);  // 32 bytes of w.f32, already aligned
  EXPECT_EQ(std::memcmp(f.TensorData(*q), Iota(54).data(), 54), 0);
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

TEST(GgufReader, ParsesVersion2) {
  std::vector<uint8_t> bytes = EveryType(2).Build();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->version(), 2u);
  EXPECT_EQ((*r)->metadata().size(), 26u);
  EXPECT_EQ((*r)->tensors().size(), 2u);
}

TEST(GgufReader, ParsesEmptyFile) {
  // Just the header: no metadata, no tensors.
  auto r = Parse(GgufBuilder().Build());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->metadata().empty());
  EXPECT_TRUE((*r)->tensors().empty());
}

TEST(GgufReader, HonoursCustomAlignment) {
  GgufLayout layout;
  auto bytes =
      GgufBuilder().Alignment(64).Tensor("a", {3}, kF32).Tensor("b", {5}, kF16).Build(&layout);
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->alignment(), 64u);
  EXPECT_EQ((*r)->data_offset() % 64, 0u);
  EXPECT_EQ((*r)->FindTensor("b")->offset, 64u);
  EXPECT_EQ((*r)->FindTensor("b")->byte_size, 10u);
}

TEST(GgufReader, AcceptsTensorsOutOfOrderWithGaps) {
  // Offsets need not follow the info order, only be aligned and disjoint.
  GgufLayout layout;
  auto bytes = GgufBuilder()
                   .Tensor("late", {8}, kF32, {}, 64)
                   .Tensor("early", {8}, kF32, {}, 0)
                   .Build(&layout);
  bytes.resize(layout.data_begin + 96, 0);  // explicit offsets place no data: supply it
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->tensors()[0].name, "late");
  EXPECT_EQ((*r)->tensors()[0].offset, 64u);
  EXPECT_EQ((*r)->tensors()[1].offset, 0u);
}

TEST(GgufReader, BoolNonzeroIsTrue) {
  auto r = Parse(GgufBuilder().RawKv("b", 7, {2}).Build());  // llama.cpp reads any nonzero as true
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*(*r)->GetBool("b"));
}

TEST(GgufReader, OpensFileFromDisk) {
  std::string path = ::testing::TempDir() + "/llmc_gguf_test.gguf";
  auto bytes = EveryType(3).Build();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  auto r = GgufFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->path(), path);
  const GgufTensorInfo* w = (*r)->FindTensor("w.f32");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(std::memcmp((*r)->TensorData(*w), Iota(32).data(), 32), 0);
  std::remove(path.c_str());

  auto missing = GgufFile::Open(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path), std::string::npos) << missing.status();
}

TEST(GgufReader, ErrorsNameTheFileFromDisk) {
  std::string path = ::testing::TempDir() + "/llmc_gguf_bad.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out << "GGML not really";
  }
  auto r = GgufFile::Open(path);
  std::remove(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status();
}

// --- Header ---------------------------------------------------------------

TEST(GgufReader, RejectsBadMagic) {
  auto bytes = GgufBuilder().Build();
  bytes[3] = 'X';
  ExpectError(bytes, {"magic", "'GGUX'", "expected 'GGUF'"});
  bytes[0] = 0;
  ExpectError(bytes, {"magic", "'?GUX'", "00 47 55 58"});
}

TEST(GgufReader, RejectsUnsupportedVersions) {
  ExpectError(GgufBuilder().Version(1).Build(), {"version 1 is not supported"});
  ExpectError(GgufBuilder().Version(0).Build(), {"unsupported GGUF version 0", "supported: 2, 3"});
  ExpectError(GgufBuilder().Version(4).Build(), {"unsupported GGUF version 4"});
  ExpectError(GgufBuilder().Version(0x03000000).Build(), {"'version'", "big-endian"});
}

TEST(GgufReader, RejectsHugeCountsBeforeAllocating) {
  // Counts that the remaining bytes cannot hold fail at once, whatever their
  // size; nothing is reserved from them.
  ExpectError(GgufBuilder().KvCount(uint64_t{1} << 62).Build(),
              {"'kv_count'", "4611686018427387904"});
  ExpectError(GgufBuilder().KvCount(~uint64_t{0}).Build(), {"'kv_count'"});
  ExpectError(GgufBuilder().TensorCount(uint64_t{1} << 62).Build(), {"'tensor_count'"});
  ExpectError(GgufBuilder().Str("k", "v").TensorCount(1000).Build(), {"'tensor_count' is 1000"});
  ExpectError(GgufBuilder().Str("k", "v").KvCount(3).Build(), {"'kv_count' is 3"});
}

// --- Truncation -------------------------------------------------------------

TEST(GgufReader, EveryTruncationFailsCleanly) {
  GgufLayout layout;
  auto full = EveryType(3).Build(&layout);
  ASSERT_TRUE(Parse(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    // An exact-size copy, so that a sanitizer sees any read past the end.
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    auto r = Parse(cut);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(r.status().message().rfind("test.gguf: ", 0), 0u) << r.status();
  }
}

std::vector<uint8_t> Prefix(const std::vector<uint8_t>& v, size_t n) {
  return std::vector<uint8_t>(v.begin(), v.begin() + static_cast<ptrdiff_t>(n));
}

// The first pair pads each file below so that the header's count bounds
// still hold after the cut and the reader reaches the cut item itself.
GgufBuilder Padded() {
  GgufBuilder b;
  b.Str("pad", std::string(256, 'p'));
  return b;
}

TEST(GgufReader, TruncationMessagesNameTheField) {
  auto header = GgufBuilder().Build();
  ExpectError(Prefix(header, 2), {"truncated", "magic"});
  ExpectError(Prefix(header, 6), {"truncated", "header field 'version'"});
  ExpectError(Prefix(header, 12), {"truncated", "header field 'tensor_count'"});
  ExpectError(Prefix(header, 20), {"truncated", "header field 'kv_count'"});

  GgufLayout l;
  auto kv = Padded().U32("t.u32", 7).Build(&l);
  ExpectError(Prefix(kv, l.key_begin[1] + 3), {"key #1", "truncated", "key length at offset"});
  ExpectError(Prefix(kv, l.key_begin[1] + 8 + 2),
              {"key #1", "truncated", "key length 5", "exceeds the 2 bytes that remain"});
  ExpectError(Prefix(kv, l.value_begin[1] + 2), {"key 't.u32'", "truncated", "value type"});
  ExpectError(Prefix(kv, l.value_begin[1] + 4 + 3), {"key 't.u32'", "truncated", "uint32 value"});

  auto str = Padded().Str("t.str", "hello!").Build(&l);
  ExpectError(Prefix(str, l.value_begin[1] + 4 + 5),
              {"key 't.str'", "truncated", "string value length at offset"});
  ExpectError(Prefix(str, l.value_begin[1] + 4 + 8 + 2),
              {"key 't.str'", "truncated", "string value length 6", "exceeds the 2 bytes"});

  auto arr = Padded().Array<int32_t>("a.i32", GgufType::kInt32, {-5, 6, 7}).Build(&l);
  size_t v = l.value_begin[1] + 4;  // after the value type
  ExpectError(Prefix(arr, v + 1), {"key 'a.i32'", "truncated", "array element type"});
  ExpectError(Prefix(arr, v + 4 + 3), {"key 'a.i32'", "truncated", "array count"});
  ExpectError(Prefix(arr, v + 12 + 5),
              {"key 'a.i32'", "truncated", "array of 3 int32", "needs at least 12 bytes"});

  auto sarr = Padded().StrArray("a.str", {"a", "", "ccc"}).Build(&l);
  v = l.value_begin[1] + 4 + 12;  // the first element: "a" (9 bytes), "" (8), "ccc" (11)
  ExpectError(Prefix(sarr, v + 9 + 8 + 8 + 1),
              {"key 'a.str'", "truncated", "string element 2 length 3"});

  auto ti = Padded().Tensor("w.f32", {4, 2}, kF32).Tensor("w.q4_0", {32, 3}, kQ4_0).Build(&l);
  size_t t1 = l.tensor_info_begin[1];  // name "w.q4_0" (6 bytes)
  ExpectError(Prefix(ti, t1 + 5), {"tensor #1", "truncated", "name length"});
  ExpectError(Prefix(ti, t1 + 8 + 3), {"tensor #1", "truncated", "name length 6"});
  ExpectError(Prefix(ti, t1 + 8 + 6 + 2), {"tensor 'w.q4_0'", "truncated", "n_dims"});
  ExpectError(Prefix(ti, t1 + 8 + 6 + 4 + 12), {"tensor 'w.q4_0'", "truncated", "ne[1]"});
  ExpectError(Prefix(ti, t1 + 8 + 6 + 4 + 16 + 1), {"tensor 'w.q4_0'", "truncated", "ggml type"});
  ExpectError(Prefix(ti, t1 + 8 + 6 + 4 + 16 + 4 + 7), {"tensor 'w.q4_0'", "truncated", "offset"});
  // Inside the data of the last tensor.
  ExpectError(Prefix(ti, ti.size() - 1),
              {"tensor 'w.q4_0'", "data [offset 32, 54 bytes] runs past the end of the file",
               "(size " + std::to_string(ti.size() - 1)});
}

// --- Strings and arrays -----------------------------------------------------

TEST(GgufReader, RejectsLyingStringLengths) {
  // A key length far beyond the key cap and the file.
  testing::ByteWriter w;
  w.Raw("GGUF", 4).U32(3).U64(0).U64(1).U64(uint64_t{1} << 40).Raw("abcdefghijklmn", 14);
  ExpectError(w.bytes(), {"key #0", "key length 1099511627776", "exceeds the limit of 65535"});
  // A string value longer than the bytes left.
  ExpectError(GgufBuilder().RawKv("s", 8, {0xe8, 0x03, 0, 0, 0, 0, 0, 0, 'x', 'y'}).Build(),
              {"key 's'", "truncated", "string value length 1000", "bytes that remain"});
  // A string value above the 64 MiB cap (checked before the remaining bytes).
  testing::ByteWriter big;
  big.U64((64ull << 20) + 1).Raw("x", 1);
  ExpectError(GgufBuilder().RawKv("s", 8, big.bytes()).Build(),
              {"key 's'", "string value length 67108865", "limit of 67108864"});
  // A tensor name above GGML's 63-byte limit.
  ExpectError(GgufBuilder().Tensor(std::string(64, 'n'), {1}, kF32).Build(),
              {"tensor #0", "name length 64", "limit of 63"});
}

TEST(GgufReader, RejectsLyingArrayCounts) {
  testing::ByteWriter w;
  w.U32(4).U64(1000).U32(1).U32(2);  // 1000 uint32 claimed, 2 present
  ExpectError(GgufBuilder().RawKv("arr", 9, w.bytes()).Build(),
              {"key 'arr'", "array of 1000 uint32", "needs at least 4000 bytes"});
  testing::ByteWriter s;
  s.U32(8).U64(1u << 20).U64(1).Raw("a", 1);  // a million strings claimed
  ExpectError(GgufBuilder().RawKv("toks", 9, s.bytes()).Build(),
              {"key 'toks'", "array of 1048576 string", "needs at least 8388608 bytes"});
}

TEST(GgufReader, RejectsHugeArrayCountsWithoutAllocating) {
  for (uint64_t count : {uint64_t{1} << 24 | 1, uint64_t{1} << 40, ~uint64_t{0}}) {
    for (uint32_t elem : {0u, 8u, 12u}) {
      testing::ByteWriter w;
      w.U32(elem).U64(count).U64(0);
      ExpectError(GgufBuilder().RawKv("arr", 9, w.bytes()).Build(),
                  {"key 'arr'", "array count " + std::to_string(count), "limit of 16777216"});
    }
  }
}

TEST(GgufReader, RejectsUnknownValueTypes) {
  ExpectError(GgufBuilder().RawKv("x", 13, {0, 0, 0, 0}).Build(),
              {"key 'x'", "unknown value type 13"});
  ExpectError(GgufBuilder().RawKv("x", 0xFFFFFFFF, {}).Build(),
              {"key 'x'", "unknown value type 4294967295"});
  testing::ByteWriter w;
  w.U32(99).U64(1).U32(0);
  ExpectError(GgufBuilder().RawKv("x", 9, w.bytes()).Build(),
              {"key 'x'", "unknown array element type 99"});
}

TEST(GgufReader, RejectsArraysOfArrays) {
  testing::ByteWriter w;
  w.U32(9).U64(1).U32(4).U64(0);
  ExpectError(GgufBuilder().RawKv("nested", 9, w.bytes()).Build(),
              {"key 'nested'", "arrays of arrays"});
}

TEST(GgufReader, RejectsUint64ArrayElementsAboveInt64) {
  ExpectError(
      GgufBuilder().Array<uint64_t>("big", GgufType::kUint64, {1, uint64_t{1} << 63}).Build(),
      {"key 'big'", "uint64 element 1 is 9223372036854775808"});
}

TEST(GgufReader, RejectsDuplicateAndEmptyKeys) {
  ExpectError(GgufBuilder().U32("a", 1).Str("b", "x").U8("a", 2).Build(),
              {"key 'a'", "duplicate key"});
  ExpectError(GgufBuilder().U32("", 1).Build(), {"key #0", "key is empty"});
}

// --- Alignment ----------------------------------------------------------------

TEST(GgufReader, RejectsBadAlignment) {
  ExpectError(GgufBuilder().Alignment(0).Build(), {"'general.alignment'", "is 0", "power of two"});
  ExpectError(GgufBuilder().Alignment(3).Build(), {"'general.alignment'", "is 3"});
  ExpectError(GgufBuilder().Alignment(48).Build(), {"'general.alignment'", "is 48"});
  ExpectError(GgufBuilder().U64("general.alignment", uint64_t{1} << 40).Build(),
              {"'general.alignment'", "is 1099511627776"});
  ExpectError(GgufBuilder().I32("general.alignment", -32).Build(),
              {"'general.alignment'", "is -32"});
  ExpectError(GgufBuilder().Str("general.alignment", "32").Build(),
              {"'general.alignment'", "has type string"});
  // Any integer type holding a power of two is accepted.
  auto r = Parse(GgufBuilder().U64("general.alignment", 16).Build());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->alignment(), 16u);
}

// --- Tensor infos -----------------------------------------------------------

TEST(GgufReader, RejectsMisalignedTensorOffsets) {
  ExpectError(GgufBuilder().Tensor("w", {4}, kF32, {}, 16).Build(),
              {"tensor 'w'", "offset 16 is not a multiple of the alignment 32"});
  ExpectError(GgufBuilder().Alignment(64).Tensor("w", {4}, kF32, {}, 32).Build(),
              {"tensor 'w'", "offset 32 is not a multiple of the alignment 64"});
}

TEST(GgufReader, RejectsTensorsPastTheEndOfTheFile) {
  ExpectError(GgufBuilder().Tensor("w", {4}, kF32, {}, 4096).Build(),
              {"tensor 'w'", "data [offset 4096, 16 bytes] runs past the end of the file"});
  // Offsets near 2^64 must not wrap around.
  ExpectError(GgufBuilder().Tensor("w", {4}, kF32, {}, ~uint64_t{0} - 31).Build(),
              {"tensor 'w'", "runs past the end of the file"});
  // A huge tensor whose size alone exceeds the file.
  ExpectError(GgufBuilder().Tensor("w", {uint64_t{1} << 40, 4}, kQ8_0, {}, 0).Build(),
              {"tensor 'w'", "runs past the end of the file"});
}

TEST(GgufReader, RejectsOverlappingTensors) {
  auto bytes = GgufBuilder()
                   .Tensor("a", {16}, kF32)          // data 0..64
                   .Tensor("b", {16}, kF32, {}, 32)  // 32..96: overlaps a and c
                   .Tensor("c", {16}, kF32)          // 64..128
                   .Build();
  ExpectError(
      bytes, {"tensor 'b'", "data [offset 32, 64 bytes] overlaps tensor 'a' [offset 0, 64 bytes]"});
  // Two tensors at the same offset.
  auto same = GgufBuilder().Tensor("a", {16}, kF32).Tensor("b", {4}, kF32, {}, 0).Build();
  ExpectError(same, {"overlaps tensor"});
}

TEST(GgufReader, RejectsUnknownGgmlTypes) {
  ExpectError(
      GgufBuilder().Tensor("blk.0.attn_q.weight", {32}, 9, std::vector<uint8_t>(36)).Build(),
      {"tensor 'blk.0.attn_q.weight'", "unsupported ggml type 9"});
  ExpectError(GgufBuilder().Tensor("w", {32}, 99, std::vector<uint8_t>(36)).Build(),
              {"tensor 'w'", "unsupported ggml type 99", "q4_k=12"});
  ExpectError(GgufBuilder().Tensor("w", {32}, 0x80000000u, std::vector<uint8_t>(36)).Build(),
              {"tensor 'w'", "unsupported ggml type 2147483648"});
}

TEST(GgufReader, RejectsRowsThatAreNotWholeBlocks) {
  ExpectError(GgufBuilder().Tensor("w", {16, 2}, kQ4_0, std::vector<uint8_t>(18)).Build(),
              {"tensor 'w'", "ne[0] = 16 is not a multiple of the q4_0 block size 32"});
}

TEST(GgufReader, RejectsBadDimensions) {
  ExpectError(GgufBuilder().Tensor("w", {1, 1, 1, 1, 1}, kF32, {0, 0, 0, 0}).Build(),
              {"tensor 'w'", "n_dims is 5", "between 1 and 4"});
  ExpectError(GgufBuilder().Tensor("w", {}, kF32, {0, 0, 0, 0}).Build(),
              {"tensor 'w'", "n_dims is 0"});
  ExpectError(GgufBuilder().Tensor("w", {4, 0}, kF32, {}, 0).Build(),
              {"tensor 'w'", "ne[1] is 0", "must be positive"});
  ExpectError(GgufBuilder().Tensor("w", {uint64_t{1} << 63}, kF32, {}, 0).Build(),
              {"tensor 'w'", "ne[0] is 9223372036854775808"});
  ExpectError(
      GgufBuilder().Tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, kF32, {}, 0).Build(),
      {"tensor 'w'", "more than 2^63 elements"});
  // Elements fit in int64 but f32 bytes do not fit in 64 bits.
  ExpectError(GgufBuilder().Tensor("w", {uint64_t{1} << 61, 2}, kF32, {}, 0).Build(),
              {"tensor 'w'", "byte size"});
  ExpectError(GgufBuilder().Tensor("w", {uint64_t{1} << 62}, kF32, {}, 0).Build(),
              {"tensor 'w'", "byte size"});
}

TEST(GgufReader, RejectsDuplicateAndEmptyTensorNames) {
  ExpectError(
      GgufBuilder().Tensor("w", {4}, kF32).Tensor("v", {4}, kF32).Tensor("w", {4}, kF32).Build(),
      {"tensor 'w'", "duplicate tensor name"});
  ExpectError(GgufBuilder().Tensor("", {4}, kF32).Build(), {"tensor #0", "name is empty"});
}

// --- Typed getters ------------------------------------------------------------

TEST(GgufReader, TypedGettersNameTheKeyAndType) {
  auto r = Parse(EveryType(3).U64("t.huge", ~uint64_t{0}).Build());
  ASSERT_TRUE(r.ok()) << r.status();
  const GgufFile& f = **r;
  auto msg = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_EQ(msg(f.GetInt("nope").status()), "test.gguf: key 'nope' is missing");
  EXPECT_TRUE(absl::IsNotFound(f.GetString("nope").status()));
  EXPECT_EQ(msg(f.GetInt("t.str").status()),
            "test.gguf: key 't.str' has type string, expected an integer");
  EXPECT_EQ(msg(f.GetInt("t.f32").status()),
            "test.gguf: key 't.f32' has type float32, expected an integer");
  EXPECT_EQ(msg(f.GetInt("t.bool").status()),
            "test.gguf: key 't.bool' has type bool, expected an integer");
  EXPECT_EQ(msg(f.GetInt("a.u32").status()),
            "test.gguf: key 'a.u32' has type array of uint32, expected an integer");
  EXPECT_EQ(msg(f.GetInt("t.huge").status()),
            "test.gguf: key 't.huge' is 18446744073709551615, above the int64 range");
  EXPECT_EQ(msg(f.GetString("t.u8").status()),
            "test.gguf: key 't.u8' has type uint8, expected string");
  EXPECT_EQ(msg(f.GetFloat("t.str").status()),
            "test.gguf: key 't.str' has type string, expected a number");
  EXPECT_EQ(msg(f.GetBool("t.u8").status()), "test.gguf: key 't.u8' has type uint8, expected bool");
  EXPECT_EQ(msg(f.GetStringArray("a.u8").status()),
            "test.gguf: key 'a.u8' has type array of uint8, expected array of string");
  EXPECT_EQ(msg(f.GetIntArray("a.f32").status()),
            "test.gguf: key 'a.f32' has type array of float32, expected an array of integers");
  EXPECT_EQ(msg(f.GetFloatArray("t.f32").status()),
            "test.gguf: key 't.f32' has type float32, expected an array of floats");
  EXPECT_EQ(*f.GetFloat("t.i64"), -1099511627776.0);
}

TEST(GgufReader, ParsesTheFuzzSeeds) {
  // The seeds of test/fuzz/gguf_fuzzer.cc (scripts/gen-gguf-fuzz-seeds.py),
  // which gguf-py's reader also accepts; only "truncated" is corrupt.
  const std::string dir = std::string(LLMC_TEST_DATA_DIR) + "/../fuzz/corpus/gguf/";
  for (const char* name : {"empty_v3", "every_type_v2", "llama_tiny", "qwen2_tiny_untied",
                           "llama_rope_linear", "every_format_align64", "kquants_two_rows"}) {
    auto r = GgufFile::Open(dir + name + ".gguf");
    EXPECT_TRUE(r.ok()) << name << ": " << r.status();
  }
  auto every = GgufFile::Open(dir + "every_format_align64.gguf");
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ((*every)->tensors().size(), 13u);  // every format llmc reads
  auto truncated = GgufFile::Open(dir + "truncated.gguf");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated.gguf: "), std::string::npos);
}

TEST(GgufReader, TypeNames) {
  EXPECT_STREQ(ToString(GgufType::kUint8), "uint8");
  EXPECT_STREQ(ToString(GgufType::kFloat64), "float64");
  EXPECT_STREQ(ToString(GgufType::kArray), "array");
  EXPECT_STREQ(ToString(static_cast<GgufType>(77)), "unknown");
}

TEST(GgufReader, ParseRejectsNullInputs) {
  EXPECT_FALSE(GgufFile::Parse(nullptr).ok());
  EXPECT_FALSE(GgufFile::ParseBytes(nullptr, 10, "x.gguf").ok());
  auto empty = GgufFile::ParseBytes(nullptr, 0, "x.gguf");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("x.gguf: truncated: magic"), std::string::npos)
      << empty.status();
}

}  // namespace
}  // namespace llmc
