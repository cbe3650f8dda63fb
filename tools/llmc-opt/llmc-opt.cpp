//===- llmc-opt.cpp - run llmc passes on llm-dialect IR -------------------===//
#include "llmc/Dialect/LLM/IR/LLMDialect.h"
#include "llmc/Passes/Passes.h"
#include "llmc/Passes/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<llmc::llm::LLMDialect, mlir::func::FuncDialect>();
  // Generic passes the pipelines use (canonicalize, cse, ...).
  mlir::registerTransformsPasses();
  llmc::registerLLMCPasses();
  llmc::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "llmc optimizer driver\n", registry));
}
