//===- PartitionPipeline.cpp - one pipeline stage's share of @step --------===//
//
// Keeps the layers of one pipeline stage in @step. The residual stream (the
// embedding's result and the chain of residual adds that follows it) is
// where a stage may end: at a cut, the hidden state is the only activation
// that the rest of the step reads, so it is what llm.send / llm.recv carry.
// Layers are the paged attentions, in order; stage boundaries fall on the
// last residual value before a layer's attention. Passes.td has the rules.
//
//===----------------------------------------------------------------------===//
#include "Partition/Partition.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

namespace llmc {
#define GEN_PASS_DEF_PARTITIONPIPELINE
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// The bytes of the weights `ops` read, each distinct weight once.
int64_t weightBytes(ArrayRef<Operation *> ops) {
  llvm::SmallSetVector<Operation *, 16> weights;
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (auto w = v.getDefiningOp<WeightOp>())
        weights.insert(w);
  int64_t bytes = 0;
  for (Operation *w : weights)
    bytes += cast<WeightOp>(w).getType().getByteSize();
  return bytes;
}

struct PartitionPipelinePass : llmc::impl::PartitionPipelineBase<PartitionPipelinePass> {
  using PartitionPipelineBase::PartitionPipelineBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stages < 1 || stage < 0 || stage >= stages) {
      module.emitError() << "llmc-partition-pp: stage " << int64_t(stage) << " is not one of the "
                         << int64_t(stages) << " stages";
      return signalPassFailure();
    }
    if (stages == 1 && layers.empty())
      return markAllAnalysesPreserved();
    FailureOr<func::FuncOp> step = llmc::stepToPartition(module, getArgument(), "pp");
    if (failed(step) || failed(partition(*step)))
      return signalPassFailure();
    llmc::setMeshAttr(module, "pp", stages);
    llmc::setMeshAttr(module, "stage", stage);
  }

  LogicalResult partition(func::FuncOp step) {
    Block &body = step.getBody().front();
    // The compute ops in order (weights are free: every stage reads its own).
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      if (!isa<WeightOp, func::ReturnOp>(op))
        ops.push_back(&op);
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(ops))
      position[op] = i;

    SmallVector<int64_t> attentions; // positions of the layers' attentions
    for (auto [i, op] : llvm::enumerate(ops))
      if (isa<PagedAttentionOp>(op))
        attentions.push_back(i);
    int64_t numLayers = attentions.size();
    if (numLayers < stages)
      return step.emitError() << "llmc-partition-pp: " << numLayers << " layers cannot fill "
                              << int64_t(stages) << " pipeline stages";

    // The residual stream: the embedding, then each add that reads the
    // previous value of the stream.
    SmallVector<Value> stream;
    for (Operation *op : ops)
      if (isa<EmbedOp>(op)) {
        stream.push_back(op->getResult(0));
        break;
      }
    if (stream.empty())
      return step.emitError() << "llmc-partition-pp: @step has no llm.embed to start the residual "
                                 "stream";
    for (bool grew = true; grew;) {
      grew = false;
      for (Operation *user : stream.back().getUsers())
        if (isa<AddOp>(user)) {
          stream.push_back(user->getResult(0));
          grew = true;
          break;
        }
    }

    // Layer l's input: the last stream value before its attention.
    SmallVector<Value> layerInput(numLayers);
    for (int64_t l = 0; l < numLayers; ++l) {
      for (Value v : stream)
        if (position.lookup(v.getDefiningOp()) < attentions[l])
          layerInput[l] = v;
      if (l > 0 && layerInput[l] == layerInput[l - 1])
        return ops[attentions[l]]->emitError()
               << "llmc-partition-pp: no residual value separates layer " << l - 1 << " from layer "
               << l << ", so no stage boundary can fall between them";
    }

    FailureOr<SmallVector<int64_t>> firstLayers =
        chooseStages(ops, attentions, layerInput, position);
    if (failed(firstLayers))
      return failure();
    // This stage's ops: after the previous cut, up to and including its own.
    auto cutPosition = [&](int64_t s) -> int64_t {
      if (s == 0)
        return -1;
      if (s == stages)
        return int64_t(ops.size()) - 1;
      return position.lookup(layerInput[(*firstLayers)[s]].getDefiningOp());
    };
    int64_t begin = cutPosition(stage) + 1, end = cutPosition(stage + 1);
    Value input = stage > 0 ? layerInput[(*firstLayers)[stage]] : Value();
    Value output = stage + 1 < stages ? layerInput[(*firstLayers)[stage + 1]] : Value();

    // Only the hidden state may cross a boundary.
    for (int64_t i = begin; i <= end; ++i)
      for (Value v : ops[i]->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || isa<WeightOp>(def) || v == input)
          continue;
        if (position.lookup(def) < begin)
          return ops[i]->emitError() << "llmc-partition-pp: this op of stage " << int64_t(stage)
                                     << " reads a value of an earlier stage other than the hidden "
                                        "state";
      }
    if (output)
      for (int64_t i = end + 1; i < int64_t(ops.size()); ++i)
        for (Value v : ops[i]->getOperands())
          if (Operation *def = v.getDefiningOp(); def && !isa<WeightOp>(def) && v != output &&
                                                  position.lookup(def) <= end &&
                                                  position.lookup(def) >= begin)
            return ops[i]->emitError() << "llmc-partition-pp: this op of a later stage reads a "
                                          "value of stage "
                                       << int64_t(stage) << " other than the hidden state";

    rewrite(step, ops, begin, end, input, output);
    return success();
  }

  // The first layer of each stage (and numLayers at the end): from `layers`
  // when given, else balanced by weight bytes.
  FailureOr<SmallVector<int64_t>>
  chooseStages(ArrayRef<Operation *> ops, ArrayRef<int64_t> attentions, ArrayRef<Value> layerInput,
               const llvm::DenseMap<Operation *, int64_t> &position) {
    int64_t numLayers = attentions.size();
    func::FuncOp step = ops.front()->getParentOfType<func::FuncOp>();
    SmallVector<int64_t> first;
    if (!layers.empty()) {
      if (int64_t(layers.size()) != stages)
        return step.emitError() << "llmc-partition-pp: layers gives " << layers.size()
                                << " ranges for " << int64_t(stages) << " stages";
      int64_t next = 0;
      for (const std::string &range : layers) {
        auto [lo, hi] = StringRef(range).split('-');
        int64_t a, b;
        if (lo.getAsInteger(10, a) || hi.getAsInteger(10, b) || a != next || b < a)
          return step.emitError() << "llmc-partition-pp: layer range '" << range
                                  << "' must be FIRST-LAST continuing at layer " << next;
        first.push_back(a);
        next = b + 1;
      }
      if (next != numLayers)
        return step.emitError() << "llmc-partition-pp: the layer ranges cover layers 0-" << next - 1
                                << " of 0-" << numLayers - 1;
      first.push_back(numLayers);
      return first;
    }

    // Bytes per layer (a layer's ops run from its input to the next one's);
    // the embedding counts on the first stage and the head on the last.
    auto bytesBetween = [&](int64_t from, int64_t to) { // ops (from, to]
      return weightBytes(ArrayRef<Operation *>(ops).slice(from + 1, to - from));
    };
    auto inputPos = [&](int64_t l) { return position.lookup(layerInput[l].getDefiningOp()); };
    SmallVector<int64_t> bytes(numLayers);
    for (int64_t l = 0; l < numLayers; ++l)
      bytes[l] =
          bytesBetween(inputPos(l), l + 1 < numLayers ? inputPos(l + 1) : int64_t(ops.size()) - 1);
    bytes.front() += bytesBetween(-1, inputPos(0));
    // Contiguous split minimizing the largest stage (layers are few: O(L^2 M)).
    SmallVector<int64_t> prefix(numLayers + 1, 0);
    for (int64_t l = 0; l < numLayers; ++l)
      prefix[l + 1] = prefix[l] + bytes[l];
    const int64_t kInf = std::numeric_limits<int64_t>::max();
    // best[s][l]: the largest stage when layers [0, l) fill s stages.
    SmallVector<SmallVector<int64_t>> best(stages + 1, SmallVector<int64_t>(numLayers + 1, kInf));
    SmallVector<SmallVector<int64_t>> from(stages + 1, SmallVector<int64_t>(numLayers + 1, 0));
    best[0][0] = 0;
    for (int64_t s = 1; s <= stages; ++s)
      for (int64_t l = s; l <= numLayers; ++l)
        for (int64_t k = s - 1; k < l; ++k) {
          if (best[s - 1][k] == kInf)
            continue;
          int64_t cost = std::max(best[s - 1][k], prefix[l] - prefix[k]);
          if (cost < best[s][l]) {
            best[s][l] = cost;
            from[s][l] = k;
          }
        }
    first.assign(stages + 1, numLayers);
    for (int64_t s = stages, l = numLayers; s > 0; --s) {
      l = from[s][l];
      first[s - 1] = l;
    }
    return first;
  }

  void rewrite(func::FuncOp step, ArrayRef<Operation *> ops, int64_t begin, int64_t end,
               Value input, Value output) {
    OpBuilder b(&getContext());
    Block &body = step.getBody().front();
    if (input) {
      b.setInsertionPoint(ops[begin]);
      auto recv = b.create<RecvOp>(input.getLoc(), input.getType(), uint64_t(stage - 1));
      input.replaceUsesWithIf(recv.getResult(), [&](OpOperand &use) {
        auto it = llvm::find(ops, use.getOwner());
        return it != ops.end() && it - ops.begin() >= begin && it - ops.begin() <= end;
      });
    }
    if (output) {
      b.setInsertionPointAfter(output.getDefiningOp());
      b.create<SendOp>(output.getLoc(), output, uint64_t(stage + 1));
      // A stage before the last returns nothing: its result is the send.
      auto ret = cast<func::ReturnOp>(body.getTerminator());
      b.setInsertionPoint(ret);
      b.create<func::ReturnOp>(ret.getLoc());
      ret.erase();
      step.setType(FunctionType::get(&getContext(), body.getArgumentTypes(), {}));
    }
    // Other stages' ops go, users first.
    for (int64_t i = int64_t(ops.size()) - 1; i >= 0; --i)
      if (i < begin || i > end) {
        ops[i]->dropAllUses();
        ops[i]->erase();
      }
    for (Operation &op : llvm::make_early_inc_range(body))
      if (isa<WeightOp>(op) && op.use_empty())
        op.erase();
    // Caches of other stages' layers leave the signature (the runtime
    // allocates only the caches a stage's @step takes; their llm.name keeps
    // the model's layer number).
    llvm::BitVector unused(body.getNumArguments());
    for (BlockArgument arg : body.getArguments())
      if (isa<KVCacheType>(arg.getType()) && arg.use_empty())
        unused.set(arg.getArgNumber());
    (void)step.eraseArguments(unused);
  }
};

} // namespace
