// --llmc-partition-tp refuses what it cannot split, naming the op and why.
//
// RUN: llmc-opt %s --split-input-file --verify-diagnostics --llmc-partition-tp="tp=3"

// 4 query heads over 3 ranks.
func.func @step(%x: tensor<?x64xf32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>, %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x64xf32> {
  %qw = llm.weight "q" : !llm.weight<64x64, f32>
  %q = llm.linear %x, %qw : tensor<?x64xf32>, !llm.weight<64x64, f32> -> tensor<?x64xf32>
  %kw = llm.weight "k" : !llm.weight<32x64, f32>
  %k = llm.linear %x, %kw : tensor<?x64xf32>, !llm.weight<32x64, f32> -> tensor<?x32xf32>
  // expected-error @+1 {{llmc-partition-tp: 4 query heads do not split over 3 ranks (tp must divide the number of heads)}}
  %a = llm.paged_attention %q, %k, %k into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %a : tensor<?x64xf32>
}

// -----

// 6 query heads split 3 ways, but 2 KV heads can be neither split over nor
// replicated across 3 ranks.
func.func @step(%x: tensor<?x96xf32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>, %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>, %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>) -> tensor<?x96xf32> {
  %qw = llm.weight "q" : !llm.weight<96x96, f32>
  %q = llm.linear %x, %qw : tensor<?x96xf32>, !llm.weight<96x96, f32> -> tensor<?x96xf32>
  %kw = llm.weight "k" : !llm.weight<32x96, f32>
  %k = llm.linear %x, %kw : tensor<?x96xf32>, !llm.weight<32x96, f32> -> tensor<?x32xf32>
  // expected-error @+1 {{llmc-partition-tp: 2 KV heads can be neither split over nor replicated across 3 ranks (one must divide the other)}}
  %a = llm.paged_attention %q, %k, %k into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 6, kv_heads = 2, head_dim = 16, scale = 2.500000e-01 : tensor<?x96xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x96xf32>
  return %a : tensor<?x96xf32>
}

// -----

// A bias on a row-parallel projection would be added on every rank.
func.func @step(%x: tensor<?x96xf32>) -> tensor<?x96xf32> {
  %uw = llm.weight "up" : !llm.weight<96x96, f32>
  %u = llm.linear %x, %uw : tensor<?x96xf32>, !llm.weight<96x96, f32> -> tensor<?x96xf32>
  %s = llm.silu %u : tensor<?x96xf32>
  %dw = llm.weight "down" : !llm.weight<96x96, f32>
  %db = llm.weight "down.bias" : !llm.weight<96, f32>
  // expected-error @+1 {{llmc-partition-tp: a row-parallel projection with a bias is not supported}}
  %d = llm.linear %s, %dw bias %db : tensor<?x96xf32>, !llm.weight<96x96, f32>, !llm.weight<96, f32> -> tensor<?x96xf32>
  return %d : tensor<?x96xf32>
}
