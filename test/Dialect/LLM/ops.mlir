// Round trip of every op and type of the llm dialect: the custom form prints,
// reparses and prints the same, and so does the generic form.
//
// rope, gelu and all_reduce carry the dialect's enum attributes, whose generic
// form does not reparse yet; they are tested in ops-enum-attrs.mlir.
//
// RUN: llmc-opt %s --split-input-file | FileCheck %s
// RUN: llmc-opt %s --split-input-file | llmc-opt --split-input-file | FileCheck %s
// RUN: llmc-opt %s --split-input-file --mlir-print-op-generic | llmc-opt --split-input-file | FileCheck %s

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @weight_float_formats(
// CHECK-SAME: !llm.weight<64x128, f32>
// CHECK-SAME: !llm.weight<64x128, f16>
// CHECK-SAME: !llm.weight<64x128, bf16>
// CHECK-SAME: !llm.weight<7, f32>
// CHECK-SAME: !llm.weight<3x5, f16>
func.func @weight_float_formats(%a: !llm.weight<64x128, f32>, %b: !llm.weight<64x128, f16>,
                                %c: !llm.weight<64x128, bf16>, %d: !llm.weight<7, f32>,
                                %e: !llm.weight<3x5, f16>) {
  return
}

// -----

// CHECK-LABEL: func.func @weight_groupwise_formats(
// CHECK-SAME: !llm.weight<64x128, i8, group = 32>
// CHECK-SAME: !llm.weight<64x128, i8, group = 64>
// CHECK-SAME: !llm.weight<64x128, i8, group = 128>
// CHECK-SAME: !llm.weight<64x128, i4, group = 32>
// CHECK-SAME: !llm.weight<64x128, i4, group = 64>
// CHECK-SAME: !llm.weight<64x128, i4, group = 128>
// CHECK-SAME: !llm.weight<256, i4, group = 128>
func.func @weight_groupwise_formats(%a: !llm.weight<64x128, i8, group = 32>,
                                    %b: !llm.weight<64x128, i8, group = 64>,
                                    %c: !llm.weight<64x128, i8, group = 128>,
                                    %d: !llm.weight<64x128, i4, group = 32>,
                                    %e: !llm.weight<64x128, i4, group = 64>,
                                    %f: !llm.weight<64x128, i4, group = 128>,
                                    %g: !llm.weight<256, i4, group = 128>) {
  return
}

// -----

// CHECK-LABEL: func.func @weight_gguf_formats(
// CHECK-SAME: !llm.weight<48x32, q8_0>
// CHECK-SAME: !llm.weight<48x64, q4_0>
// CHECK-SAME: !llm.weight<48x96, q4_1>
// CHECK-SAME: !llm.weight<48x32, q5_0>
// CHECK-SAME: !llm.weight<48x32, q5_1>
// CHECK-SAME: !llm.weight<48x256, q2_k>
// CHECK-SAME: !llm.weight<48x512, q3_k>
// CHECK-SAME: !llm.weight<48x256, q4_k>
// CHECK-SAME: !llm.weight<48x768, q5_k>
// CHECK-SAME: !llm.weight<48x1024, q6_k>
// CHECK-SAME: !llm.weight<256, q4_k>
func.func @weight_gguf_formats(%a: !llm.weight<48x32, q8_0>, %b: !llm.weight<48x64, q4_0>,
                               %c: !llm.weight<48x96, q4_1>, %d: !llm.weight<48x32, q5_0>,
                               %e: !llm.weight<48x32, q5_1>, %f: !llm.weight<48x256, q2_k>,
                               %g: !llm.weight<48x512, q3_k>, %h: !llm.weight<48x256, q4_k>,
                               %i: !llm.weight<48x768, q5_k>, %j: !llm.weight<48x1024, q6_k>,
                               %k: !llm.weight<256, q4_k>) {
  return
}

// -----

// CHECK-LABEL: func.func @kv_cache_types(
// CHECK-SAME: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>
// CHECK-SAME: !llm.kv_cache<kv_heads = 8, head_dim = 128, f16>
// CHECK-SAME: !llm.kv_cache<kv_heads = 1, head_dim = 64, bf16>
func.func @kv_cache_types(%a: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>,
                          %b: !llm.kv_cache<kv_heads = 8, head_dim = 128, f16>,
                          %c: !llm.kv_cache<kv_heads = 1, head_dim = 64, bf16>) {
  return
}

//===----------------------------------------------------------------------===//
// Weights and embeddings
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @weight(
// CHECK: %[[A:.+]] = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, f32>
// CHECK: %[[B:.+]] = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, q4_0>
// CHECK: %[[C:.+]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, i4, group = 64>
// CHECK: %[[D:.+]] = llm.weight "model.norm.weight" : !llm.weight<64, bf16>
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]] :
func.func @weight() -> (!llm.weight<256x64, f32>, !llm.weight<64x160, q4_0>,
                        !llm.weight<64x64, i4, group = 64>, !llm.weight<64, bf16>) {
  %a = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, f32>
  %b = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, q4_0>
  %c = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<64x64, i4, group = 64>
  %d = llm.weight "model.norm.weight" : !llm.weight<64, bf16>
  return %a, %b, %c, %d : !llm.weight<256x64, f32>, !llm.weight<64x160, q4_0>,
                          !llm.weight<64x64, i4, group = 64>, !llm.weight<64, bf16>
}

// -----

// Row slices of a fused stored tensor (Phi-3's attn_qkv), alone, merged and
// sharded.
// CHECK-LABEL: func.func @weight_rows(
// CHECK: llm.weight "qkv.k" concat ["qkv"] rows [64, 96] : !llm.weight<32x64, q4_0>
// CHECK: llm.weight "qkv.{k,v}" concat ["qkv", "qkv"] rows [64, 96, 96, 128] shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<32x64, q4_0>
func.func @weight_rows() -> (!llm.weight<32x64, q4_0>, !llm.weight<32x64, q4_0>) {
  %k = llm.weight "qkv.k" concat ["qkv"] rows [64, 96] : !llm.weight<32x64, q4_0>
  %kv = llm.weight "qkv.{k,v}" concat ["qkv", "qkv"] rows [64, 96, 96, 128] shard <dim = 0, pieces = 2, ranks = 2> : !llm.weight<32x64, q4_0>
  return %k, %kv : !llm.weight<32x64, q4_0>, !llm.weight<32x64, q4_0>
}

// A rank's slice of a stored weight (set by llmc-partition-tp), alone and
// with concat and from.
// CHECK-LABEL: func.func @weight_shard(
// CHECK: llm.weight "o" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64x32, q4_0>
// CHECK: llm.weight "kv" concat ["k", "v"] from "bf16" shard <dim = 0, pieces = 1, ranks = 4> : !llm.weight<32x64, i4, group = 32>
func.func @weight_shard() -> (!llm.weight<64x32, q4_0>, !llm.weight<32x64, i4, group = 32>) {
  %o = llm.weight "o" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64x32, q4_0>
  %kv = llm.weight "kv" concat ["k", "v"] from "bf16" shard <dim = 0, pieces = 1, ranks = 4> : !llm.weight<32x64, i4, group = 32>
  return %o, %kv : !llm.weight<64x32, q4_0>, !llm.weight<32x64, i4, group = 32>
}

// -----

// CHECK-LABEL: func.func @embed(
// CHECK-SAME: %[[TOK:[^:]+]]: tensor<?xi32>
// CHECK: %[[T:.+]] = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, q8_0>
// CHECK: %[[H:.+]] = llm.embed %[[TOK]], %[[T]] : tensor<?xi32>, !llm.weight<256x64, q8_0> -> tensor<?x64xf16>
// CHECK: return %[[H]]
func.func @embed(%tokens: tensor<?xi32>) -> tensor<?x64xf16> {
  %t = llm.weight "model.embed_tokens.weight" : !llm.weight<256x64, q8_0>
  %h = llm.embed %tokens, %t : tensor<?xi32>, !llm.weight<256x64, q8_0> -> tensor<?x64xf16>
  return %h : tensor<?x64xf16>
}

// -----

// CHECK-LABEL: func.func @embed_static(
// CHECK-SAME: %[[TOK:[^:]+]]: tensor<5xi32>
// CHECK: %[[T:.+]] = llm.weight "emb" : !llm.weight<256x64, f32>
// CHECK: llm.embed %[[TOK]], %[[T]] : tensor<5xi32>, !llm.weight<256x64, f32> -> tensor<5x64xf32>
func.func @embed_static(%tokens: tensor<5xi32>) -> tensor<5x64xf32> {
  %t = llm.weight "emb" : !llm.weight<256x64, f32>
  %h = llm.embed %tokens, %t : tensor<5xi32>, !llm.weight<256x64, f32> -> tensor<5x64xf32>
  return %h : tensor<5x64xf32>
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[W:.+]] = llm.weight "norm" : !llm.weight<64, f32>
// CHECK: %[[Y:.+]] = llm.rms_norm %[[X]], %[[W]] eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
// CHECK: return %[[Y]]
func.func @rms_norm(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "norm" : !llm.weight<64, f32>
  %y = llm.rms_norm %x, %w eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}

// -----

// CHECK-LABEL: func.func @rms_norm_bf16(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xbf16>
// CHECK: %[[W:.+]] = llm.weight "norm" : !llm.weight<64, bf16>
// CHECK: llm.rms_norm %[[X]], %[[W]] eps = 9.9999999999999995E-7 : tensor<?x64xbf16>, !llm.weight<64, bf16>
func.func @rms_norm_bf16(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %w = llm.weight "norm" : !llm.weight<64, bf16>
  %y = llm.rms_norm %x, %w eps = 1.0e-06 : tensor<?x64xbf16>, !llm.weight<64, bf16>
  return %y : tensor<?x64xbf16>
}

// -----

// A per-head norm (Qwen3's of Q): 4 heads of 32, one weight of 32.
// CHECK-LABEL: func.func @rms_norm_per_head(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x128xbf16>
// CHECK: %[[W:.+]] = llm.weight "q_norm" : !llm.weight<32, f32>
// CHECK: llm.rms_norm %[[X]], %[[W]] eps = 9.9999999999999995E-7 head_dim = 32 : tensor<?x128xbf16>, !llm.weight<32, f32>
func.func @rms_norm_per_head(%x: tensor<?x128xbf16>) -> tensor<?x128xbf16> {
  %w = llm.weight "q_norm" : !llm.weight<32, f32>
  %y = llm.rms_norm %x, %w eps = 1.0e-06 head_dim = 32 : tensor<?x128xbf16>, !llm.weight<32, f32>
  return %y : tensor<?x128xbf16>
}

// -----

// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[W:.+]] = llm.weight "ln.weight" : !llm.weight<64, f32>
// CHECK: %[[Y:.+]] = llm.layer_norm %[[X]], %[[W]] eps = 1.000000e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
// CHECK: return %[[Y]]
func.func @layer_norm(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "ln.weight" : !llm.weight<64, f32>
  %y = llm.layer_norm %x, %w eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}

// -----

// CHECK-LABEL: func.func @layer_norm_bias(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf16>
// CHECK: %[[W:.+]] = llm.weight "ln.weight" : !llm.weight<64, f16>
// CHECK: %[[B:.+]] = llm.weight "ln.bias" : !llm.weight<64, f32>
// CHECK: %[[Y:.+]] = llm.layer_norm %[[X]], %[[W]], %[[B]] eps = 1.000000e-05 : tensor<?x64xf16>, !llm.weight<64, f16>, !llm.weight<64, f32>
// CHECK: return %[[Y]]
func.func @layer_norm_bias(%x: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %w = llm.weight "ln.weight" : !llm.weight<64, f16>
  %b = llm.weight "ln.bias" : !llm.weight<64, f32>
  %y = llm.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<?x64xf16>, !llm.weight<64, f16>, !llm.weight<64, f32>
  return %y : tensor<?x64xf16>
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[W:.+]] = llm.weight "proj" : !llm.weight<128x64, q4_1>
// CHECK: %[[Y:.+]] = llm.linear %[[X]], %[[W]] : tensor<?x64xf32>, !llm.weight<128x64, q4_1> -> tensor<?x128xf32>
// CHECK: return %[[Y]]
func.func @linear(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %w = llm.weight "proj" : !llm.weight<128x64, q4_1>
  %y = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<128x64, q4_1> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

// CHECK-LABEL: func.func @linear_bias(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xbf16>
// CHECK: %[[W:.+]] = llm.weight "q_proj.weight" : !llm.weight<128x64, i8, group = 64>
// CHECK: %[[B:.+]] = llm.weight "q_proj.bias" : !llm.weight<128, bf16>
// CHECK: %[[Y:.+]] = llm.linear %[[X]], %[[W]] bias %[[B]] : tensor<?x64xbf16>, !llm.weight<128x64, i8, group = 64>, !llm.weight<128, bf16> -> tensor<?x128xbf16>
// CHECK: return %[[Y]]
func.func @linear_bias(%x: tensor<?x64xbf16>) -> tensor<?x128xbf16> {
  %w = llm.weight "q_proj.weight" : !llm.weight<128x64, i8, group = 64>
  %b = llm.weight "q_proj.bias" : !llm.weight<128, bf16>
  %y = llm.linear %x, %w bias %b : tensor<?x64xbf16>, !llm.weight<128x64, i8, group = 64>,
      !llm.weight<128, bf16> -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// CHECK-LABEL: func.func @lm_head(
// CHECK-SAME: %[[H:[^:]+]]: tensor<?x256xf32>
// CHECK-SAME: %[[ROWS:[^:]+]]: tensor<?xi32>
// CHECK: %[[W:.+]] = llm.weight "lm_head.weight" : !llm.weight<512x256, q6_k>
// CHECK: %[[L:.+]] = llm.lm_head %[[H]][%[[ROWS]]], %[[W]] : tensor<?x256xf32>, tensor<?xi32>, !llm.weight<512x256, q6_k> -> tensor<?x512xf32>
// CHECK: return %[[L]]
func.func @lm_head(%h: tensor<?x256xf32>, %rows: tensor<?xi32>) -> tensor<?x512xf32> {
  %w = llm.weight "lm_head.weight" : !llm.weight<512x256, q6_k>
  %l = llm.lm_head %h[%rows], %w : tensor<?x256xf32>, tensor<?xi32>, !llm.weight<512x256, q6_k>
      -> tensor<?x512xf32>
  return %l : tensor<?x512xf32>
}

// -----

// CHECK-LABEL: func.func @split(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x128xf32>
// CHECK: %[[S:.+]]:3 = llm.split %[[X]] : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
func.func @split(%x: tensor<?x128xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %q, %k, %v = llm.split %x : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// A single-part split is legal (it folds to its input under canonicalize).
// CHECK-LABEL: func.func @split_one(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[S:.+]] = llm.split %[[X]] : tensor<?x64xf32> -> tensor<?x64xf32>
// CHECK: return %[[S]]
func.func @split_one(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = llm.split %x : tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @paged_attention(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<?x64xf32>
// CHECK-SAME: %[[K:[^:]+]]: tensor<?x32xf32>
// CHECK-SAME: %[[V:[^:]+]]: tensor<?x32xf32>
// CHECK-SAME: %[[C:[^:]+]]: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>
// CHECK-SAME: %[[SLOTS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[STARTS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[LENS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[TABLES:[^:]+]]: tensor<?x?xi32>
// CHECK: %[[O:.+]] = llm.paged_attention %[[Q]], %[[K]], %[[V]] into %[[C]] slots(%[[SLOTS]]) seqs(%[[STARTS]], %[[LENS]], %[[TABLES]]) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
// CHECK: return %[[O]]
func.func @paged_attention(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                           %cache: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>,
                           %slots: tensor<?xi32>, %starts: tensor<?xi32>, %lens: tensor<?xi32>,
                           %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  %o = llm.paged_attention %q, %k, %v into %cache slots(%slots) seqs(%starts, %lens, %tables)
      heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
        !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
        tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

// Gemma's attributes: a scaled embedding, a norm weight stored minus 1, a
// soft-capped sliding attention and soft-capped logits.
// CHECK-LABEL: func.func @gemma_attributes(
// CHECK: llm.embed %{{.+}}, %{{.+}} scale = 8.000000e+00 : tensor<?xi32>, !llm.weight<320x64, q8_0> -> tensor<?x64xf32>
// CHECK: llm.weight "norm" plus 1.000000e+00 : !llm.weight<64, bf16>
// CHECK: scale = 2.500000e-01 window = 16 softcap = 5.000000e+01 :
// CHECK: llm.lm_head %{{.+}}[%{{.+}}], %{{.+}} softcap = 3.000000e+01 : tensor<?x64xf32>
func.func @gemma_attributes(%tokens: tensor<?xi32>, %rows: tensor<?xi32>, %q: tensor<?x64xf32>,
                            %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                            %cache: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>,
                            %slots: tensor<?xi32>, %starts: tensor<?xi32>, %lens: tensor<?xi32>,
                            %tables: tensor<?x?xi32>)
    -> (tensor<?x64xf32>, !llm.weight<64, bf16>, tensor<?x64xf32>, tensor<?x320xf32>) {
  %t = llm.weight "token_embd.weight" : !llm.weight<320x64, q8_0>
  %h = llm.embed %tokens, %t scale = 8.0 : tensor<?xi32>, !llm.weight<320x64, q8_0> -> tensor<?x64xf32>
  %n = llm.weight "norm" plus 1.0 : !llm.weight<64, bf16>
  %o = llm.paged_attention %q, %k, %v into %cache slots(%slots) seqs(%starts, %lens, %tables)
      heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 window = 16 softcap = 50.0
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
        !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>,
        tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  %l = llm.lm_head %h[%rows], %t softcap = 30.0 : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<320x64, q8_0> -> tensor<?x320xf32>
  return %h, %n, %o, %l : tensor<?x64xf32>, !llm.weight<64, bf16>, tensor<?x64xf32>, tensor<?x320xf32>
}

// -----

// Sliding window, f16 activations and cache, static sequence counts.
// CHECK-LABEL: func.func @paged_attention_window(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<?x64xf16>
// CHECK-SAME: %[[K:[^:]+]]: tensor<?x64xf16>
// CHECK-SAME: %[[V:[^:]+]]: tensor<?x64xf16>
// CHECK-SAME: %[[C:[^:]+]]: !llm.kv_cache<kv_heads = 4, head_dim = 16, f16>
// CHECK-SAME: %[[SLOTS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[STARTS:[^:]+]]: tensor<4xi32>
// CHECK-SAME: %[[LENS:[^:]+]]: tensor<3xi32>
// CHECK-SAME: %[[TABLES:[^:]+]]: tensor<3x8xi32>
// CHECK: %[[O:.+]] = llm.paged_attention %[[Q]], %[[K]], %[[V]] into %[[C]] slots(%[[SLOTS]]) seqs(%[[STARTS]], %[[LENS]], %[[TABLES]]) heads = 4, kv_heads = 4, head_dim = 16, scale = 1.250000e-01 window = 4096 : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>, !llm.kv_cache<kv_heads = 4, head_dim = 16, f16>, tensor<?xi32>, tensor<4xi32>, tensor<3xi32>, tensor<3x8xi32> -> tensor<?x64xf16>
// CHECK: return %[[O]]
func.func @paged_attention_window(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %v: tensor<?x64xf16>,
                                  %cache: !llm.kv_cache<kv_heads = 4, head_dim = 16, f16>,
                                  %slots: tensor<?xi32>, %starts: tensor<4xi32>,
                                  %lens: tensor<3xi32>, %tables: tensor<3x8xi32>)
    -> tensor<?x64xf16> {
  %o = llm.paged_attention %q, %k, %v into %cache slots(%slots) seqs(%starts, %lens, %tables)
      heads = 4, kv_heads = 4, head_dim = 16, scale = 0.125 window = 4096
      : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>,
        !llm.kv_cache<kv_heads = 4, head_dim = 16, f16>, tensor<?xi32>, tensor<4xi32>,
        tensor<3xi32>, tensor<3x8xi32> -> tensor<?x64xf16>
  return %o : tensor<?x64xf16>
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @silu_mul_add(
// CHECK-SAME: %[[A:[^:]+]]: tensor<?x160xf32>
// CHECK-SAME: %[[B:[^:]+]]: tensor<?x160xf32>
// CHECK: %[[S:.+]] = llm.silu %[[A]] : tensor<?x160xf32>
// CHECK: %[[M:.+]] = llm.mul %[[S]], %[[B]] : tensor<?x160xf32>
// CHECK: %[[R:.+]] = llm.add %[[M]], %[[A]] : tensor<?x160xf32>
// CHECK: return %[[R]]
func.func @silu_mul_add(%a: tensor<?x160xf32>, %b: tensor<?x160xf32>) -> tensor<?x160xf32> {
  %s = llm.silu %a : tensor<?x160xf32>
  %m = llm.mul %s, %b : tensor<?x160xf32>
  %r = llm.add %m, %a : tensor<?x160xf32>
  return %r : tensor<?x160xf32>
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @all_gather(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[G:.+]] = llm.all_gather %[[X]] dim = 1 ranks = 4 : tensor<?x64xf32> -> tensor<?x256xf32>
// CHECK: return %[[G]]
func.func @all_gather(%x: tensor<?x64xf32>) -> tensor<?x256xf32> {
  %g = llm.all_gather %x dim = 1 ranks = 4 : tensor<?x64xf32> -> tensor<?x256xf32>
  return %g : tensor<?x256xf32>
}

// -----

// Shards padded to a common size: the result drops the padding.
// CHECK-LABEL: func.func @all_gather_padded(
// CHECK: llm.all_gather %{{.+}} dim = 1 ranks = 2 : tensor<?x151xf32> -> tensor<?x301xf32>
func.func @all_gather_padded(%x: tensor<?x151xf32>) -> tensor<?x301xf32> {
  %g = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x151xf32> -> tensor<?x301xf32>
  return %g : tensor<?x301xf32>
}

// -----

// all_gather takes any ranked tensor, not only activations.
// CHECK-LABEL: func.func @all_gather_3d(
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x?x8xi32>
// CHECK: llm.all_gather %[[X]] dim = 0 ranks = 2 : tensor<2x?x8xi32> -> tensor<4x?x8xi32>
func.func @all_gather_3d(%x: tensor<2x?x8xi32>) -> tensor<4x?x8xi32> {
  %g = llm.all_gather %x dim = 0 ranks = 2 : tensor<2x?x8xi32> -> tensor<4x?x8xi32>
  return %g : tensor<4x?x8xi32>
}

// -----

// CHECK-LABEL: func.func @send(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: llm.send %[[X]] to 1 : tensor<?x64xf32>
// CHECK-NEXT: llm.send %[[X]] to 0 : tensor<?x64xf32>
func.func @send(%x: tensor<?x64xf32>) {
  llm.send %x to 1 : tensor<?x64xf32>
  llm.send %x to 0 : tensor<?x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @recv(
// CHECK: %[[H:.+]] = llm.recv from 0 : tensor<?x64xbf16>
// CHECK: return %[[H]]
func.func @recv() -> tensor<?x64xbf16> {
  %h = llm.recv from 0 : tensor<?x64xbf16>
  return %h : tensor<?x64xbf16>
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

// -----

// CHECK-LABEL: func.func @fusion(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x160xf32>
// CHECK-SAME: %[[R:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[F:.+]] = llm.fusion "mlp_down"(%[[X]], %[[R]]) : (tensor<?x160xf32>, tensor<?x64xf32>) -> tensor<?x64xf32> {
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: tensor<?x160xf32>, %[[B:[^:]+]]: tensor<?x64xf32>):
// CHECK-NEXT: %[[W:.+]] = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, f32>
// CHECK-NEXT: %[[P:.+]] = llm.linear %[[A]], %[[W]] : tensor<?x160xf32>, !llm.weight<64x160, f32> -> tensor<?x64xf32>
// CHECK-NEXT: %[[S:.+]] = llm.add %[[P]], %[[B]] : tensor<?x64xf32>
// CHECK-NEXT: llm.yield %[[S]] : tensor<?x64xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @fusion(%x: tensor<?x160xf32>, %r: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = llm.fusion "mlp_down" (%x, %r) : (tensor<?x160xf32>, tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x160xf32>, %b: tensor<?x64xf32>):
    %w = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<64x160, f32>
    %p = llm.linear %a, %w : tensor<?x160xf32>, !llm.weight<64x160, f32> -> tensor<?x64xf32>
    %s = llm.add %p, %b : tensor<?x64xf32>
    llm.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}

// -----

// A fusion with two results, and one with none (an empty llm.yield).
// CHECK-LABEL: func.func @fusion_results(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x96xf32>
// CHECK: %[[F:.+]]:2 = llm.fusion "qkv_split"(%[[X]]) : (tensor<?x96xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>) {
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: tensor<?x96xf32>):
// CHECK-NEXT: %[[S:.+]]:2 = llm.split %[[A]] : tensor<?x96xf32> -> tensor<?x64xf32>, tensor<?x32xf32>
// CHECK-NEXT: llm.yield %[[S]]#0, %[[S]]#1 : tensor<?x64xf32>, tensor<?x32xf32>
// CHECK-NEXT: }
// CHECK: llm.fusion "send_out"(%[[F]]#1) : (tensor<?x32xf32>) -> () {
// CHECK-NEXT: ^bb0(%[[B:[^:]+]]: tensor<?x32xf32>):
// CHECK-NEXT: llm.send %[[B]] to 1 : tensor<?x32xf32>
// CHECK-NEXT: llm.yield{{$}}
// CHECK-NEXT: }
// CHECK: return %[[F]]#0
func.func @fusion_results(%x: tensor<?x96xf32>) -> tensor<?x64xf32> {
  %a, %b = llm.fusion "qkv_split" (%x) : (tensor<?x96xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>) {
  ^bb0(%in: tensor<?x96xf32>):
    %p, %q = llm.split %in : tensor<?x96xf32> -> tensor<?x64xf32>, tensor<?x32xf32>
    llm.yield %p, %q : tensor<?x64xf32>, tensor<?x32xf32>
  }
  llm.fusion "send_out" (%b) : (tensor<?x32xf32>) -> () {
  ^bb0(%in: tensor<?x32xf32>):
    llm.send %in to 1 : tensor<?x32xf32>
    llm.yield
  }
  return %a : tensor<?x64xf32>
}

// -----

// A mixture of 8 experts of 32, top 2, renormalized; q8_0 experts.
// CHECK-LABEL: func.func @moe(
// CHECK: llm.moe %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} experts = 8 top_k = 2 norm_topk_prob : tensor<?x64xf32>, !llm.weight<8x64, f32>, !llm.weight<256x64, q8_0>, !llm.weight<256x64, q8_0>, !llm.weight<512x32, q8_0>
// CHECK: llm.moe {{.+}} experts = 8 top_k = 1 : tensor<?x64xf32>
func.func @moe(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = llm.weight "router" : !llm.weight<8x64, f32>
  %g = llm.weight "gate_exps" : !llm.weight<256x64, q8_0>
  %u = llm.weight "up_exps" : !llm.weight<256x64, q8_0>
  %d = llm.weight "down_exps" : !llm.weight<512x32, q8_0>
  %y = llm.moe %x, %r, %g, %u, %d experts = 8 top_k = 2 norm_topk_prob : tensor<?x64xf32>, !llm.weight<8x64, f32>, !llm.weight<256x64, q8_0>, !llm.weight<256x64, q8_0>, !llm.weight<512x32, q8_0>
  %z = llm.moe %y, %r, %g, %u, %d experts = 8 top_k = 1 : tensor<?x64xf32>, !llm.weight<8x64, f32>, !llm.weight<256x64, q8_0>, !llm.weight<256x64, q8_0>, !llm.weight<512x32, q8_0>
  return %z : tensor<?x64xf32>
}
