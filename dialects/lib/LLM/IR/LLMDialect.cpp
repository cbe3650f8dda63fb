//===- LLMDialect.cpp - the llm dialect -----------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMDialect.h"

#include "llmc/Dialect/LLM/IR/LLMOps.h"

using namespace mlir;
using namespace llmc::llm;

#include "llmc/Dialect/LLM/IR/LLMOpsDialect.cpp.inc"

void LLMDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "llmc/Dialect/LLM/IR/LLMOps.cpp.inc"
      >();
}
