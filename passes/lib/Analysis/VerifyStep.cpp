//===- VerifyStep.cpp - check @step's calling convention ------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace llmc {
#define GEN_PASS_DEF_VERIFYSTEP
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;

namespace {

struct IndexArgument {
  const char *name;
  int64_t rank;
};

// The runtime's metadata arguments, in order (docs/architecture.md).
constexpr IndexArgument kIndexArguments[] = {
    {"tokens", 1},       {"positions", 1},    {"query_starts", 1}, {"context_lens", 1},
    {"block_tables", 2}, {"slot_mapping", 1}, {"logits_rows", 1},
};
constexpr unsigned kNumIndexArguments = std::size(kIndexArguments);

struct VerifyStepPass : llmc::impl::VerifyStepBase<VerifyStepPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("step");
    if (!step) {
      getOperation().emitError() << "module has no func.func @step";
      return signalPassFailure();
    }
    if (failed(verifySignature(step)) || failed(verifyCacheUses(step)))
      signalPassFailure();
  }

  LogicalResult verifySignature(func::FuncOp step) {
    FunctionType type = step.getFunctionType();
    if (type.getNumInputs() < kNumIndexArguments + 1)
      return step.emitError() << "@step takes " << type.getNumInputs() << " arguments; expected the "
                              << kNumIndexArguments
                              << " index tensors followed by one KV cache per layer";
    for (auto [i, expected] : llvm::enumerate(kIndexArguments)) {
      auto t = dyn_cast<RankedTensorType>(type.getInput(i));
      if (!t || t.getRank() != expected.rank || !t.getElementType().isSignlessInteger(32) ||
          llvm::any_of(t.getShape(), [](int64_t d) { return !ShapedType::isDynamic(d); }))
        return step.emitError() << "@step argument #" << i << " (" << expected.name
                                << ") must be a rank-" << expected.rank
                                << " i32 tensor with dynamic dimensions, got " << type.getInput(i);
    }
    for (unsigned i = kNumIndexArguments; i < type.getNumInputs(); ++i)
      if (!isa<llmc::llm::KVCacheType>(type.getInput(i)))
        return step.emitError() << "@step argument #" << i << " (the KV cache of layer "
                                << i - kNumIndexArguments << ") must be !llm.kv_cache, got "
                                << type.getInput(i);
    auto logits = type.getNumResults() == 1 ? dyn_cast<RankedTensorType>(type.getResult(0))
                                            : RankedTensorType();
    if (!logits || logits.getRank() != 2 || !logits.getElementType().isF32() ||
        !ShapedType::isDynamic(logits.getDimSize(0)) || logits.isDynamicDim(1))
      return step.emitError() << "@step must return one tensor<?xVOCABxf32> of logits";
    return success();
  }

  // Each layer's cache belongs to exactly one attention op.
  LogicalResult verifyCacheUses(func::FuncOp step) {
    llvm::DenseMap<Value, Operation *> owner;
    WalkResult result = step.walk([&](llmc::llm::PagedAttentionOp op) {
      auto [it, inserted] = owner.try_emplace(op.getCache(), op);
      if (!inserted) {
        op.emitError() << "KV cache is already used by another attention op";
        it->second->emitRemark() << "first use is here";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }
};

} // namespace
