// Phase 1 of llmc-fuse alone: linears that read the same value with weights
// of one format, group and `from` conversion (and the same bias kind) become
// one linear over a `concat` weight followed by llm.split, whose results take
// over the uses of the old linears. Everything else is left alone.
//
// RUN: llmc-opt %s --llmc-fuse="form-groups=false" | FileCheck %s
// The merged IR is valid and prints back the same.
// RUN: llmc-opt %s --llmc-fuse="form-groups=false" | llmc-opt | FileCheck %s
// With merging off too, the pass changes nothing.
// RUN: llmc-opt %s --llmc-fuse="merge-siblings=false form-groups=false" | FileCheck %s --check-prefix=OFF --implicit-check-not=concat --implicit-check-not=llm.split

// Every linear is still there, one per weight, and nothing anywhere is
// merged or split (the implicit checks cover the whole output).
// OFF-LABEL: func.func @qkv(
// OFF-COUNT-3: llm.linear %arg0, %{{[0-9]+}} : tensor<?x64xf32>, !llm.weight<{{(64|32)}}x64, q4_1>
// OFF-LABEL: func.func @gate_up(
// OFF-COUNT-2: llm.linear %arg0, %{{[0-9]+}} : tensor<?x64xf32>, !llm.weight<160x64, bf16>
// OFF-LABEL: func.func @bias(
// OFF-COUNT-3: llm.linear %arg0, %{{[0-9]+}} bias %{{[0-9]+}}
// OFF-LABEL: func.func @from_conversions(
// OFF-COUNT-6: llm.linear %arg0

// Q, K and V of one format: one GEMM over the rows of the three weights, in
// program order, split back into 64 + 32 + 32 features.
// CHECK-LABEL: func.func @qkv(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK-NOT: llm.linear
// CHECK: %[[W:.+]] = llm.weight "blk.0.attn_{q,k,v}.weight" concat ["blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"] : !llm.weight<128x64, q4_1>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %[[X]], %[[W]] : tensor<?x64xf32>, !llm.weight<128x64, q4_1> -> tensor<?x128xf32>
// CHECK-NEXT: %[[P:.+]]:3 = llm.split %[[Y]] : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
// CHECK-NOT: llm.linear
// CHECK: %[[S:.+]] = llm.silu %[[P]]#0 : tensor<?x64xf32>
// CHECK-NEXT: return %[[S]], %[[P]]#1, %[[P]]#2 :
func.func @qkv(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %wq = llm.weight "blk.0.attn_q.weight" : !llm.weight<64x64, q4_1>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, !llm.weight<64x64, q4_1> -> tensor<?x64xf32>
  %wk = llm.weight "blk.0.attn_k.weight" : !llm.weight<32x64, q4_1>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  %wv = llm.weight "blk.0.attn_v.weight" : !llm.weight<32x64, q4_1>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  %s = llm.silu %q : tensor<?x64xf32>
  return %s, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// Gate and up merge (Hugging Face names: the common "_proj.weight" suffix
// stays outside the braces); down reads another value and stays.
// CHECK-LABEL: func.func @gate_up(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[W:.+]] = llm.weight "model.layers.0.mlp.{gate,up}_proj.weight" concat ["model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"] : !llm.weight<320x64, bf16>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %[[X]], %[[W]] : tensor<?x64xf32>, !llm.weight<320x64, bf16> -> tensor<?x320xf32>
// CHECK-NEXT: %[[P:.+]]:2 = llm.split %[[Y]] : tensor<?x320xf32> -> tensor<?x160xf32>, tensor<?x160xf32>
// CHECK: %[[S:.+]] = llm.silu %[[P]]#0
// CHECK-NEXT: %[[M:.+]] = llm.mul %[[S]], %[[P]]#1
// CHECK-NEXT: %[[WD:.+]] = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, bf16>
// CHECK-NEXT: %[[D:.+]] = llm.linear %[[M]], %[[WD]] : tensor<?x160xf32>, !llm.weight<64x160, bf16> -> tensor<?x64xf32>
// CHECK-NEXT: return %[[D]]
func.func @gate_up(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %wg = llm.weight "model.layers.0.mlp.gate_proj.weight" : !llm.weight<160x64, bf16>
  %g = llm.linear %x, %wg : tensor<?x64xf32>, !llm.weight<160x64, bf16> -> tensor<?x160xf32>
  %wu = llm.weight "model.layers.0.mlp.up_proj.weight" : !llm.weight<160x64, bf16>
  %u = llm.linear %x, %wu : tensor<?x64xf32>, !llm.weight<160x64, bf16> -> tensor<?x160xf32>
  %s = llm.silu %g : tensor<?x160xf32>
  %m = llm.mul %s, %u : tensor<?x160xf32>
  %wd = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, bf16>
  %d = llm.linear %m, %wd : tensor<?x160xf32>, !llm.weight<64x160, bf16> -> tensor<?x64xf32>
  return %d : tensor<?x64xf32>
}

// Qwen2: the biases of Q, K and V are concatenated like their weights. A
// sibling of the same weight format without a bias (o_proj here) is a
// different bias kind and stays apart.
// CHECK-LABEL: func.func @bias(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[W:.+]] = llm.weight "model.layers.0.self_attn.{q,k,v}_proj.weight" concat ["model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight"] : !llm.weight<128x64, f32>
// CHECK-NEXT: %[[B:.+]] = llm.weight "model.layers.0.self_attn.{q,k,v}_proj.bias" concat ["model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.k_proj.bias", "model.layers.0.self_attn.v_proj.bias"] : !llm.weight<128, f32>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %[[X]], %[[W]] bias %[[B]] : tensor<?x64xf32>, !llm.weight<128x64, f32>, !llm.weight<128, f32> -> tensor<?x128xf32>
// CHECK-NEXT: %[[P:.+]]:3 = llm.split %[[Y]] : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
// CHECK: %[[WO:.+]] = llm.weight "model.layers.0.self_attn.o_proj.weight"
// CHECK-NEXT: %[[O:.+]] = llm.linear %[[X]], %[[WO]] : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
// CHECK-NEXT: return %[[P]]#0, %[[P]]#1, %[[P]]#2, %[[O]] :
func.func @bias(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x64xf32>) {
  %wq = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
  %bq = llm.weight "model.layers.0.self_attn.q_proj.bias" : !llm.weight<64, f32>
  %q = llm.linear %x, %wq bias %bq : tensor<?x64xf32>, !llm.weight<64x64, f32>, !llm.weight<64, f32> -> tensor<?x64xf32>
  %wk = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
  %bk = llm.weight "model.layers.0.self_attn.k_proj.bias" : !llm.weight<32, f32>
  %k = llm.linear %x, %wk bias %bk : tensor<?x64xf32>, !llm.weight<32x64, f32>, !llm.weight<32, f32> -> tensor<?x32xf32>
  %wv = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, f32>
  %bv = llm.weight "model.layers.0.self_attn.v_proj.bias" : !llm.weight<32, f32>
  %v = llm.linear %x, %wv bias %bv : tensor<?x64xf32>, !llm.weight<32x64, f32>, !llm.weight<32, f32> -> tensor<?x32xf32>
  %wo = llm.weight "model.layers.0.self_attn.o_proj.weight" : !llm.weight<64x64, f32>
  %o = llm.linear %x, %wo : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  return %q, %k, %v, %o : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x64xf32>
}

// Different weight formats on one input (a GGUF whose V is q8_0 while Q and
// K are q4_1): only the two q4_1 projections merge; the q8_0 one keeps its
// own linear, and its uses are untouched.
// CHECK-LABEL: func.func @mixed_formats(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[W:.+]] = llm.weight "blk.0.attn_{q,k}.weight" concat ["blk.0.attn_q.weight", "blk.0.attn_k.weight"] : !llm.weight<96x64, q4_1>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %[[X]], %[[W]] : tensor<?x64xf32>, !llm.weight<96x64, q4_1> -> tensor<?x96xf32>
// CHECK-NEXT: %[[P:.+]]:2 = llm.split %[[Y]] : tensor<?x96xf32> -> tensor<?x64xf32>, tensor<?x32xf32>
// CHECK: %[[WV:.+]] = llm.weight "blk.0.attn_v.weight" : !llm.weight<32x64, q8_0>
// CHECK-NEXT: %[[V:.+]] = llm.linear %[[X]], %[[WV]] : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32>
// CHECK-NEXT: return %[[P]]#0, %[[P]]#1, %[[V]] :
func.func @mixed_formats(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %wq = llm.weight "blk.0.attn_q.weight" : !llm.weight<64x64, q4_1>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, !llm.weight<64x64, q4_1> -> tensor<?x64xf32>
  %wk = llm.weight "blk.0.attn_k.weight" : !llm.weight<32x64, q4_1>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  %wv = llm.weight "blk.0.attn_v.weight" : !llm.weight<32x64, q8_0>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// Two linears of different formats and nothing else: no merge at all.
// CHECK-LABEL: func.func @two_formats(
// CHECK-NOT: concat
// CHECK-NOT: llm.split
// CHECK: llm.linear {{.+}} !llm.weight<32x64, f16> -> tensor<?x32xf32>
// CHECK-NEXT: llm.weight "b" : !llm.weight<32x64, f32>
// CHECK-NEXT: llm.linear {{.+}} !llm.weight<32x64, f32> -> tensor<?x32xf32>
// CHECK-NEXT: return
func.func @two_formats(%x: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %wa = llm.weight "a" : !llm.weight<32x64, f16>
  %a = llm.linear %x, %wa : tensor<?x64xf32>, !llm.weight<32x64, f16> -> tensor<?x32xf32>
  %wb = llm.weight "b" : !llm.weight<32x64, f32>
  %b = llm.linear %x, %wb : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  return %a, %b : tensor<?x32xf32>, tensor<?x32xf32>
}

// Same format, different inputs: nothing to share, no merge.
// CHECK-LABEL: func.func @different_inputs(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[Z:[^:]+]]: tensor<?x64xf32>
// CHECK-NOT: concat
// CHECK-NOT: llm.split
// CHECK: llm.linear %[[X]], %{{.+}} : tensor<?x64xf32>, !llm.weight<32x64, q4_1>
// CHECK: llm.linear %[[Z]], %{{.+}} : tensor<?x64xf32>, !llm.weight<32x64, q4_1>
// CHECK-NEXT: return
func.func @different_inputs(%x: tensor<?x64xf32>, %z: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %wa = llm.weight "blk.0.a.weight" : !llm.weight<32x64, q4_1>
  %a = llm.linear %x, %wa : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  %wb = llm.weight "blk.0.b.weight" : !llm.weight<32x64, q4_1>
  %b = llm.linear %z, %wb : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  return %a, %b : tensor<?x32xf32>, tensor<?x32xf32>
}

// Quantized weights (quantize pass): i4 group 64 converted from bf16 merges
// only with i4/64 siblings converted from bf16; the one converted from f16,
// the one with group 128 and the one stored as i4 (no `from`) stay apart.
// The f16-converted pair merges separately and keeps its `from`.
// CHECK-LABEL: func.func @from_conversions(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x128xf32>
// CHECK: %[[W1:.+]] = llm.weight "{q,k}" concat ["q", "k"] from "bf16" : !llm.weight<96x128, i4, group = 64>
// CHECK-NEXT: %[[Y1:.+]] = llm.linear %[[X]], %[[W1]] : tensor<?x128xf32>, !llm.weight<96x128, i4, group = 64> -> tensor<?x96xf32>
// CHECK-NEXT: %[[P1:.+]]:2 = llm.split %[[Y1]] : tensor<?x96xf32> -> tensor<?x64xf32>, tensor<?x32xf32>
// CHECK: %[[W2:.+]] = llm.weight "{v,u}" concat ["v", "u"] from "f16" : !llm.weight<64x128, i4, group = 64>
// CHECK-NEXT: %[[Y2:.+]] = llm.linear %[[X]], %[[W2]] : tensor<?x128xf32>, !llm.weight<64x128, i4, group = 64> -> tensor<?x64xf32>
// CHECK-NEXT: %[[P2:.+]]:2 = llm.split %[[Y2]] : tensor<?x64xf32> -> tensor<?x32xf32>, tensor<?x32xf32>
// CHECK: %[[WG:.+]] = llm.weight "g" from "bf16" : !llm.weight<32x128, i4, group = 128>
// CHECK-NEXT: %[[G:.+]] = llm.linear %[[X]], %[[WG]]
// CHECK-NEXT: %[[WS:.+]] = llm.weight "s" : !llm.weight<32x128, i4, group = 64>
// CHECK-NEXT: %[[S:.+]] = llm.linear %[[X]], %[[WS]]
// CHECK-NOT: llm.linear
// CHECK: return %[[P1]]#0, %[[P1]]#1, %[[P2]]#0, %[[P2]]#1, %[[G]], %[[S]] :
func.func @from_conversions(%x: tensor<?x128xf32>)
    -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %wq = llm.weight "q" from "bf16" : !llm.weight<64x128, i4, group = 64>
  %q = llm.linear %x, %wq : tensor<?x128xf32>, !llm.weight<64x128, i4, group = 64> -> tensor<?x64xf32>
  %wv = llm.weight "v" from "f16" : !llm.weight<32x128, i4, group = 64>
  %v = llm.linear %x, %wv : tensor<?x128xf32>, !llm.weight<32x128, i4, group = 64> -> tensor<?x32xf32>
  %wk = llm.weight "k" from "bf16" : !llm.weight<32x128, i4, group = 64>
  %k = llm.linear %x, %wk : tensor<?x128xf32>, !llm.weight<32x128, i4, group = 64> -> tensor<?x32xf32>
  %wg = llm.weight "g" from "bf16" : !llm.weight<32x128, i4, group = 128>
  %g = llm.linear %x, %wg : tensor<?x128xf32>, !llm.weight<32x128, i4, group = 128> -> tensor<?x32xf32>
  %ws = llm.weight "s" : !llm.weight<32x128, i4, group = 64>
  %s = llm.linear %x, %ws : tensor<?x128xf32>, !llm.weight<32x128, i4, group = 64> -> tensor<?x32xf32>
  %wu = llm.weight "u" from "f16" : !llm.weight<32x128, i4, group = 64>
  %u = llm.linear %x, %wu : tensor<?x128xf32>, !llm.weight<32x128, i4, group = 64> -> tensor<?x32xf32>
  return %q, %k, %v, %u, %g, %s
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}
