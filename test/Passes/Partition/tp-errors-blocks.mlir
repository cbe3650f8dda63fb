// --llmc-partition-tp keeps quantization blocks whole: a row-parallel slice
// of 128 input features would cut q4_k's 256-element blocks.
//
// RUN: llmc-opt %s --verify-diagnostics --llmc-partition-tp="tp=2"

func.func @step(%x: tensor<?x256xf32>) -> tensor<?x256xf32> {
  %uw = llm.weight "up" : !llm.weight<256x256, q4_k>
  %u = llm.linear %x, %uw : tensor<?x256xf32>, !llm.weight<256x256, q4_k> -> tensor<?x256xf32>
  %s = llm.gelu %u approx = tanh : tensor<?x256xf32>
  %dw = llm.weight "down" : !llm.weight<256x256, q4_k>
  // expected-error @+1 {{partition: cannot split weight 'down' ('!llm.weight<256x256, q4_k>') along dimension 1 into 2 pieces: a slice of 128 elements would cut a q4_k block of 256}}
  %d = llm.linear %s, %dw : tensor<?x256xf32>, !llm.weight<256x256, q4_k> -> tensor<?x256xf32>
  return %d : tensor<?x256xf32>
}
