// The device table of the performance model (kernel_model.h), and its
// lookup. Each entry says where its numbers come from; "guess" marks the
// ones still to be calibrated against measured launches.
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "kernel_model.h"

namespace llmc::perf {
namespace {

const std::vector<DeviceSpec>& Devices() {
  // Never destroyed: lookups may run during static destruction.
  static const auto* const kDevices = new std::vector<DeviceSpec>{
      // NVIDIA H200 SXM (Hopper GH100, 141 GB HBM3e).
      {
          .name = "H200",
          .arch = "sm_90",
          .sms = 132,                   // spec
          .clock_hz = 1.98e9,           // spec boost clock
          .dram_bytes_per_s = 4.24e12,  // measured 2026-12-04: device-to-device copy, read+write
          .issue_per_sm_per_clock = 4,  // 4 schedulers x 1 warp-instruction
          .fp32_flops_per_s = 132 * 128 * 2 * 1.98e9,  // 128 FP32 lanes/SM x FFMA, at clock_hz
          .tensor_flops_per_s = 790e12,                // measured: bf16 dense GEMM
          // guess, to be calibrated (gpu-check stage 5 times both GEMMs):
          // mma.sync is Ampere's instruction, which Hopper runs at about
          // half to two thirds of wgmma's rate by published microbenchmarks
          // (FlashAttention-2, on mma.sync, peaks near 350 TFLOP/s on an
          // H100 where FlashAttention-3 on wgmma reaches 600-750).
          .warp_mma_flops_per_s = 0.6 * 790e12,
          .fixed_s = 2.0e-6,                           // guess: launch + ramp, to be calibrated
          .mem_latency_s = 700e-9,  // guess: loaded DRAM latency, to be calibrated
          .max_warps_per_sm = 64,   // CUDA programming guide, compute capability 9.0
          .max_blocks_per_sm = 32,
          .regs_per_sm = 65536,
          .smem_per_sm = 228 * 1024,        // the largest carveout
          .smem_per_block_reserved = 1024,  // the driver's, per block
          .issue_efficiency = 0.8,          // guess, to be calibrated
          .mem_efficiency = 0.92,           // guess, to be calibrated
          // 2026-12-04, pp512 with --gemm=cublaslt (bf16): 16.9 ms a step, of
          // which ncu gave 3.7 ms to the other kernels (attention, RoPE, LM
          // head): 7.15 TFLOP of GEMMs in ~13.2 ms = 0.69 of 790 TFLOP/s
          // (pp2048 gives ~0.62 after its 18 ms of attention). Stage 5 of
          // gpu-check.sh times every GEMM shape on cuBLASLt: calibrate here.
          .library_gemm_efficiency = 0.69,
          .l2_bytes = 50.0 * (1 << 20),  // spec (GH100 as in H100 SXM)
      },
      // NVIDIA A100 80GB SXM (Ampere GA100). Uncalibrated: every number is
      // the datasheet's or the H200's guess; nothing here was measured.
      {
          .name = "A100-80GB",
          .arch = "sm_80",
          .sms = 108,                                 // spec
          .clock_hz = 1.41e9,                         // spec boost clock
          .dram_bytes_per_s = 2.04e12,                // spec (2039 GB/s HBM2e), uncalibrated
          .issue_per_sm_per_clock = 4,                // 4 schedulers x 1 warp-instruction
          .fp32_flops_per_s = 108 * 64 * 2 * 1.41e9,  // 64 FP32 lanes/SM x FFMA, at clock_hz
          .tensor_flops_per_s = 312e12,               // spec: bf16 dense
          .warp_mma_flops_per_s = 312e12,             // mma.sync is Ampere's own
          .fixed_s = 2.0e-6,                          // guess (the H200's), uncalibrated
          .mem_latency_s = 700e-9,                    // guess (the H200's), uncalibrated
          .max_warps_per_sm = 64,  // CUDA programming guide, compute capability 8.0
          .max_blocks_per_sm = 32,
          .regs_per_sm = 65536,
          .smem_per_sm = 164 * 1024,        // the largest carveout
          .smem_per_block_reserved = 1024,  // the driver's, per block
          .issue_efficiency = 0.8,          // guess (the H200's), uncalibrated
          .mem_efficiency = 0.92,           // guess (the H200's), uncalibrated
          .library_gemm_efficiency = 0.69,  // guess (the H200's), uncalibrated
          .l2_bytes = 40.0 * (1 << 20),     // spec
      },
  };
  return *kDevices;
}

// "sm_90a" runs on the same silicon as "sm_90": drop an arch's feature suffix.
std::string BaseArch(std::string s) {
  if (s.size() > 3 && s.rfind("sm_", 0) == 0 && std::isalpha(static_cast<unsigned char>(s.back())))
    s.pop_back();
  return s;
}

}  // namespace

const DeviceSpec* FindDevice(std::string_view arch_or_name) {
  std::string key(arch_or_name);
  absl::AsciiStrToLower(&key);
  key = BaseArch(key);
  for (const DeviceSpec& d : Devices()) {
    const std::string name = absl::AsciiStrToLower(d.name);
    // The family name alone ("a100") finds its one entry ("A100-80GB").
    const std::string family = name.substr(0, name.find('-'));
    if (key == name || key == family || key == absl::AsciiStrToLower(d.arch)) return &d;
  }
  return nullptr;
}

std::vector<std::string> KnownDevices() {
  std::vector<std::string> names;
  for (const DeviceSpec& d : Devices()) names.push_back(d.name);
  return names;
}

}  // namespace llmc::perf
