// Test helpers: a small but complete manifest, a temp folder, and a whole
// artifact written through the real writer (WeightFileWriter, WriteManifest,
// CommitArtifactDir), so every Open test starts from what the compiler makes.
#ifndef LLMC_TEST_UNIT_RUNTIME_ARTIFACT_ARTIFACT_TEST_UTIL_H_
#define LLMC_TEST_UNIT_RUNTIME_ARTIFACT_ARTIFACT_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "llmc/core/artifact/artifact_writer.h"
#include "llmc/core/artifact/cuda_abi.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/core/weight_format.h"

namespace llmc::test {

inline ModelConfig TinyConfig() {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 64;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.max_position = 128;
  return c;
}

struct TensorSpec {
  const char* name;
  const char* format;
  std::vector<int64_t> shape;
  int64_t group;
};

// Mixed formats and sizes; i8 [3, 64] (198 bytes) makes the next one need
// padding.
inline std::vector<TensorSpec> TinyTensors() {
  return {{"token_embd", "f32", {64, 64}, 0},
          {"blk.0.attn_q", "q4_1", {64, 64}, 0},
          {"blk.1.odd", "i8", {3, 64}, 64},
          {"blk.0.ffn_up", "i4", {128, 64}, 32},
          {"output_norm", "f16", {64}, 0}};
}

inline int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Deterministic contents of tensor `i`.
inline std::vector<uint8_t> TensorBytes(size_t i, const TensorSpec& t) {
  std::vector<uint8_t> bytes(WeightByteSize(t.format, Elements(t.shape), t.group));
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 7 + i * 31 + 1);
  return bytes;
}

// A valid manifest whose weights are TinyTensors() laid out as the writer
// lays them out (checksum a placeholder).
inline Manifest TinyManifest() {
  Manifest m;
  m.host_abi_version = 1;
  m.compiler = "llmc 0.1.0";
  m.source = "test/tiny.gguf";
  m.model = TinyConfig();
  m.targets = {"host"};
  m.activation_dtype = "f32";
  m.kv_dtype = "f16";
  m.weights.file = "weights/rank0.bin";
  m.weights.checksum = "0123456789abcdef";
  uint64_t offset = 0;
  for (const TensorSpec& t : TinyTensors()) {
    ManifestTensor mt;
    mt.name = t.name;
    mt.format = t.format;
    mt.shape = t.shape;
    mt.group = t.group;
    mt.offset = (offset + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
    mt.bytes = WeightByteSize(t.format, Elements(t.shape), t.group);
    offset = mt.offset + mt.bytes;
    m.weights.tensors.push_back(mt);
  }
  m.weights.size = offset;
  m.buffers = {{"hidden", "tokens", 256, "f32", 64}, {"logits", "logits", 256, "f32", 64}};
  m.kernels = {{"embed", "host", "llmc_embed", "gather f32 64x64", "T"},
               {"lm_head", "host", "llmc_lm_head", "linear q4_1 64x64", "L"}};
  m.steps = {{0, {0}, {0}, {}}, {1, {0, 1}, {1, 2, 3, 4}, {0, 1}}};
  m.logits_buffer = 1;
  m.host_library = "kernels/host/kernels.so";
  m.tokenizer = "tokenizer/tokenizer.json";
  m.bos_id = 1;
  m.eos_id = 2;
  return m;
}

// TinyManifest compiled for host, sm_80 and sm_90: an embedding, one split
// attention kernel per layer (two launches, the reduction only with several
// splits) and an LM head with a GEMV and a GEMM variant.
inline Manifest TinyCudaManifest() {
  Manifest m = TinyManifest();
  m.targets = {"host", "sm_80", "sm_90"};
  ManifestCuda& c = m.cuda;
  c.activation_dtype = "bf16";
  c.cuda_abi_version = LLMC_CUDA_ABI_VERSION;
  c.modules = {{"sm_80", "kernels/sm_80/kernels.ptx", "00000000000000aa",
                {{"llmc_cuda_embed", 24, 0, 0, 0, 0},
                 {"llmc_cuda_attn", 96, 16, 24, 4096, 32},
                 {"llmc_cuda_attn_reduce", 40, 0, 0, 512, 0},
                 {"llmc_cuda_gemv", 64, 0, 0, 0, 0},
                 {"llmc_cuda_gemm", 128, 0, 0, 32768, 0}}},
               {"sm_90", "kernels/sm_90/kernels.ptx", "00000000000000bb",
                {{"llmc_cuda_embed", 24, 0, 0, 0, 0}}}};
  c.kernels = {{"embed", "gather f32 64x64", {{"llmc_cuda_embed", "", {"T", "1", "1"}, 128}}},
               {"attn",
                "attention 4/2 x 16",
                {{"llmc_cuda_attn", "", {"T", "2", "splits"}, 128},
                 {"llmc_cuda_attn_reduce", "splits>1", {"T", "4", "1"}, 64}},
                256,
                4,
                16},
               {"lm_head",
                "linear q4_1 64x64",
                {{"llmc_cuda_gemv", "L<=8", {"cdiv(L,4)", "16", "1"}, 256},
                 {"llmc_cuda_gemm", "L>8", {"cdiv(L,64)", "1", "1"}, 128}}}};
  c.steps = {{0, {0}, {0}, {}, "embed"},
             {1, {0}, {}, {0}, "layers.0.attn"},
             {1, {0}, {}, {1}, "layers.1.attn"},
             {2, {0, 1}, {1, 2, 3, 4}, {}, "lm_head"}};
  return m;
}

// `json` with the first `needle` replaced by `replacement`, parsed (a test
// failure when the needle is absent: the edit would test nothing).
inline absl::StatusOr<Manifest> ParseEdited(std::string json, const std::string& needle,
                                            const std::string& replacement) {
  size_t at = json.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  if (at != std::string::npos) json.replace(at, needle.size(), replacement);
  return ManifestFromJson(json, "model.llmc/manifest.json");
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A fresh folder under the test temp dir, removed when the object dies.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = ::testing::TempDir() + "llmc_artifact_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes a complete artifact at `dir` the way the compiler does: into
// ArtifactTempDir(dir), manifest last, then CommitArtifactDir. `base` gives
// every field but the weights' checksum and size (TinyManifest's tensors);
// its CUDA modules are written as placeholder PTX, with their checksums.
inline absl::Status WriteTinyArtifact(const std::string& dir, Manifest* out = nullptr,
                                      const Manifest& base = TinyManifest()) {
  std::string tmp = ArtifactTempDir(dir);
  Manifest m = base;
  WeightFileWriter writer;
  if (auto st = writer.Open(tmp + "/" + m.weights.file); !st.ok()) return st;
  std::vector<TensorSpec> specs = TinyTensors();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<uint8_t> bytes = TensorBytes(i, specs[i]);
    auto t = writer.Add(specs[i].name, specs[i].format, specs[i].shape, specs[i].group,
                        bytes.data(), bytes.size());
    if (!t.ok()) return t.status();
  }
  if (auto st = writer.Finish(&m.weights); !st.ok()) return st;
  WriteFile(tmp + "/" + m.host_library,
            "\x7f"
            "ELF not really");
  WriteFile(tmp + "/" + m.tokenizer, "{}");
  for (ManifestCudaModule& mod : m.cuda.modules) {
    std::string ptx = "// placeholder PTX for " + mod.arch + "\n.version 8.0\n";
    WriteFile(tmp + "/" + mod.file, ptx);
    mod.checksum = ChecksumHex(reinterpret_cast<const uint8_t*>(ptx.data()), ptx.size());
  }
  if (auto st = WriteManifest(tmp, m); !st.ok()) return st;
  if (out != nullptr) *out = m;
  return CommitArtifactDir(tmp, dir);
}

// Expects an error whose message contains every one of `parts`.
template <typename T>
void ExpectError(const T& result, std::initializer_list<std::string> parts) {
  absl::Status status;
  if constexpr (std::is_same_v<T, absl::Status>)
    status = result;
  else
    status = result.status();
  ASSERT_FALSE(status.ok()) << "expected an error mentioning " << *parts.begin();
  std::string message(status.message());
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

}  // namespace llmc::test

#endif  // LLMC_TEST_UNIT_RUNTIME_ARTIFACT_ARTIFACT_TEST_UTIL_H_
