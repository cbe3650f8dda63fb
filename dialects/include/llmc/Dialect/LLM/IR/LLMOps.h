//===- LLMOps.h - operations of the llm dialect -----------------*- C++ -*-===//
#ifndef LLMC_DIALECT_LLM_IR_LLMOPS_H
#define LLMC_DIALECT_LLM_IR_LLMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llmc/Dialect/LLM/IR/LLMDialect.h"
#include "llmc/Dialect/LLM/IR/LLMTypes.h"

#define GET_OP_CLASSES
#include "llmc/Dialect/LLM/IR/LLMOps.h.inc"

#endif // LLMC_DIALECT_LLM_IR_LLMOPS_H
