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
      if (isa<WeightOp>(op))
        continue;
      auto group = dyn_cast<FusionOp>(op);
      if (!group) {
        if (isa<func::ReturnOp>(op))
          continue;
        return op.emitError() << "llmc-plan-memory expects @step to hold only llm.fusion groups "
                                 "(run llmc-outline-kernels first), found "
                              << op.getName();
      }
      // A group's rows follow its inputs: logits once lm_head has selected them.
      bool hasLMHead = !group.getBody().getOps<LMHeadOp>().empty();
      bool inputsAreLogits = false;
      for (Value in : group.getInputs())
        if (auto it = rowsOf.find(in); it != rowsOf.end() && it->second == Rows::kLogits)
          inputsAreLogits = true;
      Rows rows = hasLMHead || inputsAreLogits ? Rows::kLogits : Rows::kTokens;

      SmallVector<int64_t> assigned;
      for (Value result : group.getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || type.getRank() != 2 || type.isDynamicDim(1))
          return group.emitError() << "llmc-plan-memory: result of type " << result.getType()
                                   << " is not a [rows, features] tensor";
        int64_t need = rowBytesOf(type);
        // Best fit among free buffers of the same row kind and element type;
        // grow the widest free one if none is big enough.
        int64_t pick = -1;
        for (int64_t i = 0; i < int64_t(buffers.size()); ++i) {
          const Buffer &buf = buffers[i];
          if (!buf.free || buf.rows != rows || buf.elementType != type.getElementType())
            continue;
          if (pick < 0)
            pick = i;
          bool fits = buf.rowBytes >= need, pickFits = buffers[pick].rowBytes >= need;
          if ((fits && (!pickFits || buf.rowBytes < buffers[pick].rowBytes)) ||
              (!fits && !pickFits && buf.rowBytes > buffers[pick].rowBytes))
            pick = i;
        }
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
      group->setAttr("llm.result_buffers", b.getDenseI64ArrayAttr(assigned));

      // Values read for the last time by this group release their buffers
      // once it has run (a group never writes over its own inputs).
      for (Value in : group.getInputs())
        if (auto it = bufferOf.find(in);
            it != bufferOf.end() && lastUse.lookup(in) == position[&op])
          buffers[it->second].free = true;
      // Results nobody reads are dead at once.
      for (Value result : group.getResults())
        if (result.use_empty())
          buffers[bufferOf[result]].free = true;
    }

    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1 || !bufferOf.count(ret.getOperand(0)))
      return step.emitError() << "llmc-plan-memory: @step must return one kernel result";
    step->setAttr("llm.logits_buffer", b.getI64IntegerAttr(bufferOf[ret.getOperand(0)]));

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
