// --llmc-print-model-stats prints, per function, the attention layers with
// their head counts, the number of each llm op, and the weights per storage
// format with parameter and byte counts. Bytes, by hand: f32 takes 4 bytes
// per element, q8_0 34 bytes per block of 32, q4_1 20 bytes per block of 32.
//
// RUN: llmc-opt %s --split-input-file --llmc-print-model-stats -o /dev/null | FileCheck %s
// RUN: llmc-opt %s --split-input-file --llmc-print-model-stats="output=%t" -o /dev/null
// RUN: FileCheck %s --check-prefix=FILE < %t
// The IR itself is left unchanged.
// RUN: llmc-opt %s --split-input-file --llmc-print-model-stats="output=%t.ir" | FileCheck %s --check-prefix=IR

// One Llama layer, hidden 64, 4 heads of 16, 2 KV heads, MLP 160, vocab 256.
//
// f32:  input_layernorm 64 + post_attention_layernorm 64 + norm 64
//       + lm_head 256x64 = 16384                 -> 4 tensors, 16576 params,  66304 bytes
// q4_1: q 64x64 = 4096, k 32x64 = 2048, v 32x64 = 2048, o 64x64 = 4096
//       12288 / 32 = 384 blocks * 20              -> 4 tensors, 12288 params,   7680 bytes
// q8_0: embed 256x64 = 16384, gate 160x64, up 160x64, down 64x160 = 3 * 10240
//       47104 / 32 = 1472 blocks * 34             -> 4 tensors, 47104 params,  50048 bytes
// all:                                            -> 12 tensors, 75968 params, 124032 bytes

// CHECK-LABEL: model stats for @step
// CHECK-NEXT: layers: 1 (heads 4, kv_heads 2, head_dim 16)
// CHECK-NEXT: ops: llm.add 2, llm.embed 1, llm.linear 7, llm.lm_head 1, llm.mul 1, llm.paged_attention 1, llm.rms_norm 3, llm.rope 2, llm.silu 1, llm.weight 12{{$}}
// CHECK-NEXT: weights: 12 tensors, 75968 parameters, 124032 bytes
// CHECK-NEXT: f32: 4 tensors, 16576 parameters, 66304 bytes
// CHECK-NEXT: q4_1: 4 tensors, 12288 parameters, 7680 bytes
// CHECK-NEXT: q8_0: 4 tensors, 47104 parameters, 50048 bytes

// Each input chunk reopens (and so truncates) the output file: it holds the
// stats of the last chunk only.
// FILE-NOT: layers: 1
// FILE: model stats for @step
// FILE-NEXT: layers: 0 (heads 0, kv_heads 0, head_dim 0)
// FILE-NEXT: ops: llm.embed 1, llm.lm_head 1, llm.weight 2
// FILE-NEXT: weights: 1 tensors, 16384 parameters, 17408 bytes

// IR-LABEL: func.func @step(
// IR-COUNT-12: llm.weight
// IR: return
// IR: // -----
// IR-LABEL: func.func @step(
// IR-COUNT-2: llm.weight "model.embed_tokens.weight"

func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, q8_0>
  %h0 = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<256x64, q8_0> -> tensor<?x64xf32>
  %ln1 = llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<64, f32>
  %x = llm.rms_norm %h0, %ln1 eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>
  %wq = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, q4_1>
  %wk = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<32x64, q4_1>
  %wv = llm.weight "model.layers.0.self_attn.v_proj.weight" : !llm.weight<32x64, q4_1>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, !llm.weight<64x64, q4_1> -> tensor<?x64xf32>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, !llm.weight<32x64, q4_1> -> tensor<?x32xf32>
  %qr = llm.rope %q, %positions heads = 4, head_dim = 16, theta = 1.0e4, style = half
      : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %positions heads = 2, head_dim = 16, theta = 1.0e4, style = half
      : tensor<?x32xf32>, tensor<?xi32>
  %a = llm.paged_attention %qr, %kr, %v into %cache0 slots(%slot_mapping)
      seqs(%query_starts, %context_lens, %block_tables) heads = 4, kv_heads = 2, head_dim = 16,
      scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
      !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
      tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %wo = llm.weight "model.layers.0.self_attn.o_proj.weight" : !llm.weight<64x64, q4_1>
  %o = llm.linear %a, %wo : tensor<?x64xf32>, !llm.weight<64x64, q4_1> -> tensor<?x64xf32>
  %h1 = llm.add %h0, %o : tensor<?x64xf32>
  %ln2 = llm.weight "model.layers.0.post_attention_layernorm.weight" : !llm.weight<64, f32>
  %y = llm.rms_norm %h1, %ln2 eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>
  %wg = llm.weight "model.layers.0.mlp.gate_proj.weight" : !llm.weight<160x64, q8_0>
  %wu = llm.weight "model.layers.0.mlp.up_proj.weight" : !llm.weight<160x64, q8_0>
  %wd = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, q8_0>
  %g = llm.linear %y, %wg : tensor<?x64xf32>, !llm.weight<160x64, q8_0> -> tensor<?x160xf32>
  %u = llm.linear %y, %wu : tensor<?x64xf32>, !llm.weight<160x64, q8_0> -> tensor<?x160xf32>
  %s = llm.silu %g : tensor<?x160xf32>
  %m = llm.mul %s, %u : tensor<?x160xf32>
  %d = llm.linear %m, %wd : tensor<?x160xf32>, !llm.weight<64x160, q8_0> -> tensor<?x64xf32>
  %h2 = llm.add %h1, %d : tensor<?x64xf32>
  %lnf = llm.weight "model.norm.weight" : !llm.weight<64, f32>
  %hf = llm.rms_norm %h2, %lnf eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>
  %head = llm.weight "lm_head.weight" : !llm.weight<256x64, f32>
  %logits = llm.lm_head %hf[%logits_rows], %head : tensor<?x64xf32>, tensor<?xi32>,
      !llm.weight<256x64, f32> -> tensor<?x256xf32>
  return %logits : tensor<?x256xf32>
}

// -----

// Tied embeddings: embed and lm_head read the same weight through two
// llm.weight ops; it is counted once (256x64 q8_0 = 512 blocks * 34 bytes),
// while both ops are counted as ops.

// CHECK-NEXT: model stats for @step
// CHECK-NEXT: layers: 0 (heads 0, kv_heads 0, head_dim 0)
// CHECK-NEXT: ops: llm.embed 1, llm.lm_head 1, llm.weight 2{{$}}
// CHECK-NEXT: weights: 1 tensors, 16384 parameters, 17408 bytes
// CHECK-NEXT: q8_0: 1 tensors, 16384 parameters, 17408 bytes
// CHECK-NOT: {{.}}

func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>,
                %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>,
                %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x256xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, q8_0>
  %h = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<256x64, q8_0> -> tensor<?x64xf32>
  %head = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, q8_0>
  %logits = llm.lm_head %h[%logits_rows], %head : tensor<?x64xf32>, tensor<?xi32>,
      !llm.weight<256x64, q8_0> -> tensor<?x256xf32>
  return %logits : tensor<?x256xf32>
}
