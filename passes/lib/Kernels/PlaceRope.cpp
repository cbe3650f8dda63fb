//===- PlaceRope.cpp - RoPE of query and key into the attention group -----===//
//
// See Passes.td (llmc-place-rope) for the rule and an example. The move is a
// code-generation decision (which kernel rotates Q and K) made here, in the
// IR, so that every emitter reads the same answer.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace llmc {
#define GEN_PASS_DEF_PLACEROPE
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// A RoPE in a GEMM group whose result only `attention` reads, through
// `attentionArg` (the attention group's block argument).
struct Candidate {
  RopeOp rope;
  FusionOp producer;
  BlockArgument attentionArg;
};

std::optional<Candidate> producerRope(FusionOp group, PagedAttentionOp attention, Value inner) {
  auto arg = dyn_cast<BlockArgument>(inner);
  if (!arg || !inner.hasOneUse())
    return std::nullopt;
  Value outer = group.getInputs()[arg.getArgNumber()];
  auto result = dyn_cast<OpResult>(outer);
  auto producer = result ? dyn_cast<FusionOp>(result.getOwner()) : FusionOp();
  if (!producer || !outer.hasOneUse() || producer.getBody().front().getOps<LinearOp>().empty())
    return std::nullopt;
  Operation *yield = producer.getBody().front().getTerminator();
  Value yielded = yield->getOperand(result.getResultNumber());
  auto rope = yielded.getDefiningOp<RopeOp>();
  if (!rope || rope.getHeadDimAttr().getInt() != attention.getHeadDimAttr().getInt() ||
      llvm::count(yield->getOperands(), yielded) != 1 ||
      !llvm::all_of(rope->getUsers(), [](Operation *u) { return isa<YieldOp>(u); }))
    return std::nullopt;
  // Its frequency factors move with it, so they must be a weight of the group.
  if (Value ff = rope.getFreqFactors(); ff && !ff.getDefiningOp<WeightOp>())
    return std::nullopt;
  return Candidate{rope, producer, arg};
}

// The block argument of `group` that carries `outer`, added as a new input
// when the group does not take it yet.
BlockArgument inputFor(FusionOp group, Value outer) {
  Block &body = group.getBody().front();
  for (auto [i, input] : llvm::enumerate(group.getInputs()))
    if (input == outer)
      return body.getArgument(i);
  group->insertOperands(group->getNumOperands(), outer);
  return body.addArgument(outer.getType(), outer.getLoc());
}

// Clones c.rope (and its frequency-factor weight) into the attention's
// group, just before the attention, rotating the attention's own input; the
// producer then yields the unrotated value.
void move(Candidate c, FusionOp attentionGroup, PagedAttentionOp attention) {
  RopeOp rope = c.rope;
  OpBuilder b(attention);
  IRMapping map;
  map.map(rope.getInput(), c.attentionArg);
  Value positions = c.producer.getInputs()[cast<BlockArgument>(rope.getPositions()).getArgNumber()];
  map.map(rope.getPositions(), inputFor(attentionGroup, positions));
  WeightOp freqWeight;
  if (Value ff = rope.getFreqFactors()) {
    freqWeight = ff.getDefiningOp<WeightOp>();
    map.map(ff, b.clone(*freqWeight)->getResult(0));
  }
  Operation *moved = b.clone(*rope, map);
  c.attentionArg.replaceUsesWithIf(moved->getResult(0), [&](OpOperand &use) {
    return use.getOwner() == attention.getOperation();
  });

  rope.getResult().replaceAllUsesWith(rope.getInput());
  rope.erase();
  if (freqWeight && freqWeight->use_empty())
    freqWeight.erase();
}

// The fuse pass names a group after its ops ("...rms_norm+linear+split+rope_0");
// once its RoPEs have left, the name says so.
void renameWithoutRope(FusionOp group) {
  if (!group.getBody().front().getOps<RopeOp>().empty())
    return;
  std::string name = group.getName().str();
  for (size_t at; (at = name.find("+rope")) != std::string::npos;)
    name.erase(at, 5);
  group.setName(name);
}

struct PlaceRopePass : llmc::impl::PlaceRopeBase<PlaceRopePass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) {
      for (FusionOp group : fn.getBody().getOps<FusionOp>()) {
        SmallVector<PagedAttentionOp> attentions(
            group.getBody().front().getOps<PagedAttentionOp>());
        for (PagedAttentionOp p : attentions) {
          std::optional<Candidate> q = producerRope(group, p, p.getQuery());
          std::optional<Candidate> k = producerRope(group, p, p.getKey());
          if (!q || !k || q->rope.getStyle() != k->rope.getStyle())
            continue;
          move(*q, group, p);
          move(*k, group, p);
          renameWithoutRope(q->producer);
          renameWithoutRope(k->producer);
          ++numMoved;
        }
      }
    });
  }
};

} // namespace
