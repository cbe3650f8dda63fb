//===- LLMOps.td - operations of the llm dialect ------------*- tablegen -*-===//
#ifndef LLMC_DIALECT_LLM_OPS_TD
#define LLMC_DIALECT_LLM_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "llmc/Dialect/LLM/IR/LLMBase.td"
include "llmc/Dialect/LLM/IR/LLMEnums.td"
include "llmc/Dialect/LLM/IR/LLMAttrs.td"
include "llmc/Dialect/LLM/IR/LLMTypes.td"

// Activations are [tokens, features] with a dynamic token count.
def LLM_Activation : 2DTensorOf<[F32, F16, BF16]>;
def LLM_Logits : 2DTensorOf<[F32]>;
def LLM_IndexVector : 1DTensorOf<[I32]>;
def LLM_IndexMatrix : 2DTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Weights and embeddings
//===----------------------------------------------------------------------===//

def LLM_WeightOp : LLM_Op<"weight", [Pure]> {
  let summary = "reference a named weight of the weight store";
  let description = [{
    Yields a handle to the weight called `name` in the model's weight store
    (a tensor of the Hugging Face checkpoint or the GGUF file, possibly
    repacked by passes). The weight's data never appears in the IR.

    ```mlir
    %w = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<576x1536, q4_1>
    ```

    Passes derive new weights from stored ones without copying data into the
    IR; the weight store materializes them when the artifact is packed:

    - `concat [...]`: the rows of the named stored weights, one after the
      other (the fuse pass merges sibling projections this way). `name` is
      then a new name for the result; with one part, a second name for one
      stored tensor (the tensor-parallel pass slices a tied embedding for
      the LM head under the name `lm_head.weight`).
    - `rows [b0, e0, b1, e1, ...]`: with `concat`, part i contributes only
      its rows b_i..e_i (end exclusive): the frontend reads a weight that a
      checkpoint stores inside a fused tensor this way (Phi-3's Q, K and V
      inside `attn_qkv`, its gate and up inside `ffn_up`), and merging such
      slices back gives one part per slice.
    - `from "fmt"`: the stored tensor is in format `fmt` and is converted into
      the result's format (the quantize pass sets it, e.g. bf16 to i4).
    - `plus c`: every element plus `c` (the frontend sets it for Gemma's
      Hugging Face checkpoints, which store each RMS norm's weight minus 1).

    - `shard <...>`: one rank's slice of each stored tensor (before `concat`
      joins them), as `#llm.shard` describes; the type is the slice's shape.
      The tensor-parallel partition pass sets it, and the artifact holds each
      rank's slices in its own weight file.

    ```mlir
    %qkv = llm.weight "blk.0.attn_qkv.weight" concat ["blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"] : !llm.weight<960x576, q4_1>
    %k = llm.weight "blk.0.attn_qkv.weight.k" concat ["blk.0.attn_qkv.weight"] rows [3072, 4096] : !llm.weight<1024x3072, q4_k>
    %d = llm.weight "model.layers.0.mlp.down_proj.weight" from "bf16" : !llm.weight<576x1536, i4, group = 128>
    %o = llm.weight "model.layers.0.self_attn.o_proj.weight" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<576x288, q4_1>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrArrayAttr>:$parts,
                       OptionalAttr<DenseI64ArrayAttr>:$rows,
                       OptionalAttr<StrAttr>:$from, OptionalAttr<LLM_ShardAttr>:$shard,
                       OptionalAttr<F64Attr>:$offset);
  let results = (outs LLM_WeightType:$result);
  let assemblyFormat = [{
    $name (`concat` $parts^)? (`rows` $rows^)? (`from` $from^)? (`plus` $offset^)? (`shard` $shard^)? attr-dict `:` qualified(type($result))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Type":$type, "::llvm::StringRef":$name), [{
      build($_builder, $_state, type, name, /*parts=*/nullptr, /*rows=*/nullptr,
            /*from=*/nullptr, /*shard=*/nullptr, /*offset=*/nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

def LLM_EmbedOp : LLM_Op<"embed", [Pure]> {
  let summary = "gather rows of an embedding table";
  let description = [{
    `result[t, :] = table[tokens[t], :]`, dequantized to the result type;
    with `scale`, times `scale` (Gemma scales by sqrt(hidden_size), leaving
    the table, which its LM head shares, as it is).

    ```mlir
    %h = llm.embed %tokens, %table : tensor<?xi32>, !llm.weight<49152x576, q8_0> -> tensor<?x576xf32>
    %g = llm.embed %tokens, %table scale = 4.8e+01 : tensor<?xi32>, !llm.weight<262144x2304, q8_0> -> tensor<?x2304xf32>
    ```
  }];
  let arguments = (ins LLM_IndexVector:$tokens, LLM_WeightType:$table,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $tokens `,` $table (`scale` `=` $scale^)? attr-dict `:` type($tokens) `,` qualified(type($table))
    `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def LLM_RMSNormOp : LLM_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "root-mean-square normalization over the feature dimension";
  let description = [{
    `result = input / sqrt(mean(input^2) + eps) * weight`, per token, with the
    mean taken in f32.

    With `head_dim`, each head of the row (each `head_dim` features in
    order) is normalized on its own, with one weight of `head_dim` for all
    heads: the per-head norm of Q and K that Qwen3 and Gemma 3 apply between
    the projection and RoPE.

    ```mlir
    %y = llm.rms_norm %x, %w eps = 1.0e-05 : tensor<?x576xf32>, !llm.weight<576, f32>
    %qn = llm.rms_norm %q, %wq eps = 1.0e-06 head_dim = 128
        : tensor<?x2048xbf16>, !llm.weight<128, f32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_WeightType:$weight, F64Attr:$epsilon,
                       OptionalAttr<I64Attr>:$head_dim);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` `=` $epsilon (`head_dim` `=` $head_dim^)? attr-dict `:`
    type($input) `,` qualified(type($weight))
  }];
  let builders = [
    // A norm over whole rows.
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$weight,
                   "::mlir::FloatAttr":$epsilon), [{
      build($_builder, $_state, input, weight, epsilon, ::mlir::IntegerAttr());
    }]>
  ];
  let extraClassDeclaration = [{
    // The width of one normalized span: head_dim, or the whole row.
    int64_t getSpan();
  }];
  let hasVerifier = 1;
}

def LLM_LayerNormOp : LLM_Op<"layer_norm",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalization over the feature dimension";
  let description = [{
    `result = (input - mean) / sqrt(var + eps) * weight + bias`, per token.

    ```mlir
    %y = llm.layer_norm %x, %w, %b eps = 1.0e-05
        : tensor<?x768xf32>, !llm.weight<768, f32>, !llm.weight<768, f32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_WeightType:$weight,
                       Optional<LLM_WeightType>:$bias, F64Attr:$epsilon);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `eps` `=` $epsilon attr-dict `:` type($input) `,`
    qualified(type($weight)) (`,` qualified(type($bias))^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

def LLM_LinearOp : LLM_Op<"linear", [Pure]> {
  let summary = "y = x W^T (+ b) with a named, possibly quantized weight";
  let description = [{
    The weight is `[out_features, in_features]` in any storage format; the
    kernel dequantizes on the fly and accumulates in f32.

    ```mlir
    %q = llm.linear %x, %wq bias %bq : tensor<?x896xf32>, !llm.weight<896x896, bf16>,
        !llm.weight<896, bf16> -> tensor<?x896xf32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_WeightType:$weight,
                       Optional<LLM_WeightType>:$bias);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` type($input) `,`
    qualified(type($weight)) (`,` qualified(type($bias))^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def LLM_MoEOp : LLM_Op<"moe", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "a mixture of SwiGLU experts: each token's top-k, weighted";
  let description = [{
    Per token `x`: router logits `r = R x` (`router`: `[experts, hidden]`,
    f32, f16 or bf16), probabilities `p = softmax(r)` over all experts, the
    `top_k` experts of highest `p` (the lower index first on ties), and

        result = sum_k w_k * down_k(silu(gate_k x) * up_k x)

    with `w_k = p_k`, divided by their sum when `norm_topk_prob` is set
    (Mixtral, Qwen3-MoE; softmax over the chosen logits alone is the same
    thing). Each projection's experts are stacked row after row: `gate` and
    `up` are `[experts * I, hidden]` (expert e's rows from `e * I`), `down`
    `[experts * hidden, I]`, in any storage format (GGUF's quantized
    `ffn_*_exps` stay as they are). A token's result depends on its own
    route only, whatever else the step holds.

    ```mlir
    %y = llm.moe %x, %router, %gate, %up, %down experts = 8 top_k = 2 norm_topk_prob
        : tensor<?x64xf32>, !llm.weight<8x64, f32>, !llm.weight<256x64, q8_0>,
          !llm.weight<256x64, q8_0>, !llm.weight<512x32, q8_0>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_WeightType:$router, LLM_WeightType:$gate,
                       LLM_WeightType:$up, LLM_WeightType:$down, I64Attr:$experts,
                       I64Attr:$top_k, UnitAttr:$norm_topk_prob);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $input `,` $router `,` $gate `,` $up `,` $down `experts` `=` $experts `top_k` `=` $top_k
    (`norm_topk_prob` $norm_topk_prob^)? attr-dict `:` type($input) `,`
    qualified(type($router)) `,` qualified(type($gate)) `,` qualified(type($up)) `,`
    qualified(type($down))
  }];
  let extraClassDeclaration = [{
    // Each expert's intermediate width (I).
    int64_t getExpertWidth();
  }];
  let hasVerifier = 1;
}

def LLM_LMHeadOp : LLM_Op<"lm_head", [Pure]> {
  let summary = "logits of the selected token rows";
  let description = [{
    Projects the rows of `input` listed in `rows` (the tokens that need a
    next-token distribution, usually the last of each sequence) onto the
    vocabulary: `logits[i, :] = input[rows[i], :] W^T`, in f32. With
    `softcap`, each logit x becomes `softcap * tanh(x / softcap)` (Gemma 2's
    final_logit_softcapping).

    ```mlir
    %logits = llm.lm_head %h[%rows], %w : tensor<?x576xf32>, tensor<?xi32>,
        !llm.weight<49152x576, q8_0> -> tensor<?x49152xf32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_IndexVector:$rows, LLM_WeightType:$weight,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_Logits:$logits);
  let assemblyFormat = [{
    $input `[` $rows `]` `,` $weight (`softcap` `=` $softcap^)? attr-dict `:` type($input) `,`
    type($rows) `,` qualified(type($weight)) `->` type($logits)
  }];
  let hasVerifier = 1;
}

def LLM_SplitOp : LLM_Op<"split", [Pure]> {
  let summary = "split the feature dimension into consecutive parts";
  let description = [{
    The inverse of merging sibling projections: the output of a fused QKV
    projection splits back into Q, K and V.

    ```mlir
    %q, %k, %v = llm.split %qkv : tensor<?x960xf32> -> tensor<?x576xf32>, tensor<?x192xf32>, tensor<?x192xf32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input);
  let results = (outs Variadic<LLM_Activation>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def LLM_RopeOp : LLM_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding of each head";
  let description = [{
    Rotates each `head_dim`-wide head of every token by angles
    `positions[t] * theta^(-2i/head_dim)`, with an optional frequency scaling:
    either `scaling` (parameters, as in Hugging Face configs) or
    `freq_factors`, a weight of `head_dim / 2` factors that divide the
    frequencies pair by pair (as llama.cpp stores Llama 3.1's scaling).

    ```mlir
    %q2 = llm.rope %q, %pos heads = 9, head_dim = 64, theta = 1.0e+04, style = half
        : tensor<?x576xf32>, tensor<?xi32>
    %k2 = llm.rope %k, %pos heads = 8, head_dim = 128, theta = 5.0e+05,
        scaling = #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
                                    high_freq_factor = 4.0, original_max_position = 8192>,
        style = half : tensor<?x1024xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_IndexVector:$positions,
                       Optional<LLM_WeightType>:$freqFactors,
                       I64Attr:$heads, I64Attr:$headDim, F64Attr:$theta,
                       LLM_RopeStyle:$style,
                       OptionalAttr<LLM_RopeScalingAttr>:$scaling);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $input `,` $positions (`freq_factors` `(` $freqFactors^ `:` qualified(type($freqFactors)) `)`)?
    `heads` `=` $heads `,` `head_dim` `=` $headDim `,`
    `theta` `=` $theta `,` (`scaling` `=` qualified($scaling)^ `,`)? `style` `=` $style attr-dict
    `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def LLM_PagedAttentionOp : LLM_Op<"paged_attention"> {
  let summary = "causal multi-head attention over a paged KV cache";
  let description = [{
    For the flattened ragged batch of this step: writes each new token's key
    and value into `cache` at `slot_mapping[t]` (block * block_size + offset),
    then attends every query token to the keys of its own sequence up to and
    including its position, reading them through `block_tables`. Sequence `s`
    owns tokens `query_starts[s] .. query_starts[s+1]` and has `context_lens[s]`
    cached tokens after this step. Grouped-query attention: `heads` must be a
    multiple of `kv_heads`. With `window`, each query sees only the last
    `window` keys (sliding window attention). With `softcap`, each score
    s (after `scale`) becomes `softcap * tanh(s / softcap)` before the
    softmax (Gemma 2's attn_logit_softcapping).

    ```mlir
    %o = llm.paged_attention %q, %k, %v into %cache slots(%slots)
        seqs(%starts, %lens, %tables) heads = 9, kv_heads = 3, head_dim = 64,
        scale = 1.250000e-01 : tensor<?x576xf32>, tensor<?x192xf32>, tensor<?x192xf32>,
        !llm.kv_cache<kv_heads = 3, head_dim = 64, f32>, tensor<?xi32>, tensor<?xi32>,
        tensor<?xi32>, tensor<?x64xi32> -> tensor<?x576xf32>
    ```
  }];
  let arguments = (ins
    LLM_Activation:$query, LLM_Activation:$key, LLM_Activation:$value,
    Arg<LLM_KVCacheType, "this layer's cache", [MemRead, MemWrite]>:$cache,
    LLM_IndexVector:$slotMapping,
    LLM_IndexVector:$queryStarts, LLM_IndexVector:$contextLens,
    LLM_IndexMatrix:$blockTables,
    I64Attr:$heads, I64Attr:$kvHeads, I64Attr:$headDim, F64Attr:$scale,
    OptionalAttr<I64Attr>:$window, OptionalAttr<F64Attr>:$softcap);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `into` $cache `slots` `(` $slotMapping `)`
    `seqs` `(` $queryStarts `,` $contextLens `,` $blockTables `)`
    `heads` `=` $heads `,` `kv_heads` `=` $kvHeads `,` `head_dim` `=` $headDim `,`
    `scale` `=` $scale (`window` `=` $window^)? (`softcap` `=` $softcap^)? attr-dict
    `:` type($query) `,` type($key) `,` type($value) `,` qualified(type($cache)) `,`
    type($slotMapping) `,` type($queryStarts) `,` type($contextLens) `,`
    type($blockTables) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class LLM_UnaryOp<string mnemonic, list<Trait> traits = []>
    : LLM_Op<mnemonic, !listconcat(traits, [Pure, Elementwise, SameOperandsAndResultType])> {
  let arguments = (ins LLM_Activation:$input);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

class LLM_BinaryOp<string mnemonic, list<Trait> traits = []>
    : LLM_Op<mnemonic, !listconcat(traits, [Pure, Elementwise, SameOperandsAndResultType])> {
  let arguments = (ins LLM_Activation:$lhs, LLM_Activation:$rhs);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def LLM_SiLUOp : LLM_UnaryOp<"silu"> {
  let summary = "x * sigmoid(x)";
  let description = [{
    ```mlir
    %y = llm.silu %x : tensor<?x1536xf32>
    ```
  }];
}

def LLM_GELUOp : LLM_Op<"gelu", [Pure, Elementwise, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit, exact or tanh-approximated";
  let description = [{
    `erf`: `0.5 x (1 + erf(x / sqrt 2))`; `tanh`: the tanh approximation.

    ```mlir
    %y = llm.gelu %x approx = tanh : tensor<?x3072xf32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_GeluApprox:$approx);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = "$input `approx` `=` $approx attr-dict `:` type($result)";
}

def LLM_MulOp : LLM_BinaryOp<"mul", [Commutative]> {
  let summary = "elementwise product";
  let description = [{
    ```mlir
    %y = llm.mul %a, %b : tensor<?x1536xf32>
    ```
  }];
}

def LLM_AddOp : LLM_BinaryOp<"add", [Commutative]> {
  let summary = "elementwise sum (residual connections)";
  let description = [{
    ```mlir
    %y = llm.add %a, %b : tensor<?x576xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Collectives (tensor and pipeline parallelism). Not Pure: they communicate,
// so they are never erased, merged or reordered across each other.
//===----------------------------------------------------------------------===//

def LLM_AllReduceOp : LLM_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "reduce a tensor across the ranks of a tensor-parallel group";
  let description = [{
    ```mlir
    %y = llm.all_reduce sum %x ranks = 2 : tensor<?x576xf32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, LLM_ReduceKind:$kind, I64Attr:$ranks);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = "$kind $input `ranks` `=` $ranks attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def LLM_AllGatherOp : LLM_Op<"all_gather"> {
  let summary = "concatenate each rank's shard along a dimension";
  let description = [{
    The result keeps the first `size` entries of the concatenation along
    `dim`: shards padded to a common size (a vocabulary-parallel LM head over
    a vocabulary that the ranks do not divide) lose their padding here.

    ```mlir
    %y = llm.all_gather %x dim = 1 ranks = 2 : tensor<?x24576xf32> -> tensor<?x49152xf32>
    %l = llm.all_gather %p dim = 1 ranks = 2 : tensor<?x151xf32> -> tensor<?x301xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$dim, I64Attr:$ranks);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `dim` `=` $dim `ranks` `=` $ranks attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def LLM_SendOp : LLM_Op<"send"> {
  let summary = "send the hidden state to the next pipeline stage";
  let description = [{
    ```mlir
    llm.send %h to 1 : tensor<?x576xf32>
    ```
  }];
  let arguments = (ins LLM_Activation:$input, I64Attr:$peer);
  let assemblyFormat = "$input `to` $peer attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def LLM_RecvOp : LLM_Op<"recv"> {
  let summary = "receive the hidden state from the previous pipeline stage";
  let description = [{
    ```mlir
    %h = llm.recv from 0 : tensor<?x576xf32>
    ```
  }];
  let arguments = (ins I64Attr:$peer);
  let results = (outs LLM_Activation:$result);
  let assemblyFormat = "`from` $peer attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def LLM_FusionOp : LLM_Op<"fusion",
    [IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects]> {
  let summary = "a group of ops that codegen emits as one kernel";
  let description = [{
    The fuse pass gathers an anchor op (a projection, attention, a norm) with
    the elementwise producers and consumers it absorbs into its prologue and
    epilogue. The region is isolated from above: its block arguments are the
    group's inputs, `llm.yield` returns its outputs. `name` is the kernel's
    name in the artifact.

    ```mlir
    %y = llm.fusion "mlp_down" (%x, %r) : (tensor<?x1536xf32>, tensor<?x576xf32>) -> tensor<?x576xf32> {
    ^bb0(%a: tensor<?x1536xf32>, %b: tensor<?x576xf32>):
      %w = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<576x1536, f32>
      %p = llm.linear %a, %w : tensor<?x1536xf32>, !llm.weight<576x1536, f32> -> tensor<?x576xf32>
      %s = llm.add %p, %b : tensor<?x576xf32>
      llm.yield %s : tensor<?x576xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $name `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
}

def LLM_YieldOp : LLM_Op<"yield",
    [Pure, Terminator, ReturnLike, HasParent<"FusionOp">]> {
  let summary = "return the outputs of a fusion group";
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // LLMC_DIALECT_LLM_OPS_TD
