//===- HostFusedGroup.cpp - C++ for a multi-op fusion group ---------------===//
#include "HostFusedGroup.h"

#include "Target/Common/EpilogueRegions.h"
#include "Target/Common/ExprEmitter.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace {

int64_t widthOf(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(1); }

bool isActivation(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 2 && isa<FloatType>(t.getElementType());
}

std::string number(double v) { return llvm::formatv("{0:e16}", v).str(); }

bool isNorm(Operation *op) { return isa<RMSNormOp, LayerNormOp>(op); }

// The fuse pass puts only row norms in a prologue; a per-head norm there
// would be computed as one.
LogicalResult rejectHeadNorm(Operation *op) {
  auto n = dyn_cast<RMSNormOp>(op);
  if (n && n.getHeadDim())
    return n.emitError() << "host codegen: a per-head RMS norm cannot be a GEMM's prologue";
  return success();
}

class FusedGroupEmitter {
public:
  FusedGroupEmitter(FusionOp group, const llvm::DenseMap<Value, int64_t> &bufferOf, bool q8,
                    HostBindings &b)
      : group(group), bufferOf(bufferOf), q8(q8), b(b) {}

  LogicalResult emit(HostKernelText &text);

private:
  void declareIO(llvm::raw_ostream &os);
  std::string weight(Value inner);
  std::string in(Value v) { return "in" + std::to_string(cast<BlockArgument>(v).getArgNumber()); }
  // `auto aN = V::load(inN + t * width + j);` for each group input `ops` read
  // that is not bound yet.
  void loadInputs(ArrayRef<Operation *> ops, ExprEmitter &ex, int64_t width,
                  llvm::raw_ostream &os, StringRef indent);
  // `V::store(outI + t * width + j, e);` for each result of the group `v` is.
  void storeYields(Value v, ExprEmitter &ex, llvm::raw_ostream &os, StringRef indent);
  // Loads of the group inputs `ops` read, their statements, and the stores
  // of those the group yields: the body of one lane loop.
  LogicalResult emitLaneStatements(ArrayRef<Operation *> ops, int64_t width, ExprEmitter &ex,
                                   llvm::raw_ostream &os, StringRef indent);
  LogicalResult emitElementwiseGroup(ArrayRef<Operation *> ops, llvm::raw_ostream &os);
  // Writes the prologue and sets `x` to the C++ name of the anchor's input rows.
  LogicalResult emitPrologue(ArrayRef<Operation *> pro, Value anchorInput,
                             llvm::raw_ostream &os, std::string &x);
  LogicalResult emitLinear(LinearOp l, ArrayRef<Operation *> epi, const std::string &x,
                           llvm::raw_ostream &os, std::string &launch);

  FusionOp group;
  const llvm::DenseMap<Value, int64_t> &bufferOf;
  bool q8;
  HostBindings &b;
  llvm::DenseMap<Value, SmallVector<unsigned>> yieldsOf;
};

void FusedGroupEmitter::declareIO(llvm::raw_ostream &os) {
  for (BlockArgument arg : group.getBody().getArguments()) {
    if (!isActivation(arg) || arg.use_empty())
      continue;
    b.buffers.push_back(bufferOf.lookup(group.getInputs()[arg.getArgNumber()]));
    os << llvm::formatv("  const float *{0} = static_cast<const float *>(a->buffers[{1}]);\n",
                        in(arg), b.buffers.size() - 1);
  }
  for (unsigned i = 0; i < group.getNumResults(); ++i) {
    b.buffers.push_back(bufferOf.lookup(group.getResult(i)));
    os << llvm::formatv("  float *out{0} = static_cast<float *>(a->buffers[{1}]);\n", i,
                        b.buffers.size() - 1);
  }
  auto yield = cast<YieldOp>(group.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    yieldsOf[v].push_back(i);
}

std::string FusedGroupEmitter::weight(Value inner) {
  b.weights.push_back(inner.getDefiningOp<WeightOp>().getName().str());
  return llvm::formatv("a->weights[{0}]", b.weights.size() - 1).str();
}

void FusedGroupEmitter::loadInputs(ArrayRef<Operation *> ops, ExprEmitter &ex, int64_t width,
                                   llvm::raw_ostream &os, StringRef indent) {
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (isa<BlockArgument>(v) && isActivation(v) && !ex.isBound(v)) {
        std::string name = "a" + std::to_string(cast<BlockArgument>(v).getArgNumber());
        os << indent
           << llvm::formatv("auto {0} = V::load({1} + t * {2} + j);\n", name, in(v), width);
        ex.bind(v, name);
      }
}

void FusedGroupEmitter::storeYields(Value v, ExprEmitter &ex, llvm::raw_ostream &os,
                                    StringRef indent) {
  for (unsigned i : yieldsOf.lookup(v))
    os << indent
       << llvm::formatv("V::store(out{0} + t * {1} + j, {2});\n", i, widthOf(v), ex.lookup(v));
}

LogicalResult FusedGroupEmitter::emitLaneStatements(ArrayRef<Operation *> ops, int64_t width,
                                                    ExprEmitter &ex, llvm::raw_ostream &os,
                                                    StringRef indent) {
  loadInputs(ops, ex, width, os, indent);
  for (Operation *op : ops) {
    if (failed(ex.emit(op, os, indent)))
      return failure();
    storeYields(op->getResult(0), ex, os, indent);
  }
  return success();
}

LogicalResult FusedGroupEmitter::emitElementwiseGroup(ArrayRef<Operation *> ops,
                                                      llvm::raw_ostream &os) {
  int64_t w = widthOf(ops.front()->getResult(0));
  os << llvm::formatv("  llmc::host::fused_elementwise<{0}>(a->step, [&](auto L, int64_t t, "
                      "int64_t j) {{\n    using V = decltype(L);\n",
                      w);
  ExprEmitter ex;
  if (failed(emitLaneStatements(ops, w, ex, os, "    ")))
    return failure();
  os << "  });\n";
  return success();
}

LogicalResult FusedGroupEmitter::emitPrologue(ArrayRef<Operation *> pro, Value anchorInput,
                                              llvm::raw_ostream &os, std::string &x) {
  int64_t K = widthOf(anchorInput);
  if (pro.empty()) {
    if (!isa<BlockArgument>(anchorInput))
      return group.emitError() << "fused anchor input must be a group input or a prologue value";
    x = in(anchorInput);
    return success();
  }
  Operation *norm = isNorm(pro.back()) ? pro.back() : nullptr;
  if (norm && failed(rejectHeadNorm(norm)))
    return failure();
  ArrayRef<Operation *> elementwise = norm ? pro.drop_back() : pro;
  for (Operation *op : elementwise)
    if (!ExprEmitter::isElementwise(op) || widthOf(op->getResult(0)) != K)
      return op->emitError() << "host codegen: a prologue holds elementwise ops of the anchor's "
                                "input width and at most one norm, last";
  Value produced = norm ? norm->getResult(0) : elementwise.back()->getResult(0);
  if (produced != anchorInput)
    return group.emitError() << "host codegen: the prologue must produce the anchor's input";

  os << llvm::formatv("  const float *x = llmc::host::prologue_rows<{0}>(a->step, [&](int64_t t, "
                      "float *row) {{\n",
                      K);
  std::string src;
  if (!elementwise.empty()) {
    os << llvm::formatv("    llmc::host::for_each_lane(t, t + 1, 0, {0}, [&](auto L, int64_t t, "
                        "int64_t j) {{\n      using V = decltype(L);\n",
                        K);
    ExprEmitter ex;
    if (failed(emitLaneStatements(elementwise, K, ex, os, "      ")))
      return failure();
    Value rowValue = elementwise.back()->getResult(0);
    Value needed = norm ? norm->getOperand(0) : anchorInput;
    if (rowValue != needed)
      return elementwise.back()->emitError()
             << "host codegen: the last prologue expression must feed the norm or the anchor";
    os << "      V::store(row + j, " << ex.lookup(rowValue) << ");\n    });\n";
    src = "row";
  } else {
    if (!isa<BlockArgument>(norm->getOperand(0)))
      return norm->emitError() << "host codegen: the norm's input must be a group input";
    src = in(norm->getOperand(0)) + " + t * " + std::to_string(K);
  }
  if (auto n = dyn_cast<RMSNormOp>(norm)) {
    os << llvm::formatv("    llmc::host::rms_norm_row<{0}, {1}>({2}, {3}, {4}f, row);\n", K,
                        formatTag(n.getWeight().getType()), src, weight(n.getWeight()),
                        number(n.getEpsilon().convertToDouble()));
  } else if (auto n = dyn_cast<LayerNormOp>(norm)) {
    std::string bias = n.getBias() ? weight(n.getBias()) : "nullptr";
    std::string bfmt = n.getBias() ? formatTag(cast<WeightType>(n.getBias().getType()))
                                   : formatTag(n.getWeight().getType());
    os << llvm::formatv("    llmc::host::layer_norm_row<{0}, {1}, {2}, {3}>({4}, {5}, {6}, "
                        "{7}f, row);\n",
                        K, n.getBias() ? "true" : "false", formatTag(n.getWeight().getType()),
                        bfmt, src, weight(n.getWeight()), bias,
                        number(n.getEpsilon().convertToDouble()));
  }
  if (norm)
    for (unsigned i : yieldsOf.lookup(norm->getResult(0)))
      os << llvm::formatv("    std::memcpy(out{0} + t * {1}, row, sizeof(float) * {1});\n", i, K);
  os << "  });\n";
  x = "x";
  return success();
}

LogicalResult FusedGroupEmitter::emitLinear(LinearOp l, ArrayRef<Operation *> epi,
                                            const std::string &x, llvm::raw_ostream &os,
                                            std::string &launch) {
  WeightType wt = l.getWeight().getType();
  int64_t N = wt.getShape()[0], K = wt.getShape()[1];

  FailureOr<EpilogueRegions> analysis = analyzeEpilogue(l, epi, yieldsOf, "host codegen");
  if (failed(analysis))
    return failure();
  EpilogueRegions &e = *analysis;
  SplitOp split = e.split;
  bool paired = e.paired;
  llvm::DenseMap<Value, int64_t> &regionOf = e.regionOf;
  SmallVector<Operation *> &elementwise = e.elementwise;
  SmallVector<std::pair<int64_t, int64_t>> regions; // offset, width
  for (const EpilogueRegions::Region &r : e.regions)
    regions.push_back({r.offset, r.width});

  // Tiles of a rotated region are aligned to the head dimension; rotations
  // with the same parameters share one RoPE table.
  struct RopeUse {
    RopeOp op;
    int64_t table;
  };
  SmallVector<RopeUse> ropes;
  SmallVector<std::string> tableKeys;
  SmallVector<int64_t> alignOf(regions.size(), 8);
  for (auto [region, r] : llvm::enumerate(e.regions))
    for (RopeOp rope : r.ropes) {
      int64_t d = rope.getHeadDimAttr().getInt();
      alignOf[region] = std::max<int64_t>(alignOf[region], d);
      std::string key;
      llvm::raw_string_ostream ks(key);
      ks << d << stringifyRopeStyle(rope.getStyle()) << number(rope.getTheta().convertToDouble())
         << rope.getScalingAttr() << " freqs="
         << (rope.getFreqFactors() ? rope.getFreqFactors().getDefiningOp<WeightOp>().getName()
                                   : "");
      auto it = llvm::find(tableKeys, key);
      int64_t table = it - tableKeys.begin();
      if (it == tableKeys.end())
        tableKeys.push_back(key);
      ropes.push_back({rope, table});
    }

  // RoPE tables, built once per step for the rotations that share them.
  for (auto [i, key] : llvm::enumerate(tableKeys)) {
    RopeOp r = llvm::find_if(ropes, [&](const RopeUse &u) { return u.table == int64_t(i); })->op;
    RopeScalingAttr s = r.getScalingAttr();
    std::string kind = !s ? "none" : stringifyRopeScalingKind(s.getKind()).str();
    std::string freqs = "nullptr";
    if (r.getFreqFactors())
      freqs = "static_cast<const float *>(" + weight(r.getFreqFactors()) + ")";
    os << llvm::formatv(
        "  llmc::host::rope_table<{0}, llmc::host::rope_style::{1}> rope{2};\n"
        "  rope{2}.build(a->step, {2}, {3}, llmc::host::rope_scaling{{"
        "llmc::host::rope_scaling_kind::{4}, {5}, {6}, {7}, {8}}, {9});\n",
        r.getHeadDimAttr().getInt(), stringifyRopeStyle(r.getStyle()), i,
        number(r.getTheta().convertToDouble()), kind,
        number(s ? s.getFactor().getValueAsDouble() : 1.0),
        number(s ? s.getLowFreqFactor().getValueAsDouble() : 1.0),
        number(s ? s.getHighFreqFactor().getValueAsDouble() : 1.0),
        s ? s.getOriginalMaxPosition() : 0, freqs);
  }

  os << "  static constexpr llmc::host::gemm_region kRegions[] = {";
  for (auto [i, r] : llvm::enumerate(regions))
    os << (i ? ", " : "") << "{" << r.first << ", " << r.second << ", " << alignOf[i] << "}";
  os << "};\n";
  std::string w = weight(l.getWeight());
  std::string bias = "nullptr", biasFmt = "void";
  if (l.getBias()) {
    bias = weight(l.getBias());
    biasFmt = formatTag(cast<WeightType>(l.getBias().getType()));
  }
  bool q8Here = usesQ8Activations(wt, q8);
  os << llvm::formatv("  llmc::host::fused_gemm<{0}, {1}, {2}, {3}, {4}, {8}>(\n"
                      "      a->step, [&](int64_t t) {{ return {5} + t * {1}; }, {6}, {7}, "
                      "kRegions,\n"
                      "      [&](int64_t r, int64_t t0, int64_t t1, int64_t j0, int64_t j1, "
                      "float *const *tile, int64_t ld) {{\n",
                      formatTag(wt), K, regions.size(), paired ? "true" : "false", biasFmt, x, w,
                      bias, q8Here ? "true" : "false");
  os << "        (void)r;\n";

  // Values that live in a tile, in a fixed order: the regions, then the
  // RoPE results (which rotate their region's tile in place).
  SmallVector<Value> tileValues;
  if (split)
    llvm::append_range(tileValues, split.getResults());
  else
    tileValues.push_back(l.getResult());
  for (RopeUse u : ropes)
    tileValues.push_back(u.op.getResult());

  // One lane loop per region (or one for all regions when paired).
  auto body = [&](std::optional<int64_t> only, StringRef indent) -> LogicalResult {
    SmallVector<bool> loadedRegion(regions.size(), false);
    std::string inner = (indent + "  ").str();
    os << indent << "llmc::host::for_each_lane(t0, t1, j0, j1, [&](auto L, int64_t t, int64_t j) {\n"
       << inner << "using V = decltype(L);\n";
    ExprEmitter ex;
    for (Value v : tileValues) {
      int64_t region = regionOf.lookup(v);
      if (only && region != *only)
        continue;
      std::string name = "r" + std::to_string(region);
      if (!loadedRegion[region]) {
        os << inner
           << llvm::formatv("auto {0} = V::load(tile[{1}] + (t - t0) * ld + (j - j0));\n", name,
                            region);
        loadedRegion[region] = true;
      }
      ex.bind(v, name);
    }
    SmallVector<Operation *> mine;
    for (Operation *op : elementwise)
      if (!only || regionOf[op->getResult(0)] == *only)
        mine.push_back(op);
    // Tile values (and RoPE results) yielded straight out.
    for (Value v : tileValues)
      if (ex.isBound(v))
        storeYields(v, ex, os, inner);
    if (failed(emitLaneStatements(mine, only ? regions[*only].second : regions.front().second, ex,
                                  os, inner)))
      return failure();
    os << indent << "});\n";
    return success();
  };
  if (paired) {
    if (failed(body(std::nullopt, "        ")))
      return failure();
  } else {
    for (int64_t region = 0; region < int64_t(regions.size()); ++region) {
      os << "        if (r == " << region << ") {\n";
      for (RopeUse u : ropes)
        if (regionOf[u.op.getResult()] == region)
          os << "          rope" << u.table << ".apply(tile[" << region
             << "], ld, t0, t1, j0, j1);\n";
      if (failed(body(region, "          ")))
        return failure();
      os << "        }\n";
    }
  }
  os << "      });\n";
  launch = llvm::formatv("{0} output rows in {1}-aligned tiles{2} split across threads, x T "
                         "tokens in blocks of 64",
                         N, *llvm::max_element(alignOf), paired ? " (regions paired)" : "")
               .str();
  return success();
}

LogicalResult FusedGroupEmitter::emit(HostKernelText &text) {
  SmallVector<Operation *> compute;
  Operation *anchor = nullptr;
  size_t anchorIndex = 0;
  for (Operation &op : group.getBody().front()) {
    if (isa<WeightOp, YieldOp>(op))
      continue;
    if (isa<LinearOp, LMHeadOp>(op)) {
      if (anchor)
        return op.emitError() << "host codegen: a fused group has one GEMM anchor at most";
      anchor = &op;
      anchorIndex = compute.size();
    }
    compute.push_back(&op);
  }

  // The description, e.g. "rms_norm 576 + linear q4_1 960x576 + split + rope + rope".
  SmallVector<std::string> parts;
  for (Operation *op : compute) {
    std::string p = op->getName().stripDialect().str();
    if (auto l = dyn_cast<LinearOp>(op))
      p += llvm::formatv(" {0} {1}x{2}{3}{4}",
                         stringifyWeightFormat(l.getWeight().getType().getFormat()),
                         l.getWeight().getType().getShape()[0], l.getWeight().getType().getShape()[1],
                         l.getBias() ? " +bias" : "",
                         usesQ8Activations(l.getWeight().getType(), q8) ? " (x q8)" : "")
               .str();
    else if (auto h = dyn_cast<LMHeadOp>(op))
      p += llvm::formatv(" {0} {1}x{2}{3}", stringifyWeightFormat(h.getWeight().getType().getFormat()),
                         h.getWeight().getType().getShape()[0], h.getWeight().getType().getShape()[1],
                         usesQ8Activations(h.getWeight().getType(), q8) ? " (x q8)" : "")
               .str();
    else if (isNorm(op))
      p += " " + std::to_string(widthOf(op->getResult(0)));
    parts.push_back(p);
  }
  text.ops = llvm::join(parts, " + ");

  llvm::raw_string_ostream os(text.body);
  declareIO(os);
  if (!anchor) {
    for (Operation *op : compute)
      if (!ExprEmitter::isElementwise(op))
        return op->emitError() << "host codegen: a group without a GEMM may hold elementwise ops "
                                  "only";
    text.launch = llvm::formatv("T x {0} elements", widthOf(compute.front()->getResult(0))).str();
    return emitElementwiseGroup(compute, os);
  }

  ArrayRef<Operation *> all(compute);
  std::string x;
  if (failed(emitPrologue(all.take_front(anchorIndex), anchor->getOperand(0), os, x)))
    return failure();
  ArrayRef<Operation *> epi = all.drop_front(anchorIndex + 1);
  if (auto h = dyn_cast<LMHeadOp>(anchor)) {
    if (!epi.empty())
      return epi.front()->emitError() << "host codegen: nothing fuses after the LM head";
    WeightType t = h.getWeight().getType();
    std::string w = weight(h.getWeight());
    auto outs = yieldsOf.lookup(h.getLogits());
    if (outs.size() != 1)
      return h.emitError() << "host codegen: the LM head's logits must be yielded once";
    // Gemma 2's final soft-cap: a last argument where the op has one.
    std::string softcap =
        h.getSoftcap()
            ? llvm::formatv(", {0:e16}f", h.getSoftcap()->convertToDouble()).str()
            : std::string();
    os << llvm::formatv("  llmc::host::lm_head<{0}, {1}, {2}, float, {6}>(a->step, {3}, {4}, "
                        "out{5}{7});\n",
                        formatTag(t), t.getShape()[0], t.getShape()[1], x, w, outs.front(),
                        usesQ8Activations(t, q8) ? "true" : "false", softcap);
    text.launch = llvm::formatv("{0} vocabulary rows split across threads, x logits rows",
                                t.getShape()[0])
                      .str();
    return success();
  }
  return emitLinear(cast<LinearOp>(anchor), epi, x, os, text.launch);
}

} // namespace

LogicalResult emitFusedGroup(FusionOp group, const llvm::DenseMap<Value, int64_t> &bufferOf,
                             bool q8Activations, HostKernelText &text, HostBindings &bindings) {
  return FusedGroupEmitter(group, bufferOf, q8Activations, bindings).emit(text);
}

} // namespace llmc
