//===- StepBuilderTest.cpp - the IR builder on built-in model shapes ------===//
#include "Frontend/BuiltinModels.h"
#include "Frontend/StepBuilder.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace llmc {
namespace {

template <typename OpT>
int count(ModuleOp module) {
  int n = 0;
  module.walk([&](OpT) { ++n; });
  return n;
}

TEST(StepBuilder, EveryBuiltinModelBuildsAndPassesThePipeline) {
  for (const BuiltinModel &m : builtinModels()) {
    MLIRContext ctx;
    HFNamedCatalog catalog(m.config, llm::WeightFormat::f32);
    OwningOpRef<ModuleOp> module = buildStepModule(ctx, m.config, catalog);
    ASSERT_TRUE(module) << m.name;
    const ModelConfig &c = m.config;
    EXPECT_EQ(count<llm::PagedAttentionOp>(*module), c.num_layers) << m.name;
    EXPECT_EQ(count<llm::RopeOp>(*module), 2 * c.num_layers) << m.name;
    // A mixture of experts replaces gate, up and down.
    EXPECT_EQ(count<llm::LinearOp>(*module), (c.moe() ? 4 : 7) * c.num_layers) << m.name;
    EXPECT_EQ(count<llm::MoEOp>(*module), c.moe() ? c.num_layers : 0) << m.name;
    // Qwen3 norms each head of Q and K as well; Gemma each block's output.
    EXPECT_EQ(count<llm::RMSNormOp>(*module),
              (2 + (c.qk_norm ? 2 : 0) + (c.post_block_norms ? 2 : 0)) * c.num_layers + 1)
        << m.name;
    // Tied embeddings: one weight serves embed and lm_head.
    int distinctWeights = 0;
    llvm::StringSet<> names;
    module->walk([&](llm::WeightOp w) { distinctWeights += names.insert(w.getName()).second; });
    // A MoE layer has a router where a dense one has nothing.
    int perLayer = 9 + (c.attention_bias ? 3 : 0) + (c.qk_norm ? 2 : 0) + (c.moe() ? 1 : 0) +
                   (c.post_block_norms ? 2 : 0);
    EXPECT_EQ(distinctWeights, perLayer * c.num_layers + 2 + (c.tie_word_embeddings ? 0 : 1))
        << m.name;

    PassManager pm(&ctx);
    buildCompilePipeline(pm);
    EXPECT_TRUE(succeeded(pm.run(*module))) << m.name;
  }
}

// A catalog that lacks one weight.
class MissingWeightCatalog : public HFNamedCatalog {
public:
  using HFNamedCatalog::HFNamedCatalog;
  absl::StatusOr<std::optional<WeightEntry>>
  find(WeightRole role, int layer, llvm::ArrayRef<int64_t> shape) const override {
    if (role == WeightRole::kUp && layer == 1)
      return std::nullopt;
    return HFNamedCatalog::find(role, layer, shape);
  }
};

TEST(StepBuilder, MissingWeightIsNamed) {
  MLIRContext ctx;
  const ModelConfig &c = findBuiltinModel("tiny-llama")->config;
  MissingWeightCatalog catalog(c, llm::WeightFormat::f32);
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_FALSE(buildStepModule(ctx, c, catalog));
  EXPECT_EQ(message, "model has no MLP up projection in layer 1: expected tensor "
                     "'model.layers.1.mlp.up_proj.weight' of the built-in model");
}

TEST(StepBuilder, QuantizedFormatMustFitTheShape) {
  MLIRContext ctx;
  const ModelConfig &c = findBuiltinModel("tiny-llama")->config; // hidden 64
  HFNamedCatalog catalog(c, llm::WeightFormat::q4_k);             // needs multiples of 256
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_FALSE(buildStepModule(ctx, c, catalog));
  EXPECT_EQ(message, "weight 'model.embed_tokens.weight': innermost weight dimension 64 is not a "
                     "multiple of the q4_k block size 256");
}

TEST(StepBuilder, InvalidConfigIsRejected) {
  MLIRContext ctx;
  ModelConfig c = findBuiltinModel("tiny-llama")->config;
  c.num_kv_heads = 3;
  HFNamedCatalog catalog(c, llm::WeightFormat::f32);
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  EXPECT_FALSE(buildStepModule(ctx, c, catalog));
  EXPECT_NE(message.find("num_key_value_heads"), std::string::npos) << message;
}

} // namespace
} // namespace llmc
