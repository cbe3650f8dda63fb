//===- LLMEnums.td - enums of the llm dialect ---------------*- tablegen -*-===//
#ifndef LLMC_DIALECT_LLM_ENUMS_TD
#define LLMC_DIALECT_LLM_ENUMS_TD

include "mlir/IR/EnumAttr.td"
include "llmc/Dialect/LLM/IR/LLMBase.td"

// Storage format of a weight. The names match llmc/core/weight_format.h,
// which holds block sizes and byte counts for the compiler and the runtime.
def LLM_WeightFormat : I32EnumAttr<"WeightFormat", "storage format of a weight", [
    I32EnumAttrCase<"f32", 0>,
    I32EnumAttrCase<"f16", 1>,
    I32EnumAttrCase<"bf16", 2>,
    // llmc group-wise formats (quantize pass): symmetric int8, asymmetric int4.
    I32EnumAttrCase<"i8", 3>,
    I32EnumAttrCase<"i4", 4>,
    // GGUF block formats, kept quantized.
    I32EnumAttrCase<"q8_0", 5>,
    I32EnumAttrCase<"q4_0", 6>,
    I32EnumAttrCase<"q4_1", 7>,
    I32EnumAttrCase<"q5_0", 8>,
    I32EnumAttrCase<"q5_1", 9>,
    I32EnumAttrCase<"q2_k", 10>,
    I32EnumAttrCase<"q3_k", 11>,
    I32EnumAttrCase<"q4_k", 12>,
    I32EnumAttrCase<"q5_k", 13>,
    I32EnumAttrCase<"q6_k", 14>]> {
  let cppNamespace = "::llmc::llm";
  let genSpecializedAttr = 0;
}

def LLM_RopeStyle : I32EnumAttr<"RopeStyle", "how RoPE pairs dimensions", [
    // (x[i], x[i + d/2]): Hugging Face's rotate_half.
    I32EnumAttrCase<"half", 0>,
    // (x[2i], x[2i + 1]): GGML's normal mode on GGUF Llama weights.
    I32EnumAttrCase<"interleaved", 1>]> {
  let cppNamespace = "::llmc::llm";
}

def LLM_RopeScalingKind : I32EnumAttr<"RopeScalingKind", "RoPE frequency scaling", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"linear", 1>,
    I32EnumAttrCase<"llama3", 2>]> {
  let cppNamespace = "::llmc::llm";
  let genSpecializedAttr = 0;
}

def LLM_GeluApprox : I32EnumAttr<"GeluApprox", "GELU formulation", [
    I32EnumAttrCase<"erf", 0>,
    I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::llmc::llm";
}

def LLM_ReduceKind : I32EnumAttr<"ReduceKind", "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>,
    I32EnumAttrCase<"max", 1>]> {
  let cppNamespace = "::llmc::llm";
}

#endif // LLMC_DIALECT_LLM_ENUMS_TD
