//===- PrintModelStats.cpp - summarize a model's IR -----------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

namespace llmc {
#define GEN_PASS_DEF_PRINTMODELSTATS
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;

namespace {

struct FormatTotals {
  int64_t tensors = 0;
  int64_t elements = 0;
  int64_t bytes = 0;
};

struct PrintModelStatsPass : llmc::impl::PrintModelStatsBase<PrintModelStatsPass> {
  using PrintModelStatsBase::PrintModelStatsBase;

  void runOnOperation() override {
    markAllAnalysesPreserved();
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> out = mlir::openOutputFile(outputFile, &error);
    if (!out) {
      getOperation().emitError() << "cannot open '" << outputFile << "': " << error;
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp fn) { print(fn, out->os()); });
    out->keep();
  }

  void print(func::FuncOp fn, llvm::raw_ostream &os) {
    std::map<std::string, int64_t> opCounts;
    // Weights are counted once per name: tied embeddings appear twice.
    llvm::MapVector<StringRef, llmc::llm::WeightType> weights;
    int64_t layers = 0, heads = 0, kvHeads = 0, headDim = 0;
    fn.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "llm")
        ++opCounts[op->getName().getStringRef().str()];
      if (auto w = dyn_cast<llmc::llm::WeightOp>(op))
        weights.insert({w.getName(), w.getType()});
      if (auto attn = dyn_cast<llmc::llm::PagedAttentionOp>(op)) {
        ++layers;
        heads = attn.getHeads();
        kvHeads = attn.getKvHeads();
        headDim = attn.getHeadDim();
      }
    });
    std::map<std::string, FormatTotals> byFormat;
    FormatTotals total;
    for (auto &[name, type] : weights) {
      FormatTotals &t = byFormat[llmc::llm::stringifyWeightFormat(type.getFormat()).str()];
      for (FormatTotals *acc : {&t, &total}) {
        acc->tensors += 1;
        acc->elements += type.getNumElements();
        acc->bytes += type.getByteSize();
      }
    }
    os << "model stats for @" << fn.getSymName() << "\n";
    os << "  layers: " << layers << " (heads " << heads << ", kv_heads " << kvHeads
       << ", head_dim " << headDim << ")\n";
    os << "  ops: ";
    llvm::interleaveComma(opCounts, os, [&](const auto &kv) { os << kv.first << " " << kv.second; });
    os << "\n";
    os << "  weights: " << total.tensors << " tensors, " << total.elements << " parameters, "
       << total.bytes << " bytes\n";
    for (auto &[format, t] : byFormat)
      os << "    " << format << ": " << t.tensors << " tensors, " << t.elements
         << " parameters, " << t.bytes << " bytes\n";
  }
};

} // namespace
