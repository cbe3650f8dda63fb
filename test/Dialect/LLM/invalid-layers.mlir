// Diagnostics of the llm dialect's verifiers (LLMOps.cpp) for the layer ops:
// llm.weight, llm.embed, the norms, llm.linear, llm.moe, llm.lm_head, llm.split,
// llm.rope and llm.fusion. With invalid-types.mlir and invalid-attention-collectives.mlir:
// every diagnostic of the llm dialect's verifiers, once each at least.
//
// --allow-unregistered-dialect lets a fusion body end with an op that may be a
// terminator but is not llm.yield (see @fusion_no_yield).
//
// RUN: llmc-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect

//===----------------------------------------------------------------------===//
// llm.weight, llm.embed
//===----------------------------------------------------------------------===//

func.func @weight_empty_name() {
  // expected-error @+1 {{'llm.weight' op weight name must not be empty}}
  %w = llm.weight "" : !llm.weight<64, f32>
  return
}

// -----

func.func @weight_rows_without_concat() {
  // expected-error @+1 {{'llm.weight' op rows slices the parts of a concat, but there is no concat}}
  %w = llm.weight "w" rows [0, 64] : !llm.weight<64x64, f32>
  return
}

// -----

func.func @weight_rows_count() {
  // expected-error @+1 {{'llm.weight' op rows needs a begin and an end for each of the 2 parts, got 2 numbers}}
  %w = llm.weight "w" concat ["a", "b"] rows [0, 64] : !llm.weight<64x64, f32>
  return
}

// -----

func.func @weight_rows_empty() {
  // expected-error @+1 {{'llm.weight' op rows of part 0 are [64, 64), which is empty or negative}}
  %w = llm.weight "w" concat ["a"] rows [64, 64] : !llm.weight<64x64, f32>
  return
}

// -----

func.func @weight_rows_total() {
  // expected-error @+1 {{'llm.weight' op rows select 32 rows but the type has 64}}
  %w = llm.weight "w" concat ["a"] rows [0, 32] : !llm.weight<64x64, f32>
  return
}

// -----

func.func @weight_plus_quantized() {
  // expected-error @+1 {{'llm.weight' op plus shifts float weights (f32, f16, bf16), not q8_0}}
  %w = llm.weight "w" plus 1.0 : !llm.weight<64x64, q8_0>
  return
}

// -----

func.func @embed_scale_zero(%tokens: tensor<?xi32>) -> tensor<?x64xf32> {
  %t = llm.weight "emb" : !llm.weight<100x64, f32>
  // expected-error @+1 {{'llm.embed' op scale must be positive, got 0}}
  %h = llm.embed %tokens, %t scale = 0.0 : tensor<?xi32>, !llm.weight<100x64, f32> -> tensor<?x64xf32>
  return %h : tensor<?x64xf32>
}

// -----

func.func @lm_head_negative_softcap(%h: tensor<?x64xf32>, %rows: tensor<?xi32>) -> tensor<?x100xf32> {
  %w = llm.weight "w" : !llm.weight<100x64, f32>
  // expected-error @+1 {{'llm.lm_head' op softcap must be positive, got -3}}
  %l = llm.lm_head %h[%rows], %w softcap = -3.0 : tensor<?x64xf32>, tensor<?xi32>, !llm.weight<100x64, f32> -> tensor<?x100xf32>
  return %l : tensor<?x100xf32>
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

func.func @rms_norm_heads_do_not_divide(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "q_norm" : !llm.weight<24, f32>
  // expected-error @+1 {{'llm.rms_norm' op input has 64 features, not a whole number of heads of 24}}
  %y = llm.rms_norm %x, %w eps = 1.0e-6 head_dim = 24 : tensor<?x64xf32>, !llm.weight<24, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_head_weight_is_a_row(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "q_norm" : !llm.weight<64, f32>
  // expected-error @+1 {{'llm.rms_norm' op weight has 64 elements, expected 16 (one per feature of a head)}}
  %y = llm.rms_norm %x, %w eps = 1.0e-6 head_dim = 16 : tensor<?x64xf32>, !llm.weight<64, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @rms_norm_head_dim_zero(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "q_norm" : !llm.weight<16, f32>
  // expected-error @+1 {{'llm.rms_norm' op head_dim must be positive, got 0}}
  %y = llm.rms_norm %x, %w eps = 1.0e-6 head_dim = 0 : tensor<?x64xf32>, !llm.weight<16, f32>
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

//===----------------------------------------------------------------------===//
// llm.moe
//===----------------------------------------------------------------------===//

// -----

func.func @moe_top_k_past_experts(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = llm.weight "router" : !llm.weight<4x64, f32>
  %g = llm.weight "gate" : !llm.weight<128x64, f32>
  %d = llm.weight "down" : !llm.weight<256x32, f32>
  // expected-error @+1 {{'llm.moe' op top_k must be in [1, 4], got 5}}
  %y = llm.moe %x, %r, %g, %g, %d experts = 4 top_k = 5 : tensor<?x64xf32>, !llm.weight<4x64, f32>, !llm.weight<128x64, f32>, !llm.weight<128x64, f32>, !llm.weight<256x32, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @moe_quantized_router(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = llm.weight "router" : !llm.weight<4x64, q8_0>
  %g = llm.weight "gate" : !llm.weight<128x64, f32>
  %d = llm.weight "down" : !llm.weight<256x32, f32>
  // expected-error @+1 {{'llm.moe' op router must be stored as f32, f16 or bf16, got q8_0}}
  %y = llm.moe %x, %r, %g, %g, %d experts = 4 top_k = 2 : tensor<?x64xf32>, !llm.weight<4x64, q8_0>, !llm.weight<128x64, f32>, !llm.weight<128x64, f32>, !llm.weight<256x32, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @moe_router_not_experts_by_hidden(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = llm.weight "router" : !llm.weight<8x64, f32>
  %g = llm.weight "gate" : !llm.weight<128x64, f32>
  %d = llm.weight "down" : !llm.weight<256x32, f32>
  // expected-error @+1 {{'llm.moe' op router must be [4, 64] (experts, hidden), got 8x64}}
  %y = llm.moe %x, %r, %g, %g, %d experts = 4 top_k = 2 : tensor<?x64xf32>, !llm.weight<8x64, f32>, !llm.weight<128x64, f32>, !llm.weight<128x64, f32>, !llm.weight<256x32, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @moe_gate_not_whole_experts(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = llm.weight "router" : !llm.weight<4x64, f32>
  %g = llm.weight "gate" : !llm.weight<130x64, f32>
  %d = llm.weight "down" : !llm.weight<256x32, f32>
  // expected-error @+1 {{'llm.moe' op gate has 130 rows, not a multiple of the 4 experts}}
  %y = llm.moe %x, %r, %g, %g, %d experts = 4 top_k = 2 : tensor<?x64xf32>, !llm.weight<4x64, f32>, !llm.weight<130x64, f32>, !llm.weight<130x64, f32>, !llm.weight<256x32, f32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @moe_down_transposed(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = llm.weight "router" : !llm.weight<4x64, f32>
  %g = llm.weight "gate" : !llm.weight<128x64, f32>
  %d = llm.weight "down" : !llm.weight<128x64, f32>
  // expected-error @+1 {{'llm.moe' op down must be 256x32 (experts * hidden, the experts' width), got 128x64}}
  %y = llm.moe %x, %r, %g, %g, %d experts = 4 top_k = 2 : tensor<?x64xf32>, !llm.weight<4x64, f32>, !llm.weight<128x64, f32>, !llm.weight<128x64, f32>, !llm.weight<128x64, f32>
  return %y : tensor<?x64xf32>
}
