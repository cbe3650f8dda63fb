// llmc-place-rope: the RoPEs of an attention's query and key leave the QKV
// GEMM group's epilogue for the attention's group, which takes the token
// positions as a new input; the QKV group then yields the unrotated values.
// Nothing moves when a rotated value has another reader, when the producer
// is not a GEMM group, or when the two RoPEs differ in style.
//
// RUN: llmc-opt %s --split-input-file --llmc-place-rope | FileCheck %s
// The result is valid IR, and a second run changes nothing.
// RUN: llmc-opt %s --split-input-file --llmc-place-rope -o %t.once.mlir
// RUN: llmc-opt %t.once.mlir --split-input-file --llmc-place-rope -o %t.twice.mlir
// RUN: diff %t.once.mlir %t.twice.mlir

// CHECK-LABEL: func.func @step
// CHECK:       %[[QKV:.+]]:3 = llm.fusion "layers.0.attn.rms_norm+linear+split_0"(%{{.+}}, %[[POS:.+]]) :
// CHECK:         %[[S:.+]]:3 = llm.split
// CHECK-NOT:     llm.rope
// CHECK:         llm.yield %[[S]]#2, %[[S]]#0, %[[S]]#1 :
// CHECK:       llm.fusion "layers.0.attn.paged_attention_1"(%[[QKV]]#1, %[[QKV]]#2, %[[QKV]]#0, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[POS]]) :
// CHECK-NEXT:  ^bb0(%[[Q:[^:]+]]: tensor<?x64xf32>, %[[K:[^:]+]]: tensor<?x32xf32>, %[[V:[^:]+]]: tensor<?x32xf32>, %{{.+}}, %[[P:[^:]+]]: tensor<?xi32>):
// CHECK-NEXT:    %[[RQ:.+]] = llm.rope %[[Q]], %[[P]] heads = 4, head_dim = 16, theta = 1.000000e+04, style = half
// CHECK-NEXT:    %[[RK:.+]] = llm.rope %[[K]], %[[P]] heads = 2, head_dim = 16, theta = 1.000000e+04, style = half
// CHECK-NEXT:    llm.paged_attention %[[RQ]], %[[RK]], %[[V]] into
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>, %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>, %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>, %cache: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %qkv:3 = llm.fusion "layers.0.attn.rms_norm+linear+split+rope_0"(%x, %positions) : (tensor<?x64xf32>, tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>) {
  ^bb0(%a: tensor<?x64xf32>, %p: tensor<?xi32>):
    %nw = llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<64, f32>
    %n = llm.rms_norm %a, %nw eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
    %w = llm.weight "wqkv" : !llm.weight<128x64, f32>
    %y = llm.linear %n, %w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
    %s:3 = llm.split %y : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
    %rq = llm.rope %s#0, %p heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
    %rk = llm.rope %s#1, %p heads = 2, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x32xf32>, tensor<?xi32>
    llm.yield %s#2, %rq, %rk : tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>
  }
  %o = llm.fusion "layers.0.attn.paged_attention_1"(%qkv#1, %qkv#2, %qkv#0, %cache, %slot_mapping, %query_starts, %context_lens, %block_tables) : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x64xf32> {
  ^bb0(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %cl: tensor<?xi32>, %bt: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%sl) seqs(%qs, %cl, %bt) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
    llm.yield %r : tensor<?x64xf32>
  }
  return %o : tensor<?x64xf32>
}

// -----

// The rotated query is also a result of @step: it stays where it is, and so
// does the key's RoPE (both move or neither).
// CHECK-LABEL: func.func @step
// CHECK:         %[[RQ:.+]] = llm.rope
// CHECK:         %[[RK:.+]] = llm.rope
// CHECK:         llm.yield %{{.+}}#2, %[[RQ]], %[[RK]] :
// CHECK:       llm.fusion "attn"
// CHECK-NOT:     llm.rope
// CHECK:         llm.paged_attention
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>, %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>, %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>, %cache: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %qkv:3 = llm.fusion "qkv"(%x, %positions) : (tensor<?x64xf32>, tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>) {
  ^bb0(%a: tensor<?x64xf32>, %p: tensor<?xi32>):
    %w = llm.weight "wqkv" : !llm.weight<128x64, f32>
    %y = llm.linear %a, %w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf32>
    %s:3 = llm.split %y : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
    %rq = llm.rope %s#0, %p heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
    %rk = llm.rope %s#1, %p heads = 2, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x32xf32>, tensor<?xi32>
    llm.yield %s#2, %rq, %rk : tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x32xf32>
  }
  %o = llm.fusion "attn"(%qkv#1, %qkv#2, %qkv#0, %cache, %slot_mapping, %query_starts, %context_lens, %block_tables) : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x64xf32> {
  ^bb0(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %cl: tensor<?xi32>, %bt: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%sl) seqs(%qs, %cl, %bt) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
    llm.yield %r : tensor<?x64xf32>
  }
  return %o, %qkv#1 : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Without fusion (--no-fuse) each RoPE is a group of its own: not a GEMM
// epilogue, so there is nothing to save and nothing moves.
// CHECK-LABEL: func.func @step
// CHECK:       llm.fusion "rope_q"
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    llm.rope
// CHECK:       llm.fusion "rope_k"
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    llm.rope
// CHECK:       llm.fusion "attn"
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    llm.paged_attention
func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>, %query_starts: tensor<?xi32>, %context_lens: tensor<?xi32>, %block_tables: tensor<?x?xi32>, %slot_mapping: tensor<?xi32>, %logits_rows: tensor<?xi32>, %cache: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %q0: tensor<?x64xf32>, %k0: tensor<?x32xf32>, %v0: tensor<?x32xf32>) -> tensor<?x64xf32> {
  %rq = llm.fusion "rope_q"(%q0, %positions) : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %p: tensor<?xi32>):
    %r = llm.rope %a, %p heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
    llm.yield %r : tensor<?x64xf32>
  }
  %rk = llm.fusion "rope_k"(%k0, %positions) : (tensor<?x32xf32>, tensor<?xi32>) -> tensor<?x32xf32> {
  ^bb0(%a: tensor<?x32xf32>, %p: tensor<?xi32>):
    %r = llm.rope %a, %p heads = 2, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x32xf32>, tensor<?xi32>
    llm.yield %r : tensor<?x32xf32>
  }
  %o = llm.fusion "attn"(%rq, %rk, %v0, %cache, %slot_mapping, %query_starts, %context_lens, %block_tables) : (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x64xf32> {
  ^bb0(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %sl: tensor<?xi32>, %qs: tensor<?xi32>, %cl: tensor<?xi32>, %bt: tensor<?x?xi32>):
    %r = llm.paged_attention %q, %k, %v into %c slots(%sl) seqs(%qs, %cl, %bt) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
    llm.yield %r : tensor<?x64xf32>
  }
  return %o : tensor<?x64xf32>
}
