// The attention kernels (decode and prefill) built for the CPU under emulation
// (test/cuda-emu: compiled with -DLLMC_CUDA_EMULATE and cuda_emu.h forced
// first), as entries of the llmc CUDA ABI that llmc_emu_run launches. The
// test beside it (attention_emu_test.cc) feeds them and checks them; the two
// stay separate translation units because the emulation's macros
// (threadIdx, __shared__, ...) must not meet gtest's headers.
#include "cuda_abi.h"
#include "llmc_cuda_kernels.cuh"

using namespace llmc::cuda;

namespace {
// The 8B shape (32 query heads on 8 kv heads of 128) in bf16 and SmolLM2's
// (9 on 3 of 64) in f16, 64 keys per split up to 4 splits: a 1,000-key
// context gives each warp of a split about four 16-key chunks.
constexpr int kSplitKeys = 64, kWarps = 4, kMaxSplits = 4;

template <int H, int KvH, int D, class Act, bool Mma>
void decode(const llmc_cuda_step_info& si, const llmc_cuda_args& a) {
  const step_info& s = *reinterpret_cast<const step_info*>(&si);
  const auto* q = static_cast<const Act*>(a.buffers[0]);
  auto* out = static_cast<Act*>(a.buffers[1]);
  const float scale = *static_cast<const float*>(a.buffers[2]);
  const int window = *static_cast<const int*>(a.buffers[3]);
  const auto* kc = static_cast<const Act*>(a.caches[0]);
  const auto* vc = static_cast<const Act*>(a.caches[1]);
  const attn_scratch sc = attn_scratch_of<H, D>(a.scratch, s.num_tokens, gridDim.x);
  if (Mma)
    paged_attention_decode_mma<H, KvH, D, Act, kSplitKeys, kWarps, kMaxSplits>(s, q, kc, vc, out, sc,
                                                                               scale, window);
  else
    paged_attention_decode<H, KvH, D, Act, kSplitKeys, kWarps, kMaxSplits>(s, q, kc, vc, out, sc,
                                                                           scale, window);
}

template <int H, int KvH, int D, class Act, int Warps>
void prefill(const llmc_cuda_step_info& si, const llmc_cuda_args& a) {
  const step_info& s = *reinterpret_cast<const step_info*>(&si);
  paged_attention_prefill<H, KvH, D, Act, Warps>(
      s, static_cast<const Act*>(a.buffers[0]), static_cast<const Act*>(a.caches[0]),
      static_cast<const Act*>(a.caches[1]), static_cast<Act*>(a.buffers[1]),
      *static_cast<const float*>(a.buffers[2]), *static_cast<const int*>(a.buffers[3]));
}
}  // namespace

extern "C" {
// Flash-attention prefill: the 8B shape at the emitter's 8 warps (4 threads
// a K/V row), SmolLM2's at 4 (2 a row), and head_dim 16 at 8 warps (2
// threads a row: half of the block loads nothing).
void emu_prefill_32_8_128_bf16_w8(const llmc_cuda_step_info s, const llmc_cuda_args a) {
  prefill<32, 8, 128, __nv_bfloat16, 8>(s, a);
}
void emu_prefill_9_3_64_f16_w4(const llmc_cuda_step_info s, const llmc_cuda_args a) {
  prefill<9, 3, 64, __half, 4>(s, a);
}
void emu_prefill_4_2_16_bf16_w8(const llmc_cuda_step_info s, const llmc_cuda_args a) {
  prefill<4, 2, 16, __nv_bfloat16, 8>(s, a);
}
void emu_decode_mma_32_8_128_bf16(const llmc_cuda_step_info s, const llmc_cuda_args a) {
  decode<32, 8, 128, __nv_bfloat16, true>(s, a);
}
void emu_decode_ffma_32_8_128_bf16(const llmc_cuda_step_info s, const llmc_cuda_args a) {
  decode<32, 8, 128, __nv_bfloat16, false>(s, a);
}
void emu_decode_mma_9_3_64_f16(const llmc_cuda_step_info s, const llmc_cuda_args a) {
  decode<9, 3, 64, __half, true>(s, a);
}
}
