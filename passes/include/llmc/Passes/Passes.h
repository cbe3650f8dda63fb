//===- Passes.h - llmc passes -----------------------------------*- C++ -*-===//
#ifndef LLMC_PASSES_PASSES_H
#define LLMC_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "llmc/Dialect/LLM/IR/LLMDialect.h"

namespace llmc {

#define GEN_PASS_DECL
#include "llmc/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "llmc/Passes/Passes.h.inc"

} // namespace llmc

#endif // LLMC_PASSES_PASSES_H
