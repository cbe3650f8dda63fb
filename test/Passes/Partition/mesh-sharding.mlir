// MLIR's own mesh passes on llm IR, through the llm ops' ShardingInterface
// models (passes/lib/Partition/MeshSharding.cpp). An experiment against
// --llmc-partition-tp; see docs/partitioning.md, "Why not MLIR's mesh dialect".
// RUN: llmc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation))' | FileCheck %s --check-prefix=PROP
// RUN: llmc-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,mesh-spmdization))' | FileCheck %s --check-prefix=SPMD

// A SwiGLU MLP with the gate and up results annotated as split features:
// propagation carries the split through llm.silu and llm.mul, turns the
// down projection's reduction into a partial sum, and the residual llm.add
// reads it replicated. Spmdization then cuts the weight handles with
// #llm.shard (column-parallel gate/up, row-parallel down) and inserts one
// mesh.all_reduce: the same program --llmc-partition-tp="tp=2" writes.
mesh.mesh @tp(shape = 2)
func.func @megatron(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %wg = llm.weight "gate.weight" : !llm.weight<128x64, f32>
  %wu = llm.weight "up.weight" : !llm.weight<128x64, f32>
  %wd = llm.weight "down.weight" : !llm.weight<64x128, f32>
  %g = llm.linear %x, %wg : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %gs = mesh.shard %g to <@tp, [[], [0]]> : tensor<?x128xf32>
  %u = llm.linear %x, %wu : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %us = mesh.shard %u to <@tp, [[], [0]]> : tensor<?x128xf32>
  %s = llm.silu %gs : tensor<?x128xf32>
  %m = llm.mul %s, %us : tensor<?x128xf32>
  %d = llm.linear %m, %wd : tensor<?x128xf32>, !llm.weight<64x128, f32> -> tensor<?x64xf32>
  %r = llm.add %d, %x : tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}
// PROP-LABEL: func.func @megatron(
// The weight handles get no annotation: mesh.shard takes ranked tensors only.
// PROP: %[[WG:.+]] = llm.weight "gate.weight" : !llm.weight<128x64, f32>
// PROP: %[[WD:.+]] = llm.weight "down.weight" : !llm.weight<64x128, f32>
// PROP: %[[XG:.+]] = mesh.shard %arg0 to <@tp, []> annotate_for_users
// PROP-NEXT: %[[G:.+]] = llm.linear %[[XG]], %[[WG]]
// PROP-NEXT: mesh.shard %[[G]] to <@tp, {{\[\[\], \[0\]\]}}> : tensor<?x128xf32>
// PROP: %[[S:.+]] = llm.silu
// PROP-NEXT: mesh.shard %[[S]] to <@tp, {{\[\[\], \[0\]\]}}> : tensor<?x128xf32>
// PROP: %[[M:.+]] = llm.mul
// PROP-NEXT: %[[MS:.+]] = mesh.shard %[[M]] to <@tp, {{\[\[\], \[0\]\]}}> : tensor<?x128xf32>
// PROP-NEXT: %[[MU:.+]] = mesh.shard %[[MS]] to <@tp, {{\[\[\], \[0\]\]}}> annotate_for_users
// PROP-NEXT: %[[D:.+]] = llm.linear %[[MU]], %[[WD]]
// PROP-NEXT: %[[DS:.+]] = mesh.shard %[[D]] to <@tp, [], partial = sum[0]> : tensor<?x64xf32>
// PROP-NEXT: mesh.shard %[[DS]] to <@tp, []> annotate_for_users
// PROP: llm.add
// PROP-NEXT: mesh.shard %{{.+}} to <@tp, []> : tensor<?x64xf32>

// SPMD-LABEL: func.func @megatron(
// SPMD-NEXT: %[[WG:.+]] = llm.weight "gate.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// SPMD-NEXT: %[[WU:.+]] = llm.weight "up.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// SPMD-NEXT: %[[WD:.+]] = llm.weight "down.weight" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// SPMD-NEXT: %[[G:.+]] = llm.linear %arg0, %[[WG]] : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
// SPMD-NEXT: %[[U:.+]] = llm.linear %arg0, %[[WU]] : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
// SPMD-NEXT: %[[S:.+]] = llm.silu %[[G]] : tensor<?x64xf32>
// SPMD-NEXT: %[[M:.+]] = llm.mul %[[S]], %[[U]] : tensor<?x64xf32>
// SPMD-NEXT: %[[D:.+]] = llm.linear %[[M]], %[[WD]] : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
// SPMD-NEXT: %[[AR:.+]] = mesh.all_reduce %[[D]] on @tp mesh_axes = [0] : tensor<?x64xf32> -> tensor<?x64xf32>
// SPMD-NEXT: %[[R:.+]] = llm.add %[[AR]], %arg0 : tensor<?x64xf32>
// SPMD-NEXT: return %[[R]] : tensor<?x64xf32>

// -----

// One annotation (the gate's split result) does not make the Megatron plan:
// propagation runs backwards from the replicated return first, so llm.mul,
// up and down stay replicated, and spmdization gathers the split silu
// output back (mesh.all_gather) before the mul.
mesh.mesh @tp(shape = 2)
func.func @one_annotation(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %wg = llm.weight "gate.weight" : !llm.weight<128x64, f32>
  %wu = llm.weight "up.weight" : !llm.weight<128x64, f32>
  %wd = llm.weight "down.weight" : !llm.weight<64x128, f32>
  %g = llm.linear %x, %wg : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %gs = mesh.shard %g to <@tp, [[], [0]]> : tensor<?x128xf32>
  %u = llm.linear %x, %wu : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %s = llm.silu %gs : tensor<?x128xf32>
  %m = llm.mul %s, %u : tensor<?x128xf32>
  %d = llm.linear %m, %wd : tensor<?x128xf32>, !llm.weight<64x128, f32> -> tensor<?x64xf32>
  %r = llm.add %d, %x : tensor<?x64xf32>
  %rs = mesh.shard %r to <@tp, [[]]> annotate_for_users : tensor<?x64xf32>
  return %rs : tensor<?x64xf32>
}
// PROP-LABEL: func.func @one_annotation(
// PROP: %[[S:.+]] = llm.silu
// PROP-NEXT: %[[SS:.+]] = mesh.shard %[[S]] to <@tp, {{\[\[\], \[0\]\]}}> : tensor<?x128xf32>
// PROP-NEXT: mesh.shard %[[SS]] to <@tp, []> annotate_for_users
// PROP: %[[M:.+]] = llm.mul
// PROP-NEXT: mesh.shard %[[M]] to <@tp, []> : tensor<?x128xf32>

// SPMD-LABEL: func.func @one_annotation(
// SPMD-NEXT: llm.weight "gate.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// SPMD-NEXT: llm.weight "up.weight" : !llm.weight<128x64, f32>
// SPMD-NEXT: llm.weight "down.weight" : !llm.weight<64x128, f32>
// SPMD: %[[S:.+]] = llm.silu %{{.+}} : tensor<?x64xf32>
// SPMD-NEXT: %[[AG:.+]] = mesh.all_gather %[[S]] on @tp mesh_axes = [0] gather_axis = 1 : tensor<?x64xf32> -> tensor<?x128xf32>
// SPMD-NEXT: %[[C:.+]] = tensor.cast %[[AG]]
// SPMD-NEXT: llm.mul %[[C]], %{{.+}} : tensor<?x128xf32>
// SPMD-NOT: mesh.all_reduce
// SPMD: return

// -----

// llm.rms_norm splits over tokens; the weight stays whole.
mesh.mesh @tp(shape = 2)
func.func @norm_tokens(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %xs = mesh.shard %x to <@tp, [[0]]> annotate_for_users : tensor<?x64xf32>
  %w = llm.weight "norm.weight" : !llm.weight<64, f32>
  %y = llm.rms_norm %xs, %w eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}
// PROP-LABEL: func.func @norm_tokens(
// PROP: %[[Y:.+]] = llm.rms_norm
// PROP-NEXT: mesh.shard %[[Y]] to <@tp, {{\[\[0\]\]}}> : tensor<?x64xf32>

// SPMD-LABEL: func.func @norm_tokens(
// SPMD-NEXT: %[[W:.+]] = llm.weight "norm.weight" : !llm.weight<64, f32>
// SPMD-NEXT: llm.rms_norm %arg0, %[[W]] eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
