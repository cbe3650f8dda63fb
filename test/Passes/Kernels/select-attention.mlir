// llmc-select-attention: each paged-attention group gets `llmc.attention`,
// the CUDA kernels the emitter follows. With 16-bit activations: decode on
// tensor cores for head_dim a multiple of 32 up to 128 with at most 16 query
// heads per kv head (Llama-3-8B's 32/8 x 128), FFMA otherwise (head_dim 16,
// 256, or 32 heads on one kv head); the flash-attention prefill for
// head_dim a multiple of 16 up to 128. f32 activations: FFMA, no prefill
// kernel. Groups without attention get nothing.
//
// RUN: llmc-opt %s --llmc-select-attention | FileCheck %s
// RUN: llmc-opt %s --llmc-select-attention=activation-type=f32 | FileCheck %s --check-prefix=F32
// RUN: not llmc-opt %s "--llmc-select-attention=activation-type=fp8" 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @step
// CHECK: llm.fusion "llama3_8b"{{.*}}llmc.attention = {decode = "mma", prefill = "flash", prefill_warps = 8 : i64}
// CHECK: llm.fusion "hd16"{{.*}}llmc.attention = {decode = "ffma", prefill = "flash", prefill_warps = 8 : i64}
// CHECK: llm.fusion "hd256"{{.*}}llmc.attention = {decode = "ffma", prefill = "none"}
// CHECK: llm.fusion "mqa32"{{.*}}llmc.attention = {decode = "ffma", prefill = "flash", prefill_warps = 8 : i64}
// CHECK: llm.fusion "add"
// CHECK-NOT: llmc.attention
// CHECK: return

// F32-COUNT-4: llmc.attention = {decode = "ffma", prefill = "none"}
// F32-NOT: mma
// BAD: llmc-select-attention: activation-type must be bf16, f16 or f32, not 'fp8'
func.func @step(%q64: tensor<?x64xf32>, %q2048: tensor<?x2048xf32>, %q4096: tensor<?x4096xf32>, %k32: tensor<?x32xf32>, %k64: tensor<?x64xf32>, %k1024: tensor<?x1024xf32>, %c_llama3_8b: !llm.kv_cache<kv_heads = 8, head_dim = 128, f32>, %c_hd16: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %c_hd256: !llm.kv_cache<kv_heads = 4, head_dim = 256, f32>, %c_mqa32: !llm.kv_cache<kv_heads = 1, head_dim = 64, f32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %cl: tensor<?xi32>, %bt: tensor<?x?xi32>) -> tensor<?x4096xf32> {
  %llama3_8b = llm.fusion "llama3_8b"(%q4096, %k1024, %k1024, %c_llama3_8b, %sl, %qs, %cl, %bt) : (tensor<?x4096xf32>, tensor<?x1024xf32>, tensor<?x1024xf32>, !llm.kv_cache<kv_heads = 8, head_dim = 128, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x4096xf32> {
  ^bb0(%q: tensor<?x4096xf32>, %k: tensor<?x1024xf32>, %v: tensor<?x1024xf32>, %c: !llm.kv_cache<kv_heads = 8, head_dim = 128, f32>, %s: tensor<?xi32>, %a: tensor<?xi32>, %b: tensor<?xi32>, %t: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%s) seqs(%a, %b, %t) heads = 32, kv_heads = 8, head_dim = 128, scale = 1.250000e-01 : tensor<?x4096xf32>, tensor<?x1024xf32>, tensor<?x1024xf32>, !llm.kv_cache<kv_heads = 8, head_dim = 128, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x4096xf32>
    llm.yield %r : tensor<?x4096xf32>
  }
  %hd16 = llm.fusion "hd16"(%q64, %k32, %k32, %c_hd16, %sl, %qs, %cl, %bt) : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x64xf32> {
  ^bb0(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %s: tensor<?xi32>, %a: tensor<?xi32>, %b: tensor<?xi32>, %t: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%s) seqs(%a, %b, %t) heads = 4, kv_heads = 2, head_dim = 16, scale = 1.250000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
    llm.yield %r : tensor<?x64xf32>
  }
  %hd256 = llm.fusion "hd256"(%q2048, %k1024, %k1024, %c_hd256, %sl, %qs, %cl, %bt) : (tensor<?x2048xf32>, tensor<?x1024xf32>, tensor<?x1024xf32>, !llm.kv_cache<kv_heads = 4, head_dim = 256, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x2048xf32> {
  ^bb0(%q: tensor<?x2048xf32>, %k: tensor<?x1024xf32>, %v: tensor<?x1024xf32>, %c: !llm.kv_cache<kv_heads = 4, head_dim = 256, f32>, %s: tensor<?xi32>, %a: tensor<?xi32>, %b: tensor<?xi32>, %t: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%s) seqs(%a, %b, %t) heads = 8, kv_heads = 4, head_dim = 256, scale = 1.250000e-01 : tensor<?x2048xf32>, tensor<?x1024xf32>, tensor<?x1024xf32>, !llm.kv_cache<kv_heads = 4, head_dim = 256, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x2048xf32>
    llm.yield %r : tensor<?x2048xf32>
  }
  %mqa32 = llm.fusion "mqa32"(%q2048, %k64, %k64, %c_mqa32, %sl, %qs, %cl, %bt) : (tensor<?x2048xf32>, tensor<?x64xf32>, tensor<?x64xf32>, !llm.kv_cache<kv_heads = 1, head_dim = 64, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x2048xf32> {
  ^bb0(%q: tensor<?x2048xf32>, %k: tensor<?x64xf32>, %v: tensor<?x64xf32>, %c: !llm.kv_cache<kv_heads = 1, head_dim = 64, f32>, %s: tensor<?xi32>, %a: tensor<?xi32>, %b: tensor<?xi32>, %t: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%s) seqs(%a, %b, %t) heads = 32, kv_heads = 1, head_dim = 64, scale = 1.250000e-01 : tensor<?x2048xf32>, tensor<?x64xf32>, tensor<?x64xf32>, !llm.kv_cache<kv_heads = 1, head_dim = 64, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x2048xf32>
    llm.yield %r : tensor<?x2048xf32>
  }
  %add = llm.fusion "add"(%llama3_8b, %llama3_8b) : (tensor<?x4096xf32>, tensor<?x4096xf32>) -> tensor<?x4096xf32> {
  ^bb0(%i: tensor<?x4096xf32>, %j: tensor<?x4096xf32>):
    %y = llm.add %i, %j : tensor<?x4096xf32>
    llm.yield %y : tensor<?x4096xf32>
  }
  return %add : tensor<?x4096xf32>
}
