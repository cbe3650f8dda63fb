//===- CudaEmitter.cpp - CUDA C++ for the kernels of a model --------------===//
#include "CudaEmitter.h"
#include "CudaGroup.h"

#include "llmc/core/weight_format.h"
#include "Target/Common/AttentionGroup.h"
#include "Target/Common/PlannedStep.h"

#include "Target/Common/ExprEmitter.h"
#include "llmc/Dialect/LLM/IR/LLMOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc {
namespace cudagen {

int64_t widthOf(Value v) { return cast<RankedTensorType>(v.getType()).getDimSize(1); }

bool isActivation(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == 2 && isa<FloatType>(t.getElementType());
}

std::string number(double v) { return llvm::formatv("{0:e16}", v).str(); }

std::string cdiv(int64_t a, int64_t b) { return std::to_string((a + b - 1) / b); }

FailureOr<std::string> formatTag(Operation *user, WeightType w) {
  switch (w.getFormat()) {
  case WeightFormat::f32:
  case WeightFormat::f16:
  case WeightFormat::bf16:
  case WeightFormat::q8_0:
  case WeightFormat::q4_0:
  case WeightFormat::q4_1:
  case WeightFormat::q5_0:
  case WeightFormat::q5_1:
    return "fmt::" + stringifyWeightFormat(w.getFormat()).str();
  case WeightFormat::q2_k:
    return std::string("fmt::q2_K");
  case WeightFormat::q3_k:
    return std::string("fmt::q3_K");
  case WeightFormat::q4_k:
    return std::string("fmt::q4_K");
  case WeightFormat::q5_k:
    return std::string("fmt::q5_K");
  case WeightFormat::q6_k:
    return std::string("fmt::q6_K");
  case WeightFormat::i8:
  case WeightFormat::i4:
    return "fmt::" + stringifyWeightFormat(w.getFormat()).str() + "<" +
           std::to_string(w.getGroup()) + ">";
  default:
    return user->emitError() << "CUDA codegen has no decoder for "
                             << stringifyWeightFormat(w.getFormat())
                             << " weights yet (the host target runs them)";
  }
}

std::string entry(StringRef suffix, int threads, int minBlocks, StringRef body) {
  return llvm::formatv("extern \"C\" __global__ void __launch_bounds__({0}, {1})\n"
                       "{2}_{3}(const llmc_cuda_step_info si, const llmc_cuda_args a) {{\n"
                       "  grid_dependency_begin();\n"
                       "  const step_info &s = *reinterpret_cast<const step_info *>(&si);\n"
                       "{4}}\n",
                       threads, minBlocks, kSym, suffix, body)
      .str();
}

ManifestCudaLaunch launch(StringRef suffix, StringRef when, std::vector<std::string> grid,
                          int64_t block) {
  ManifestCudaLaunch l;
  l.symbol = (kSym + "_" + suffix).str();
  l.when = when.str();
  l.grid = std::move(grid);
  l.block = block;
  return l;
}

void storeYields(const GroupIO &io, Value v, StringRef expr, StringRef col, llvm::raw_ostream &os,
                 StringRef indent) {
  for (unsigned i : io.yieldsOf.lookup(v))
    os << indent
       << llvm::formatv("put(out{0} + static_cast<i64>(t) * {1} + {2}, {3});\n", i, widthOf(v),
                        col, expr);
}

std::string ropeFreqs(const GroupIO &io, RopeOp r) {
  RopeScalingAttr s = r.getScalingAttr();
  int kind = 0;
  if (s)
    kind = s.getKind() == RopeScalingKind::linear ? 1 : 2;
  std::string ff = "nullptr";
  if (r.getFreqFactors())
    ff = "static_cast<const float *>(" + io.weight(r.getFreqFactors()) + ")";
  return llvm::formatv("rope_freqs{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}",
                       number(r.getTheta().convertToDouble()), r.getHeadDimAttr().getInt(), kind,
                       number(s ? s.getFactor().getValueAsDouble() : 1.0),
                       number(s ? s.getLowFreqFactor().getValueAsDouble() : 1.0),
                       number(s ? s.getHighFreqFactor().getValueAsDouble() : 1.0),
                       s ? s.getOriginalMaxPosition() : 0, ff)
      .str();
}

} // namespace cudagen

namespace {

using namespace cudagen;

// Index of the first KV cache among @step's arguments (docs/architecture.md).
constexpr unsigned kFirstCacheArgument = 7;
// Flash-decoding (paged_attention_decode): a token's keys split in blocks of
// kSplitKeys up to kAttnBlocks / kv_heads splits (then the splits' share
// grows), warps per block.
constexpr int kSplitKeys = 64, kAttnBlocks = 256, kAttnWarps = 4;
// Threads of the RoPE and cache-write launches; their grids are (T, enough
// blocks for one rotation pair per thread).
constexpr int kRopeThreads = 128;
// Flash-attention prefill (paged_attention_prefill): warps per block, 16
// query rows each; one block per SM (about 170 registers at head_dim 128),
// whose 8 warps hide the loads behind the math, and each K/V tile serves
// 128 rows.
constexpr int kPrefillWarps = 8;

// The performance model's cost forms (ManifestCudaCost) of a launch: bytes
// and flops per token (T), per key attended (K); hot-loop trips summed over
// the launch's warps. Their derivations are beside each use.
struct CostTerms {
  double bytesT = 0, bytesK = 0, bytesC = 0, flopsK = 0, tensorK = 0, tripsT = 0, tripsK = 0;
  double peeledT = 0;  // of the trips, the peeled loop's, per token
};
void setCost(ManifestCudaLaunch &l, const CostTerms &c) {
  l.cost.bytes.t = c.bytesT;
  l.cost.bytes.k = c.bytesK;
  l.cost.bytes.c = c.bytesC;
  l.cost.flops.k = c.flopsK;
  l.cost.tensor_flops.k = c.tensorK;
  l.cost.trips.t = c.tripsT;
  l.cost.trips.k = c.tripsK;
  l.cost.peeled_trips.t = c.peeledT;
}
// Bytes of one activation element.
double actBytes(const CudaEmitOptions &o) { return o.activationType == "f32" ? 4.0 : 2.0; }

// The text of one kernel: its definitions (with kSym for the symbol prefix)
// and its launches.
struct KernelText {
  std::string defs;
  std::string ops;
  std::vector<ManifestCudaLaunch> launches;
  int64_t splitKeys = 0, heads = 0, headDim = 0;
  ManifestCudaGemm gemm; // symbols with kSym
};

struct Bindings {
  std::vector<int64_t> buffers;
  std::vector<std::string> weights;
  std::vector<int64_t> caches;
};

class GroupEmitter {
public:
  GroupEmitter(FusionOp group, const llvm::DenseMap<Value, int64_t> &bufferOf,
               const llvm::DenseSet<int64_t> &logitsRowBuffers, const CudaEmitOptions &options,
               Bindings &b)
      : bufferOf(bufferOf), logitsRowBuffers(logitsRowBuffers), b(b) {
    io.group = group;
    io.options = &options;
    io.weight = [this](Value v) { return bindWeight(v); };
  }

  LogicalResult emit(KernelText &text);

private:
  // Binds the group's activation inputs and results as buffers, in order,
  // and declares their `inN` / `outN` pointers.
  void declareIO();
  std::string bindWeight(Value inner);

  LogicalResult emitElementwise(ArrayRef<Operation *> ops, KernelText &text);
  LogicalResult emitEmbed(EmbedOp e, KernelText &text);
  LogicalResult emitRMSNorm(RMSNormOp n, KernelText &text);
  LogicalResult emitRope(RopeOp r, KernelText &text);
  LogicalResult emitMoE(MoEOp m, KernelText &text);
  LogicalResult emitAttention(PagedAttentionOp p, KernelText &text);

  GroupIO io;
  const llvm::DenseMap<Value, int64_t> &bufferOf;
  const llvm::DenseSet<int64_t> &logitsRowBuffers; // f32: see emitCudaKernels
  Bindings &b;
};

void GroupEmitter::declareIO() {
  FusionOp group = io.group;
  llvm::raw_string_ostream os(io.decls);
  for (BlockArgument arg : group.getBody().getArguments()) {
    if (!isActivation(arg) || arg.use_empty())
      continue;
    b.buffers.push_back(bufferOf.lookup(group.getInputs()[arg.getArgNumber()]));
    io.pointers.push_back({"const act *", io.in(arg)});
    os << llvm::formatv("  const act *{0} = static_cast<const act *>(a.buffers[{1}]);\n",
                        io.in(arg), b.buffers.size() - 1);
  }
  for (unsigned i = 0; i < group.getNumResults(); ++i) {
    b.buffers.push_back(bufferOf.lookup(group.getResult(i)));
    // Logits rows (the logits and a TP rank's slice of them) are f32 on
    // every target; other buffers hold activations.
    std::string type = logitsRowBuffers.contains(b.buffers.back()) ? "float" : "act";
    std::string name = "out" + std::to_string(i);
    io.pointers.push_back({type + " *", name});
    os << llvm::formatv("  {0} *{1} = static_cast<{0} *>(a.buffers[{2}]);\n", type, name,
                        b.buffers.size() - 1);
  }
  auto yield = cast<YieldOp>(group.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    io.yieldsOf[v].push_back(i);
}

std::string GroupEmitter::bindWeight(Value inner) {
  b.weights.push_back(inner.getDefiningOp<WeightOp>().getName().str());
  return llvm::formatv("a.weights[{0}]", b.weights.size() - 1).str();
}

LogicalResult GroupEmitter::emitElementwise(ArrayRef<Operation *> ops, KernelText &text) {
  int64_t w = widthOf(ops.front()->getResult(0));
  std::string body;
  llvm::raw_string_ostream os(body);
  os << io.decls << "  const int t = blockIdx.x;\n  if (t >= s.num_tokens) return;\n"
     << llvm::formatv("  for (int j = threadIdx.x; j < {0}; j += blockDim.x) {{\n", w);
  ExprEmitter ex;
  for (Operation *op : ops) {
    if (widthOf(op->getResult(0)) != w)
      return op->emitError() << "CUDA codegen: an elementwise group has one width";
    for (Value v : op->getOperands())
      if (isa<BlockArgument>(v) && !ex.isBound(v)) {
        std::string name = "x" + std::to_string(cast<BlockArgument>(v).getArgNumber());
        os << llvm::formatv("    const float {0} = to_float({1}[static_cast<i64>(t) * {2} + j]);\n",
                            name, io.in(v), w);
        ex.bind(v, name);
      }
    if (failed(ex.emit(op, os, "    ")))
      return failure();
    storeYields(io, op->getResult(0), ex.lookup(op->getResult(0)), "j", os, "    ");
  }
  os << "  }\n";
  text.defs = entry("ew", 256, 2, body);
  text.launches.push_back(launch("ew", "", {"T", "1", "1"}, 256));
  // Each of the group's inputs and results once per token; the loop over
  // the row's elements runs cdiv(w, 256) trips in each of 8 warps.
  CostTerms c;
  c.bytesT = double(w) * actBytes(*io.options) *
             double(io.group.getInputs().size() + io.group.getNumResults());
  c.tripsT = 8.0 * double((w + 255) / 256);
  setCost(text.launches.back(), c);
  return success();
}

LogicalResult GroupEmitter::emitEmbed(EmbedOp e, KernelText &text) {
  WeightType t = e.getTable().getType();
  FailureOr<std::string> f = formatTag(e, t);
  if (failed(f))
    return failure();
  std::string w = bindWeight(e.getTable());
  const std::string scale =
      e.getScale() ? ", " + number(e.getScale()->convertToDouble()) + "f" : std::string();
  text.defs = entry("embed", 128, 4,
                    io.decls + llvm::formatv("  embed<{0}, {1}, {2}, act>(s, {3}, out0{4});\n", *f,
                                             t.getShape()[0], t.getShape()[1], w, scale)
                                   .str());
  // A token's groups of 8 elements over enough blocks of 128 threads for
  // one group each, up to 8 blocks.
  const int64_t hidden = t.getShape()[1];
  const int64_t blocks = std::clamp<int64_t>((hidden / 8 + 127) / 128, 1, 8);
  text.launches.push_back(launch("embed", "", {"T", std::to_string(blocks), "1"}, 128));
  // A table row in, a hidden row out per token; the 4 warps of each block
  // loop over groups of 8 elements, 128 * blocks groups a trip.
  CostTerms c;
  c.bytesT = double(WeightByteSize(stringifyWeightFormat(t.getFormat()).str(), hidden,
                                   t.getGroup())) +
             double(hidden) * actBytes(*io.options);
  c.tripsT = 4.0 * double(blocks) * double((hidden / 8 + 128 * blocks - 1) / (128 * blocks));
  setCost(text.launches.back(), c);
  return success();
}

LogicalResult GroupEmitter::emitRMSNorm(RMSNormOp n, KernelText &text) {
  FailureOr<std::string> f = formatTag(n, n.getWeight().getType());
  if (failed(f))
    return failure();
  std::string w = bindWeight(n.getWeight());
  if (n.getHeadDim()) {
    const int64_t headDim = n.getSpan(), heads = widthOf(n.getInput()) / headDim;
    if (headDim % 8 != 0)
      return n.emitError() << "CUDA codegen: a per-head RMS norm needs head_dim a multiple of 8, "
                              "got "
                           << headDim;
    // One warp a head, four a block.
    const int64_t warps = std::min<int64_t>(heads, 4);
    text.defs = entry("rms_norm_heads", int(32 * warps), 4,
                      io.decls + llvm::formatv("  rms_norm_heads<{0}, {1}, {2}, act>(s.num_tokens, "
                                               "{3}, {4}, out0, {5}f);\n",
                                               heads, headDim, *f, io.in(n.getInput()), w,
                                               number(n.getEpsilon().convertToDouble()))
                                     .str());
    text.launches.push_back(launch("rms_norm_heads", "",
                                   {"T", std::to_string((heads + warps - 1) / warps), "1"},
                                   int(32 * warps)));
    CostTerms c;
    c.bytesT = 2.0 * double(heads * headDim) * actBytes(*io.options);
    c.bytesC = double(headDim) * 4.0;
    setCost(text.launches.back(), c);
    return success();
  }
  text.defs = entry("rms_norm", 128, 4,
                    io.decls + llvm::formatv("  rms_norm<{0}, {1}, act, 128>(s.num_tokens, {2}, "
                                             "{3}, out0, {4}f);\n",
                                             widthOf(n.getInput()), *f, io.in(n.getInput()), w,
                                             number(n.getEpsilon().convertToDouble()))
                                   .str());
  text.launches.push_back(launch("rms_norm", "", {"T", "1", "1"}, 128));
  // A row in and out per token, the weight once; no loop (unrolled).
  CostTerms c;
  const int64_t hidden = widthOf(n.getInput());
  c.bytesT = 2.0 * double(hidden) * actBytes(*io.options);
  c.bytesC = double(hidden) * 4.0;
  setCost(text.launches.back(), c);
  return success();
}

// Four launches over each token's slots through a per-token workspace in
// the runtime's scratch (llmc_cuda_moe.cuh), which the route launch's
// split_floats sizes (T blocks of it).
LogicalResult GroupEmitter::emitMoE(MoEOp m, KernelText &text) {
  const int64_t E = m.getExperts(), K = m.getTopK(), H = widthOf(m.getInput()),
                I = m.getExpertWidth();
  FailureOr<std::string> rf = formatTag(m, m.getRouter().getType()),
                         gf = formatTag(m, m.getGate().getType()),
                         uf = formatTag(m, m.getUp().getType()),
                         df = formatTag(m, m.getDown().getType());
  if (failed(rf) || failed(gf) || failed(uf) || failed(df))
    return failure();
  if (H % 8 != 0 || I % 8 != 0)
    return m.emitError() << "CUDA codegen: llm.moe needs hidden and expert widths multiples of 8";
  std::string x = io.in(m.getInput()), wr = bindWeight(m.getRouter()),
              wg = bindWeight(m.getGate()), wu = bindWeight(m.getUp()),
              wd = bindWeight(m.getDown());
  const std::string space = "a.scratch + 4";  // past the scratch header
  constexpr int64_t kWarps = 4;
  text.defs =
      entry("moe_route", 32 * kWarps, 4,
            io.decls + llvm::formatv("  moe_route<{0}, {1}, {2}, {3}, {4}, {5}, act>(s, {6}, {7}, "
                                     "{8});\n",
                                     *rf, E, K, H, I, m.getNormTopkProb() ? "true" : "false", x,
                                     wr, space)
                           .str()) +
      entry("moe_up", 32 * kWarps, 4,
            io.decls + llvm::formatv("  moe_up<{0}, {1}, {2}, {3}, {4}, act>(s, {5}, {6}, {7}, "
                                     "{8});\n",
                                     *gf, *uf, K, H, I, x, wg, wu, space)
                           .str()) +
      entry("moe_down", 32 * kWarps, 4,
            io.decls + llvm::formatv("  moe_down<{0}, {1}, {2}, {3}>(s, {4}, {5});\n", *df, K, H,
                                     I, wd, space)
                           .str()) +
      entry("moe_combine", 128, 4,
            io.decls + llvm::formatv("  moe_combine<{0}, {1}, {2}, act>(s, {3}, out0);\n", K, H,
                                     I, space)
                           .str());
  auto cdiv = [](int64_t a, int64_t b) { return std::to_string((a + b - 1) / b); };
  text.launches.push_back(launch("moe_route", "", {"T", "1", "1"}, 32 * kWarps));
  text.launches.back().split_floats = 2 * K + K * (I + H);  // a token's workspace
  text.launches.push_back(
      launch("moe_up", "", {"T", std::to_string(K), cdiv(I, kWarps)}, 32 * kWarps));
  text.launches.push_back(
      launch("moe_down", "", {"T", std::to_string(K), cdiv(H, kWarps)}, 32 * kWarps));
  text.launches.push_back(launch("moe_combine", "", {"T", "1", "1"}, 128));
  // Bytes per token: the router, and each slot's expert rows (gate, up and
  // down) read on their own.
  auto bytes = [](WeightType t, int64_t rows, int64_t cols) {
    return double(WeightByteSize(stringifyWeightFormat(t.getFormat()).str(), rows * cols,
                                 t.getGroup()));
  };
  CostTerms route, up, down;
  route.bytesT = bytes(m.getRouter().getType(), E, H);
  up.bytesT = double(K) * (bytes(m.getGate().getType(), I, H) + bytes(m.getUp().getType(), I, H));
  down.bytesT = double(K) * bytes(m.getDown().getType(), H, I);
  setCost(text.launches[text.launches.size() - 4], route);
  setCost(text.launches[text.launches.size() - 3], up);
  setCost(text.launches[text.launches.size() - 2], down);
  CostTerms combine;
  combine.bytesT = double(K * H) * 4.0 + double(H) * actBytes(*io.options);
  setCost(text.launches.back(), combine);
  return success();
}

LogicalResult GroupEmitter::emitRope(RopeOp r, KernelText &text) {
  const int64_t pairs = r.getHeadsAttr().getInt() * (r.getHeadDimAttr().getInt() / 2);
  text.defs = entry("rope", kRopeThreads, 4,
                    io.decls + llvm::formatv("  rope<{0}, {1}, rope_style::{2}, act>(s, {3}, out0, "
                                             "{4});\n",
                                             r.getHeadsAttr().getInt(), r.getHeadDimAttr().getInt(),
                                             stringifyRopeStyle(r.getStyle()), io.in(r.getInput()),
                                             ropeFreqs(io, r))
                                   .str());
  text.launches.push_back(launch(
      "rope", "", {"T", std::to_string(std::max<int64_t>(1, (pairs + kRopeThreads - 1) / kRopeThreads)), "1"},
      kRopeThreads));
  // Each pair read and written in place; one pair per thread, no loop.
  CostTerms c;
  c.bytesT = 4.0 * double(pairs) * actBytes(*io.options);
  setCost(text.launches.back(), c);
  return success();
}

LogicalResult GroupEmitter::emitAttention(PagedAttentionOp p, KernelText &text) {
  FusionOp group = io.group;
  auto cacheArg = dyn_cast<BlockArgument>(
      group.getInputs()[cast<BlockArgument>(p.getCache()).getArgNumber()]);
  if (!cacheArg || cacheArg.getArgNumber() < kFirstCacheArgument)
    return p.emitError() << "CUDA codegen expects the KV cache to be an argument of @step";
  b.caches.push_back(cacheArg.getArgNumber() - kFirstCacheArgument);
  int64_t H = p.getHeadsAttr().getInt(), KvH = p.getKvHeadsAttr().getInt(),
          D = p.getHeadDimAttr().getInt();
  if (!(D % 32 == 0 || (D < 32 && D % 8 == 0)) || D > 256 || H % KvH != 0)
    return p.emitError() << "CUDA codegen: attention needs head_dim 8, 16, 24 or a multiple of 32 "
                            "up to 256, and heads a multiple of kv_heads";
  int64_t window = p.getWindowAttr() ? p.getWindowAttr().getInt() : 0;
  // Soft-capped scores (Gemma 2): the kernels' last argument, absent when off.
  std::string softcapArg =
      p.getSoftcap() ? ", " + number(p.getSoftcap()->convertToDouble()) + "f" : std::string();
  std::string kc = "static_cast<act *>(a.caches[0])", vc = "static_cast<act *>(a.caches[1])";
  // With the RoPEs of the query and key in this group (llmc-place-rope put
  // them here), the cache write rotates both on the way: Q in place, K as it
  // goes into the cache.
  auto qRope = p.getQuery().getDefiningOp<RopeOp>();
  auto kRope = p.getKey().getDefiningOp<RopeOp>();
  std::string query = io.in(qRope ? qRope.getInput() : p.getQuery());
  std::string key = io.in(kRope ? kRope.getInput() : p.getKey());
  std::string value = io.in(p.getValue());
  std::string write = "kv_write";
  // The write zeroes the attention's ticket counters for the launch after it
  // (attn_scratch in llmc_cuda_attention.cuh).
  const std::string clear = llvm::formatv("  attn_counters_clear<{0}>(a.scratch);\n", H).str();
  std::string writeBody =
      clear + llvm::formatv("  kv_cache_write<{0}, {1}, act>(s, {2}, {3}, {4}, {5});\n", KvH, D, key,
                    value, kc, vc)
          .str();
  if (qRope && kRope) {
    write = "rope_kv_write";
    writeBody = clear + llvm::formatv("  rope_kv_cache_write<{0}, {1}, {2}, rope_style::{3}, act>(s, "
                              "const_cast<act *>({4}), {5}, {6}, {7}, {8}, {9}, {10});\n",
                              H, KvH, D, stringifyRopeStyle(qRope.getStyle()), query, key, value,
                              kc, vc, ropeFreqs(io, qRope), ropeFreqs(io, kRope))
                    .str();
  }
  // Splits: kSplitKeys keys each up to maxSplits, which the grid caps (the
  // runtime's `splits` is cdiv(longest context, kSplitKeys), or fewer once
  // the step's blocks fill the GPU); past the grid's splits the kernel
  // widens each split instead. maxSplits <= kSplitKeys keeps a token's
  // split count exact (docs/cuda.md). The last block of each kv head and
  // token merges the splits (no reduction launch).
  const int64_t maxSplits = std::clamp<int64_t>(kAttnBlocks / KvH, 4, kSplitKeys);
  // The kernels llmc-select-attention chose (`llmc.attention`), checked
  // against what they can run; without the attribute, the pass's rules.
  // What fits: with 16-bit activations, decode on tensor cores (the query
  // heads of a kv head as mma rows) for head_dim a multiple of 32 up to 128
  // and at most 16 heads per kv head (its registers, Q, O and 16 keys of K
  // and V in flight, allow 2 blocks per SM); the flash-attention prefill for
  // head_dim a multiple of 16 up to 128.
  bool decodeMma = io.options->activationType != "f32" && D % 32 == 0 && D <= 128 &&
                   H / KvH <= 16;
  bool prefill = io.options->activationType != "f32" && D % 16 == 0 && D <= 128;
  if (auto choice = group->getAttrOfType<DictionaryAttr>("llmc.attention")) {
    auto decodeKind = choice.getAs<StringAttr>("decode");
    auto prefillKind = choice.getAs<StringAttr>("prefill");
    auto warps = choice.getAs<IntegerAttr>("prefill_warps");
    if (!decodeKind || !prefillKind || (decodeKind != "mma" && decodeKind != "ffma") ||
        (prefillKind != "flash" && prefillKind != "none"))
      return group.emitError() << "CUDA codegen: llmc.attention needs decode = \"mma\" or "
                                  "\"ffma\" and prefill = \"flash\" or \"none\"";
    if (prefillKind == "flash" && (!warps || warps.getInt() != kPrefillWarps))
      return group.emitError() << "CUDA codegen: llmc.attention prefill_warps must be " << kPrefillWarps
                               << " (the kernel's block)";
    if ((decodeKind == "mma" && !decodeMma) || (prefillKind == "flash" && !prefill))
      return group.emitError() << "CUDA codegen: llmc.attention " << choice
                               << " does not fit activations " << io.options->activationType
                               << ", head_dim " << D << ", " << H << "/" << KvH << " heads";
    decodeMma = decodeKind == "mma";
    prefill = prefillKind == "flash";
  }
  text.defs =
      entry(write, kRopeThreads, 4, io.decls + writeBody) +
      entry("attn", 32 * kAttnWarps, D > 128 || decodeMma ? 2 : 3,
            io.decls + llvm::formatv("  paged_attention_decode{11}<{0}, {1}, {2}, act, {3}, {4}, {5}>(s, "
                                     "{6}, {7}, {8}, out0, attn_scratch_of<{0}, {2}>(a.scratch, "
                                     "s.num_tokens, gridDim.x), {9}f, {10}{12});\n",
                                     H, KvH, D, kSplitKeys, kAttnWarps, maxSplits, query, kc, vc,
                                     number(p.getScale().convertToDouble()), window,
                                     decodeMma ? "_mma" : "", softcapArg)
                           .str());
  // One rotation pair (Q and K heads) per thread; a plain cache write one
  // element of K and V.
  const int64_t writeItems = qRope && kRope ? (H + KvH) * (D / 2) : KvH * D;
  text.launches.push_back(launch(
      write, "",
      {"T", std::to_string(std::max<int64_t>(1, (writeItems + kRopeThreads - 1) / kRopeThreads)),
       "1"},
      kRopeThreads));
  // Long queries (prefill) take the flash-attention kernel where it runs.
  std::string shortQ;
  if (prefill) {
    shortQ = "Q<=" + std::to_string(io.options->attnPrefillMinQuery);
    text.defs += entry("attn_prefill", 32 * kPrefillWarps, 1,
                       io.decls + llvm::formatv("  paged_attention_prefill<{0}, {1}, {2}, act, {8}>(s, "
                                                "{3}, {4}, {5}, out0, {6}f, {7}{9});\n",
                                                H, KvH, D, query, kc, vc,
                                                number(p.getScale().convertToDouble()), window,
                                                kPrefillWarps, softcapArg)
                                      .str());
  }
  text.launches.push_back(launch("attn", shortQ,
                                 {"min(splits," + std::to_string(maxSplits) + ")",
                                  std::to_string(KvH), "T"},
                                 32 * kAttnWarps));
  text.launches.back().variant =
      llvm::formatv("decode={0} warps={1} split_keys={2} max_splits={3}",
                    decodeMma ? "mma" : "ffma", kAttnWarps, kSplitKeys, maxSplits)
          .str();
  if (prefill) {
    text.launches.push_back(launch("attn_prefill",
                                   "Q>" + std::to_string(io.options->attnPrefillMinQuery),
                                   {std::to_string(H), "cdiv(Q," + std::to_string(16 * kPrefillWarps) + ")", "S"},
                                   32 * kPrefillWarps));
    text.launches.back().variant =
        llvm::formatv("flash-attention rows={0} keys=64 warps={1}", 16 * kPrefillWarps, kPrefillWarps)
            .str();
  }
  const double e = actBytes(*io.options);
  for (ManifestCudaLaunch &l : text.launches) {
    CostTerms c;
    StringRef sym = l.symbol;
    if (sym.ends_with("_" + write)) {
      // Q (and K) read and written, K and V into the cache; no loop.
      c.bytesT = 2.0 * double(H + 2 * KvH) * double(D) * e;
    } else if (sym.ends_with("_attn")) {
      // Every key's K and V row per KV head; QK and PV: 4 * D flops per key
      // and query head. A warp's trip takes 32 keys of one KV head (16 on
      // tensor cores, whose 16 mma rows all count); each of the 4 warps of a
      // token's first split runs at least one. The merge of the splits
      // (counted at 2) writes and reads f32 partials of o, m, l.
      c.bytesT = 2.0 * double(H) * double(D) * e + 2.0 * 2.0 * double(H) * (double(D) + 2.0) * 4.0;
      c.bytesK = 2.0 * double(KvH) * double(D) * e;
      if (decodeMma) {
        c.tensorK = 4.0 * 16.0 * double(KvH) * double(D);
        c.tripsK = double(KvH) / 16.0;
      } else {
        c.flopsK = 4.0 * double(H) * double(D);
        c.tripsK = double(KvH) / 32.0;
      }
      c.tripsT = 4.0 * double(KvH);
    } else if (sym.ends_with("_attn_prefill")) {
      // Tensor-core QK and PV per key and query head; each query tile of a
      // head (16 rows per warp) reads the K/V of the keys it attends. A
      // trip is one 64-key tile in one warp: a warp's 16 rows attend K /
      // 1,024 of them, and every warp runs its block's tiles, up to the
      // last row's (causal from position 0: (BM - 16) / 2 more rows' worth
      // a warp on average, (BM - 16) / (2 * 64 * 16) tiles a token). The
      // masked tiles run in the peeled loop: a causal prefill from position
      // 0 masks the BM / 64 tiles at a query tile's diagonal, in each of
      // its warps.
      constexpr double BM = 16.0 * kPrefillWarps;
      c.bytesT = 2.0 * double(H) * double(D) * e;
      c.bytesK = 2.0 * double(H) * double(D) * e / BM;
      c.tensorK = 4.0 * double(H) * double(D);
      c.tripsK = double(H) / (64.0 * 16.0);
      c.tripsT = double(H) * (BM - 16.0) / (2.0 * 64.0 * 16.0);
      c.peeledT = double(H) * kPrefillWarps / 64.0;
    }
    setCost(l, c);
  }
  text.splitKeys = kSplitKeys;
  text.heads = H;
  text.headDim = D;
  return success();
}

LogicalResult GroupEmitter::emit(KernelText &text) {
  SmallVector<Operation *> compute;
  Operation *anchor = nullptr;
  size_t anchorIndex = 0;
  for (Operation &op : io.group.getBody().front()) {
    if (isa<WeightOp, YieldOp>(op))
      continue;
    if (isa<LinearOp, LMHeadOp>(op)) {
      if (anchor)
        return op.emitError() << "CUDA codegen: a fused group has one GEMM anchor at most";
      anchor = &op;
      anchorIndex = compute.size();
    }
    compute.push_back(&op);
  }
  if (compute.empty())
    return io.group.emitError() << "CUDA codegen: an empty group";
  // The description, e.g. "rms_norm 576 + linear q4_1 960x576 + split + rope + rope".
  SmallVector<std::string> parts;
  for (Operation *op : compute) {
    std::string p = op->getName().stripDialect().str();
    auto shape = [](Value w) {
      auto t = cast<WeightType>(w.getType());
      return llvm::formatv(" {0} {1}x{2}", stringifyWeightFormat(t.getFormat()), t.getShape()[0],
                           t.getShape()[1])
          .str();
    };
    if (auto l = dyn_cast<LinearOp>(op))
      p += shape(l.getWeight()) + (l.getBias() ? " +bias" : "");
    else if (auto h = dyn_cast<LMHeadOp>(op))
      p += shape(h.getWeight());
    else if (auto e = dyn_cast<EmbedOp>(op))
      p += shape(e.getTable());
    else if (auto n = dyn_cast<RMSNormOp>(op); n && n.getHeadDim())
      p += llvm::formatv(" {0}x{1} per head", widthOf(op->getResult(0)) / n.getSpan(), n.getSpan())
               .str();
    else if (isa<RMSNormOp>(op))
      p += " " + std::to_string(widthOf(op->getResult(0)));
    else if (auto a = dyn_cast<PagedAttentionOp>(op))
      p += llvm::formatv(" {0}/{1}x{2}", a.getHeadsAttr().getInt(), a.getKvHeadsAttr().getInt(),
                         a.getHeadDimAttr().getInt())
               .str();
    parts.push_back(p);
  }
  text.ops = llvm::join(parts, " + ");
  declareIO();

  if (anchor) {
    ArrayRef<Operation *> all(compute);
    return emitGemmGroup(io, anchor, all.take_front(anchorIndex), all.drop_front(anchorIndex + 1),
                         text.defs, text.launches, text.gemm);
  }
  Operation *op = compute.front();
  if (compute.size() == 1) {
    if (auto e = dyn_cast<EmbedOp>(op))
      return emitEmbed(e, text);
    if (auto n = dyn_cast<RMSNormOp>(op))
      return emitRMSNorm(n, text);
    if (auto r = dyn_cast<RopeOp>(op))
      return emitRope(r, text);
    if (auto m = dyn_cast<MoEOp>(op))
      return emitMoE(m, text);
    if (auto p = dyn_cast<PagedAttentionOp>(op))
      return emitAttention(p, text);
  }
  if (PagedAttentionOp p = attentionWithRopes(compute))
    return emitAttention(p, text);
  for (Operation *o : compute)
    if (!ExprEmitter::isElementwise(o))
      return o->emitError() << "CUDA codegen does not support " << o->getName()
                            << (compute.size() > 1 ? " in a group without a GEMM" : "") << " yet";
  return emitElementwise(compute, text);
}

const char *kPrologue = R"(// Generated by llmc: CUDA kernels of one model. Each kernel is one fusion
// group of the compiled @step; manifest.json's `cuda` section says which
// buffers, weights and caches each launch binds (in the order used below)
// and each launch's grid and block.
#include "cuda_abi.h"
#include "llmc_cuda_kernels.cuh"

using namespace llmc::cuda;
static_assert(sizeof(step_info) == sizeof(llmc_cuda_step_info), "step_info and the ABI differ");
template <class T> __device__ __forceinline__ void put(T *p, float v) { *p = from_float<T>(v); }
)";

std::string actTypeName(StringRef t) {
  if (t == "f16")
    return "__half";
  if (t == "bf16")
    return "__nv_bfloat16";
  return "float";
}

// The device sampler's entries (cuda_abi.h) over the step's logits, whose
// rows are the vocabulary wide (@step's result, [rows, vocab] f32).
LogicalResult emitSamplers(func::FuncOp step, CudaKernelPlan &plan) {
  auto logits = step.getNumResults() == 1
                    ? dyn_cast<RankedTensorType>(step.getFunctionType().getResult(0))
                    : RankedTensorType();
  if (!logits || logits.getRank() != 2 || ShapedType::isDynamic(logits.getDimSize(1)))
    return step.emitError() << "CUDA codegen: the device sampler needs @step's logits as "
                               "tensor<?xVOCABxf32>";
  constexpr int kThreads = 256;
  // 4 blocks an SM: without a bound ptxas for sm_80 holds the entry to 40
  // registers around the float division's out-of-line slow path and
  // spills; at 4 it takes 64, and nothing spills on sm_80 or sm_90.
  ManifestCudaSampler sampler{"sample", "llmc_sample", kThreads};
  plan.source += llvm::formatv(
      "// The device sampler over the logits (cuda_abi.h), one block a pick.\n"
      "extern \"C\" __global__ void __launch_bounds__({0}, 4)\n"
      "{1}(llmc_cuda_step_info s, llmc_cuda_args a) {{\n"
      "  sample_picks<{0}, LLMC_CUDA_MAX_PICK_MASKED, LLMC_CUDA_MAX_PICK_TOP_K,\n"
      "               LLMC_CUDA_MAX_PICK_LOGPROBS, LLMC_CUDA_MAX_PICK_PENALTIES>(\n"
      "      static_cast<float *>(a.buffers[0]), {2},\n"
      "      static_cast<const llmc_cuda_pick *>(a.buffers[1]),\n"
      "      static_cast<const int *>(a.buffers[2]), static_cast<int *>(a.buffers[3]),\n"
      "      static_cast<llmc_cuda_logprob *>(a.buffers[4]),\n"
      "      static_cast<const llmc_cuda_penalty *>(a.buffers[5]));\n"
      "}\n",
      kThreads, sampler.symbol, logits.getDimSize(1));
  plan.samplers.push_back(std::move(sampler));
  // The token feed of a step scheduled before the one before it ran: the
  // tokens that step picked, from its picked ids (a.buffers[3] above).
  constexpr int kFeedThreads = 128;
  ManifestCudaSampler feed{"feed", "llmc_feed", kFeedThreads};
  plan.source += llvm::formatv(
      "// The token feed (cuda_abi.h), one thread a feed.\n"
      "extern \"C\" __global__ void __launch_bounds__({0})\n"
      "{1}(llmc_cuda_step_info s, llmc_cuda_args a) {{\n"
      "  feed_tokens(static_cast<int *>(a.buffers[0]),\n"
      "              static_cast<const llmc_cuda_feed *>(a.buffers[1]), s.num_logits,\n"
      "              static_cast<const int *>(a.buffers[2]));\n"
      "}\n",
      kFeedThreads, feed.symbol);
  plan.samplers.push_back(std::move(feed));
  return success();
}

} // namespace

bool archsHaveWgmma(const std::vector<std::string> &archs) {
  return !archs.empty() &&
         llvm::all_of(archs, [](const std::string &a) { return a == "sm_90a"; });
}

FailureOr<CudaKernelPlan> emitCudaKernels(ModuleOp module, const CudaEmitOptions &options) {
  FailureOr<PlannedStep> planned = getPlannedStep(module, "CUDA codegen");
  if (failed(planned))
    return failure();
  if (options.activationType != "bf16" && options.activationType != "f16" &&
      options.activationType != "f32")
    return module.emitError() << "CUDA codegen: activations are bf16, f16 or f32, not "
                              << options.activationType;

  // Every buffer of logits rows is f32, not only the logits: a
  // tensor-parallel LM head writes its vocabulary slice into one of its own,
  // which the runtime all-gathers into the logits without converting, so
  // the slices are rounded no more than TP=1's logits are.
  auto table = module->getAttrOfType<ArrayAttr>("llm.buffers");
  if (!table)
    return module.emitError() << "CUDA codegen needs a planned @step (run the kernel stage)";
  llvm::DenseSet<int64_t> logitsRowBuffers;
  for (auto [i, entry] : llvm::enumerate(table.getAsRange<DictionaryAttr>())) {
    auto rows = entry.getAs<StringAttr>("rows");
    if (rows && rows.getValue() == "logits")
      logitsRowBuffers.insert(int64_t(i));
  }
  if (planned->logitsBuffer >= 0)
    logitsRowBuffers.insert(planned->logitsBuffer);

  CudaKernelPlan plan;
  plan.source = kPrologue;
  plan.source += "typedef " + actTypeName(options.activationType) + " act;\n\n";
  KernelTable kernels;
  auto emitGroup = [&](FusionOp group, const BufferOf &bufferOf) -> LogicalResult {
    KernelText text;
    Bindings bindings;
    if (failed(GroupEmitter(group, bufferOf, logitsRowBuffers, options, bindings).emit(text)))
      return failure();
    if (bindings.buffers.size() > 12 || bindings.weights.size() > 12)
      return group.emitError() << "CUDA codegen: more than 12 buffers or weights in one launch";
    std::string key = text.defs;
    for (const ManifestCudaLaunch &l : text.launches)
      key += "\n" + l.symbol + " " + l.when + " " + llvm::join(l.grid, ",") + " " +
             std::to_string(l.block) + " " + l.impl;
    key += llvm::formatv("\ngemm {0} {1} {2} {3} {4}", text.gemm.n, text.gemm.k,
                         text.gemm.columns, text.gemm.weight, text.gemm.rows)
               .str();
    auto [index, inserted] = kernels.intern(key);
    if (inserted) {
      std::string prefix = "llmc_cuda_k" + std::to_string(plan.kernels.size());
      ManifestCudaKernel k;
      k.name = group.getName().str();
      k.ops = text.ops;
      k.split_keys = text.splitKeys;
      k.heads = text.heads;
      k.head_dim = text.headDim;
      for (ManifestCudaLaunch &l : text.launches) {
        l.symbol.replace(0, kSym.size(), prefix);
        k.launches.push_back(std::move(l));
      }
      k.gemm = text.gemm;
      if (k.gemm.n > 0) {
        k.gemm.pre.replace(0, kSym.size(), prefix);
        k.gemm.epi.replace(0, kSym.size(), prefix);
        if (!k.gemm.deq.empty())
          k.gemm.deq.replace(0, kSym.size(), prefix);
      }
      std::string defs = text.defs;
      for (size_t pos = defs.find(kSym); pos != std::string::npos; pos = defs.find(kSym, pos))
        defs.replace(pos, kSym.size(), prefix);
      plan.source += "// " + text.ops + " (first used by " + group.getName().str() + ")\n";
      plan.source += defs + "\n";
      plan.kernels.push_back(std::move(k));
    }
    plan.launches.push_back({group.getName().str(), index, bindings.buffers, bindings.weights,
                             bindings.caches});
    return success();
  };
  // Collectives run between the kernels, in plan order (NCCL, in the runtime).
  auto emitCollective = [&](const KernelLaunch &launch) { plan.launches.push_back(launch); };
  if (failed(forEachPlannedGroup(planned->step, emitGroup, emitCollective, "CUDA codegen")))
    return failure();
  if (planned->logitsBuffer >= 0 && failed(emitSamplers(planned->step, plan)))
    return failure();
  return plan;
}

} // namespace llmc
