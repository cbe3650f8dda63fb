//===- FormGroups.cpp - gather anchors with their prologue and epilogue ---===//
//
// The grouping rule, for any op order:
//  - an anchor is a GEMM (llm.linear, llm.lm_head);
//  - its prologue is the norm that produces its input, when every user of
//    that norm is a GEMM (a norm shared by several GEMMs is recomputed in
//    each: a row norm costs O(K) per token against O(N K) for the GEMM),
//    plus the elementwise ops that produce the norm's input (a residual add
//    before the norm);
//  - its epilogue is what consumes the GEMM's result tile by tile: a split
//    of a merged result, RoPE directly on a region (the only use of it), and
//    elementwise ops whose other operands exist before the group. Ops that
//    combine two regions (SiLU(gate) * up) pair the regions' tiles, which
//    needs equal widths and no RoPE;
//  - leftover chains of elementwise ops form groups of their own.
// A per-head RMS norm (Qwen3's of Q and K) and a RoPE reading it stay single
// for now: they are kernels of their own.
// Attention, embeddings and the ops nothing absorbs stay single (the outline
// pass wraps them).
//
//===----------------------------------------------------------------------===//
#include "Fusion/Fusion.h"

#include "Kernels/GroupBuilder.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

bool isAnchor(Operation *op) { return isa<LinearOp, LMHeadOp>(op); }
bool isElementwise(Operation *op) { return isa<AddOp, MulOp, SiLUOp, GELUOp>(op); }
// A norm over whole rows (a per-head RMS norm of Q or K is not a GEMM's
// prologue: it normalizes a GEMM's output head by head).
bool isNorm(Operation *op) {
  if (auto n = dyn_cast<RMSNormOp>(op))
    return !n.getHeadDim();
  return isa<LayerNormOp>(op);
}
bool isTopLevel(Operation *op, Block *block) { return op && op->getBlock() == block; }
int64_t widthOf(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(1); }

// Defined before `first` in its block, or a block argument.
bool availableAt(Value v, Operation *first) {
  Operation *def = v.getDefiningOp();
  return !def || (def->getBlock() == first->getBlock() && def->isBeforeInBlock(first));
}

class GroupFormer {
public:
  GroupFormer(Block &block, bool prologueElementwise)
      : block(block), prologueElementwise(prologueElementwise) {}

  unsigned run() {
    // Forming a group erases its members, so walk a list of anchors made
    // first (an anchor is never a member of another anchor's group).
    SmallVector<Operation *> anchors;
    for (Operation &op : block)
      if (isAnchor(&op))
        anchors.push_back(&op);
    for (Operation *anchor : anchors)
      formAnchorGroup(anchor);
    // Leftover elementwise ops: seed a group at the first one not yet tried.
    llvm::DenseSet<Operation *> tried;
    for (;;) {
      auto it = llvm::find_if(block, [&](Operation &op) {
        return isElementwise(&op) && !tried.contains(&op);
      });
      if (it == block.end())
        break;
      if (!formElementwiseGroup(&*it))
        tried.insert(&*it);
    }
    return formed;
  }

private:
  void formAnchorGroup(Operation *anchor);
  bool formElementwiseGroup(Operation *seed);
  void absorbPrologue(Operation *anchor, llvm::SetVector<Operation *> &members);
  void absorbEpilogue(Operation *anchor, llvm::SetVector<Operation *> &members);
  // Whether every value the members read from outside is defined before the
  // earliest member (where the group goes).
  static bool inputsAvailable(const llvm::SetVector<Operation *> &members);
  bool build(llvm::SetVector<Operation *> &members, Operation *anchor);

  Block &block;
  bool prologueElementwise; // Fuse's prologue-elementwise option
  unsigned formed = 0;
};

void GroupFormer::absorbPrologue(Operation *anchor, llvm::SetVector<Operation *> &members) {
  Operation *norm = anchor->getOperand(0).getDefiningOp();
  if (!isTopLevel(norm, &block) || !isNorm(norm))
    return;
  bool onlyGemms = llvm::all_of(norm->getResult(0).getUses(), [](OpOperand &use) {
    return isAnchor(use.getOwner()) && use.getOperandNumber() == 0;
  });
  if (!onlyGemms)
    return;
  if (!norm->hasOneUse()) {
    // This GEMM gets its own copy; the original goes with its last user.
    OpBuilder b(anchor);
    Operation *copy = b.clone(*norm);
    anchor->setOperand(0, copy->getResult(0));
    norm = copy;
  }
  members.insert(norm);
  if (!prologueElementwise)
    return;
  // Elementwise producers of the norm's input, of the same width, as long as
  // everything the group reads still exists where it will be placed (at its
  // earliest member).
  int64_t k = widthOf(norm->getResult(0));
  SmallVector<Operation *> work{norm};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!isTopLevel(def, &block) || !isElementwise(def) || widthOf(v) != k ||
          members.contains(def))
        continue;
      members.insert(def);
      if (!inputsAvailable(members)) {
        members.remove(def);
        continue;
      }
      work.push_back(def);
    }
  }
}

bool GroupFormer::inputsAvailable(const llvm::SetVector<Operation *> &members) {
  Operation *first = members.front();
  for (Operation *m : members)
    if (m->isBeforeInBlock(first))
      first = m;
  for (Operation *m : members)
    for (Value v : m->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && (members.contains(def) || isa<WeightOp>(def)))
        continue;
      if (!availableAt(v, first))
        return false;
    }
  return true;
}

void GroupFormer::absorbEpilogue(Operation *anchor, llvm::SetVector<Operation *> &members) {
  if (isa<LMHeadOp>(anchor))
    return;
  Operation *first = anchor;
  for (Operation *m : members)
    if (m->isBeforeInBlock(first))
      first = m;

  // Region of each epilogue value: the part of a split, or 0; -1 = paired.
  llvm::DenseMap<Value, int64_t> regionOf;
  SmallVector<int64_t> widths;
  Value result = anchor->getResult(0);
  if (result.hasOneUse())
    if (auto split = dyn_cast<SplitOp>(*result.getUsers().begin())) {
      members.insert(split);
      for (auto [i, r] : llvm::enumerate(split.getResults())) {
        regionOf[r] = i;
        widths.push_back(widthOf(r));
      }
    }
  if (regionOf.empty()) {
    regionOf[result] = 0;
    widths.push_back(widthOf(result));
  }
  bool hasRope = false, paired = false;
  auto isRegionValue = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def == anchor || isa<SplitOp>(def);
  };

  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<Value> values;
    for (auto &[v, region] : regionOf)
      values.push_back(v);
    llvm::sort(values, [](Value a, Value b) {
      return a.getDefiningOp()->isBeforeInBlock(b.getDefiningOp()) ||
             (a.getDefiningOp() == b.getDefiningOp() &&
              cast<OpResult>(a).getResultNumber() < cast<OpResult>(b).getResultNumber());
    });
    for (Value v : values) {
      for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
        if (members.contains(user) || !isTopLevel(user, &block))
          continue;
        if (auto rope = dyn_cast<RopeOp>(user)) {
          if (!isRegionValue(v) || !v.hasOneUse() || paired)
            continue;
          members.insert(rope);
          regionOf[rope.getResult()] = regionOf[v];
          hasRope = changed = true;
          continue;
        }
        if (!isElementwise(user))
          continue;
        std::optional<int64_t> region;
        bool ok = true;
        for (Value operand : user->getOperands()) {
          auto it = regionOf.find(operand);
          if (it == regionOf.end()) {
            ok &= availableAt(operand, first);
            continue;
          }
          region = (region && *region != it->second) ? -1 : it->second;
        }
        if (!ok || !region)
          continue;
        if (*region == -1) {
          bool equalWidths = llvm::all_equal(widths);
          if (hasRope || !equalWidths)
            continue;
          paired = true;
        }
        members.insert(user);
        regionOf[user->getResult(0)] = *region;
        changed = true;
      }
    }
  }
}

bool GroupFormer::build(llvm::SetVector<Operation *> &members, Operation *anchor) {
  SmallVector<Operation *> ops(members.begin(), members.end());
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  SmallVector<std::string> kinds;
  for (Operation *op : ops) {
    std::string k = op->getName().stripDialect().str();
    if (!llvm::is_contained(kinds, k))
      kinds.push_back(k);
  }
  std::string name = locationName((anchor ? anchor : ops.front())->getLoc()) + "." +
                     llvm::join(kinds, "+") + "_" + std::to_string(formed);
  if (!buildFusionGroup(ops, name))
    return false;
  ++formed;
  return true;
}

void GroupFormer::formAnchorGroup(Operation *anchor) {
  llvm::SetVector<Operation *> members;
  members.insert(anchor);
  absorbPrologue(anchor, members);
  absorbEpilogue(anchor, members);
  // A norm left without users (each GEMM took a copy) goes away.
  if (members.size() > 1)
    build(members, anchor);
  for (Operation &op : llvm::make_early_inc_range(block))
    if (isNorm(&op) && op.use_empty())
      op.erase();
}

bool GroupFormer::formElementwiseGroup(Operation *seed) {
  llvm::SetVector<Operation *> members;
  members.insert(seed);
  int64_t w = widthOf(seed->getResult(0));
  for (size_t i = 0; i < members.size(); ++i)
    for (Operation *user : members[i]->getResult(0).getUsers()) {
      if (members.contains(user) || !isTopLevel(user, &block) || !isElementwise(user) ||
          widthOf(user->getResult(0)) != w)
        continue;
      if (llvm::all_of(user->getOperands(), [&](Value v) {
            return members.contains(v.getDefiningOp()) || availableAt(v, seed);
          }))
        members.insert(user);
    }
  return members.size() > 1 && build(members, nullptr);
}

} // namespace

unsigned formFusionGroups(func::FuncOp fn, bool prologueElementwise) {
  if (fn.getBody().empty())
    return 0;
  return GroupFormer(fn.getBody().front(), prologueElementwise).run();
}

} // namespace llmc
