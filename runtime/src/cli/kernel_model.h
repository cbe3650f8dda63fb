// A performance model that predicts one CUDA kernel launch's time without a
// GPU, from ptxas's resources (registers, shared memory), the launch shape and
// the launch's work (bytes, instructions, flops). `llmc inspect --kernels`
// reports it next to each launch; calibrating the device table against
// measurements is what makes the numbers trustworthy. Internal to cli/.
//
// THE MODEL
//
// 1. Occupancy (TheoreticalOccupancy), as NVIDIA's occupancy calculator
//    (cuda_occupancy.h) computes it for sm_80 and sm_90, with the default
//    shared-memory carveout (the whole of smem_per_sm) and a kernel that has
//    opted in to the largest dynamic shared memory:
//      warps/block  = ceil(threads_per_block / 32)        (0 blocks if > 1024 threads)
//      regs/warp    = roundup(regs * 32, 256)              (= regs rounded up to 8, x 32)
//      registers    : each of the 4 sub-partitions holds regs_per_sm/4 registers
//                     and whole warps: warps/SM = 4 * floor(regs_per_sm/4 / regs/warp),
//                     blocks = floor(warps/SM / warps/block); 0 blocks when
//                     regs/warp * roundup(warps/block, 4) > 65536 (the per-block
//                     hardware check) or regs > 255
//      warps        : floor(max_warps_per_sm / warps/block)
//      blocks       : max_blocks_per_sm
//      shared memory: per block roundup(static + dynamic + smem_per_block_reserved, 128);
//                     blocks = floor(smem_per_sm / that); 0 when that > smem_per_sm
//                     (the opt-in per-block limit is smem_per_sm - reserved)
//    blocks_per_sm is the smallest; `limiter` names it. Ties go to the fixed
//    hardware limits first (warps, blocks, then registers, shared memory): at a
//    tie, cutting registers or shared memory alone would not raise occupancy.
//    fraction = blocks_per_sm * warps/block / max_warps_per_sm.
//
// 2. The launch (Predict), blocks B, with slots = sms * blocks_per_sm:
//      waves          = B / slots
//      SMs in use     U = min(sms, B)
//      resident warps R = min(B, slots) * warps/block        (across the GPU)
//      warps per SM   w = R / U
//
//    memory:  mem_s = bytes / min(dram_bytes_per_s * mem_efficiency, L)
//             L (Little's law) = R * load_bytes_per_warp_trip / mem_latency_s: the
//             bytes in flight over the latency; omitted when the launch does not
//             know its bytes per trip (0). `bytes` = bytes read + bytes written
//             (the DRAM figure is a copy bandwidth, reads plus writes).
//    issue:   issue_s = warp_instructions / (U * r * clock_hz * issue_efficiency)
//             r = min(issue_per_sm_per_clock, w / 4): a warp issues at most one
//             instruction per 4 cycles (a simplification for the dependent-issue
//             latency), so an SM with fewer than 16 resident warps (4 per
//             scheduler) issues below its peak of 4 per clock.
//    fp32:    fp32_s   = flops        / (fp32_flops_per_s   * U / sms)
//    tensor:  tensor_s = tensor_flops / (rate * U / sms), rate the
//             warpgroup MMA's (tensor_flops_per_s) for a launch whose products
//             are wgmma, else mma.sync's (warp_mma_flops_per_s: on Hopper
//             mma.sync does not reach the tensor cores' full rate)
//    tail:    when waves > 1, issue_s, fp32_s and tensor_s are multiplied by
//             ceil(waves) / waves: the last, partial wave leaves SMs idle. Memory
//             is not: DRAM traffic of one wave overlaps the next. With waves <= 1
//             the U / sms scaling already accounts for idle SMs.
//    seconds = max(mem_s, issue_s, fp32_s, tensor_s) + fixed_s
//    bound   = the largest term ("memory", "instructions", "fp32", "tensor"; ties
//              in that order), or "latency" when fixed_s exceeds all of them.
//
//    A launch whose blocks cannot fit on an SM (blocks_per_sm 0) cannot run:
//    its terms and seconds are +infinity and bound is "unlaunchable". A launch
//    of 0 blocks costs fixed_s ("latency").
//
// What it leaves out: L2 hits (bytes are DRAM bytes), shared-memory bank
// conflicts, tail warps within a block, clock throttling, overlap of launches.
#ifndef LLMC_RUNTIME_CLI_KERNEL_MODEL_H_
#define LLMC_RUNTIME_CLI_KERNEL_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::perf {

// One GPU model. The table (device_specs.cc) says where each number comes from.
struct DeviceSpec {
  std::string name, arch;  // "H200", "sm_90"
  int sms;
  double clock_hz;                // the SM clock under load
  double dram_bytes_per_s;        // read + write
  double issue_per_sm_per_clock;  // warp-instructions: 4 (one per scheduler)
  double fp32_flops_per_s;        // FFMA = 2 flops, all SMs
  double tensor_flops_per_s;      // bf16 dense, all SMs (wgmma on Hopper)
  double warp_mma_flops_per_s;    // the same through mma.sync m16n8k16
  double fixed_s;                 // launch + ramp up/down, added to every launch
  double mem_latency_s;           // DRAM load latency under load (Little's law)
  int max_warps_per_sm, max_blocks_per_sm, regs_per_sm;
  int64_t smem_per_sm, smem_per_block_reserved;
  double issue_efficiency, mem_efficiency;  // achievable fraction of the peaks
  // A vendor library's GEMM (cuBLASLt): the fraction of tensor_flops_per_s
  // it sustains on prefill-sized bf16 GEMMs (PredictLibraryGemm).
  double library_gemm_efficiency;
  // Bytes of L2: a kernel's repeated passes over data the blocks in flight
  // hold in it come from L2, not DRAM (the device sampler's rows).
  double l2_bytes = 0;
};

// "sm_90", "sm_90a", "h200" -> H200; "sm_80", "a100", "A100-80GB" -> A100-80GB.
// Case-insensitive; nullptr when unknown.
const DeviceSpec* FindDevice(std::string_view arch_or_name);
// The names of the table's devices, in table order.
std::vector<std::string> KnownDevices();

// What ptxas reports for a kernel, and its block size.
struct KernelResources {
  int regs = 0;
  int threads_per_block = 128;
  int64_t static_smem = 0, dynamic_smem = 0;
};

struct Occupancy {
  int blocks_per_sm = 0;
  std::string limiter;  // "registers" | "shared memory" | "warps" | "blocks"
  double fraction = 0;  // active warps / max warps
};

Occupancy TheoreticalOccupancy(const DeviceSpec&, const KernelResources&);

// One launch's work, summed over all its blocks.
struct LaunchWork {
  int64_t blocks = 0;
  double bytes = 0, flops = 0, tensor_flops = 0, warp_instructions = 0;
  double load_bytes_per_warp_trip = 0;  // bytes a warp has in flight per hot-loop trip
  bool warpgroup_mma = false;  // its tensor flops are wgmma's (else mma.sync's)
};

struct Prediction {
  double seconds = 0, mem_s = 0, issue_s = 0, fp32_s = 0, tensor_s = 0, fixed_s = 0;
  std::string bound;  // "memory" | "instructions" | "fp32" | "tensor" | "latency"
  Occupancy occupancy;
  double waves = 0;
};

Prediction Predict(const DeviceSpec&, const KernelResources&, const LaunchWork&);

// A GEMM that a vendor library runs (cuBLASLt, for --gemm=cublaslt): llmc
// has neither its SASS nor its resources, so it is modelled as the library
// is measured, not as a launch:
//   tensor_s = 2 rows n k / (tensor_flops_per_s * library_gemm_efficiency)
//   mem_s    = (n k + rows k) * operand_bytes + rows n * out_bytes,
//              over dram_bytes_per_s * mem_efficiency
//   seconds  = max(tensor_s, mem_s) + fixed_s
// Wave quantization and the library's choice of tiles are in the
// efficiency, which is one number for all shapes: small GEMMs come out
// faster than the library is.
struct LibraryGemm {
  int64_t rows = 0, n = 0, k = 0;
  int operand_bytes = 2;  // A and B, the activation type
  int out_bytes = 4;      // D: f32
};
Prediction PredictLibraryGemm(const DeviceSpec&, const LibraryGemm&);

}  // namespace llmc::perf

#endif  // LLMC_RUNTIME_CLI_KERNEL_MODEL_H_
