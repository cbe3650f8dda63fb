//===- LLMOps.cpp - verifiers of the llm dialect's ops --------------------===//
//
// Every verifier names the operand, dimension or attribute at fault, so that a
// user editing a dumped IR file by hand learns what to change.
//
//===----------------------------------------------------------------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace llmc::llm;

namespace {

// Two dimensions agree when either is dynamic or both are equal.
bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimString(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

int64_t tokens(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(0); }
int64_t features(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(1); }
Type elementType(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

// Checks that `a` and `b` have the same token count.
LogicalResult verifySameTokens(Operation *op, Value a, StringRef aName, Value b, StringRef bName) {
  if (dimsAgree(tokens(a), tokens(b)))
    return success();
  return op->emitOpError() << aName << " has " << dimString(tokens(a)) << " tokens but " << bName
                           << " has " << dimString(tokens(b));
}

// Checks that a feature dimension (dim 1 of `v`) equals `expected`.
LogicalResult verifyFeatures(Operation *op, Value v, StringRef name, int64_t expected,
                             StringRef why) {
  if (dimsAgree(features(v), expected))
    return success();
  return op->emitOpError() << name << " has " << dimString(features(v)) << " features, expected "
                           << expected << " (" << why << ")";
}

LogicalResult verifyFloatWeight(Operation *op, WeightType w, StringRef name) {
  if (!w.isQuantized())
    return success();
  return op->emitOpError() << name << " must be stored as f32, f16 or bf16, got "
                           << stringifyWeightFormat(w.getFormat());
}

LogicalResult verifyVectorWeight(Operation *op, WeightType w, StringRef name, int64_t size,
                                 StringRef why) {
  if (w.getRank() != 1)
    return op->emitOpError() << name << " must be a vector, got rank " << w.getRank();
  if (w.getShape()[0] != size)
    return op->emitOpError() << name << " has " << w.getShape()[0] << " elements, expected " << size
                             << " (" << why << ")";
  return verifyFloatWeight(op, w, name);
}

LogicalResult verifyMatrixWeight(Operation *op, WeightType w, StringRef name) {
  if (w.getRank() == 2)
    return success();
  return op->emitOpError() << name << " must be a matrix [out_features, in_features], got rank "
                           << w.getRank();
}

LogicalResult verifyEpsilon(Operation *op, double eps) {
  if (eps > 0 && eps < 1)
    return success();
  return op->emitOpError() << "eps must be in (0, 1), got " << eps;
}

LogicalResult verifySameElementType(Operation *op, Value a, StringRef aName, Value b,
                                    StringRef bName) {
  if (elementType(a) == elementType(b))
    return success();
  return op->emitOpError() << aName << " element type " << elementType(a) << " differs from "
                           << bName << " element type " << elementType(b);
}

LogicalResult verifyRanks(Operation *op, int64_t ranks) {
  if (ranks >= 2)
    return success();
  return op->emitOpError() << "ranks must be at least 2, got " << ranks;
}

} // namespace

//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "weight name must not be empty";
  if (std::optional<ArrayAttr> parts = getParts()) {
    if (parts->empty())
      return emitOpError() << "concat needs at least one part";
    for (Attribute a : *parts)
      if (cast<StringAttr>(a).getValue().empty())
        return emitOpError() << "concat part names must not be empty";
    if (getType().getShape().size() > 2)
      return emitOpError() << "concat joins rows of vectors or matrices, but the result type has rank "
                           << getType().getShape().size();
  }
  if (std::optional<ArrayRef<int64_t>> rows = getRows()) {
    std::optional<ArrayAttr> parts = getParts();
    if (!parts)
      return emitOpError() << "rows slices the parts of a concat, but there is no concat";
    if (rows->size() != 2 * parts->size())
      return emitOpError() << "rows needs a begin and an end for each of the " << parts->size()
                           << " parts, got " << rows->size() << " numbers";
    int64_t total = 0;
    for (size_t i = 0; i < rows->size(); i += 2) {
      if ((*rows)[i] < 0 || (*rows)[i] >= (*rows)[i + 1])
        return emitOpError() << "rows of part " << i / 2 << " are [" << (*rows)[i] << ", "
                             << (*rows)[i + 1] << "), which is empty or negative";
      total += (*rows)[i + 1] - (*rows)[i];
    }
    // Before sharding, the slices' rows are the weight's rows.
    if (!getShard() || getShard()->getDim() != 0)
      if (total != getType().getShape()[0])
        return emitOpError() << "rows select " << total << " rows but the type has "
                             << getType().getShape()[0];
  }
  if (getOffset()) {
    WeightFormat f = getType().getFormat();
    if (f != WeightFormat::f32 && f != WeightFormat::f16 && f != WeightFormat::bf16)
      return emitOpError() << "plus shifts float weights (f32, f16, bf16), not "
                           << stringifyWeightFormat(f);
  }
  if (std::optional<StringRef> from = getFrom())
    if (!symbolizeWeightFormat(*from))
      return emitOpError() << "from: unknown weight format '" << *from << "'";
  if (std::optional<ShardAttr> shard = getShard())
    if (shard->getDim() >= getType().getRank())
      return emitOpError() << "shard dim " << shard->getDim() << " is out of range for a weight of rank "
                           << getType().getRank();
  return success();
}

// Scales and caps are positive (an absent attribute means none).
static LogicalResult verifyPositive(Operation *op, std::optional<APFloat> value, StringRef name) {
  if (value && !(value->convertToDouble() > 0))
    return op->emitOpError() << name << " must be positive, got " << value->convertToDouble();
  return success();
}

LogicalResult EmbedOp::verify() {
  if (failed(verifyPositive(*this, getScale(), "scale")))
    return failure();
  WeightType table = getTable().getType();
  if (failed(verifyMatrixWeight(*this, table, "table")))
    return failure();
  if (!dimsAgree(getTokens().getType().getDimSize(0), tokens(getResult())))
    return emitOpError() << "result has " << dimString(tokens(getResult()))
                         << " rows but there are "
                         << dimString(getTokens().getType().getDimSize(0)) << " tokens";
  return verifyFeatures(*this, getResult(), "result", table.getShape()[1],
                        "the embedding width of the table");
}

int64_t RMSNormOp::getSpan() {
  return getHeadDim() ? int64_t(*getHeadDim()) : features(getInput());
}

LogicalResult RMSNormOp::verify() {
  if (failed(verifyEpsilon(*this, getEpsilon().convertToDouble())))
    return failure();
  if (std::optional<uint64_t> d = getHeadDim()) {
    int64_t headDim = int64_t(*d), width = features(getInput());
    if (headDim <= 0)
      return emitOpError() << "head_dim must be positive, got " << headDim;
    if (!ShapedType::isDynamic(width) && width % headDim != 0)
      return emitOpError() << "input has " << width << " features, not a whole number of heads of "
                           << headDim;
    return verifyVectorWeight(*this, getWeight().getType(), "weight", headDim,
                              "one per feature of a head");
  }
  return verifyVectorWeight(*this, getWeight().getType(), "weight", features(getInput()),
                            "one per input feature");
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyEpsilon(*this, getEpsilon().convertToDouble())) ||
      failed(verifyVectorWeight(*this, getWeight().getType(), "weight", features(getInput()),
                                "one per input feature")))
    return failure();
  if (getBias())
    return verifyVectorWeight(*this, cast<WeightType>(getBias().getType()), "bias", features(getInput()),
                              "one per input feature");
  return success();
}

LogicalResult LinearOp::verify() {
  WeightType w = getWeight().getType();
  if (failed(verifyMatrixWeight(*this, w, "weight")))
    return failure();
  int64_t out = w.getShape()[0], in = w.getShape()[1];
  if (failed(verifyFeatures(*this, getInput(), "input", in, "the weight's in_features")) ||
      failed(verifyFeatures(*this, getResult(), "result", out, "the weight's out_features")) ||
      failed(verifySameTokens(*this, getInput(), "input", getResult(), "result")) ||
      failed(verifySameElementType(*this, getInput(), "input", getResult(), "result")))
    return failure();
  if (getBias())
    return verifyVectorWeight(*this, cast<WeightType>(getBias().getType()), "bias", out, "one per output feature");
  return success();
}

int64_t MoEOp::getExpertWidth() {
  return getGate().getType().getShape()[0] / std::max<int64_t>(getExperts(), 1);
}

LogicalResult MoEOp::verify() {
  const int64_t experts = getExperts(), topK = getTopK(), hidden = features(getInput());
  if (experts < 1)
    return emitOpError() << "experts must be positive, got " << experts;
  if (topK < 1 || topK > experts)
    return emitOpError() << "top_k must be in [1, " << experts << "], got " << topK;
  WeightType router = getRouter().getType(), gate = getGate().getType(), up = getUp().getType(),
             down = getDown().getType();
  for (auto [w, name] : {std::pair{router, "router"}, {gate, "gate"}, {up, "up"}, {down, "down"}})
    if (failed(verifyMatrixWeight(*this, w, name)))
      return failure();
  if (failed(verifyFloatWeight(*this, router, "router")))
    return failure();
  if (router.getShape()[0] != experts || router.getShape()[1] != hidden)
    return emitOpError() << "router must be [" << experts << ", " << hidden << "] (experts, hidden), got "
                         << dimString(router.getShape()[0]) << "x" << dimString(router.getShape()[1]);
  if (gate.getShape()[0] % experts != 0)
    return emitOpError() << "gate has " << gate.getShape()[0] << " rows, not a multiple of the "
                         << experts << " experts";
  const int64_t width = gate.getShape()[0] / experts;
  if (gate.getShape()[1] != hidden)
    return emitOpError() << "gate must have " << hidden << " columns (the input's features), got "
                         << gate.getShape()[1];
  if (up.getShape() != gate.getShape())
    return emitOpError() << "up must have gate's shape " << gate.getShape()[0] << "x" << hidden
                         << ", got " << up.getShape()[0] << "x" << up.getShape()[1];
  if (down.getShape()[0] != experts * hidden || down.getShape()[1] != width)
    return emitOpError() << "down must be " << experts * hidden << "x" << width
                         << " (experts * hidden, the experts' width), got " << down.getShape()[0]
                         << "x" << down.getShape()[1];
  return success();
}

LogicalResult LMHeadOp::verify() {
  if (failed(verifyPositive(*this, getSoftcap(), "softcap")))
    return failure();
  WeightType w = getWeight().getType();
  if (failed(verifyMatrixWeight(*this, w, "weight")))
    return failure();
  int64_t vocab = w.getShape()[0], hidden = w.getShape()[1];
  if (failed(verifyFeatures(*this, getInput(), "input", hidden, "the weight's hidden size")) ||
      failed(verifyFeatures(*this, getLogits(), "logits", vocab, "the weight's vocabulary size")))
    return failure();
  if (!dimsAgree(getRows().getType().getDimSize(0), tokens(getLogits())))
    return emitOpError() << "logits have " << dimString(tokens(getLogits()))
                         << " rows but " << dimString(getRows().getType().getDimSize(0))
                         << " rows are selected";
  return success();
}

LogicalResult SplitOp::verify() {
  if (getResults().empty())
    return emitOpError() << "needs at least one result";
  int64_t total = 0;
  bool allStatic = !ShapedType::isDynamic(features(getInput()));
  for (auto [i, r] : llvm::enumerate(getResults())) {
    std::string name = "result #" + std::to_string(i);
    if (failed(verifySameTokens(*this, getInput(), "input", r, name)) ||
        failed(verifySameElementType(*this, getInput(), "input", r, name)))
      return failure();
    if (ShapedType::isDynamic(features(r)))
      allStatic = false;
    else
      total += features(r);
  }
  if (allStatic && total != features(getInput()))
    return emitOpError() << "result widths add up to " << total << " but the input has "
                         << features(getInput()) << " features";
  return success();
}

LogicalResult RopeOp::verify() {
  int64_t heads = getHeadsAttr().getInt(), headDim = getHeadDimAttr().getInt();
  if (heads <= 0)
    return emitOpError() << "heads must be positive, got " << heads;
  if (headDim <= 0 || headDim % 2 != 0)
    return emitOpError() << "head_dim must be positive and even, got " << headDim;
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError() << "theta must be positive, got " << getTheta().convertToDouble();
  if (getFreqFactors()) {
    if (getScaling())
      return emitOpError() << "takes either scaling or freq_factors, not both";
    if (failed(verifyVectorWeight(*this, cast<WeightType>(getFreqFactors().getType()),
                                  "freq_factors", headDim / 2, "one per rotated pair")))
      return failure();
  }
  if (!dimsAgree(getPositions().getType().getDimSize(0), tokens(getInput())))
    return emitOpError() << "there are " << dimString(getPositions().getType().getDimSize(0))
                         << " positions for " << dimString(tokens(getInput())) << " tokens";
  return verifyFeatures(*this, getInput(), "input", heads * headDim, "heads * head_dim");
}

LogicalResult PagedAttentionOp::verify() {
  if (failed(verifyPositive(*this, getSoftcap(), "softcap")))
    return failure();
  int64_t heads = getHeadsAttr().getInt(), kvHeads = getKvHeadsAttr().getInt(),
          headDim = getHeadDimAttr().getInt();
  if (heads <= 0 || kvHeads <= 0)
    return emitOpError() << "heads and kv_heads must be positive, got " << heads << " and "
                         << kvHeads;
  if (heads % kvHeads != 0)
    return emitOpError() << "heads (" << heads << ") must be a multiple of kv_heads (" << kvHeads
                         << ")";
  if (headDim <= 0)
    return emitOpError() << "head_dim must be positive, got " << headDim;
  if (!(getScale().convertToDouble() > 0))
    return emitOpError() << "scale must be positive, got " << getScale().convertToDouble();
  // Signed reads: ODS's I64Attr getters return uint64_t.
  if (getWindowAttr() && getWindowAttr().getInt() <= 0)
    return emitOpError() << "window must be positive, got " << getWindowAttr().getInt();
  KVCacheType cache = getCache().getType();
  if (cache.getKvHeads() != kvHeads || cache.getHeadDim() != headDim)
    return emitOpError() << "cache holds " << cache.getKvHeads() << " heads of "
                         << cache.getHeadDim() << " but the op has kv_heads = " << kvHeads
                         << ", head_dim = " << headDim;
  if (failed(verifyFeatures(*this, getQuery(), "query", heads * headDim, "heads * head_dim")) ||
      failed(verifyFeatures(*this, getKey(), "key", kvHeads * headDim, "kv_heads * head_dim")) ||
      failed(verifyFeatures(*this, getValue(), "value", kvHeads * headDim,
                            "kv_heads * head_dim")) ||
      failed(verifySameTokens(*this, getQuery(), "query", getKey(), "key")) ||
      failed(verifySameTokens(*this, getQuery(), "query", getValue(), "value")) ||
      failed(verifySameElementType(*this, getQuery(), "query", getKey(), "key")) ||
      failed(verifySameElementType(*this, getQuery(), "query", getValue(), "value")))
    return failure();
  if (getResult().getType() != getQuery().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the query type " << getQuery().getType();
  if (!dimsAgree(getSlotMapping().getType().getDimSize(0), tokens(getQuery())))
    return emitOpError() << "slot_mapping has " << dimString(getSlotMapping().getType().getDimSize(0))
                         << " slots for " << dimString(tokens(getQuery())) << " tokens";
  int64_t starts = getQueryStarts().getType().getDimSize(0);
  int64_t seqs = getContextLens().getType().getDimSize(0);
  if (!ShapedType::isDynamic(starts) && !dimsAgree(starts - 1, seqs))
    return emitOpError() << "query_starts must have one more entry than context_lens, got "
                         << starts << " and " << dimString(seqs);
  if (!dimsAgree(getBlockTables().getType().getDimSize(0), seqs))
    return emitOpError() << "block_tables has " << dimString(getBlockTables().getType().getDimSize(0))
                         << " rows for " << dimString(seqs) << " sequences";
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyRanks(*this, getRanksAttr().getInt()); }

LogicalResult AllGatherOp::verify() {
  int64_t ranks = getRanksAttr().getInt();
  if (failed(verifyRanks(*this, ranks)))
    return failure();
  auto in = getInput().getType(), out = getResult().getType();
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= in.getRank())
    return emitOpError() << "dim " << dim << " is out of range for rank " << in.getRank();
  if (in.getRank() != out.getRank() || in.getElementType() != out.getElementType())
    return emitOpError() << "result " << out << " must have the rank and element type of the input "
                         << in;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t expected = in.getDimSize(d);
    if (d == dim && !ShapedType::isDynamic(expected)) {
      // The last shard may be padding beyond the result's size.
      int64_t size = out.getDimSize(d);
      if (!ShapedType::isDynamic(size) && size > (ranks - 1) * expected &&
          size <= ranks * expected)
        continue;
      return emitOpError() << "result dimension " << d << " is " << dimString(size)
                           << ", expected more than " << (ranks - 1) * expected
                           << " and at most " << ranks * expected << " (" << ranks
                           << " shards of " << expected << ")";
    }
    if (!dimsAgree(expected, out.getDimSize(d)))
      return emitOpError() << "result dimension " << d << " is " << dimString(out.getDimSize(d))
                           << ", expected " << expected;
  }
  return success();
}

LogicalResult SendOp::verify() {
  if (getPeerAttr().getInt() < 0)
    return emitOpError() << "peer rank must be non-negative, got " << getPeerAttr().getInt();
  return success();
}

LogicalResult RecvOp::verify() {
  if (getPeerAttr().getInt() < 0)
    return emitOpError() << "peer rank must be non-negative, got " << getPeerAttr().getInt();
  return success();
}

LogicalResult FusionOp::verifyRegions() {
  if (getName().empty())
    return emitOpError() << "fusion name must not be empty";
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments() << " arguments for "
                         << getInputs().size() << " inputs";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(body.getArgumentTypes(), getInputs().getTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError() << "body argument #" << i << " has type " << std::get<0>(pair)
                           << " but input #" << i << " has type " << std::get<1>(pair);
  auto yield = body.empty() ? YieldOp() : dyn_cast<YieldOp>(body.back());
  if (!yield)
    return emitOpError() << "body must end with llm.yield";
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from the " << getNumResults()
                         << " results";
  return success();
}

#define GET_OP_CLASSES
#include "llmc/Dialect/LLM/IR/LLMOps.cpp.inc"
