// --llmc-quantize retypes the float weights of projections (llm.linear,
// llm.lm_head) to i8 (w8a16) or i4 (w4a16) with a group, and marks them
// `from "<source format>"` for the weight store. Norms, biases and GGUF
// formats keep theirs; a tied embedding follows its lm_head; a width that
// is not a multiple of the group takes the largest of 64/32 that divides it.
//
// RUN: llmc-opt %s --llmc-quantize="mode=w4a16 group=128" 2>/dev/null | FileCheck %s --check-prefix=W4
// RUN: llmc-opt %s --llmc-quantize="mode=w4a16 group=128" 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: llmc-opt %s --llmc-quantize="mode=w8a16 group=64" 2>/dev/null | FileCheck %s --check-prefix=W8
// RUN: llmc-opt %s --llmc-quantize="mode=w4a16 group=32" 2>/dev/null | FileCheck %s --check-prefix=G32
// RUN: llmc-opt %s --llmc-quantize="mode=w4a16 group=128 skip=lm_head,k_proj" 2>/dev/null | FileCheck %s --check-prefix=SKIP
// RUN: llmc-opt %s --llmc-quantize="mode=none" | FileCheck %s --check-prefix=NONE --implicit-check-not=from --implicit-check-not=i4 --implicit-check-not=i8

func.func @step(%tokens: tensor<?xi32>, %rows: tensor<?xi32>, %x48: tensor<?x48xf32>) -> tensor<?x300xf32> {
  %emb = llm.weight "model.embed_tokens.weight" : !llm.weight<300x256, f16>
  %h = llm.embed %tokens, %emb : tensor<?xi32>, !llm.weight<300x256, f16> -> tensor<?x256xf32>
  %nw = llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<256, f32>
  %n = llm.rms_norm %h, %nw eps = 1.000000e-05 : tensor<?x256xf32>, !llm.weight<256, f32>
  %qw = llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<256x256, bf16>
  %qb = llm.weight "model.layers.0.self_attn.q_proj.bias" : !llm.weight<256, f32>
  %q = llm.linear %n, %qw bias %qb : tensor<?x256xf32>, !llm.weight<256x256, bf16>, !llm.weight<256, f32> -> tensor<?x256xf32>
  %kw = llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<96x256, f32>
  %k = llm.linear %n, %kw : tensor<?x256xf32>, !llm.weight<96x256, f32> -> tensor<?x96xf32>
  %vw = llm.weight "blk.0.attn_v.weight" : !llm.weight<96x256, q4_1>
  %v = llm.linear %n, %vw : tensor<?x256xf32>, !llm.weight<96x256, q4_1> -> tensor<?x96xf32>
  %dw = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<256x96, f16>
  %d = llm.linear %k, %dw : tensor<?x96xf32>, !llm.weight<256x96, f16> -> tensor<?x256xf32>
  %ow = llm.weight "model.layers.0.mlp.odd_proj.weight" : !llm.weight<256x48, f32>
  %o = llm.linear %x48, %ow : tensor<?x48xf32>, !llm.weight<256x48, f32> -> tensor<?x256xf32>
  %s = llm.add %d, %q : tensor<?x256xf32>
  %logits = llm.lm_head %s[%rows], %emb : tensor<?x256xf32>, tensor<?xi32>, !llm.weight<300x256, f16> -> tensor<?x300xf32>
  return %logits : tensor<?x300xf32>
}

// A tied table is quantized once, for both its embed and its lm_head.
// W4: llm.weight "model.embed_tokens.weight" from "f16" : !llm.weight<300x256, i4, group = 128>
// W4: llm.embed {{.*}} !llm.weight<300x256, i4, group = 128>
// W4: llm.weight "model.layers.0.input_layernorm.weight" : !llm.weight<256, f32>
// W4: llm.weight "model.layers.0.self_attn.q_proj.weight" from "bf16" : !llm.weight<256x256, i4, group = 128>
// W4: llm.weight "model.layers.0.self_attn.q_proj.bias" : !llm.weight<256, f32>
// W4: llm.linear {{.*}} !llm.weight<256x256, i4, group = 128>, !llm.weight<256, f32>
// W4: llm.weight "model.layers.0.self_attn.k_proj.weight" from "f32" : !llm.weight<96x256, i4, group = 128>
// GGUF blocks are already quantized: kept as they are.
// W4: llm.weight "blk.0.attn_v.weight" : !llm.weight<96x256, q4_1>
// Width 96: group 128 and 64 do not divide it, 32 does.
// W4: llm.weight "model.layers.0.mlp.down_proj.weight" from "f16" : !llm.weight<256x96, i4, group = 32>
// Width 48 is not a multiple of 32: kept, with a warning naming the weight.
// WARN: warning: weight 'model.layers.0.mlp.odd_proj.weight' keeps its format f32: its input width 48 is not a multiple of 32
// W4: llm.weight "model.layers.0.mlp.odd_proj.weight" : !llm.weight<256x48, f32>
// W4: llm.lm_head {{.*}} !llm.weight<300x256, i4, group = 128>

// W8: llm.weight "model.embed_tokens.weight" from "f16" : !llm.weight<300x256, i8, group = 64>
// W8: llm.weight "model.layers.0.self_attn.q_proj.weight" from "bf16" : !llm.weight<256x256, i8, group = 64>
// W8: llm.weight "model.layers.0.self_attn.k_proj.weight" from "f32" : !llm.weight<96x256, i8, group = 64>
// W8: llm.weight "blk.0.attn_v.weight" : !llm.weight<96x256, q4_1>
// W8: llm.weight "model.layers.0.mlp.down_proj.weight" from "f16" : !llm.weight<256x96, i8, group = 32>

// G32: llm.weight "model.layers.0.self_attn.q_proj.weight" from "bf16" : !llm.weight<256x256, i4, group = 32>
// G32: llm.weight "model.layers.0.mlp.down_proj.weight" from "f16" : !llm.weight<256x96, i4, group = 32>

// `lm_head` keeps whatever weight the lm_head reads (here the tied table);
// other entries match name substrings.
// SKIP: llm.weight "model.embed_tokens.weight" : !llm.weight<300x256, f16>
// SKIP: llm.weight "model.layers.0.self_attn.q_proj.weight" from "bf16" : !llm.weight<256x256, i4, group = 128>
// SKIP: llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<96x256, f32>
// SKIP: llm.weight "model.layers.0.mlp.down_proj.weight" from "f16" : !llm.weight<256x96, i4, group = 32>

// Every weight in the format it came in.
// NONE: llm.weight "model.embed_tokens.weight" : !llm.weight<300x256, f16>
// NONE: llm.weight "model.layers.0.self_attn.q_proj.weight" : !llm.weight<256x256, bf16>
// NONE: llm.weight "model.layers.0.self_attn.k_proj.weight" : !llm.weight<96x256, f32>
// NONE: llm.weight "blk.0.attn_v.weight" : !llm.weight<96x256, q4_1>
// NONE: llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<256x96, f16>
