//===- PartitionTensor.cpp - Megatron-style tensor parallelism ------------===//
//
// Rewrites @step into the program every rank of a `tp`-way group runs (one
// SPMD program; only the weight slices differ by rank): the projections that
// feed attention heads or the MLP's activation are column-parallel, the ones
// that read a split activation are row-parallel and followed by an
// llm.all_reduce, the LM head is vocabulary-parallel and followed by an
// llm.all_gather. Which is which follows from the dataflow, not from weight
// names: see `splitPieces`. Passes.td says what is split and why.
//
//===----------------------------------------------------------------------===//
#include "Partition/Partition.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"
#include "llmc/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace llmc {
#define GEN_PASS_DEF_PARTITIONTENSOR
#include "llmc/Passes/Passes.h.inc"
} // namespace llmc

using namespace mlir;
using namespace llmc::llm;

namespace {

struct PartitionTensorPass : llmc::impl::PartitionTensorBase<PartitionTensorPass> {
  using PartitionTensorBase::PartitionTensorBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError() << "llmc-partition-tp: tp must be at least 1, got " << int64_t(tp);
      return signalPassFailure();
    }
    if (tp == 1)
      return markAllAnalysesPreserved();
    FailureOr<func::FuncOp> step = llmc::stepToPartition(module, getArgument(), "tp");
    if (failed(step) || failed(partition(*step)))
      return signalPassFailure();
    llmc::setMeshAttr(module, "tp", tp);
  }

  // How many equal pieces of its feature dimension a value is split into
  // (0: replicated, every rank holds all of it).
  llvm::DenseMap<Value, int64_t> pieces;

  int64_t piecesOf(Value v) const { return pieces.lookup(v); }

  // The pieces a column-parallel projection's result can be split into, or 0
  // when it must stay whole: every path from it must end in an attention
  // head split or in a row-parallel projection, through RoPE and the MLP's
  // elementwise ops only. Query heads split `tp` ways; key and value heads
  // `min(kv_heads, tp)` ways (each piece replicated on tp / kv_heads ranks
  // when there are fewer KV heads than ranks).
  int64_t splitPieces(Value v) {
    int64_t agreed = -1;
    auto agree = [&](int64_t p) {
      if (agreed == -1)
        agreed = p;
      else if (agreed != p)
        agreed = 0;
    };
    if (v.use_empty())
      return 0;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto attn = dyn_cast<PagedAttentionOp>(user)) {
        if (use.get() == attn.getQuery())
          agree(tp);
        else if (use.get() == attn.getKey() || use.get() == attn.getValue())
          agree(std::min<int64_t>(attn.getKvHeads(), tp));
        else
          agree(0);
      } else if (auto rope = dyn_cast<RopeOp>(user); rope && use.get() == rope.getInput()) {
        agree(splitPieces(rope.getResult()));
      } else if (auto norm = dyn_cast<RMSNormOp>(user);
                 norm && norm.getHeadDim() && use.get() == norm.getInput()) {
        agree(splitPieces(norm.getResult())); // per head: a slice of whole heads norms alone
      } else if (isa<SiLUOp, GELUOp, MulOp>(user)) {
        agree(splitPieces(user->getResult(0)));
      } else if (auto linear = dyn_cast<LinearOp>(user); linear && use.get() == linear.getInput()) {
        agree(tp);
      } else {
        agree(0);
      }
    }
    return agreed < 0 ? 0 : agreed;
  }

  // Head counts first, so that a tp that cannot work says why in terms of
  // heads rather than of some projection's width.
  LogicalResult checkHeads(func::FuncOp step) {
    WalkResult walk = step.walk([&](PagedAttentionOp attn) {
      int64_t heads = attn.getHeads(), kvHeads = attn.getKvHeads();
      if (heads % tp != 0) {
        attn.emitError() << "llmc-partition-tp: " << heads << " query heads do not split over "
                         << int64_t(tp) << " ranks (tp must divide the number of heads)";
        return WalkResult::interrupt();
      }
      if (kvHeads % tp != 0 && tp % kvHeads != 0) {
        attn.emitError() << "llmc-partition-tp: " << kvHeads << " KV heads can be neither split "
                         << "over nor replicated across " << int64_t(tp)
                         << " ranks (one must divide the other)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  LogicalResult partition(func::FuncOp step) {
    if (failed(checkHeads(step)))
      return failure();
    for (Operation &op : llvm::make_early_inc_range(step.getBody().front())) {
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(&op)
              .Case<WeightOp, func::ReturnOp>([](Operation *) { return success(); })
              .Case<LinearOp>([&](LinearOp l) { return partitionLinear(l); })
              .Case<RopeOp>([&](RopeOp r) { return partitionRope(r); })
              .Case<RMSNormOp>([&](RMSNormOp n) { return partitionNorm(n); })
              .Case<MoEOp>([&](MoEOp m) { return partitionMoE(m); })
              .Case<PagedAttentionOp>([&](PagedAttentionOp a) { return partitionAttention(a); })
              .Case<SiLUOp, GELUOp>(
                  [&](Operation *u) { return followInput(u, piecesOf(u->getOperand(0))); })
              .Case<MulOp, AddOp>([&](Operation *b) { return partitionBinary(b); })
              .Case<LMHeadOp>([&](LMHeadOp h) { return partitionLMHead(h); })
              .Default([&](Operation *o) { return requireReplicated(o); });
      if (failed(result))
        return failure();
    }
    // Caches changed their head counts: the signature follows.
    step.setType(FunctionType::get(&getContext(), step.getBody().front().getArgumentTypes(),
                                   step.getResultTypes()));
    return success();
  }

  // Ops that need every feature (norms, embeddings, ...) take whole inputs.
  LogicalResult requireReplicated(Operation *op) {
    for (Value in : op->getOperands())
      if (piecesOf(in))
        return op->emitError() << "llmc-partition-tp: " << op->getName()
                               << " reads a value split across the " << int64_t(tp)
                               << " ranks, which it cannot compute on a slice";
    return success();
  }

  // `op`'s result is split like its input: same slice, same type.
  LogicalResult followInput(Operation *op, int64_t p) {
    if (p) {
      op->getResult(0).setType(op->getOperand(0).getType());
      pieces[op->getResult(0)] = p;
    }
    return success();
  }

  LogicalResult partitionBinary(Operation *op) {
    int64_t l = piecesOf(op->getOperand(0)), r = piecesOf(op->getOperand(1));
    if (l != r)
      return op->emitError() << "llmc-partition-tp: " << op->getName() << " combines a value split "
                             << l << " ways with one split " << r << " ways (0: whole)";
    return followInput(op, l);
  }

  LogicalResult partitionLinear(LinearOp linear) {
    if (int64_t p = piecesOf(linear.getInput()))
      return rowParallel(linear, p);
    int64_t p = splitPieces(linear.getResult());
    return p ? columnParallel(linear, p) : success();
  }

  // y = x W^T with W's rows (output features) split: each rank computes its
  // slice of y from the whole x.
  LogicalResult columnParallel(LinearOp linear, int64_t p) {
    auto type = cast<RankedTensorType>(linear.getResult().getType());
    int64_t out = type.getDimSize(1);
    if (out % p != 0)
      return linear.emitError() << "llmc-partition-tp: cannot split the " << out
                                << " output features of this projection into " << p
                                << " equal pieces";
    if (failed(llmc::shardWeight(linear->getOpOperand(1), /*dim=*/0, p, tp, /*pad=*/false)))
      return failure();
    if (linear.getBias() &&
        failed(llmc::shardWeight(linear->getOpOperand(2), /*dim=*/0, p, tp, /*pad=*/false)))
      return failure();
    linear.getResult().setType(
        RankedTensorType::get({type.getDimSize(0), out / p}, type.getElementType()));
    pieces[linear.getResult()] = p;
    ++numColumnParallel;
    return success();
  }

  // y = x W^T with x and W's columns (input features) split: each rank's
  // product is a partial sum, which an all-reduce adds up.
  LogicalResult rowParallel(LinearOp linear, int64_t p) {
    if (p != tp)
      return linear.emitError() << "llmc-partition-tp: a row-parallel projection needs its input "
                                   "split over all "
                                << int64_t(tp) << " ranks, but it is split " << p << " ways";
    if (linear.getBias())
      return linear.emitError()
             << "llmc-partition-tp: a row-parallel projection with a bias is not supported (the "
                "bias would be added on every rank before the all-reduce)";
    if (failed(llmc::shardWeight(linear->getOpOperand(1), /*dim=*/1, p, tp, /*pad=*/false)))
      return failure();
    OpBuilder b(linear->getContext());
    b.setInsertionPointAfter(linear);
    auto reduce =
        b.create<AllReduceOp>(linear.getLoc(), linear.getResult(), ReduceKind::sum, uint64_t(tp));
    linear.getResult().replaceAllUsesExcept(reduce.getResult(), reduce);
    ++numRowParallel;
    return success();
  }

  // A mixture of experts split as its experts' MLPs are: each rank holds
  // every expert's slice of the intermediate features (gate and up rows,
  // down columns) and routes every token itself with the whole router (the
  // same choice on every rank), so its output is a partial sum over its
  // slices, which an all-reduce adds up. Expert parallelism (whole experts
  // per rank, tokens exchanged all-to-all) would read fewer bytes a token
  // per rank at decode but needs the runtime's all-to-all first.
  LogicalResult partitionMoE(MoEOp moe) {
    if (failed(requireReplicated(moe)))
      return failure();
    const int64_t experts = moe.getExperts(), width = moe.getExpertWidth();
    if (width % tp != 0)
      return moe.emitError() << "llmc-partition-tp: the experts' " << width
                             << " intermediate features do not split into " << int64_t(tp)
                             << " equal pieces";
    if (failed(llmc::shardExperts(moe->getOpOperand(2), experts, /*dim=*/0, tp)) ||
        failed(llmc::shardExperts(moe->getOpOperand(3), experts, /*dim=*/0, tp)) ||
        failed(llmc::shardExperts(moe->getOpOperand(4), experts, /*dim=*/1, tp)))
      return failure();
    OpBuilder b(moe->getContext());
    b.setInsertionPointAfter(moe);
    auto reduce =
        b.create<AllReduceOp>(moe.getLoc(), moe.getResult(), ReduceKind::sum, uint64_t(tp));
    moe.getResult().replaceAllUsesExcept(reduce.getResult(), reduce);
    ++numRowParallel;
    return success();
  }

  LogicalResult partitionRope(RopeOp rope) {
    int64_t p = piecesOf(rope.getInput());
    if (!p)
      return success();
    if (rope.getHeads() % p != 0)
      return rope.emitError() << "llmc-partition-tp: " << rope.getHeads()
                              << " heads do not split into " << p << " pieces";
    rope.setHeads(rope.getHeads() / p);
    return followInput(rope, p);
  }

  // A per-head norm of a head-split value works on the rank's heads with the
  // whole (shared) weight; a row norm needs the whole row.
  LogicalResult partitionNorm(RMSNormOp norm) {
    int64_t p = piecesOf(norm.getInput());
    if (!p || !norm.getHeadDim())
      return requireReplicated(norm);
    int64_t width = cast<RankedTensorType>(norm.getInput().getType()).getDimSize(1);
    if (width % norm.getSpan() != 0)
      return norm.emitError() << "llmc-partition-tp: a slice of " << width
                              << " features is not a whole number of heads of " << norm.getSpan();
    return followInput(norm, p);
  }

  LogicalResult partitionAttention(PagedAttentionOp attn) {
    int64_t heads = attn.getHeads(), kvHeads = attn.getKvHeads();
    int64_t qp = piecesOf(attn.getQuery()), kp = piecesOf(attn.getKey()),
            vp = piecesOf(attn.getValue());
    if (qp == 0 && kp == 0 && vp == 0)
      return success(); // a projection-free attention stays whole
    int64_t kvp = std::min(kvHeads, int64_t(tp));
    if (qp != tp || kp != kvp || vp != kvp)
      return attn.emitError() << "llmc-partition-tp: expected the query split " << int64_t(tp)
                              << " ways and the key and value " << kvp << " ways, got " << qp
                              << ", " << kp << " and " << vp;
    attn.setHeads(heads / tp);
    attn.setKvHeads(kvHeads / kvp);
    if (kvp < tp)
      ++numReplicatedKV;
    // The cache holds this rank's KV heads only.
    Value cache = attn.getCache();
    auto cacheType = cast<KVCacheType>(cache.getType());
    auto sliced = KVCacheType::get(&getContext(), kvHeads / kvp, cacheType.getHeadDim(),
                                   cacheType.getElementType());
    if (cacheType.getKvHeads() != kvHeads / kvp) {
      if (!isa<BlockArgument>(cache) || !cache.hasOneUse())
        return attn.emitError() << "llmc-partition-tp: the KV cache must be a @step argument read "
                                   "by one attention";
      cache.setType(sliced);
    }
    auto type = cast<RankedTensorType>(attn.getQuery().getType());
    attn.getResult().setType(type);
    pieces[attn.getResult()] = tp;
    return success();
  }

  // logits = x E^T with E's rows (the vocabulary) split, padded to equal
  // pieces; the all-gather joins the ranks' columns and drops the padding.
  LogicalResult partitionLMHead(LMHeadOp head) {
    if (failed(requireReplicated(head)))
      return failure();
    auto type = cast<RankedTensorType>(head.getLogits().getType());
    int64_t vocab = type.getDimSize(1);
    if (failed(llmc::shardWeight(head->getOpOperand(2), /*dim=*/0, tp, tp, /*pad=*/true,
                                 /*cloneName=*/"lm_head.weight")))
      return failure();
    int64_t piece = (vocab + tp - 1) / tp;
    head.getLogits().setType(
        RankedTensorType::get({type.getDimSize(0), piece}, type.getElementType()));
    OpBuilder b(head->getContext());
    b.setInsertionPointAfter(head);
    auto gather = b.create<AllGatherOp>(head.getLoc(), type, head.getLogits(), /*dim=*/uint64_t(1),
                                        uint64_t(tp));
    head.getLogits().replaceAllUsesExcept(gather.getResult(), gather);
    return success();
  }
};

} // namespace
