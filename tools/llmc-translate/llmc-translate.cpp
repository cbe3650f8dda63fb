//===- llmc-translate.cpp - llm-dialect IR to generated kernel source -----===//
//
// The code generators as MLIR translations, so that a test can feed one a
// small hand-written @step (planned: fusion groups with their buffers) and
// FileCheck the C++ or CUDA it writes:
//   llmc-translate --llmc-to-host-cpp step.mlir
//   llmc-translate --llmc-to-cuda [--cuda-dtype=bf16|f16|f32] step.mlir
//
//===----------------------------------------------------------------------===//
#include "Target/CUDA/CudaEmitter.h"
#include "Target/Host/HostEmitter.h"
#include "llmc/Dialect/LLM/IR/LLMDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace {

llvm::cl::opt<std::string> cudaDType("cuda-dtype",
                                     llvm::cl::desc("activation type of --llmc-to-cuda: bf16 "
                                                    "(default), f16 or f32"),
                                     llvm::cl::init("bf16"));
llvm::cl::opt<bool> cudaWgmma("cuda-wgmma",
                              llvm::cl::desc("--llmc-to-cuda: every target is sm_90a, so GEMM "
                                             "tiles may run on wgmma (llmc.gemm <tile>_mma)"),
                              llvm::cl::init(false));
llvm::cl::opt<bool> hostQ8("host-q8",
                           llvm::cl::desc("--llmc-to-host-cpp: q8 activations for GEMMs over "
                                          "32-element block formats (default on)"),
                           llvm::cl::init(true));

void llmDialects(mlir::DialectRegistry &registry) {
  registry.insert<llmc::llm::LLMDialect, mlir::func::FuncDialect>();
}

} // namespace

int main(int argc, char **argv) {
  mlir::TranslateFromMLIRRegistration host(
      "llmc-to-host-cpp", "the host C++ kernels of a planned @step",
      [](mlir::ModuleOp module, llvm::raw_ostream &os) -> mlir::LogicalResult {
        llmc::HostEmitOptions options;
        options.q8Activations = hostQ8;
        mlir::FailureOr<llmc::HostKernelPlan> plan = llmc::emitHostKernels(module, options);
        if (mlir::failed(plan))
          return mlir::failure();
        os << plan->source;
        return mlir::success();
      },
      llmDialects);
  mlir::TranslateFromMLIRRegistration cuda(
      "llmc-to-cuda", "the CUDA C++ kernels of a planned @step",
      [](mlir::ModuleOp module, llvm::raw_ostream &os) -> mlir::LogicalResult {
        llmc::CudaEmitOptions options;
        options.activationType = cudaDType;
        options.wgmma = cudaWgmma;
        mlir::FailureOr<llmc::CudaKernelPlan> plan = llmc::emitCudaKernels(module, options);
        if (mlir::failed(plan))
          return mlir::failure();
        os << plan->source;
        return mlir::success();
      },
      llmDialects);
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "llmc code generators\n")) ? 1 : 0;
}
