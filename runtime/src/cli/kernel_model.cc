// The occupancy calculator and the launch-time model; kernel_model.h states
// the equations, this file follows them term by term.
#include "kernel_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace llmc::perf {
namespace {

// Architectural constants of sm_80 and sm_90 that DeviceSpec does not carry
// (they are the same on both; cuda_occupancy.h).
constexpr int kWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxRegsPerThread = 255;
constexpr int kRegsPerBlock = 65536;     // the per-block register limit
constexpr int kRegAllocUnit = 256;       // registers, per warp
constexpr int kSubPartitions = 4;        // each holds a quarter of the register file
constexpr int64_t kSmemAllocUnit = 128;  // bytes
// A warp issues at most one instruction per this many cycles: the simplified
// dependent-issue latency that starves a scheduler with few warps.
constexpr double kCyclesPerWarpIssue = 4;

int64_t RoundUp(int64_t x, int64_t unit) { return (x + unit - 1) / unit * unit; }
int64_t CeilDiv(int64_t x, int64_t d) { return (x + d - 1) / d; }

}  // namespace

Occupancy TheoreticalOccupancy(const DeviceSpec& d, const KernelResources& k) {
  const int64_t warps_per_block = CeilDiv(std::max(k.threads_per_block, 1), kWarpSize);

  // Listed in tie order: the first of equal limits names the limiter (the
  // fixed hardware limits first; see kernel_model.h).
  struct Limit {
    const char* name;
    int64_t blocks;
  };
  Limit limits[4] = {
      {"warps", 0}, {"blocks", d.max_blocks_per_sm}, {"registers", 0}, {"shared memory", 0}};

  if (k.threads_per_block <= kMaxThreadsPerBlock)
    limits[0].blocks = d.max_warps_per_sm / warps_per_block;

  // Registers go to whole warps inside each sub-partition, so a warp's
  // registers cannot straddle two quarters of the register file.
  const int64_t regs_per_warp = RoundUp(int64_t(std::max(k.regs, 0)) * kWarpSize, kRegAllocUnit);
  if (regs_per_warp == 0) {
    limits[2].blocks = std::numeric_limits<int>::max();
  } else if (k.regs <= kMaxRegsPerThread &&
             regs_per_warp * RoundUp(warps_per_block, kSubPartitions) <= kRegsPerBlock) {
    const int64_t warps_per_sub = d.regs_per_sm / kSubPartitions / regs_per_warp;
    limits[2].blocks = warps_per_sub * kSubPartitions / warps_per_block;
  }

  // The reserved kilobyte is the driver's, per block, and counts before the
  // rounding; the opt-in per-block limit is the whole SM less that reserve.
  const int64_t smem_per_block =
      RoundUp(k.static_smem + k.dynamic_smem + d.smem_per_block_reserved, kSmemAllocUnit);
  if (smem_per_block <= d.smem_per_sm) limits[3].blocks = d.smem_per_sm / smem_per_block;

  const Limit* least = &limits[0];
  for (const Limit& l : limits)
    if (l.blocks < least->blocks) least = &l;

  Occupancy o;
  o.blocks_per_sm = int(least->blocks);
  o.limiter = least->name;
  o.fraction = double(least->blocks * warps_per_block) / d.max_warps_per_sm;
  return o;
}

Prediction Predict(const DeviceSpec& d, const KernelResources& k, const LaunchWork& w) {
  Prediction p;
  p.occupancy = TheoreticalOccupancy(d, k);
  p.fixed_s = d.fixed_s;
  if (w.blocks <= 0) {  // nothing runs: only the launch itself costs
    p.seconds = d.fixed_s;
    p.bound = "latency";
    return p;
  }
  if (p.occupancy.blocks_per_sm <= 0) {
    const double inf = std::numeric_limits<double>::infinity();
    p.mem_s = p.issue_s = p.fp32_s = p.tensor_s = p.seconds = inf;
    p.bound = "unlaunchable";
    return p;
  }

  const int64_t warps_per_block = CeilDiv(std::max(k.threads_per_block, 1), kWarpSize);
  const int64_t slots = int64_t(d.sms) * p.occupancy.blocks_per_sm;
  p.waves = double(w.blocks) / double(slots);
  const double sms_used = double(std::min<int64_t>(d.sms, w.blocks));
  const double resident_warps = double(std::min(w.blocks, slots) * warps_per_block);
  const double warps_per_sm = resident_warps / sms_used;

  // Memory: the DRAM's achievable bandwidth, unless too few bytes are in
  // flight to cover the latency.
  double bandwidth = d.dram_bytes_per_s * d.mem_efficiency;
  if (w.load_bytes_per_warp_trip > 0)
    bandwidth = std::min(bandwidth, resident_warps * w.load_bytes_per_warp_trip / d.mem_latency_s);
  p.mem_s = w.bytes / bandwidth;

  // The last wave of a grid that is not whole waves runs on part of the GPU;
  // compute terms pay it, memory overlaps it (kernel_model.h).
  const double tail = p.waves > 1 ? double(CeilDiv(w.blocks, slots)) / p.waves : 1.0;
  const double issue_rate = std::min(d.issue_per_sm_per_clock, warps_per_sm / kCyclesPerWarpIssue);
  p.issue_s =
      tail * w.warp_instructions / (sms_used * issue_rate * d.clock_hz * d.issue_efficiency);
  const double sm_share = sms_used / d.sms;
  p.fp32_s = tail * w.flops / (d.fp32_flops_per_s * sm_share);
  const double tensor_rate = w.warpgroup_mma ? d.tensor_flops_per_s : d.warp_mma_flops_per_s;
  p.tensor_s = tail * w.tensor_flops / (tensor_rate * sm_share);

  // Ties go to the earlier term; the launch overhead must exceed them all.
  const std::pair<double, const char*> terms[] = {
      {p.mem_s, "memory"}, {p.issue_s, "instructions"}, {p.fp32_s, "fp32"}, {p.tensor_s, "tensor"}};
  const auto* top = &terms[0];
  for (const auto& t : terms)
    if (t.first > top->first) top = &t;
  p.bound = d.fixed_s > top->first ? "latency" : top->second;
  p.seconds = top->first + d.fixed_s;
  return p;
}

Prediction PredictLibraryGemm(const DeviceSpec& d, const LibraryGemm& g) {
  Prediction p;
  p.fixed_s = d.fixed_s;
  const double rows = double(g.rows), n = double(g.n), k = double(g.k);
  p.tensor_s = 2 * rows * n * k / (d.tensor_flops_per_s * d.library_gemm_efficiency);
  const double bytes = (n * k + rows * k) * g.operand_bytes + rows * n * g.out_bytes;
  p.mem_s = bytes / (d.dram_bytes_per_s * d.mem_efficiency);
  p.bound = p.mem_s >= p.tensor_s ? "memory" : "tensor";
  if (d.fixed_s > std::max(p.mem_s, p.tensor_s)) p.bound = "latency";
  p.seconds = std::max(p.mem_s, p.tensor_s) + d.fixed_s;
  return p;
}

}  // namespace llmc::perf
