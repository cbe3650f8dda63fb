//===- GroupBuilder.cpp - wrap ops into an llm.fusion group ---------------===//
#include "Kernels/GroupBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {

std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().str();
  return "step";
}

FusionOp buildFusionGroup(ArrayRef<Operation *> ops, StringRef name) {
  Operation *first = ops.front();
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  llvm::SetVector<Value> inputs;
  SmallVector<Value> outputs;
  for (Operation *op : ops) {
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if ((def && members.contains(def)) || (def && isa<WeightOp>(def)))
        continue;
      // The group sits where `first` was: its inputs must already exist.
      if (def && (def->getBlock() != first->getBlock() || !def->isBeforeInBlock(first)))
        return nullptr;
      inputs.insert(v);
    }
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *u) { return !members.contains(u); }))
        outputs.push_back(r);
  }

  OpBuilder b(first);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto group = b.create<FusionOp>(first->getLoc(), resultTypes, name, inputs.getArrayRef());
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
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (auto w = v.getDefiningOp<WeightOp>(); w && !map.contains(v))
        map.map(v, b.clone(*w)->getResult(0));
    b.clone(*op, map);
  }
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  b.create<YieldOp>(first->getLoc(), yielded);
  for (auto [outer, result] : llvm::zip(outputs, group.getResults()))
    outer.replaceUsesWithIf(result, [&](OpOperand &use) { return !members.contains(use.getOwner()); });
  for (Operation *op : llvm::reverse(ops))
    op->erase();
  return group;
}

} // namespace llmc
