//===- MeshSharding.cpp - MLIR mesh ShardingInterface for llm ops ---------===//
//
// What each model claims, in the interface's terms (loops, indexing maps):
//
// - llm.add, llm.mul, llm.silu, llm.gelu: MLIR's own ElementwiseShardingInterface
//   (every dimension a parallel loop, identity maps), with one fix (below).
// - llm.linear: loops (t, n, k) = (parallel, parallel, reduction sum); maps
//   input (t, k), weight (n, k), bias (n), result (t, n).
// - llm.rms_norm: loops (t, h); only t may be split, since every output
//   element reads the whole row h. Maps input (t, h), weight (h), result (t, h).
// - llm.weight: a handle without loops; it never decides a sharding.
//
// The interface's default methods cannot serve llm.linear and llm.rms_norm:
// `defaultGetShardingOption` first calls `verifyShardingInterfaceImpl`, which
// fails when any operand is not a ranked tensor, and `mesh.shard` only takes
// ranked tensors, so a `!llm.weight` operand can carry no annotation. These
// models therefore read and write the shardings of the tensor operands only
// and let the loops decide how the weight is cut: at spmdization the weight
// handle gets our own `#llm.shard` (shardWeight), as the TP pass does.
//
//===----------------------------------------------------------------------===//
#include "llmc/Passes/Passes.h"
#include "Partition/Partition.h"

#include "llmc/Dialect/LLM/IR/LLMDialect.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/Dialect/Mesh/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Mesh/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::mesh;
using llmc::llm::LinearOp;
using llmc::llm::RMSNormOp;
using llmc::llm::WeightOp;

namespace {

// Records that loop `loop` is split over `axes`. Fails on a conflict: the
// loop already split over other axes, another mesh, or a mesh axis used by
// another loop (one mesh axis cuts one loop).
LogicalResult assignLoop(ShardingOption &option, FlatSymbolRefAttr meshSym, unsigned loop,
                         ArrayRef<MeshAxis> axes) {
  if (axes.empty())
    return success();
  if (option.mesh && meshSym && option.mesh != meshSym)
    return failure();
  SmallVector<MeshAxis> &slot = option.shardingArray[loop];
  if (!slot.empty())
    return success(llvm::equal(slot, axes));
  for (auto [i, other] : llvm::enumerate(option.shardingArray))
    if (i != loop && llvm::any_of(axes, [&](MeshAxis a) { return llvm::is_contained(other, a); }))
      return failure();
  slot.assign(axes.begin(), axes.end());
  if (meshSym)
    option.mesh = meshSym;
  return success();
}

// Maps the split axes of a rank-2 tensor sharding onto loops: tensor
// dimension d is loop dimLoops[d].
LogicalResult assignSplits(ShardingOption &option, MeshShardingAttr sharding,
                           ArrayRef<unsigned> dimLoops) {
  for (auto [d, axes] : llvm::enumerate(sharding.getSplitAxes()))
    if (d >= dimLoops.size() ||
        failed(assignLoop(option, sharding.getMesh(), dimLoops[d], axes.asArrayRef())))
      return failure();
  return success();
}

// The mesh all annotations name; a replicated annotation (no split axes)
// assigns no loop but still names the mesh the new annotations must use.
LogicalResult takeMesh(ShardingOption &option, ArrayRef<MeshShardingAttr> shardings) {
  for (MeshShardingAttr s : shardings) {
    if (!s)
      continue;
    if (option.mesh && option.mesh != s.getMesh())
      return failure();
    option.mesh = s.getMesh();
  }
  return success();
}

// Drops trailing unsplit loops, as the mesh passes expect.
void trimTrailing(ShardingArray &array) {
  while (!array.empty() && array.back().empty())
    array.pop_back();
}

ArrayRef<MeshAxis> loopAxes(const ShardingOption &option, unsigned loop) {
  if (loop < option.shardingArray.size())
    return option.shardingArray[loop];
  return {};
}

// Annotates `result` with `sharding` unless its producer side already has a
// mesh.shard (one without annotate_for_users).
void annotateResult(OpBuilder &b, OpResult result, MeshShardingAttr sharding) {
  FailureOr<std::pair<bool, MeshShardingAttr>> existing = getMeshShardingAttr(result);
  if (succeeded(existing) && !existing->first)
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfterValue(result);
  auto shard = b.create<ShardOp>(result.getLoc(), result, sharding,
                                 /*annotate_for_users=*/false);
  result.replaceAllUsesExcept(shard, shard);
}

// Annotates what `operand` needs unless it already reads a mesh.shard with
// annotate_for_users.
void annotateOperand(OpBuilder &b, OpOperand &operand, MeshShardingAttr sharding) {
  FailureOr<std::pair<bool, MeshShardingAttr>> existing = getMeshShardingAttr(operand);
  if (succeeded(existing) && existing->first)
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(operand.getOwner());
  auto shard = b.create<ShardOp>(operand.get().getLoc(), operand.get(), sharding,
                                 /*annotate_for_users=*/true);
  operand.set(shard);
}

// Mesh devices a loop split over `axes` is cut into.
int64_t piecesOf(ArrayRef<MeshAxis> axes, MeshOp mesh) {
  return collectiveProcessGroupSize(axes, mesh);
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// MLIR's ElementwiseShardingInterface, except for one case: when the only
// annotations have no split axes (a replicated or partial-sum operand, as
// the residual llm.add after a row-parallel llm.linear reads), LLVM 19's
// defaultGetShardingOption returns a non-empty option with a null mesh, and
// the mesh.shard built from it crashes the printer (test/Passes/Partition/
// mesh-propagation.mlir). The mesh is taken from the annotations instead.
template <typename Op>
struct ElementwiseModel : public ShardingInterface::ExternalModel<ElementwiseModel<Op>, Op> {
  using Upstream = ElementwiseShardingInterface<Op>;
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return Upstream().getLoopIteratorTypes(op);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    return Upstream().getIndexingMaps(op);
  }
  FailureOr<ShardingOption> getShardingOption(Operation *op,
                                              ArrayRef<MeshShardingAttr> operandShardings,
                                              ArrayRef<MeshShardingAttr> resultShardings) const {
    FailureOr<ShardingOption> option =
        mesh::detail::defaultGetShardingOption(op, operandShardings, resultShardings);
    if (failed(option) || option->empty || option->mesh)
      return option;
    SmallVector<MeshShardingAttr> all(operandShardings);
    llvm::append_range(all, resultShardings);
    if (failed(takeMesh(*option, all)))
      return failure();
    return option;
  }
  LogicalResult spmdize(Operation *op, ArrayRef<Value> spmdizedOperands,
                        ArrayRef<MeshShardingAttr> operandShardings,
                        ArrayRef<MeshShardingAttr> resultShardings, IRMapping &map,
                        SymbolTableCollection &symbols, OpBuilder &builder) const {
    return Upstream().spmdize(op, spmdizedOperands, operandShardings, resultShardings, map, symbols,
                              builder);
  }
};

//===----------------------------------------------------------------------===//
// llm.weight
//===----------------------------------------------------------------------===//

// A weight is a handle into the weight store, not a tensor: it has no loops
// and no annotation. Propagation must still visit it (sharding-propagation
// rejects any op without the interface), so it says "nothing to infer".
struct WeightHandleModel : public ShardingInterface::ExternalModel<WeightHandleModel, WeightOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const { return {}; }
  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }
  FailureOr<ShardingOption> getShardingOption(Operation *, ArrayRef<MeshShardingAttr>,
                                              ArrayRef<MeshShardingAttr>) const {
    return ShardingOption::makeEmpty();
  }
  LogicalResult addShardingAnnotations(Operation *, OpBuilder &, const ShardingOption &) const {
    return success();
  }
  // The reader (llm.linear) cuts the weight when it is spmdized.
  LogicalResult spmdize(Operation *op, ArrayRef<Value>, ArrayRef<MeshShardingAttr>,
                        ArrayRef<MeshShardingAttr>, IRMapping &map, SymbolTableCollection &,
                        OpBuilder &builder) const {
    builder.clone(*op, map);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// llm.linear
//===----------------------------------------------------------------------===//

enum LinearLoop : unsigned { kT = 0, kN = 1, kK = 2 };

struct LinearModel : public ShardingInterface::ExternalModel<LinearModel, LinearOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return {utils::IteratorType::parallel, utils::IteratorType::parallel,
            utils::IteratorType::reduction};
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    AffineExpr t = getAffineDimExpr(kT, ctx), n = getAffineDimExpr(kN, ctx),
               k = getAffineDimExpr(kK, ctx);
    SmallVector<AffineMap> maps = {AffineMap::get(3, 0, {t, k}, ctx),
                                   AffineMap::get(3, 0, {n, k}, ctx)};
    if (cast<LinearOp>(op).getBias())
      maps.push_back(AffineMap::get(3, 0, {n}, ctx));
    maps.push_back(AffineMap::get(3, 0, {t, n}, ctx));
    return maps;
  }

  // Only the input (operand 0) and the result can be annotated; the weight
  // and bias follow from the n and k loops.
  FailureOr<ShardingOption> getShardingOption(Operation *op,
                                              ArrayRef<MeshShardingAttr> operandShardings,
                                              ArrayRef<MeshShardingAttr> resultShardings) const {
    ShardingOption option;
    option.shardingArray.resize(3);
    MeshShardingAttr in = operandShardings[0], out = resultShardings[0];
    if (failed(takeMesh(option, {in, out})))
      return failure();
    if (out) {
      if (failed(assignSplits(option, out, {kT, kN})) ||
          failed(assignLoop(option, out.getMesh(), kK, out.getPartialAxes())))
        return failure();
      if (!out.getPartialAxes().empty() && out.getPartialType() != ReductionKind::Sum)
        return failure();
    }
    if (in && failed(assignSplits(option, in, {kT, kK})))
      return failure();
    trimTrailing(option.shardingArray);
    option.empty = !in && !out;
    return option;
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    MLIRContext *ctx = op->getContext();
    auto split = [&](unsigned d0, unsigned d1) {
      ShardingArray s = {llvm::to_vector(loopAxes(option, d0)),
                         llvm::to_vector(loopAxes(option, d1))};
      trimTrailing(s);
      return s;
    };
    // A split k loop leaves each device a partial sum of the result.
    annotateResult(b, op->getResult(0),
                   MeshShardingAttr::get(ctx, option.mesh, split(kT, kN), loopAxes(option, kK),
                                         ReductionKind::Sum));
    annotateOperand(b, op->getOpOperand(0), MeshShardingAttr::get(ctx, option.mesh, split(kT, kK)));
    return success();
  }

  // Clones the op with the sharded result type and gives the cloned weight
  // (and bias) handle the #llm.shard of its n or k slice.
  LogicalResult spmdize(Operation *op, ArrayRef<Value>, ArrayRef<MeshShardingAttr> operandShardings,
                        ArrayRef<MeshShardingAttr> resultShardings, IRMapping &map,
                        SymbolTableCollection &symbols, OpBuilder &builder) const {
    MeshShardingAttr out = resultShardings[0];
    if (!out)
      return op->emitOpError("mesh: the result has no sharding annotation");
    MeshOp mesh = getMeshOrNull(op, out.getMesh(), symbols);
    if (!mesh)
      return op->emitOpError("mesh: no mesh.mesh named ") << out.getMesh();
    // Not getMeshAxisAssignmentForLoopIterators: in LLVM 19 it never reads
    // resultShardings, so a column split (n, known from the result) is lost.
    FailureOr<ShardingOption> option = getShardingOption(op, operandShardings, resultShardings);
    if (failed(option))
      return op->emitOpError("mesh: the operand and result shardings disagree");
    ShardingArray loops = option->shardingArray;
    loops.resize(3);
    int64_t nPieces = piecesOf(loops[kN], mesh), kPieces = piecesOf(loops[kK], mesh);
    if (nPieces > 1 && kPieces > 1)
      return op->emitOpError("mesh: #llm.shard cuts a weight along one dimension, not both");
    auto linear = cast<LinearOp>(builder.clone(*op, map));
    linear.getResult().setType(
        cast<RankedTensorType>(shardType(linear.getResult().getType(), mesh, out)));
    if (nPieces > 1) {
      if (failed(llmc::shardWeight(linear.getWeightMutable(), 0, nPieces, nPieces, false)))
        return failure();
      if (linear.getBias() &&
          failed(llmc::shardWeight(linear.getBiasMutable()[0], 0, nPieces, nPieces, false)))
        return failure();
    } else if (kPieces > 1) {
      // Every device would add the whole bias to its partial sum.
      if (linear.getBias())
        return op->emitOpError("mesh: a bias with a split reduction loop is added once per shard");
      if (failed(llmc::shardWeight(linear.getWeightMutable(), 1, kPieces, kPieces, false)))
        return failure();
    }
    return success();
  }
};

//===----------------------------------------------------------------------===//
// llm.rms_norm
//===----------------------------------------------------------------------===//

struct RMSNormModel : public ShardingInterface::ExternalModel<RMSNormModel, RMSNormOp> {
  // h is not a reduction in the interface's sense (the result is indexed by
  // it too), and the interface has no iterator type for "reads the whole
  // row"; it is declared parallel and getShardingOption refuses to split it.
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return {utils::IteratorType::parallel, utils::IteratorType::parallel};
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    AffineExpr t = getAffineDimExpr(0, ctx), h = getAffineDimExpr(1, ctx);
    return {AffineMap::get(2, 0, {t, h}, ctx), AffineMap::get(2, 0, {h}, ctx),
            AffineMap::get(2, 0, {t, h}, ctx)};
  }
  FailureOr<ShardingOption> getShardingOption(Operation *op,
                                              ArrayRef<MeshShardingAttr> operandShardings,
                                              ArrayRef<MeshShardingAttr> resultShardings) const {
    ShardingOption option;
    option.shardingArray.resize(2);
    if (failed(takeMesh(option, {operandShardings[0], resultShardings[0]})))
      return failure();
    for (MeshShardingAttr s : {operandShardings[0], resultShardings[0]}) {
      if (!s)
        continue;
      if (!s.getPartialAxes().empty() || failed(assignSplits(option, s, {0, 1})))
        return failure();
    }
    if (!option.shardingArray[1].empty())
      return failure(); // Every output element reads the whole row.
    trimTrailing(option.shardingArray);
    option.empty = !operandShardings[0] && !resultShardings[0];
    return option;
  }
  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    ShardingArray split = {llvm::to_vector(loopAxes(option, 0))};
    trimTrailing(split);
    auto sharding = MeshShardingAttr::get(op->getContext(), option.mesh, split);
    annotateResult(b, op->getResult(0), sharding);
    annotateOperand(b, op->getOpOperand(0), sharding);
    return success();
  }
  // Only tokens can be split, and the weight is whole on every device.
  LogicalResult spmdize(Operation *op, ArrayRef<Value> spmdizedOperands,
                        ArrayRef<MeshShardingAttr> operandShardings,
                        ArrayRef<MeshShardingAttr> resultShardings, IRMapping &map,
                        SymbolTableCollection &symbols, OpBuilder &builder) const {
    spmdizeTriviallyShardableOperation(*op, spmdizedOperands, operandShardings, resultShardings,
                                       map, symbols, builder);
    return success();
  }
};

} // namespace

void llmc::registerLLMMeshShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, llm::LLMDialect *) {
    llm::AddOp::attachInterface<ElementwiseModel<llm::AddOp>>(*ctx);
    llm::MulOp::attachInterface<ElementwiseModel<llm::MulOp>>(*ctx);
    llm::SiLUOp::attachInterface<ElementwiseModel<llm::SiLUOp>>(*ctx);
    llm::GELUOp::attachInterface<ElementwiseModel<llm::GELUOp>>(*ctx);
    LinearOp::attachInterface<LinearModel>(*ctx);
    RMSNormOp::attachInterface<RMSNormModel>(*ctx);
    WeightOp::attachInterface<WeightHandleModel>(*ctx);
  });
}
