// Both code generators on a hand-written, planned @step: a QKV GEMM group
// and an attention group that holds the RoPEs of its query and key (as
// llmc-place-rope leaves them). The host target rotates Q and K in place in
// the attention's kernel; the CUDA target rotates both in the launch that
// writes the KV cache (rope_kv_cache_write), and neither emits a RoPE for the
// GEMM group.
//
// RUN: llmc-translate --llmc-to-host-cpp %s | FileCheck %s --check-prefix=HOST
// RUN: llmc-translate --llmc-to-cuda %s | FileCheck %s --check-prefix=CUDA
// RUN: llmc-translate --llmc-to-cuda --cuda-dtype=f32 %s | FileCheck %s --check-prefix=CUDA-F32
//
// The emitter follows llmc-select-attention's `llmc.attention` (a downgrade
// to the FFMA decode and no prefill kernel here) and refuses a choice the
// shape cannot take (tensor-core decode needs head_dim % 32 == 0).
// RUN: sed 's/array<i64: 3>}/array<i64: 3>, llmc.attention = {decode = "ffma", prefill = "none"}}/' %s | llmc-translate --llmc-to-cuda | FileCheck %s --check-prefix=CHOSEN
// RUN: sed 's/array<i64: 3>}/array<i64: 3>, llmc.attention = {decode = "mma", prefill = "flash", prefill_warps = 8 : i64}}/' %s | not llmc-translate --llmc-to-cuda 2>&1 | FileCheck %s --check-prefix=MISFIT

// HOST:      #include "llmc_host_kernels.h"
// HOST:      // rms_norm 64 + linear f32 128x64 + split (first used by qkv)
// HOST-NEXT: void llmc_host_k0(const llmc_host_args *a) {
// HOST-NOT:  rope
// HOST:      }
// HOST:      // rope + rope + paged_attention 4/2x16 (first used by attn)
// HOST-NEXT: void llmc_host_k1(const llmc_host_args *a) {
// HOST-NEXT:   llmc::host::rope<4, 16, llmc::host::rope_style::half>(a->step, static_cast<float *>(a->buffers[0]), static_cast<float *>(a->buffers[0]), 1.0000000000000000e+04,
// HOST-NEXT:   llmc::host::rope<2, 16, llmc::host::rope_style::half>(a->step, static_cast<float *>(a->buffers[1]), static_cast<float *>(a->buffers[1]), 1.0000000000000000e+04,
// HOST-NEXT:   llmc::host::paged_attention<4, 2, 16>(a->step, static_cast<float *>(a->buffers[0]), static_cast<float *>(a->buffers[1]), static_cast<const float *>(a->buffers[2]), static_cast<float *>(a->caches[0]), static_cast<float *>(a->caches[1]), static_cast<float *>(a->buffers[3]), 2.5000000000000000e-01f, 0);
// HOST-NEXT: }

// CUDA:      #include "llmc_cuda_kernels.cuh"
// CUDA:      typedef __nv_bfloat16 act;
// CUDA-NOT:  rope<
// CUDA:      // rope + rope + paged_attention 4/2x16 (first used by attn)
// CUDA-NEXT: extern "C" __global__
// CUDA-NEXT: llmc_cuda_k1_rope_kv_write(
// CUDA:      rope_kv_cache_write<4, 2, 16, rope_style::half, act>(s, const_cast<act *>(in0), in1, in2,
// CUDA-NOT:  rope<
// CUDA:      paged_attention_decode<4, 2, 16, act, 64, 4, 64>(s, in0,
// CUDA:      paged_attention_prefill<4, 2, 16, act, 8>(s, in0,

// CHOSEN:      paged_attention_decode<4, 2, 16, act, 64, 4, 64>(s, in0,
// CHOSEN-NOT:  paged_attention_prefill
// MISFIT: error: CUDA codegen: llmc.attention {decode = "mma", prefill = "flash", prefill_warps = 8 : i64} does not fit activations bf16, head_dim 16, 4/2 heads

// CUDA-F32:  typedef float act;
// CUDA-F32:  rope_kv_cache_write<4, 2, 16, rope_style::half, act>(
// CUDA-F32-NOT: paged_attention_prefill

module attributes {llm.buffers = [{dtype = f32, row_bytes = 256 : i64, rows = "tokens"}, {dtype = f32, row_bytes = 128 : i64, rows = "tokens"}, {dtype = f32, row_bytes = 128 : i64, rows = "tokens"}, {dtype = f32, row_bytes = 256 : i64, rows = "tokens"}]} {
  func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>, %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>, %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>, %cache: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %x: tensor<?x64xf32>) -> tensor<?x64xf32> attributes {llm.logits_buffer = 3 : i64} {
    %qkv:3 = llm.fusion "qkv"(%x) {llm.result_buffers = array<i64: 2, 0, 1>} : (tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>) {
    ^bb0(%a: tensor<?x64xf32>):
      %nw = llm.weight "norm" : !llm.weight<64, f32>
      %n = llm.rms_norm %a, %nw eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
      %w = llm.weight "wqkv" : !llm.weight<128x64, f32>
      %y = llm.linear %n, %w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
      %s:3 = llm.split %y : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
      llm.yield %s#2, %s#0, %s#1 : tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>
    }
    %o = llm.fusion "attn"(%qkv#1, %qkv#2, %qkv#0, %cache, %slot_mapping, %query_starts, %context_lens, %block_tables, %positions) {llm.result_buffers = array<i64: 3>} : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>) -> tensor<?x64xf32> {
    ^bb0(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %cl: tensor<?xi32>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>):
      %rq = llm.rope %q, %p heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
      %rk = llm.rope %k, %p heads = 2, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x32xf32>, tensor<?xi32>
      %r = llm.paged_attention %rq, %rk, %v into %c slots(%sl) seqs(%qs, %cl, %bt) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
      llm.yield %r : tensor<?x64xf32>
    }
    return %o : tensor<?x64xf32>
  }
}
