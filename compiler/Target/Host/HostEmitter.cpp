//===- HostEmitter.cpp - C++ for the host kernels of a model --------------===//
#include "HostEmitter.h"
#include "HostFusedGroup.h"
#include "Target/Common/AttentionGroup.h"
#include "Target/Common/PlannedStep.h"

#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {

// The host library's tag for a weight format; llmc's group-wise formats are
// templates on the group (fmt::i4<128>).
std::string formatTag(WeightType w) {
  std::string tag = "llmc::host::fmt::" + stringifyWeightFormat(w.getFormat()).str();
  if (w.getGroup() != 0)
    tag += "<" + std::to_string(w.getGroup()) + ">";
  return tag;
}

bool usesQ8Activations(WeightType w, bool q8Activations) {
  switch (w.getFormat()) {
  case WeightFormat::q8_0:
  case WeightFormat::q4_0:
  case WeightFormat::q4_1:
  case WeightFormat::q5_0:
  case WeightFormat::q5_1:
    return q8Activations;
  default:
    return false;
  }
}

namespace {

// Index of the first KV cache among @step's arguments (docs/architecture.md).
constexpr unsigned kFirstCacheArgument = 7;

std::string number(double v) { return llvm::formatv("{0:e16}", v).str(); }

using Bindings = HostBindings;

class GroupEmitter {
public:
  GroupEmitter(FusionOp group, const llvm::DenseMap<Value, int64_t> &bufferOf, bool q8)
      : group(group), bufferOf(bufferOf), q8(q8) {}

  // Writes the kernel body (the statements inside the function) and fills
  // the bindings; fails on an op the host templates do not cover.
  LogicalResult emit(std::string &body, std::string &ops, std::string &launch,
                     Bindings &bindings);

private:
  // The expression for a value used inside the group: a bound buffer;
  // writable for an input the kernel rotates in place (a RoPE's input that
  // only this group reads: llmc-place-rope checked it).
  std::string input(Value inner, Bindings &b, bool writable = false);
  std::string output(unsigned resultIndex, Bindings &b);
  std::string weight(Value inner, Bindings &b);
  // `llmc::host::rope<...>(...)` of `r` from `in` into `out`.
  std::string ropeCall(RopeOp r, const std::string &in, const std::string &out, Bindings &b);
  LogicalResult emitAttention(PagedAttentionOp p, std::string &body, std::string &ops,
                              std::string &launch, Bindings &b);

  FusionOp group;
  const llvm::DenseMap<Value, int64_t> &bufferOf;
  bool q8;  // HostEmitOptions::q8Activations
};

std::string GroupEmitter::input(Value inner, Bindings &b, bool writable) {
  auto arg = cast<BlockArgument>(inner);
  Value outer = group.getInputs()[arg.getArgNumber()];
  b.buffers.push_back(bufferOf.lookup(outer));
  return llvm::formatv("static_cast<{0}float *>(a->buffers[{1}])", writable ? "" : "const ",
                       b.buffers.size() - 1)
      .str();
}

std::string GroupEmitter::output(unsigned resultIndex, Bindings &b) {
  b.buffers.push_back(bufferOf.lookup(group.getResult(resultIndex)));
  return llvm::formatv("static_cast<float *>(a->buffers[{0}])", b.buffers.size() - 1).str();
}

std::string GroupEmitter::weight(Value inner, Bindings &b) {
  b.weights.push_back(inner.getDefiningOp<WeightOp>().getName().str());
  return llvm::formatv("a->weights[{0}]", b.weights.size() - 1).str();
}

std::string GroupEmitter::ropeCall(RopeOp r, const std::string &in, const std::string &out,
                                   Bindings &b) {
  std::string freqs = "nullptr";
  if (r.getFreqFactors())
    freqs = "static_cast<const float *>(" + weight(r.getFreqFactors(), b) + ")";
  RopeScalingAttr s = r.getScalingAttr();
  std::string kind = !s ? "none" : stringifyRopeScalingKind(s.getKind()).str();
  return llvm::formatv(
      "  llmc::host::rope<{0}, {1}, llmc::host::rope_style::{2}>(a->step, {3}, {4}, {5}, "
      "llmc::host::rope_scaling{{llmc::host::rope_scaling_kind::{6}, {7}, {8}, {9}, {10}}, "
      "{11});\n",
      r.getHeadsAttr().getInt(), r.getHeadDimAttr().getInt(), stringifyRopeStyle(r.getStyle()),
      in, out, number(r.getTheta().convertToDouble()), kind,
      number(s ? s.getFactor().getValueAsDouble() : 1.0),
      number(s ? s.getLowFreqFactor().getValueAsDouble() : 1.0),
      number(s ? s.getHighFreqFactor().getValueAsDouble() : 1.0),
      s ? s.getOriginalMaxPosition() : 0, freqs);
}

// The attention, after rotating its query and key in place when the group
// holds their RoPEs (the same float operations as a RoPE in a GEMM
// epilogue: one cos/sin table per position, rounded once).
LogicalResult GroupEmitter::emitAttention(PagedAttentionOp p, std::string &body,
                                          std::string &ops, std::string &launch, Bindings &b) {
  llvm::raw_string_ostream os(body);
  auto qRope = p.getQuery().getDefiningOp<RopeOp>();
  auto kRope = p.getKey().getDefiningOp<RopeOp>();
  std::string q, k;
  if (qRope && kRope) {
    q = input(qRope.getInput(), b, /*writable=*/true);
    k = input(kRope.getInput(), b, /*writable=*/true);
    os << ropeCall(qRope, q, q, b) << ropeCall(kRope, k, k, b);
  } else {
    q = input(p.getQuery(), b);
    k = input(p.getKey(), b);
  }
  std::string v = input(p.getValue(), b);
  std::string out = output(0, b);
  auto cacheArg = dyn_cast<BlockArgument>(
      group.getInputs()[cast<BlockArgument>(p.getCache()).getArgNumber()]);
  if (!cacheArg || cacheArg.getArgNumber() < kFirstCacheArgument)
    return p.emitError() << "host codegen expects the KV cache to be an argument of @step";
  b.caches.push_back(cacheArg.getArgNumber() - kFirstCacheArgument);
  int64_t window = p.getWindowAttr() ? p.getWindowAttr().getInt() : 0;
  // Gemma 2's soft-cap: a last argument where the op has one.
  std::string softcap =
      p.getSoftcap() ? ", " + number(p.getSoftcap()->convertToDouble()) + "f" : std::string();
  os << llvm::formatv(
      "  llmc::host::paged_attention<{0}, {1}, {2}>(a->step, {3}, {4}, {5}, "
      "static_cast<float *>(a->caches[0]), static_cast<float *>(a->caches[1]), {6}, {7}f, "
      "{8}{9});\n",
      p.getHeadsAttr().getInt(), p.getKvHeadsAttr().getInt(), p.getHeadDimAttr().getInt(), q, k,
      v, out, number(p.getScale().convertToDouble()), window, softcap);
  ops = llvm::formatv("{0}paged_attention {1}/{2}x{3}", qRope && kRope ? "rope + rope + " : "",
                      p.getHeadsAttr().getInt(), p.getKvHeadsAttr().getInt(),
                      p.getHeadDimAttr().getInt());
  launch = llvm::formatv("T tokens x {0} KV heads, online softmax over each context",
                         p.getKvHeadsAttr().getInt());
  return success();
}

LogicalResult GroupEmitter::emit(std::string &body, std::string &ops, std::string &launch,
                                 Bindings &b) {
  SmallVector<Operation *> compute;
  for (Operation &op : group.getBody().front())
    if (!isa<WeightOp, YieldOp>(op))
      compute.push_back(&op);
  if (PagedAttentionOp p = attentionWithRopes(compute))
    return emitAttention(p, body, ops, launch, b);
  if (compute.size() != 1) {
    HostKernelText text;
    if (failed(emitFusedGroup(group, bufferOf, q8, text, b)))
      return failure();
    body = std::move(text.body);
    ops = std::move(text.ops);
    launch = std::move(text.launch);
    return success();
  }
  Operation *op = compute.front();
  llvm::raw_string_ostream os(body);
  auto width = [](Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(1); };

  if (auto e = dyn_cast<EmbedOp>(op)) {
    WeightType t = e.getTable().getType();
    std::string w = weight(e.getTable(), b);
    std::string scale =
        e.getScale() ? ", " + number(e.getScale()->convertToDouble()) + "f" : std::string();
    os << llvm::formatv("  llmc::host::embed<{0}, {1}, {2}>(a->step, {3}, {4}{5});\n",
                        formatTag(t), t.getShape()[0], t.getShape()[1], w, output(0, b), scale);
    ops = llvm::formatv("embed {0} {1}x{2}", stringifyWeightFormat(t.getFormat()), t.getShape()[0],
                        t.getShape()[1]);
    launch = "T tokens, one row each";
  } else if (auto n = dyn_cast<RMSNormOp>(op); n && n.getHeadDim()) {
    const int64_t headDim = n.getSpan(), heads = width(n.getInput()) / headDim;
    std::string in = input(n.getInput(), b);
    std::string w = weight(n.getWeight(), b);
    os << llvm::formatv("  llmc::host::rms_norm_heads<{0}, {1}, {2}>(a->step, {3}, {4}, {5}, {6});\n",
                        heads, headDim, formatTag(n.getWeight().getType()), in, w, output(0, b),
                        number(n.getEpsilon().convertToDouble()));
    ops = llvm::formatv("rms_norm {0}x{1} per head", heads, headDim);
    launch = llvm::formatv("T tokens x {0} heads", heads);
  } else if (auto n = dyn_cast<RMSNormOp>(op)) {
    std::string in = input(n.getInput(), b);
    std::string w = weight(n.getWeight(), b);
    os << llvm::formatv("  llmc::host::rms_norm<{0}, {1}>(a->step, {2}, {3}, {4}, {5});\n",
                        width(n.getInput()), formatTag(n.getWeight().getType()), in, w,
                        output(0, b), number(n.getEpsilon().convertToDouble()));
    ops = llvm::formatv("rms_norm {0}", width(n.getInput()));
    launch = "T tokens, one row each";
  } else if (auto l = dyn_cast<LinearOp>(op)) {
    WeightType t = l.getWeight().getType();
    std::string in = input(l.getInput(), b);
    std::string w = weight(l.getWeight(), b);
    std::string bias = "nullptr", biasFmt = "llmc::host::fmt::f32";
    if (l.getBias()) {
      auto bt = cast<WeightType>(l.getBias().getType());
      if (bt.getFormat() != WeightFormat::f32 && bt.getFormat() != WeightFormat::f16 &&
          bt.getFormat() != WeightFormat::bf16)
        return l.emitError() << "host codegen takes f32, f16 or bf16 biases, not "
                             << stringifyWeightFormat(bt.getFormat());
      bias = weight(l.getBias(), b);
      biasFmt = formatTag(bt);
    }
    bool q8Here = usesQ8Activations(t, q8);
    os << llvm::formatv("  llmc::host::linear<{0}, {1}, {2}, {3}, {9}, float, "
                        "{8}>(a->step, {4}, {5}, {6}, {7});\n",
                        formatTag(t), t.getShape()[0], t.getShape()[1],
                        l.getBias() ? "true" : "false", in, w, bias, output(0, b),
                        q8Here ? "true" : "false", biasFmt);
    ops = llvm::formatv("linear {0} {1}x{2}{3}{4}", stringifyWeightFormat(t.getFormat()),
                        t.getShape()[0], t.getShape()[1], l.getBias() ? " +bias" : "",
                        q8Here ? " (x q8)" : "");
    launch = llvm::formatv("{0} output rows split across threads, x T tokens", t.getShape()[0]);
  } else if (auto h = dyn_cast<LMHeadOp>(op)) {
    WeightType t = h.getWeight().getType();
    std::string in = input(h.getInput(), b);
    std::string w = weight(h.getWeight(), b);
    bool q8Here = usesQ8Activations(t, q8);
    std::string softcap =
        h.getSoftcap() ? ", " + number(h.getSoftcap()->convertToDouble()) + "f" : std::string();
    os << llvm::formatv("  llmc::host::lm_head<{0}, {1}, {2}, float, {6}>(a->step, {3}, {4}, "
                        "{5}{7});\n",
                        formatTag(t), t.getShape()[0], t.getShape()[1], in, w, output(0, b),
                        q8Here ? "true" : "false", softcap);
    ops = llvm::formatv("lm_head {0} {1}x{2}{3}", stringifyWeightFormat(t.getFormat()),
                        t.getShape()[0], t.getShape()[1], q8Here ? " (x q8)" : "");
    launch = llvm::formatv("{0} vocabulary rows split across threads, x logits rows",
                           t.getShape()[0]);
  } else if (auto m = dyn_cast<MoEOp>(op)) {
    WeightType rt = m.getRouter().getType(), gt = m.getGate().getType(),
               ut = m.getUp().getType(), dt = m.getDown().getType();
    const int64_t E = m.getExperts(), H = width(m.getInput()), I = m.getExpertWidth();
    std::string in = input(m.getInput(), b);
    std::string wr = weight(m.getRouter(), b), wg = weight(m.getGate(), b),
                wu = weight(m.getUp(), b), wd = weight(m.getDown(), b);
    auto q8Of = [&](WeightType t) { return usesQ8Activations(t, q8) ? "true" : "false"; };
    os << llvm::formatv("  llmc::host::moe<{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, "
                        "{11}>(a->step, {12}, {13}, {14}, {15}, {16}, {17});\n",
                        formatTag(rt), formatTag(gt), formatTag(ut), formatTag(dt), E,
                        m.getTopK(), H, I, m.getNormTopkProb() ? "true" : "false", q8Of(gt),
                        q8Of(ut), q8Of(dt), in, wr, wg, wu, wd, output(0, b));
    ops = llvm::formatv("moe {0} experts top {1}, {2} {3}x{4}{5}", E, m.getTopK(),
                        stringifyWeightFormat(gt.getFormat()), I, H,
                        usesQ8Activations(gt, q8) ? " (x q8)" : "");
    launch = "T tokens routed; each chosen expert's rows split across threads";
  } else if (auto r = dyn_cast<RopeOp>(op)) {
    std::string in = input(r.getInput(), b);
    std::string out = output(0, b);
    os << ropeCall(r, in, out, b);
    ops = llvm::formatv("rope {0}x{1} {2}", r.getHeadsAttr().getInt(), r.getHeadDimAttr().getInt(),
                        stringifyRopeStyle(r.getStyle()));
    launch = llvm::formatv("T tokens x {0} heads", r.getHeadsAttr().getInt());
  } else if (auto p = dyn_cast<PagedAttentionOp>(op)) {
    return emitAttention(p, body, ops, launch, b);
  } else if (auto s = dyn_cast<SiLUOp>(op)) {
    std::string in = input(s.getInput(), b);
    os << llvm::formatv("  llmc::host::silu<{0}>(a->step, {1}, {2});\n", width(s.getInput()), in,
                        output(0, b));
    ops = llvm::formatv("silu {0}", width(s.getInput()));
    launch = llvm::formatv("T x {0} elements", width(s.getInput()));
  } else if (auto g = dyn_cast<GELUOp>(op)) {
    std::string in = input(g.getInput(), b);
    bool tanh = g.getApprox() == GeluApprox::tanh;
    os << llvm::formatv("  llmc::host::gelu<{0}, llmc::host::gelu_approx::{1}>(a->step, {2}, {3});\n",
                        width(g.getInput()), tanh ? "tanh" : "erf", in, output(0, b));
    ops = llvm::formatv("gelu {0}", width(g.getInput()));
    launch = llvm::formatv("T x {0} elements", width(g.getInput()));
  } else if (isa<MulOp, AddOp>(op)) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    std::string x = input(lhs, b), y = input(rhs, b);
    const char *fn = isa<MulOp>(op) ? "mul" : "add";
    os << llvm::formatv("  llmc::host::{0}<{1}>(a->step, {2}, {3}, {4});\n", fn, width(lhs), x, y,
                        output(0, b));
    ops = llvm::formatv("{0} {1}", fn, width(lhs));
    launch = llvm::formatv("T x {0} elements", width(lhs));
  } else {
    return op->emitError() << "host codegen does not support " << op->getName() << " yet";
  }
  return success();
}

const char *kPrologue = R"(// Generated by llmc: host kernels of one model. Each kernel is one fusion
// group of the compiled @step; the step plan in manifest.json says which
// buffers, weights and caches each launch binds (in the order used below).
#include "llmc_host_kernels.h"

extern "C" {
)";

} // namespace

FailureOr<HostKernelPlan> emitHostKernels(ModuleOp module, const HostEmitOptions &options) {
  FailureOr<PlannedStep> planned = getPlannedStep(module, "host codegen");
  if (failed(planned))
    return failure();
  auto table = module->getAttrOfType<ArrayAttr>("llm.buffers");
  if (!table)
    return module.emitError() << "host codegen needs a planned @step (run the kernel stage)";

  HostKernelPlan plan;
  plan.logitsBuffer = planned->logitsBuffer;
  for (auto [i, entry] : llvm::enumerate(table.getAsRange<DictionaryAttr>())) {
    ManifestBuffer buf;
    buf.name = "b" + std::to_string(i);
    buf.rows = entry.getAs<StringAttr>("rows").str();
    buf.row_bytes = entry.getAs<IntegerAttr>("row_bytes").getInt();
    Type elem = entry.getAs<TypeAttr>("dtype").getValue();
    std::string dtype;
    llvm::raw_string_ostream(dtype) << elem;
    buf.dtype = dtype;
    buf.row_elems = buf.row_bytes / ((elem.getIntOrFloatBitWidth() + 7) / 8);
    plan.buffers.push_back(buf);
  }

  KernelTable kernels;
  std::string source = kPrologue;
  auto emitGroup = [&](FusionOp group, const BufferOf &bufferOf) -> LogicalResult {
    std::string body, ops, launch;
    Bindings bindings;
    if (failed(GroupEmitter(group, bufferOf, options.q8Activations).emit(body, ops, launch, bindings)))
      return failure();
    auto [index, inserted] = kernels.intern(body);
    if (inserted) {
      ManifestKernel k;
      k.name = ops;
      k.target = "host";
      k.symbol = "llmc_host_k" + std::to_string(plan.kernels.size());
      k.ops = ops;
      k.launch = launch;
      source += "// " + ops + " (first used by " + group.getName().str() + ")\n";
      source += "void " + k.symbol + "(const llmc_host_args *a) {\n" + body + "}\n\n";
      plan.kernels.push_back(std::move(k));
    }
    plan.launches.push_back({group.getName().str(), index, bindings.buffers, bindings.weights,
                             bindings.caches});
    return success();
  };
  // Collectives run in the runtime, between kernels, in plan order.
  auto emitCollective = [&](const KernelLaunch &launch) { plan.launches.push_back(launch); };
  if (failed(forEachPlannedGroup(planned->step, emitGroup, emitCollective, "host codegen")))
    return failure();
  source += "}  // extern \"C\"\n";
  plan.source = std::move(source);
  return plan;
}

} // namespace llmc
