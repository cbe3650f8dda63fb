#include "llmc/runtime/exec/cuda_step_plan.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_format.h"
#include "llmc/runtime/exec/step_runner.h"

namespace llmc {
namespace {

int64_t Align(int64_t n) { return (n + kStagingAlignInts - 1) / kStagingAlignInts * kStagingAlignInts; }

void* DevicePointer(cuda::CUdeviceptr p) { return reinterpret_cast<void*>(uintptr_t(p)); }

// The fewest of `vars.splits` with which every launch of a step entry that
// runs and splits has `fill_blocks` blocks (0: all of them); one count for
// the entry, so that a launch conditioned on `splits` agrees with the grids.
int64_t FillSplits(const std::vector<ParsedLaunch>& launches, const LaunchVars& vars,
                   int64_t fill_blocks, int64_t fill_rows) {
  if (fill_blocks <= 0 || vars.splits <= 1) return vars.splits;
  LaunchVars one = fill_rows > 0 ? BucketLaunchVars(fill_rows) : vars;
  one.splits = 1;
  int64_t splits = 1;
  for (const ParsedLaunch& p : launches) {
    bool split = false;
    for (const GridExpr& g : p.grid) split |= g.var == LaunchVar::kSplits;
    if (!split || !p.when.Holds(vars)) continue;
    int64_t blocks = 1;
    for (const GridExpr& g : p.grid) blocks *= std::max<int64_t>(1, g.Evaluate(one));
    splits = std::max(splits, (fill_blocks + blocks - 1) / blocks);
  }
  return std::min(splits, vars.splits);
}

}  // namespace

int64_t CudaActivationBytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "f16") return 2;
  if (dtype == "f32") return 4;
  return 0;
}

int64_t CudaBufferBytes(const Manifest& m, size_t index, int64_t max_batch_tokens,
                        int64_t max_logits) {
  const ManifestBuffer& b = m.buffers[index];
  // Logits rows (the logits and a TP rank's slice of them) are f32, as the
  // generated code writes them.
  const bool logits = b.rows == "logits";
  int64_t rows = logits ? max_logits : max_batch_tokens;
  int64_t elem = logits ? 4 : CudaActivationBytes(m.cuda.activation_dtype);
  return rows * b.row_elems * elem;
}

int64_t AttentionSplits(int64_t max_context, int64_t split_keys) {
  if (split_keys <= 0) return 1;
  return std::max<int64_t>(1, (max_context + split_keys - 1) / split_keys);
}

// A RowPick is staged as the device's llmc_cuda_pick, byte for byte.
constexpr size_t kIntsPerPick = sizeof(llmc_cuda_pick) / sizeof(int32_t);
static_assert(sizeof(RowPick) == sizeof(llmc_cuda_pick) &&
                  offsetof(RowPick, row) == offsetof(llmc_cuda_pick, row) &&
                  offsetof(RowPick, mask_begin) == offsetof(llmc_cuda_pick, mask_begin) &&
                  offsetof(RowPick, mask_count) == offsetof(llmc_cuda_pick, mask_count) &&
                  offsetof(RowPick, top_k) == offsetof(llmc_cuda_pick, top_k) &&
                  offsetof(RowPick, temperature) == offsetof(llmc_cuda_pick, temperature) &&
                  offsetof(RowPick, top_p) == offsetof(llmc_cuda_pick, top_p) &&
                  offsetof(RowPick, min_p) == offsetof(llmc_cuda_pick, min_p) &&
                  offsetof(RowPick, logprobs) == offsetof(llmc_cuda_pick, logprobs) &&
                  offsetof(RowPick, logprob_begin) == offsetof(llmc_cuda_pick, logprob_begin) &&
                  offsetof(RowPick, penalty_begin) == offsetof(llmc_cuda_pick, penalty_begin) &&
                  offsetof(RowPick, penalty_count) == offsetof(llmc_cuda_pick, penalty_count) &&
                  offsetof(RowPick, repetition_penalty) ==
                      offsetof(llmc_cuda_pick, repetition_penalty) &&
                  offsetof(RowPick, presence_penalty) == offsetof(llmc_cuda_pick, presence_penalty) &&
                  offsetof(RowPick, frequency_penalty) ==
                      offsetof(llmc_cuda_pick, frequency_penalty) &&
                  offsetof(RowPick, forced) == offsetof(llmc_cuda_pick, forced) &&
                  offsetof(RowPick, seed) == offsetof(llmc_cuda_pick, seed) &&
                  offsetof(RowPick, draw) == offsetof(llmc_cuda_pick, draw),
              "RowPick and llmc_cuda_pick differ");
static_assert(sizeof(PickPenalty) == sizeof(llmc_cuda_penalty) &&
                  offsetof(PickPenalty, token) == offsetof(llmc_cuda_penalty, token) &&
                  offsetof(PickPenalty, count) == offsetof(llmc_cuda_penalty, count),
              "PickPenalty and llmc_cuda_penalty differ");
static_assert(sizeof(PickLogprob) == sizeof(llmc_cuda_logprob) &&
                  offsetof(PickLogprob, token) == offsetof(llmc_cuda_logprob, token) &&
                  offsetof(PickLogprob, logprob) == offsetof(llmc_cuda_logprob, logprob),
              "PickLogprob and llmc_cuda_logprob differ");
static_assert(sizeof(TokenFeed) == sizeof(llmc_cuda_feed) &&
                  offsetof(TokenFeed, token) == offsetof(llmc_cuda_feed, token) &&
                  offsetof(TokenFeed, pick) == offsetof(llmc_cuda_feed, pick),
              "TokenFeed and llmc_cuda_feed differ");
static_assert(kMaxPickMaskedIds == LLMC_CUDA_MAX_PICK_MASKED &&
                  kMaxPickTopK == LLMC_CUDA_MAX_PICK_TOP_K &&
                  kMaxPickLogprobs == LLMC_CUDA_MAX_PICK_LOGPROBS &&
                  kMaxPickPenalties == LLMC_CUDA_MAX_PICK_PENALTIES,
              "the batch's and the device's pick limits differ");

StagingLayout PlanStaging(const StepBatch& b, int64_t block_columns, int64_t rows) {
  StagingLayout l;
  l.block_columns = std::max(block_columns, b.max_blocks);
  l.rows = rows > 0 ? std::max(rows, b.num_seqs()) : 0;
  const size_t tokens = l.rows ? size_t(l.rows) : b.tokens.size();
  const size_t seqs = l.rows ? size_t(l.rows) : size_t(b.num_seqs());
  const size_t logits = l.rows ? size_t(l.rows) : b.logits_rows.size();
  int64_t at = 0;
  auto place = [&](int64_t* offset, size_t count) {
    *offset = at;
    at = Align(at + int64_t(count));
  };
  place(&l.tokens, tokens);
  place(&l.positions, tokens);
  place(&l.query_starts, seqs + 1);
  place(&l.context_lens, seqs);
  place(&l.slot_mapping, tokens);
  place(&l.logits_rows, logits);
  place(&l.block_tables, seqs * size_t(l.block_columns));
  l.step_end = at;
  place(&l.picks, b.picks.size() * kIntsPerPick);
  place(&l.masked_ids, b.masked_ids.size());
  place(&l.penalties, b.penalties.size() * 2);
  place(&l.feeds, b.feeds.size() * 2);
  l.total = at;
  return l;
}

void PackStaging(const StepBatch& b, const StagingLayout& l, int32_t* out) {
  auto put = [&](int64_t offset, const std::vector<int32_t>& v) {
    if (!v.empty()) std::memcpy(out + offset, v.data(), v.size() * sizeof(int32_t));
  };
  const int64_t seqs = b.num_seqs();
  if (l.rows == 0) {
    std::memset(out, 0, size_t(l.total) * sizeof(int32_t));
  } else {
    // Padding rows past the batch's: no context, no cache slot.
    std::memset(out, 0, size_t(l.block_tables) * sizeof(int32_t));
    for (int64_t i = seqs; i < l.rows; ++i) {
      out[l.query_starts + i + 1] = int32_t(i + 1);
      out[l.slot_mapping + i] = -1;
    }
    for (int64_t i = int64_t(b.logits_rows.size()); i < l.rows; ++i)
      out[l.logits_rows + i] = int32_t(i);
    std::memset(out + l.step_end, 0, size_t(l.total - l.step_end) * sizeof(int32_t));
  }
  put(l.tokens, b.tokens);
  put(l.positions, b.positions);
  put(l.query_starts, b.query_starts);
  put(l.context_lens, b.context_lens);
  put(l.slot_mapping, b.slot_mapping);
  put(l.logits_rows, b.logits_rows);
  if (l.block_columns == b.max_blocks) {
    put(l.block_tables, b.block_tables);
  } else {
    for (int64_t s = 0; s < seqs; ++s) {
      int32_t* row = out + l.block_tables + s * l.block_columns;
      if (b.max_blocks > 0)
        std::memcpy(row, b.block_tables.data() + s * b.max_blocks,
                    size_t(b.max_blocks) * sizeof(int32_t));
      // A graph step's upload takes the batch's columns only.
      if (l.rows == 0) std::fill(row + b.max_blocks, row + l.block_columns, -1);
    }
  }
  if (!b.picks.empty())
    std::memcpy(out + l.picks, b.picks.data(), b.picks.size() * sizeof(llmc_cuda_pick));
  put(l.masked_ids, b.masked_ids);
  if (!b.penalties.empty())
    std::memcpy(out + l.penalties, b.penalties.data(), b.penalties.size() * sizeof(PickPenalty));
  if (!b.feeds.empty())
    std::memcpy(out + l.feeds, b.feeds.data(), b.feeds.size() * sizeof(TokenFeed));
}

llmc_cuda_step_info MakeStepInfo(const StepBatch& b, const StagingLayout& l,
                                 cuda::CUdeviceptr staging, int64_t block_size) {
  auto at = [&](int64_t offset) {
    return static_cast<const int*>(DevicePointer(staging + uint64_t(offset) * sizeof(int32_t)));
  };
  llmc_cuda_step_info info{};
  info.num_tokens = int(l.rows ? l.rows : b.num_tokens());
  info.num_seqs = int(l.rows ? l.rows : b.num_seqs());
  info.num_logits = int(l.rows ? l.rows : int64_t(b.logits_rows.size()));
  info.max_blocks = int(l.block_columns);
  info.block_size = int(block_size);
  info.tokens = at(l.tokens);
  info.positions = at(l.positions);
  info.query_starts = at(l.query_starts);
  info.context_lens = at(l.context_lens);
  info.block_tables = at(l.block_tables);
  info.slot_mapping = at(l.slot_mapping);
  info.logits_rows = at(l.logits_rows);
  return info;
}

bool IsGraphStep(const StepBatch& b) {
  int64_t t = b.num_tokens();
  if (t < 1 || t > kCudaGraphMaxTokens || t != b.num_seqs()) return false;
  for (size_t i = 0; i < b.query_starts.size(); ++i)
    if (b.query_starts[i] != int32_t(i)) return false;
  return true;
}

std::vector<int64_t> CudaGraphBuckets(int64_t most) {
  static constexpr int64_t kBuckets[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  most = std::min(most, kCudaGraphMaxTokens);
  std::vector<int64_t> out;
  for (int64_t b : kBuckets)
    if (b <= most) out.push_back(b);
  if (most >= 1 && out.back() != most) out.push_back(most);
  return out;
}

int64_t CudaGraphBucketOf(int64_t seqs) {
  for (int64_t b : CudaGraphBuckets(kCudaGraphMaxTokens))
    if (b >= seqs) return b;
  return 0;
}

LaunchVars BucketLaunchVars(int64_t bucket) {
  return LaunchVars{.tokens = bucket, .logits = bucket, .queries = 1, .seqs = bucket};
}

bool SameStepInfo(const llmc_cuda_step_info& a, const llmc_cuda_step_info& b) {
  return a.num_tokens == b.num_tokens && a.num_seqs == b.num_seqs &&
         a.num_logits == b.num_logits && a.max_blocks == b.max_blocks &&
         a.block_size == b.block_size && a.tokens == b.tokens && a.positions == b.positions &&
         a.query_starts == b.query_starts && a.context_lens == b.context_lens &&
         a.block_tables == b.block_tables && a.slot_mapping == b.slot_mapping &&
         a.logits_rows == b.logits_rows;
}

bool SameLaunches(const std::vector<SelectedLaunch>& a, const std::vector<SelectedLaunch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].step != b[i].step || a[i].launch != b[i].launch || a[i].grid != b[i].grid ||
        a[i].block != b[i].block || a[i].splits != b[i].splits || a[i].kind != b[i].kind ||
        a[i].rows != b[i].rows)
      return false;
  return true;
}

absl::StatusOr<std::vector<std::vector<ParsedLaunch>>> ParseCudaLaunches(const ManifestCuda& c) {
  std::vector<std::vector<ParsedLaunch>> parsed(c.kernels.size());
  for (size_t k = 0; k < c.kernels.size(); ++k) {
    for (size_t i = 0; i < c.kernels[k].launches.size(); ++i) {
      const ManifestCudaLaunch& l = c.kernels[k].launches[i];
      // ValidateManifest has accepted these; errors here mean a manifest
      // built in memory without it.
      std::string field = absl::StrFormat("cuda.kernels[%d].launches[%d]", k, i);
      if (l.grid.size() != 3 || l.block < 1 || l.block > 1024)
        return absl::InvalidArgumentError(field + ": needs 3 grid dimensions and a block of 1 to 1024");
      ParsedLaunch p;
      for (size_t d = 0; d < 3; ++d) {
        auto g = ParseGridExpr(l.grid[d]);
        if (!g.ok()) return absl::InvalidArgumentError(field + ".grid: " + std::string(g.status().message()));
        p.grid[d] = *g;
      }
      auto when = ParseWhenExpr(l.when);
      if (!when.ok()) return absl::InvalidArgumentError(field + ".when: " + std::string(when.status().message()));
      p.when = *when;
      p.block = unsigned(l.block);
      parsed[k].push_back(p);
    }
  }
  return parsed;
}

LaunchVars StepLaunchVars(const StepBatch& b) {
  LaunchVars v;
  v.tokens = b.num_tokens();
  v.logits = int64_t(b.logits_rows.size());
  v.seqs = b.num_seqs();
  for (size_t s = 0; s + 1 < b.query_starts.size(); ++s)
    v.queries = std::max<int64_t>(v.queries, b.query_starts[s + 1] - b.query_starts[s]);
  return v;
}

int64_t StepScratchFloats(const ManifestCuda& c,
                          const std::vector<std::vector<ParsedLaunch>>& parsed,
                          const LaunchVars& step, int64_t max_context) {
  int64_t floats = 0;
  for (size_t k = 0; k < c.kernels.size() && k < parsed.size(); ++k) {
    const ManifestCudaKernel& kernel = c.kernels[k];
    if (kernel.heads <= 0) continue;  // no attention in this kernel
    // A ticket counter per token and head, whatever the splits: the cache
    // write zeroes them on every step.
    const int64_t counters = (step.tokens * kernel.heads + 3) / 4 * 4;
    floats = std::max(floats, counters);
    LaunchVars vars = step;
    vars.splits = AttentionSplits(max_context, kernel.split_keys);
    if (vars.splits <= 1) continue;
    for (const ParsedLaunch& p : parsed[k]) {
      // The grid's split dimension (splits, or min(splits,cap) for a kernel
      // whose splits grow their share of the keys) is the partials' stride.
      int64_t grid_splits = 0;
      for (const GridExpr& g : p.grid)
        if (g.var == LaunchVar::kSplits) grid_splits = std::max(grid_splits, g.Evaluate(vars));
      if (grid_splits > 1 && p.when.Holds(vars))
        floats = std::max(floats, counters + step.tokens * kernel.heads * grid_splits *
                                                 (kernel.head_dim + 2));
    }
  }
  for (size_t k = 0; k < c.kernels.size() && k < parsed.size(); ++k)
    for (size_t l = 0; l < c.kernels[k].launches.size() && l < parsed[k].size(); ++l) {
      const int64_t per_block = c.kernels[k].launches[l].split_floats;
      const ParsedLaunch& p = parsed[k][l];
      if (per_block <= 0 || !p.when.Holds(step)) continue;
      int64_t blocks = per_block;
      for (const GridExpr& g : p.grid) blocks *= g.Evaluate(step);
      floats = std::max(floats, blocks);
    }
  return kScratchHeaderFloats + floats;
}

int64_t SplitGemmTickets(const ManifestCuda& c,
                         const std::vector<std::vector<ParsedLaunch>>& parsed,
                         const LaunchVars& most) {
  int64_t tickets = 0;
  for (size_t k = 0; k < c.kernels.size() && k < parsed.size(); ++k)
    for (size_t l = 0; l < c.kernels[k].launches.size() && l < parsed[k].size(); ++l)
      if (c.kernels[k].launches[l].split_floats > 0)
        tickets = std::max(tickets, parsed[k][l].grid[0].Evaluate(most) *
                                        parsed[k][l].grid[1].Evaluate(most));
  return tickets;
}

absl::Status SelectLaunches(const ManifestCuda& c,
                            const std::vector<std::vector<ParsedLaunch>>& parsed,
                            const LaunchVars& step, int64_t max_context, int64_t fill_blocks,
                            std::vector<SelectedLaunch>* out, int64_t fill_rows) {
  out->clear();
  constexpr int64_t kMaxDim[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
  for (size_t s = 0; s < c.steps.size(); ++s) {
    if (!c.steps[s].collective.empty()) {
      SelectedLaunch sel;
      sel.step = s;
      sel.kind = LaunchKind::kCollective;
      out->push_back(sel);
      continue;
    }
    size_t k = size_t(c.steps[s].kernel);
    LaunchVars vars = step;
    vars.splits = AttentionSplits(max_context, c.kernels[k].split_keys);
    vars.splits = FillSplits(parsed[k], vars, fill_blocks, fill_rows);
    for (size_t i = 0; i < parsed[k].size(); ++i) {
      const ParsedLaunch& p = parsed[k][i];
      if (!p.when.Holds(vars)) continue;
      SelectedLaunch sel;
      sel.step = s;
      sel.launch = i;
      sel.block = p.block;
      sel.splits = vars.splits;
      for (size_t d = 0; d < 3; ++d) {
        int64_t v = p.grid[d].Evaluate(vars);
        if (v < 1 || v > kMaxDim[d])
          return absl::InvalidArgumentError(absl::StrFormat(
              "CUDA launch %s of %s (step %d): grid dimension %c = %s is %d, outside 1 to %d "
              "(T %d, L %d, Q %d, S %d, splits %d)",
              c.kernels[k].launches[i].symbol, c.kernels[k].name, s, "xyz"[d],
              p.grid[d].ToString(), v, kMaxDim[d], vars.tokens, vars.logits, vars.queries,
              vars.seqs, vars.splits));
        sel.grid[d] = unsigned(v);
      }
      out->push_back(sel);
    }
  }
  return absl::OkStatus();
}

bool GemmPolicy::UsesCublasLt(const ManifestCuda& c, size_t kernel, int64_t rows) const {
  if (kernel >= c.kernels.size() || c.kernels[kernel].gemm.n == 0) return false;
  switch (mode) {
    case Mode::kOwn: return false;
    case Mode::kCublasLt: return true;
    case Mode::kTuned: break;
  }
  if (kernel >= tuned.size() || tuned[kernel].empty()) return false;
  for (const auto& [max_rows, lt] : tuned[kernel])
    if (rows <= max_rows) return lt;
  return tuned[kernel].back().second;
}

bool GemmPolicy::MayUseCublasLt(const ManifestCuda& c, size_t kernel) const {
  if (kernel >= c.kernels.size() || c.kernels[kernel].gemm.n == 0) return false;
  switch (mode) {
    case Mode::kOwn: return false;
    case Mode::kCublasLt: return true;
    case Mode::kTuned: break;
  }
  if (kernel >= tuned.size()) return false;
  for (const auto& [max_rows, lt] : tuned[kernel])
    if (lt) return true;
  return false;
}

void ApplyGemmPolicy(const ManifestCuda& c, const GemmPolicy& policy, const LaunchVars& step,
                     std::vector<SelectedLaunch>* launches, std::vector<SelectedLaunch>* scratch) {
  if (policy.mode == GemmPolicy::Mode::kOwn) return;
  std::vector<SelectedLaunch>& v = *launches;
  std::vector<SelectedLaunch> local;
  std::vector<SelectedLaunch>& replaced = scratch ? *scratch : local;
  replaced.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const SelectedLaunch sel = v[i];
    if (sel.kind == LaunchKind::kCollective) {
      replaced.push_back(sel);
      continue;
    }
    size_t k = size_t(c.steps[sel.step].kernel);
    const ManifestCudaKernel& kernel = c.kernels[k];
    int64_t rows = kernel.gemm.rows == "L" ? step.logits : step.tokens;
    if (sel.kind != LaunchKind::kKernel || kernel.launches[sel.launch].impl != "llmc" ||
        !policy.UsesCublasLt(c, k, rows)) {
      replaced.push_back(sel);
      continue;
    }
    // The first replaced launch of this step entry brings the GEMM; the
    // others (there is one GEMV or GEMM per step) go.
    if (!replaced.empty() && replaced.back().step == sel.step &&
        replaced.back().kind == LaunchKind::kGemmEpi)
      continue;
    SelectedLaunch part = sel;
    part.rows = rows;
    part.splits = 1;
    if (!kernel.gemm.deq.empty()) {
      part.kind = LaunchKind::kGemmDequant;
      part.block = 256;
      part.grid = {unsigned((kernel.gemm.n * kernel.gemm.k / 8 + 255) / 256), 1, 1};
      replaced.push_back(part);
    }
    part.block = 128;
    part.kind = LaunchKind::kGemmPre;
    part.grid = {unsigned(rows), 1, 1};
    replaced.push_back(part);
    part.kind = LaunchKind::kGemmMatmul;
    part.block = 0;
    replaced.push_back(part);
    part.kind = LaunchKind::kGemmEpi;
    part.block = 128;
    part.grid = {unsigned((kernel.gemm.columns + 127) / 128), unsigned(rows), 1};
    replaced.push_back(part);
  }
  v.swap(replaced);
}

absl::StatusOr<llmc_cuda_args> PackArgs(const Manifest& m, const ManifestStep& step,
                                        const CudaBindings& bindings) {
  if (step.buffers.size() > LLMC_CUDA_MAX_BUFFERS || step.weights.size() > LLMC_CUDA_MAX_WEIGHTS ||
      step.caches.size() > 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "CUDA step '%s' binds %d buffers, %d weights and %d caches; the ABI takes %d, %d and 1",
        step.name, step.buffers.size(), step.weights.size(), step.caches.size(),
        LLMC_CUDA_MAX_BUFFERS, LLMC_CUDA_MAX_WEIGHTS));
  llmc_cuda_args args{};
  for (size_t i = 0; i < step.buffers.size(); ++i) {
    size_t b = size_t(step.buffers[i]);
    if (b >= bindings.buffers.size() || bindings.buffers[b] == 0)
      return absl::InternalError(absl::StrFormat("CUDA step '%s': buffer %d has no device memory",
                                                 step.name, b));
    args.buffers[i] = DevicePointer(bindings.buffers[b]);
  }
  for (size_t i = 0; i < step.weights.size(); ++i) {
    size_t w = size_t(step.weights[i]);
    if (w >= m.weights.tensors.size())
      return absl::InvalidArgumentError(absl::StrFormat("CUDA step '%s': weight %d out of range",
                                                        step.name, w));
    args.weights[i] = DevicePointer(bindings.weights + m.weights.tensors[w].offset);
  }
  if (!step.caches.empty()) {
    size_t layer = size_t(step.caches[0]);
    if (2 * layer + 1 >= bindings.caches.size())
      return absl::InvalidArgumentError(absl::StrFormat(
          "CUDA step '%s': KV cache of layer %d out of range", step.name, layer));
    args.caches[0] = DevicePointer(bindings.caches[2 * layer]);
    args.caches[1] = DevicePointer(bindings.caches[2 * layer + 1]);
  }
  args.scratch = static_cast<float*>(DevicePointer(bindings.scratch));
  args.gemm_a = DevicePointer(bindings.gemm_a);
  args.gemm_d = static_cast<float*>(DevicePointer(bindings.gemm_d));
  args.gemm_b = DevicePointer(bindings.gemm_b);
  args.tickets = static_cast<int*>(DevicePointer(bindings.tickets));
  return args;
}

}  // namespace llmc
