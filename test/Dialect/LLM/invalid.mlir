// Every diagnostic of the llm dialect's verifiers (LLMOps.cpp, LLMTypes.cpp,
// LLMAttrs.cpp) and of the weight type's parser, once each at least.
//
// --allow-unregistered-dialect lets a fusion body end with an op that may be a
// terminator but is not llm.yield (see @fusion_no_yield).
//
// RUN: llmc-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect

//===----------------------------------------------------------------------===//
// !llm.weight
//===----------------------------------------------------------------------===//

// expected-error @+1 {{unknown weight format 'q7_0'; expected one of f32, f16, bf16, i8, i4, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k}}
func.func @unknown_format(%w: !llm.weight<64x64, q7_0>)

// -----

// expected-error @+1 {{weight must have rank 1 or 2, got rank 3}}
func.func @weight_rank3(%w: !llm.weight<2x64x64, f32>)

// -----

// expected-error @+1 {{weight dimensions must be positive, got 0}}
func.func @weight_zero_dim(%w: !llm.weight<0x64, f32>)

// -----

// expected-error @+1 {{weight format 'i4' needs group = 32, 64 or 128, got 0}}
func.func @weight_i4_no_group(%w: !llm.weight<64x128, i4>)

// -----

// expected-error @+1 {{weight format 'i8' needs group = 32, 64 or 128, got 256}}
func.func @weight_i8_bad_group(%w: !llm.weight<64x256, i8, group = 256>)

// -----

// expected-error @+1 {{innermost weight dimension 96 is not a multiple of the quantization group 64}}
func.func @weight_group_not_dividing(%w: !llm.weight<64x96, i4, group = 64>)

// -----

// expected-error @+1 {{group applies only to the i8 and i4 formats, not 'q8_0'}}
func.func @weight_group_on_gguf(%w: !llm.weight<64x64, q8_0, group = 32>)

// -----

// expected-error @+1 {{group applies only to the i8 and i4 formats, not 'f32'}}
func.func @weight_group_on_float(%w: !llm.weight<64x64, f32, group = 64>)

// -----

// expected-error @+1 {{innermost weight dimension 100 is not a multiple of the q4_0 block size 32}}
func.func @weight_q4_0_partial_block(%w: !llm.weight<64x100, q4_0>)

// -----

// k-quants need whole 256-element super-blocks.
// expected-error @+1 {{innermost weight dimension 128 is not a multiple of the q4_k block size 256}}
func.func @weight_q4_k_partial_block(%w: !llm.weight<64x128, q4_k>)

// -----

// expected-error @+1 {{innermost weight dimension 384 is not a multiple of the q6_k block size 256}}
func.func @weight_q6_k_partial_block(%w: !llm.weight<384, q6_k>)

//===----------------------------------------------------------------------===//
// !llm.kv_cache
//===----------------------------------------------------------------------===//

// -----

// expected-error @+1 {{kv_cache kv_heads must be positive, got 0}}
func.func @cache_no_heads(%c: !llm.kv_cache<kv_heads = 0, head_dim = 16, f32>)

// -----

// expected-error @+1 {{kv_cache head_dim must be positive and even, got 15}}
func.func @cache_odd_head_dim(%c: !llm.kv_cache<kv_heads = 2, head_dim = 15, f32>)

// -----

// expected-error @+1 {{kv_cache element type must be f32, f16 or bf16, got 'i8'}}
func.func @cache_int(%c: !llm.kv_cache<kv_heads = 2, head_dim = 16, i8>)

//===----------------------------------------------------------------------===//
// #llm.rope_scaling
//===----------------------------------------------------------------------===//

// -----

func.func @rope_scaling_factor(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+2 {{rope_scaling factor must be positive, got 0.000000e+00}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4,
      scaling = #llm.rope_scaling<linear, factor = 0.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>, style = half
      : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_scaling_max_position(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+2 {{rope_scaling original_max_position must be positive, got 0}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4,
      scaling = #llm.rope_scaling<linear, factor = 2.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 0>, style = half
      : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_scaling_llama3_order(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+2 {{llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor, got 4.000000e+00 and 1.000000e+00}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4,
      scaling = #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position = 8192>, style = half
      : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_scaling_llama3_low(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+2 {{llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor, got 0.000000e+00 and 4.000000e+00}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4,
      scaling = #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 0.0, high_freq_factor = 4.0, original_max_position = 8192>, style = half
      : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

//===----------------------------------------------------------------------===//
// llm.weight, llm.embed
//===----------------------------------------------------------------------===//

// -----

func.func @weight_empty_name() {
  // expected-error @+1 {{'llm.weight' op weight name must not be empty}}
  %w = llm.weight "" : !llm.weight<64, f32>
  return
}

// -----

func.func @embed_vector_table(%tokens: tensor<?xi32>) -> tensor<?x64xf32> {
  %t = llm.weight "emb" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.embed' op table must be a matrix [out_features, in_features], got rank 1}}
  %h = llm.embed %tokens, %t : tensor<?xi32>, !llm.weight<64, f32> -> tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}

// -----

func.func @embed_rows(%tokens: tensor<5xi32>) -> tensor<4x64xf32> {
  %t = llm.weight "emb" : !llm.weight<256x64, f32>
  // expected-error @+1 {{'llm.embed' op result has 4 rows but there are 5 tokens}}
  %h = llm.embed %tokens, %t : tensor<5xi32>, !llm.weight<256x64, f32> -> tensor<4x64xf32>
  return %h : tensor<4x64xf32>
}

// -----

func.func @embed_width(%tokens: tensor<?xi32>) -> tensor<?x32xf32> {
  %t = llm.weight "emb" : !llm.weight<256x64, f32>
  // expected-error @+1 {{'llm.embed' op result has 32 features, expected 64 (the embedding width of the table)}}
  %h = llm.embed %tokens, %t : tensor<?xi32>, !llm.weight<256x64, f32> -> tensor<?x32xf32>
  return %h : tensor<?x32xf32>
}

//===----------------------------------------------------------------------===//
// llm.rms_norm, llm.layer_norm
//===----------------------------------------------------------------------===//

// -----

func.func @rms_norm_eps_zero(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "norm" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.rms_norm' op eps must be in (0, 1), got 0.000000e+00}}
  %y = llm.rms_norm %x, %w eps = 0.0 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_eps_one(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "norm" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.rms_norm' op eps must be in (0, 1), got 1.000000e+00}}
  %y = llm.rms_norm %x, %w eps = 1.0 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_matrix_weight(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "norm" : !llm.weight<1x64, f32>
  // expected-error @+1 {{'llm.rms_norm' op weight must be a vector, got rank 2}}
  %y = llm.rms_norm %x, %w eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<1x64, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_weight_size(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "norm" : !llm.weight<32, f32>
  // expected-error @+1 {{'llm.rms_norm' op weight has 32 elements, expected 64 (one per input feature)}}
  %y = llm.rms_norm %x, %w eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<32, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_quantized_weight(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "norm" : !llm.weight<64, q8_0>
  // expected-error @+1 {{'llm.rms_norm' op weight must be stored as f32, f16 or bf16, got q8_0}}
  %y = llm.rms_norm %x, %w eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, q8_0>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_norm_eps(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "ln.weight" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.layer_norm' op eps must be in (0, 1), got -1.000000e-05}}
  %y = llm.layer_norm %x, %w eps = -1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_norm_weight_size(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "ln.weight" : !llm.weight<128, f32>
  // expected-error @+1 {{'llm.layer_norm' op weight has 128 elements, expected 64 (one per input feature)}}
  %y = llm.layer_norm %x, %w eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<128, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_norm_bias_size(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "ln.weight" : !llm.weight<64, f32>
  %b = llm.weight "ln.bias" : !llm.weight<32, f32>
  // expected-error @+1 {{'llm.layer_norm' op bias has 32 elements, expected 64 (one per input feature)}}
  %y = llm.layer_norm %x, %w, %b eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>, !llm.weight<32, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_norm_bias_matrix(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "ln.weight" : !llm.weight<64, f32>
  %b = llm.weight "ln.bias" : !llm.weight<1x64, f32>
  // expected-error @+1 {{'llm.layer_norm' op bias must be a vector, got rank 2}}
  %y = llm.layer_norm %x, %w, %b eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>, !llm.weight<1x64, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_norm_bias_quantized(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "ln.weight" : !llm.weight<64, f32>
  %b = llm.weight "ln.bias" : !llm.weight<64, i8, group = 64>
  // expected-error @+1 {{'llm.layer_norm' op bias must be stored as f32, f16 or bf16, got i8}}
  %y = llm.layer_norm %x, %w, %b eps = 1.0e-5 : tensor<?x64xf32>, !llm.weight<64, f32>, !llm.weight<64, i8, group = 64>
  return %y : tensor<?x64xf32>
}

//===----------------------------------------------------------------------===//
// llm.linear
//===----------------------------------------------------------------------===//

// -----

func.func @linear_vector_weight(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "proj" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.linear' op weight must be a matrix [out_features, in_features], got rank 1}}
  %y = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<64, f32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// The weight is [out_features, in_features], not the transpose.
func.func @linear_in_features(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %w = llm.weight "proj" : !llm.weight<64x128, f32>
  // expected-error @+1 {{'llm.linear' op input has 64 features, expected 128 (the weight's in_features)}}
  %y = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<64x128, f32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @linear_out_features(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "proj" : !llm.weight<128x64, f32>
  // expected-error @+1 {{'llm.linear' op result has 64 features, expected 128 (the weight's out_features)}}
  %y = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @linear_tokens(%x: tensor<4x64xf32>) -> tensor<5x128xf32> {
  %w = llm.weight "proj" : !llm.weight<128x64, f32>
  // expected-error @+1 {{'llm.linear' op input has 4 tokens but result has 5}}
  %y = llm.linear %x, %w : tensor<4x64xf32>, !llm.weight<128x64, f32> -> tensor<5x128xf32>
  return %y : tensor<5x128xf32>
}

// -----

func.func @linear_element_type(%x: tensor<?x64xf32>) -> tensor<?x128xf16> {
  %w = llm.weight "proj" : !llm.weight<128x64, f32>
  // expected-error @+1 {{'llm.linear' op input element type 'f32' differs from result element type 'f16'}}
  %y = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<128x64, f32> -> tensor<?x128xf16>
  return %y : tensor<?x128xf16>
}

// -----

func.func @linear_bias_size(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %w = llm.weight "proj" : !llm.weight<128x64, f32>
  %b = llm.weight "proj.bias" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.linear' op bias has 64 elements, expected 128 (one per output feature)}}
  %y = llm.linear %x, %w bias %b : tensor<?x64xf32>, !llm.weight<128x64, f32>, !llm.weight<64, f32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @linear_bias_quantized(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  %w = llm.weight "proj" : !llm.weight<128x64, f32>
  %b = llm.weight "proj.bias" : !llm.weight<128, q4_0>
  // expected-error @+1 {{'llm.linear' op bias must be stored as f32, f16 or bf16, got q4_0}}
  %y = llm.linear %x, %w bias %b : tensor<?x64xf32>, !llm.weight<128x64, f32>, !llm.weight<128, q4_0> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

//===----------------------------------------------------------------------===//
// llm.lm_head
//===----------------------------------------------------------------------===//

// -----

func.func @lm_head_vector_weight(%h: tensor<?x64xf32>, %rows: tensor<?xi32>) -> tensor<?x64xf32> {
  %w = llm.weight "lm_head" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.lm_head' op weight must be a matrix [out_features, in_features], got rank 1}}
  %l = llm.lm_head %h[%rows], %w : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<64, f32> -> tensor<?x64xf32>
  return %l : tensor<?x64xf32>
}

// -----

func.func @lm_head_hidden(%h: tensor<?x32xf32>, %rows: tensor<?xi32>) -> tensor<?x256xf32> {
  %w = llm.weight "lm_head" : !llm.weight<256x64, f32>
  // expected-error @+1 {{'llm.lm_head' op input has 32 features, expected 64 (the weight's hidden size)}}
  %l = llm.lm_head %h[%rows], %w : tensor<?x32xf32>, tensor<?xi32>, !llm.weight<256x64, f32> -> tensor<?x256xf32>
  return %l : tensor<?x256xf32>
}

// -----

func.func @lm_head_vocab(%h: tensor<?x64xf32>, %rows: tensor<?xi32>) -> tensor<?x255xf32> {
  %w = llm.weight "lm_head" : !llm.weight<256x64, f32>
  // expected-error @+1 {{'llm.lm_head' op logits has 255 features, expected 256 (the weight's vocabulary size)}}
  %l = llm.lm_head %h[%rows], %w : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<256x64, f32> -> tensor<?x255xf32>
  return %l : tensor<?x255xf32>
}

// -----

func.func @lm_head_rows(%h: tensor<?x64xf32>, %rows: tensor<4xi32>) -> tensor<3x256xf32> {
  %w = llm.weight "lm_head" : !llm.weight<256x64, f32>
  // expected-error @+1 {{'llm.lm_head' op logits have 3 rows but 4 rows are selected}}
  %l = llm.lm_head %h[%rows], %w : tensor<?x64xf32>, tensor<4xi32>, !llm.weight<256x64, f32> -> tensor<3x256xf32>
  return %l : tensor<3x256xf32>
}

//===----------------------------------------------------------------------===//
// llm.split
//===----------------------------------------------------------------------===//

// -----

func.func @split_no_results(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.split' op needs at least one result}}
  "llm.split"(%x) : (tensor<?x64xf32>) -> ()
  return
}

// -----

func.func @split_tokens(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'llm.split' op input has 4 tokens but result #1 has 5}}
  %a, %b = llm.split %x : tensor<4x64xf32> -> tensor<4x32xf32>, tensor<5x32xf32>
  return
}

// -----

func.func @split_element_type(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.split' op input element type 'f32' differs from result #0 element type 'bf16'}}
  %a, %b = llm.split %x : tensor<?x64xf32> -> tensor<?x32xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @split_widths(%x: tensor<?x128xf32>) {
  // expected-error @+1 {{'llm.split' op result widths add up to 96 but the input has 128 features}}
  %q, %k, %v = llm.split %x : tensor<?x128xf32> -> tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>
  return
}

//===----------------------------------------------------------------------===//
// llm.rope
//===----------------------------------------------------------------------===//

// -----

func.func @rope_heads(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.rope' op heads must be positive, got 0}}
  %y = llm.rope %x, %pos heads = 0, head_dim = 16, theta = 1.0e4, style = half : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_odd_head_dim(%x: tensor<?x60xf32>, %pos: tensor<?xi32>) -> tensor<?x60xf32> {
  // expected-error @+1 {{'llm.rope' op head_dim must be positive and even, got 15}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 15, theta = 1.0e4, style = half : tensor<?x60xf32>, tensor<?xi32>
  return %y : tensor<?x60xf32>
}

// -----

func.func @rope_theta(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.rope' op theta must be positive, got -1.000000e+00}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = -1.0, style = half : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_positions(%x: tensor<5x64xf32>, %pos: tensor<4xi32>) -> tensor<5x64xf32> {
  // expected-error @+1 {{'llm.rope' op there are 4 positions for 5 tokens}}
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4, style = half : tensor<5x64xf32>, tensor<4xi32>
  return %y : tensor<5x64xf32>
}

// -----

func.func @rope_features(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.rope' op input has 64 features, expected 32 (heads * head_dim)}}
  %y = llm.rope %x, %pos heads = 2, head_dim = 16, theta = 1.0e4, style = half : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

//===----------------------------------------------------------------------===//
// llm.paged_attention
//===----------------------------------------------------------------------===//

// -----

func.func @attention_heads(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                           %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                           %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op heads and kv_heads must be positive, got 0 and 2}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 0, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_gqa(%q: tensor<?x64xf32>, %k: tensor<?x48xf32>, %v: tensor<?x48xf32>,
                         %c: !llm.kv_cache<kv_heads = 3, head_dim = 16, f32>, %slots: tensor<?xi32>,
                         %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op heads (4) must be a multiple of kv_heads (3)}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 3, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x48xf32>, tensor<?x48xf32>, !llm.kv_cache<kv_heads = 3, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                              %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                              %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op head_dim must be positive, got 0}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 0, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_scale(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                           %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                           %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op scale must be positive, got 0.000000e+00}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.0 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_window(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                            %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                            %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op window must be positive, got 0}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 window = 0 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_cache_shape(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                 %c: !llm.kv_cache<kv_heads = 4, head_dim = 8, f32>, %slots: tensor<?xi32>,
                                 %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op cache holds 4 heads of 8 but the op has kv_heads = 2, head_dim = 16}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 4, head_dim = 8, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_query_width(%q: tensor<?x32xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                 %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                 %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'llm.paged_attention' op query has 32 features, expected 64 (heads * head_dim)}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x32xf32>
  return %o : tensor<?x32xf32>
}

// -----

func.func @attention_key_width(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>, %v: tensor<?x32xf32>,
                               %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                               %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op key has 64 features, expected 32 (kv_heads * head_dim)}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_value_width(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x16xf32>,
                                 %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                 %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op value has 16 features, expected 32 (kv_heads * head_dim)}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x16xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_key_tokens(%q: tensor<4x64xf32>, %k: tensor<5x32xf32>, %v: tensor<4x32xf32>,
                                %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op query has 4 tokens but key has 5}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<4x64xf32>, tensor<5x32xf32>, tensor<4x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<4x64xf32>
  return %o : tensor<4x64xf32>
}

// -----

func.func @attention_value_tokens(%q: tensor<4x64xf32>, %k: tensor<?x32xf32>, %v: tensor<3x32xf32>,
                                  %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                  %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op query has 4 tokens but value has 3}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<4x64xf32>, tensor<?x32xf32>, tensor<3x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<4x64xf32>
  return %o : tensor<4x64xf32>
}

// -----

func.func @attention_key_type(%q: tensor<?x64xf32>, %k: tensor<?x32xf16>, %v: tensor<?x32xf32>,
                              %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                              %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op query element type 'f32' differs from key element type 'f16'}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf16>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_value_type(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xbf16>,
                                %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op query element type 'f32' differs from value element type 'bf16'}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xbf16>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_result_type(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                 %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                 %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf16> {
  // expected-error @+1 {{'llm.paged_attention' op result type 'tensor<?x64xf16>' must equal the query type 'tensor<?x64xf32>'}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf16>
  return %o : tensor<?x64xf16>
}

// -----

func.func @attention_slots(%q: tensor<4x64xf32>, %k: tensor<4x32xf32>, %v: tensor<4x32xf32>,
                           %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<3xi32>,
                           %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op slot_mapping has 3 slots for 4 tokens}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<4x64xf32>, tensor<4x32xf32>, tensor<4x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<3xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<4x64xf32>
  return %o : tensor<4x64xf32>
}

// -----

func.func @attention_query_starts(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                  %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                  %starts: tensor<3xi32>, %lens: tensor<3xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op query_starts must have one more entry than context_lens, got 3 and 3}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<3xi32>, tensor<3xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_block_tables(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                  %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                  %starts: tensor<?xi32>, %lens: tensor<3xi32>, %tables: tensor<2x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op block_tables has 2 rows for 3 sequences}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<3xi32>, tensor<2x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// -----

func.func @all_reduce_ranks(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.all_reduce' op ranks must be at least 2, got 1}}
  %y = llm.all_reduce sum %x ranks = 1 : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @all_gather_ranks(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.all_gather' op ranks must be at least 2, got 0}}
  %y = llm.all_gather %x dim = 1 ranks = 0 : tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @all_gather_dim(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  // expected-error @+1 {{'llm.all_gather' op dim 2 is out of range for rank 2}}
  %y = llm.all_gather %x dim = 2 ranks = 2 : tensor<?x64xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @all_gather_negative_dim(%x: tensor<?x64xf32>) -> tensor<?x128xf32> {
  // expected-error @+1 {{'llm.all_gather' op dim -1 is out of range for rank 2}}
  %y = llm.all_gather %x dim = -1 ranks = 2 : tensor<?x64xf32> -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// -----

func.func @all_gather_rank(%x: tensor<?x64xf32>) -> tensor<?x2x64xf32> {
  // expected-error @+1 {{'llm.all_gather' op result 'tensor<?x2x64xf32>' must have the rank and element type of the input 'tensor<?x64xf32>'}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x64xf32> -> tensor<?x2x64xf32>
  return %y : tensor<?x2x64xf32>
}

// -----

func.func @all_gather_element_type(%x: tensor<?x64xf32>) -> tensor<?x128xf16> {
  // expected-error @+1 {{'llm.all_gather' op result 'tensor<?x128xf16>' must have the rank and element type of the input 'tensor<?x64xf32>'}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x64xf32> -> tensor<?x128xf16>
  return %y : tensor<?x128xf16>
}

// -----

func.func @all_gather_gathered_dim(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.all_gather' op result dimension 1 is 64, expected 128}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @all_gather_other_dim(%x: tensor<4x64xf32>) -> tensor<8x128xf32> {
  // expected-error @+1 {{'llm.all_gather' op result dimension 0 is 8, expected 4}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<4x64xf32> -> tensor<8x128xf32>
  return %y : tensor<8x128xf32>
}

// `peer rank must be non-negative` (llm.send, llm.recv) is never reported:
// see invalid-known-bugs.mlir.

//===----------------------------------------------------------------------===//
// llm.fusion
//===----------------------------------------------------------------------===//

// -----

func.func @fusion_empty_name(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.fusion' op fusion name must not be empty}}
  %y = llm.fusion "" (%x) : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    llm.yield %a : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}

// -----

func.func @fusion_arg_count(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.fusion' op body has 1 arguments for 2 inputs}}
  %y = llm.fusion "f" (%x, %r) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    llm.yield %a : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}

// -----

func.func @fusion_arg_type(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.fusion' op body argument #0 has type 'tensor<?x64xf16>' but input #0 has type 'tensor<?x64xf32>'}}
  llm.fusion "f" (%x) : (tensor<?x64xf32>) -> () {
  ^bb0(%a: tensor<?x64xf16>):
    llm.send %a to 1 : tensor<?x64xf16>
    llm.yield
  }
  return
}

// -----

// Registered terminators other than llm.yield already fail their parent
// checks, so the body ends here with an unregistered op.
func.func @fusion_no_yield(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.fusion' op body must end with llm.yield}}
  llm.fusion "f" (%x) : (tensor<?x64xf32>) -> () {
  ^bb0(%a: tensor<?x64xf32>):
    "test.terminator"() : () -> ()
  }
  return
}

// -----

func.func @fusion_yield_types(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.fusion' op yields 2 values whose types differ from the 1 results}}
  %y = llm.fusion "f" (%x) : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    llm.yield %a, %a : tensor<?x64xf32>, tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}

// -----

func.func @fusion_yield_type(%x: tensor<?x64xf32>) -> tensor<?x64xf16> {
  // expected-error @+1 {{'llm.fusion' op yields 1 values whose types differ from the 1 results}}
  %y = llm.fusion "f" (%x) : (tensor<?x64xf32>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x64xf32>):
    llm.yield %a : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf16>
}

// -----

func.func @send_peer(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.send' op peer rank must be non-negative, got -1}}
  llm.send %x to -1 : tensor<?x64xf32>
  return
}

// -----

func.func @recv_peer() -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.recv' op peer rank must be non-negative, got -2}}
  %h = llm.recv from -2 : tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}

// -----

func.func @attention_negative_window(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                     %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                     %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op window must be positive, got -5}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 window = -5 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @rope_scaling_and_freq_factors(%x: tensor<?x64xf32>, %pos: tensor<?xi32>, %f: !llm.weight<8, f32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.rope' op takes either scaling or freq_factors, not both}}
  %y = llm.rope %x, %pos freq_factors(%f : !llm.weight<8, f32>) heads = 4, head_dim = 16, theta = 1.0e4,
      scaling = #llm.rope_scaling<linear, factor = 2.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>,
      style = half : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rope_freq_factors_size(%x: tensor<?x64xf32>, %pos: tensor<?xi32>, %f: !llm.weight<16, f32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.rope' op freq_factors has 16 elements, expected 8 (one per rotated pair)}}
  %y = llm.rope %x, %pos freq_factors(%f : !llm.weight<16, f32>) heads = 4, head_dim = 16, theta = 1.0e4,
      style = half : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}
