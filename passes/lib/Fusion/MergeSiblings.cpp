//===- MergeSiblings.cpp - one GEMM for projections of the same input -----===//
#include "Fusion/Fusion.h"

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

// A weight that can be a part of a merge: a stored tensor, or row slices of
// stored tensors (each slice stays a part of its own).
bool mergeable(WeightOp w) { return w && (!w.getParts() || w.getRows()); }

// Linears whose weights can be joined row-wise: same format and group, same
// input width (the input is shared), same conversion, same bias kind and the
// same result type but for the width, the same tensor-parallel slicing (each
// part is sliced, then the slices are joined), all or none row slices. Empty
// for a linear that cannot merge.
std::string mergeKey(LinearOp l) {
  WeightOp w = l.getWeight().getDefiningOp<WeightOp>();
  if (!mergeable(w))
    return "";
  WeightType t = l.getWeight().getType();
  std::string key;
  llvm::raw_string_ostream os(key);
  os << stringifyWeightFormat(t.getFormat()) << " K=" << t.getShape()[1] << " g=" << t.getGroup()
     << " from=" << w.getFrom().value_or("") << " act=" << l.getResult().getType().getElementType()
     << (w.getRows() ? " rows" : "") << " plus=" << (w.getOffset() ? w.getOffset()->convertToDouble() : 0.0);
  if (std::optional<ShardAttr> shard = w.getShard())
    os << " shard=" << *shard;
  if (Value bias = l.getBias()) {
    WeightOp bw = bias.getDefiningOp<WeightOp>();
    if (!mergeable(bw))
      return "";
    os << " bias=" << stringifyWeightFormat(cast<WeightType>(bias.getType()).getFormat())
       << bw.getFrom().value_or("") << (bw.getRows() ? " rows" : "");
    if (std::optional<ShardAttr> shard = bw.getShard())
      os << " shard=" << *shard;
  }
  return key;
}

// "blk.0.attn_{q,k,v}.weight" from the names of the parts.
std::string mergedName(ArrayRef<StringRef> names) {
  StringRef first = names.front();
  size_t prefix = first.size(), suffix = first.size();
  for (StringRef n : names.drop_front()) {
    size_t p = 0;
    while (p < prefix && p < n.size() && n[p] == first[p])
      ++p;
    prefix = p;
    size_t s = 0;
    while (s < suffix && s < n.size() && n[n.size() - 1 - s] == first[first.size() - 1 - s])
      ++s;
    suffix = s;
  }
  // Prefix and suffix must not overlap in the shortest name.
  size_t minLen = first.size();
  for (StringRef n : names)
    minLen = std::min(minLen, n.size());
  if (prefix + suffix > minLen)
    suffix = minLen - prefix;
  SmallVector<std::string> middles;
  for (StringRef n : names)
    middles.push_back(n.substr(prefix, n.size() - prefix - suffix).str());
  return (first.take_front(prefix) + "{" + llvm::join(middles, ",") + "}" +
          first.take_back(suffix))
      .str();
}

WeightOp concatWeights(OpBuilder &b, Location loc, ArrayRef<Value> weights) {
  SmallVector<StringRef> names;
  SmallVector<Attribute> parts;
  SmallVector<int64_t> slices; // the parts' row ranges, when they are slices
  int64_t rows = 0;
  for (Value w : weights) {
    WeightOp op = w.getDefiningOp<WeightOp>();
    names.push_back(op.getName());
    if (std::optional<ArrayRef<int64_t>> range = op.getRows()) {
      llvm::append_range(parts, *op.getParts());
      llvm::append_range(slices, *range);
    } else {
      parts.push_back(b.getStringAttr(op.getName()));
    }
    rows += cast<WeightType>(w.getType()).getShape()[0];
  }
  auto first = cast<WeightType>(weights.front().getType());
  SmallVector<int64_t> shape(first.getShape());
  shape[0] = rows;
  auto type = WeightType::get(b.getContext(), shape, first.getFormat(), first.getGroup());
  WeightOp front = weights.front().getDefiningOp<WeightOp>();
  return b.create<WeightOp>(loc, type, b.getStringAttr(mergedName(names)), b.getArrayAttr(parts),
                            slices.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(slices),
                            front.getFromAttr(), front.getShardAttr(), front.getOffsetAttr());
}

} // namespace

unsigned mergeSiblingProjections(func::FuncOp fn) {
  // Values read by linears, in program order.
  SmallVector<Value> inputs;
  fn.walk([&](LinearOp l) {
    if (!llvm::is_contained(inputs, l.getInput()))
      inputs.push_back(l.getInput());
  });
  unsigned merges = 0;
  for (Value x : inputs) {
    llvm::MapVector<std::string, SmallVector<LinearOp>, llvm::StringMap<unsigned>> siblings;
    for (Operation *user : x.getUsers())
      if (auto l = dyn_cast<LinearOp>(user); l && l.getInput() == x)
        if (std::string key = mergeKey(l); !key.empty())
          siblings[key].push_back(l);
    for (auto &[key, group] : siblings) {
      if (group.size() < 2)
        continue;
      // Program order, so the merged GEMM replaces the first and every part
      // keeps the position of its rows.
      llvm::sort(group, [](LinearOp a, LinearOp b) {
        return a->isBeforeInBlock(b.getOperation());
      });
      OpBuilder b(group.front());
      SmallVector<Location> locs;
      SmallVector<Value> weights, biases;
      SmallVector<Type> partTypes;
      int64_t rows = 0;
      for (LinearOp l : group) {
        locs.push_back(l.getLoc());
        weights.push_back(l.getWeight());
        if (l.getBias())
          biases.push_back(l.getBias());
        partTypes.push_back(l.getResult().getType());
        rows += l.getResult().getType().getDimSize(1);
      }
      Location loc = b.getFusedLoc(locs);
      WeightOp w = concatWeights(b, loc, weights);
      Value bias = biases.empty() ? Value() : concatWeights(b, loc, biases).getResult();
      auto first = group.front().getResult().getType();
      auto mergedType = RankedTensorType::get({first.getDimSize(0), rows}, first.getElementType());
      auto merged = b.create<LinearOp>(loc, mergedType, x, w.getResult(), bias);
      auto split = b.create<SplitOp>(loc, partTypes, merged.getResult());
      for (auto [l, part] : llvm::zip(group, split.getResults())) {
        l.getResult().replaceAllUsesWith(part);
        l.erase();
      }
      ++merges;
    }
  }
  return merges;
}

} // namespace llmc
