// The manifest of a tensor-parallel artifact: the mesh section and the
// collective steps (manifest.h), through ManifestToJson / ManifestFromJson
// and ValidateManifest.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "artifact_test_util.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc {
namespace {

using test::ExpectError;
using test::TinyCudaManifest;
using test::TinyManifest;

constexpr const char* kPath = "model.llmc/manifest.json";

// TinyManifest split over two ranks: one KV head each, a second weight file
// of the same layout, and the collectives of a TP layer: an all-reduce of
// the attention's partial sums (out of place and in place, 64 wide) and
// all-gathers of column slices 32 wide into rows of 64: the MLP's and the
// LM head's (the logits).
Manifest TinyMeshManifest() {
  Manifest m = TinyManifest();
  m.mesh.tp = 2;
  m.mesh.pp = 1;
  m.mesh.kv_heads = 1;
  m.mesh.ranks = {{"weights/rank0.bin", m.weights.size, m.weights.checksum},
                  {"weights/rank1.bin", m.weights.size, "fedcba9876543210"}};
  m.buffers.push_back({"attn_partial", "tokens", 256, "f32", 64});  // 2
  m.buffers.push_back({"mlp_slice", "tokens", 128, "f32", 32});     // 3
  m.buffers.push_back({"logits_slice", "logits", 128, "f32", 32});  // 4
  m.steps.insert(m.steps.begin() + 1,
                 {{-1, {2, 0}, {}, {}, "layers.0.attn.all_reduce", "all_reduce_sum", 64, 64},
                  {-1, {0, 0}, {}, {}, "layers.0.attn.all_reduce_1", "all_reduce_sum", 64, 64},
                  {-1, {3, 0}, {}, {}, "layers.0.mlp.all_gather", "all_gather", 32, 64},
                  {-1, {4, 1}, {}, {}, "lm_head.all_gather", "all_gather", 32, 64}});
  return m;
}

// An all_reduce_sum and an all_gather step of TinyMeshManifest.
constexpr size_t kReduce = 1, kGather = 3;

absl::StatusOr<Manifest> MeshRoundTrip(const std::function<void(Manifest&)>& edit) {
  Manifest m = TinyMeshManifest();
  edit(m);
  return ManifestFromJson(ManifestToJson(m), kPath);
}

TEST(ManifestMesh, JsonRoundTripKeepsEveryField) {
  Manifest in = TinyMeshManifest();
  ASSERT_TRUE(ValidateManifest(in, kPath).ok()) << ValidateManifest(in, kPath);
  std::string json = ManifestToJson(in);
  EXPECT_NE(json.find("\"mesh\": {"), std::string::npos) << json;
  EXPECT_NE(json.find("\"collective\": \"all_reduce_sum\""), std::string::npos) << json;
  auto out = ManifestFromJson(json, kPath);
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << json;

  const ManifestMesh &a = out->mesh, &b = in.mesh;
  EXPECT_EQ(a.tp, 2);
  EXPECT_EQ(a.pp, 1);
  EXPECT_EQ(a.kv_heads, 1);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    EXPECT_EQ(a.ranks[i].weights_file, b.ranks[i].weights_file);
    EXPECT_EQ(a.ranks[i].weights_size, b.ranks[i].weights_size);
    EXPECT_EQ(a.ranks[i].weights_checksum, b.ranks[i].weights_checksum);
  }
  ASSERT_EQ(out->buffers.size(), in.buffers.size());
  for (size_t i = 0; i < in.buffers.size(); ++i) {
    EXPECT_EQ(out->buffers[i].name, in.buffers[i].name);
    EXPECT_EQ(out->buffers[i].rows, in.buffers[i].rows);
    EXPECT_EQ(out->buffers[i].row_bytes, in.buffers[i].row_bytes);
  }
  ASSERT_EQ(out->steps.size(), in.steps.size());
  for (size_t i = 0; i < in.steps.size(); ++i) {
    const ManifestStep &x = out->steps[i], &y = in.steps[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.collective, y.collective);
    EXPECT_EQ(x.kernel, y.kernel);
    EXPECT_EQ(x.buffers, y.buffers);
    EXPECT_EQ(x.weights, y.weights);
    EXPECT_EQ(x.caches, y.caches);
    EXPECT_EQ(x.in_row_elems, y.in_row_elems);
    EXPECT_EQ(x.out_row_elems, y.out_row_elems);
  }
  EXPECT_EQ(out->steps[0].collective, "");
  EXPECT_EQ(out->steps[kReduce].collective, "all_reduce_sum");
  EXPECT_EQ(out->steps[kGather].collective, "all_gather");
  EXPECT_EQ(out->steps[kGather].in_row_elems, 32);
  EXPECT_EQ(out->steps[kGather].out_row_elems, 64);
  // Serialization is a fixed point.
  EXPECT_EQ(ManifestToJson(*out), json);
}

TEST(ManifestMesh, UnpartitionedJsonHasNoMeshOrCollective) {
  std::string json = ManifestToJson(TinyManifest());
  EXPECT_EQ(json.find("mesh"), std::string::npos) << json;
  EXPECT_EQ(json.find("collective"), std::string::npos) << json;
  auto m = ManifestFromJson(json, kPath);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mesh.tp, 1);
  EXPECT_EQ(m->mesh.pp, 1);
  EXPECT_EQ(m->mesh.kv_heads, 0);
  EXPECT_TRUE(m->mesh.ranks.empty());
  for (const ManifestStep& s : m->steps) EXPECT_EQ(s.collective, "");
  EXPECT_EQ(ManifestToJson(TinyCudaManifest()).find("collective"), std::string::npos);
}

TEST(ManifestMesh, MissingAndMistypedFields) {
  std::string json = ManifestToJson(TinyMeshManifest());
  auto edited = [&](const std::string& needle, const std::string& replacement) {
    return test::ParseEdited(json, needle, replacement);
  };
  ExpectError(edited("\"mesh\": {", "\"mesh\": 2, \"x\": {"),
              {kPath, "mesh must be an object, got 2"});
  ExpectError(edited("\"kv_heads\"", "\"kv_head\""), {kPath, "mesh.kv_heads is missing"});
  ExpectError(edited("\"tp\": 2", "\"tp\": \"2\""), {kPath, "mesh.tp must be an integer"});
  ExpectError(edited("\"weights_size\": ", "\"weights_size\": -"),
              {kPath, "mesh.ranks[0].weights_size must be a non-negative integer"});
  ExpectError(edited("\"ranks\": [", "\"ranks\": [3, "),
              {kPath, "mesh.ranks[0] must be an object"});
  ExpectError(edited("\"collective\": \"all_reduce_sum\"", "\"collective\": 1"),
              {kPath, "steps[1].collective must be a string, got 1"});
}

TEST(ManifestMesh, CollectiveName) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kReduce].collective = "all_reduce_max"; }),
              {kPath,
               "steps[1].collective is 'all_reduce_max'; expected all_reduce_sum, all_gather, "
               "send or recv"});
}

TEST(ManifestMesh, CollectiveKernelIsMinusOne) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kReduce].kernel = 0; }),
              {kPath, "steps[1].kernel is 0; a collective step (all_reduce_sum) has kernel -1"});
}

TEST(ManifestMesh, CollectiveBindsNoWeights) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kReduce].weights = {0}; }),
              {kPath, "steps[1].weights has 1 entries; a collective step binds no weights"});
}

TEST(ManifestMesh, CollectiveBindsNoCaches) {
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.steps[kGather].caches = {0, 1};
              }),
              {kPath, "steps[3].caches has 2 entries; a collective step binds no caches"});
}

TEST(ManifestMesh, CollectiveBindsTwoBuffers) {
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.steps[kReduce].buffers = {2, 0, 0};
              }),
              {kPath, "steps[1].buffers has 3 entries; a collective step binds 2 (input, output)"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kGather].buffers = {3}; }),
              {"steps[3].buffers has 1 entries"});
}

TEST(ManifestMesh, CollectiveBuffersInRange) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kReduce].buffers[1] = 5; }),
              {kPath, "steps[1].buffers[1] 5 is out of range: buffers has 5 entries"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kGather].buffers[0] = -1; }),
              {"steps[3].buffers[0] -1 is out of range"});
}

TEST(ManifestMesh, CollectiveNeedsTheSameRows) {
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.steps[kReduce].buffers = {0, 1};
              }),
              {kPath,
               "steps[1].buffers input 'hidden' (rows tokens, row_bytes 256) and output 'logits' "
               "(rows logits, row_bytes 256) differ in rows; all_reduce_sum needs the same rows"});
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.steps[kGather].buffers = {4, 0};
              }),
              {kPath, "steps[3].buffers input 'logits_slice' (rows logits",
               "differ in rows; all_gather needs the same rows"});
}

TEST(ManifestMesh, CollectiveRowWidthsFitTheBuffers) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kReduce].in_row_elems = 0; }),
              {kPath,
               "steps[1].in_row_elems is 0 and out_row_elems 64: both must be positive and "
               "fit the input 'attn_partial' (rows tokens, row_bytes 256) and output 'hidden' "
               "(rows tokens, row_bytes 256) (row_elems 64 and 64)"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kGather].in_row_elems = 33; }),
              {kPath,
               "steps[3].in_row_elems is 33 and out_row_elems 64: both must be positive and "
               "fit the input 'mlp_slice' (rows tokens, row_bytes 128) and output 'hidden' (rows "
               "tokens, row_bytes 256) (row_elems 32 and 64)"});
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.steps[kGather].buffers = {3, 3};
              }),
              {"steps[3].in_row_elems is 32 and out_row_elems 64: both must be positive"});
  // A collective written without its widths (as before they existed) is refused.
  std::string json = ManifestToJson(TinyMeshManifest());
  size_t at = json.find("\"out_row_elems\"");
  ASSERT_NE(at, std::string::npos) << json;
  ExpectError(ManifestFromJson(json.replace(at, 15, "\"out_row_elem\""), kPath),
              {kPath, "steps[1].in_row_elems is 64 and out_row_elems 0: both must be positive"});
  // Narrower values in wider buffers are fine: rows are packed at the value's width.
  EXPECT_TRUE(MeshRoundTrip([](Manifest& m) {
                m.steps[kReduce].in_row_elems = m.steps[kReduce].out_row_elems = 20;
              }).ok());
}

TEST(ManifestMesh, AllReduceSumKeepsTheRowWidth) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.steps[kReduce].out_row_elems = 32; }),
              {kPath,
               "steps[1].out_row_elems is 32 but in_row_elems is 64: all_reduce_sum keeps "
               "the row width"});
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.steps[kReduce].buffers = {3, 0};
                m.steps[kReduce].in_row_elems = 32;
              }),
              {"steps[1].out_row_elems is 64 but in_row_elems is 32"});
  // Different buffers are fine when the value fits both.
  EXPECT_TRUE(MeshRoundTrip([](Manifest& m) {
                m.steps[kReduce].buffers = {3, 0};
                m.steps[kReduce].in_row_elems = m.steps[kReduce].out_row_elems = 32;
              }).ok());
}

TEST(ManifestMesh, AllGatherFillsAllButThePaddingOfTheLastRank) {
  // tp 2: (tp - 1) * in < out <= tp * in.
  auto gather = [](int64_t in, int64_t out) {
    return MeshRoundTrip([=](Manifest& m) {
      m.steps[kGather].in_row_elems = in;
      m.steps[kGather].out_row_elems = out;
    });
  };
  ExpectError(gather(32, 32),
              {kPath,
               "steps[3].out_row_elems is 32: an all_gather of 2 rows of 32 fills more "
               "than all but the last and at most all of them"});
  ExpectError(gather(20, 41), {"steps[3].out_row_elems is 41: an all_gather of 2 rows of 20"});
  ExpectError(gather(20, 20), {"steps[3].out_row_elems is 20"});
  EXPECT_TRUE(gather(20, 40).ok());
  EXPECT_TRUE(gather(20, 21).ok());  // the last rank's 19 padding elements dropped
  EXPECT_TRUE(gather(32, 33).ok());
}

TEST(ManifestMesh, CollectiveNeedsSeveralRanks) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh = ManifestMesh(); }),
              {kPath,
               "steps[1].collective is all_reduce_sum, but the artifact has one "
               "tensor-parallel rank (mesh.tp 1): collectives need a tensor-parallel mesh"});
}

// The CUDA plan of a partitioned artifact carries its collectives too,
// checked by the same rules.
TEST(ManifestMesh, CudaStepsCarryCollectivesByTheSameRules) {
  Manifest m = TinyMeshManifest();
  Manifest cuda = TinyCudaManifest();
  m.targets = cuda.targets;
  m.cuda = cuda.cuda;
  ASSERT_TRUE(ValidateManifest(m, kPath).ok()) << ValidateManifest(m, kPath);
  ManifestStep reduce = m.steps[kReduce];
  m.cuda.steps.push_back(reduce);
  ASSERT_TRUE(ValidateManifest(m, kPath).ok()) << ValidateManifest(m, kPath);
  m.cuda.steps.back().out_row_elems = reduce.in_row_elems - 1;
  ExpectError(ManifestFromJson(ManifestToJson(m), kPath),
              {kPath, "cuda.steps[4].out_row_elems is", "all_reduce_sum keeps the row width"});
}

TEST(ManifestMesh, TpAndPpArePositive) {
  ExpectError(ValidateManifest(
                  [] {
                    Manifest m = TinyMeshManifest();
                    m.mesh.tp = 0;
                    return m;
                  }(),
                  kPath),
              {kPath, "mesh.tp must be >= 1, got 0"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.pp = -1; }),
              {kPath, "mesh.pp must be >= 1, got -1"});
}

// Pipeline stages have their own tests (manifest_pipeline_test.cc); a
// mesh of one stage lists none.
TEST(ManifestMesh, OneStageListsNoStages) {
  Manifest staged = TinyMeshManifest();
  staged.mesh.stages = {{"manifest.json", 0, 2}};
  ExpectError(ValidateManifest(staged, kPath),
              {kPath, "mesh.stages are given, but the artifact has one pipeline stage"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.pp = 2; }),
              {kPath, "mesh.stages has 0 entries; mesh.pp 2 needs one per stage"});
}

TEST(ManifestMesh, OneRankEntryPerRank) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.ranks.pop_back(); }),
              {kPath, "mesh.ranks has 1 entries; mesh.tp 2 needs one per tensor-parallel rank"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.tp = 4; }),
              {"mesh.ranks has 2 entries; mesh.tp 4 needs one per tensor-parallel rank"});
}

TEST(ManifestMesh, RankWeightFile) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.ranks[1].weights_file = ""; }),
              {kPath, "mesh.ranks[1].weights_file is empty"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.ranks[1].weights_file = "../rank1.bin"; }),
              {"mesh.ranks[1].weights_file '../rank1.bin' leaves the artifact"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.ranks[0].weights_file = "/tmp/rank0.bin"; }),
              {"mesh.ranks[0].weights_file '/tmp/rank0.bin' is absolute"});
}

TEST(ManifestMesh, RankWeightSizeIsTheLayouts) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.ranks[1].weights_size += 64; }),
              {kPath,
               "mesh.ranks[1].weights_size is 24512 but weights.size is 24448: every "
               "rank's file has the layout of weights.tensors"});
}

TEST(ManifestMesh, RankChecksum) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.ranks[1].weights_checksum = ""; }),
              {kPath, "mesh.ranks[1].weights_checksum '' is not 16 lowercase hex digits"});
  ExpectError(
      MeshRoundTrip([](Manifest& m) { m.mesh.ranks[0].weights_checksum = "0123456789ABCDEF"; }),
      {"mesh.ranks[0].weights_checksum '0123456789ABCDEF' is not 16 lowercase hex digits"});
}

TEST(ManifestMesh, KvHeads) {
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.kv_heads = 0; }),
              {kPath, "mesh.kv_heads is 0; expected 1 to model.num_kv_heads (2)"});
  ExpectError(MeshRoundTrip([](Manifest& m) { m.mesh.kv_heads = 3; }),
              {"mesh.kv_heads is 3; expected 1 to model.num_kv_heads (2)"});
  // A replicated KV head (as many ranks as KV heads or more) is fine.
  EXPECT_TRUE(MeshRoundTrip([](Manifest& m) { m.mesh.kv_heads = 2; }).ok());
}

TEST(ManifestMesh, NoDummyWeights) {
  ExpectError(MeshRoundTrip([](Manifest& m) {
                m.weights.file = "";
                m.weights.checksum = "";
                m.weights.dummy_seed = kDefaultDummySeed;
              }),
              {kPath,
               "weights.dummy_seed is set, but the artifact is partitioned (mesh.tp 2): "
               "dummy weights are not supported with a mesh"});
}

TEST(ManifestMesh, OneRankHasNoRanks) {
  Manifest m = TinyManifest();
  m.mesh.ranks = {{"weights/rank0.bin", m.weights.size, m.weights.checksum}};
  ExpectError(ValidateManifest(m, kPath),
              {kPath,
               "mesh.ranks has 1 entries, but the artifact is not partitioned (mesh.tp 1, "
               "mesh.pp 1)"});
  // A mesh section of one rank parses (and is left out when written back).
  std::string json = ManifestToJson(TinyManifest());
  std::string with_mesh = json;
  std::string mesh = R"(, "mesh": {"tp": 1, "pp": 1, "kv_heads": 0, "ranks": []})";
  with_mesh.insert(with_mesh.rfind('}'), mesh + "\n");
  auto parsed = ManifestFromJson(with_mesh, kPath);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(ManifestToJson(*parsed), json);
}

}  // namespace
}  // namespace llmc
