// Diagnostics of the llm dialect's verifiers (LLMOps.cpp) for
// llm.paged_attention and the collectives (llm.all_reduce, llm.all_gather,
// llm.send, llm.recv). With invalid-types.mlir and invalid-layers.mlir: every
// diagnostic of the llm dialect's verifiers, once each at least.
//
// (--allow-unregistered-dialect: the RUN line of all three files; only
// invalid-layers.mlir's @fusion_no_yield needs it.)
//
// RUN: llmc-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect

//===----------------------------------------------------------------------===//
// llm.paged_attention
//===----------------------------------------------------------------------===//

func.func @attention_heads(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                           %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                           %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op heads and kv_heads must be positive, got 0 and 2}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 0, kv_heads = 2, head_dim = 16, scale = 0.25 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}

// -----

func.func @attention_softcap(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                             %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                             %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op softcap must be positive, got 0}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 softcap = 0.0 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
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

// -----

func.func @attention_negative_window(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                                     %c: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, %slots: tensor<?xi32>,
                                     %starts: tensor<?xi32>, %lens: tensor<?xi32>, %tables: tensor<?x?xi32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'llm.paged_attention' op window must be positive, got -5}}
  %o = llm.paged_attention %q, %k, %v into %c slots(%slots) seqs(%starts, %lens, %tables) heads = 4, kv_heads = 2, head_dim = 16, scale = 0.25 window = -5 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32> -> tensor<?x64xf32>
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
  // expected-error @+1 {{'llm.all_gather' op result dimension 1 is 64, expected more than 64 and at most 128 (2 shards of 64)}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @all_gather_other_dim(%x: tensor<4x64xf32>) -> tensor<8x128xf32> {
  // expected-error @+1 {{'llm.all_gather' op result dimension 0 is 8, expected 4}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<4x64xf32> -> tensor<8x128xf32>
  return %y : tensor<8x128xf32>
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

func.func @all_gather_too_wide(%x: tensor<?x151xf32>) -> tensor<?x303xf32> {
  // expected-error @+1 {{'llm.all_gather' op result dimension 1 is 303, expected more than 151 and at most 302 (2 shards of 151)}}
  %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x151xf32> -> tensor<?x303xf32>
  return %y : tensor<?x303xf32>
}

// -----

func.func @shard_uneven_ranks() {
  // expected-error @+1 {{shard: 4 ranks cannot share 3 pieces evenly (ranks must be a multiple of pieces)}}
  %w = llm.weight "w" shard <dim = 0, pieces = 3, ranks = 4> : !llm.weight<16x64, f32>
  return
}

// -----

func.func @shard_dim_out_of_range() {
  // expected-error @+1 {{'llm.weight' op shard dim 1 is out of range for a weight of rank 1}}
  %w = llm.weight "w" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64, f32>
  return
}
