// The import cleanup stage (canonicalize, cse, llmc-verify-step) keeps a
// valid @step valid, merges duplicate weight references, folds one-part
// splits, drops dead pure ops, and keeps collectives and attention (which
// communicate or write the cache) even when duplicated or unused.
//
// RUN: llmc-opt %s --split-input-file --canonicalize --cse --llmc-verify-step --verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[TOKENS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[STARTS:[^:]+]]: tensor<?xi32>, %[[LENS:[^:]+]]: tensor<?xi32>, %[[TABLES:[^:]+]]: tensor<?x?xi32>, %[[SLOTS:[^:]+]]: tensor<?xi32>, %[[ROWS:[^:]+]]: tensor<?xi32>, %[[CACHE:[^:]+]]: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>
// The two references to the embedding table become one, used by embed and
// lm_head; the duplicated q/k/v weights and projections become one each; the
// one-part split folds away and the unused silu is erased. Both all_reduce ops
// stay: collectives are never merged.
// CHECK-NEXT: %[[EMB:.+]] = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, f32>
// CHECK-NEXT: %[[H:.+]] = llm.embed %[[TOKENS]], %[[EMB]]
// CHECK-NEXT: %[[WQ:.+]] = llm.weight "model.layers.0.self_attn.q_proj.weight"
// CHECK-NEXT: %[[Q:.+]] = llm.linear %[[H]], %[[WQ]]
// CHECK-NEXT: %[[WK:.+]] = llm.weight "model.layers.0.self_attn.k_proj.weight"
// CHECK-NEXT: %[[K:.+]] = llm.linear %[[H]], %[[WK]]
// CHECK-NEXT: %[[WV:.+]] = llm.weight "model.layers.0.self_attn.v_proj.weight"
// CHECK-NEXT: %[[V:.+]] = llm.linear %[[H]], %[[WV]]
// CHECK-NEXT: %[[A:.+]] = llm.paged_attention %[[Q]], %[[K]], %[[V]] into %[[CACHE]] slots(%[[SLOTS]]) seqs(%[[STARTS]], %[[LENS]], %[[TABLES]])
// CHECK-NEXT: %[[R0:.+]] = llm.all_reduce sum %[[A]] ranks = 2
// CHECK-NEXT: %[[R1:.+]] = llm.all_reduce sum %[[A]] ranks = 2
// CHECK-NEXT: %[[S:.+]] = llm.add %[[R0]], %[[R1]]
// CHECK-NEXT: %[[L:.+]] = llm.lm_head %[[S]][%[[ROWS]]], %[[EMB]]
// CHECK-NEXT: return %[[L]]
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, f32>
  %h = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<256x64, f32> -> tensor<?x64xf32>
  %wq = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
  %q = llm.linear %h, %wq : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  %wk = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
  %k = llm.linear %h, %wk : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  %wv = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, f32>
  %v = llm.linear %h, %wv : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  // Duplicates of the q/k/v weights and projections, as a naive importer makes.
  %wq2 = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
  %q2 = llm.linear %h, %wq2 : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  %wk2 = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
  %k2 = llm.linear %h, %wk2 : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  %wv2 = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, f32>
  %v2 = llm.linear %h, %wv2 : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  %qs = llm.split %q2 : tensor<?x64xf32> -> tensor<?x64xf32>
  %a = llm.paged_attention %qs, %k2, %v2 into %cache0 slots(%slot_mapping)
      seqs(%query_starts, %context_lens, %block_tables) heads = 4, kv_heads = 2, head_dim = 16,
      scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
      !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
      tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %dead = llm.silu %q : tensor<?x64xf32>
  %r0 = llm.all_reduce sum %a ranks = 2 : tensor<?x64xf32>
  %r1 = llm.all_reduce sum %a ranks = 2 : tensor<?x64xf32>
  %s = llm.add %r0, %r1 : tensor<?x64xf32>
  %head = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, f32>
  %logits = llm.lm_head %s[%logits_rows], %head : tensor<?x64xf32>, tensor<?xi32>,
      !llm.weight<256x64, f32> -> tensor<?x256xf32>
  return %logits : tensor<?x256xf32>
}

// -----

// Weights with the same name but different types are different ops: CSE keeps
// both (a verifier of the weight store would have to reject this).
// CHECK-LABEL: func.func @step(
// CHECK: llm.weight "w" : !llm.weight<256x64, f32>
// CHECK: llm.weight "w" : !llm.weight<256x64, q8_0>
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32> {
  %a = llm.weight "w" : !llm.weight<256x64, f32>
  %h = llm.embed %tokens, %a : tensor<?xi32>, !llm.weight<256x64, f32> -> tensor<?x64xf32>
  %b = llm.weight "w" : !llm.weight<256x64, q8_0>
  %logits = llm.lm_head %h[%logits_rows], %b : tensor<?x64xf32>, tensor<?xi32>,
      !llm.weight<256x64, q8_0> -> tensor<?x256xf32>
  return %logits : tensor<?x256xf32>
}

// -----

// The pipeline ends with llmc-verify-step, so a malformed @step fails it.
// expected-error @+1 {{@step must return one tensor<?xVOCABxf32> of logits}}
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf16> {
  %x = llm.recv from 0 : tensor<?x256xf16>
  return %x : tensor<?x256xf16>
}
