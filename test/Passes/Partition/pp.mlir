// --llmc-partition-pp keeps one pipeline stage's layers of a two-layer
// model: stage 0 embeds, runs layer 0 and sends the hidden state; stage 1
// receives it, runs layer 1, the final norm and the (tied) LM head. Each
// stage keeps only its own layers' caches.
//
// RUN: llmc-opt %s --llmc-partition-pp="stages=2 stage=0" | FileCheck %s --check-prefix=S0
// RUN: llmc-opt %s --llmc-partition-pp="stages=2 stage=1" | FileCheck %s --check-prefix=S1
// Explicit ranges give the same split.
// RUN: llmc-opt %s --llmc-partition-pp="stages=2 stage=1 layers=0-0,1-1" | FileCheck %s --check-prefix=S1
// With tensor parallelism on top: the stage's layers split over 2 ranks.
// RUN: llmc-opt %s --llmc-partition-pp="stages=2 stage=1" --llmc-partition-tp="tp=2" | FileCheck %s --check-prefix=S1TP
// One stage is no pipeline.
// RUN: llmc-opt %s --llmc-partition-pp="stages=1" | FileCheck %s --check-prefix=ONE --implicit-check-not=llm.mesh --implicit-check-not=llm.send --implicit-check-not=llm.recv

// S0: module attributes {llm.mesh = {pp = 2 : i64, stage = 0 : i64}}
// S0: func.func @step(
// S0-SAME: {llm.name = "cache0"}) {
// S0-NOT: cache1
// S0: %[[H0:.+]] = llm.embed
// S0: llm.paged_attention
// S0: %[[R:.+]] = llm.add %[[H0]], %{{.+}} : tensor<?x64xf32>
// S0: %[[H1:.+]] = llm.add %[[R]], %{{.+}} : tensor<?x64xf32>
// S0-NEXT: llm.send %[[H1]] to 1 : tensor<?x64xf32>
// S0-NEXT: return{{$}}
// S0-NOT: llm.lm_head
// S0-NOT: layers.1

// S1: module attributes {llm.mesh = {pp = 2 : i64, stage = 1 : i64}}
// S1: func.func @step(
// S1-NOT: cache0
// S1-SAME: {llm.name = "cache1"}) -> tensor<?x301xf32> {
// S1-NOT: llm.embed
// S1-NOT: layers.0
// S1: %[[H1:.+]] = llm.recv from 0 : tensor<?x64xf32>
// S1-NEXT: llm.rms_norm %[[H1]],
// S1: llm.paged_attention
// S1: llm.add %[[H1]], %{{.+}} : tensor<?x64xf32>
// S1: %[[L:.+]] = llm.lm_head
// S1-NEXT: return %[[L]] : tensor<?x301xf32>

// S1TP: module attributes {llm.mesh = {pp = 2 : i64, stage = 1 : i64, tp = 2 : i64}}
// S1TP: llm.recv from 0 : tensor<?x64xf32>
// S1TP: llm.paged_attention {{.+}} heads = 2, kv_heads = 1,
// S1TP: llm.all_reduce sum
// S1TP: llm.all_gather

// The whole model, unchanged: both caches, both layers, the LM head.
// ONE: func.func @step(
// ONE-SAME: {llm.name = "cache0"}
// ONE-SAME: {llm.name = "cache1"}) -> tensor<?x301xf32> {
// ONE: llm.embed
// ONE: llm.weight "model.layers.0.input_layernorm.weight"
// ONE: llm.weight "model.layers.1.mlp.down_proj.weight"
// ONE: %[[L:.+]] = llm.lm_head
// ONE-NEXT: return %[[L]] : tensor<?x301xf32>

func.func @step(%tokens: tensor<?xi32> {llm.name = "tokens"}, %pos: tensor<?xi32> {llm.name = "positions"}, %starts: tensor<?xi32> {llm.name = "query_starts"}, %lens: tensor<?xi32> {llm.name = "context_lens"}, %tables: tensor<?x?xi32> {llm.name = "block_tables"}, %slots: tensor<?xi32> {llm.name = "slot_mapping"}, %rows: tensor<?xi32> {llm.name = "logits_rows"}, %c0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32> {llm.name = "cache0"}, %c1: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32> {llm.name = "cache1"}) -> tensor<?x301xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<301x64, f32>
  %h0 = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<301x64, f32> -> tensor<?x64xf32>
  // layer 0
  %n0w = llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<64, f32>
  %n0 = llm.rms_norm %h0, %n0w eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %q0w = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
  %q0b = llm.weight "model.layers.0.self_attn.q_proj.bias" : !llm.weight<64, f32>
  %q0 = llm.linear %n0, %q0w bias %q0b : tensor<?x64xf32>, !llm.weight<64x64, f32>, !llm.weight<64, f32> -> tensor<?x64xf32>
  %k0w = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
  %k0b = llm.weight "model.layers.0.self_attn.k_proj.bias" : !llm.weight<32, f32>
  %k0 = llm.linear %n0, %k0w bias %k0b : tensor<?x64xf32>, !llm.weight<32x64, f32>, !llm.weight<32, f32> -> tensor<?x32xf32>
  %v0w = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, f32>
  %v0b = llm.weight "model.layers.0.self_attn.v_proj.bias" : !llm.weight<32, f32>
  %v0 = llm.linear %n0, %v0w bias %v0b : tensor<?x64xf32>, !llm.weight<32x64, f32>, !llm.weight<32, f32> -> tensor<?x32xf32>
  %qr0 = llm.rope %q0, %pos heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
  %kr0 = llm.rope %k0, %pos heads = 2, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x32xf32>, tensor<?xi32>
  %a0 = llm.paged_attention %qr0, %kr0, %v0 into %c0 slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %o0w = llm.weight "model.layers.0.self_attn.o_proj.weight" : !llm.weight<64x64, f32>
  %o0 = llm.linear %a0, %o0w : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  %r0 = llm.add %h0, %o0 : tensor<?x64xf32>
  %p0w = llm.weight "model.layers.0.post_attention_layernorm.weight" : !llm.weight<64, f32>
  %p0 = llm.rms_norm %r0, %p0w eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %g0w = llm.weight "model.layers.0.mlp.gate_proj.weight" : !llm.weight<128x64, f32>
  %g0 = llm.linear %p0, %g0w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %u0w = llm.weight "model.layers.0.mlp.up_proj.weight" : !llm.weight<128x64, f32>
  %u0 = llm.linear %p0, %u0w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %s0 = llm.silu %g0 : tensor<?x128xf32>
  %m0 = llm.mul %s0, %u0 : tensor<?x128xf32>
  %d0w = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x128, f32>
  %d0 = llm.linear %m0, %d0w : tensor<?x128xf32>, !llm.weight<64x128, f32> -> tensor<?x64xf32>
  %h1 = llm.add %r0, %d0 : tensor<?x64xf32>
  // layer 1
  %n1w = llm.weight "model.layers.1.input_layernorm.weight" : !llm.weight<64, f32>
  %n1 = llm.rms_norm %h1, %n1w eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %q1w = llm.weight "model.layers.1.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
  %q1b = llm.weight "model.layers.1.self_attn.q_proj.bias" : !llm.weight<64, f32>
  %q1 = llm.linear %n1, %q1w bias %q1b : tensor<?x64xf32>, !llm.weight<64x64, f32>, !llm.weight<64, f32> -> tensor<?x64xf32>
  %k1w = llm.weight "model.layers.1.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
  %k1b = llm.weight "model.layers.1.self_attn.k_proj.bias" : !llm.weight<32, f32>
  %k1 = llm.linear %n1, %k1w bias %k1b : tensor<?x64xf32>, !llm.weight<32x64, f32>, !llm.weight<32, f32> -> tensor<?x32xf32>
  %v1w = llm.weight "model.layers.1.self_attn.v_proj.weight" : !llm.weight<32x64, f32>
  %v1b = llm.weight "model.layers.1.self_attn.v_proj.bias" : !llm.weight<32, f32>
  %v1 = llm.linear %n1, %v1w bias %v1b : tensor<?x64xf32>, !llm.weight<32x64, f32>, !llm.weight<32, f32> -> tensor<?x32xf32>
  %qr1 = llm.rope %q1, %pos heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
  %kr1 = llm.rope %k1, %pos heads = 2, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x32xf32>, tensor<?xi32>
  %a1 = llm.paged_attention %qr1, %kr1, %v1 into %c1 slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %o1w = llm.weight "model.layers.1.self_attn.o_proj.weight" : !llm.weight<64x64, f32>
  %o1 = llm.linear %a1, %o1w : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  %r1 = llm.add %h1, %o1 : tensor<?x64xf32>
  %p1w = llm.weight "model.layers.1.post_attention_layernorm.weight" : !llm.weight<64, f32>
  %p1 = llm.rms_norm %r1, %p1w eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %g1w = llm.weight "model.layers.1.mlp.gate_proj.weight" : !llm.weight<128x64, f32>
  %g1 = llm.linear %p1, %g1w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %u1w = llm.weight "model.layers.1.mlp.up_proj.weight" : !llm.weight<128x64, f32>
  %u1 = llm.linear %p1, %u1w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
  %s1 = llm.silu %g1 : tensor<?x128xf32>
  %m1 = llm.mul %s1, %u1 : tensor<?x128xf32>
  %d1w = llm.weight "model.layers.1.mlp.down_proj.weight" : !llm.weight<64x128, f32>
  %d1 = llm.linear %m1, %d1w : tensor<?x128xf32>, !llm.weight<64x128, f32> -> tensor<?x64xf32>
  %h2 = llm.add %r1, %d1 : tensor<?x64xf32>
  %fw = llm.weight "model.norm.weight" : !llm.weight<64, f32>
  %f = llm.rms_norm %h2, %fw eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  %logits = llm.lm_head %f[%rows], %emb : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<301x64, f32> -> tensor<?x301xf32>
  return %logits : tensor<?x301xf32>
}
