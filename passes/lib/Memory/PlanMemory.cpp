//===- PlanMemory.cpp - assign and reuse activation buffers ---------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace llmc {
#define GEN_PASS_DEF_PLANMEMORY
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

enum class Rows { kTokens, kLogits };

struct Buffer {
  Rows rows;
  int64_t rowBytes;
  Type elementType;
  bool free = false;
};

int64_t rowBytesOf(RankedTensorType t) {
  return t.getDimSize(1) * ((t.getElementTypeBitWidth() + 7) / 8);
}

// The free buffer of this row kind and element type that fits `need` most
// tightly, else the widest free one (which then grows); -1 when none is free.
int64_t bestFit(const std::vector<Buffer> &buffers, Rows rows, Type elementType, int64_t need) {
  int64_t pick = -1;
  for (int64_t i = 0; i < int64_t(buffers.size()); ++i) {
    const Buffer &buf = buffers[i];
    if (!buf.free || buf.rows != rows || buf.elementType != elementType)
      continue;
    if (pick < 0)
      pick = i;
    bool fits = buf.rowBytes >= need, pickFits = buffers[pick].rowBytes >= need;
    if ((fits && (!pickFits || buf.rowBytes < buffers[pick].rowBytes)) ||
        (!fits && !pickFits && buf.rowBytes > buffers[pick].rowBytes))
      pick = i;
  }
  return pick;
}

struct PlanMemoryPass : llmc::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    auto step = getOperation().lookupSymbol<func::FuncOp>("step");
    if (!step) {
      getOperation().emitError() << "llmc-plan-memory: module has no func.func @step";
      return signalPassFailure();
    }
    if (failed(plan(step)))
      signalPassFailure();
  }

  LogicalResult plan(func::FuncOp step) {
    Block &body = step.getBody().front();
    // Position of each op, and the last position at which each value is read.
    llvm::DenseMap<Operation *, unsigned> position;
    unsigned n = 0;
    for (Operation &op : body)
      position[&op] = n++;
    llvm::DenseMap<Value, unsigned> lastUse;
    for (Operation &op : body)
      for (Value v : op.getOperands())
        lastUse[v] = std::max(lastUse.lookup(v), position[&op]);

    std::vector<Buffer> buffers;
    llvm::DenseMap<Value, int64_t> bufferOf;
    llvm::DenseMap<Value, Rows> rowsOf;
    MLIRContext *ctx = &getContext();
    Builder b(ctx);

    for (Operation &op : body) {
      if (isa<WeightOp, func::ReturnOp>(op))
        continue;
      // Collectives run between the kernels, on buffers like theirs.
      bool collective = isa<AllReduceOp, AllGatherOp, SendOp, RecvOp>(op);
      auto group = dyn_cast<FusionOp>(op);
      if (!group && !collective)
        return op.emitError() << "llmc-plan-memory expects @step to hold only llm.fusion groups "
                                 "and collectives (run llmc-outline-kernels first), found "
                              << op.getName();
      ValueRange inputs = group ? ValueRange(group.getInputs()) : ValueRange(op.getOperands());
      // A group's rows follow its inputs: logits once lm_head has selected them.
      bool hasLMHead = group && !group.getBody().getOps<LMHeadOp>().empty();
      bool inputsAreLogits = false;
      for (Value in : inputs)
        if (auto it = rowsOf.find(in); it != rowsOf.end() && it->second == Rows::kLogits)
          inputsAreLogits = true;
      Rows rows = hasLMHead || inputsAreLogits ? Rows::kLogits : Rows::kTokens;

      SmallVector<int64_t> assigned;
      for (Value result : op.getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || type.getRank() != 2 || type.isDynamicDim(1))
          return op.emitError() << "llmc-plan-memory: result of type " << result.getType()
                                << " is not a [rows, features] tensor";
        int64_t need = rowBytesOf(type);
        int64_t pick = -1;
        // An all-reduce of a value read nowhere else works in place.
        if (auto reduce = dyn_cast<AllReduceOp>(op);
            reduce && lastUse.lookup(reduce.getInput()) == position[&op])
          pick = bufferOf.lookup(reduce.getInput());
        // Best fit among free buffers of the same row kind and element type;
        // grow the widest free one if none is big enough.
        if (pick < 0)
          pick = bestFit(buffers, rows, type.getElementType(), need);
        if (pick < 0) {
          buffers.push_back({rows, need, type.getElementType()});
          pick = int64_t(buffers.size()) - 1;
        }
        buffers[pick].free = false;
        buffers[pick].rowBytes = std::max(buffers[pick].rowBytes, need);
        bufferOf[result] = pick;
        rowsOf[result] = rows;
        assigned.push_back(pick);
      }
      if (op.getNumResults())
        op.setAttr("llm.result_buffers", b.getDenseI64ArrayAttr(assigned));

      // Values read for the last time by this op release their buffers once
      // it has run (a group never writes over its own inputs; an in-place
      // all-reduce took its input's buffer over above).
      for (Value in : inputs)
        if (auto it = bufferOf.find(in); it != bufferOf.end() &&
                                         lastUse.lookup(in) == position[&op] &&
                                         !llvm::is_contained(assigned, it->second))
          buffers[it->second].free = true;
      // Results nobody reads are dead at once.
      for (Value result : op.getResults())
        if (result.use_empty())
          buffers[bufferOf[result]].free = true;
    }

    // A pipeline stage before the last returns nothing (it sends).
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    bool sends =
        ret.getNumOperands() == 0 && step.getNumResults() == 0 && !body.getOps<SendOp>().empty();
    if (!sends) {
      if (ret.getNumOperands() != 1 || !bufferOf.count(ret.getOperand(0)))
        return step.emitError() << "llmc-plan-memory: @step must return one kernel result (or, "
                                   "on a pipeline stage before the last, nothing after an llm.send)";
      step->setAttr("llm.logits_buffer", b.getI64IntegerAttr(bufferOf[ret.getOperand(0)]));
    }

    SmallVector<Attribute> table;
    for (const Buffer &buf : buffers)
      table.push_back(b.getDictionaryAttr({
          b.getNamedAttr("rows", b.getStringAttr(buf.rows == Rows::kTokens ? "tokens" : "logits")),
          b.getNamedAttr("row_bytes", b.getI64IntegerAttr(buf.rowBytes)),
          b.getNamedAttr("dtype", TypeAttr::get(buf.elementType)),
      }));
    getOperation()->setAttr("llm.buffers", b.getArrayAttr(table));
    return success();
  }
};

} // namespace
