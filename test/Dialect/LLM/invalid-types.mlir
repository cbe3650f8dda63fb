// Diagnostics of the llm dialect's types and attributes (LLMTypes.cpp,
// LLMAttrs.cpp) and of the weight type's parser. With invalid-layers.mlir and
// invalid-attention-collectives.mlir: every diagnostic of the llm dialect's
// verifiers, once each at least.
//
// (--allow-unregistered-dialect: the RUN line of all three files; only
// invalid-layers.mlir's @fusion_no_yield needs it.)
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
