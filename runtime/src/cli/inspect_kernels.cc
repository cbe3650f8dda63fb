#include "inspect_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cuda_tools.h"
#include "llmc/core/status_macros.h"
#include "kernel_model.h"
#include "llmc/runtime/exec/cuda_step_plan.h"
#include "sass_analysis.h"

namespace llmc::cli {
namespace {

using nlohmann::ordered_json;

// One arch module's SASS: its functions, or why there are none.
struct ModuleSass {
  std::vector<SassFunction> functions;
  std::string note;  // "" when read
};

// What one arch module says about one launch's entry function.
struct ModuleView {
  const ManifestCudaModule* module = nullptr;
  const ManifestPtxasEntry* ptxas = nullptr;  // nullptr: not in the manifest
  const SassFunction* sass = nullptr;         // nullptr: `sass_note` says why
  std::string sass_note;
  const perf::DeviceSpec* device = nullptr;   // whose occupancy: the module's arch, else --device
  perf::Occupancy occupancy;
};

// One launch at one shape.
struct ShapeResult {
  bool runs = false;
  std::array<unsigned, 3> grid{};
  int64_t blocks = 0;
  bool has_cost = false;           // the manifest has its cost forms
  bool instructions_known = false; // the SASS was read: warp_instructions counts
  double bytes = 0, flops = 0, tensor_flops = 0, trips = 0, peeled_trips = 0, warp_instructions = 0;
  perf::Prediction prediction;
};

struct LaunchView {
  size_t kernel = 0, launch = 0;
  const ManifestCudaLaunch* l = nullptr;
  std::vector<ModuleView> modules;
  size_t model = 0;  // into modules: the one the prediction takes resources and SASS from
  std::vector<ShapeResult> shapes;
};

// One step of the plan at one shape.
struct StepTotal {
  std::string error;  // the plan cannot run at this shape (a grid out of range)
  int64_t launches = 0, collectives = 0, without_cost = 0;
  double seconds = 0, bytes = 0;
  std::map<std::string, double> by_bound;  // seconds per bound
  // With every GEMM cuBLASLt may run on cuBLASLt (--gemm=cublaslt), and
  // with each GEMM kernel on the faster of the two (what --gemm=auto
  // follows from `llmc tune --predict`); gemm_kernels 0: no such GEMM.
  double seconds_cublaslt = 0, seconds_auto = 0;
  int64_t gemm_kernels = 0, auto_cublaslt = 0;
};

// 3 significant digits and an SI prefix: "1.23 MB", "456 kFLOP".
std::string Si(double v, const char* unit) {
  if (!std::isfinite(v)) return absl::StrCat("inf ", unit);
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 999.5 && i < 5) v /= 1000, ++i;
  int decimals = std::fabs(v) < 9.995 ? 2 : std::fabs(v) < 99.95 ? 1 : 0;
  if (v == std::floor(v) && i == 0) decimals = 0;
  return absl::StrFormat("%.*f %s%s", decimals, v, kPrefix[i], unit);
}

std::string Seconds(double s) {
  if (!std::isfinite(s)) return "inf";
  if (s < 1e-3) return absl::StrFormat("%.2f us", s * 1e6);
  if (s < 1) return absl::StrFormat("%.3f ms", s * 1e3);
  return absl::StrFormat("%.3f s", s);
}

// "[T, 2, splits] x 128", as inspect's cuda section spells a launch.
std::string LaunchShape(const ManifestCudaLaunch& l) {
  return absl::StrFormat("[%s] x %d", absl::StrJoin(l.grid, ", "), l.block);
}

ordered_json WidthsJson(const std::map<int, int64_t>& widths) {
  ordered_json j = ordered_json::object();
  for (auto it = widths.rbegin(); it != widths.rend(); ++it) j[std::to_string(it->first)] = it->second;
  return j;
}

ordered_json MixJson(const InstructionMix& mix) {
  ordered_json classes = ordered_json::object();
  for (const auto& [cls, n] : mix.by_class) classes[cls] = n;
  return {{"instructions", mix.instructions},
          {"classes", std::move(classes)},
          {"global_loads", WidthsJson(mix.global_loads)},
          {"global_stores", WidthsJson(mix.global_stores)},
          {"shared_loads", WidthsJson(mix.shared_loads)},
          {"shared_stores", WidthsJson(mix.shared_stores)},
          {"global_load_bytes", mix.global_load_bytes}};
}

ordered_json OccupancyJson(const perf::Occupancy& o) {
  return {{"blocks_per_sm", o.blocks_per_sm}, {"limiter", o.limiter}, {"fraction", o.fraction}};
}

// A double for JSON: null when not finite (an unlaunchable kernel's time).
ordered_json Num(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(); }

// The loops a launch's trips count: its hot loop and, where the emitter
// gives peeled trips, the peeled copy of it: of the two largest innermost
// loops in the SASS, the later one, which runs after the main loop (the
// attention prefill's masked key tiles, larger than its main loop; the
// GEMM's last steps after its unrolled rounds, smaller). The two must look
// like a loop and its copy: disjoint, the smaller at least a quarter of
// the larger. Otherwise (ptxas left no second copy, or another loop came
// second) all trips count on the largest, as without peeled trips.
struct CountedLoops {
  const SassLoop* main = nullptr;
  const SassLoop* peeled = nullptr;
};
CountedLoops LoopsOf(const SassFunction& f, const ManifestCudaCost& cost) {
  const SassLoop *largest = f.hot(), *next = f.next();
  const bool copy = !cost.peeled_trips.empty() && next &&
                    4 * next->mix.instructions >= largest->mix.instructions &&
                    (next->end < largest->start || largest->end < next->start);
  if (!copy) return CountedLoops{largest, nullptr};
  return next->start < largest->start ? CountedLoops{next, largest} : CountedLoops{largest, next};
}

// The shape's launch of one kernel launch: its work from the cost forms and
// the SASS, and the model's time. `grid` is the runner's (SelectLaunches).
ShapeResult Evaluate(const perf::DeviceSpec& device, const LaunchView& v,
                     const std::array<unsigned, 3>& grid, const ReportShape& shape) {
  ShapeResult r;
  r.runs = true;
  r.grid = grid;
  r.blocks = int64_t(grid[0]) * grid[1] * grid[2];
  const ManifestCudaCost& cost = v.l->cost;
  if (cost.empty()) return r;  // no cost model: no numbers
  r.has_cost = true;
  r.bytes = EvaluateCost(cost.bytes, shape.cost, cost);
  r.flops = EvaluateCost(cost.flops, shape.cost, cost);
  r.tensor_flops = EvaluateCost(cost.tensor_flops, shape.cost, cost);
  r.trips = EvaluateCost(cost.trips, shape.cost, cost);
  const ModuleView& m = v.modules[v.model];
  perf::KernelResources res;
  res.regs = m.ptxas ? int(m.ptxas->registers) : 0;
  res.threads_per_block = int(v.l->block);
  res.static_smem = m.ptxas ? m.ptxas->shared_bytes : 0;
  perf::LaunchWork work;
  work.blocks = r.blocks;
  work.bytes = r.bytes;
  work.flops = r.flops;
  work.tensor_flops = r.tensor_flops;
  work.warpgroup_mma = absl::StrContains(v.l->variant, "wgmma");
  if (m.sass) {
    // Instructions the hot loop runs (its trips, summed over the warps,
    // are the emitter's) plus every other instruction once per warp: code
    // around the hot loop (a GEMV's staging, an outer pass loop that runs
    // once at decode) runs once; other loops are counted once too, which
    // undercounts kernels with two long loops (docs/cuda.md).
    // With a peeled copy, each loop runs its own share of the trips.
    const double warps = double(r.blocks) * double((v.l->block + 31) / 32);
    const CountedLoops loops = LoopsOf(*m.sass, cost);
    const double hot_body = loops.main ? double(loops.main->mix.instructions) : 0.0;
    const double peeled_body = loops.peeled ? double(loops.peeled->mix.instructions) : 0.0;
    const double peeled = r.peeled_trips =
        loops.peeled ? std::min(r.trips, EvaluateCost(cost.peeled_trips, shape.cost, cost)) : 0.0;
    r.warp_instructions = (r.trips - peeled) * hot_body + peeled * peeled_body +
                          warps * (double(m.sass->mix.instructions) - hot_body - peeled_body);
    r.instructions_known = true;
    if (loops.main) work.load_bytes_per_warp_trip = 32.0 * double(loops.main->mix.global_load_bytes);
  }
  work.warp_instructions = r.warp_instructions;
  r.prediction = perf::Predict(device, res, work);
  return r;
}

// One GEMM kernel (manifest gemm) at one shape, per use: its own launches
// against what --gemm=cublaslt runs in their place (ApplyGemmPolicy): the
// weight's dequantization, the operand launch, cuBLASLt's matmul (modelled
// as the library is measured: PredictLibraryGemm) and the epilogue launch.
struct GemmPaths {
  bool evaluated = false;
  int64_t rows = 0;
  double own_s = 0;
  double deq_s = 0, pre_s = 0, epi_s = 0;  // deq_s 0: the weight is in the activation type
  perf::Prediction matmul;
  double cublaslt_s() const { return deq_s + pre_s + matmul.seconds + epi_s; }
  bool cublaslt_faster() const { return cublaslt_s() < own_s; }
};

// The report's data, rendered twice (text, JSON) so that the two agree.
struct Report {
  const Manifest* m = nullptr;
  const perf::DeviceSpec* device = nullptr;
  CudaTools tools;
  std::string tools_note;  // a missing tool, once for all modules
  std::vector<ModuleSass> sass;
  size_t model_module = 0;
  std::vector<ReportShape> shapes;
  std::vector<int64_t> uses;  // steps per kernel
  std::vector<LaunchView> launches;
  std::vector<StepTotal> steps;  // per shape
  std::vector<std::vector<GemmPaths>> gemm_paths;  // [kernel][shape]
  double weight_bytes = 0;
  // The device sampler (cuda.samplers "sample"), outside the step plan:
  // one block a pick over its row of logits, per shape and way of picking.
  struct SamplerMode {
    const char* name;
    int passes;          // reads of the row (llmc_cuda_sample.cuh)
    double bytes = 0;    // DRAM: every pass, or the first where the rows in flight fit in L2
    perf::Prediction p;
  };
  const ManifestCudaSampler* sampler = nullptr;
  const ManifestPtxasEntry* sampler_ptxas = nullptr;
  std::vector<std::vector<SamplerMode>> sampler_modes;  // [shape]
};

// An entry outside the kernels' launch lists (the cuBLASLt path's deq, pre
// and epi launches): ptxas's resources and the SASS of the model module,
// every instruction once per warp (a loop, such as a row's pass over k,
// counted once: an undercount), and `bytes` of DRAM traffic.
perf::Prediction PredictEntry(const Report& r, const std::string& symbol,
                              const std::array<unsigned, 3>& grid, unsigned block, double bytes,
                              double loop_warp_instructions = 0) {
  const ManifestCudaModule& mod = r.m->cuda.modules[r.model_module];
  perf::KernelResources res;
  res.threads_per_block = int(block);
  for (const ManifestPtxasEntry& e : mod.ptxas)
    if (e.symbol == symbol) {
      res.regs = int(e.registers);
      res.static_smem = e.shared_bytes;
    }
  perf::LaunchWork work;
  work.blocks = int64_t(grid[0]) * grid[1] * grid[2];
  work.bytes = bytes;
  if (const SassFunction* f = FindSassFunction(r.sass[r.model_module].functions, symbol))
    work.warp_instructions =
        double(work.blocks) * double((block + 31) / 32) * double(f->mix.instructions) +
        loop_warp_instructions;
  return perf::Predict(*r.device, res, work);
}

// One launch of the cuBLASLt path (ApplyGemmPolicy's GEMM kinds) at
// `shape`, into its part of `p`; returns its seconds.
double EvaluateGemmPart(const Report& r, const SelectedLaunch& sel, const ReportShape& shape,
                        GemmPaths& p) {
  const ManifestCuda& c = r.m->cuda;
  const ManifestStep& step = c.steps[sel.step];
  const ManifestCudaKernel& kernel = c.kernels[size_t(step.kernel)];
  const ManifestCudaGemm& g = kernel.gemm;
  const int act = c.activation_dtype == "f32" ? 4 : 2;
  const double rows = double(sel.rows);
  switch (sel.kind) {
    case LaunchKind::kGemmDequant: {
      // The quantized weight read, n x k of the activation type written.
      double weight = 0;
      if (g.weight >= 0 && size_t(g.weight) < step.weights.size()) {
        const size_t w = size_t(step.weights[size_t(g.weight)]);
        if (w < r.m->weights.tensors.size()) weight = double(r.m->weights.tensors[w].bytes);
      }
      p.deq_s = PredictEntry(r, g.deq, sel.grid, sel.block, weight + double(g.n) * g.k * act).seconds;
      return p.deq_s;
    }
    case LaunchKind::kGemmPre:
      // The kernel's own operand launch, where it has one, is the same entry.
      p.pre_s = -1;
      for (const LaunchView& v : r.launches)
        if (v.kernel == size_t(step.kernel) && v.l->symbol == g.pre && !v.l->cost.empty())
          p.pre_s = Evaluate(*r.device, v, sel.grid, shape).prediction.seconds;
      if (p.pre_s < 0)  // a gather: the rows read and written
        p.pre_s = PredictEntry(r, g.pre, sel.grid, sel.block, 2 * rows * double(g.k) * act).seconds;
      return p.pre_s;
    case LaunchKind::kGemmMatmul:
      p.matmul = perf::PredictLibraryGemm(*r.device, {sel.rows, g.n, g.k, act, 4});
      return p.matmul.seconds;
    case LaunchKind::kGemmEpi: {
      // D (f32) read, the output written, and a residual read where it adds one.
      const bool adds = kernel.ops.find("add") != std::string::npos;
      const double bytes = rows * (double(g.n) * 4 + double(g.columns) * act * (adds ? 2 : 1));
      p.epi_s = PredictEntry(r, g.epi, sel.grid, sel.block, bytes).seconds;
      return p.epi_s;
    }
    case LaunchKind::kKernel:
    case LaunchKind::kCollective:
      break;
  }
  return 0;
}

// --gemm=cublaslt and --gemm=auto at shape `s`: every GEMM step entry's own
// launches (`own_by_step`, seconds) against the cuBLASLt path that would
// replace them; fills r.gemm_paths[.][s] from each kernel's first use.
void EvaluateGemmPaths(Report& r, size_t s, const std::vector<SelectedLaunch>& selected,
                       const std::map<size_t, double>& own_by_step, StepTotal& t) {
  const ManifestCuda& c = r.m->cuda;
  GemmPolicy everything;
  everything.mode = GemmPolicy::Mode::kCublasLt;
  std::vector<SelectedLaunch> lt = selected;
  ApplyGemmPolicy(c, everything, r.shapes[s].vars, &lt);
  std::map<size_t, double> lt_by_step;
  std::map<size_t, size_t> first_step;  // kernel -> the step entry its paths describe
  for (const SelectedLaunch& sel : lt) {
    if (sel.kind == LaunchKind::kKernel || sel.kind == LaunchKind::kCollective) continue;
    const size_t k = size_t(c.steps[sel.step].kernel);
    auto [first, inserted] = first_step.emplace(k, sel.step);
    GemmPaths scratch;
    GemmPaths& p = first->second == sel.step ? r.gemm_paths[k][s] : scratch;
    if (inserted) {
      p.evaluated = true;
      p.rows = sel.rows;
      auto own = own_by_step.find(sel.step);
      p.own_s = own == own_by_step.end() ? 0 : own->second;
    }
    lt_by_step[sel.step] += EvaluateGemmPart(r, sel, r.shapes[s], p);
  }
  t.seconds_cublaslt = t.seconds_auto = t.seconds;
  for (const auto& [step, own] : own_by_step) {
    const double delta = lt_by_step[step] - own;
    t.seconds_cublaslt += delta;
    t.seconds_auto += std::min(0.0, delta);
  }
  for (const auto& [k, step] : first_step) {
    ++t.gemm_kernels;
    if (r.gemm_paths[k][s].cublaslt_faster()) ++t.auto_cublaslt;
  }
}

std::string RenderText(const Report& r) {
  const ManifestCuda& c = r.m->cuda;
  const perf::DeviceSpec& d = *r.device;
  std::string out;
  std::vector<std::string> shape_names;
  for (const ReportShape& s : r.shapes) shape_names.push_back(s.name);
  absl::StrAppendFormat(&out, "kernels on %s (%s: %d SMs, %s copy, %.2f GHz); shapes %s\n", d.name,
                        d.arch, d.sms, Si(d.dram_bytes_per_s, "B/s"), d.clock_hz / 1e9,
                        absl::StrJoin(shape_names, ", "));
  absl::StrAppendFormat(&out, "  the model takes resources and SASS from %s%s\n",
                        c.modules[r.model_module].arch,
                        perf::FindDevice(c.modules[r.model_module].arch) == r.device
                            ? ""
                            : " (the artifact has no module for this device)");
  if (!r.tools_note.empty())
    absl::StrAppendFormat(&out, "  SASS not read: %s\n", r.tools_note);
  else
    absl::StrAppendFormat(&out, "  SASS of ptxas -O3 by %s\n", r.tools.nvdisasm ? "nvdisasm" : "cuobjdump");

  // After a GEMM kernel's launches: the cuBLASLt path in their place.
  auto gemm_lines = [&](size_t kernel) {
    if (kernel == SIZE_MAX) return;
    bool header = false;
    for (size_t s = 0; s < r.shapes.size(); ++s) {
      const GemmPaths& p = r.gemm_paths[kernel][s];
      if (!p.evaluated) continue;
      if (!header)
        out += "    on cuBLASLt (--gemm=cublaslt): dequantize, operand, matmul (library model), epilogue\n";
      header = true;
      absl::StrAppendFormat(&out, "    %-14s %spre %s + mm %s %s + epi %s = %s; own %s -> %s\n",
                            r.shapes[s].name,
                            p.deq_s > 0 ? "deq " + Seconds(p.deq_s) + " + " : std::string(),
                            Seconds(p.pre_s), Seconds(p.matmul.seconds), p.matmul.bound,
                            Seconds(p.epi_s), Seconds(p.cublaslt_s()), Seconds(p.own_s),
                            p.cublaslt_faster() ? "cuBLASLt" : "own");
    }
  };
  size_t last_kernel = SIZE_MAX;
  for (const LaunchView& v : r.launches) {
    const ManifestCudaKernel& k = c.kernels[v.kernel];
    if (v.kernel != last_kernel) {
      gemm_lines(last_kernel);
      last_kernel = v.kernel;
      absl::StrAppendFormat(&out, "c%-3d x%-3d %s%s\n", v.kernel, r.uses[v.kernel], k.ops,
                            k.split_keys > 0 ? absl::StrFormat(" (%d keys per split)", k.split_keys)
                                             : "");
    }
    const ManifestCudaLaunch& l = *v.l;
    absl::StrAppendFormat(&out, "  %s %s%s%s\n", l.symbol, LaunchShape(l),
                          l.when.empty() ? "" : " if " + l.when,
                          l.variant.empty() ? "" : "  variant " + l.variant);
    for (const ModuleView& mv : v.modules) {
      std::string res = mv.ptxas ? absl::StrFormat("regs %3d spill %d/%d smem %d stack %d",
                                                   mv.ptxas->registers, mv.ptxas->spill_stores,
                                                   mv.ptxas->spill_loads, mv.ptxas->shared_bytes,
                                                   mv.ptxas->stack_bytes)
                                 : std::string("no ptxas report");
      absl::StrAppendFormat(&out, "    %-6s %s  occupancy %d blocks/SM (%s, %.0f%% of %s)\n",
                            mv.module->arch, res, mv.occupancy.blocks_per_sm, mv.occupancy.limiter,
                            mv.occupancy.fraction * 100, mv.device->name);
      if (!mv.sass) {
        absl::StrAppendFormat(&out, "           SASS: %s\n", mv.sass_note);
        continue;
      }
      const SassFunction& f = *mv.sass;
      absl::StrAppendFormat(&out, "           %d instr, %d %s, %d outside: ld %s  st %s  lds %s  sts %s\n",
                            f.mix.instructions, f.loops.size(), f.loops.size() == 1 ? "loop" : "loops",
                            f.outside_loops,
                            FormatWidths(f.mix.global_loads), FormatWidths(f.mix.global_stores),
                            FormatWidths(f.mix.shared_loads), FormatWidths(f.mix.shared_stores));
      const CountedLoops loops = LoopsOf(f, l.cost);
      if (const SassLoop* hot = loops.main)
        absl::StrAppendFormat(&out, "           hot loop %d instr, %d B ld/trip: %s\n",
                              hot->mix.instructions, hot->mix.global_load_bytes,
                              FormatMix(hot->mix, 5));
      else
        absl::StrAppendFormat(&out, "           no loop\n");
      if (const SassLoop* peeled = loops.peeled)
        absl::StrAppendFormat(&out, "           peeled loop %d instr: %s\n",
                              peeled->mix.instructions, FormatMix(peeled->mix, 5));
    }
    for (size_t s = 0; s < r.shapes.size(); ++s) {
      const ShapeResult& x = v.shapes[s];
      std::string line = absl::StrFormat("    %-14s", r.shapes[s].name);
      if (!r.steps[s].error.empty())
        line += " the plan cannot run at this shape (see per step)";
      else if (!x.runs)
        line += l.when.empty() ? " not in the step plan" : " not run (" + l.when + ")";
      else if (!x.has_cost)
        absl::StrAppendFormat(&line, " %8d blocks  no cost model", x.blocks);
      else {
        const perf::Prediction& p = x.prediction;
        absl::StrAppendFormat(&line, " %8d blocks %9s %11s %10s -> %9s %s, %.2f waves", x.blocks,
                              Si(x.bytes, "B"), Si(x.flops, "FLOP"),
                              x.instructions_known ? Si(x.warp_instructions, "winst")
                                                   : std::string("? winst"),
                              Seconds(p.seconds), p.bound, p.waves);
        if (x.tensor_flops > 0) line += ", tensor " + Si(x.tensor_flops, "FLOP");
        if (!x.instructions_known) line += " (no SASS)";
      }
      out += line + "\n";
    }
  }
  gemm_lines(last_kernel);

  absl::StrAppendFormat(&out, "per step on %s (the launches of cuda.steps whose `when` holds)\n", d.name);
  for (size_t s = 0; s < r.shapes.size(); ++s) {
    const StepTotal& t = r.steps[s];
    if (!t.error.empty()) {
      absl::StrAppendFormat(&out, "  %-14s cannot run: %s\n", r.shapes[s].name, t.error);
      continue;
    }
    if (t.launches == t.without_cost) {
      absl::StrAppendFormat(&out, "  %-14s %d launches, none with a cost model: no prediction\n",
                            r.shapes[s].name, t.launches);
      continue;
    }
    std::vector<std::string> bounds;
    for (const auto& [bound, sec] : t.by_bound)
      bounds.push_back(absl::StrFormat("%s %.0f%%", bound, 100 * sec / t.seconds));
    absl::StrAppendFormat(&out, "  %-14s %d launches %s, %s moved: %s\n", r.shapes[s].name,
                          t.launches, Seconds(t.seconds), Si(t.bytes, "B"),
                          absl::StrJoin(bounds, ", "));
    double rate = r.weight_bytes / t.seconds;
    absl::StrAppendFormat(&out, "  %-14s weights %s per step: %s, %.1f%% of copy bandwidth\n", "",
                          Si(r.weight_bytes, "B"), Si(rate, "B/s"),
                          100 * rate / d.dram_bytes_per_s);
    if (t.gemm_kernels > 0)
      absl::StrAppendFormat(&out,
                            "  %-14s GEMMs on cuBLASLt: %s; each GEMM kernel on the faster path "
                            "(auto): %s, %d of %d on cuBLASLt\n",
                            "", Seconds(t.seconds_cublaslt), Seconds(t.seconds_auto),
                            t.auto_cublaslt, t.gemm_kernels);
    if (t.without_cost > 0)
      absl::StrAppendFormat(&out, "  %-14s not counted: %d launches without a cost model\n", "",
                            t.without_cost);
    if (t.collectives > 0)
      absl::StrAppendFormat(&out, "  %-14s not counted: %d collectives (no model)\n", "",
                            t.collectives);
  }
  if (r.sampler != nullptr) {
    absl::StrAppendFormat(
        &out, "device sampler %s [L, 1, 1] x %d after the step: %s\n", r.sampler->symbol,
        r.sampler->block,
        r.sampler_ptxas
            ? absl::StrFormat("regs %d spill %d/%d smem %d", r.sampler_ptxas->registers,
                              r.sampler_ptxas->spill_stores, r.sampler_ptxas->spill_loads,
                              r.sampler_ptxas->shared_bytes)
            : std::string("not in ptxas's report"));
    absl::StrAppendFormat(&out,
                          "  a block a pick, its f32 row of %d logits read once a pass (DRAM: "
                          "all, or the first where the rows fit in L2)\n",
                          r.m->model.vocab_size);
    for (size_t s = 0; s < r.shapes.size(); ++s) {
      const StepTotal& t = r.steps[s];
      for (const Report::SamplerMode& mode : r.sampler_modes[s]) {
        std::string share;
        if (t.error.empty() && t.seconds > 0)
          share = absl::StrFormat(", %.1f%% of the step", 100 * mode.p.seconds / t.seconds);
        absl::StrAppendFormat(&out, "  %-14s %-24s %2d passes %9s -> %s %s%s\n",
                              r.shapes[s].name, mode.name, mode.passes, Si(mode.bytes, "B"),
                              Seconds(mode.p.seconds), mode.p.bound, share);
      }
    }
  }
  return out;
}

std::string RenderJson(const Report& r) {
  const ManifestCuda& c = r.m->cuda;
  const perf::DeviceSpec& d = *r.device;
  ordered_json j;
  j["device"] = {{"name", d.name}, {"arch", d.arch}, {"sms", d.sms},
                 {"dram_bytes_per_s", d.dram_bytes_per_s}, {"clock_hz", d.clock_hz}};
  j["model_module"] = c.modules[r.model_module].arch;
  ordered_json tools = {{"ptxas", r.tools.ptxas.empty() ? ordered_json() : ordered_json(r.tools.ptxas)},
                        {"disassembler", r.tools.disassembler.empty()
                                             ? ordered_json()
                                             : ordered_json(r.tools.disassembler)}};
  if (!r.tools_note.empty()) tools["missing"] = r.tools_note;
  j["tools"] = std::move(tools);
  ordered_json shapes = ordered_json::array();
  for (const ReportShape& s : r.shapes)
    shapes.push_back({{"name", s.name},
                      {"tokens", s.cost.tokens},
                      {"seqs", s.cost.seqs},
                      {"keys", s.cost.keys},
                      {"logits", s.cost.logits},
                      {"max_context", s.max_context}});
  j["shapes"] = std::move(shapes);

  ordered_json kernels = ordered_json::array();
  for (const LaunchView& v : r.launches) {
    const ManifestCudaKernel& k = c.kernels[v.kernel];
    if (kernels.empty() || kernels.back()["index"] != v.kernel)
      kernels.push_back({{"index", v.kernel},
                         {"name", k.name},
                         {"ops", k.ops},
                         {"uses", r.uses[v.kernel]},
                         {"launches", ordered_json::array()}});
    const ManifestCudaLaunch& l = *v.l;
    ordered_json launch = {{"symbol", l.symbol}, {"grid", l.grid}, {"block", l.block},
                           {"when", l.when},     {"variant", l.variant}, {"has_cost", !l.cost.empty()}};
    ordered_json modules = ordered_json::array();
    for (const ModuleView& mv : v.modules) {
      ordered_json m = {{"arch", mv.module->arch}};
      if (mv.ptxas)
        m["ptxas"] = {{"registers", mv.ptxas->registers},
                      {"spill_stores", mv.ptxas->spill_stores},
                      {"spill_loads", mv.ptxas->spill_loads},
                      {"shared_bytes", mv.ptxas->shared_bytes},
                      {"stack_bytes", mv.ptxas->stack_bytes}};
      else
        m["ptxas"] = nullptr;
      m["occupancy"] = OccupancyJson(mv.occupancy);
      m["occupancy"]["device"] = mv.device->name;
      if (mv.sass) {
        const SassFunction& f = *mv.sass;
        ordered_json sass = {{"instructions", f.mix.instructions},
                             {"outside_loops", f.outside_loops},
                             {"loops", f.loops.size()},
                             {"mix", MixJson(f.mix)}};
        auto loop_json = [](const SassLoop* loop) {
          return loop ? ordered_json{{"start", loop->start}, {"end", loop->end},
                                     {"depth", loop->depth}, {"mix", MixJson(loop->mix)}}
                      : ordered_json();
        };
        const CountedLoops loops = LoopsOf(f, l.cost);
        sass["hot_loop"] = loop_json(loops.main);
        if (loops.peeled) sass["peeled_loop"] = loop_json(loops.peeled);
        m["sass"] = std::move(sass);
      } else {
        m["sass"] = nullptr;
        m["sass_note"] = mv.sass_note;
      }
      modules.push_back(std::move(m));
    }
    launch["modules"] = std::move(modules);
    ordered_json at = ordered_json::array();
    for (size_t s = 0; s < r.shapes.size(); ++s) {
      const ShapeResult& x = v.shapes[s];
      ordered_json e = {{"shape", r.shapes[s].name}, {"runs", x.runs}};
      if (x.runs) {
        e["grid"] = x.grid;
        e["blocks"] = x.blocks;
        if (!x.has_cost) {
          e["note"] = "no cost model";
        } else {
          const perf::Prediction& p = x.prediction;
          e["bytes"] = x.bytes;
          e["flops"] = x.flops;
          e["tensor_flops"] = x.tensor_flops;
          e["trips"] = x.trips;
          e["peeled_trips"] = x.peeled_trips;  // of trips; 0 without a peeled loop
          e["warp_instructions"] = x.instructions_known ? ordered_json(x.warp_instructions)
                                                        : ordered_json();
          e["prediction"] = {{"seconds", Num(p.seconds)}, {"bound", p.bound},
                             {"mem_s", Num(p.mem_s)},     {"issue_s", Num(p.issue_s)},
                             {"fp32_s", Num(p.fp32_s)},   {"tensor_s", Num(p.tensor_s)},
                             {"fixed_s", Num(p.fixed_s)}, {"waves", Num(p.waves)},
                             {"occupancy", OccupancyJson(p.occupancy)}};
        }
      }
      at.push_back(std::move(e));
    }
    launch["shapes"] = std::move(at);
    kernels.back()["launches"].push_back(std::move(launch));
  }
  for (ordered_json& k : kernels) {
    const size_t index = k["index"].get<size_t>();
    ordered_json paths = ordered_json::array();
    for (size_t s = 0; s < r.shapes.size(); ++s) {
      const GemmPaths& p = r.gemm_paths[index][s];
      if (!p.evaluated) continue;
      paths.push_back({{"shape", r.shapes[s].name},
                       {"rows", p.rows},
                       {"own_s", Num(p.own_s)},
                       {"deq_s", Num(p.deq_s)},
                       {"pre_s", Num(p.pre_s)},
                       {"matmul", {{"seconds", Num(p.matmul.seconds)},
                                   {"bound", p.matmul.bound},
                                   {"tensor_s", Num(p.matmul.tensor_s)},
                                   {"mem_s", Num(p.matmul.mem_s)}}},
                       {"epi_s", Num(p.epi_s)},
                       {"cublaslt_s", Num(p.cublaslt_s())},
                       {"faster", p.cublaslt_faster() ? "cublaslt" : "llmc"}});
    }
    if (!paths.empty()) k["gemm_paths"] = std::move(paths);
  }
  j["kernels"] = std::move(kernels);

  ordered_json steps = ordered_json::array();
  for (size_t s = 0; s < r.shapes.size(); ++s) {
    const StepTotal& t = r.steps[s];
    ordered_json e = {{"shape", r.shapes[s].name}};
    if (!t.error.empty()) {
      e["error"] = t.error;
    } else {
      bool predicted = t.launches > t.without_cost;
      ordered_json bounds = ordered_json::object();
      for (const auto& [bound, sec] : t.by_bound) bounds[bound] = Num(sec);
      e["launches"] = t.launches;
      e["collectives"] = t.collectives;
      e["without_cost"] = t.without_cost;
      e["seconds"] = predicted ? Num(t.seconds) : ordered_json();
      e["bytes"] = t.bytes;
      e["seconds_by_bound"] = std::move(bounds);
      if (t.gemm_kernels > 0) {
        e["seconds_cublaslt"] = predicted ? Num(t.seconds_cublaslt) : ordered_json();
        e["seconds_auto"] = predicted ? Num(t.seconds_auto) : ordered_json();
        e["gemm_kernels"] = t.gemm_kernels;
        e["auto_cublaslt"] = t.auto_cublaslt;
      }
      e["weight_bytes"] = r.weight_bytes;
      e["copy_bandwidth_fraction"] =
          predicted ? Num(r.weight_bytes / t.seconds / d.dram_bytes_per_s) : ordered_json();
    }
    steps.push_back(std::move(e));
  }
  j["steps"] = std::move(steps);
  if (r.sampler != nullptr) {
    ordered_json sampler = {{"symbol", r.sampler->symbol}, {"block", r.sampler->block}};
    ordered_json shapes = ordered_json::array();
    for (size_t s = 0; s < r.shapes.size(); ++s) {
      ordered_json modes = ordered_json::array();
      for (const Report::SamplerMode& mode : r.sampler_modes[s])
        modes.push_back({{"mode", mode.name},
                         {"passes", mode.passes},
                         {"bytes", mode.bytes},
                         {"seconds", Num(mode.p.seconds)},
                         {"bound", mode.p.bound}});
      shapes.push_back({{"shape", r.shapes[s].name}, {"modes", std::move(modes)}});
    }
    sampler["shapes"] = std::move(shapes);
    j["sampler"] = std::move(sampler);
  }
  return j.dump(2) + "\n";
}

}  // namespace

ReportShape DecodeShape(int64_t batch, int64_t context) {
  ReportShape s;
  s.name = absl::StrFormat("decode %dx%d", batch, context);
  s.cost = CostShape::Decode(batch, context);
  s.vars.tokens = batch;
  s.vars.logits = batch;
  s.vars.seqs = batch;
  s.vars.queries = 1;
  s.max_context = context;
  s.fill_rows = CudaGraphBucketOf(batch);
  return s;
}

ReportShape PrefillShape(int64_t tokens) {
  ReportShape s;
  s.name = absl::StrFormat("prefill %d", tokens);
  s.cost = CostShape::Prefill(tokens);
  s.vars.tokens = tokens;
  s.vars.logits = 1;
  s.vars.seqs = 1;
  s.vars.queries = tokens;
  s.max_context = tokens;
  return s;
}

absl::StatusOr<ReportShape> ParseDecodeFlag(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ',');
  int64_t b = 0, ctx = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &b) || !absl::SimpleAtoi(parts[1], &ctx) ||
      b < 1 || ctx < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--decode=%s: expected B,C (B sequences at context C, both positive), e.g. 8,2048", text));
  return DecodeShape(b, ctx);
}

absl::StatusOr<ReportShape> ParsePrefillFlag(int64_t tokens) {
  if (tokens < 1)
    return absl::InvalidArgumentError(
        absl::StrFormat("--prefill=%d: expected a positive token count", tokens));
  return PrefillShape(tokens);
}

namespace {

// The device sampler's picks at each shape (a pick a logits row: L of
// them), by how many times each way of picking reads its row (the passes
// of llmc_cuda_sample.cuh): greedy 1 (the argmax); temperature and min-p
// over the whole vocabulary 2 (the max, the chunked weights); top-k, with
// top-p and min-p over it, 7 (a count, 4 radix-select passes, the gather's
// count and the gather); a greedy pick with its top-N logprobs 10 (the
// argmax, the max and the normalizer, and the top-N select). The first
// pass comes from DRAM; the others too unless the rows of the blocks in
// flight fit in half the L2 (then they are L2 hits, not modelled: a lower
// bound). Instructions: the SASS once a warp, and for every pass each
// thread's share of the row at kSamplerInstructionsPerLogit (a load, the
// cleaning, a compare or key, a select or shared-memory add, the loop's
// own: a count, not read from the SASS).
constexpr double kSamplerInstructionsPerLogit = 10;
void EvaluateSampler(Report& r) {
  const Manifest& m = *r.m;
  for (const ManifestCudaSampler& s : m.cuda.samplers)
    if (s.kind == "sample") r.sampler = &s;
  if (r.sampler == nullptr || m.logits_buffer < 0) {
    r.sampler = nullptr;
    return;
  }
  for (const ManifestPtxasEntry& e : m.cuda.modules[r.model_module].ptxas)
    if (e.symbol == r.sampler->symbol) r.sampler_ptxas = &e;
  perf::KernelResources res;
  res.threads_per_block = int(r.sampler->block);
  res.regs = r.sampler_ptxas ? int(r.sampler_ptxas->registers) : 0;
  res.static_smem = r.sampler_ptxas ? r.sampler_ptxas->shared_bytes : 0;
  const perf::Occupancy occ = perf::TheoreticalOccupancy(*r.device, res);
  const double row = double(m.model.vocab_size) * 4.0;  // f32 logits
  for (const ReportShape& shape : r.shapes) {
    std::vector<Report::SamplerMode>& modes = r.sampler_modes.emplace_back();
    const int64_t picks = shape.vars.logits;
    const double in_flight =
        double(std::min<int64_t>(picks, int64_t(r.device->sms) * std::max(1, occ.blocks_per_sm)));
    const bool l2_holds = in_flight * row <= r.device->l2_bytes / 2;
    for (auto [name, passes] : {std::pair<const char*, int>{"greedy", 1},
                                {"temperature, min-p", 2},
                                {"top-k (+ top-p, min-p)", 7},
                                {"top-p alone (+ min-p)", 8},
                                {"greedy + top-N logprobs", 10}}) {
      Report::SamplerMode mode{name, passes};
      mode.bytes = double(picks) * row * (l2_holds ? 1 : passes);
      const double per_thread = std::ceil(double(m.model.vocab_size) / double(r.sampler->block));
      const double loops = double(picks) * passes * per_thread *
                           double((r.sampler->block + 31) / 32) * kSamplerInstructionsPerLogit;
      mode.p = PredictEntry(r, r.sampler->symbol, {unsigned(picks), 1, 1},
                            unsigned(r.sampler->block), mode.bytes, loops);
      modes.push_back(mode);
    }
  }
}

// Everything the report says, at `shapes` on `device` ("": the artifact's
// first arch), into `r` (which keeps pointers into itself and the
// manifest: it is filled in place).
absl::Status BuildReport(const Artifact& artifact, const std::vector<ReportShape>& shapes,
                         const std::string& device_name, Report& r) {
  const Manifest& m = artifact.manifest();
  const ManifestCuda& c = m.cuda;
  if (c.modules.empty())
    return absl::InvalidArgumentError(
        "--kernels: the artifact has no CUDA kernels (compile it with --target=sm_XX)");
  r.m = &m;
  r.shapes = shapes;
  const std::string device = device_name.empty() ? c.modules[0].arch : device_name;
  r.device = perf::FindDevice(device);
  if (!r.device)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--device=%s: not in the performance model's table (known: %s, or their sm_XX)", device,
        absl::StrJoin(perf::KnownDevices(), ", ")));
  for (size_t i = 0; i < c.modules.size(); ++i)
    if (perf::FindDevice(c.modules[i].arch) == r.device) {
      r.model_module = i;
      break;
    }
  for (const ManifestTensor& t : m.weights.tensors) r.weight_bytes += double(t.bytes);

  // The SASS of every module (ptxas and a disassembler run once per module).
  r.tools = FindCudaTools();
  r.tools_note = !r.tools.ptxas_missing.empty() ? r.tools.ptxas_missing : r.tools.disassembler_missing;
  for (const ManifestCudaModule& mod : c.modules) {
    ModuleSass& ms = r.sass.emplace_back();
    if (!r.tools_note.empty()) {
      ms.note = "not read (a tool is missing, see above)";
      continue;
    }
    auto text = DisassemblePtx(r.tools, artifact.Path(mod.file), mod.arch);
    if (!text.ok()) {
      std::string why(text.status().message());
      ms.note = why.substr(0, why.find('\n'));
      continue;
    }
    auto functions = ParseSass(*text);
    if (!functions.ok())
      ms.note = std::string(functions.status().message());
    else
      ms.functions = std::move(*functions);
  }

  r.uses.assign(c.kernels.size(), 0);
  for (const ManifestStep& s : c.steps)
    if (s.kernel >= 0) ++r.uses[size_t(s.kernel)];
  for (size_t k = 0; k < c.kernels.size(); ++k)
    for (size_t i = 0; i < c.kernels[k].launches.size(); ++i) {
      LaunchView v;
      v.kernel = k;
      v.launch = i;
      v.l = &c.kernels[k].launches[i];
      v.model = r.model_module;
      for (size_t mi = 0; mi < c.modules.size(); ++mi) {
        const ManifestCudaModule& mod = c.modules[mi];
        ModuleView mv;
        mv.module = &mod;
        for (const ManifestPtxasEntry& e : mod.ptxas)
          if (e.symbol == v.l->symbol) mv.ptxas = &e;
        mv.sass = FindSassFunction(r.sass[mi].functions, v.l->symbol);
        mv.sass_note = !r.sass[mi].note.empty() ? r.sass[mi].note
                                                : "no function " + v.l->symbol + " in the SASS";
        mv.device = perf::FindDevice(mod.arch);
        if (!mv.device) mv.device = r.device;
        perf::KernelResources res;
        res.regs = mv.ptxas ? int(mv.ptxas->registers) : 0;
        res.threads_per_block = int(v.l->block);
        res.static_smem = mv.ptxas ? mv.ptxas->shared_bytes : 0;
        mv.occupancy = perf::TheoreticalOccupancy(*mv.device, res);
        v.modules.push_back(std::move(mv));
      }
      v.shapes.resize(r.shapes.size());
      r.launches.push_back(std::move(v));
    }
  auto view = [&](size_t k, size_t i) -> LaunchView* {
    for (LaunchView& v : r.launches)
      if (v.kernel == k && v.launch == i) return &v;
    return nullptr;
  };

  // Which launches run at each shape, with what grids: the runner's own
  // selection (its `when`s and attention splits).
  auto parsed = ParseCudaLaunches(c);
  if (!parsed.ok()) return parsed.status();
  std::vector<SelectedLaunch> selected;
  r.gemm_paths.assign(c.kernels.size(), std::vector<GemmPaths>(r.shapes.size()));
  for (size_t s = 0; s < r.shapes.size(); ++s) {
    StepTotal& t = r.steps.emplace_back();
    absl::Status st =
        SelectLaunches(c, *parsed, r.shapes[s].vars, r.shapes[s].max_context,
                       kAttentionFillBlocksPerSm * r.device->sms, &selected, r.shapes[s].fill_rows);
    if (!st.ok()) {
      t.error = std::string(st.message());
      continue;
    }
    std::map<size_t, double> own_gemm;  // step entry -> its impl "llmc" launches' seconds
    for (const SelectedLaunch& sel : selected) {
      if (sel.kind == LaunchKind::kCollective) {
        ++t.collectives;
        continue;
      }
      LaunchView* v = view(size_t(c.steps[sel.step].kernel), sel.launch);
      if (!v) continue;
      ShapeResult& x = v->shapes[s];
      if (!x.runs) x = Evaluate(*r.device, *v, sel.grid, r.shapes[s]);
      ++t.launches;
      if (!x.has_cost) {
        ++t.without_cost;
        continue;
      }
      t.seconds += x.prediction.seconds;
      t.bytes += x.bytes;
      t.by_bound[x.prediction.bound] += x.prediction.seconds;
      if (c.kernels[v->kernel].gemm.n > 0 && v->l->impl == "llmc")
        own_gemm[sel.step] += x.prediction.seconds;
    }
    EvaluateGemmPaths(r, s, selected, own_gemm, t);
  }
  EvaluateSampler(r);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> KernelReport(const Artifact& artifact,
                                         const KernelReportOptions& options) {
  Report r;
  LLMC_RETURN_IF_ERROR(BuildReport(artifact, options.shapes, options.device, r));
  return options.json ? RenderJson(r) : RenderText(r);
}

absl::StatusOr<PredictedGemms> PredictGemms(const Artifact& artifact, const std::string& device,
                                            const std::vector<ReportShape>& shapes) {
  Report r;
  LLMC_RETURN_IF_ERROR(BuildReport(artifact, shapes, device, r));
  PredictedGemms out;
  out.device = r.device->name;
  out.by_shape.resize(shapes.size());
  for (size_t s = 0; s < shapes.size(); ++s) {
    if (!r.steps[s].error.empty())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: the plan cannot run: %s", shapes[s].name, r.steps[s].error));
    for (size_t k = 0; k < r.gemm_paths.size(); ++k) {
      const GemmPaths& p = r.gemm_paths[k][s];
      if (p.evaluated)
        out.by_shape[s].push_back({r.m->cuda.kernels[k].name, p.rows, p.own_s, p.cublaslt_s()});
    }
  }
  return out;
}

}  // namespace llmc::cli
