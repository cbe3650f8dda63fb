//===- LLMDialect.h - the llm dialect ---------------------------*- C++ -*-===//
#ifndef LLMC_DIALECT_LLM_IR_LLMDIALECT_H
#define LLMC_DIALECT_LLM_IR_LLMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"

#include "llmc/Dialect/LLM/IR/LLMOpsDialect.h.inc"

#endif // LLMC_DIALECT_LLM_IR_LLMDIALECT_H
