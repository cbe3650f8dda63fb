// llmc-select-gemv: each GEMM group gets `llmc.gemv`, the decode GEMV the
// CUDA emitter follows: dp4a for a GGUF block format whose K is a multiple
// of its chunk (q4_0: 128), with at most 40 KB of staged activations per
// pass (K = 16384: 2 tokens); fp for other formats and K, for f32
// activations and for kind=fp. Groups without a GEMM get nothing.
//
// RUN: llmc-opt %s --llmc-select-gemv | FileCheck %s
// RUN: llmc-opt %s --llmc-select-gemv=activation-type=f32 | FileCheck %s --check-prefix=F32
// RUN: llmc-opt %s "--llmc-select-gemv=kind=fp" | FileCheck %s --check-prefix=FP
// RUN: not llmc-opt %s "--llmc-select-gemv=kind=fast" 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @step
// CHECK: llm.fusion "q4_0_k256"{{.*}}llmc.gemv = {kind = "dp4a", max_tokens = 4 : i64, max_tokens_gemv = 4 : i64, rows_per_warp = 2 : i64, warps = 8 : i64}
// CHECK: llm.fusion "q4_0_k16384"{{.*}}llmc.gemv = {kind = "dp4a", max_tokens = 2 : i64, max_tokens_gemv = 4 : i64, rows_per_warp = 2 : i64, warps = 8 : i64}
// CHECK: llm.fusion "q8_0_k256"{{.*}}llmc.gemv = {kind = "dp4a", max_tokens = 4 : i64, max_tokens_gemv = 4 : i64, rows_per_warp = 1 : i64, warps = 8 : i64}
// CHECK: llm.fusion "q4_0_k96"{{.*}}llmc.gemv = {kind = "fp", max_tokens = 4 : i64, max_tokens_gemv = 4 : i64, warps = 4 : i64}
// CHECK: llm.fusion "f16_k256"{{.*}}llmc.gemv = {kind = "fp"
// CHECK-NOT: llmc.gemv
// CHECK: return

// F32-COUNT-5: llmc.gemv = {kind = "fp"
// F32-NOT: dp4a
// FP-COUNT-5: llmc.gemv = {kind = "fp"
// FP-NOT: dp4a
// BAD: llmc-select-gemv: kind must be auto or fp, not 'fast'
func.func @step(%x: tensor<?x256xf32>, %big: tensor<?x16384xf32>, %small: tensor<?x96xf32>) -> tensor<?x256xf32> {
  %a = llm.fusion "q4_0_k256"(%x) : (tensor<?x256xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x256xf32>):
    %w = llm.weight "a" : !llm.weight<256x256, q4_0>
    %y = llm.linear %i, %w : tensor<?x256xf32>, !llm.weight<256x256, q4_0> -> tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  %b = llm.fusion "q4_0_k16384"(%big) : (tensor<?x16384xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x16384xf32>):
    %w = llm.weight "b" : !llm.weight<256x16384, q4_0>
    %y = llm.linear %i, %w : tensor<?x16384xf32>, !llm.weight<256x16384, q4_0> -> tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  %c = llm.fusion "q8_0_k256"(%a) : (tensor<?x256xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x256xf32>):
    %w = llm.weight "c" : !llm.weight<256x256, q8_0>
    %y = llm.linear %i, %w : tensor<?x256xf32>, !llm.weight<256x256, q8_0> -> tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  %d = llm.fusion "q4_0_k96"(%small) : (tensor<?x96xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x96xf32>):
    %w = llm.weight "d" : !llm.weight<256x96, q4_0>
    %y = llm.linear %i, %w : tensor<?x96xf32>, !llm.weight<256x96, q4_0> -> tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  %e = llm.fusion "f16_k256"(%c) : (tensor<?x256xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x256xf32>):
    %w = llm.weight "e" : !llm.weight<256x256, f16>
    %y = llm.linear %i, %w : tensor<?x256xf32>, !llm.weight<256x256, f16> -> tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  %f = llm.fusion "add"(%e, %a) : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x256xf32>, %j: tensor<?x256xf32>):
    %y = llm.add %i, %j : tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  return %f : tensor<?x256xf32>
}
