// Bad options are errors that say what is allowed.
//
// RUN: not llmc-opt %s --llmc-quantize="mode=w3a16" 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: error: llmc-quantize: mode must be none, w8a16 or w4a16, got 'w3a16'
// RUN: not llmc-opt %s --llmc-quantize="mode=w4a16 group=48" 2>&1 | FileCheck %s --check-prefix=GROUP
// GROUP: error: llmc-quantize: group must be 32, 64 or 128, got 48

func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "w" : !llm.weight<64x64, f32>
  %y = llm.linear %x, %w : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
