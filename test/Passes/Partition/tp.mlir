// --llmc-partition-tp: Megatron-style tensor parallelism on a two-layer
// Qwen2-like model (QKV biases, GQA with 4 query and 2 KV heads, a tied
// embedding, a vocabulary of 301 that neither 2 nor 4 divides).
//
// tp=2: Q, K, V, gate and up column-parallel (KV heads split), o_proj and
// down row-parallel with an all-reduce, the LM head vocabulary-parallel
// (151 rows per rank, the last padded) with an all-gather.
// RUN: llmc-opt %s --llmc-partition-tp="tp=2" | FileCheck %s --check-prefix=TP2
// tp=4: more ranks than KV heads, so each KV head is replicated on 2 ranks.
// RUN: llmc-opt %s --llmc-partition-tp="tp=4" | FileCheck %s --check-prefix=TP4
// A module is split once.
// RUN: not llmc-opt %s --llmc-partition-tp="tp=2" --llmc-partition-tp="tp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: llmc-partition-tp: the module is already partitioned (llm.mesh has tp = 2 : i64)
// tp=1 changes nothing.
// RUN: llmc-opt %s --llmc-partition-tp="tp=1" | FileCheck %s --check-prefix=TP1 --implicit-check-not=shard --implicit-check-not=llm.all_reduce --implicit-check-not=llm.all_gather --implicit-check-not=llm.mesh

// TP2: module attributes {llm.mesh = {tp = 2 : i64}}
// TP2: func.func @step(
// TP2-SAME: !llm.kv_cache<kv_heads = 1, head_dim = 16, f32> {llm.name = "cache0"}
// TP2-SAME: !llm.kv_cache<kv_heads = 1, head_dim = 16, f32> {llm.name = "cache1"}) -> tensor<?x301xf32>
// The LM head reads its own slice of the tied table, under a name of its own;
// llm.embed keeps the table whole.
// TP2: %[[HEAD:.+]] = llm.weight "lm_head.weight" concat ["model.embed_tokens.weight"] shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<151x64, f32>
// TP2: %[[EMB:.+]] = llm.weight "model.embed_tokens.weight" : !llm.weight<301x64, f32>
// TP2: %[[H0:.+]] = llm.embed %{{.+}}, %[[EMB]] : tensor<?xi32>, !llm.weight<301x64, f32> -> tensor<?x64xf32>
// TP2: llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<64, f32>
// TP2: llm.weight "model.layers.0.self_attn.q_proj.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<32x64, f32>
// TP2: llm.weight "model.layers.0.self_attn.q_proj.bias" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<32, f32>
// TP2: %[[Q:.+]] = llm.linear {{.+}} -> tensor<?x32xf32>
// TP2: llm.weight "model.layers.0.self_attn.k_proj.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<16x64, f32>
// TP2: llm.weight "model.layers.0.self_attn.k_proj.bias" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<16, f32>
// TP2: %[[K:.+]] = llm.linear {{.+}} -> tensor<?x16xf32>
// TP2: %[[V:.+]] = llm.linear {{.+}} -> tensor<?x16xf32>
// TP2: %[[QR:.+]] = llm.rope %[[Q]], %{{.+}} heads = 2, head_dim = 16, {{.+}} : tensor<?x32xf32>, tensor<?xi32>
// TP2: %[[KR:.+]] = llm.rope %[[K]], %{{.+}} heads = 1, head_dim = 16, {{.+}} : tensor<?x16xf32>, tensor<?xi32>
// TP2: %[[A:.+]] = llm.paged_attention %[[QR]], %[[KR]], %[[V]] into {{.+}} heads = 2, kv_heads = 1, head_dim = 16, {{.+}} -> tensor<?x32xf32>
// TP2: llm.weight "model.layers.0.self_attn.o_proj.weight" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64x32, f32>
// TP2: %[[O:.+]] = llm.linear %[[A]], {{.+}} : tensor<?x32xf32>, !llm.weight<64x32, f32> -> tensor<?x64xf32>
// TP2-NEXT: %[[OR:.+]] = llm.all_reduce sum %[[O]] ranks = 2 : tensor<?x64xf32>
// TP2-NEXT: %[[R:.+]] = llm.add %[[H0]], %[[OR]] : tensor<?x64xf32>
// TP2: llm.weight "model.layers.0.mlp.gate_proj.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// TP2: %[[G:.+]] = llm.linear {{.+}} -> tensor<?x64xf32>
// TP2: llm.weight "model.layers.0.mlp.up_proj.weight" shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// TP2: %[[U:.+]] = llm.linear {{.+}} -> tensor<?x64xf32>
// TP2: %[[S:.+]] = llm.silu %[[G]] : tensor<?x64xf32>
// TP2: %[[M:.+]] = llm.mul %[[S]], %[[U]] : tensor<?x64xf32>
// TP2: llm.weight "model.layers.0.mlp.down_proj.weight" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64x64, f32>
// TP2: %[[D:.+]] = llm.linear %[[M]], {{.+}} -> tensor<?x64xf32>
// TP2-NEXT: %[[DR:.+]] = llm.all_reduce sum %[[D]] ranks = 2 : tensor<?x64xf32>
// TP2-NEXT: llm.add %[[R]], %[[DR]] : tensor<?x64xf32>
// TP2: llm.paged_attention {{.+}} heads = 2, kv_heads = 1,
// TP2-COUNT-2: llm.all_reduce
// TP2: llm.weight "model.norm.weight" : !llm.weight<64, f32>
// TP2: %[[L:.+]] = llm.lm_head %{{.+}}[%{{.+}}], %[[HEAD]] : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<151x64, f32> -> tensor<?x151xf32>
// TP2-NEXT: %[[LG:.+]] = llm.all_gather %[[L]] dim = 1 ranks = 2 : tensor<?x151xf32> -> tensor<?x301xf32>
// TP2-NEXT: return %[[LG]] : tensor<?x301xf32>

// TP4: module attributes {llm.mesh = {tp = 4 : i64}}
// TP4: llm.weight "lm_head.weight" concat ["model.embed_tokens.weight"] shard <dim = 0, pieces = 4, ranks = 4> : !llm.weight<76x64, f32>
// TP4: llm.weight "model.layers.0.self_attn.q_proj.weight" shard <dim = 0, pieces = 4, ranks = 4> : !llm.weight<16x64, f32>
// Two pieces of K and V for four ranks: ranks 0-1 hold KV head 0, ranks 2-3 head 1.
// TP4: llm.weight "model.layers.0.self_attn.k_proj.weight" shard <dim = 0, pieces = 2, ranks = 4> : !llm.weight<16x64, f32>
// TP4: llm.weight "model.layers.0.self_attn.k_proj.bias" shard <dim = 0, pieces = 2, ranks = 4> : !llm.weight<16, f32>
// TP4: llm.weight "model.layers.0.self_attn.v_proj.weight" shard <dim = 0, pieces = 2, ranks = 4> : !llm.weight<16x64, f32>
// TP4: llm.paged_attention {{.+}} heads = 1, kv_heads = 1, head_dim = 16, {{.+}} -> tensor<?x16xf32>
// TP4: llm.weight "model.layers.0.self_attn.o_proj.weight" shard <dim = 1, pieces = 4, ranks = 4> : !llm.weight<64x16, f32>
// TP4: llm.all_reduce sum %{{.+}} ranks = 4
// TP4: llm.weight "model.layers.0.mlp.gate_proj.weight" shard <dim = 0, pieces = 4, ranks = 4> : !llm.weight<32x64, f32>
// TP4: llm.weight "model.layers.0.mlp.down_proj.weight" shard <dim = 1, pieces = 4, ranks = 4> : !llm.weight<64x32, f32>
// TP4: llm.lm_head {{.+}} -> tensor<?x76xf32>
// TP4-NEXT: llm.all_gather %{{.+}} dim = 1 ranks = 4 : tensor<?x76xf32> -> tensor<?x301xf32>

// Unsplit: every weight whole, all heads, the full vocabulary.
// TP1: llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
// TP1: llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
// TP1: llm.paged_attention {{.+}} heads = 4, kv_heads = 2, head_dim = 16, {{.+}} -> tensor<?x64xf32>
// TP1: llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x128, f32>
// TP1: llm.lm_head {{.+}} -> tensor<?x301xf32>


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
