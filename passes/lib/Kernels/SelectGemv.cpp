//===- SelectGemv.cpp - the CUDA decode GEMV of every GEMM group ----------===//
//
// See Passes.td (llmc-select-gemv). Which GEMV a group runs at decode is a
// code-generation decision with a performance model behind it
// (docs/cuda.md): made here, in the IR, where `--emit=kernels` shows it and
// a later pass (tuning, say) can change it, not inside the emitter.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"
#include "Kernels/GemmWeight.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>

namespace llmc {
#define GEN_PASS_DEF_SELECTGEMV
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// Tokens up to this run a GEMV rather than the tensor-core GEMM (the
// emitter's gemvMaxTokens default; 16-bit activations): one pass of the
// several-token GEMV over the weights. Past it the GEMV reads them again
// for every pass, where the GEMM reads them once: the report put an
// 8-sequence q4_0 decode step of the 8B shape at 5.81 ms on the GEMV (two
// passes) and 4.21 ms on the GEMM, 3 and 4 sequences at 3.88 ms on the
// GEMV and 4.15 ms on the GEMM (H200).
constexpr int64_t kGemvMaxTokens = 4;
// Tokens per pass of the several-token GEMV entries (fp: the kernel's MaxT).
constexpr int64_t kMaxTokensPerPass = 4;

// The dp4a chunk of a format (elements per lane and trip) and the weight
// rows a warp holds at once for single-row columns (a gate/up pair holds
// twice as many): registers hold rows * chunk words, which must stay under
// the 128-register cap of a 256-thread block.
struct Dp4aShape {
  int64_t chunk = 0, rows = 0;
};

Dp4aShape dp4aShapeOf(WeightFormat f) {
  switch (f) {
  case WeightFormat::q4_0: return {128, 2}; // 18 words per row
  case WeightFormat::q4_1: return {64, 2};  // 10
  case WeightFormat::q5_0: return {128, 2}; // 22
  case WeightFormat::q5_1: return {32, 2};  // 6
  case WeightFormat::q8_0: return {128, 1}; // 34
  case WeightFormat::q4_k: return {128, 2}; // 20
  case WeightFormat::q5_k: return {128, 1}; // 28
  case WeightFormat::q6_k: return {128, 1}; // 27
  default: return {};
  }
}

struct SelectGemvPass : llmc::impl::SelectGemvBase<SelectGemvPass> {
  using SelectGemvBase::SelectGemvBase;

  void runOnOperation() override {
    if (kind != "auto" && kind != "fp") {
      getOperation().emitError() << "llmc-select-gemv: kind must be auto or fp, not '" << kind
                                 << "'";
      return signalPassFailure();
    }
    getOperation().walk([&](FusionOp group) {
      WeightType wt = gemmWeightOf(group);
      if (!wt)
        return;
      const int64_t K = wt.getShape()[1];
      const Dp4aShape d = dp4aShapeOf(wt.getFormat());
      // f32 activations promise f32 accuracy: no int8 activations for them.
      const bool dp4a = kind == "auto" && activationType != "f32" && d.chunk > 0 && K % d.chunk == 0;
      Builder b(group.getContext());
      SmallVector<NamedAttribute> fields;
      fields.push_back(b.getNamedAttr("kind", b.getStringAttr(dp4a ? "dp4a" : "fp")));
      fields.push_back(b.getNamedAttr("warps", b.getI64IntegerAttr(dp4a ? 8 : 4)));
      if (dp4a) {
        fields.push_back(b.getNamedAttr("rows_per_warp", b.getI64IntegerAttr(d.rows)));
        // Staged activations (K int8 + K/32 {dx, s} per token) within 40 KB
        // of static shared memory, the 48 KB limit less the scratch.
        fields.push_back(b.getNamedAttr(
            "max_tokens",
            b.getI64IntegerAttr(std::clamp<int64_t>(40960 / (K + K / 4), 1, kMaxTokensPerPass))));
        ++numDp4a;
      } else {
        fields.push_back(b.getNamedAttr("max_tokens", b.getI64IntegerAttr(kMaxTokensPerPass)));
        ++numFp;
      }
      fields.push_back(b.getNamedAttr("max_tokens_gemv", b.getI64IntegerAttr(kGemvMaxTokens)));
      group->setAttr("llmc.gemv", b.getDictionaryAttr(fields));
    });
  }
};

} // namespace
