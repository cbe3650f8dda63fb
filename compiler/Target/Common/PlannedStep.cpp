//===- PlannedStep.cpp - the walk both code generators make ---------------===//
#include "Target/Common/PlannedStep.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace llmc {

FailureOr<PlannedStep> getPlannedStep(ModuleOp module, llvm::StringRef target) {
  auto step = module.lookupSymbol<func::FuncOp>("step");
  auto logits = step ? step->getAttrOfType<IntegerAttr>("llm.logits_buffer") : IntegerAttr();
  // A pipeline stage before the last computes no logits (it sends).
  bool sends = step && step.getNumResults() == 0 && module->hasAttr("llm.buffers");
  if (!step || (!logits && !sends))
    return module.emitError() << target << " needs a planned @step (run the kernel stage)";
  return PlannedStep{step, logits ? logits.getInt() : -1};
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
    if (auto send = dyn_cast<llm::SendOp>(op)) {
      auto input = bufferOf.find(send.getInput());
      if (input == bufferOf.end())
        return op.emitError() << "the hidden state this op sends has no buffer";
      KernelLaunch launch;
      launch.kernel = -1;
      launch.collective = launch.group = "send";
      launch.buffers = {input->second};
      launch.inRowElems = cast<RankedTensorType>(send.getInput().getType()).getDimSize(1);
      launch.peer = int64_t(send.getPeer());
      collective(launch);
      continue;
    }
    if (auto recv = dyn_cast<llm::RecvOp>(op)) {
      if (failed(bindResults(&op, bufferOf)))
        return failure();
      KernelLaunch launch;
      launch.kernel = -1;
      launch.collective = launch.group = "recv";
      launch.buffers = {bufferOf[recv.getResult()]};
      launch.outRowElems = cast<RankedTensorType>(recv.getType()).getDimSize(1);
      launch.peer = int64_t(recv.getPeer());
      collective(launch);
      continue;
    }
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
