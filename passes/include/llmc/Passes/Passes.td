//===- Passes.td - llmc passes ------------------------------*- tablegen -*-===//
//
// Every llmc pass, grouped under banners. Each is runnable alone in llmc-opt
// as `--llmc-<verb-noun>` and tested in test/Passes/<Group>/.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_PASSES_TD
#define LLMC_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Analysis and checking
//===----------------------------------------------------------------------===//

def VerifyStep : Pass<"llmc-verify-step", "::mlir::ModuleOp"> {
  let summary = "check that @step has the calling convention of the runtime";
  let description = [{
    The runtime calls `@step` with a fixed argument list (docs/architecture.md):

    | # | argument | type |
    |---|---|---|
    | 0 | tokens | `tensor<?xi32>` |
    | 1 | positions | `tensor<?xi32>` |
    | 2 | query_starts | `tensor<?xi32>` |
    | 3 | context_lens | `tensor<?xi32>` |
    | 4 | block_tables | `tensor<?x?xi32>` |
    | 5 | slot_mapping | `tensor<?xi32>` |
    | 6 | logits_rows | `tensor<?xi32>` |
    | 7.. | one cache per layer | `!llm.kv_cache<...>` |

    and it returns the logits, `tensor<?xVOCABxf32>`. This pass fails with a
    diagnostic naming the argument at fault when the function differs, and
    when a layer's cache is used by more than one attention op.

    ```mlir
    func.func @step(%tokens: tensor<?xi32>, %positions: tensor<?xi32>,
                    %query_starts: tensor<?xi32>, %context_lens: tensor<?xi32>,
                    %block_tables: tensor<?x?xi32>, %slot_mapping: tensor<?xi32>,
                    %logits_rows: tensor<?xi32>,
                    %cache0: !llm.kv_cache<kv_heads = 2, head_dim = 16, f32>)
        -> tensor<?x256xf32>
    ```
  }];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def PrintModelStats : Pass<"llmc-print-model-stats", "::mlir::ModuleOp"> {
  let summary = "print layers, heads, op counts and weight bytes per format";
  let description = [{
    An analysis for people and FileCheck: it leaves the IR unchanged and
    prints, for each function (normally just `@step`), the number of attention
    layers with their head counts, the number of each `llm` op, and the
    weights (counted once per name, so tied embeddings count once) grouped by
    storage format, e.g.

    ```
    model stats for @step
      layers: 30 (heads 9, kv_heads 3, head_dim 64)
      ops: llm.add 60, llm.embed 1, llm.linear 210, ...
      weights: 272 tensors, 134515008 parameters, 98103168 bytes
        f32: 61 tensors, 34560 parameters, 138240 bytes
        q4_1: 210 tensors, 106168320 parameters, 66355200 bytes
    ```
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "where to print the statistics ('-' for stdout)">
  ];
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

def Quantize : Pass<"llmc-quantize", "::mlir::ModuleOp"> {
  let summary = "weight-only group-wise quantization of float projection weights (w8a16, w4a16)";
  let description = [{
    Changes the storage format of float weights to llmc's group-wise integers,
    round-to-nearest per group of `group` consecutive input features:

    - `w8a16`: `i8`, symmetric: `y = q * s`, `q` in [-127, 127];
    - `w4a16`: `i4`, asymmetric: `y = (q - z) * s`, `q` in [0, 15], an integer
      zero point `z` per group (the range always includes 0, as GPTQ's RTN);
    - `none`: nothing changes.

    Scales (and zero points) are f16; activations stay f32. The byte layout is
    in `core/include/llmc/core/format/quantize.h`.

    Which weights: those read as the weight of `llm.linear` or `llm.lm_head`,
    or as the stacked experts of `llm.moe` (gate, up, down; not its router),
    stored as `f32`, `f16` or `bf16`. A weight that is also the table of an
    `llm.embed` (tied embeddings) is quantized for both: the embedding then
    reads the quantized table, as it does for GGUF files; skip `embed` or
    `lm_head` to keep it. Everything else keeps its format: norms, biases,
    untied embedding tables, and GGUF's block formats (`q4_1`, `q6_k`, ...),
    which are already quantized and which the host kernels read as they are
    stored (so no repacking is needed on the host target).

    The group is the one asked for when the weight's input width is a
    multiple of it; otherwise the largest of 64 and 32 that divides it (e.g.
    SmolLM2's width 576 takes group 64 under `group=128`), and a weight whose
    width is not a multiple of 32 keeps its format with a warning.

    `skip` keeps weights in their original precision: an entry matches a
    weight whose name contains it, and `lm_head` also matches whatever weight
    `llm.lm_head` reads (e.g. a tied `model.embed_tokens.weight`).

    The IR and the weight store change together: the op's result type gets
    the new format and the op gets `from "<old format>"`, which tells the
    weight store to convert the stored tensor when the artifact is packed
    (concatenated weights are converted part by part).

    ```mlir
    %w = llm.weight "model.layers.0.mlp.down_proj.weight" : !llm.weight<576x1536, bf16>
    // --llmc-quantize="mode=w4a16 group=128" makes it
    %w = llm.weight "model.layers.0.mlp.down_proj.weight" from "bf16" : !llm.weight<576x1536, i4, group = 128>
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"w4a16\"",
           "none, w8a16 (i8, symmetric) or w4a16 (i4, asymmetric)">,
    Option<"group", "group", "int64_t", /*default=*/"128",
           "input features per quantization group: 32, 64 or 128">,
    ListOption<"skip", "skip", "std::string",
               "weights kept in their precision (name substrings; lm_head: the lm_head's weight)">
  ];
  let statistics = [
    Statistic<"numQuantized", "quantized-weights", "weights converted to i8 or i4">,
    Statistic<"numSmallerGroup", "smaller-group", "weights given a smaller group than asked">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//
// Partitioning
//===----------------------------------------------------------------------===//

def PartitionPipeline : Pass<"llmc-partition-pp", "::mlir::ModuleOp"> {
  let summary = "keep one pipeline stage's layers in @step, with llm.send/llm.recv of the hidden state";
  let description = [{
    Pipeline parallelism: the layers are split into `stages` contiguous
    ranges, and @step keeps the ops of stage `stage` (the compiler runs the
    pipeline once per stage; each stage is a program of its own).

    - **Layers** are the `llm.paged_attention` ops, in order. The residual
      stream is the embedding's result followed by each `llm.add` that reads
      the stream's last value; layer `l`'s input is the last stream value
      before its attention, and a stage boundary falls there. The pass checks
      that the hidden state is the only activation crossing a boundary and
      fails, naming the op, when something else does.
    - **Balance:** without `layers`, stages are chosen to minimize the
      largest stage's weight bytes (the embedding counts on the first stage,
      the final norm and LM head on the last; a tied embedding on both).
      `layers=0-11,12-23` gives each stage's range instead.
    - **The cut:** every stage but the first starts with
      `%h = llm.recv from <stage - 1>`; every stage but the last ends with
      `llm.send %h to <stage + 1>` and @step returns nothing (only the last
      stage computes logits). The peers are pipeline stages: with tensor
      parallelism too, rank `r` of a stage talks to rank `r` of the next.
    - **Caches** of other stages' layers leave @step's signature; those kept
      keep their `llm.name` (`cacheN`, N the model's layer number).

    The module gets `llm.mesh = {pp = stages, stage = stage}`.

    ```mlir
    // stage 1 of 2 of a 2-layer model
    %h = llm.recv from 0 : tensor<?x64xf32>
    %n = llm.rms_norm %h, %w eps = 1.0e-05 : tensor<?x64xf32>, !llm.weight<64, f32>
    ...
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1", "pipeline stages">,
    Option<"stage", "stage", "int64_t", /*default=*/"0", "the stage whose layers @step keeps">,
    ListOption<"layers", "layers", "std::string",
               "each stage's layers, FIRST-LAST (default: balanced by weight bytes)">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def PartitionTensor : Pass<"llmc-partition-tp", "::mlir::ModuleOp"> {
  let summary = "split every layer over a tensor-parallel group (Megatron-style)";
  let description = [{
    Rewrites @step into the one program that each of the `tp` ranks of a
    tensor-parallel group runs; the ranks differ only in the weight slices
    they hold (`llm.weight ... shard <...>`, packed per rank in the
    artifact).

    - **Column-parallel** (output features split, no communication): a
      projection of a whole activation whose every use ends, through RoPE,
      SiLU, GELU and elementwise products, in an attention's query (split
      `tp` ways, by heads), key or value (split `min(kv_heads, tp)` ways: with
      fewer KV heads than ranks each KV head is replicated on `tp / kv_heads`
      ranks), or in the input of another projection. Q, K, V, gate and up, in
      a Llama layer; their biases are split with them.
    - **Row-parallel** (input features split): a projection of a split
      activation (o_proj, down). Each rank's product is a partial sum, so an
      `llm.all_reduce sum` follows it. A bias on a row-parallel projection is
      refused (it would be added `tp` times).
    - **Attention** keeps `heads / tp` query heads and its share of KV heads,
      and so does its cache (the @step argument's type changes).
    - **LM head:** vocabulary-parallel, the vocabulary cut in `tp` pieces of
      `ceil(vocab / tp)` rows (the last padded with zeros), then an
      `llm.all_gather` along the vocabulary that drops the padding.
    - **Replicated:** embeddings, norms, residual adds: every rank computes
      them on whole activations.

    Which projection is which follows from the dataflow, not from weight
    names. The pass fails, naming the op, when `tp` does not divide the query
    heads, when KV heads and `tp` divide neither way, when a projection's
    slice would cut a quantization block, and when a norm or an LM head would
    read a split activation. Fusion runs afterwards: the collectives are not
    fused, so they bound the groups.

    The module gets `llm.mesh = {tp = tp}`.

    ```mlir
    %w = llm.weight "model.layers.0.self_attn.o_proj.weight" shard <dim = 1, pieces = 2, ranks = 2> : !llm.weight<64x32, f32>
    %o = llm.linear %a, %w : tensor<?x32xf32>, !llm.weight<64x32, f32> -> tensor<?x64xf32>
    %r = llm.all_reduce sum %o ranks = 2 : tensor<?x64xf32>
    ```
  }];
  let options = [
    Option<"tp", "tp", "int64_t", /*default=*/"1", "ranks of the tensor-parallel group">
  ];
  let statistics = [
    Statistic<"numColumnParallel", "column-parallel", "projections split by output features">,
    Statistic<"numRowParallel", "row-parallel", "projections split by input features (+ all-reduce)">,
    Statistic<"numReplicatedKV", "replicated-kv", "attentions whose KV heads are replicated">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

//===----------------------------------------------------------------------===//

def Fuse : Pass<"llmc-fuse", "::mlir::ModuleOp"> {
  let summary = "merge sibling projections and gather GEMMs with their prologue and epilogue";
  let description = [{
    Two phases, each a general rule rather than a layer template:

    1. **Merge siblings.** Linears that read the same value with weights of
       one format, group and conversion (and the same bias kind) become one
       linear over a `concat` weight, followed by `llm.split`: Q, K and V
       into one GEMM, gate and up into another.
    2. **Form groups.** Each GEMM (`llm.linear`, `llm.lm_head`) is an anchor.
       Its prologue is the norm producing its input when all users of that
       norm are GEMMs (a shared norm is recomputed per GEMM), plus the
       elementwise ops producing the norm's input. Its epilogue is a split of
       its result, RoPE applied directly to a region, and elementwise ops
       whose other operands already exist (residual adds, SiLU·mul, GELU).
       An epilogue that combines two regions pairs their tiles; that needs
       equal widths and no RoPE. Leftover chains of elementwise ops form
       groups of their own. Attention and embeddings stay alone.

    Before, for one Llama layer's MLP:

    ```mlir
    %n = llm.rms_norm %h, %w eps = 1.0E-5 : tensor<?x576xf32>, !llm.weight<576, f32>
    %g = llm.linear %n, %wg : ... -> tensor<?x1536xf32>
    %u = llm.linear %n, %wu : ... -> tensor<?x1536xf32>
    %s = llm.silu %g : tensor<?x1536xf32>
    %m = llm.mul %s, %u : tensor<?x1536xf32>
    ```

    after (one kernel):

    ```mlir
    %m = llm.fusion "layers.0.mlp.rms_norm+linear+split+silu+mul_3" (%h) : ... {
    ^bb0(%a: tensor<?x576xf32>):
      %w = llm.weight "blk.0.ffn_norm.weight" : !llm.weight<576, f32>
      %gu = llm.weight "blk.0.ffn_{gate,up}.weight" concat ["blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"] : !llm.weight<3072x576, q4_1>
      %n = llm.rms_norm %a, %w eps = 1.0E-5 : ...
      %y = llm.linear %n, %gu : ... -> tensor<?x3072xf32>
      %g, %u = llm.split %y : tensor<?x3072xf32> -> tensor<?x1536xf32>, tensor<?x1536xf32>
      %s = llm.silu %g : tensor<?x1536xf32>
      %m = llm.mul %s, %u : tensor<?x1536xf32>
      llm.yield %m : tensor<?x1536xf32>
    }
    ```

    The host emitter turns such a group into one kernel: prologue rows once
    per token, the GEMM tile by tile, the epilogue on each tile. Ops nothing
    absorbs are left for llmc-outline-kernels.
  }];
  let options = [
    Option<"mergeSiblings", "merge-siblings", "bool", /*default=*/"true",
           "merge linears that share an input into one GEMM">,
    Option<"formGroups", "form-groups", "bool", /*default=*/"true",
           "form llm.fusion groups around GEMMs and elementwise chains">,
    Option<"prologueElementwise", "prologue-elementwise", "bool", /*default=*/"true",
           "absorb the elementwise producers of a GEMM's norm (a residual add) into its "
           "prologue; `llmc compile` turns it off for CUDA targets, whose GEMMs fold only the "
           "norm (after a tensor-parallel all-reduce the residual add lands there)">
  ];
  let statistics = [
    Statistic<"numMerged", "num-merged", "sibling projections merged">,
    Statistic<"numGroups", "num-groups", "fusion groups formed">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def OutlineKernels : Pass<"llmc-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "wrap every compute op of @step that no fusion group holds in its own llm.fusion";
  let description = [{
    Codegen emits one kernel per `llm.fusion` group. The fuse pass forms the
    multi-op groups; this pass gives every op left outside a group a group of
    its own, so that after it `@step` is a sequence of kernels. Weights used
    by an op are re-created inside its group (the region is isolated from
    above); the group is named after the op's location, e.g.
    `layers.0.attn.linear_3`.

    ```mlir
    %y = llm.silu %x : tensor<?x160xf32>
    // becomes
    %y = llm.fusion "layers.0.mlp.silu_7" (%x) : (tensor<?x160xf32>) -> tensor<?x160xf32> {
    ^bb0(%a: tensor<?x160xf32>):
      %0 = llm.silu %a : tensor<?x160xf32>
      llm.yield %0 : tensor<?x160xf32>
    }
    ```
  }];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def PlaceRope : Pass<"llmc-place-rope", "::mlir::ModuleOp"> {
  let summary = "move the RoPE of an attention's query and key into the attention's group";
  let description = [{
    Fusion leaves the RoPE of the query and the key in the epilogue of the
    QKV GEMM group. When the rotated values are read by nothing but one
    attention, the attention can rotate them itself while it writes the key
    to the KV cache: the CUDA target then needs one launch for RoPE and the
    cache write instead of three, and the host target rotates the query and
    key in place in the attention's kernel. This pass makes that decision in
    the IR, so both code generators read it instead of deciding on their own.

    A pair moves when each RoPE's result is yielded once by a group that holds
    a GEMM, is read only by that yield, and that group result is read only by
    one `llm.paged_attention` as its query or key; both RoPEs must have the
    attention's head dimension and the same style. Runs after
    llmc-outline-kernels (every op is in a group) and before
    llmc-plan-memory (the group results keep their shapes).

    Before:

    ```mlir
    %q, %k, %v = llm.fusion "layers.0.attn.qkv" (%h) : ... {
      ...
      %sq, %sk, %sv = llm.split %y : ...
      %rq = llm.rope %sq theta = 1.0E+4 heads = 9 head_dim = 64 style = half : ...
      %rk = llm.rope %sk theta = 1.0E+4 heads = 3 head_dim = 64 style = half : ...
      llm.yield %rq, %rk, %sv : ...
    }
    %o = llm.fusion "layers.0.attn.paged_attention" (%q, %k, %v, %cache) : ... {
    ^bb0(%aq: ..., %ak: ..., %av: ..., %c: ...):
      %a = llm.paged_attention %aq, %ak, %av, %c ... : ...
      llm.yield %a : ...
    }
    ```

    after:

    ```mlir
    %q, %k, %v = llm.fusion "layers.0.attn.qkv" (%h) : ... {
      ...
      %sq, %sk, %sv = llm.split %y : ...
      llm.yield %sq, %sk, %sv : ...
    }
    %o = llm.fusion "layers.0.attn.paged_attention" (%q, %k, %v, %cache) : ... {
    ^bb0(%aq: ..., %ak: ..., %av: ..., %c: ...):
      %rq = llm.rope %aq theta = 1.0E+4 heads = 9 head_dim = 64 style = half : ...
      %rk = llm.rope %ak theta = 1.0E+4 heads = 3 head_dim = 64 style = half : ...
      %a = llm.paged_attention %rq, %rk, %av, %c ... : ...
      llm.yield %a : ...
    }
    ```
  }];
  let statistics = [
    Statistic<"numMoved", "num-moved", "attentions that took over their query and key RoPE">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def SelectGemv : Pass<"llmc-select-gemv", "::mlir::ModuleOp"> {
  let summary = "choose the CUDA decode GEMV variant of every GEMM group";
  let description = [{
    A group anchored on `llm.linear` or `llm.lm_head` runs, for small token
    counts on the CUDA target, one of two GEMV kernels:

    - `dp4a`: int8 dot products of the GGUF blocks (q4_0, q4_1, q5_0, q5_1,
      q8_0, q4_k, q5_k, q6_k) with activations the kernel quantizes per 32
      elements; for 16-bit activations and K a multiple of the format's
      chunk (128 elements; q4_1 64, q5_1 32);
    - `fp`: weights decoded to float, f32 FMAs (every other format, f32
      activations, or `kind=fp`).

    The choice and its shape are an attribute of the group, `llmc.gemv`,
    which `--emit=kernels` and `--print-ir-after=llmc-select-gemv` show and
    the CUDA emitter follows (without it: `fp`):

    ```mlir
    %r = llm.fusion "layers.0.mlp.gate_up" (%h) {llmc.gemv = {kind = "dp4a",
        rows_per_warp = 4 : i64, warps = 8 : i64, max_tokens = 4 : i64,
        max_tokens_gemv = 4 : i64}} : ...
    ```

    rows_per_warp: weight rows one warp reduces at a time (a gate/up pair
    counts two); warps: per block; max_tokens: tokens per pass over the
    weights of the several-token entry (a single token has its own entry);
    max_tokens_gemv: the token count up to which the GEMV runs instead of
    the tensor-core GEMM (4: one pass of the several-token GEMV; past it
    the GEMV reads the weights once a pass, the GEMM once).
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"auto\"",
           "auto (dp4a where it applies) or fp (always the float GEMV)">,
    Option<"activationType", "activation-type", "std::string", /*default=*/"\"bf16\"",
           "the CUDA activations: bf16, f16 or f32 (f32: always fp)">,
  ];
  let statistics = [
    Statistic<"numDp4a", "num-dp4a", "GEMM groups given the dp4a GEMV">,
    Statistic<"numFp", "num-fp", "GEMM groups given the float GEMV">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def SelectAttention : Pass<"llmc-select-attention", "::mlir::ModuleOp"> {
  let summary = "choose the CUDA kernels of every paged-attention group";
  let description = [{
    A group holding `llm.paged_attention` runs on the CUDA target, for
    queries of up to 16 tokens (decode, short chunks), the split decode
    kernel in one of two forms, and past that the flash-attention prefill
    kernel where it applies:

    - `decode = "mma"`: the query heads of a kv head as the rows of
      `mma.sync` (paged_attention_decode_mma), with 16-bit activations,
      head_dim a multiple of 32 up to 128 and at most 16 query heads per kv
      head; `"ffma"` (paged_attention_decode) otherwise;
    - `prefill = "flash"`: paged_attention_prefill, `prefill_warps` warps
      of 16 query rows per block, with 16-bit activations and head_dim a
      multiple of 16 up to 128; `"none"` otherwise (the decode kernel then
      runs every step).

    ```mlir
    %a = llm.fusion "layers.0.attn.paged_attention" (...) {llmc.attention = {
        decode = "mma", prefill = "flash", prefill_warps = 8 : i64}} : ...
    ```

    The CUDA emitter follows the attribute (without it, the same rules);
    `--emit=kernels` and the kernel report's variants show it.
  }];
  let options = [
    Option<"activationType", "activation-type", "std::string", /*default=*/"\"bf16\"",
           "the CUDA activations: bf16, f16 or f32 (f32: FFMA decode, no prefill kernel)">,
  ];
  let statistics = [
    Statistic<"numMma", "num-mma", "attention groups given the tensor-core decode kernel">,
    Statistic<"numFfma", "num-ffma", "attention groups given the FFMA decode kernel">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

def SelectGemmTiles : Pass<"llmc-select-gemm-tiles", "::mlir::ModuleOp"> {
  let summary = "choose the tiles of the CUDA tensor-core GEMM of every GEMM group";
  let description = [{
    A group anchored on `llm.linear` or `llm.lm_head` runs, above
    `max_tokens_gemv` tokens with 16-bit activations, the tensor-core GEMM
    `gemm_mma` (llmc_cuda_gemm.cuh) with one of two tiles, each
    `[tokens, weight rows, warps along tokens, warps along rows, stages]`:

    - `small`, up to `large_from - 1` tokens (batched decode, short
      prompts): 64 tokens, weight rows halved from 128 (down to 64) until
      the weight tiles alone give every SM a block; and a sixth element,
      `splits`: where the weight tiles still give fewer than four blocks
      per SM, K is split across up to 8 blocks per tile (doubling while each
      keeps 16 or more 32-element steps), which meet in a deterministic
      reduction (the tile's last block adds the partials in split order);
    - `large`, from `large_from` tokens (prefill): 128 tokens x 128 rows,
      8 warps, 3 stages of 32 elements along K; 128 x 64, 4 warps, 4
      stages for weights of fewer than 64 x sms rows (a 4,096-row
      projection), so that 512 tokens still fill every SM twice.
      `large_from` is 129, or for K of 64 steps or more, the token count at
      which the large tile gives 1.5 blocks per SM (at most 513): it has no
      split of K, and below that it leaves SMs idle for the whole of K.

    ```mlir
    %r = llm.fusion "layers.0.attn.o" (%a, %h) {llmc.gemm = {
        large = array<i64: 128, 128, 2, 4, 3>, large_from = 129 : i64,
        small = array<i64: 64, 64, 2, 2, 4, 8>}} : ...
    ```

    With `wgmma` (every CUDA target sm_90a: `llmc compile --target=sm_90a`)
    the large tile's products run on Hopper's warpgroup MMA instead of
    mma.sync, marked `large_mma = "wgmma"`: two warpgroups of 64 token rows
    (warps_m 8, warps_n 1) by the same 128 or 64 weight rows, 3 or 4
    stages of the same ring, which is already wgmma's 64-byte-swizzle
    layout. mma.sync reaches about half to two thirds of Hopper's tensor
    rate, wgmma all of it (docs/cuda.md). Decoded weights' 128 x 64 tile
    keeps 4 warps, `[128, 64, 4, 1, 4]`: one warpgroup over both 64-row
    token blocks, so that q4_K keeps its step decoder (two threads a tile
    row; with 8 warps it would have one chunk a thread and none). The small
    tile runs on wgmma too, one warpgroup over its 64 tokens (`[64, N, 4,
    1, 4, splits]`, `small_mma = "wgmma"`).

    ```mlir
    llmc.gemm = {large = array<i64: 128, 128, 8, 1, 3>, large_from = 129 : i64,
                 large_mma = "wgmma", small = array<i64: 64, 128, 4, 1, 4, 1>,
                 small_mma = "wgmma"}
    ```

    The CUDA emitter follows the attribute (without it: these defaults for
    132 SMs); `--emit=kernels` and the kernel report show each launch's tile.
    f32 activations have no tensor-core GEMM: no attribute.
  }];
  let options = [
    Option<"activationType", "activation-type", "std::string", /*default=*/"\"bf16\"",
           "the CUDA activations: bf16, f16 or f32 (f32: no GEMM, no attribute)">,
    Option<"sms", "sms", "int64_t", /*default=*/"132",
           "streaming multiprocessors of the target GPU (H100/H200: 132)">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "every CUDA target is sm_90a: the large tile runs on Hopper's warpgroup MMA">,
  ];
  let statistics = [
    Statistic<"numGroups", "num-groups", "GEMM groups given tiles">
  ];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def PlanMemory : Pass<"llmc-plan-memory", "::mlir::ModuleOp"> {
  let summary = "assign activation buffers to kernel results, reusing them when lifetimes allow";
  let description = [{
    Runs after outlining. Every tensor produced by an `llm.fusion` group gets
    a buffer; a buffer is reused by a later value once every reader of its
    previous value has run. A buffer holds either one row per token of the
    step (`tokens`) or one row per requested logits row (`logits`), so its
    size is a function of the step; `row_bytes` is the widest row it holds.

    The plan is recorded as attributes: each group gets
    `llm.result_buffers = [i, ...]`, the module gets
    `llm.buffers = [{rows = "tokens", row_bytes = 2304, dtype = f32}, ...]`,
    and `@step` gets `llm.logits_buffer = i`.
  }];
  let dependentDialects = ["::llmc::llm::LLMDialect"];
}

#endif // LLMC_PASSES_TD
