//===- Fuse.cpp - merge sibling projections, then form fusion groups ------===//
#include "Fusion/Fusion.h"
#include "llmc/Passes/Passes.h"

namespace llmc {
#define GEN_PASS_DEF_FUSE
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;

namespace {

struct FusePass : llmc::impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) {
      if (mergeSiblings)
        numMerged += llmc::mergeSiblingProjections(fn);
      if (formGroups)
        numGroups += llmc::formFusionGroups(fn, prologueElementwise);
    });
  }
};

} // namespace
