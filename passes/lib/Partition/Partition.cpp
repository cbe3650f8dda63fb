//===- Partition.cpp - helpers shared by the partition passes -------------===//
#include "Partition/Partition.h"

#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/core/weight_format.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {

FailureOr<func::FuncOp> stepToPartition(ModuleOp module, StringRef pass, StringRef key) {
  if (auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttr); mesh && mesh.get(key))
    return module.emitError() << pass << ": the module is already partitioned (" << kMeshAttr
                              << " has " << key << " = " << mesh.get(key) << ")";
  auto step = module.lookupSymbol<func::FuncOp>("step");
  if (!step)
    return module.emitError() << pass << ": module has no func.func @step";
  return step;
}

void setMeshAttr(ModuleOp module, StringRef key, int64_t value) {
  Builder b(module.getContext());
  NamedAttrList entries;
  if (auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttr))
    entries.assign(mesh.getValue().begin(), mesh.getValue().end());
  entries.set(key, b.getI64IntegerAttr(value));
  module->setAttr(kMeshAttr, entries.getDictionary(module.getContext()));
}

namespace {
LogicalResult shardWeightImpl(OpOperand &use, int64_t dim, int64_t pieces, int64_t ranks, bool pad,
                              StringRef cloneName, bool perPart);
} // namespace

LogicalResult shardWeight(OpOperand &use, int64_t dim, int64_t pieces, int64_t ranks, bool pad,
                          StringRef cloneName) {
  return shardWeightImpl(use, dim, pieces, ranks, pad, cloneName, /*perPart=*/false);
}

LogicalResult shardExperts(OpOperand &use, int64_t experts, int64_t dim, int64_t ranks) {
  auto weight = use.get().getDefiningOp<WeightOp>();
  if (!weight)
    return use.getOwner()->emitError()
           << "partition: expected this op's experts to come from llm.weight";
  WeightType type = weight.getType();
  if (!weight->hasOneUse())
    return use.getOwner()->emitError()
           << "partition: the experts '" << weight.getName() << "' are read by more than one op";
  if (dim == 0 && !weight.getParts()) {
    // One stored stack: its experts' rows, each a part of its own.
    const int64_t rows = type.getShape()[0] / experts;
    Builder b(weight.getContext());
    SmallVector<Attribute> parts(experts, b.getStringAttr(weight.getName()));
    SmallVector<int64_t> ranges;
    for (int64_t e = 0; e < experts; ++e)
      ranges.append({e * rows, (e + 1) * rows});
    weight.setPartsAttr(b.getArrayAttr(parts));
    weight.setRowsAttr(b.getDenseI64ArrayAttr(ranges));
  }
  if (dim == 0 && weight.getParts()->size() != size_t(experts))
    return use.getOwner()->emitError()
           << "partition: the experts '" << weight.getName() << "' are "
           << weight.getParts()->size() << " stored tensors, not one per each of the " << experts
           << " experts";
  return shardWeightImpl(use, dim, ranks, ranks, /*pad=*/false, "", /*perPart=*/true);
}

namespace {
LogicalResult shardWeightImpl(OpOperand &use, int64_t dim, int64_t pieces, int64_t ranks, bool pad,
                              StringRef cloneName, bool perPart) {
  Operation *user = use.getOwner();
  auto weight = use.get().getDefiningOp<WeightOp>();
  if (!weight)
    return user->emitError() << "partition: expected this op's weight to come from llm.weight";
  WeightType type = weight.getType();
  auto fail = [&]() {
    return user->emitError() << "partition: cannot split weight '" << weight.getName() << "' ("
                             << type << ") along dimension " << dim << " into " << pieces
                             << " pieces: ";
  };
  if (weight.getShard())
    return fail() << "it is already split";
  // Row slices of stored tensors (a fused checkpoint tensor's Q, K, V) are
  // sliced further, each part on its own; joins of whole tensors are not,
  // but for stacked experts, whose parts are the experts.
  if (weight.getParts() && !weight.getRows() && !perPart)
    return fail() << "it is a concatenation (run the partition passes before llmc-fuse)";
  if (dim >= type.getRank())
    return fail() << "it has rank " << type.getRank();
  int64_t size = type.getShape()[dim];
  if (!pad && size % pieces != 0)
    return fail() << pieces << " does not divide " << size;
  int64_t piece = (size + pieces - 1) / pieces;
  if (dim == type.getRank() - 1) {
    std::optional<WeightFormatInfo> info =
        LookupWeightFormat(stringifyWeightFormat(type.getFormat()).str());
    int64_t block = info && info->grouped ? type.getGroup() : info ? info->block_elems : 1;
    if (piece % block != 0)
      return fail() << "a slice of " << piece << " elements would cut a "
                    << stringifyWeightFormat(type.getFormat()) << " block of " << block;
  }

  // A weight that other ops read whole keeps its op; this use gets a copy
  // under a name of its own, made unique in the module.
  if (!weight->hasOneUse()) {
    std::string base = cloneName.empty() ? (weight.getName() + ".slice").str() : cloneName.str();
    auto module = weight->getParentOfType<ModuleOp>();
    auto taken = [&](StringRef n) {
      bool found = false;
      module.walk([&](WeightOp w) { found |= w.getName() == n; });
      return found;
    };
    std::string name = base;
    for (int suffix = 1; taken(name); ++suffix)
      name = base + "." + std::to_string(suffix);
    OpBuilder b(weight);
    Builder names(weight.getContext());
    ArrayAttr parts = weight.getParts() ? *weight.getParts()
                                        : names.getStrArrayAttr({weight.getName()});
    weight = b.create<WeightOp>(weight.getLoc(), type, names.getStringAttr(name), parts,
                                weight.getRowsAttr(), weight.getFromAttr(), /*shard=*/nullptr,
                                weight.getOffsetAttr());
    use.set(weight.getResult());
  }
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = piece;
  weight.setShardAttr(ShardAttr::get(weight.getContext(), dim, pieces, ranks));
  weight.getResult().setType(
      WeightType::get(weight.getContext(), shape, type.getFormat(), type.getGroup()));
  return success();
}
} // namespace

} // namespace llmc
