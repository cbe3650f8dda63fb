//===- ExprEmitter.cpp - elementwise ops as target-neutral C++ ------------===//
#include "ExprEmitter.h"

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {

bool ExprEmitter::isElementwise(Operation *op) {
  return isa<AddOp, MulOp, SiLUOp, GELUOp>(op);
}

LogicalResult ExprEmitter::emit(Operation *op, llvm::raw_ostream &os, llvm::StringRef indent) {
  if (!isElementwise(op))
    return op->emitError() << "expression emitter: " << op->getName() << " is not elementwise";
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (!isBound(operand))
      return op->emitError() << "expression emitter: operand #" << i
                             << " is not available in this kernel";
  auto in = [&](unsigned i) { return lookup(op->getOperand(i)); };
  std::string expr;
  if (isa<AddOp>(op))
    expr = in(0) + " + " + in(1);
  else if (isa<MulOp>(op))
    expr = in(0) + " * " + in(1);
  else if (isa<SiLUOp>(op))
    expr = "llmc::expr::silu(" + in(0) + ")";
  else if (auto g = dyn_cast<GELUOp>(op))
    expr = std::string(g.getApprox() == GeluApprox::tanh ? "llmc::expr::gelu_tanh("
                                                          : "llmc::expr::gelu_erf(") +
           in(0) + ")";
  std::string name = "e" + std::to_string(next++);
  os << indent << "auto " << name << " = " << expr << ";\n";
  bind(op->getResult(0), name);
  return success();
}

} // namespace llmc
