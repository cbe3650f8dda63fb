// llmc-select-gemm-tiles: each GEMM group gets `llmc.gemm`, the tiles of the
// tensor-core GEMM the CUDA emitter follows. small (up to large_from - 1
// tokens): 64 tokens x 128 weight rows, halved to 64 while the weight tiles
// alone would leave SMs without a block (132 SMs: 16,896 rows keep 128,
// 8,192 drop to 64, and 64 is the floor). large: 128 x 128 for weights of
// at least 64 x 132 rows, else 128 x 64. The small tile's sixth element
// splits K where the weight tiles give fewer than 4 x 132 blocks, doubling
// while each split keeps 16+ steps of 32 (K = 64: 2 steps, never; the
// 4,096-row, K = 4,096 projection: 64 tiles x 8; 16,896 rows: 132 x 4).
// large_from is 129, except for K of 64+ steps, where the large tile (no
// split) starts once it gives 1.5 blocks per SM: the 4,096-row projection's
// 64 large tiles need 4 token tiles for 198 blocks at 132 SMs (385 tokens);
// at 64 SMs its 32 wide tiles need 2 for 96 (257); 16,896 rows' 132 tiles,
// 2 (129).
// f32 activations: no GEMM, no attribute; groups without a GEMM get nothing.
//
// RUN: llmc-opt %s --llmc-select-gemm-tiles | FileCheck %s
// RUN: llmc-opt %s "--llmc-select-gemm-tiles=sms=64" | FileCheck %s --check-prefix=SMS64
// RUN: llmc-opt %s --llmc-select-gemm-tiles=activation-type=f32 | FileCheck %s --check-prefix=F32
// RUN: not llmc-opt %s "--llmc-select-gemm-tiles=sms=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: llmc-opt %s "--llmc-select-gemm-tiles=wgmma=true" | FileCheck %s --check-prefix=WGMMA
// RUN: llmc-opt %s "--llmc-select-gemm-tiles=wgmma=true activation-type=f16" | FileCheck %s --check-prefix=WGF16

// CHECK-LABEL: func.func @step
// CHECK: llm.fusion "rows16896"{{.*}}llmc.gemm = {large = array<i64: 128, 128, 2, 4, 3>, large_from = 129 : i64, small = array<i64: 64, 128, 2, 2, 4, 1>}
// CHECK: llm.fusion "rows8192"{{.*}}llmc.gemm = {large = array<i64: 128, 64, 2, 2, 4>, large_from = 129 : i64, small = array<i64: 64, 64, 2, 2, 4, 1>}
// CHECK: llm.fusion "rows256"{{.*}}llmc.gemm = {large = array<i64: 128, 64, 2, 2, 4>, large_from = 129 : i64, small = array<i64: 64, 64, 2, 2, 4, 1>}
// CHECK: llm.fusion "o_proj"{{.*}}llmc.gemm = {large = array<i64: 128, 64, 2, 2, 4>, large_from = 385 : i64, small = array<i64: 64, 64, 2, 2, 4, 8>}
// CHECK: llm.fusion "wide_k"{{.*}}llmc.gemm = {large = array<i64: 128, 128, 2, 4, 3>, large_from = 129 : i64, small = array<i64: 64, 128, 2, 2, 4, 4>}
// CHECK-NOT: llmc.gemm
// CHECK: return

// With 64 SMs, 8,192 rows are enough for 128-row tiles in both.
// SMS64: llm.fusion "rows8192"{{.*}}llmc.gemm = {large = array<i64: 128, 128, 2, 4, 3>, large_from = 129 : i64, small = array<i64: 64, 128, 2, 2, 4, 1>}
// and the o_proj's 64 tiles need four splits for 4 x 64 blocks.
// SMS64: llm.fusion "o_proj"{{.*}}large_from = 257 : i64, small = array<i64: 64, 64, 2, 2, 4, 4>}
// F32-LABEL: func.func @step
// F32-NOT: llmc.gemm
// F32: return
// BAD: llmc-select-gemm-tiles: sms must be positive, not 0
// On sm_90a (wgmma=true) every tile runs on wgmma: the large one on 8 warps
// of 16 token rows where the weights are in the activation type (bf16 under
// bf16) or the tile is the wide one, decoded weights' 128 x 64 tile on 4
// warps, one warpgroup over both 64-row token blocks; the small one on one
// warpgroup over its 64 tokens.
// WGMMA: llm.fusion "rows16896"{{.*}}llmc.gemm = {large = array<i64: 128, 128, 8, 1, 3>, large_from = 129 : i64, large_mma = "wgmma", small = array<i64: 64, 128, 4, 1, 4, 1>, small_mma = "wgmma"}
// WGMMA: llm.fusion "rows8192"{{.*}}llmc.gemm = {large = array<i64: 128, 64, 8, 1, 4>, large_from = 129 : i64, large_mma = "wgmma", small = array<i64: 64, 64, 4, 1, 4, 1>, small_mma = "wgmma"}
// WGMMA: llm.fusion "rows256"{{.*}}llmc.gemm = {large = array<i64: 128, 64, 4, 1, 4>, large_from = 129 : i64, large_mma = "wgmma", small
// bf16 weights under f16 activations are decoded: one warpgroup.
// WGF16: llm.fusion "rows8192"{{.*}}llmc.gemm = {large = array<i64: 128, 64, 4, 1, 4>, large_from = 129 : i64, large_mma = "wgmma", small
func.func @step(%x: tensor<?x64xf32>, %k: tensor<?x4096xf32>) -> tensor<?x256xf32> {
  %a = llm.fusion "rows16896"(%x) : (tensor<?x64xf32>) -> tensor<?x16896xf32> {
  ^bb0(%i: tensor<?x64xf32>):
    %w = llm.weight "a" : !llm.weight<16896x64, q4_0>
    %y = llm.linear %i, %w : tensor<?x64xf32>, !llm.weight<16896x64, q4_0> -> tensor<?x16896xf32>
    llm.yield %y : tensor<?x16896xf32>
  }
  %b = llm.fusion "rows8192"(%x) : (tensor<?x64xf32>) -> tensor<?x8192xf32> {
  ^bb0(%i: tensor<?x64xf32>):
    %w = llm.weight "b" : !llm.weight<8192x64, bf16>
    %y = llm.linear %i, %w : tensor<?x64xf32>, !llm.weight<8192x64, bf16> -> tensor<?x8192xf32>
    llm.yield %y : tensor<?x8192xf32>
  }
  %c = llm.fusion "rows256"(%x) : (tensor<?x64xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x64xf32>):
    %w = llm.weight "c" : !llm.weight<256x64, q8_0>
    %y = llm.linear %i, %w : tensor<?x64xf32>, !llm.weight<256x64, q8_0> -> tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  %o = llm.fusion "o_proj"(%k) : (tensor<?x4096xf32>) -> tensor<?x4096xf32> {
  ^bb0(%i: tensor<?x4096xf32>):
    %w = llm.weight "o" : !llm.weight<4096x4096, q4_0>
    %y = llm.linear %i, %w : tensor<?x4096xf32>, !llm.weight<4096x4096, q4_0> -> tensor<?x4096xf32>
    llm.yield %y : tensor<?x4096xf32>
  }
  %v = llm.fusion "wide_k"(%k) : (tensor<?x4096xf32>) -> tensor<?x16896xf32> {
  ^bb0(%i: tensor<?x4096xf32>):
    %w = llm.weight "v" : !llm.weight<16896x4096, q4_k>
    %y = llm.linear %i, %w : tensor<?x4096xf32>, !llm.weight<16896x4096, q4_k> -> tensor<?x16896xf32>
    llm.yield %y : tensor<?x16896xf32>
  }
  %d = llm.fusion "add"(%c, %c) : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32> {
  ^bb0(%i: tensor<?x256xf32>, %j: tensor<?x256xf32>):
    %y = llm.add %i, %j : tensor<?x256xf32>
    llm.yield %y : tensor<?x256xf32>
  }
  return %d : tensor<?x256xf32>
}
