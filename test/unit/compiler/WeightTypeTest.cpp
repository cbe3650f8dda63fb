//===- WeightTypeTest.cpp - !llm.weight byte sizes and checks -------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace llmc::llm;

namespace {

class WeightTypeTest : public ::testing::Test {
protected:
  WeightTypeTest() { ctx.loadDialect<LLMDialect>(); }

  // Returns the verifier's message for the given parameters ("" if valid).
  std::string verifyMessage(ArrayRef<int64_t> shape, WeightFormat format, int64_t group = 0) {
    std::string message;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      message = d.str();
      return success();
    });
    WeightType::getChecked([&] { return emitError(UnknownLoc::get(&ctx)); }, &ctx, shape, format,
                           group);
    return message;
  }

  MLIRContext ctx;
};

TEST_F(WeightTypeTest, ByteSizeFollowsTheFormat) {
  EXPECT_EQ(WeightType::get(&ctx, {576, 576}, WeightFormat::f32, 0).getByteSize(), 576 * 576 * 4);
  EXPECT_EQ(WeightType::get(&ctx, {576, 576}, WeightFormat::q4_1, 0).getByteSize(),
            576 * 576 / 32 * 20);
  EXPECT_EQ(WeightType::get(&ctx, {1536, 512}, WeightFormat::q6_k, 0).getByteSize(),
            1536 * 512 / 256 * 210);
  EXPECT_EQ(WeightType::get(&ctx, {64, 256}, WeightFormat::i4, 128).getByteSize(),
            64 * 2 * (64 + 4));
  EXPECT_TRUE(WeightType::get(&ctx, {4, 32}, WeightFormat::q8_0, 0).isQuantized());
  EXPECT_FALSE(WeightType::get(&ctx, {4, 32}, WeightFormat::bf16, 0).isQuantized());
}

TEST_F(WeightTypeTest, VerifierExplainsBadShapesAndGroups) {
  EXPECT_EQ(verifyMessage({576, 576}, WeightFormat::q4_0), "");
  EXPECT_EQ(verifyMessage({576, 100}, WeightFormat::q4_0),
            "innermost weight dimension 100 is not a multiple of the q4_0 block size 32");
  EXPECT_EQ(verifyMessage({576, 576}, WeightFormat::q4_k),
            "innermost weight dimension 576 is not a multiple of the q4_k block size 256");
  EXPECT_EQ(verifyMessage({64, 64}, WeightFormat::i8, 48),
            "weight format 'i8' needs group = 32, 64 or 128, got 48");
  EXPECT_EQ(verifyMessage({64, 64}, WeightFormat::f16, 32),
            "group applies only to the i8 and i4 formats, not 'f16'");
  EXPECT_EQ(verifyMessage({2, 3, 4}, WeightFormat::f32), "weight must have rank 1 or 2, got rank 3");
  EXPECT_EQ(verifyMessage({0, 4}, WeightFormat::f32), "weight dimensions must be positive, got 0");
}

} // namespace
