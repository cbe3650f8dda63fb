//===- VerifierTest.cpp - ops built through the C++ API verify ------------===//
//
// The lit tests cover parsing; this covers the builders the frontend uses, so
// an op built in C++ with wrong shapes is caught with the same words.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace llmc::llm;

namespace {

class VerifierTest : public ::testing::Test {
protected:
  VerifierTest() : b(&ctx) {
    ctx.loadDialect<LLMDialect, func::FuncDialect>();
    module = ModuleOp::create(b.getUnknownLoc());
    auto fn = func::FuncOp::create(b.getUnknownLoc(), "f",
                                   b.getFunctionType({act(64), act(128)}, {}));
    module->push_back(fn);
    b.setInsertionPointToStart(fn.addEntryBlock());
    x64 = fn.getArgument(0);
    x128 = fn.getArgument(1);
  }

  RankedTensorType act(int64_t n) {
    return RankedTensorType::get({ShapedType::kDynamic, n}, b.getF32Type());
  }
  Value weight(ArrayRef<int64_t> shape, WeightFormat f = WeightFormat::f32) {
    return b.create<WeightOp>(b.getUnknownLoc(), WeightType::get(&ctx, shape, f, 0), "w");
  }
  std::string verifyMessage(Operation *op) {
    std::string message;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      message = d.str();
      return success();
    });
    (void)mlir::verify(op);
    return message;
  }

  MLIRContext ctx;
  OpBuilder b;
  OwningOpRef<ModuleOp> module;
  Value x64, x128;
};

TEST_F(VerifierTest, LinearChecksInAndOutFeatures) {
  auto ok = b.create<LinearOp>(b.getUnknownLoc(), act(128), x64, weight({128, 64}), Value());
  EXPECT_EQ(verifyMessage(ok), "");
  auto badIn = b.create<LinearOp>(b.getUnknownLoc(), act(128), x128, weight({128, 64}), Value());
  EXPECT_EQ(verifyMessage(badIn),
            "'llm.linear' op input has 128 features, expected 64 (the weight's in_features)");
  auto badBias = b.create<LinearOp>(b.getUnknownLoc(), act(128), x64, weight({128, 64}),
                                    weight({64}));
  EXPECT_EQ(verifyMessage(badBias),
            "'llm.linear' op bias has 64 elements, expected 128 (one per output feature)");
}

TEST_F(VerifierTest, NormWeightsMustBeFloatVectors) {
  auto q = b.create<RMSNormOp>(b.getUnknownLoc(), x64, weight({64}, WeightFormat::q8_0),
                               b.getF64FloatAttr(1e-5));
  EXPECT_EQ(verifyMessage(q), "'llm.rms_norm' op weight must be stored as f32, f16 or bf16, got q8_0");
  auto eps = b.create<RMSNormOp>(b.getUnknownLoc(), x64, weight({64}), b.getF64FloatAttr(2.0));
  EXPECT_EQ(verifyMessage(eps), "'llm.rms_norm' op eps must be in (0, 1), got 2.000000e+00");
}

TEST_F(VerifierTest, SplitWidthsMustAddUp) {
  auto split = b.create<SplitOp>(b.getUnknownLoc(), TypeRange{act(64), act(32)}, x128);
  EXPECT_EQ(verifyMessage(split),
            "'llm.split' op result widths add up to 96 but the input has 128 features");
}

} // namespace
