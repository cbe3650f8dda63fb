//===- LLMBase.td - the llm dialect -------------------------*- tablegen -*-===//
//
// The `llm` dialect describes a decoder-only transformer at the level a model
// author thinks in: embeddings, norms, projections, RoPE, paged attention,
// elementwise activations and the collectives of partitioned models.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_DIALECT_LLM_BASE_TD
#define LLMC_DIALECT_LLM_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def LLM_Dialect : Dialect {
  let name = "llm";
  let cppNamespace = "::llmc::llm";
  let summary = "Transformer-level operations compiled by llmc";
  let description = [{
    A model is one function, `@step`, that the runtime executes once per
    scheduler iteration over a flattened, ragged batch of tokens: prefill
    chunks and decode tokens of many sequences share one launch sequence.
    Activations are ranked tensors whose leading dimension is the dynamic
    token count `T`; every other dimension is a compile-time constant.

    Weights are never SSA constants: `llm.weight` names an entry of the weight
    store (mmap'd from the model files), and its `!llm.weight` type carries the
    shape and the storage format (plain float, llmc's group-wise integers, or
    a GGUF block format), so IR dumps stay small and passes such as quantize
    rewrite the store and the types together.

    The KV cache of each layer is a `!llm.kv_cache` argument of `@step`, owned
    by the runtime; `llm.paged_attention` reads and appends to it through
    per-sequence block tables.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();
  }];
}

class LLM_Op<string mnemonic, list<Trait> traits = []>
    : Op<LLM_Dialect, mnemonic, traits>;

#endif // LLMC_DIALECT_LLM_BASE_TD
