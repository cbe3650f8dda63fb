// --llmc-verify-step checks @step's calling convention (the runtime's seven
// index tensors, one !llm.kv_cache per layer, logits out) and that each
// layer's cache has exactly one attention op.
//
// RUN: llmc-opt %s --split-input-file --llmc-verify-step --verify-diagnostics | FileCheck %s

// A valid one-layer @step passes unchanged.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[TOKENS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[POS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[STARTS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[LENS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[TABLES:[^:]+]]: tensor<?x?xi32>
// CHECK-SAME: %[[SLOTS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[ROWS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[CACHE:[^:]+]]: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>
// CHECK-SAME: -> tensor<?x256xf32>
// CHECK: llm.paged_attention {{.*}} into %[[CACHE]] slots(%[[SLOTS]]) seqs(%[[STARTS]], %[[LENS]], %[[TABLES]])
// CHECK: %[[LOGITS:.+]] = llm.lm_head {{.*}}[%[[ROWS]]]
// CHECK: return %[[LOGITS]] : tensor<?x256xf32>
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, f32>
  %h = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<256x64, f32> -> tensor<?x64xf32>
  %wq = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, f32>
  %wk = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, f32>
  %wv = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, f32>
  %q = llm.linear %h, %wq : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  %k = llm.linear %h, %wk : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  %v = llm.linear %h, %wv : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  %a = llm.paged_attention %q, %k, %v into %cache0 slots(%slot_mapping)
      seqs(%query_starts, %context_lens, %block_tables) heads = 4, kv_heads = 2, head_dim = 16,
      scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
      !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
      tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %logits = llm.lm_head %a[%logits_rows], %emb : tensor<?x64xf32>, tensor<?xi32>,
      !llm.weight<256x64, f32> -> tensor<?x256xf32>
  return %logits : tensor<?x256xf32>
}

// -----

// Two layers, other functions beside @step, f16 activations and bf16 caches:
// all accepted (only the logits must be f32).
// CHECK-LABEL: func.func @helper(
// CHECK-LABEL: func.func @step(
// CHECK-SAME: !llm.kv_cache<kv_heads = 1, head_dim = 8, bf16>
// CHECK-SAME: !llm.kv_cache<kv_heads = 1, head_dim = 8, f16>
// CHECK-SAME: -> tensor<?x32000xf32>
func.func @helper(%x: tensor<?x8xf16>) -> tensor<?x8xf16> {
  return %x : tensor<?x8xf16>
}
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 1, head_dim = 8, bf16>,
                %cache1: !llm.kv_cache<kv_heads = 1, head_dim = 8, f16>) -> tensor<?x32000xf32> {
  %logits = llm.recv from 0 : tensor<?x32000xf32>
  return %logits : tensor<?x32000xf32>
}

// -----

// expected-error @+1 {{module has no func.func @step}}
module {
  func.func @main(%tokens: tensor<?xi32>) {
    return
  }
}

// -----

// Only the signature is checked, so declarations suffice for these cases.
// expected-error @+1 {{@step takes 3 arguments; expected the 7 index tensors followed by one KV cache per layer}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>)
    -> tensor<?x256xf32>

// -----

// The seven index tensors alone: no layer, no cache.
// expected-error @+1 {{@step takes 7 arguments; expected the 7 index tensors followed by one KV cache per layer}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>) -> tensor<?x256xf32>

// -----

// expected-error @+1 {{@step argument #0 (tokens) must be a rank-1 i32 tensor with dynamic dimensions, got 'tensor<?xi64>'}}
func.func private @step(%tokens: tensor<?xi64>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32>

// -----

// expected-error @+1 {{@step argument #1 (positions) must be a rank-1 i32 tensor with dynamic dimensions, got 'tensor<8xi32>'}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<8xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32>

// -----

// expected-error @+1 {{@step argument #4 (block_tables) must be a rank-2 i32 tensor with dynamic dimensions, got 'tensor<?xi32>'}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32>

// -----

// expected-error @+1 {{@step argument #4 (block_tables) must be a rank-2 i32 tensor with dynamic dimensions, got 'tensor<?x16xi32>'}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x16xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32>

// -----

// expected-error @+1 {{@step argument #6 (logits_rows) must be a rank-1 i32 tensor with dynamic dimensions, got '!llm.kv_cache<kv_heads = 2, head_dim = 16, f32>'}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>,
                %cache1: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32>

// -----

// expected-error @+1 {{@step argument #8 (the KV cache of layer 1) must be !llm.kv_cache, got 'tensor<?xi32>'}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>,
                %extra: tensor<?xi32>) -> tensor<?x256xf32>

// -----

// The logits have a dynamic token count and a static vocabulary.
// expected-error @+1 {{@step must return one tensor<?xVOCABxf32> of logits}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x?xf32>

// -----

// expected-error @+1 {{@step must return one tensor<?xVOCABxf32> of logits}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<4x256xf32>

// -----

// expected-error @+1 {{@step must return one tensor<?xVOCABxf32> of logits}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf16>

// -----

// expected-error @+1 {{@step must return one tensor<?xVOCABxf32> of logits}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>)
    -> (tensor<?x256xf32>, tensor<?x256xf32>)

// -----

// expected-error @+1 {{@step must return one tensor<?xVOCABxf32> of logits}}
func.func private @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>)

// -----

// Two layers wired to the same cache: the second attention op is reported and
// the first one is pointed at.
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>,
                %cache1: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32> {
  %q = llm.recv from 0 : tensor<?x64xf32>
  %k = llm.recv from 0 : tensor<?x32xf32>
  %v = llm.recv from 0 : tensor<?x32xf32>
  // expected-remark @+1 {{first use is here}}
  %a0 = llm.paged_attention %q, %k, %v into %cache0 slots(%slot_mapping)
      seqs(%query_starts, %context_lens, %block_tables) heads = 4, kv_heads = 2, head_dim = 16,
      scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
      !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
      tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  // expected-error @+1 {{KV cache is already used by another attention op}}
  %a1 = llm.paged_attention %a0, %k, %v into %cache0 slots(%slot_mapping)
      seqs(%query_starts, %context_lens, %block_tables) heads = 4, kv_heads = 2, head_dim = 16,
      scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
      !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
      tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %logits = llm.recv from 0 : tensor<?x256xf32>
  return %logits : tensor<?x256xf32>
}
