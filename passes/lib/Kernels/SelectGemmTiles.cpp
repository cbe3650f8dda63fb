//===- SelectGemmTiles.cpp - the tensor-core GEMM tiles of every group ----===//
//
// See Passes.td (llmc-select-gemm-tiles). The tile a GEMM runs with decides
// how many blocks fill the GPU and how often each weight and activation
// byte is read; like the GEMV variant it is chosen here, in the IR, where
// `--emit=kernels` shows it and tuning can change it.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"
#include "Kernels/GemmWeight.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>

namespace llmc {
#define GEN_PASS_DEF_SELECTGEMMTILES
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

// Token counts above this run the large tile, at the least; a weight of
// few large tiles keeps the small one until the large gives 1.5 blocks an
// SM (runOnOperation).
constexpr int64_t kLargeFromTokens = 129, kLargeFromTokensMax = 513, kLongSteps = 64;
// Split-K of the small tile: at most this many splits, each at least this
// many 32-element steps of K (the 4-stage pipeline's fill is then a quarter
// of a split's loop at most).
constexpr int64_t kMaxSplits = 8, kMinStepsPerSplit = 16;

struct SelectGemmTilesPass : llmc::impl::SelectGemmTilesBase<SelectGemmTilesPass> {
  using SelectGemmTilesBase::SelectGemmTilesBase;

  void runOnOperation() override {
    if (activationType == "f32")
      return; // no tensor-core GEMM: every token count runs the GEMV
    if (sms < 1) {
      getOperation().emitError() << "llmc-select-gemm-tiles: sms must be positive, not "
                                 << int64_t(sms);
      return signalPassFailure();
    }
    getOperation().walk([&](FusionOp group) {
      WeightType wt = gemmWeightOf(group);
      if (!wt)
        return;
      const int64_t rows = wt.getShape()[0];
      // Small batches (decode of up to 128 sequences, short prompts) are
      // bound by the weight stream: 64 tokens a tile, and weight tiles as
      // wide as keep every SM busy, at least 64 rows (narrower ones read the
      // activation tile from L2 more often than the weights from DRAM).
      int64_t bn = 128;
      while (bn > 64 && (rows + bn - 1) / bn < int64_t(sms))
        bn /= 2;
      // Four stages of 64 + bn rows of 64 bytes fit 48 KB up to bn = 128.
      // Fewer than four blocks per SM even so (a 4,096-row projection gives
      // 64 for 132 SMs: one 4-warp block on half of them, idle while it
      // waits for memory; and a grid just past one wave of resident blocks
      // leaves a second wave mostly empty): split K across blocks that meet
      // in a reduction (gemm_split), doubling while each split keeps 16 or
      // more of K's 32-element steps, up to 8.
      const int64_t weightTiles = (rows + bn - 1) / bn, steps = wt.getShape()[1] / 32;
      int64_t splits = 1;
      while (splits < kMaxSplits && weightTiles * splits < 4 * int64_t(sms) &&
             steps % (2 * splits) == 0 && steps / (2 * splits) >= kMinStepsPerSplit)
        splits *= 2;
      Builder b(group.getContext());
      SmallVector<NamedAttribute> fields;
      // On sm_90a one warpgroup takes the small tile's 64 tokens on wgmma.
      fields.push_back(b.getNamedAttr(
          "small", b.getDenseI64ArrayAttr({64, bn, wgmma ? 4 : 2, wgmma ? 1 : 2, 4, splits})));
      if (wgmma)
        fields.push_back(b.getNamedAttr("small_mma", b.getStringAttr("wgmma")));
      // Prefill: 128 tokens a tile, warp tiles of 64 x 32; 128 weight rows
      // (8 warps, three stages in 48 KB) where there are enough weight
      // tiles for half a wave of blocks at 2 per SM by themselves, else 64
      // (4 warps, four stages in 48 KB) so that a 4,096-row projection at
      // 512 tokens still gives every SM two blocks.
      const bool wide = rows >= 128 * int64_t(sms) / 2;
      // On sm_90a the same tiles run on wgmma: two warpgroups of 64 token
      // rows each (8 warps of 16 rows) over the block's weight rows. Where
      // the weights are in the activation type (copied by cp.async) the
      // products are the bound, and wgmma's rate is what counts. Decoded
      // weights are bound by the decoding's instructions: the wide tile
      // (8 warps either way, two threads a row for the step decoders)
      // gains wgmma's issue slots (no ldmatrix, one instruction a
      // 64 x 128 x 16 product; the report's q4_K gate/up at 2,048 tokens
      // 1.05 -> 0.78 ms). Their 128 x 64 tile keeps its 4 warps, one
      // warpgroup over both 64-row token blocks, so that q4_K keeps its
      // step decoder (two threads a row; with 8 warps, one chunk a thread,
      // it had none: its QKV 0.23 -> 0.40 ms).
      const WeightFormat wf = wt.getFormat();
      const bool raw = (wf == WeightFormat::bf16 && activationType == "bf16") ||
                       (wf == WeightFormat::f16 && activationType == "f16");
      SmallVector<int64_t, 5> large = {128, wide ? 128 : 64, 2, wide ? 4 : 2, wide ? 3 : 4};
      if (wgmma)
        large = {128, wide ? 128 : 64, wide || raw ? 8 : 4, 1, wide ? 3 : 4};
      fields.push_back(b.getNamedAttr("large", b.getDenseI64ArrayAttr(large)));
      if (wgmma)
        fields.push_back(b.getNamedAttr("large_mma", b.getStringAttr("wgmma")));
      // The large tile has no split of K: below 1.5 blocks an SM it leaves
      // SMs idle for the whole of a long K (a 4,096-row projection at 256
      // tokens: 128 blocks for 132 SMs, each 128 or 448 steps long), where
      // the small tile's splits fill them. So for K of 64 steps or more the
      // small tile runs until the large one's token tiles reach that, up
      // to 512 tokens: on the 8B shape at 132 SMs, 129 tokens for gate/up
      // and the LM head, 257 for QKV, 385 for o and down.
      int64_t largeFrom = kLargeFromTokens;
      if (steps >= kLongSteps) {
        const int64_t largeTiles = (rows + (wide ? 127 : 63)) / (wide ? 128 : 64);
        const int64_t tokenTiles = (3 * int64_t(sms) + 2 * largeTiles - 1) / (2 * largeTiles);
        largeFrom = std::clamp(128 * (tokenTiles - 1) + 1, kLargeFromTokens, kLargeFromTokensMax);
      }
      fields.push_back(b.getNamedAttr("large_from", b.getI64IntegerAttr(largeFrom)));
      group->setAttr("llmc.gemm", b.getDictionaryAttr(fields));
      ++numGroups;
    });
  }
};

} // namespace
