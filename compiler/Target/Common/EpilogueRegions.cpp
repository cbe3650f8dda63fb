//===- EpilogueRegions.cpp - what a GEMM group's epilogue reads -----------===//
#include "EpilogueRegions.h"

#include "ExprEmitter.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {

static int64_t widthOf(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(1); }

int64_t EpilogueRegions::numRopes() const {
  int64_t n = 0;
  for (const Region &r : regions)
    n += int64_t(r.ropes.size());
  return n;
}

FailureOr<EpilogueRegions>
analyzeEpilogue(LinearOp linear, ArrayRef<Operation *> epi,
                const llvm::DenseMap<Value, SmallVector<unsigned>> &yieldsOf, StringRef target) {
  EpilogueRegions e;
  if (linear->hasOneUse())
    e.split = dyn_cast<SplitOp>(*linear->getUsers().begin());
  if (e.split) {
    int64_t off = 0;
    for (auto [i, r] : llvm::enumerate(e.split.getResults())) {
      e.regions.push_back({off, widthOf(r), {}});
      e.values.push_back(r);
      e.regionOf[r] = int64_t(i);
      off += widthOf(r);
    }
  } else {
    e.regions.push_back({0, widthOf(linear.getResult()), {}});
    e.values.push_back(linear.getResult());
    e.regionOf[linear.getResult()] = 0;
  }

  for (Operation *op : epi) {
    if (op == e.split.getOperation())
      continue;
    if (auto r = dyn_cast<RopeOp>(op)) {
      Value src = r.getInput();
      auto it = e.regionOf.find(src);
      if (it == e.regionOf.end() || it->second == EpilogueRegions::kCombined ||
          src != e.values[it->second] || !src.hasOneUse() || !yieldsOf.lookup(src).empty())
        return r.emitError() << target
                             << ": a fused RoPE must be the only use of a GEMM region";
      e.regions[it->second].ropes.push_back(r);
      e.regionOf[r.getResult()] = it->second;
      continue;
    }
    if (!ExprEmitter::isElementwise(op))
      return op->emitError() << target << " cannot fuse " << op->getName()
                             << " into a linear's epilogue";
    std::optional<int64_t> region;
    for (Value v : op->getOperands()) {
      if (isa<BlockArgument>(v))
        continue;
      auto it = e.regionOf.find(v);
      if (it == e.regionOf.end())
        return op->emitError() << target << ": an epilogue operand comes from the prologue";
      if (region && *region != it->second)
        region = EpilogueRegions::kCombined;
      else if (!region)
        region = it->second;
    }
    if (!region)
      return op->emitError() << target << ": an epilogue op reads only group inputs";
    e.paired |= *region == EpilogueRegions::kCombined;
    e.regionOf[op->getResult(0)] = *region;
    e.elementwise.push_back(op);
  }
  if (e.paired) {
    if (e.numRopes() != 0)
      return linear.emitError() << target << ": RoPE with an epilogue that combines regions";
    for (const EpilogueRegions::Region &r : e.regions)
      if (r.width != e.regions.front().width)
        return linear.emitError() << target << ": combined regions must have equal widths";
  }
  return e;
}

} // namespace llmc
