//===- Quantize.cpp - weight-only group-wise quantization -----------------===//
//
// Retypes float projection weights to i8/i4 and marks them `from "<fmt>"`;
// the weight store does the arithmetic when the artifact is packed, so the
// IR never holds weight data. See Passes.td for which weights and why.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"
#include "llmc/Passes/QuantizeOptions.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"

namespace llmc {
#define GEN_PASS_DEF_QUANTIZE
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// How the ops that read one weight name use it.
struct Uses {
  bool projection = false; // the weight of llm.linear or llm.lm_head, or experts of llm.moe
  bool lmHead = false;     // the weight of llm.lm_head
  bool other = false;      // anything that needs the current format
};

void classify(WeightOp op, Uses &uses) {
  for (OpOperand &use : op.getResult().getUses()) {
    Operation *user = use.getOwner();
    if (auto l = dyn_cast<LinearOp>(user); l && use.get() == l.getWeight() &&
                                           use.get() != l.getBias()) {
      uses.projection = true;
    } else if (auto h = dyn_cast<LMHeadOp>(user); h && use.get() == h.getWeight()) {
      uses.projection = uses.lmHead = true;
    } else if (auto m = dyn_cast<MoEOp>(user); m && use.get() != m.getRouter()) {
      // Stacked experts are projections, expert after expert (the router
      // stays float: the routing reads it as floats).
      uses.projection = true;
    } else if (isa<EmbedOp>(user)) {
      // The embedding kernels read any format, so a tied table follows the
      // lm_head.
    } else {
      uses.other = true;
    }
  }
}

bool isFloat(WeightFormat f) {
  return f == WeightFormat::f32 || f == WeightFormat::f16 || f == WeightFormat::bf16;
}

struct QuantizePass : llmc::impl::QuantizeBase<QuantizePass> {
  using QuantizeBase::QuantizeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<std::string> skipped(skip.begin(), skip.end());
    if (auto problem = llmc::checkQuantizeOptions(mode, group, skipped)) {
      static const char *const kNames[] = {"mode", "group", "skip"};
      module.emitError() << "llmc-quantize: " << kNames[int(problem->option)] << " "
                         << problem->message;
      return signalPassFailure();
    }
    if (mode == "none")
      return markAllAnalysesPreserved();
    WeightFormat target = mode == "w8a16" ? WeightFormat::i8 : WeightFormat::i4;

    // Every op naming a weight must agree on its type, so decide per name.
    llvm::MapVector<StringRef, SmallVector<WeightOp>> byName;
    module.walk([&](WeightOp op) { byName[op.getName()].push_back(op); });
    for (auto &[name, ops] : byName) {
      Uses uses;
      for (WeightOp op : ops)
        classify(op, uses);
      WeightType type = ops.front().getType();
      if (!uses.projection || uses.other || !isFloat(type.getFormat()) || type.getRank() != 2 ||
          ops.front().getFrom() || isSkipped(name, uses))
        continue;
      int64_t width = type.getShape()[1];
      int64_t g = group;
      while (g >= 32 && width % g != 0)
        g /= 2;
      if (g < 32) {
        ops.front().emitWarning() << "weight '" << name << "' keeps its format "
                                  << stringifyWeightFormat(type.getFormat())
                                  << ": its input width " << width
                                  << " is not a multiple of 32";
        continue;
      }
      if (g != group)
        ++numSmallerGroup;
      auto quantized = WeightType::get(&getContext(), type.getShape(), target, g);
      StringAttr from =
          StringAttr::get(&getContext(), stringifyWeightFormat(type.getFormat()));
      for (WeightOp op : ops) {
        op.setFromAttr(from);
        op.getResult().setType(quantized);
      }
      ++numQuantized;
    }
  }

  bool isSkipped(StringRef name, const Uses &uses) const {
    for (const std::string &s : skip)
      if (name.contains(s) || (s == "lm_head" && uses.lmHead))
        return true;
    return false;
  }
};

} // namespace
