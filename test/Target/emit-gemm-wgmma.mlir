// The CUDA emitter and a GEMM group's `llmc.gemm` wgmma tiles
// (llmc-select-gemm-tiles on sm_90a): the hand-written @step of
// emit-attention-group.mlir, its QKV group given tiles by sed. With every
// target sm_90a (--cuda-wgmma) the tile's last argument turns wgmma on;
// otherwise, or for a tile wgmma cannot run, or an unknown instruction,
// the error names the group's key.
//
// RUN: sed 's/{llm.result_buffers = array<i64: 2, 0, 1>}/{llm.result_buffers = array<i64: 2, 0, 1>, llmc.gemm = {large = array<i64: 128, 64, 4, 1, 4>, large_mma = "wgmma", small = array<i64: 64, 64, 4, 1, 4>, small_mma = "wgmma"}}/' %S/emit-attention-group.mlir > %t.mlir
// RUN: llmc-translate --llmc-to-cuda --cuda-wgmma %t.mlir | FileCheck %s
// RUN: not llmc-translate --llmc-to-cuda %t.mlir 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: sed 's/large = array<i64: 128, 64, 4, 1, 4>/large = array<i64: 128, 64, 2, 2, 4>/' %t.mlir | not llmc-translate --llmc-to-cuda --cuda-wgmma 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: sed 's/small_mma = "wgmma"/small_mma = "hmma"/' %t.mlir | not llmc-translate --llmc-to-cuda --cuda-wgmma 2>&1 | FileCheck %s --check-prefix=INST

// CHECK: gemm_mma<fmt::f32, 128, 64, act, gemm_tile<64, 64, 4, 1, 4, 1, false, true>>
// CHECK: gemm_mma<fmt::f32, 128, 64, act, gemm_tile<128, 64, 4, 1, 4, 1, false, true>>
// TARGET: error: CUDA codegen: llmc.gemm small_mma = wgmma needs every CUDA target to be sm_90a
// SHAPE: error: CUDA codegen: llmc.gemm large = [128, 64, 2, 2, 4] is not a wgmma tile
// INST: error: CUDA codegen: llmc.gemm small_mma is 'hmma', not wgmma or mma.sync
