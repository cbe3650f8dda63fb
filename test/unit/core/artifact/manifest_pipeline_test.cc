// The manifests of a pipeline-parallel artifact (manifest.h): each stage's
// manifest lists the stages, a stage before the last ends by sending its
// hidden state on and computes no logits, a stage after the first starts by
// receiving it, and its caches are its own layers'.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "artifact_test_util.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc {
namespace {

using test::ExpectError;
using test::TinyManifest;

constexpr const char* kPath = "model.llmc/manifest.json";

// TinyManifest (two layers) cut into two stages of one layer each, one rank
// per stage. Stage 0 embeds and sends the hidden state; stage 1 receives it,
// runs its layer (cache 0: its first layer) and the LM head.
Manifest TinyStageManifest(int64_t stage) {
  Manifest m = TinyManifest();
  m.mesh.tp = 1;
  m.mesh.pp = 2;
  m.mesh.kv_heads = m.model.num_kv_heads;
  m.mesh.stage = stage;
  m.mesh.stages = {{"manifest.json", 0, 1}, {"stages/1/manifest.json", 1, 1}};
  const std::string file = stage == 0 ? "weights/rank0.bin" : "stages/1/weights/rank1.bin";
  m.weights.file = file;
  m.mesh.ranks = {{file, m.weights.size, m.weights.checksum}};
  if (stage == 0) {
    m.steps = {{0, {0}, {0}, {}, "embed"}, {-1, {0}, {}, {}, "send", "send", 64, 0, /*peer=*/1}};
    m.logits_buffer = -1;
  } else {
    m.steps = {{-1, {0}, {}, {}, "recv", "recv", 0, 64, /*peer=*/0},
               {1, {0, 1}, {1, 2, 3, 4}, {0}, "lm_head"}};
  }
  return m;
}

absl::StatusOr<Manifest> StageRoundTrip(int64_t stage, const std::function<void(Manifest&)>& edit) {
  Manifest m = TinyStageManifest(stage);
  edit(m);
  return ManifestFromJson(ManifestToJson(m), kPath);
}

TEST(ManifestPipeline, JsonRoundTripKeepsStagesAndPeers) {
  for (int64_t stage : {0, 1}) {
    Manifest in = TinyStageManifest(stage);
    ASSERT_TRUE(ValidateManifest(in, kPath).ok()) << ValidateManifest(in, kPath);
    auto out = ManifestFromJson(ManifestToJson(in), kPath);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->mesh.pp, 2);
    EXPECT_EQ(out->mesh.stage, stage);
    ASSERT_EQ(out->mesh.stages.size(), 2u);
    EXPECT_EQ(out->mesh.stages[1].manifest, "stages/1/manifest.json");
    EXPECT_EQ(out->mesh.stages[1].first_layer, 1);
    EXPECT_EQ(out->mesh.stages[1].num_layers, 1);
    EXPECT_EQ(out->logits_buffer, stage == 0 ? -1 : 1);
    const ManifestStep& transfer = out->steps[stage == 0 ? 1 : 0];
    EXPECT_EQ(transfer.collective, stage == 0 ? "send" : "recv");
    EXPECT_EQ(transfer.peer, 1 - stage);
  }
}

TEST(ManifestPipeline, StagesCoverTheLayersInOrder) {
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stages[1].first_layer = 2; }),
              {kPath, "mesh.stages[1] has layers 2 + 1; expected layers from 1"});
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stages[1].num_layers = 0; }),
              {"mesh.stages[1] has layers 1 + 0; expected layers from 1, at least one"});
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stages[1].num_layers = 2; }),
              {"mesh.stages cover 3 layers; the model has 2"});
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stages.pop_back(); }),
              {"mesh.stages has 1 entries; mesh.pp 2 needs one per stage"});
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stage = 2; }),
              {"mesh.stage is 2; expected 0 to 1"});
}

TEST(ManifestPipeline, StageManifestPaths) {
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stages[0].manifest = "stage0.json"; }),
              {kPath,
               "mesh.stages[0].manifest is 'stage0.json'; stage 0, and only it, is "
               "manifest.json at the root"});
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.mesh.stages[1].manifest = "manifest.json"; }),
              {"mesh.stages[1].manifest is 'manifest.json'"});
  ExpectError(
      StageRoundTrip(0, [](Manifest& m) { m.mesh.stages[1].manifest = "../other/manifest.json"; }),
      {"mesh.stages[1].manifest '../other/manifest.json' leaves the artifact"});
}

TEST(ManifestPipeline, OnlyTheLastStageHasLogits) {
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.logits_buffer = 1; }),
              {kPath, "logits_buffer is 1; pipeline stage 0 of 2 computes no logits (-1)"});
  ExpectError(StageRoundTrip(1, [](Manifest& m) { m.logits_buffer = -1; }),
              {"logits_buffer -1 is out of range"});
}

TEST(ManifestPipeline, EachStageSendsAndReceivesOnce) {
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.steps.pop_back(); }),
              {kPath, "steps has 0 recv and 0 send steps; pipeline stage 0 of 2 needs 0 and 1"});
  ExpectError(StageRoundTrip(1, [](Manifest& m) { m.steps.erase(m.steps.begin()); }),
              {"steps has 0 recv and 0 send steps; pipeline stage 1 of 2 needs 1 and 0"});
  ExpectError(StageRoundTrip(0, [](Manifest& m) { std::swap(m.steps[0], m.steps[1]); }),
              {"steps does not end with its send step: the hidden state leaves last"});
}

TEST(ManifestPipeline, PeersAreTheNeighbourStages) {
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.steps[1].peer = 0; }),
              {kPath, "steps[1].peer is 0; stage 0 sends to stage 1"});
  // Stage 0 receiving: from stage -1, which does not exist.
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.steps[1].collective = "recv"; }),
              {"steps[1].peer is 1; stage 0 receives from stage -1, which does not exist"});
  Manifest reduce = TinyStageManifest(1);
  reduce.mesh.tp = 2;
  reduce.mesh.ranks.push_back(reduce.mesh.ranks[0]);
  reduce.mesh.ranks[1].weights_file = "stages/1/weights/rank3.bin";
  reduce.steps.insert(reduce.steps.begin() + 1,
                      {-1, {0, 0}, {}, {}, "all_reduce", "all_reduce_sum", 64, 64, /*peer=*/0});
  ExpectError(ValidateManifest(reduce, kPath),
              {"steps[1].peer is 0; only send and recv have a peer"});
  // Without pipeline stages there is nobody to send to.
  ExpectError(StageRoundTrip(0,
                             [](Manifest& m) {
                               m.mesh = ManifestMesh();
                               m.logits_buffer = 1;
                             }),
              {"steps[1].collective is send, but the artifact has one pipeline stage (mesh.pp 1)"});
}

TEST(ManifestPipeline, TransfersMoveTokenRowsThatFit) {
  ExpectError(StageRoundTrip(0, [](Manifest& m) { m.steps[1].in_row_elems = 65; }),
              {kPath, "steps[1].in_row_elems is 65 (and the other width 0) for buffer 'hidden'"});
  ExpectError(StageRoundTrip(1, [](Manifest& m) { m.steps[0].buffers = {1}; }),
              {"steps[0].out_row_elems is 64 (and the other width 0) for buffer 'logits' (rows "
               "logits"});
  ExpectError(StageRoundTrip(1,
                             [](Manifest& m) {
                               m.steps[0].buffers = {0, 0};
                             }),
              {"steps[0].buffers must be one index into buffers (2 entries)"});
  ExpectError(StageRoundTrip(1, [](Manifest& m) { m.steps[0].weights = {0}; }),
              {"steps[0] binds a kernel, weights or caches; a recv step binds one buffer"});
}

TEST(ManifestPipeline, CachesAreTheStagesLayers) {
  ExpectError(
      StageRoundTrip(1, [](Manifest& m) { m.steps[1].caches = {1}; }),
      {kPath, "steps[1].caches[0] 1 is out of range: the stage's layer list has 1 entries"});
}

}  // namespace
}  // namespace llmc
