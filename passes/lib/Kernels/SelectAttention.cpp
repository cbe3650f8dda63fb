//===- SelectAttention.cpp - the CUDA attention kernels of every group ----===//
//
// See Passes.td (llmc-select-attention). Which kernels a paged attention
// runs on (tensor cores or FFMA for decode, the flash-attention prefill or
// none) is a code-generation decision: made here, in the IR, where
// `--emit=kernels` shows it, not inside the emitter.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace llmc {
#define GEN_PASS_DEF_SELECTATTENTION
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// Warps of the flash-attention prefill block, 16 query rows each
// (paged_attention_prefill's Warps).
constexpr int64_t kPrefillWarps = 8;

struct SelectAttentionPass : llmc::impl::SelectAttentionBase<SelectAttentionPass> {
  using SelectAttentionBase::SelectAttentionBase;

  void runOnOperation() override {
    if (activationType != "bf16" && activationType != "f16" && activationType != "f32") {
      getOperation().emitError() << "llmc-select-attention: activation-type must be bf16, f16 "
                                    "or f32, not '"
                                 << activationType << "'";
      return signalPassFailure();
    }
    const bool tensorCores = activationType != "f32";
    getOperation().walk([&](FusionOp group) {
      auto ops = group.getBody().front().getOps<PagedAttentionOp>();
      if (ops.empty())
        return;
      PagedAttentionOp p = *ops.begin();
      const int64_t H = p.getHeads(), KvH = p.getKvHeads(), D = p.getHeadDim();
      // The mma fragments: decode keeps Q and O of one 16-row tile for up to
      // 128 dims, 32 at a time, the query heads of a kv head as its rows;
      // prefill 16-dim steps up to 128.
      const bool decodeMma = tensorCores && D % 32 == 0 && D <= 128 && KvH > 0 && H % KvH == 0 &&
                             H / KvH <= 16;
      const bool prefill = tensorCores && D % 16 == 0 && D <= 128;
      Builder b(group.getContext());
      SmallVector<NamedAttribute> fields;
      fields.push_back(b.getNamedAttr("decode", b.getStringAttr(decodeMma ? "mma" : "ffma")));
      fields.push_back(b.getNamedAttr("prefill", b.getStringAttr(prefill ? "flash" : "none")));
      if (prefill)
        fields.push_back(b.getNamedAttr("prefill_warps", b.getI64IntegerAttr(kPrefillWarps)));
      group->setAttr("llmc.attention", b.getDictionaryAttr(fields));
      ++(decodeMma ? numMma : numFfma);
    });
  }
};

} // namespace
