//===- LLMTypes.h - enums, attributes and types of llm ----------*- C++ -*-===//
#ifndef LLMC_DIALECT_LLM_IR_LLMTYPES_H
#define LLMC_DIALECT_LLM_IR_LLMTYPES_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Types.h"

#include "llmc/Dialect/LLM/IR/LLMEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "llmc/Dialect/LLM/IR/LLMAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "llmc/Dialect/LLM/IR/LLMOpsTypes.h.inc"

#endif // LLMC_DIALECT_LLM_IR_LLMTYPES_H
