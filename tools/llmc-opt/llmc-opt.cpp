//===- llmc-opt.cpp - run llmc passes on llm-dialect IR -------------------===//
#include "llmc/Dialect/LLM/IR/LLMDialect.h"
#include "llmc/Passes/Passes.h"
#include "llmc/Passes/Pipelines.h"

#include "mlir/Dialect/Func/Extensions/MeshShardingExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<llmc::llm::LLMDialect, mlir::func::FuncDialect>();
  // MLIR's mesh dialect and its sharding-propagation / mesh-spmdization
  // passes, with the llm ops' sharding models (docs/partitioning.md, "Why
  // not MLIR's mesh dialect"). Our pipelines do not use them.
  registry.insert<mlir::mesh::MeshDialect>();
  mlir::func::registerShardingInterfaceExternalModels(registry);
  llmc::registerLLMMeshShardingModels(registry);
  mlir::mesh::registerMeshPasses();
  // Generic passes the pipelines use (canonicalize, cse, ...).
  mlir::registerTransformsPasses();
  llmc::registerLLMCPasses();
  llmc::registerPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "llmc optimizer driver\n", registry));
}
