//===- OutlineKernels.cpp - one llm.fusion group per remaining op ---------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace llmc {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// "layers.0.attn" from the builder's NameLoc, or "step" when there is none.
std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().str();
  return "step";
}

struct OutlineKernelsPass : llmc::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    unsigned counter = 0;
    getOperation().walk([&](func::FuncOp fn) {
      for (Operation &op : llvm::make_early_inc_range(fn.getBody().getOps()))
        if (shouldOutline(op))
          outline(op, counter++);
      // Weights now live inside the groups.
      for (Operation &op : llvm::make_early_inc_range(fn.getBody().getOps()))
        if (isa<WeightOp>(op) && op.use_empty())
          op.erase();
    });
  }

  static bool shouldOutline(Operation &op) {
    return op.getDialect() && op.getDialect()->getNamespace() == "llm" &&
           !isa<WeightOp, FusionOp, YieldOp>(op);
  }

  void outline(Operation &op, unsigned index) {
    // Group inputs: every operand but weights, which are re-created inside.
    llvm::SetVector<Value> inputs;
    for (Value v : op.getOperands())
      if (!v.getDefiningOp<WeightOp>())
        inputs.insert(v);

    std::string name = locationName(op.getLoc()) + "." +
                       op.getName().stripDialect().str() + "_" + std::to_string(index);
    OpBuilder b(&op);
    auto group = b.create<FusionOp>(op.getLoc(), op.getResultTypes(), name,
                                    inputs.getArrayRef());
    SmallVector<Type> types;
    SmallVector<Location> locs;
    for (Value v : inputs) {
      types.push_back(v.getType());
      locs.push_back(v.getLoc());
    }
    Block *body = b.createBlock(&group.getBody(), {}, types, locs);
    IRMapping map;
    for (auto [outer, inner] : llvm::zip(inputs, body->getArguments()))
      map.map(outer, inner);
    b.setInsertionPointToStart(body);
    for (Value v : op.getOperands())
      if (auto w = v.getDefiningOp<WeightOp>(); w && !map.contains(v))
        map.map(v, b.clone(*w)->getResult(0));
    Operation *clone = b.clone(op, map);
    b.create<YieldOp>(op.getLoc(), clone->getResults());
    op.replaceAllUsesWith(group.getResults());
    op.erase();
  }
};

} // namespace
