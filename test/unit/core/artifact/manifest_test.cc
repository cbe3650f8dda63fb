#include "llmc/core/artifact/manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "artifact_test_util.h"

namespace llmc {
namespace {

using test::ExpectError;
using test::TinyManifest;

constexpr const char* kPath = "model.llmc/manifest.json";

// A manifest with every field away from its default.
Manifest FullManifest() {
  Manifest m = TinyManifest();
  m.host_abi_version = 1;
  m.compiler = "llmc 9.9.9 (test)";
  m.source = "models/t\xc3\xa9st.gguf";
  m.targets = {"host", "sm_90"};
  m.activation_dtype = "bf16";
  m.kv_dtype = "f32";
  ModelConfig& c = m.model;
  c.architecture = "qwen2";
  c.max_position = 4096;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 500000.0;
  c.rope_scaling.kind = RopeScaling::Kind::kLlama3;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.5;
  c.rope_scaling.high_freq_factor = 4.25;
  c.rope_scaling.original_max_position = 2048;
  c.rope_style = RopeStyle::kInterleaved;
  c.activation = Activation::kGeluTanh;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.sliding_window = 512;
  c.rope_freq_factors = true;
  m.weights.checksum = "fedcba9876543210";
  m.buffers[0] = {"hidden", "tokens", 192, "bf16", 64};  // padded row
  m.kernels[1] = {"lm_head", "sm_90", "llmc_lm_head_sm90", "linear q4_1 64x64", "grid(L, 2)"};
  m.steps.push_back({1, {1}, {}, {1}});
  m.host_library = "kernels/host/libkernels.so";
  m.tokenizer = "tokenizer/tokenizer.gguf";
  m.bos_id = 0;
  m.eos_id = 63;
  return m;
}

// Serializes `m` after `edit` and parses it back.
absl::StatusOr<Manifest> RoundTrip(const std::function<void(Manifest&)>& edit) {
  Manifest m = TinyManifest();
  edit(m);
  return ManifestFromJson(ManifestToJson(m), kPath);
}

TEST(Manifest, JsonRoundTripKeepsEveryField) {
  Manifest in = FullManifest();
  ASSERT_TRUE(ValidateManifest(in, kPath).ok()) << ValidateManifest(in, kPath);
  std::string json = ManifestToJson(in);
  auto out = ManifestFromJson(json, kPath);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << json;
  const Manifest& m = *out;
  EXPECT_EQ(m.format_version, kArtifactFormatVersion);
  EXPECT_EQ(m.host_abi_version, in.host_abi_version);
  EXPECT_EQ(m.compiler, in.compiler);
  EXPECT_EQ(m.source, in.source);
  EXPECT_EQ(m.targets, in.targets);
  EXPECT_EQ(m.activation_dtype, "bf16");
  EXPECT_EQ(m.kv_dtype, "f32");

  const ModelConfig &a = m.model, &b = in.model;
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position, b.max_position);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.kind, b.rope_scaling.kind);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position, b.rope_scaling.original_max_position);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.rope_freq_factors, b.rope_freq_factors);

  EXPECT_EQ(m.weights.file, in.weights.file);
  EXPECT_EQ(m.weights.size, in.weights.size);
  EXPECT_EQ(m.weights.checksum, in.weights.checksum);
  ASSERT_EQ(m.weights.tensors.size(), in.weights.tensors.size());
  for (size_t i = 0; i < m.weights.tensors.size(); ++i) {
    const ManifestTensor &x = m.weights.tensors[i], &y = in.weights.tensors[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.format, y.format);
    EXPECT_EQ(x.shape, y.shape);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.bytes, y.bytes);
  }
  ASSERT_EQ(m.buffers.size(), in.buffers.size());
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    EXPECT_EQ(m.buffers[i].name, in.buffers[i].name);
    EXPECT_EQ(m.buffers[i].rows, in.buffers[i].rows);
    EXPECT_EQ(m.buffers[i].row_bytes, in.buffers[i].row_bytes);
    EXPECT_EQ(m.buffers[i].dtype, in.buffers[i].dtype);
    EXPECT_EQ(m.buffers[i].row_elems, in.buffers[i].row_elems);
  }
  ASSERT_EQ(m.kernels.size(), in.kernels.size());
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    EXPECT_EQ(m.kernels[i].name, in.kernels[i].name);
    EXPECT_EQ(m.kernels[i].target, in.kernels[i].target);
    EXPECT_EQ(m.kernels[i].symbol, in.kernels[i].symbol);
    EXPECT_EQ(m.kernels[i].ops, in.kernels[i].ops);
    EXPECT_EQ(m.kernels[i].launch, in.kernels[i].launch);
  }
  ASSERT_EQ(m.steps.size(), in.steps.size());
  for (size_t i = 0; i < m.steps.size(); ++i) {
    EXPECT_EQ(m.steps[i].kernel, in.steps[i].kernel);
    EXPECT_EQ(m.steps[i].buffers, in.steps[i].buffers);
    EXPECT_EQ(m.steps[i].weights, in.steps[i].weights);
    EXPECT_EQ(m.steps[i].caches, in.steps[i].caches);
  }
  EXPECT_EQ(m.logits_buffer, in.logits_buffer);
  EXPECT_EQ(m.host_library, in.host_library);
  EXPECT_EQ(m.tokenizer, in.tokenizer);
  EXPECT_EQ(m.bos_id, in.bos_id);
  EXPECT_EQ(m.eos_id, in.eos_id);

  // Serialization is a fixed point.
  EXPECT_EQ(ManifestToJson(m), json);
}

TEST(Manifest, JsonNamesTheFields) {
  std::string json = ManifestToJson(TinyManifest());
  for (const char* key :
       {"\"format_version\": 1", "\"host_abi_version\"", "\"model\"", "\"num_hidden_layers\": 2",
        "\"weights\"", "\"tensors\"", "\"offset\"", "\"buffers\"", "\"row_bytes\"", "\"kernels\"",
        "\"symbol\"", "\"steps\"", "\"caches\"", "\"logits_buffer\"", "\"host_library\"",
        "\"tokenizer\"", "\"bos_id\"", "\"eos_id\""})
    EXPECT_NE(json.find(key), std::string::npos) << key << " not in\n" << json;
}

TEST(Manifest, WrongFormatVersion) {
  auto r = RoundTrip([](Manifest& m) { m.format_version = 7; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "model.llmc/manifest.json: format_version 7 is not supported by this runtime (it reads "
            "version 1); recompile the model with this llmc");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Manifest, VersionIsCheckedBeforeAnythingElse) {
  // A future manifest may look nothing like this one.
  auto r = ManifestFromJson(R"({"format_version": 2, "weights": "elsewhere"})", kPath);
  ExpectError(r, {kPath, "format_version 2 is not supported"});
  ExpectError(ManifestFromJson(R"({"weights": {}})", kPath),
              {kPath, "format_version is missing: this is not an llmc manifest"});
  ExpectError(ManifestFromJson(R"({"format_version": "1"})", kPath),
              {kPath, "format_version must be an integer, got a string"});
}

TEST(Manifest, MalformedJson) {
  ExpectError(ManifestFromJson("", kPath), {kPath, "invalid JSON"});
  ExpectError(ManifestFromJson("{\"format_version\": 1,", kPath), {kPath, "invalid JSON"});
  ExpectError(ManifestFromJson("[1, 2]", kPath), {kPath, "expected a JSON object, got an array"});
  ExpectError(ManifestFromJson(std::string(100000, '['), kPath), {kPath, "nested deeper than"});
  ExpectError(ManifestFromJson(R"({"format_version": 1, "format_version": 1})", kPath),
              {kPath, "'format_version' occurs twice"});
}

TEST(Manifest, MissingAndMistypedFields) {
  std::string json = ManifestToJson(TinyManifest());
  auto without = [&](const std::string& needle, const std::string& replacement) {
    std::string edited = json;
    size_t at = edited.find(needle);
    EXPECT_NE(at, std::string::npos) << needle;
    if (at != std::string::npos) edited.replace(at, needle.size(), replacement);
    return ManifestFromJson(edited, kPath);
  };
  ExpectError(without("\"logits_buffer\"", "\"logits_buf\""), {kPath, "logits_buffer is missing"});
  ExpectError(without("\"checksum\"", "\"sum\""), {kPath, "weights.checksum is missing"});
  ExpectError(without("\"size\": ", "\"size\": -"),
              {kPath, "weights.size must be a non-negative integer"});
  ExpectError(without("\"bos_id\": 1", "\"bos_id\": 1.5"),
              {kPath, "bos_id must be an integer, got 1.5"});
  ExpectError(without("\"targets\": [", "\"targets\": [3, "),
              {kPath, "targets[0] must be a string, got 3"});
  ExpectError(without("\"steps\": [", "\"steps\": [7, "), {kPath, "steps[0] must be an object"});
  ExpectError(without("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0"),
              {kPath, "model: ", "num_hidden_layers"});
}

TEST(Manifest, StepIndicesInRange) {
  ExpectError(RoundTrip([](Manifest& m) { m.steps[1].kernel = 2; }),
              {kPath, "steps[1].kernel 2 is out of range: kernels has 2 entries"});
  ExpectError(RoundTrip([](Manifest& m) { m.steps[0].kernel = -1; }),
              {"steps[0].kernel -1 is out of range"});
  ExpectError(RoundTrip([](Manifest& m) { m.steps[1].buffers[1] = 5; }),
              {"steps[1].buffers[1] 5 is out of range: buffers has 2 entries"});
  ExpectError(RoundTrip([](Manifest& m) { m.steps[1].weights[3] = 5; }),
              {"steps[1].weights[3] 5 is out of range: weights.tensors has 5 entries"});
  ExpectError(RoundTrip([](Manifest& m) { m.steps[1].caches[1] = 2; }),
              {"steps[1].caches[1] 2 is out of range"});
}

TEST(Manifest, LogitsBuffer) {
  ExpectError(RoundTrip([](Manifest& m) { m.logits_buffer = -1; }),
              {kPath, "logits_buffer -1 is out of range"});
  ExpectError(RoundTrip([](Manifest& m) { m.logits_buffer = 0; }),
              {kPath, "logits_buffer names buffer 'hidden' (rows tokens"});
  ExpectError(RoundTrip([](Manifest& m) { m.buffers[1].rows = "sequences"; }),
              {"buffers[1].rows is 'sequences'; expected tokens or logits"});
}

TEST(Manifest, MisalignedTensor) {
  auto r = RoundTrip([](Manifest& m) { m.weights.tensors[1].offset += 8; });
  ExpectError(r,
              {kPath, "weights.tensors[1] ('blk.0.attn_q').offset 16392 is not a multiple of 64"});
}

TEST(Manifest, OverlappingTensors) {
  auto r =
      RoundTrip([](Manifest& m) { m.weights.tensors[3].offset = m.weights.tensors[2].offset; });
  ExpectError(
      r, {kPath,
          "weights.tensors[3] ('blk.0.ffn_up').offset overlaps weights.tensors[2] ('blk.1.odd')"});
  // A tensor that ends one byte into the next.
  r = RoundTrip([](Manifest& m) {
    m.weights.tensors[0].shape = {64, 65};
    m.weights.tensors[0].bytes += 256;
  });
  ExpectError(
      r, {"weights.tensors[1] ('blk.0.attn_q').offset overlaps weights.tensors[0] ('token_embd')"});
}

TEST(Manifest, TensorOutOfRange) {
  auto r = RoundTrip([](Manifest& m) { m.weights.size -= 1; });
  ExpectError(r, {kPath, "weights.tensors[4] ('output_norm').offset",
                  "runs past the end of weights/rank0.bin"});
  r = RoundTrip([](Manifest& m) { m.weights.tensors[0].offset = 0xFFFFFFFFFFFFFFC0ull; });
  ExpectError(
      r, {"weights.tensors[0] ('token_embd').offset 18446744073709551552 + 16384 bytes runs past"});
}

TEST(Manifest, ByteCountMismatch) {
  auto r = RoundTrip([](Manifest& m) { m.weights.tensors[1].bytes = 2048; });
  ExpectError(
      r, {kPath,
          "weights.tensors[1] ('blk.0.attn_q').bytes is 2048 but 4096 elements of q4_1 take 2560"});
  r = RoundTrip([](Manifest& m) { m.weights.tensors[3].group = 64; });
  ExpectError(r, {"('blk.0.ffn_up').bytes is 5120 but 8192 elements of i4 (group 64) take 4608"});
}

TEST(Manifest, TensorShapeFormatAndGroup) {
  ExpectError(RoundTrip([](Manifest& m) { m.weights.tensors[0].format = "f8"; }),
              {"weights.tensors[0] ('token_embd').format 'f8' is not a weight format"});
  ExpectError(RoundTrip([](Manifest& m) { m.weights.tensors[0].shape = {}; }),
              {"('token_embd').shape is empty"});
  ExpectError(RoundTrip([](Manifest& m) {
                m.weights.tensors[0].shape = {-64, -64};
              }),
              {"('token_embd').shape dimension 0 is -64"});
  ExpectError(RoundTrip([](Manifest& m) {
                m.weights.tensors[1].shape = {128, 32 + 16};
              }),
              {"('blk.0.attn_q').shape innermost dimension 48 is not a multiple of 32"});
  ExpectError(RoundTrip([](Manifest& m) { m.weights.tensors[3].group = 0; }),
              {"('blk.0.ffn_up').group is 0; format i4 needs a positive even quantization group"});
  ExpectError(RoundTrip([](Manifest& m) { m.weights.tensors[0].group = 32; }),
              {"('token_embd').group is 32; it must be 0 for format f32"});
  ExpectError(RoundTrip([](Manifest& m) {
                m.weights.tensors[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
              }),
              {"('token_embd').shape has more than 2^48 elements"});
  ExpectError(RoundTrip([](Manifest& m) { m.weights.tensors[2].name = "token_embd"; }),
              {"weights.tensors[2] ('token_embd').name is used by an earlier tensor too"});
}

TEST(Manifest, OtherFields) {
  ExpectError(RoundTrip([](Manifest& m) { m.targets = {}; }), {kPath, "targets is empty"});
  ExpectError(RoundTrip([](Manifest& m) {
                m.targets = {"host", "gfx90a"};
              }),
              {"targets[1] 'gfx90a' is not a target"});
  ExpectError(RoundTrip([](Manifest& m) {
                m.targets = {"host", "host"};
              }),
              {"targets[1] 'host' is listed twice"});
  ExpectError(RoundTrip([](Manifest& m) { m.kernels[0].target = "sm_90"; }),
              {"kernels[0].target 'sm_90' is not one of targets (host)"});
  ExpectError(RoundTrip([](Manifest& m) { m.kernels[0].symbol = "llmc embed"; }),
              {"kernels[0].symbol 'llmc embed' is not a C identifier"});
  ExpectError(RoundTrip([](Manifest& m) { m.activation_dtype = "f64"; }),
              {"activation_dtype is 'f64'"});
  ExpectError(RoundTrip([](Manifest& m) { m.buffers[0].dtype = "u8"; }),
              {"buffers[0].dtype is 'u8'"});
  ExpectError(RoundTrip([](Manifest& m) { m.buffers[0].row_bytes = 255; }),
              {"buffers[0].row_bytes is 255 but 64 f32 elements take 256"});
  ExpectError(RoundTrip([](Manifest& m) { m.buffers[1].name = "hidden"; }),
              {"buffers[1].name 'hidden' is used by an earlier buffer too"});
  ExpectError(RoundTrip([](Manifest& m) { m.weights.file = "../weights.bin"; }),
              {"weights.file '../weights.bin' leaves the artifact"});
  ExpectError(RoundTrip([](Manifest& m) { m.host_library = "/usr/lib/evil.so"; }),
              {"host_library '/usr/lib/evil.so' is absolute"});
  ExpectError(RoundTrip([](Manifest& m) { m.host_library = ""; }),
              {"host_library is empty, but targets include host"});
  ExpectError(RoundTrip([](Manifest& m) { m.weights.checksum = "0123456789ABCDEF"; }),
              {"weights.checksum '0123456789ABCDEF' is not 16 lowercase hex digits"});
  ExpectError(RoundTrip([](Manifest& m) { m.eos_id = 64; }), {"eos_id 64 is out of range"});
  // Optional: a model compiled without a tokenizer.
  EXPECT_TRUE(RoundTrip([](Manifest& m) { m.tokenizer = ""; }).ok());
}

// ---- the cuda section ------------------------------------------------------

using test::TinyCudaManifest;

absl::StatusOr<Manifest> CudaRoundTrip(const std::function<void(Manifest&)>& edit) {
  Manifest m = TinyCudaManifest();
  edit(m);
  return ManifestFromJson(ManifestToJson(m), kPath);
}

TEST(ManifestCuda, JsonRoundTripKeepsEveryField) {
  Manifest in = TinyCudaManifest();
  ASSERT_TRUE(ValidateManifest(in, kPath).ok()) << ValidateManifest(in, kPath);
  std::string json = ManifestToJson(in);
  auto out = ManifestFromJson(json, kPath);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << json;
  const ManifestCuda &a = out->cuda, &b = in.cuda;
  EXPECT_EQ(a.activation_dtype, "bf16");
  EXPECT_EQ(a.cuda_abi_version, LLMC_CUDA_ABI_VERSION);
  ASSERT_EQ(a.modules.size(), b.modules.size());
  for (size_t i = 0; i < a.modules.size(); ++i) {
    EXPECT_EQ(a.modules[i].arch, b.modules[i].arch);
    EXPECT_EQ(a.modules[i].file, b.modules[i].file);
    EXPECT_EQ(a.modules[i].checksum, b.modules[i].checksum);
    ASSERT_EQ(a.modules[i].ptxas.size(), b.modules[i].ptxas.size());
    for (size_t k = 0; k < a.modules[i].ptxas.size(); ++k) {
      const ManifestPtxasEntry &x = a.modules[i].ptxas[k], &y = b.modules[i].ptxas[k];
      EXPECT_EQ(x.symbol, y.symbol);
      EXPECT_EQ(x.registers, y.registers);
      EXPECT_EQ(x.spill_stores, y.spill_stores);
      EXPECT_EQ(x.spill_loads, y.spill_loads);
      EXPECT_EQ(x.shared_bytes, y.shared_bytes);
      EXPECT_EQ(x.stack_bytes, y.stack_bytes);
    }
  }
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const ManifestCudaKernel &x = a.kernels[i], &y = b.kernels[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.ops, y.ops);
    EXPECT_EQ(x.split_keys, y.split_keys);
    EXPECT_EQ(x.heads, y.heads);
    EXPECT_EQ(x.head_dim, y.head_dim);
    ASSERT_EQ(x.launches.size(), y.launches.size());
    for (size_t l = 0; l < x.launches.size(); ++l) {
      EXPECT_EQ(x.launches[l].symbol, y.launches[l].symbol);
      EXPECT_EQ(x.launches[l].when, y.launches[l].when);
      EXPECT_EQ(x.launches[l].grid, y.launches[l].grid);
      EXPECT_EQ(x.launches[l].block, y.launches[l].block);
    }
  }
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].name, b.steps[i].name);
    EXPECT_EQ(a.steps[i].kernel, b.steps[i].kernel);
    EXPECT_EQ(a.steps[i].buffers, b.steps[i].buffers);
    EXPECT_EQ(a.steps[i].weights, b.steps[i].weights);
    EXPECT_EQ(a.steps[i].caches, b.steps[i].caches);
  }
  EXPECT_EQ(a.kernels[1].launches[1].when, "splits>1");
  EXPECT_EQ(ManifestToJson(*out), json);
}

TEST(ManifestCuda, HostOnlyManifestHasNoSection) {
  std::string json = ManifestToJson(TinyManifest());
  EXPECT_EQ(json.find("\"cuda\""), std::string::npos) << json;
  auto m = ManifestFromJson(json, kPath);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->cuda.modules.empty());
  EXPECT_NE(ManifestToJson(TinyCudaManifest()).find("\"cuda\": {"), std::string::npos);
}

TEST(ManifestCuda, MissingAndMistypedFields) {
  std::string json = ManifestToJson(TinyCudaManifest());
  auto edited = [&](const std::string& needle, const std::string& replacement) {
    return test::ParseEdited(json, needle, replacement);
  };
  ExpectError(edited("\"cuda\": {", "\"cuda\": [1], \"x\": {"),
              {kPath, "cuda must be an object, got an array"});
  ExpectError(edited("\"cuda_abi_version\"", "\"abi\""), {kPath, "cuda.cuda_abi_version is missing"});
  ExpectError(edited("\"spill_loads\": 24", "\"spill_loads\": \"24\""),
              {kPath, "cuda.modules[0].ptxas[1].spill_loads must be an integer, got a string"});
  ExpectError(edited("\"grid\": [", "\"grid\": [1, "),
              {kPath, "cuda.kernels[0].launches[0].grid[0] must be a string, got 1"});
  ExpectError(edited("\"split_keys\": 0", "\"split_key\": 0"),
              {kPath, "cuda.kernels[0].split_keys is missing"});
}

TEST(ManifestCuda, StepIndicesInRange) {
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[1].kernel = 3; }),
              {kPath, "cuda.steps[1].kernel 3 is out of range: cuda.kernels has 3 entries"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[3].buffers[1] = 2; }),
              {"cuda.steps[3].buffers[1] 2 is out of range: buffers has 2 entries"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[3].weights[0] = -1; }),
              {"cuda.steps[3].weights[0] -1 is out of range: weights.tensors has 5 entries"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[2].caches[0] = 2; }),
              {"cuda.steps[2].caches[0] 2 is out of range"});
}

TEST(ManifestCuda, BindingsFitTheAbi) {
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[3].buffers.assign(13, 0); }),
              {kPath, "cuda.steps[3].buffers has 13 entries; a launch binds at most 12"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[3].weights.assign(13, 1); }),
              {"cuda.steps[3].weights has 13 entries; a launch binds at most 12"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.steps[1].caches = {0, 1}; }),
              {"cuda.steps[1].caches has 2 entries; a launch binds one layer's K and V"});
  EXPECT_TRUE(CudaRoundTrip([](Manifest& m) { m.cuda.steps[3].buffers.assign(12, 0); }).ok());
}

TEST(ManifestCuda, Launches) {
  auto launch = [](Manifest& m) -> ManifestCudaLaunch& { return m.cuda.kernels[2].launches[0]; };
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).grid = {"T", "1"}; }),
              {kPath, "cuda.kernels[2].launches[0].grid has 2 entries; expected 3 (x, y, z)"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).grid[1] = "H"; }),
              {"cuda.kernels[2].launches[0].grid[1] 'H' is not a grid expression"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).grid[0] = "cdiv(T,0)"; }),
              {"cuda.kernels[2].launches[0].grid[0] 'cdiv(T,0)' divides by 0"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).grid[0] = "cdiv(splits,2)"; }),
              {"launches[0].grid[0] 'cdiv(splits,2)' is not a grid expression"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).when = "T<8"; }),
              {"cuda.kernels[2].launches[0].when 'T<8' is not a condition"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).when = "s>1"; }),
              {"launches[0].when 's>1' is not a condition"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).block = 0; }),
              {"cuda.kernels[2].launches[0].block is 0; expected 1 to 1024"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).block = 1025; }),
              {"launches[0].block is 1025"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { launch(m).symbol = "gemv-1"; }),
              {"cuda.kernels[2].launches[0].symbol 'gemv-1' is not a C identifier"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.kernels[0].launches.clear(); }),
              {"cuda.kernels[0].launches is empty"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.kernels[0].name = ""; }),
              {"cuda.kernels[0].name is empty"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.kernels[1].head_dim = 0; }),
              {"cuda.kernels[1].head_dim is 0; an attention kernel (split_keys 256)"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.kernels[1].split_keys = -1; }),
              {"cuda.kernels[1].split_keys must be >= 0"});
  EXPECT_TRUE(CudaRoundTrip([&](Manifest& m) {
                launch(m).grid = {"cdiv( L , 4 )", "65535", "splits"};
                launch(m).when = " splits > 0 ";
              }).ok());
}

// A launch's cost forms round-trip, the peeled loop's trips with them; the
// peeled trips are a part of the trips, so they need them.
TEST(ManifestCuda, CostForms) {
  auto launch = [](Manifest& m) -> ManifestCudaLaunch& { return m.cuda.kernels[2].launches[0]; };
  auto with_cost = [&](Manifest& m) {
    launch(m).cost.bytes = {64, 2, 0, 0, 0, 0};
    launch(m).cost.trips = {0, 0, 0, 0.25, 0, 0};
    launch(m).cost.peeled_trips = {0, 4, 0, 0, 0, 0};
  };
  auto out = CudaRoundTrip(with_cost);
  ASSERT_TRUE(out.ok()) << out.status();
  const ManifestCudaCost& c = out->cuda.kernels[2].launches[0].cost;
  EXPECT_EQ(c.bytes.c, 64);
  EXPECT_EQ(c.trips.k, 0.25);
  EXPECT_EQ(c.peeled_trips.t, 4);
  ExpectError(CudaRoundTrip([&](Manifest& m) {
                with_cost(m);
                launch(m).cost.trips = {};
              }),
              {"cuda.kernels[2].launches[0].cost.peeled_trips needs trips"});
  ExpectError(CudaRoundTrip([&](Manifest& m) {
                with_cost(m);
                launch(m).cost.peeled_trips.p = 1;
              }),
              {"cost.peeled_trips.P needs tokens_per_pass"});
  ExpectError(CudaRoundTrip([&](Manifest& m) {
                with_cost(m);
                launch(m).cost.peeled_trips.t = -1;
              }),
              {"cost.peeled_trips.T must be a finite number >= 0"});
}

TEST(ManifestCuda, GeneratedGemmOperand) {
  // The generated GEMM's A operand (a fused prologue's output): its shape
  // round-trips without any cuBLASLt GEMM (n 0), and bad values are named.
  absl::StatusOr<Manifest> ok = CudaRoundTrip([](Manifest& m) {
    m.cuda.kernels[2].gemm.operand_k = 64;
    m.cuda.kernels[2].gemm.operand_rows = "L";
  });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->cuda.kernels[2].gemm.n, 0);
  EXPECT_EQ(ok->cuda.kernels[2].gemm.operand_k, 64);
  EXPECT_EQ(ok->cuda.kernels[2].gemm.operand_rows, "L");
  EXPECT_EQ(ok->cuda.kernels[0].gemm.operand_k, 0);
  ExpectError(CudaRoundTrip([](Manifest& m) {
                m.cuda.kernels[2].gemm.operand_k = 64;
                m.cuda.kernels[2].gemm.operand_rows = "S";
              }),
              {kPath, "cuda.kernels[2].operand_rows is 'S'; expected T or L"});
  ExpectError(CudaRoundTrip([](Manifest& m) {
                m.cuda.kernels[2].gemm.operand_k = int64_t{1} << 25;
                m.cuda.kernels[2].gemm.operand_rows = "T";
              }),
              {"cuda.kernels[2].operand_k is 33554432; expected 0 to 16777216"});
}

TEST(ManifestCuda, SplitKGemmPartials) {
  // A split-K GEMM launch's partials per block round-trip, absent means 0,
  // and a size past any tile is named.
  absl::StatusOr<Manifest> ok =
      CudaRoundTrip([](Manifest& m) { m.cuda.kernels[2].launches[0].split_floats = 4096; });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->cuda.kernels[2].launches[0].split_floats, 4096);
  EXPECT_EQ(ok->cuda.kernels[0].launches[0].split_floats, 0);
  ExpectError(
      CudaRoundTrip([](Manifest& m) { m.cuda.kernels[2].launches[0].split_floats = 65537; }),
      {kPath, "cuda.kernels[2].launches[0].split_floats is 65537; expected 0 to 65536"});
}

TEST(ManifestCuda, CublasLtGemm) {
  // The LM head (kernel 2) offering a cuBLASLt GEMM in place of its own.
  auto offer = [](Manifest& m) -> ManifestCudaGemm& {
    ManifestCudaKernel& k = m.cuda.kernels[2];
    for (ManifestCudaLaunch& l : k.launches) l.impl = "llmc";
    k.gemm = {64, 64, 64, 1, "L", "llmc_cuda_k2_lt_pre", "llmc_cuda_k2_lt_epi"};
    return k.gemm;
  };
  absl::StatusOr<Manifest> ok = CudaRoundTrip([&](Manifest& m) { offer(m); });
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->cuda.kernels[2].gemm.epi, "llmc_cuda_k2_lt_epi");
  EXPECT_EQ(ok->cuda.kernels[2].gemm.rows, "L");
  EXPECT_EQ(ok->cuda.kernels[2].launches[1].impl, "llmc");
  EXPECT_EQ(ok->cuda.kernels[0].gemm.n, 0);
  EXPECT_EQ(ok->cuda.kernels[2].gemm.deq, "");  // 16-bit weights: none
  // A quantized weight's dequantizing entry round-trips; a bad one is named.
  absl::StatusOr<Manifest> deq =
      CudaRoundTrip([&](Manifest& m) { offer(m).deq = "llmc_cuda_k2_lt_deq"; });
  ASSERT_TRUE(deq.ok()) << deq.status();
  EXPECT_EQ(deq->cuda.kernels[2].gemm.deq, "llmc_cuda_k2_lt_deq");
  ExpectError(CudaRoundTrip([&](Manifest& m) { offer(m).deq = "9x"; }),
              {"cuda.kernels[2].gemm.deq '9x' is not a C identifier"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { offer(m).rows = "S"; }),
              {kPath, "cuda.kernels[2].gemm.rows is 'S'; expected T or L"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { offer(m).k = 0; }),
              {"cuda.kernels[2].gemm.k is 0; expected 1 to 16777216"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { offer(m).weight = 12; }),
              {"cuda.kernels[2].gemm.weight is 12; expected 0 to 11"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { offer(m).epi = "a b"; }),
              {"cuda.kernels[2].gemm.epi 'a b' is not a C identifier"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { m.cuda.kernels[0].launches[0].impl = "llmc"; }),
              {"cuda.kernels[0].launches[0].impl is llmc, but the kernel has no gemm"});
  ExpectError(CudaRoundTrip([&](Manifest& m) { offer(m); m.cuda.kernels[2].launches[0].impl = "cublas"; }),
              {"cuda.kernels[2].launches[0].impl is 'cublas'; expected \"\" or llmc"});
}

TEST(ManifestCuda, ModulesAndSection) {
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[0].arch = "gfx90a"; }),
              {kPath, "cuda.modules[0].arch 'gfx90a' is not a CUDA target (sm_80, ...)"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[0].arch = "host"; }),
              {"cuda.modules[0].arch 'host' is not a CUDA target"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[1].arch = "sm_80"; }),
              {"cuda.modules[1].arch 'sm_80' has an earlier module too"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[1].arch = "sm_100"; }),
              {"cuda.modules[1].arch 'sm_100' is not one of targets (host, sm_80, sm_90)"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules.pop_back(); }),
              {"targets[2] 'sm_90' has no module in cuda.modules"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[0].file = "../x.ptx"; }),
              {"cuda.modules[0].file '../x.ptx' leaves the artifact"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[0].file = "/tmp/x.ptx"; }),
              {"cuda.modules[0].file '/tmp/x.ptx' is absolute"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[0].checksum = "abc"; }),
              {"cuda.modules[0].checksum 'abc' is not 16 lowercase hex digits"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.modules[0].ptxas[0].symbol = ""; }),
              {"cuda.modules[0].ptxas[0].symbol '' is not a C identifier"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.activation_dtype = "f8"; }),
              {"cuda.activation_dtype is 'f8'; expected bf16, f16 or f32"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.cuda_abi_version = 0; }),
              {"cuda.cuda_abi_version must be >= 1, got 0"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.samplers = {{"beam", "s", 256}}; }),
              {"cuda.samplers[0].kind 'beam' is not a sampler kind (sample, feed)"});
  ExpectError(CudaRoundTrip([](Manifest& m) {
                m.cuda.samplers = {{"sample", "s", 256}, {"sample", "t", 256}};
              }),
              {"cuda.samplers[1].kind 'sample' has an earlier entry too"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.samplers = {{"sample", "s", 100}}; }),
              {"cuda.samplers[0].block must be a multiple of 32 in [32, 1024], got 100"});
  ExpectError(CudaRoundTrip([](Manifest& m) { m.cuda.samplers = {{"sample", "", 256}}; }),
              {"cuda.samplers[0].symbol is empty"});
  {
    // The samplers round-trip; a manifest without them (a stage before the
    // last) has none.
    auto with = CudaRoundTrip(
        [](Manifest& m) { m.cuda.samplers = {{"sample", "llmc_sample", 128}}; });
    ASSERT_TRUE(with.ok()) << with.status();
    ASSERT_EQ(with->cuda.samplers.size(), 1u);
    EXPECT_EQ(with->cuda.samplers[0].kind, "sample");
    EXPECT_EQ(with->cuda.samplers[0].symbol, "llmc_sample");
    EXPECT_EQ(with->cuda.samplers[0].block, 128);
    auto without = CudaRoundTrip([](Manifest&) {});
    ASSERT_TRUE(without.ok());
    EXPECT_TRUE(without->cuda.samplers.empty());
  }
  // Kernels without modules would be dropped by the writer: rejected.
  ExpectError(ValidateManifest(
                  [] {
                    Manifest m = TinyCudaManifest();
                    m.cuda.modules.clear();
                    m.targets = {"host"};
                    return m;
                  }(),
                  kPath),
              {"cuda.modules is empty, but cuda has 3 kernels and 4 steps"});
}

}  // namespace
}  // namespace llmc
