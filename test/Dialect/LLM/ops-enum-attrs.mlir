// Round trip of the ops that carry the dialect's enum attributes (rope's
// style, gelu's approx, all_reduce's kind) and rope's #llm.rope_scaling.
//
// RUN: llmc-opt %s --split-input-file | FileCheck %s
// RUN: llmc-opt %s --split-input-file | llmc-opt --split-input-file | FileCheck %s
//
// RUN: llmc-opt %s --split-input-file --mlir-print-op-generic | llmc-opt --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @rope_half(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK-SAME: %[[POS:[^:]+]]: tensor<?xi32>
// CHECK: %[[Y:.+]] = llm.rope %[[X]], %[[POS]] heads = 4, head_dim = 16, theta = 1.000000e+04, style = half : tensor<?x64xf32>, tensor<?xi32>
// CHECK: return %[[Y]]
func.func @rope_half(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4, style = half
      : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

// CHECK-LABEL: func.func @rope_interleaved(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x32xf16>
// CHECK-SAME: %[[POS:[^:]+]]: tensor<?xi32>
// CHECK: %[[Y:.+]] = llm.rope %[[X]], %[[POS]] heads = 2, head_dim = 16, theta = 5.000000e+05, style = interleaved : tensor<?x32xf16>, tensor<?xi32>
// CHECK: return %[[Y]]
func.func @rope_interleaved(%x: tensor<?x32xf16>, %pos: tensor<?xi32>) -> tensor<?x32xf16> {
  %y = llm.rope %x, %pos heads = 2, head_dim = 16, theta = 5.0e5, style = interleaved
      : tensor<?x32xf16>, tensor<?xi32>
  return %y : tensor<?x32xf16>
}

// -----

// CHECK-LABEL: func.func @rope_llama3_scaling(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK-SAME: %[[POS:[^:]+]]: tensor<?xi32>
// CHECK: %[[Y:.+]] = llm.rope %[[X]], %[[POS]] heads = 4, head_dim = 16, theta = 5.000000e+05, scaling = #llm.rope_scaling<llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position = 8192>, style = interleaved : tensor<?x64xf32>, tensor<?xi32>
// CHECK: return %[[Y]]
func.func @rope_llama3_scaling(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 5.0e5,
      scaling = #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
                                  high_freq_factor = 4.0, original_max_position = 8192>,
      style = interleaved : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}

// -----

// CHECK-LABEL: func.func @rope_linear_scaling(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xbf16>
// CHECK-SAME: %[[POS:[^:]+]]: tensor<?xi32>
// CHECK: %[[Y:.+]] = llm.rope %[[X]], %[[POS]] heads = 4, head_dim = 16, theta = 1.000000e+04, scaling = #llm.rope_scaling<linear, factor = 2.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 1.000000e+00, original_max_position = 2048>, style = half {llmc.note = "x"} : tensor<?x64xbf16>, tensor<?xi32>
// CHECK: return %[[Y]]
func.func @rope_linear_scaling(%x: tensor<?x64xbf16>, %pos: tensor<?xi32>) -> tensor<?x64xbf16> {
  %y = llm.rope %x, %pos heads = 4, head_dim = 16, theta = 1.0e4,
      scaling = #llm.rope_scaling<linear, factor = 2.0, low_freq_factor = 1.0,
                                  high_freq_factor = 1.0, original_max_position = 2048>,
      style = half {llmc.note = "x"} : tensor<?x64xbf16>, tensor<?xi32>
  return %y : tensor<?x64xbf16>
}

// -----

// CHECK-LABEL: func.func @gelu_erf(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x256xf32>
// CHECK: %[[Y:.+]] = llm.gelu %[[X]] approx = erf : tensor<?x256xf32>
// CHECK: return %[[Y]]
func.func @gelu_erf(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %y = llm.gelu %x approx = erf : tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}

// -----

// CHECK-LABEL: func.func @gelu_tanh(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x256xf16>
// CHECK: %[[Y:.+]] = llm.gelu %[[X]] approx = tanh : tensor<?x256xf16>
// CHECK: return %[[Y]]
func.func @gelu_tanh(%x: tensor<?x256xf16>) -> tensor<?x256xf16> {
  %y = llm.gelu %x approx = tanh : tensor<?x256xf16>
  return %y : tensor<?x256xf16>
}

// -----

// CHECK-LABEL: func.func @all_reduce_sum(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK: %[[Y:.+]] = llm.all_reduce sum %[[X]] ranks = 2 : tensor<?x64xf32>
// CHECK: return %[[Y]]
func.func @all_reduce_sum(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = llm.all_reduce sum %x ranks = 2 : tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// CHECK-LABEL: func.func @all_reduce_max(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xbf16>
// CHECK: %[[Y:.+]] = llm.all_reduce max %[[X]] ranks = 8 : tensor<?x64xbf16>
// CHECK: return %[[Y]]
func.func @all_reduce_max(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %y = llm.all_reduce max %x ranks = 8 : tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// -----

// CHECK-LABEL: func.func @rope_freq_factors(
// CHECK-SAME: %[[X:[^:]+]]: tensor<?x64xf32>
// CHECK-SAME: %[[POS:[^:]+]]: tensor<?xi32>
// CHECK-SAME: %[[F:[^:]+]]: !llm.weight<8, f32>
// CHECK: llm.rope %[[X]], %[[POS]] freq_factors(%[[F]] : !llm.weight<8, f32>) heads = 4, head_dim = 16, theta = 5.000000e+05, style = interleaved : tensor<?x64xf32>, tensor<?xi32>
func.func @rope_freq_factors(%x: tensor<?x64xf32>, %pos: tensor<?xi32>, %f: !llm.weight<8, f32>) -> tensor<?x64xf32> {
  %y = llm.rope %x, %pos freq_factors(%f : !llm.weight<8, f32>) heads = 4, head_dim = 16, theta = 5.0e5,
      style = interleaved : tensor<?x64xf32>, tensor<?xi32>
  return %y : tensor<?x64xf32>
}
