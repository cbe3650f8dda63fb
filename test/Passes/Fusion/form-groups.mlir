// Phase 2 of llmc-fuse: every GEMM (llm.linear, llm.lm_head) gathers its
// prologue (the norm feeding it when all the norm's users are GEMMs, and the
// elementwise ops producing the norm's input) and its epilogue (split, RoPE
// on a region with one use, elementwise ops whose other operands already
// exist) into one llm.fusion group; leftover elementwise chains form groups of
// their own; attention and embed stay alone. The rule must hold for any op
// order, so besides a standard Llama layer this file has layers written in
// unusual orders.
//
// RUN: llmc-opt %s --llmc-fuse | FileCheck %s
// The groups are valid IR: they print, parse and verify again.
// RUN: llmc-opt %s --llmc-fuse | llmc-opt --llmc-verify-step | FileCheck %s
// A second run changes nothing (merged weights do not merge again, groups are
// not regrouped).
// RUN: llmc-opt %s --llmc-fuse -o %t.once.mlir
// RUN: llmc-opt %t.once.mlir --llmc-fuse -o %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir
//
// The whole kernel stage (fuse, outline the ops left alone, plan buffers)
// works on the fused layer and round-trips; one layer is 5 kernels.
// RUN: llmc-opt %s --llmc-fuse --llmc-outline-kernels --llmc-plan-memory -o %t.kernels.mlir
// RUN: llmc-opt %t.kernels.mlir --llmc-verify-step | FileCheck %s --check-prefix=KERNELS
// RUN: llmc-opt %t.kernels.mlir --llmc-verify-step -o %t.again.mlir
// RUN: diff %t.kernels.mlir %t.again.mlir
// RUN: grep -c 'llm.fusion "layers.0.' %t.kernels.mlir | FileCheck %s --check-prefix=LAYER-KERNELS
// LAYER-KERNELS: {{^}}5{{$}}
//
// Without the fuse pass the same layer is 16 kernels (one per op).
// RUN: llmc-opt %s --llmc-outline-kernels | grep -c 'llm.fusion "layers.0.' | FileCheck %s --check-prefix=UNFUSED
// UNFUSED: {{^}}16{{$}}

// KERNELS: module attributes {llm.buffers = [
// KERNELS-LABEL: func.func @step(
// KERNELS-SAME: attributes {llm.logits_buffer =
// KERNELS-NEXT: llm.fusion "embed.embed_{{[0-9]+}}"
// KERNELS: llm.fusion "layers.0.attn.rms_norm+linear+split+rope_0"{{.*}} {llm.result_buffers = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>}
// KERNELS: llm.fusion "layers.0.attn.paged_attention_{{[0-9]+}}"
// KERNELS: llm.fusion "layers.0.attn.linear+add_1"
// KERNELS: llm.fusion "layers.0.mlp.rms_norm+linear+split+silu+mul_2"
// KERNELS: llm.fusion "layers.0.mlp.linear+add_3"
// KERNELS: llm.fusion "lm_head.rms_norm+lm_head_4"
// KERNELS-NEXT: ^bb0
// KERNELS-NOT: llm.fusion
// KERNELS: return
// KERNELS-NEXT: }
// KERNELS-NEXT: func.func @add_before_norm

// A Llama layer between the embedding and the head: one group for the norm,
// the merged QKV GEMM and RoPE on Q and K (V leaves the group unrotated);
// attention alone; o_proj with the residual add; the MLP norm, the merged
// gate/up GEMM and SiLU(gate) * up; down_proj with the residual add; the
// final norm with the lm_head.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[TOK:[^:]+]]: tensor<?xi32>, %[[POS:[^:]+]]: tensor<?xi32>, %[[STARTS:[^:]+]]: tensor<?xi32>, %[[LENS:[^:]+]]: tensor<?xi32>, %[[TABLES:[^:]+]]: tensor<?x?xi32>, %[[SLOTS:[^:]+]]: tensor<?xi32>, %[[ROWS:[^:]+]]: tensor<?xi32>, %[[CACHE:[^:]+]]: !llm.kv_cache
// CHECK: %[[H:.+]] = llm.embed %[[TOK]]
// CHECK-NOT: llm.{{linear|rms_norm|rope|add|mul|silu|split}}
// CHECK: %[[QKV:.+]]:3 = llm.fusion "layers.0.attn.rms_norm+linear+split+rope_0"(%[[H]], %[[POS]]) : (tensor<?x64xf32>, tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>) {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?xi32>):
// CHECK-NEXT: %[[WN:.+]] = llm.weight "model.layers.0.input_layernorm.weight"
// CHECK-NEXT: %[[N:.+]] = llm.rms_norm %[[A0]], %[[WN]]
// CHECK-NEXT: %[[W:.+]] = llm.weight "model.layers.0.self_attn.{q,k,v}_proj.weight" concat [{{.+}}] : !llm.weight<128x64, f32>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %[[N]], %[[W]] : {{.+}} -> tensor<?x128xf32>
// CHECK-NEXT: %[[P:.+]]:3 = llm.split %[[Y]] : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
// CHECK-NEXT: %[[Q:.+]] = llm.rope %[[P]]#0, %[[A1]] heads = 4
// CHECK-NEXT: %[[K:.+]] = llm.rope %[[P]]#1, %[[A1]] heads = 2
// CHECK-NEXT: llm.yield %[[P]]#2, %[[Q]], %[[K]] :
// CHECK-NEXT: }
// CHECK-NOT: llm.{{linear|rms_norm|rope|add|mul|silu|split}}
// CHECK: %[[ATT:.+]] = llm.paged_attention %[[QKV]]#1, %[[QKV]]#2, %[[QKV]]#0 into %[[CACHE]]
// CHECK-NOT: llm.{{linear|rms_norm|rope|add|mul|silu|split}}
// CHECK: %[[H1:.+]] = llm.fusion "layers.0.attn.linear+add_1"(%[[ATT]], %[[H]]) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[W:.+]] = llm.weight "model.layers.0.self_attn.o_proj.weight"
// CHECK-NEXT: %[[O:.+]] = llm.linear %[[A0]], %[[W]]
// CHECK-NEXT: %[[R:.+]] = llm.add %[[A1]], %[[O]]
// CHECK-NEXT: llm.yield %[[R]] :
// CHECK-NEXT: }
// CHECK-NOT: llm.{{linear|rms_norm|rope|add|mul|silu|split}}
// CHECK: %[[GU:.+]] = llm.fusion "layers.0.mlp.rms_norm+linear+split+silu+mul_2"(%[[H1]]) : (tensor<?x64xf32>) -> tensor<?x160xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[WN:.+]] = llm.weight "model.layers.0.post_attention_layernorm.weight"
// CHECK-NEXT: %[[N:.+]] = llm.rms_norm %[[A0]], %[[WN]]
// CHECK-NEXT: %[[W:.+]] = llm.weight "model.layers.0.mlp.{gate,up}_proj.weight" concat [{{.+}}] : !llm.weight<320x64, f32>
// CHECK-NEXT: %[[Y:.+]] = llm.linear %[[N]], %[[W]] : {{.+}} -> tensor<?x320xf32>
// CHECK-NEXT: %[[P:.+]]:2 = llm.split %[[Y]] : tensor<?x320xf32> -> tensor<?x160xf32>, tensor<?x160xf32>
// CHECK-NEXT: %[[S:.+]] = llm.silu %[[P]]#0
// CHECK-NEXT: %[[M:.+]] = llm.mul %[[S]], %[[P]]#1
// CHECK-NEXT: llm.yield %[[M]] :
// CHECK-NEXT: }
// CHECK-NOT: llm.{{linear|rms_norm|rope|add|mul|silu|split}}
// CHECK: %[[H2:.+]] = llm.fusion "layers.0.mlp.linear+add_3"(%[[GU]], %[[H1]]) : (tensor<?x160xf32>, tensor<?x64xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x160xf32>, %[[A1:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[W:.+]] = llm.weight "model.layers.0.mlp.down_proj.weight"
// CHECK-NEXT: %[[D:.+]] = llm.linear %[[A0]], %[[W]]
// CHECK-NEXT: %[[R:.+]] = llm.add %[[A1]], %[[D]]
// CHECK-NEXT: llm.yield %[[R]] :
// CHECK-NEXT: }
// CHECK-NOT: llm.{{linear|rms_norm|rope|add|mul|silu|split}}
// CHECK: %[[L:.+]] = llm.fusion "lm_head.rms_norm+lm_head_4"(%[[H2]], %[[ROWS]]) : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x300xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?xi32>):
// CHECK-NEXT: %[[WN:.+]] = llm.weight "model.norm.weight"
// CHECK-NEXT: %[[N:.+]] = llm.rms_norm %[[A0]], %[[WN]]
// CHECK-NEXT: %[[W:.+]] = llm.weight "model.embed_tokens.weight"
// CHECK-NEXT: %[[LH:.+]] = llm.lm_head %[[N]][%[[A1]]], %[[W]]
// CHECK-NEXT: llm.yield %[[LH]] :
// CHECK-NEXT: }
// CHECK-NEXT: return %[[L]]
!cache = !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>
func.func @step(%tokens: tensor<?xi32>, %pos: tensor<?xi32>, %starts: tensor<?xi32>, %lens: tensor<?xi32>,
                %tables: tensor<?x?xi32>, %slots: tensor<?xi32>, %rows: tensor<?xi32>, %cache: !cache) -> tensor<?x300xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<300x64, f32> loc("embed")
  %h = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<300x64, f32> -> tensor<?x64xf32> loc("embed")
  %wn = llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<64, f32> loc("layers.0.attn")
  %n = llm.rms_norm %h, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32> loc("layers.0.attn")
  %wq = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32> loc("layers.0.attn")
  %q = llm.linear %n, %wq : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32> loc("layers.0.attn")
  %wk = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32> loc("layers.0.attn")
  %k = llm.linear %n, %wk : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("layers.0.attn")
  %wv = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, f32> loc("layers.0.attn")
  %v = llm.linear %n, %wv : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("layers.0.attn")
  %qr = llm.rope %q, %pos heads = 4, head_dim = 16, theta = 1.0e+04, style = half : tensor<?x64xf32>, tensor<?xi32> loc("layers.0.attn")
  %kr = llm.rope %k, %pos heads = 2, head_dim = 16, theta = 1.0e+04, style = half : tensor<?x32xf32>, tensor<?xi32> loc("layers.0.attn")
  %a = llm.paged_attention %qr, %kr, %v into %cache slots(%slots) seqs(%starts, %lens, %tables)
      heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
      !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32> loc("layers.0.attn")
  %wo = llm.weight "model.layers.0.self_attn.o_proj.weight" : !llm.weight<64x64, f32> loc("layers.0.attn")
  %o = llm.linear %a, %wo : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32> loc("layers.0.attn")
  %h1 = llm.add %h, %o : tensor<?x64xf32> loc("layers.0.attn")
  %wn2 = llm.weight "model.layers.0.post_attention_layernorm.weight" : !llm.weight<64, f32> loc("layers.0.mlp")
  %n2 = llm.rms_norm %h1, %wn2 eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32> loc("layers.0.mlp")
  %wg = llm.weight "model.layers.0.mlp.gate_proj.weight" : !llm.weight<160x64, f32> loc("layers.0.mlp")
  %g = llm.linear %n2, %wg : tensor<?x64xf32>, !llm.weight<160x64, f32> -> tensor<?x160xf32> loc("layers.0.mlp")
  %wu = llm.weight "model.layers.0.mlp.up_proj.weight" : !llm.weight<160x64, f32> loc("layers.0.mlp")
  %u = llm.linear %n2, %wu : tensor<?x64xf32>, !llm.weight<160x64, f32> -> tensor<?x160xf32> loc("layers.0.mlp")
  %s = llm.silu %g : tensor<?x160xf32> loc("layers.0.mlp")
  %m = llm.mul %s, %u : tensor<?x160xf32> loc("layers.0.mlp")
  %wd = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, f32> loc("layers.0.mlp")
  %d = llm.linear %m, %wd : tensor<?x160xf32>, !llm.weight<64x160, f32> -> tensor<?x64xf32> loc("layers.0.mlp")
  %h2 = llm.add %h1, %d : tensor<?x64xf32> loc("layers.0.mlp")
  %wf = llm.weight "model.norm.weight" : !llm.weight<64, f32> loc("lm_head")
  %nf = llm.rms_norm %h2, %wf eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32> loc("lm_head")
  %l = llm.lm_head %nf[%rows], %emb : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<300x64, f32> -> tensor<?x300xf32> loc("lm_head")
  return %l : tensor<?x300xf32>
}

// (a) A residual add *before* the norm, with no GEMM producing it (both
// operands are arguments): it joins the linear's group as a prologue, and
// since it is also returned, the group yields it.
// CHECK-LABEL: func.func @add_before_norm(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[Y:[^:]+]]: tensor<?x64xf32>
// CHECK-NOT: llm.{{linear|rms_norm|add}}
// CHECK: %[[G:.+]]:2 = llm.fusion "a.add+rms_norm+linear_0"(%[[X]], %[[Y]]) : (tensor<?x64xf32>, tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>) {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[H:.+]] = llm.add %[[A0]], %[[A1]]
// CHECK-NEXT: %[[WN:.+]] = llm.weight "norm"
// CHECK-NEXT: %[[N:.+]] = llm.rms_norm %[[H]], %[[WN]]
// CHECK-NEXT: %[[W:.+]] = llm.weight "w"
// CHECK-NEXT: %[[P:.+]] = llm.linear %[[N]], %[[W]]
// CHECK-NEXT: llm.yield %[[H]], %[[P]] :
// CHECK-NEXT: }
// CHECK-NOT: llm.{{linear|rms_norm|add}}
// CHECK: return %[[G]]#1, %[[G]]#0 :
func.func @add_before_norm(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x64xf32>) {
  %h = llm.add %x, %y : tensor<?x64xf32> loc("a")
  %wn = llm.weight "norm" : !llm.weight<64, f32>
  %n = llm.rms_norm %h, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %n, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("a")
  return %p, %h : tensor<?x32xf32>, tensor<?x64xf32>
}

// (a') The same add used only by the norm is not yielded; an epilogue op
// reading a function argument joins the same group, so prologue, GEMM and
// epilogue are one kernel with one output.
// CHECK-LABEL: func.func @add_before_norm_only(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[Y:[^:]+]]: tensor<?x64xf32>, %[[Z:[^:]+]]: tensor<?x32xf32>
// CHECK: %[[G:.+]] = llm.fusion "a.add+rms_norm+linear+mul_0"(%[[X]], %[[Y]], %[[Z]]) : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>) -> tensor<?x32xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?x64xf32>, %[[A2:.+]]: tensor<?x32xf32>):
// CHECK-NEXT: %[[H:.+]] = llm.add %[[A0]], %[[A1]]
// CHECK-NEXT: llm.weight "norm"
// CHECK-NEXT: %[[N:.+]] = llm.rms_norm %[[H]],
// CHECK-NEXT: llm.weight "w"
// CHECK-NEXT: %[[P:.+]] = llm.linear %[[N]],
// CHECK-NEXT: %[[M:.+]] = llm.mul %[[P]], %[[A2]]
// CHECK-NEXT: llm.yield %[[M]] : tensor<?x32xf32>
// CHECK-NEXT: }
// CHECK-NEXT: = llm.weight "norm"
// CHECK-NEXT: = llm.weight "w"
// CHECK-NEXT: return %[[G]] :
func.func @add_before_norm_only(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>, %z: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %h = llm.add %x, %y : tensor<?x64xf32>
  %wn = llm.weight "norm" : !llm.weight<64, f32>
  %n = llm.rms_norm %h, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %n, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("a")
  %m = llm.mul %p, %z : tensor<?x32xf32>
  return %m : tensor<?x32xf32>
}

// (b) A GELU MLP without a gate: GELU is the first linear's epilogue; the
// second linear has nothing to fuse and stays alone (outlined later).
// CHECK-LABEL: func.func @gelu_mlp(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[G:.+]] = llm.fusion "b1.linear+gelu_0"(%[[X]]) : (tensor<?x64xf32>) -> tensor<?x256xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[W:.+]] = llm.weight "fc1" : !llm.weight<256x64, f16>
// CHECK-NEXT: %[[P:.+]] = llm.linear %[[A0]], %[[W]]
// CHECK-NEXT: %[[E:.+]] = llm.gelu %[[P]] approx = tanh
// CHECK-NEXT: llm.yield %[[E]] :
// CHECK-NEXT: }
// CHECK-NOT: llm.fusion
// CHECK: %[[O:.+]] = llm.linear %[[G]], %{{.+}} : tensor<?x256xf32>, !llm.weight<64x256, f16> -> tensor<?x64xf32>
// CHECK-NEXT: return %[[O]]
func.func @gelu_mlp(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w1 = llm.weight "fc1" : !llm.weight<256x64, f16>
  %a = llm.linear %x, %w1 : tensor<?x64xf32>, !llm.weight<256x64, f16> -> tensor<?x256xf32> loc("b1")
  %g = llm.gelu %a approx = tanh : tensor<?x256xf32>
  %w2 = llm.weight "fc2" : !llm.weight<64x256, f16>
  %o = llm.linear %g, %w2 : tensor<?x256xf32>, !llm.weight<64x256, f16> -> tensor<?x64xf32> loc("b2")
  return %o : tensor<?x64xf32>
}

// (c) A norm shared by two linears of different formats (so they do not
// merge): each group recomputes the norm, and the original is gone.
// CHECK-LABEL: func.func @shared_norm(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK-NOT: llm.layer_norm
// CHECK: %[[B:.+]] = llm.fusion "c2.layer_norm+linear_1"(%[[X]]) : (tensor<?x64xf32>) -> tensor<?x32xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[WN:.+]] = llm.weight "norm"
// CHECK-NEXT: %[[N:.+]] = llm.layer_norm %[[A0]], %[[WN]] eps
// CHECK-NEXT: %[[W:.+]] = llm.weight "b" : !llm.weight<32x64, q4_1>
// CHECK-NEXT: %[[P:.+]] = llm.linear %[[N]], %[[W]]
// CHECK-NEXT: llm.yield %[[P]]
// CHECK-NEXT: }
// CHECK-NOT: llm.layer_norm
// CHECK: %[[A:.+]] = llm.fusion "c1.layer_norm+linear_0"(%[[X]]) : (tensor<?x64xf32>) -> tensor<?x32xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[WN:.+]] = llm.weight "norm"
// CHECK-NEXT: %[[N:.+]] = llm.layer_norm %[[A0]], %[[WN]] eps
// CHECK-NEXT: %[[W:.+]] = llm.weight "a" : !llm.weight<32x64, q8_0>
// CHECK-NEXT: %[[P:.+]] = llm.linear %[[N]], %[[W]]
// CHECK-NEXT: llm.yield %[[P]]
// CHECK-NEXT: }
// CHECK-NOT: llm.layer_norm
// CHECK: return %[[A]], %[[B]] :
func.func @shared_norm(%x: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %wn = llm.weight "norm" : !llm.weight<64, f32>
  %n = llm.layer_norm %x, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %wa = llm.weight "a" : !llm.weight<32x64, q8_0>
  %a = llm.linear %n, %wa : tensor<?x64xf32>, !llm.weight<32x64, q8_0> -> tensor<?x32xf32> loc("c1")
  %wb = llm.weight "b" : !llm.weight<32x64, q4_1>
  %b = llm.linear %n, %wb : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32> loc("c2")
  return %a, %b : tensor<?x32xf32>, tensor<?x32xf32>
}

// (c') A norm shared by a GEMM and a non-GEMM is computed once, outside.
// CHECK-LABEL: func.func @norm_feeds_non_gemm(
// CHECK-NOT: llm.fusion
// CHECK: %[[N:.+]] = llm.rms_norm
// CHECK-NOT: llm.fusion
// CHECK: llm.linear %[[N]]
// CHECK-NEXT: llm.silu %[[N]]
// CHECK-NOT: llm.fusion
// CHECK: return
func.func @norm_feeds_non_gemm(%x: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x64xf32>) {
  %wn = llm.weight "norm" : !llm.weight<64, f32>
  %n = llm.rms_norm %x, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %n, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  %s = llm.silu %n : tensor<?x64xf32>
  return %p, %s : tensor<?x32xf32>, tensor<?x64xf32>
}

// (d) A standalone elementwise chain (no GEMM) is one group.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[Y:[^:]+]]: tensor<?x64xf32>
// CHECK-NEXT: %[[G:.+]] = llm.fusion "d.silu+mul_0"(%[[X]], %[[Y]]) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[S:.+]] = llm.silu %[[A0]]
// CHECK-NEXT: %[[M:.+]] = llm.mul %[[S]], %[[A1]]
// CHECK-NEXT: llm.yield %[[M]] :
// CHECK-NEXT: }
// CHECK-NEXT: return %[[G]]
func.func @chain(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %s = llm.silu %x : tensor<?x64xf32> loc("d")
  %m = llm.mul %s, %y : tensor<?x64xf32> loc("d")
  return %m : tensor<?x64xf32>
}

// (e) The final norm fuses into the lm_head (which takes no epilogue).
// CHECK-LABEL: func.func @head(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[ROWS:[^:]+]]: tensor<?xi32>
// CHECK-NOT: llm.rms_norm
// CHECK: %[[G:.+]] = llm.fusion "lm_head.rms_norm+lm_head_0"(%[[X]], %[[ROWS]]) : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x300xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?xi32>):
// CHECK-NEXT: llm.weight "model.norm.weight"
// CHECK-NEXT: %[[N:.+]] = llm.rms_norm %[[A0]],
// CHECK-NEXT: %[[W:.+]] = llm.weight "lm_head.weight"
// CHECK-NEXT: %[[L:.+]] = llm.lm_head %[[N]][%[[A1]]], %[[W]]
// CHECK-NEXT: llm.yield %[[L]]
// CHECK-NEXT: }
// CHECK-NOT: llm.silu
// CHECK: return %[[G]]
func.func @head(%x: tensor<?x64xf32>, %rows: tensor<?xi32>) -> tensor<?x300xf32> {
  %wn = llm.weight "model.norm.weight" : !llm.weight<64, f32> loc("lm_head")
  %n = llm.rms_norm %x, %wn eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32> loc("lm_head")
  %w = llm.weight "lm_head.weight" : !llm.weight<300x64, f32> loc("lm_head")
  %l = llm.lm_head %n[%rows], %w : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<300x64, f32> -> tensor<?x300xf32> loc("lm_head")
  return %l : tensor<?x300xf32>
}

// (f) An epilogue op whose other operand is defined after the GEMM (here by
// llm.recv) is not absorbed: the group would sit before that operand. The
// linear and the add stay as they are (valid, in order).
// CHECK-LABEL: func.func @late_operand(
// CHECK-NOT: llm.fusion
// CHECK: %[[P:.+]] = llm.linear
// CHECK-NEXT: %[[R:.+]] = llm.recv from 0
// CHECK-NEXT: %[[S:.+]] = llm.add %[[P]], %[[R]]
// CHECK-NEXT: return %[[S]]
func.func @late_operand(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("f")
  %r = llm.recv from 0 : tensor<?x32xf32>
  %s = llm.add %p, %r : tensor<?x32xf32>
  return %s : tensor<?x32xf32>
}

// (f') The late operand comes from an elementwise op: the first linear takes
// no epilogue; the SiLU seeds a chain group that takes the add (whose other
// operand, the linear, exists before the SiLU).
// CHECK-LABEL: func.func @late_elementwise_operand(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[Y:[^:]+]]: tensor<?x32xf32>
// CHECK: %[[P:.+]] = llm.linear %[[X]]
// CHECK-NEXT: %[[G:.+]] = llm.fusion "f2.silu+add_0"(%[[Y]], %[[P]]) : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x32xf32>, %[[A1:.+]]: tensor<?x32xf32>):
// CHECK-NEXT: %[[T:.+]] = llm.silu %[[A0]]
// CHECK-NEXT: %[[S:.+]] = llm.add %[[A1]], %[[T]]
// CHECK-NEXT: llm.yield %[[S]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[G]]
func.func @late_elementwise_operand(%x: tensor<?x64xf32>, %y: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("f1")
  %t = llm.silu %y : tensor<?x32xf32> loc("f2")
  %s = llm.add %p, %t : tensor<?x32xf32>
  return %s : tensor<?x32xf32>
}

// (f'') The late operand is another GEMM: the add is not the first linear's
// epilogue but the second's, where the first linear's result already exists.
// CHECK-LABEL: func.func @late_gemm_operand(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>, %[[Z:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[P:.+]] = llm.linear %[[X]], %{{.+}} : {{.+}}, !llm.weight<32x64, f32>
// CHECK-NEXT: = llm.weight "w2"
// CHECK-NEXT: %[[G:.+]] = llm.fusion "f2.linear+add_0"(%[[Z]], %[[P]])
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<?x64xf32>, %[[A1:.+]]: tensor<?x32xf32>):
// CHECK-NEXT: %[[W:.+]] = llm.weight "w2" : !llm.weight<32x64, f16>
// CHECK-NEXT: %[[R:.+]] = llm.linear %[[A0]], %[[W]]
// CHECK-NEXT: %[[S:.+]] = llm.add %[[A1]], %[[R]]
// CHECK-NEXT: llm.yield %[[S]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[G]]
func.func @late_gemm_operand(%x: tensor<?x64xf32>, %z: tensor<?x64xf32>) -> tensor<?x32xf32> {
  %w = llm.weight "w" : !llm.weight<32x64, f32>
  %p = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("f1")
  %w2 = llm.weight "w2" : !llm.weight<32x64, f16>
  %r = llm.linear %z, %w2 : tensor<?x64xf32>, !llm.weight<32x64, f16> -> tensor<?x32xf32> loc("f2")
  %s = llm.add %p, %r : tensor<?x32xf32>
  return %s : tensor<?x32xf32>
}

// (g) RoPE on a value that has another use is not absorbed (the unrotated
// value would have to leave the group too); nothing fuses.
// CHECK-LABEL: func.func @rope_shared(
// CHECK-NOT: llm.fusion
// CHECK: %[[Q:.+]] = llm.linear
// CHECK-NEXT: %[[R:.+]] = llm.rope %[[Q]]
// CHECK-NEXT: return %[[R]], %[[Q]]
func.func @rope_shared(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %w = llm.weight "w" : !llm.weight<64x64, f32>
  %q = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32> loc("g")
  %r = llm.rope %q, %pos heads = 4, head_dim = 16, theta = 1.0e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
  return %r, %q : tensor<?x64xf32>, tensor<?x64xf32>
}

// (h) Pairing two regions of a split needs equal widths and no RoPE: a
// product of the two 32-wide regions of a 64/32/32 split, and a product of a
// rotated region with another, stay outside the group.
// CHECK-LABEL: func.func @unequal_pair(
// CHECK: %[[G:.+]]:3 = llm.fusion "h.linear+split_0"
// CHECK: llm.yield
// CHECK-NEXT: }
// CHECK: %[[M:.+]] = llm.mul %[[G]]#1, %[[G]]#2
// CHECK-NEXT: return %[[G]]#0, %[[M]]
func.func @unequal_pair(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>) {
  %wq = llm.weight "q" : !llm.weight<64x64, f32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32> loc("h")
  %wk = llm.weight "k" : !llm.weight<32x64, f32>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("h")
  %wv = llm.weight "v" : !llm.weight<32x64, f32>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32> loc("h")
  %m = llm.mul %k, %v : tensor<?x32xf32>
  return %q, %m : tensor<?x64xf32>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @rope_then_pair(
// CHECK: %[[G:.+]]:2 = llm.fusion "h.linear+split+rope_0"
// CHECK: llm.rope
// CHECK-NEXT: llm.yield
// CHECK-NEXT: }
// CHECK: %[[M:.+]] = llm.mul %[[G]]#1, %[[G]]#0
// CHECK-NEXT: return %[[M]]
func.func @rope_then_pair(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %wg = llm.weight "g" : !llm.weight<64x64, f32>
  %g = llm.linear %x, %wg : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32> loc("h")
  %wu = llm.weight "u" : !llm.weight<64x64, f32>
  %u = llm.linear %x, %wu : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32> loc("h")
  %r = llm.rope %g, %pos heads = 4, head_dim = 16, theta = 1.0e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
  %m = llm.mul %r, %u : tensor<?x64xf32>
  return %m : tensor<?x64xf32>
}
