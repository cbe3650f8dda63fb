//===- AttentionGroup.cpp - the shape of an attention group ---------------===//
#include "Target/Common/AttentionGroup.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {

PagedAttentionOp attentionWithRopes(ArrayRef<Operation *> compute) {
  if (compute.size() != 3)
    return {};
  PagedAttentionOp attention;
  for (Operation *op : compute)
    if (auto p = dyn_cast<PagedAttentionOp>(op))
      attention = p;
  if (!attention)
    return {};
  auto q = attention.getQuery().getDefiningOp<RopeOp>();
  auto k = attention.getKey().getDefiningOp<RopeOp>();
  if (!q || !k || q == k || !isa<BlockArgument>(q.getInput()) ||
      !isa<BlockArgument>(k.getInput()) || !q->hasOneUse() || !k->hasOneUse())
    return {};
  for (Operation *op : compute)
    if (op != attention.getOperation() && op != q.getOperation() && op != k.getOperation())
      return {};
  return attention;
}

} // namespace llmc
