//===- OutlineKernels.cpp - one llm.fusion group per remaining op ---------===//
#include "Kernels/GroupBuilder.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace llmc {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

struct OutlineKernelsPass : llmc::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    // Numbered after the groups the fuse pass formed, so names stay unique.
    unsigned counter = 0;
    getOperation().walk([&](FusionOp) { ++counter; });
    getOperation().walk([&](func::FuncOp fn) {
      for (Operation &op : llvm::make_early_inc_range(fn.getBody().getOps())) {
        if (!shouldOutline(op))
          continue;
        std::string name = llmc::locationName(op.getLoc()) + "." +
                           op.getName().stripDialect().str() + "_" + std::to_string(counter++);
        // One op reads only values defined before it: this cannot fail.
        (void)llmc::buildFusionGroup({&op}, name);
      }
      // Weights now live inside the groups.
      for (Operation &op : llvm::make_early_inc_range(fn.getBody().getOps()))
        if (isa<WeightOp>(op) && op.use_empty())
          op.erase();
    });
  }

  // Collectives stay outside the groups: the runtime runs them through its
  // communicator (NCCL, MPI), between kernels.
  static bool shouldOutline(Operation &op) {
    return op.getDialect() && op.getDialect()->getNamespace() == "llm" &&
           !isa<WeightOp, FusionOp, YieldOp, AllReduceOp, AllGatherOp, SendOp, RecvOp>(op);
  }
};

} // namespace
