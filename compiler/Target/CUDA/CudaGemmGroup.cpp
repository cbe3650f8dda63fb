//===- CudaGemmGroup.cpp - CUDA for groups anchored on a GEMM -------------===//
//
// A group the fuse pass built around a linear (or the LM head) becomes:
//   - a prologue functor: nothing, or the RMS norm of the anchor's input
//     folded into the GEMM's activation loads (rms_norm_prologue);
//   - an epilogue functor: per output column n of token t, the bias, then
//     the statements of the group's elementwise ops (ExprEmitter) on the
//     column's split region, or on all regions at once when an op combines
//     them (gate/up: the weight rows of column n in every region are
//     multiplied in one pass, kRows = number of regions), and the stores of
//     the yielded values;
//   - two entries, a GEMV for decode and a tensor-core GEMM for prefill
//     (f32 activations: the GEMV only), chosen at run time by the token
//     count;
//   - with 16-bit activations, the two halves of a cuBLASLt GEMM the
//     runtime may run instead (gemm_operand: the prologue into the A
//     operand; gemm_epilogue: the epilogue functor over its f32 result),
//     the launches it would replace marked impl "llmc"; for weights not in
//     the activation type (quantized), a third entry that dequantizes the
//     weight into cuBLASLt's B operand (dequantize_weight), whose cost the
//     runtime pays at every such GEMM;
//   - for each RoPE on a region, an in-place rotation of its output after
//     the GEMM (the epilogue stores the region unrotated there). The RoPEs
//     of an attention's query and key are not here: llmc-place-rope moved
//     them into the attention's group, whose cache write rotates them.
//
//===----------------------------------------------------------------------===//
#include "CudaGroup.h"

#include <algorithm>

#include "Target/Common/EpilogueRegions.h"
#include "Target/Common/ExprEmitter.h"

#include "llmc/core/weight_format.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace llmc::llm;

namespace llmc::cudagen {
namespace {

constexpr int kGemvWarps = 4, kGemvMaxT = 4;

bool isKQuant(WeightFormat f) {
  return f == WeightFormat::q2_k || f == WeightFormat::q3_k || f == WeightFormat::q4_k ||
         f == WeightFormat::q5_k || f == WeightFormat::q6_k;
}

// The GEMV a group runs at decode, as llmc-select-gemv wrote it in the
// group's `llmc.gemv` attribute (absent: the float GEMV, 4 warps).
struct GemvVariant {
  std::string kind = "fp"; // "dp4a" | "fp"
  std::string dot;         // dp4a: q8::<chunk type> (llmc_cuda_dot_q8.cuh)
  int64_t chunkElems = 0;  // dp4a: weight elements per chunk
  int rows = 1;            // dp4a: weight rows per warp for single-row columns
  int warps = kGemvWarps;
  int maxTokens = kGemvMaxT;
};

// The dp4a chunk type of a format and its elements, or none.
std::pair<const char *, int64_t> dp4aChunk(WeightFormat f) {
  switch (f) {
  case WeightFormat::q4_0: return {"q8::q4_0", 128};
  case WeightFormat::q4_1: return {"q8::q4_1", 64};
  case WeightFormat::q5_0: return {"q8::q5_0", 128};
  case WeightFormat::q5_1: return {"q8::q5_1", 32};
  case WeightFormat::q8_0: return {"q8::q8_0", 128};
  case WeightFormat::q4_k: return {"q8::q4_K", 128};
  case WeightFormat::q5_k: return {"q8::q5_K", 128};
  case WeightFormat::q6_k: return {"q8::q6_K", 128};
  default: return {nullptr, 0};
  }
}

FailureOr<GemvVariant> gemvVariantOf(Operation *group, WeightFormat f, int64_t K) {
  GemvVariant v;
  auto dict = group->getAttrOfType<DictionaryAttr>("llmc.gemv");
  if (!dict)
    return v;
  auto str = [&](StringRef key) {
    auto a = dict.getAs<StringAttr>(key);
    return a ? a.getValue() : StringRef();
  };
  auto num = [&](StringRef key, int64_t fallback) {
    auto a = dict.getAs<IntegerAttr>(key);
    return a ? a.getInt() : fallback;
  };
  v.kind = str("kind").str();
  v.warps = static_cast<int>(num("warps", kGemvWarps));
  v.maxTokens = static_cast<int>(num("max_tokens", kGemvMaxT));
  if (v.kind == "fp")
    return v;
  auto [dot, elems] = dp4aChunk(f);
  if (v.kind != "dp4a" || !dot || K % elems != 0 || v.warps < 1 || v.warps > 32 ||
      v.maxTokens < 1)
    return group->emitError() << "CUDA codegen: llmc.gemv " << dict
                              << " does not apply to this group's weight (" << stringifyWeightFormat(f)
                              << ", K = " << K << ")";
  v.dot = dot;
  v.chunkElems = elems;
  v.rows = static_cast<int>(num("rows_per_warp", 1));
  return v;
}

// Bytes of a row gemv_q8_operand quantizes (q8_row_bytes in
// llmc_cuda_gemv.cuh): K int8 and K / 32 pairs of floats, padded to 16.
int64_t q8RowBytes(int64_t K) { return (K + K / 4 + 15) / 16 * 16; }

// One tile of the tensor-core GEMM (gemm_tile in llmc_cuda_gemm.cuh).
struct GemmTile {
  int64_t bm = 64, bn = 64, wm = 2, wn = 2, stages = 4;
  int64_t splits = 1; // blocks along K per output tile (split-K)
  // gemm_tile's Unroll: the main loop unrolled over the ring's stages (set
  // per entry by the emitter, where ptxas fits it without spills).
  bool unroll = false;
  // gemm_tile's Wgmma: the products on Hopper's warpgroup MMA (sm_90a),
  // `<tile>_mma = "wgmma"` in the attribute.
  bool wgmma = false;
  int threads() const { return int(32 * wm * wn); }
  // Trips of gemm_mma's loops per warp and block. Unrolled: whole rounds
  // of `stages` 32-element steps of the block's split of K while every
  // step of the round has its refill (kRounds in llmc_cuda_gemm.cuh), then
  // the last (stages - 1 to 2 stages - 2) steps: unrolled too in tiles of
  // up to 2 activation chunks a thread (kUnrollTail: no loop, their code
  // runs once), else one a trip in a rolled copy of the step after the
  // rounds (tailTrips: the peeled ones). Rolled: one step a trip. A split
  // of fewer than 2 stages - 1 steps has no round: all its steps are the
  // unrolled last ones, or the rolled loop's.
  int64_t steps(int64_t K) const { return K / 32 / splits; }
  bool unrollTail() const { return unroll && bm * 4 / threads() <= 2; }
  int64_t rounds(int64_t K) const {
    const int64_t n = steps(K);
    return !unroll || n < 2 * stages - 1 ? 0 : (n - 2 * stages + 1) / stages + 1;
  }
  int64_t tailTrips(int64_t K) const {
    return unrollTail() ? 0 : steps(K) - rounds(K) * stages;
  }
  int64_t trips(int64_t K) const { return rounds(K) + tailTrips(K); }
  std::string args() const { // gemm_tile's defaults (1 split, rolled, mma.sync) left out
    std::string a = llvm::formatv("{0}, {1}, {2}, {3}, {4}", bm, bn, wm, wn, stages).str();
    if (splits > 1 || unroll || wgmma)
      a += ", " + std::to_string(splits);
    if (unroll || wgmma)
      a += unroll ? ", true" : ", false";
    if (wgmma)
      a += ", true";
    return a;
  }
};
struct GemmTiles {
  GemmTile small, large{128, 128, 2, 4, 3};
  int64_t largeFrom = 129;
};

// The tiles llmc-select-gemm-tiles wrote in `llmc.gemm` (absent: its
// defaults for 132 SMs with 64-row small tiles), checked against what
// gemm_tile accepts so that a hand-edited attribute fails here, not in NVRTC.
FailureOr<GemmTiles> gemmTilesOf(Operation *group, int64_t K, bool wgmmaTarget) {
  GemmTiles t;
  auto dict = group->getAttrOfType<DictionaryAttr>("llmc.gemm");
  if (!dict)
    return t;
  auto tile = [&](StringRef key, GemmTile &out) -> LogicalResult {
    auto a = dict.getAs<DenseI64ArrayAttr>(key);
    if (!a)
      return success();
    ArrayRef<int64_t> v = a.asArrayRef();
    if (v.size() != 5 && v.size() != 6)
      return group->emitError() << "CUDA codegen: llmc.gemm " << key
                                << " must be [tokens, rows, warps_m, warps_n, stages(, splits)]";
    out = {v[0], v[1], v[2], v[3], v[4], v.size() == 6 ? v[5] : 1};
    const int64_t threads = 32 * out.wm * out.wn;
    const bool ok = out.wm >= 1 && out.wn >= 1 && threads <= 1024 && out.bm % (16 * out.wm) == 0 &&
                    out.bn % (16 * out.wn) == 0 && (out.bn / out.wn / 8) % 2 == 0 &&
                    out.bm * 4 % threads == 0 && out.bn * 4 % threads == 0 && out.stages >= 2 &&
                    out.stages * (out.bm + out.bn) * 64 <= 48 * 1024;
    if (!ok)
      return group->emitError() << "CUDA codegen: llmc.gemm " << key << " = [" << v
                                << "] is not a tile gemm_mma can run (warp tiles of whole 16 x "
                                   "16 blocks, whole 16-byte chunks per thread, 2+ stages "
                                   "within 48 KB)";
    if (out.splits < 1 || out.splits > 16 || (K / 32) % out.splits != 0)
      return group->emitError() << "CUDA codegen: llmc.gemm " << key << " splits " << out.splits
                                << " must be 1 to 16 and divide the " << K / 32
                                << " 32-element steps of K";
    const std::string mmaKey = (key + "_mma").str();
    if (auto mma = dict.getAs<StringAttr>(mmaKey)) {
      if (mma.getValue() != "wgmma" && mma.getValue() != "mma.sync")
        return group->emitError() << "CUDA codegen: llmc.gemm " << mmaKey << " is '"
                                  << mma.getValue() << "', not wgmma or mma.sync";
      out.wgmma = mma.getValue() == "wgmma";
    }
    if (out.wgmma && !wgmmaTarget)
      return group->emitError() << "CUDA codegen: llmc.gemm " << mmaKey
                                 << " = wgmma needs every CUDA target to be sm_90a";
    if (out.wgmma && (out.wn != 1 || out.wm % 4 != 0 ||
                      (out.bm != 16 * out.wm && out.bm != 32 * out.wm) ||
                      (out.bn != 64 && out.bn != 128)))
      return group->emitError() << "CUDA codegen: llmc.gemm " << key << " = [" << v
                                << "] is not a wgmma tile (warpgroups of one or two 64-row "
                                   "token blocks: warps_m a multiple of 4, tokens 16 or 32 "
                                   "per warp, warps_n 1; 64 or 128 rows)";
    return success();
  };
  if (failed(tile("small", t.small)) || failed(tile("large", t.large)))
    return failure();
  if (auto f = dict.getAs<IntegerAttr>("large_from"))
    t.largeFrom = f.getInt();
  if (t.largeFrom < 2)
    return group->emitError() << "CUDA codegen: llmc.gemm large_from must be at least 2";
  return t;
}

// The performance model's view of a GEMV launch over `columns` output
// columns of `paired` weight rows each: the weights are read once per pass
// of maxT tokens (rows var: T, or L for an LM head), the activation rows and
// the outputs once; `warpTrips` is the hot loop's trips over all warps in
// one pass.
void gemvCost(ManifestCudaLaunch &l, WeightType wt, int64_t columns, int64_t K, int paired,
              StringRef var, int maxT, double warpTrips) {
  const double weightBytes =
      double(columns) * paired *
      double(WeightByteSize(stringifyWeightFormat(wt.getFormat()).str(), K, wt.getGroup()));
  ManifestCudaCost &c = l.cost;
  c.tokens_per_pass = maxT;
  c.passes_of_logits = var == "L";
  c.bytes.p = weightBytes;
  // Activations in (counted at 2 bytes) and one output per column (at 4).
  const double rowBytes = 2.0 * double(K) + 4.0 * double(columns);
  (var == "L" ? c.bytes.l : c.bytes.t) = rowBytes;
  (var == "L" ? c.flops.l : c.flops.t) = 2.0 * double(K) * double(columns) * paired;
  c.trips.p = warpTrips;
}

class GemmGroupEmitter {
public:
  GemmGroupEmitter(const GroupIO &io, std::string &defs, std::vector<ManifestCudaLaunch> &launches,
                   ManifestCudaGemm &gemm)
      : io(io), defs(defs), launches(launches), gemm(gemm) {}

  LogicalResult emit(Operation *anchor, ArrayRef<Operation *> pro, ArrayRef<Operation *> epi);

private:
  // Sets `x` (the anchor's activation rows) and `proInit` (the prologue
  // functor expression).
  LogicalResult prologue(Operation *anchor, ArrayRef<Operation *> pro, std::string &x,
                         std::string &proInit);
  // Writes the epilogue functor `<kSym>_epi` for a linear; sets `rows`.
  LogicalResult linearEpilogue(LinearOp l, ArrayRef<Operation *> epi, int &rows,
                               int64_t &columns);
  // The functor's members (every bound pointer, and the bias) and their
  // initializer in the entries.
  std::string members() const;
  std::string init(StringRef bias) const;
  // The GEMV and GEMM entries over `columns` output columns and their launches.
  LogicalResult entries(StringRef fmt, WeightType wt, int64_t columns, int64_t K, int rows,
               StringRef tokens,
               StringRef xRows, StringRef x, StringRef w, StringRef proInit, StringRef epiInit);
  // The cuBLASLt halves (see the file comment) for a weight of `n` rows.
  void cublasLtEntries(int64_t n, int64_t columns, int64_t K, StringRef tokens, StringRef xRows,
                       StringRef x, StringRef w, StringRef proInit, StringRef epiInit,
                       StringRef deqFmt);
  // `<kSym>_operand`: the activation rows with the prologue applied, into
  // args.gemm_a (for the tensor-core GEMM and cuBLASLt alike); defined once.
  void operandEntry(int64_t K, StringRef tokens, StringRef xRows, StringRef x, StringRef proInit);

  const GroupIO &io;
  std::string &defs;
  std::vector<ManifestCudaLaunch> &launches;
  ManifestCudaGemm &gemm;
  bool operandDefined = false;
};

LogicalResult GemmGroupEmitter::prologue(Operation *anchor, ArrayRef<Operation *> pro,
                                         std::string &x, std::string &proInit) {
  Value input = anchor->getOperand(0);
  if (pro.empty()) {
    if (!isa<BlockArgument>(input))
      return io.group.emitError() << "CUDA codegen: the anchor's input must be a group input";
    x = io.in(input);
    proInit = "no_prologue{}";
    return success();
  }
  auto norm = dyn_cast<RMSNormOp>(pro.back());
  if (norm && norm.getHeadDim())
    return norm.emitError() << "CUDA codegen: a per-head RMS norm cannot be a GEMM's prologue";
  if (pro.size() != 1 || !norm)
    return pro.front()->emitError()
           << "CUDA codegen folds only an RMS norm into a GEMM's prologue (not "
           << pro.front()->getName() << "; compile with --no-fuse to run it on its own)";
  if (norm.getResult() != input || !isa<BlockArgument>(norm.getInput()) ||
      !io.yieldsOf.lookup(norm.getResult()).empty())
    return norm.emitError() << "CUDA codegen: a prologue norm must read a group input and feed "
                               "only the GEMM";
  FailureOr<std::string> f = formatTag(norm, norm.getWeight().getType());
  if (failed(f))
    return failure();
  x = io.in(norm.getInput());
  proInit = llvm::formatv("rms_norm_prologue<{0}, {1}>{{{2}, {3}f}", widthOf(input), *f,
                          io.weight(norm.getWeight()), number(norm.getEpsilon().convertToDouble()))
                .str();
  return success();
}

std::string GemmGroupEmitter::members() const {
  std::string m;
  for (const auto &[type, name] : io.pointers)
    m += "  " + type + name + ";\n";
  return m + "  const void *bias;\n";
}

std::string GemmGroupEmitter::init(StringRef bias) const {
  SmallVector<std::string> names;
  for (const auto &p : io.pointers)
    names.push_back(p.second);
  names.push_back(bias.str());
  return "{" + llvm::join(names, ", ") + "}";
}

LogicalResult GemmGroupEmitter::linearEpilogue(LinearOp l, ArrayRef<Operation *> epi, int &rows,
                                               int64_t &columns) {
  int64_t N = l.getWeight().getType().getShape()[0];
  FailureOr<EpilogueRegions> analysis = analyzeEpilogue(l, epi, io.yieldsOf, "CUDA codegen");
  if (failed(analysis))
    return failure();
  const EpilogueRegions &e = *analysis;
  const auto &regions = e.regions;
  const auto &regionValues = e.values;
  const auto &elementwise = e.elementwise;
  const bool paired = e.paired;
  auto regionOf = [&](Value v) { return e.regionOf.lookup(v); };
  // RoPE runs after the GEMM, in place on the region's output: its result
  // must be yielded and nothing in the group may read it.
  for (const EpilogueRegions::Region &r : regions)
    for (RopeOp rope : r.ropes)
      if (!llvm::all_of(rope->getUsers(), [](Operation *u) { return isa<YieldOp>(u); }) ||
          io.yieldsOf.lookup(rope.getResult()).empty())
        return rope.emitError() << "CUDA codegen: a fused RoPE must be yielded and unused in "
                                   "the group";
  if (paired && 64 % regions.size() != 0)
    return io.group.emitError() << "CUDA codegen: at most 4 combined regions (1, 2 or 4)";
  rows = paired ? int(regions.size()) : 1;
  columns = paired ? regions.front().width : N;

  std::string biasFmt;
  if (l.getBias()) {
    FailureOr<std::string> f = formatTag(l, cast<WeightType>(l.getBias().getType()));
    if (failed(f))
      return failure();
    biasFmt = *f;
  }
  std::string body;
  llvm::raw_string_ostream os(body);
  // Statements of one region (or of all, paired) with its values bound.
  auto statements = [&](std::optional<int64_t> only, StringRef indent) -> LogicalResult {
    ExprEmitter ex;
    for (auto [i, r] : llvm::enumerate(regions)) {
      if (only && int64_t(i) != *only)
        continue;
      std::string name = "r" + std::to_string(i);
      std::string bias = l.getBias() ? llvm::formatv(" + {0}::load1(static_cast<const u8 *>(bias), "
                                                     "{1} + j)",
                                                     biasFmt, r.offset)
                                           .str()
                                     : "";
      os << indent
         << llvm::formatv("const float {0} = acc[{1}]{2};\n", name, paired ? i : 0, bias);
      ex.bind(regionValues[i], name);
      storeYields(io, regionValues[i], name, "j", os, indent);
      for (RopeOp rope : r.ropes) // rotated in place by the rope launch
        storeYields(io, rope.getResult(), name, "j", os, indent);
    }
    for (Operation *op : elementwise) {
      if (only && regionOf(op->getResult(0)) != *only)
        continue;
      for (Value v : op->getOperands())
        if (isa<BlockArgument>(v) && !ex.isBound(v)) {
          std::string name = "x" + std::to_string(cast<BlockArgument>(v).getArgNumber());
          os << indent
             << llvm::formatv("const float {0} = to_float({1}[static_cast<i64>(t) * {2} + j]);\n",
                              name, io.in(v), widthOf(v));
          ex.bind(v, name);
        }
      if (failed(ex.emit(op, os, indent)))
        return failure();
      storeYields(io, op->getResult(0), ex.lookup(op->getResult(0)), "j", os, indent);
    }
    return success();
  };
  if (paired) {
    os << "    const int j = n;\n";
    if (failed(statements(std::nullopt, "    ")))
      return failure();
  } else {
    for (auto [i, r] : llvm::enumerate(regions)) {
      os << llvm::formatv("    {0}if (n < {1}) {{\n      const int j = n - {2};\n",
                          i ? "else " : "", r.offset + r.width, r.offset);
      if (failed(statements(int64_t(i), "      ")))
        return failure();
      os << "    }\n";
    }
  }
  std::string rowFn = paired ? llvm::formatv("return n + p * {0};", columns).str()
                             : std::string("(void)p; return n;");
  defs += llvm::formatv("struct {0}_epi {{\n  static constexpr int kRows = {1};\n{2}"
                        "  __device__ static int row(int n, int p) {{ {3} }\n"
                        "  __device__ void operator()(int t, int n, const float (&acc)[{1}]) const "
                        "{{\n{4}  }\n};\n",
                        kSym, rows, members(), rowFn, body)
              .str();

  // RoPE launches, after the GEMM.
  int index = 0;
  for (const EpilogueRegions::Region &r : regions)
    for (RopeOp rope : r.ropes) {
      std::string suffix = "rope" + std::to_string(index++);
      std::string body = io.decls;
      std::string freqs = ropeFreqs(io, rope);
      for (unsigned out : io.yieldsOf.lookup(rope.getResult()))
        body += llvm::formatv("  rope<{0}, {1}, rope_style::{2}, act>(s, out{3}, out{3}, {4});\n",
                              rope.getHeadsAttr().getInt(), rope.getHeadDimAttr().getInt(),
                              stringifyRopeStyle(rope.getStyle()), out, freqs)
                    .str();
      defs += entry(suffix, 128, 4, body);
      launches.push_back(launch(suffix, "", {"T", "1", "1"}, 128));
    }
  return success();
}

LogicalResult GemmGroupEmitter::entries(StringRef fmt, WeightType wt, int64_t columns, int64_t K,
                               int rows, StringRef tokens, StringRef xRows, StringRef x, StringRef w,
                               StringRef proInit, StringRef epiInit) {
  int gemvMax = io.options->gemvMaxTokens;
  bool mma = io.options->activationType != "f32";
  std::string var = tokens == "s.num_logits" ? "L" : "T";
  const std::string epiDecl = llvm::formatv("  const {0}_epi epi{1};\n", kSym, epiInit).str();
  std::string common =
      io.decls + llvm::formatv("  const auto pro = {0};\n", proInit).str() + epiDecl;
  FailureOr<GemvVariant> variant = gemvVariantOf(io.group, wt.getFormat(), K);
  if (failed(variant))
    return failure();
  const GemvVariant &v = *variant;
  if (auto dict = io.group->getAttrOfType<DictionaryAttr>("llmc.gemv"))
    if (auto g = dict.getAs<IntegerAttr>("max_tokens_gemv"))
      gemvMax = static_cast<int>(g.getInt());
  size_t numGemv = 1; // GEMV launches, ahead of the GEMM's
  if (v.kind == "dp4a") {
    // One entry for a single token (batch-1 decode: no per-token branches in
    // its loop) and one for 2..gemvMax tokens, MaxT per pass.
    const int warps = v.warps;
    // A gate/up pair holds both rows of its columns.
    const int pairRows = v.rows * rows;
    SmallVector<ManifestCudaLaunch, 2> gemvs;
    // maxT tokens per pass over `wrows` weight rows per warp (the several-
    // token entry holds half the rows: its accumulators need the registers).
    // `staged`: the rows come quantized from the `xq8` launch before it (in
    // args.gemm_a) instead of being quantized in every block.
    auto q8Entry = [&](StringRef suffix, StringRef when, int maxT, int wrows, bool staged) {
      const std::string call =
          staged ? llvm::formatv("  gemv_q8_staged<{0}, {1}, {2}, {3}, {4}, {5}>({6}, a.gemm_a, "
                                 "{7}, epi);\n",
                                 v.dot, columns, K, maxT, warps, wrows, tokens, w)
                       .str()
                 : llvm::formatv("  gemv_q8<{0}, {1}, {2}, {3}, {4}, {5}, act>({6}, {7}, {8}, "
                                 "{9}, pro, epi);\n",
                                 v.dot, columns, K, maxT, warps, wrows, tokens, xRows, x, w)
                       .str();
      defs += entry(suffix, 32 * warps, 512 / (32 * warps), // at most 128 registers
                    (staged ? io.decls + epiDecl : common) + call); // staged: no prologue here
      const int perBlock = warps * wrows / rows;
      gemvs.push_back(launch(suffix, when, {cdiv(columns, perBlock), "1", "1"}, 32 * warps));
      gemvs.back().variant = llvm::formatv("gemv=dp4a rows_per_warp={0} warps={1} max_tokens={2}",
                                           wrows, warps, maxT)
                                 .str();
      const int64_t trips = (K / v.chunkElems + 31) / 32; // per warp and pass
      gemvCost(gemvs.back(), wt, columns, K, rows, var, maxT,
               double((columns + perBlock - 1) / perBlock) * warps * double(trips));
    };
    q8Entry("gemv1", var + "<=1", 1, pairRows, false);
    if (!mma || gemvMax > 1) {
      std::string when = var + ">1";
      if (mma)
        when += "&&" + var + "<=" + std::to_string(gemvMax);
      // Several tokens: their rows quantized once, by a launch of their own
      // (one block a row) into args.gemm_a, where every block of the GEMV
      // quantized all of them (over half its instructions at 4 tokens).
      // With 16-bit activations (args.gemm_a exists) and 16-byte rows of
      // scales (K % 64).
      const bool staged = mma && K % 64 == 0;
      if (staged) {
        // As many threads as the GEMV's blocks: the RMS norm's sum of
        // squares then adds in gemv1's order, so a token's quantized row is
        // the same bits at 1 and at 2..4 tokens a step.
        const int threads = 32 * warps;
        defs += entry("xq8", threads, 1,
                      io.decls + llvm::formatv("  const auto pro = {0};\n  gemv_q8_operand<{1}, "
                                               "{2}, act>({3}, {4}, {5}, pro, a.gemm_a);\n",
                                               proInit, K, threads, tokens, xRows, x)
                                     .str());
        gemvs.push_back(launch("xq8", when, {var, "1", "1"}, threads));
        ManifestCudaLaunch &q = gemvs.back();
        q.variant = "the prologue and int8 quantization, once per row, into gemm_a";
        // A row in (2 bytes an element) and out (q8RowBytes); the norm's
        // weight (f32) from L2. No loop: the row's groups are unrolled.
        (var == "L" ? q.cost.bytes.l : q.cost.bytes.t) = 2.0 * double(K) + double(q8RowBytes(K));
        q.cost.bytes.c = 4.0 * double(K);
        (var == "L" ? q.cost.flops.l : q.cost.flops.t) = 6.0 * double(K);
        // args.gemm_a holds [rows, q8RowBytes(K)] bytes: operand_k counts
        // activation elements (2 bytes).
        gemm.operand_k = std::max<int64_t>(gemm.operand_k, (q8RowBytes(K) + 1) / 2);
        gemm.operand_rows = var;
      }
      q8Entry("gemv", when, v.maxTokens, std::max(rows, pairRows / 2), staged);
    }
    launches.insert(launches.begin(), gemvs.begin(), gemvs.end());
    numGemv = gemvs.size();
  } else {
    // As dp4a: a single-token entry (one token slot in its loop, which a
    // batch-1 decode runs) and one for 2..gemvMax tokens.
    SmallVector<ManifestCudaLaunch, 2> gemvs;
    auto fpEntry = [&](StringRef suffix, StringRef when, int maxT) {
      defs += entry(suffix, 32 * v.warps, 4,
                    common + llvm::formatv("  gemv<{0}, {1}, {2}, {3}, {4}, act>({5}, {6}, {7}, "
                                           "{8}, pro, epi);\n",
                                           fmt, columns, K, maxT, v.warps, tokens, xRows, x, w)
                                 .str());
      gemvs.push_back(launch(suffix, when, {cdiv(columns, v.warps), "1", "1"}, 32 * v.warps));
      gemvs.back().variant =
          llvm::formatv("gemv=fp warps={0} max_tokens={1}", v.warps, maxT).str();
      // The loop over groups of 8 elements is unrolled by 4: one SASS trip
      // per 4 of a lane's groups.
      const int64_t trips = std::max<int64_t>(1, (K / 8 + 127) / 128);
      gemvCost(gemvs.back(), wt, columns, K, rows, var, maxT,
               double((columns + v.warps - 1) / v.warps) * v.warps * double(trips));
    };
    fpEntry("gemv1", var + "<=1", 1);
    std::string when = var + ">1";
    if (mma)
      when += "&&" + var + "<=" + std::to_string(gemvMax);
    if (!mma || gemvMax > 1)
      fpEntry("gemv", when, v.maxTokens);
    launches.insert(launches.begin(), gemvs.begin(), gemvs.end());
    numGemv = gemvs.size();
  }
  if (!mma)
    return success();
  // The tensor-core GEMM reads plain activation rows: a fused prologue (the
  // RMS norm) runs first, once per row, into args.gemm_a, rather than in
  // every block that reads the row.
  std::string gemmX = x.str(), gemmRows = xRows.str();
  const std::string over = var + ">" + std::to_string(gemvMax);
  size_t at = numGemv;
  if (proInit != "no_prologue{}") {
    operandEntry(K, tokens, xRows, x, proInit);
    launches.insert(launches.begin() + at++, launch("operand", over, {var, "1", "1"}, 128));
    ManifestCudaLaunch &o = launches[at - 1];
    o.variant = "the prologue, once per row, into gemm_a";
    // A row in and out (2 bytes each; the norm's weight, f32, stays in
    // L2), two passes of 4 warps over its K / 8 groups (the scale, then
    // the scaled copy; the copy is the hot loop).
    const double perRow = 2.0 * 2.0 * double(K);
    (var == "L" ? o.cost.bytes.l : o.cost.bytes.t) = perRow;
    o.cost.bytes.c = 4.0 * double(K);
    (var == "L" ? o.cost.flops.l : o.cost.flops.t) = 4.0 * double(K);
    (var == "L" ? o.cost.trips.l : o.cost.trips.t) = 4.0 * double((K / 8 + 127) / 128);
    gemm.operand_k = std::max(gemm.operand_k, K);
    gemm.operand_rows = var;
    gemmX = "static_cast<const act *>(a.gemm_a)";
    gemmRows = "nullptr";
  }
  FailureOr<GemmTiles> tiles = gemmTilesOf(io.group, K, io.options->wgmma);
  if (failed(tiles))
    return failure();
  // Weights gemm_mma copies (the activation type) or decodes a whole step
  // of a row at once (mmaw::step_decoder: q4_0 rows of K % 64, q4_K of
  // K % 256): its loop needs the fewest registers.
  const StringRef actType = io.options->activationType;
  const WeightFormat wf = wt.getFormat();
  const bool leanDecode = (wf == WeightFormat::bf16 && actType == "bf16") ||
                          (wf == WeightFormat::f16 && actType == "f16") ||
                          (wf == WeightFormat::q4_0 && K % 64 == 0) ||
                          (wf == WeightFormat::q4_k && K % 256 == 0);

  // One entry per tile: `small` up to large_from - 1 tokens, `large` above.
  auto gemmEntry = [&](StringRef suffix, std::string when, GemmTile t) {
    // Blocks per SM that __launch_bounds__ asks for: a warp tile of 64
    // accumulators and its fragments need about 128 registers (8 warps: 2
    // blocks). 4 warps: 4 blocks (128 registers) where the weights are
    // copied as they are or decoded a step at a time (leanDecode), else 3:
    // the float decoders spill at 128 (q5_K's LM head on sm_80, f16 weights
    // under bf16 activations on sm_90; 8B shape). A fourth block is a third
    // more warps to issue from: the report's 64-sequence q4_0 decode step
    // 5.11 -> 4.48 ms, its 2,048-token prefill 62.9 -> 53.4 ms.
    const int64_t accumulators = (t.bm / t.wm) * (t.bn / t.wn) / 32;
    const int minBlocks = t.threads() == 256 ? 2 : (accumulators < 64 || leanDecode) ? 4 : 3;
    // The loop unrolled over the ring's stages (gemm_tile's Unroll), where
    // ptxas fits it at those blocks without spills on sm_80 and sm_90:
    // copied weights and q4_0's step decoder in every tile; q4_K's in the
    // 4-warp tiles of a GEMM over T rows, not in the 8-warp 128 x 128 one
    // (2 blocks) or the LM head's 64 x 128 (its gathered rows), which spill
    // 8 to 44 bytes on sm_80 (8B shape). The float decoders spill unrolled
    // everywhere.
    // A step decoder needs one or two threads a tile row (kRowDecode:
    // bn * 4 / threads of 4 or 2), which every tile llmc-select-gemm-tiles
    // picks has; a hand-edited one may not.
    const bool raw = wf == WeightFormat::bf16 || wf == WeightFormat::f16;
    const int64_t chunksPerThread = t.bn * 4 / t.threads();
    const bool stepDecoded = raw || chunksPerThread == 2 || chunksPerThread == 4;
    t.unroll = leanDecode && stepDecoded &&
               (wf != WeightFormat::q4_k || accumulators < 64 || t.wgmma ||
                (t.threads() == 128 && var == "T"));
    // A split-K tile's partials go to the step scratch past its header
    // (kScratchHeaderFloats), its tickets to args.tickets.
    const std::string split =
        t.splits > 1 ? ", gemm_split{a.scratch + 4, a.tickets}" : std::string();
    defs += entry(suffix, t.threads(), minBlocks,
                  io.decls +
                      llvm::formatv("  const {0}_epi epi{1};\n  gemm_mma<{2}, {3}, {4}, act, "
                                    "gemm_tile<{5}>>({6}, {7}, {8}, {9}, epi{10});\n",
                                    kSym, epiInit, fmt, columns, K, t.args(), tokens, gemmRows,
                                    gemmX, w, split)
                          .str());
    const int perBlock = int(t.bn / rows); // output columns
    launches.insert(launches.begin() + at,
                    launch(suffix, when,
                           {"cdiv(" + var + "," + std::to_string(t.bm) + ")",
                            cdiv(columns, perBlock), std::to_string(t.splits)},
                           t.threads()));
    ManifestCudaLaunch &g = launches[at++];
    g.variant = llvm::formatv("gemm tile={0}x{1} warps={2}x{3} stages={4}", t.bm, t.bn, t.wm,
                              t.wn, t.stages)
                    .str();
    if (t.wgmma)
      g.variant += " wgmma";
    if (t.splits > 1) {
      g.variant += " splits=" + std::to_string(t.splits);
      g.split_floats = t.bm * t.bn;
    }
    if (t.unroll)
      g.variant += " unrolled";
    // The loops' trips in every warp of every split block, the steps after
    // an unrolled loop's rounds as its peeled copy's. A split's partials,
    // written and read once, stay in L2 and are not counted as DRAM bytes.
    const double warpsPerTile =
        double((columns + perBlock - 1) / perBlock) * double(t.wm * t.wn) * double(t.splits);
    gemvCost(g, wt, columns, K, rows, var, int(t.bm), warpsPerTile * double(t.trips(K)));
    if (t.rounds(K) > 0 && t.tailTrips(K) > 0)
      g.cost.peeled_trips.p = warpsPerTile * double(t.tailTrips(K));
    // Token tiles are the grid's fastest dimension, so the blocks sharing a
    // weight tile run together and the weight comes from DRAM once per
    // launch, not once per tile of tokens (the trips stay per tile).
    std::swap(g.cost.bytes.c, g.cost.bytes.p);
    std::swap(var == "L" ? g.cost.flops.l : g.cost.flops.t,
              var == "L" ? g.cost.tensor_flops.l : g.cost.tensor_flops.t);
  };
  const std::string from = std::to_string(tiles->largeFrom - 1);
  gemmEntry("gemm", over + "&&" + var + "<=" + from, tiles->small);
  gemmEntry("gemm_l", var + ">" + from, tiles->large);
  return success();
}

void GemmGroupEmitter::operandEntry(int64_t K, StringRef tokens, StringRef xRows, StringRef x,
                                    StringRef proInit) {
  if (operandDefined)
    return;
  operandDefined = true;
  defs += entry("operand", 128, 4,
                io.decls + llvm::formatv("  const auto pro = {0};\n  gemm_operand<{1}, act>({2}, {3}, "
                                         "{4}, pro, static_cast<act *>(a.gemm_a));\n",
                                         proInit, K, tokens, xRows, x)
                               .str());
}

void GemmGroupEmitter::cublasLtEntries(int64_t n, int64_t columns, int64_t K, StringRef tokens,
                                       StringRef xRows, StringRef x, StringRef w,
                                       StringRef proInit, StringRef epiInit, StringRef deqFmt) {
  // The weight's binding slot, from its `a.weights[i]` expression.
  StringRef slot = StringRef(w).drop_front(StringRef("a.weights[").size()).drop_back();
  if (slot.getAsInteger(10, gemm.weight))
    return; // not a plain binding: no cuBLASLt alternative
  std::string var = tokens == "s.num_logits" ? "L" : "T";
  operandEntry(K, tokens, xRows, x, proInit);
  defs += entry("lt_epi", 128, 4,
                io.decls + llvm::formatv("  const {0}_epi epi{1};\n  gemm_epilogue<{2}, {3}>({4}, "
                                         "a.gemm_d, epi);\n",
                                         kSym, epiInit, columns, n, tokens)
                               .str());
  gemm.n = n;
  gemm.k = K;
  gemm.columns = columns;
  gemm.rows = var;
  gemm.pre = (kSym + "_operand").str();
  gemm.epi = (kSym + "_lt_epi").str();
  if (!deqFmt.empty()) {
    // cuBLASLt multiplies 16-bit operands: the weight, decoded as the GEMV
    // and GEMM decode it, goes to B [n, K] first.
    defs += entry("lt_deq", 256, 4,
                  io.decls + llvm::formatv("  dequantize_weight<{0}, {1}, {2}, act>({3}, "
                                           "static_cast<act *>(a.gemm_b));\n",
                                           deqFmt, n, K, w)
                                 .str());
    gemm.deq = (kSym + "_lt_deq").str();
  }
  for (ManifestCudaLaunch &l : launches)
    if (llvm::any_of(std::initializer_list<StringRef>{"_gemv", "_gemv1", "_xq8", "_operand",
                                                       "_gemm", "_gemm_l"},
                     [&](StringRef s) { return StringRef(l.symbol).ends_with(s); }))
      l.impl = "llmc"; // not the RoPE launches after them
}

LogicalResult GemmGroupEmitter::emit(Operation *anchor, ArrayRef<Operation *> pro,
                                     ArrayRef<Operation *> epi) {
  Value weightValue = isa<LinearOp>(anchor) ? cast<LinearOp>(anchor).getWeight()
                                             : cast<LMHeadOp>(anchor).getWeight();
  auto wt = cast<WeightType>(weightValue.getType());
  int64_t K = wt.getShape()[1];
  // One K step of the tensor-core GEMM is 32; GEMVs and GEMMs read whole
  // blocks (256 for k-quants, the group for i8/i4).
  int64_t block = isKQuant(wt.getFormat()) ? 256 : (wt.getGroup() ? wt.getGroup() : 32);
  if (K % 32 != 0 || K % block != 0)
    return anchor->emitError() << "CUDA codegen: GEMMs need K a multiple of 32 and of the "
                                  "weight's block ("
                               << block << "), not " << K;
  FailureOr<std::string> fmt = formatTag(anchor, wt);
  if (failed(fmt))
    return failure();
  std::string x, proInit;
  if (failed(prologue(anchor, pro, x, proInit)))
    return failure();
  std::string w = io.weight(weightValue);
  // cuBLASLt multiplies 16-bit operands of the activations' type: weights
  // in another format are dequantized for it (deqFmt).
  StringRef act = io.options->activationType;
  bool lt = act == "bf16" || act == "f16";
  bool same = (wt.getFormat() == WeightFormat::bf16 && act == "bf16") ||
              (wt.getFormat() == WeightFormat::f16 && act == "f16");
  std::string deqFmt = same ? "" : *fmt;

  if (auto h = dyn_cast<LMHeadOp>(anchor)) {
    if (!epi.empty())
      return epi.front()->emitError() << "CUDA codegen: nothing fuses after the LM head";
    auto outs = io.yieldsOf.lookup(h.getLogits());
    if (outs.size() != 1)
      return h.emitError() << "CUDA codegen: the LM head's logits must be yielded once";
    int64_t N = wt.getShape()[0];
    // Gemma 2's final_logit_softcapping caps each logit as it is stored.
    std::string logit = "acc[0]";
    if (std::optional<APFloat> cap = h.getSoftcap())
      logit = llvm::formatv("{0}f * tanhf(acc[0] / {0}f)", number(cap->convertToDouble())).str();
    defs += llvm::formatv("struct {0}_epi {{\n  static constexpr int kRows = 1;\n{1}"
                          "  __device__ static int row(int n, int) {{ return n; }\n"
                          "  __device__ void operator()(int t, int n, const float (&acc)[1]) const "
                          "{{\n    out{2}[static_cast<i64>(t) * {3} + n] = {4};\n  }\n};\n",
                          kSym, members(), outs.front(), N, logit)
                .str();
    if (failed(entries(*fmt, wt, N, K, 1, "s.num_logits", "s.logits_rows", x, w, proInit, init("nullptr"))))
      return failure();
    if (lt)
      cublasLtEntries(N, N, K, "s.num_logits", "s.logits_rows", x, w, proInit, init("nullptr"),
                      deqFmt);
    return success();
  }
  auto l = cast<LinearOp>(anchor);
  int rows = 1;
  int64_t columns = 0;
  std::string bias = l.getBias() ? io.weight(l.getBias()) : "nullptr";
  if (failed(linearEpilogue(l, epi, rows, columns)))
    return failure();
  if (failed(entries(*fmt, wt, columns, K, rows, "s.num_tokens", "nullptr", x, w, proInit, init(bias))))
    return failure();
  if (lt)
    cublasLtEntries(wt.getShape()[0], columns, K, "s.num_tokens", "nullptr", x, w, proInit,
                    init(bias), deqFmt);
  return success();
}

} // namespace

LogicalResult emitGemmGroup(const GroupIO &io, Operation *anchor, ArrayRef<Operation *> pro,
                            ArrayRef<Operation *> epi, std::string &defs,
                            std::vector<ManifestCudaLaunch> &launches, ManifestCudaGemm &gemm) {
  return GemmGroupEmitter(io, defs, launches, gemm).emit(anchor, pro, epi);
}

} // namespace llmc::cudagen
