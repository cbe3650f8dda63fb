//===- PlannedStep.h - the walk both code generators make -------*- C++ -*-===//
//
// Both code generators read the same planned @step: its llm.fusion groups in
// order, each result bound to the buffer llmc-plan-memory assigned it, and
// turn each group into a kernel, sharing one kernel between groups whose
// generated code is the same. The walk, the plan's checks and the sharing
// are here once; what a group becomes is each target's own.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_TARGET_COMMON_PLANNEDSTEP_H
#define LLMC_COMPILER_TARGET_COMMON_PLANNEDSTEP_H

#include "Target/Common/KernelLaunch.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <utility>

namespace llmc {

struct PlannedStep {
  mlir::func::FuncOp step;
  int64_t logitsBuffer = -1; // the buffer that holds the logits rows
};

// @step with its plan (llm.logits_buffer), or an error on the module that
// names `target` ("host codegen") and says to run the kernel stage.
mlir::FailureOr<PlannedStep> getPlannedStep(mlir::ModuleOp module, llvm::StringRef target);

// The buffers of the values groups read and produce: each group's results
// are bound before the group is emitted, so later groups find their inputs.
using BufferOf = llvm::DenseMap<mlir::Value, int64_t>;

// Calls emit(group, bufferOf) for every llm.fusion of `step`, in order; fails
// on a group without llm.result_buffers or as soon as emit fails. Steps with
// collectives (a tensor-parallel plan) give them to `collective`, in their
// place in the order, as launches with `collective` set; without that
// callback a collective is an error naming `target`.
mlir::LogicalResult
forEachPlannedGroup(mlir::func::FuncOp step,
                    llvm::function_ref<mlir::LogicalResult(llm::FusionOp, const BufferOf &)> emit,
                    llvm::function_ref<void(const KernelLaunch &)> collective = nullptr,
                    llvm::StringRef target = "this target");

// Groups whose generated code is the same text share one kernel.
class KernelTable {
public:
  // The kernel index of `code`, and true when it is new (it then gets the
  // next index: the number of distinct codes seen before).
  std::pair<int64_t, bool> intern(const std::string &code) {
    auto [it, inserted] = indexOf.try_emplace(code, int64_t(indexOf.size()));
    return {it->second, inserted};
  }

private:
  llvm::StringMap<int64_t> indexOf;
};

} // namespace llmc

#endif // LLMC_COMPILER_TARGET_COMMON_PLANNEDSTEP_H
