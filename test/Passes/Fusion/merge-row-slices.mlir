// Merging sibling projections whose weights are row slices of stored
// tensors (Phi-3's fused qkv_proj / gate_up_proj, sliced by the frontend):
// each slice stays a part with its rows, so the merged weight is the fused
// tensor's rows in program order. Slices do not merge with whole tensors.
//
// RUN: llmc-opt %s --llmc-fuse="form-groups=false" | FileCheck %s
// RUN: llmc-opt %s --llmc-fuse="form-groups=false" | llmc-opt | FileCheck %s

// CHECK-LABEL: func.func @fused_qkv(
// CHECK: %[[W:.+]] = llm.weight "blk.0.attn_qkv.weight.{q,k,v}" concat ["blk.0.attn_qkv.weight", "blk.0.attn_qkv.weight", "blk.0.attn_qkv.weight"] rows [0, 64, 64, 96, 96, 128] : !llm.weight<128x64, q8_0>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %arg0, %[[W]] : tensor<?x64xf32>, !llm.weight<128x64, q8_0> -> tensor<?x128xf32>
// CHECK-NEXT: llm.split %[[Y]] : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
func.func @fused_qkv(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %wq = llm.weight "blk.0.attn_qkv.weight.q" concat ["blk.0.attn_qkv.weight"] rows [0, 64] : !llm.weight<64x64, q8_0>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, !llm.weight<64x64, q8_0> -> tensor<?x64xf32>
  %wk = llm.weight "blk.0.attn_qkv.weight.k" concat ["blk.0.attn_qkv.weight"] rows [64, 96] : !llm.weight<32x64, q8_0>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32>
  %wv = llm.weight "blk.0.attn_qkv.weight.v" concat ["blk.0.attn_qkv.weight"] rows [96, 128] : !llm.weight<32x64, q8_0>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// A slice and a whole tensor of the same format stay apart; two slices of
// different tensors merge (gate from one, up from another).
// CHECK-LABEL: func.func @mixed(
// CHECK-DAG: llm.linear %arg0, %{{.+}} : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32>
// CHECK-DAG: llm.weight "{{.*}}" concat ["gate_up", "other"] rows [0, 16, 16, 32] : !llm.weight<32x64, q8_0>
func.func @mixed(%x: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %w = llm.weight "whole" : !llm.weight<32x64, q8_0>
  %a = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32>
  %wg = llm.weight "gate_up.gate" concat ["gate_up"] rows [0, 16] : !llm.weight<16x64, q8_0>
  %g = llm.linear %x, %wg : tensor<?x64xf32>, !llm.weight<16x64, q8_0> -> tensor<?x16xf32>
  %wu = llm.weight "other.up" concat ["other"] rows [16, 32] : !llm.weight<16x64, q8_0>
  %u = llm.linear %x, %wu : tensor<?x64xf32>, !llm.weight<16x64, q8_0> -> tensor<?x16xf32>
  return %a, %g, %u : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}
