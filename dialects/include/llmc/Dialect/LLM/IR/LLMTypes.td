//===- LLMTypes.td - types of the llm dialect ---------------*- tablegen -*-===//
#ifndef LLMC_DIALECT_LLM_TYPES_TD
#define LLMC_DIALECT_LLM_TYPES_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"
include "llmc/Dialect/LLM/IR/LLMBase.td"
include "llmc/Dialect/LLM/IR/LLMEnums.td"

class LLM_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<LLM_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def LLM_WeightType : LLM_Type<"Weight", "weight"> {
  let summary = "a named weight of the weight store, with its storage format";
  let description = [{
    The shape is the logical (dequantized) shape, outermost first; for a
    projection it is `[out_features, in_features]` as in Hugging Face
    checkpoints. The format says how the bytes are stored:

    - `f32`, `f16`, `bf16`: plain floats;
    - `i8`, `i4` with `group = 32|64|128`: llmc's group-wise integers made by
      the quantize pass (symmetric int8; asymmetric int4 with zero points);
    - `q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`, `q2_k` ... `q6_k`: GGUF blocks,
      kept quantized. The innermost dimension must hold whole blocks (32
      elements, or 256 for the k-quants).

    ```mlir
    !llm.weight<576x576, q4_1>
    !llm.weight<1536x576, i4, group = 128>
    ```
  }];
  let parameters = (ins
    ArrayRefParameter<"int64_t", "logical shape">:$shape,
    EnumParameter<LLM_WeightFormat>:$format,
    DefaultValuedParameter<"int64_t", "0", "quantization group size">:$group
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getShape().size(); }
    int64_t getNumElements() const;
    // Bytes the weight takes in its storage format.
    int64_t getByteSize() const;
    bool isQuantized() const;
  }];
}

def LLM_KVCacheType : LLM_Type<"KVCache", "kv_cache"> {
  let summary = "one layer's paged key/value cache";
  let description = [{
    Keys and values of one layer, stored as
    `[num_blocks, block_size, kv_heads, head_dim]` each. The block count and
    the block size are chosen by the runtime, so they are not part of the type.

    ```mlir
    !llm.kv_cache<kv_heads = 3, head_dim = 64, f32>
    ```
  }];
  let parameters = (ins
    "int64_t":$kvHeads,
    "int64_t":$headDim,
    "::mlir::Type":$elementType
  );
  let assemblyFormat = [{
    `<` `kv_heads` `=` $kvHeads `,` `head_dim` `=` $headDim `,` $elementType `>`
  }];
  let genVerifyDecl = 1;
}

#endif // LLMC_DIALECT_LLM_TYPES_TD
