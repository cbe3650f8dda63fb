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

namespace {

// Result buffers from llm.result_buffers (set by llmc-plan-memory).
LogicalResult bindResults(Operation *op, BufferOf &bufferOf) {
  auto assigned = op->getAttrOfType<DenseI64ArrayAttr>("llm.result_buffers");
  if (!assigned || assigned.size() != int64_t(op->getNumResults()))
    return op->emitError() << "no buffer plan for this op's results (run llmc-plan-memory)";
  for (auto [result, buffer] : llvm::zip(op->getResults(), assigned.asArrayRef()))
    bufferOf[result] = buffer;
  return success();
}

} // namespace

LogicalResult forEachPlannedGroup(
    func::FuncOp step, llvm::function_ref<LogicalResult(llm::FusionOp, const BufferOf &)> emit,
    llvm::function_ref<void(const KernelLaunch &)> collective, llvm::StringRef target) {
  BufferOf bufferOf;
  for (Operation &op : step.getBody().front()) {
    if (auto group = dyn_cast<llm::FusionOp>(op)) {
      if (failed(bindResults(group, bufferOf)) || failed(emit(group, bufferOf)))
        return failure();
      continue;
    }
    if (!isa<llm::AllReduceOp, llm::AllGatherOp, llm::SendOp, llm::RecvOp>(op))
      continue;
    if (!collective)
      return op.emitError() << target << " does not support " << op.getName() << " yet";
    if (isa<llm::SendOp, llm::RecvOp>(op))
      return op.emitError() << "the step plan has no pipeline-parallel send/recv yet";
    if (auto reduce = dyn_cast<llm::AllReduceOp>(op);
        reduce && reduce.getKind() != llm::ReduceKind::sum)
      return op.emitError() << "the step plan has only sum all-reduces";
    if (failed(bindResults(&op, bufferOf)))
      return failure();
    KernelLaunch launch;
    launch.kernel = -1;
    launch.collective = isa<llm::AllReduceOp>(op) ? "all_reduce_sum" : "all_gather";
    launch.group = launch.collective;
    auto input = bufferOf.find(op.getOperand(0));
    if (input == bufferOf.end())
      return op.emitError() << "the input of this collective has no buffer";
    launch.buffers = {input->second, bufferOf[op.getResult(0)]};
    launch.inRowElems = cast<RankedTensorType>(op.getOperand(0).getType()).getDimSize(1);
    launch.outRowElems = cast<RankedTensorType>(op.getResult(0).getType()).getDimSize(1);
    collective(launch);
  }
  return success();
}

} // namespace llmc
