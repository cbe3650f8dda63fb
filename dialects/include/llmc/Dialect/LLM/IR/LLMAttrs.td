//===- LLMAttrs.td - attributes of the llm dialect ----------*- tablegen -*-===//
#ifndef LLMC_DIALECT_LLM_ATTRS_TD
#define LLMC_DIALECT_LLM_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "llmc/Dialect/LLM/IR/LLMBase.td"
include "llmc/Dialect/LLM/IR/LLMEnums.td"

class LLM_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<LLM_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def LLM_RopeScalingAttr : LLM_Attr<"RopeScaling", "rope_scaling"> {
  let summary = "RoPE frequency scaling (Hugging Face `rope_scaling`)";
  let description = [{
    `linear` divides every frequency by `factor`. `llama3` divides the low
    frequencies (wavelength above `original_max_position / low_freq_factor`)
    by `factor`, keeps the high ones (wavelength below
    `original_max_position / high_freq_factor`) and interpolates smoothly in
    between, as Llama 3.1 does.

    ```mlir
    #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
                      high_freq_factor = 4.0, original_max_position = 8192>
    ```
  }];
  let parameters = (ins
    EnumParameter<LLM_RopeScalingKind>:$kind,
    "::mlir::FloatAttr":$factor,
    "::mlir::FloatAttr":$lowFreqFactor,
    "::mlir::FloatAttr":$highFreqFactor,
    "int64_t":$originalMaxPosition
  );
  // Custom, so the factors print as plain numbers (FloatAttr parameters would
  // print with a `: f64` suffix).
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def LLM_ShardAttr : LLM_Attr<"Shard", "shard"> {
  let summary = "which slice of a stored weight one rank of a tensor-parallel group holds";
  let description = [{
    The stored tensor is cut along `dim` into `pieces` slices of equal size
    (`ceil(size / pieces)`; a last slice that comes up short is padded with
    zeros), and rank `r` of the `ranks`-way group holds slice
    `r * pieces / ranks`. `pieces == ranks` splits the tensor over the group
    (Megatron's column- and row-parallel weights, a vocabulary-parallel LM
    head); `pieces < ranks` replicates each slice on `ranks / pieces`
    consecutive ranks (the key and value heads of a GQA model with fewer KV
    heads than ranks).

    ```mlir
    #llm.shard<dim = 0, pieces = 2, ranks = 4>
    ```
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$pieces, "int64_t":$ranks);
  let assemblyFormat = [{
    `<` `dim` `=` $dim `,` `pieces` `=` $pieces `,` `ranks` `=` $ranks `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    // The slice rank `rank` holds.
    int64_t pieceOf(int64_t rank) const { return rank * getPieces() / getRanks(); }
    // Elements of one slice of a dimension of `size` elements.
    int64_t pieceSize(int64_t size) const { return (size + getPieces() - 1) / getPieces(); }
  }];
}

#endif // LLMC_DIALECT_LLM_ATTRS_TD
