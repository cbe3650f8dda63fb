//===- PlannedStep.cpp - the walk both code generators make ---------------===//
#include "Target/Common/PlannedStep.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace llmc {

FailureOr<PlannedStep> getPlannedStep(ModuleOp module, llvm::StringRef target) {
  auto step = module.lookupSymbol<func::FuncOp>("step");
  auto logits = step ? step->getAttrOfType<IntegerAttr>("llm.logits_buffer") : IntegerAttr();
  if (!step || !logits)
    return module.emitError() << target << " needs a planned @step (run the kernel stage)";
  return PlannedStep{step, logits.getInt()};
}

LogicalResult
forEachPlannedGroup(func::FuncOp step,
                    llvm::function_ref<LogicalResult(llm::FusionOp, const BufferOf &)> emit) {
  BufferOf bufferOf;
  for (llm::FusionOp group : step.getBody().getOps<llm::FusionOp>()) {
    auto assigned = group->getAttrOfType<DenseI64ArrayAttr>("llm.result_buffers");
    if (!assigned || assigned.size() != int64_t(group.getNumResults()))
      return group.emitError() << "group has no buffer plan (run llmc-plan-memory)";
    for (auto [result, buffer] : llvm::zip(group.getResults(), assigned.asArrayRef()))
      bufferOf[result] = buffer;
    if (failed(emit(group, bufferOf)))
      return failure();
  }
  return success();
}

} // namespace llmc
