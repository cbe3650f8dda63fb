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

#endif // LLMC_DIALECT_LLM_ATTRS_TD
