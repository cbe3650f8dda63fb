// Where MLIR's mesh passes stop on llm IR (docs/partitioning.md, "Why not
// MLIR's mesh dialect").
// RUN: not llmc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation))' 2>&1 | FileCheck %s

// sharding-propagation refuses a function with any op that lacks the
// interface: llm.rope (and paged_attention, embed, lm_head) have no model,
// since their head structure is not an indexing map over tensors.
mesh.mesh @tp(shape = 2)
func.func @rope(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %xs = mesh.shard %x to <@tp, [[], [0]]> annotate_for_users : tensor<?x64xf32>
  %r = llm.rope %xs, %pos heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
  return %r : tensor<?x64xf32>
}
// CHECK: error: 'llm.rope' op sharding interface is not implemented.

// -----

// A split feature dimension reaching llm.rms_norm: the model refuses it
// (every output element reads the whole row), and LLVM 19's propagation
// then leaves the op unannotated without an error.
mesh.mesh @tp(shape = 2)
func.func @norm_features(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %xs = mesh.shard %x to <@tp, [[], [0]]> annotate_for_users : tensor<?x64xf32>
  %w = llm.weight "norm.weight" : !llm.weight<64, f32>
  %y = llm.rms_norm %xs, %w eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}
// CHECK-LABEL: func.func @norm_features(
// CHECK: %[[Y:.+]] = llm.rms_norm
// CHECK-NEXT: return %[[Y]]
