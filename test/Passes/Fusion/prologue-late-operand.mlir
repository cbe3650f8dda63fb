// The prologue takes elementwise producers of the norm's input only while
// everything the group reads exists where the group goes (its earliest
// member). Here %e1 would become the first member while %z (from llm.recv)
// is defined after it, so the prologue stops at %e2: the group holds
// add + rms_norm + linear and %e1 stays outside.
//
// RUN: llmc-opt %s --llmc-fuse | FileCheck %s

// CHECK-LABEL: func.func @late_prologue_operand(
// CHECK: %[[E1:.+]] = llm.add %arg0, %arg1
// CHECK: %[[Z:.+]] = llm.recv from 0
// CHECK: llm.fusion "p.add+rms_norm+linear_0"(%[[E1]], %[[Z]])
// CHECK: llm.add
// CHECK: llm.rms_norm
// CHECK: llm.linear
// CHECK: return
func.func @late_prologue_operand(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %e1 = llm.add %x, %y : tensor<?x64xf32>
  %z = llm.recv from 0 : tensor<?x64xf32>
  %e2 = llm.add %e1, %z : tensor<?x64xf32>
  %wn = llm.weight "norm" : !llm.weight<64, f32>
  %n = llm.rms_norm %e2, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %n, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("p")
  return %p : tensor<?x32xf32>
}
