// The launch-time model (runtime/src/cli/kernel_model.h) on hand-computed
// cases: each expected value is worked out in the comment above it from the
// H200 (or A100) entry of the device table.
//
// H200 constants used below:
//   achievable DRAM  = 4.24e12 * 0.92            = 3.9008e12 B/s
//   full issue rate  = 132 SMs * 4 * 1.98e9 * 0.8 = 836.352e9 warp-instr/s
//   fixed_s          = 2e-6 s
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

// The model is internal to cli/ (not under runtime/include): include it by
// its path from this file.
#include "../../../runtime/src/cli/kernel_model.h"

namespace llmc::perf {
namespace {

const DeviceSpec& H200() { return *FindDevice("sm_90"); }
const DeviceSpec& A100() { return *FindDevice("sm_80"); }

KernelResources Res(int regs, int threads, int64_t static_smem = 0, int64_t dynamic_smem = 0) {
  KernelResources k;
  k.regs = regs;
  k.threads_per_block = threads;
  k.static_smem = static_smem;
  k.dynamic_smem = dynamic_smem;
  return k;
}

// Relative comparison: the model is all doubles.
void ExpectNear(double actual, double expected, const char* what) {
  EXPECT_NEAR(actual, expected, std::abs(expected) * 1e-9) << what;
}

TEST(KernelModelDevices, FindDevice) {
  ASSERT_NE(FindDevice("sm_90"), nullptr);
  EXPECT_EQ(FindDevice("sm_90")->name, "H200");
  EXPECT_EQ(FindDevice("H200"), FindDevice("sm_90"));
  EXPECT_EQ(FindDevice("h200"), FindDevice("sm_90"));
  EXPECT_EQ(FindDevice("SM_90a"), FindDevice("sm_90"));  // wgmma's arch: same chip
  ASSERT_NE(FindDevice("sm_80"), nullptr);
  EXPECT_EQ(FindDevice("sm_80")->name, "A100-80GB");
  EXPECT_EQ(FindDevice("a100"), FindDevice("sm_80"));
  EXPECT_EQ(FindDevice("A100-80GB"), FindDevice("sm_80"));
  EXPECT_EQ(FindDevice("nope"), nullptr);
  EXPECT_EQ(FindDevice(""), nullptr);
  EXPECT_EQ(FindDevice("sm_"), nullptr);
  EXPECT_EQ(KnownDevices(), (std::vector<std::string>{"H200", "A100-80GB"}));
  // fp32 = 132 SMs * 128 lanes * 2 (FFMA) * 1.98e9 = 66.908e12.
  ExpectNear(H200().fp32_flops_per_s, 66.90816e12, "H200 fp32");
  // 108 * 64 * 2 * 1.41e9 = 19.491e12.
  ExpectNear(A100().fp32_flops_per_s, 19.49184e12, "A100 fp32");
}

// 118 regs -> 120 (x32 = 3776, rounded to 3840 per warp). A sub-partition
// holds 16384 registers: floor(16384/3840) = 4 warps, x4 = 16 warps/SM =
// 4 blocks of 4 warps. Warps allow 64/4 = 16, blocks 32, shared memory
// (1 KB reserved) 228. -> 4 blocks, registers, 16/64 = 25%: what ncu
// measured for a real 118-register kernel.
TEST(KernelModelOccupancy, RegisterLimited118) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(118, 128));
  EXPECT_EQ(o.blocks_per_sm, 4);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_DOUBLE_EQ(o.fraction, 0.25);
}

// 56 regs: 1792 per warp; floor(16384/1792) = 9 warps per sub-partition,
// 36/SM, floor(36/4) = 9 blocks (warps allow 16). -> 9, registers, 36/64.
TEST(KernelModelOccupancy, RegisterLimited56) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(56, 128));
  EXPECT_EQ(o.blocks_per_sm, 9);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_DOUBLE_EQ(o.fraction, 0.5625);
}

// 40 regs is still register-limited: 1280 per warp, floor(16384/1280) = 12
// per sub-partition, 48 warps/SM, 12 blocks < the warps' 16. -> 75%.
TEST(KernelModelOccupancy, RegisterLimited40) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(40, 128));
  EXPECT_EQ(o.blocks_per_sm, 12);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_DOUBLE_EQ(o.fraction, 0.75);
}

// 32 regs: 1024 per warp, 16 per sub-partition, 64 warps = 16 blocks; the
// warp limit is 64/4 = 16 too. The tie names the hardware limit, warps: fewer
// registers would not help. 100%.
TEST(KernelModelOccupancy, WarpLimitedTie) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(32, 128));
  EXPECT_EQ(o.blocks_per_sm, 16);
  EXPECT_EQ(o.limiter, "warps");
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
}

// 24 regs x 128: registers allow floor(16384/768) = 21 per sub-partition,
// 84 warps = 21 blocks; warps 16. -> 16, warps.
TEST(KernelModelOccupancy, WarpLimited) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(24, 128));
  EXPECT_EQ(o.blocks_per_sm, 16);
  EXPECT_EQ(o.limiter, "warps");
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
}

// 24 regs x 32 threads (1 warp/block): registers 84, warps 64, blocks 32.
// -> 32 blocks = 32 warps, blocks, 50%.
TEST(KernelModelOccupancy, BlockLimited) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(24, 32));
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_EQ(o.limiter, "blocks");
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
}

// 36 KB static shared, 64 regs, 128 threads: per block 36864 + 1024 reserved
// = 37888 (already a multiple of 128). H200: floor(233472/37888) = 6 blocks;
// registers allow 8 (2048 per warp, 8 per sub-partition, 32 warps). -> 6,
// shared memory, 24/64 = 37.5%. A100: floor(167936/37888) = 4 -> 25%.
TEST(KernelModelOccupancy, SharedMemoryLimited) {
  Occupancy o = TheoreticalOccupancy(H200(), Res(64, 128, 36 * 1024));
  EXPECT_EQ(o.blocks_per_sm, 6);
  EXPECT_EQ(o.limiter, "shared memory");
  EXPECT_DOUBLE_EQ(o.fraction, 0.375);
  Occupancy a = TheoreticalOccupancy(A100(), Res(64, 128, 36 * 1024));
  EXPECT_EQ(a.blocks_per_sm, 4);
  EXPECT_EQ(a.limiter, "shared memory");
  EXPECT_DOUBLE_EQ(a.fraction, 0.25);
}

// Rounding to 128 B counts: 100 B static + 1024 reserved = 1124 -> 1152.
// 24 regs x 32 threads is otherwise block-limited at 32; shared memory
// allows floor(233472/1152) = 202. With 7 KB dynamic on top: 7168 + 1124 =
// 8292 -> 8320, floor(233472/8320) = 28 < 32 -> shared memory.
TEST(KernelModelOccupancy, SharedMemoryRounding) {
  EXPECT_EQ(TheoreticalOccupancy(H200(), Res(24, 32, 100)).limiter, "blocks");
  Occupancy o = TheoreticalOccupancy(H200(), Res(24, 32, 100, 7 * 1024));
  EXPECT_EQ(o.blocks_per_sm, 28);
  EXPECT_EQ(o.limiter, "shared memory");
}

// Launches that cannot run: 30 KB static + 200 KB dynamic + 1 KB = 236544 B >
// 233472; 1025 threads; 255 regs x 1024 threads (8192 per warp x 32 warps =
// 262144 > 65536 registers per block).
TEST(KernelModelOccupancy, Unlaunchable) {
  Occupancy smem = TheoreticalOccupancy(H200(), Res(32, 128, 30 * 1024, 200 * 1024));
  EXPECT_EQ(smem.blocks_per_sm, 0);
  EXPECT_EQ(smem.limiter, "shared memory");
  Occupancy threads = TheoreticalOccupancy(H200(), Res(32, 1025));
  EXPECT_EQ(threads.blocks_per_sm, 0);
  EXPECT_EQ(threads.limiter, "warps");
  Occupancy regs = TheoreticalOccupancy(H200(), Res(255, 1024));
  EXPECT_EQ(regs.blocks_per_sm, 0);
  EXPECT_EQ(regs.limiter, "registers");
  EXPECT_DOUBLE_EQ(regs.fraction, 0.0);

  LaunchWork w;
  w.blocks = 10;
  w.bytes = 1e6;
  Prediction p = Predict(H200(), Res(255, 1024), w);
  EXPECT_TRUE(std::isinf(p.seconds));
  EXPECT_EQ(p.bound, "unlaunchable");
}

// (b) 1 GB through DRAM, 10 whole waves (32 regs x 128: 16 blocks/SM, 2112
// slots, 21120 blocks), 1e6 instructions:
//   mem_s   = 1e9 / 3.9008e12 = 256.3577e-6
//   issue_s = 1e6 / 836.352e9 = 1.1957e-6
//   seconds = 256.3577e-6 + 2e-6 = 258.3577e-6, memory-bound.
TEST(KernelModelPredict, MemoryBound) {
  LaunchWork w;
  w.blocks = 21120;
  w.bytes = 1e9;
  w.warp_instructions = 1e6;
  Prediction p = Predict(H200(), Res(32, 128), w);
  EXPECT_EQ(p.bound, "memory");
  EXPECT_DOUBLE_EQ(p.waves, 10.0);
  ExpectNear(p.mem_s, 1e9 / (4.24e12 * 0.92), "mem_s");
  ExpectNear(p.issue_s, 1.195668809305173e-6, "issue_s");
  ExpectNear(p.seconds, 1e9 / (4.24e12 * 0.92) + 2e-6, "seconds");
  ExpectNear(p.seconds, 258.357670221493e-6, "seconds");
  EXPECT_EQ(p.fixed_s, 2e-6);
}

// (c) the same grid with 1e9 warp-instructions and 1 MB: 64 warps/SM, so the
// full rate. issue_s = 1e9 / 836.352e9 = 1.195669e-3 s; mem_s = 256e-9.
// seconds = 1.197669e-3, instruction-bound.
TEST(KernelModelPredict, InstructionBound) {
  LaunchWork w;
  w.blocks = 21120;
  w.bytes = 1e6;
  w.warp_instructions = 1e9;
  Prediction p = Predict(H200(), Res(32, 128), w);
  EXPECT_EQ(p.bound, "instructions");
  ExpectNear(p.issue_s, 1.195668809305173e-3, "issue_s");
  ExpectNear(p.seconds, 1.195668809305173e-3 + 2e-6, "seconds");
}

// (d) one block of 512 threads (16 warps: 4 per scheduler, the full 4 per
// clock) runs on one SM: issue_s = 1e8 / (1 * 4 * 1.98e9 * 0.8) = 15.7828e-3.
// The same 1e8 instructions over 132 such blocks: 1e8 / 836.352e9 =
// 119.567e-6, 132x less. With 4-warp blocks (128 threads), the lone SM has
// one warp per scheduler: 4 warps / 4 cycles = 1 instruction per clock, 4x
// slower again: 63.1313e-3.
TEST(KernelModelPredict, OneBlockUsesOneSm) {
  LaunchWork w;
  w.blocks = 1;
  w.warp_instructions = 1e8;
  Prediction one = Predict(H200(), Res(32, 512), w);
  ExpectNear(one.issue_s, 15.782828282828284e-3, "issue_s, 1 block");
  EXPECT_EQ(one.bound, "instructions");
  EXPECT_DOUBLE_EQ(one.waves, 1.0 / (132 * 4));  // 512 threads: 4 blocks/SM
  w.blocks = 132;
  Prediction spread = Predict(H200(), Res(32, 512), w);
  ExpectNear(spread.issue_s, 119.5668809305173e-6, "issue_s, 132 blocks");
  ExpectNear(one.issue_s / spread.issue_s, 132.0, "ratio");

  w.blocks = 1;
  Prediction few_warps = Predict(H200(), Res(32, 128), w);
  ExpectNear(few_warps.issue_s, 1e8 / (1.98e9 * 0.8), "issue_s, 4 warps");
  ExpectNear(few_warps.issue_s / one.issue_s, 4.0, "ratio, 4 vs 16 warps");
}

// (e) Little's law. 118 regs x 128 threads (4 blocks/SM), 132 blocks: one
// block of 4 warps per SM, 528 warps in flight with 512 B each (32 lanes x
// 16 B): 528 * 512 / 700e-9 = 386.194e9 B/s, under the DRAM's 3.9008e12.
// 1e8 B: mem_s = 1e8 / 386.194e9 = 258.937e-6. The full grid (528 blocks,
// 2112 warps) reaches 1544.777e9 B/s: 64.734e-6, still latency-limited.
// Without the bytes per trip the DRAM bound gives 25.636e-6.
TEST(KernelModelPredict, LittlesLawLimitsLowOccupancy) {
  LaunchWork w;
  w.blocks = 132;
  w.bytes = 1e8;
  w.load_bytes_per_warp_trip = 512;
  Prediction p = Predict(H200(), Res(118, 128), w);
  EXPECT_EQ(p.bound, "memory");
  ExpectNear(p.mem_s, 1e8 / (528 * 512 / 700e-9), "mem_s, 132 blocks");
  ExpectNear(p.mem_s, 258.9370265151515e-6, "mem_s, 132 blocks");
  w.blocks = 528;
  ExpectNear(Predict(H200(), Res(118, 128), w).mem_s, 64.73425662878788e-6, "mem_s, 528");
  w.load_bytes_per_warp_trip = 0;
  ExpectNear(Predict(H200(), Res(118, 128), w).mem_s, 25.635767022149304e-6, "mem_s, DRAM");
}

// (f) tail: 32 regs x 128, 2112 slots. 3168 blocks = 1.5 waves: the second
// wave half-fills the GPU, so compute terms x ceil(1.5)/1.5 = 4/3:
// issue_s = 1e9 / 836.352e9 * 4/3 = 1.594225e-3. 4224 blocks (2 waves) with
// the same 1e9 instructions: 1.195669e-3. Memory is not scaled: 1e9 B is
// 256.358e-6 either way.
TEST(KernelModelPredict, WavesTail) {
  LaunchWork w;
  w.blocks = 3168;
  w.bytes = 1e9;
  w.warp_instructions = 1e9;
  Prediction tail = Predict(H200(), Res(32, 128), w);
  EXPECT_DOUBLE_EQ(tail.waves, 1.5);
  ExpectNear(tail.issue_s, 1.594225079073564e-3, "issue_s, 1.5 waves");
  ExpectNear(tail.mem_s, 256.357670221493e-6, "mem_s, 1.5 waves");
  w.blocks = 4224;
  Prediction whole = Predict(H200(), Res(32, 128), w);
  EXPECT_DOUBLE_EQ(whole.waves, 2.0);
  ExpectNear(whole.issue_s, 1.195668809305173e-3, "issue_s, 2 waves");
  ExpectNear(whole.mem_s, tail.mem_s, "mem_s, 2 waves");
}

// Tensor and fp32 terms, scaled by the SMs in use. 118 regs (4 blocks/SM):
// 528 blocks = 1 wave, 1e12 tensor flops on wgmma: 1e12 / 790e12 =
// 1.265823e-3, tensor-bound; on mma.sync (Hopper's 0.6 of that rate):
// 2.109705e-3. 66 blocks use half the SMs: 2.531646e-3. 1e12 fp32 flops
// on 528 blocks: 1e12 / 66.90816e12 = 14.94586e-3, fp32-bound. The A100
// runs mma.sync at its full 312e12: 1e12 / 312e12 on 432 blocks (4 an SM).
TEST(KernelModelPredict, TensorAndFp32) {
  LaunchWork w;
  w.blocks = 528;
  w.tensor_flops = 1e12;
  w.warpgroup_mma = true;
  Prediction p = Predict(H200(), Res(118, 128), w);
  EXPECT_EQ(p.bound, "tensor");
  ExpectNear(p.tensor_s, 1.2658227848101266e-3, "tensor_s");
  w.blocks = 66;
  ExpectNear(Predict(H200(), Res(118, 128), w).tensor_s, 2.5316455696202532e-3, "half SMs");
  w.blocks = 528;
  w.warpgroup_mma = false;
  ExpectNear(Predict(H200(), Res(118, 128), w).tensor_s, 1e12 / (0.6 * 790e12), "mma.sync");
  w.blocks = 432;
  ExpectNear(Predict(A100(), Res(118, 128), w).tensor_s, 1e12 / 312e12, "A100 mma.sync");
  w.tensor_flops = 0;
  w.flops = 1e12;
  w.blocks = 528;
  Prediction f = Predict(H200(), Res(118, 128), w);
  EXPECT_EQ(f.bound, "fp32");
  ExpectNear(f.fp32_s, 14.945860116314661e-3, "fp32_s");
}

// A tiny launch: 1 block, 4 KB, 100 instructions. mem_s = 4096 / 3.9008e12
// = 1.05e-9; issue_s = 100 / (1 * 1 * 1.98e9 * 0.8) = 63.1e-9; both under
// fixed_s = 2e-6 -> latency, seconds = 2e-6 + 63.1313e-9. 0 blocks: fixed_s.
TEST(KernelModelPredict, LatencyBound) {
  LaunchWork w;
  w.blocks = 1;
  w.bytes = 4096;
  w.warp_instructions = 100;
  Prediction p = Predict(H200(), Res(32, 128), w);
  EXPECT_EQ(p.bound, "latency");
  ExpectNear(p.seconds, 2e-6 + 100 / (1.98e9 * 0.8), "seconds");
  LaunchWork none;
  Prediction empty = Predict(H200(), Res(32, 128), none);
  EXPECT_EQ(empty.bound, "latency");
  EXPECT_EQ(empty.seconds, 2e-6);
  EXPECT_EQ(empty.waves, 0);
}

// cuBLASLt's matmul, by hand. Gate/up of Llama-3-8B at 512 rows: 2 * 512 *
// 28672 * 4096 = 120.26 GFLOP at 790e12 * 0.69 -> 220.6 us; its bytes
// (28672 * 4096 + 512 * 4096) * 2 + 512 * 28672 * 4 = 297.6 MB over
// 4.24e12 * 0.92 -> 76.3 us: tensor-bound. At 1 row the weight's 234.9 MB
// (plus 8 kB of A, 115 kB of D) -> 60.3 us: memory-bound.
TEST(KernelModelPredict, LibraryGemm) {
  Prediction p = PredictLibraryGemm(H200(), {.rows = 512, .n = 28672, .k = 4096});
  EXPECT_EQ(p.bound, "tensor");
  ExpectNear(p.tensor_s, 2.0 * 512 * 28672 * 4096 / (790e12 * 0.69), "tensor_s");
  ExpectNear(p.mem_s, ((28672.0 * 4096 + 512.0 * 4096) * 2 + 512.0 * 28672 * 4) / (4.24e12 * 0.92),
             "mem_s");
  ExpectNear(p.seconds, p.tensor_s + 2e-6, "seconds");
  Prediction one = PredictLibraryGemm(H200(), {.rows = 1, .n = 28672, .k = 4096});
  EXPECT_EQ(one.bound, "memory");
  ExpectNear(one.seconds, ((28672.0 * 4096 + 4096) * 2 + 28672.0 * 4) / (4.24e12 * 0.92) + 2e-6,
             "one row");
  Prediction tiny = PredictLibraryGemm(H200(), {.rows = 1, .n = 64, .k = 64});
  EXPECT_EQ(tiny.bound, "latency");
}

}  // namespace
}  // namespace llmc::perf
