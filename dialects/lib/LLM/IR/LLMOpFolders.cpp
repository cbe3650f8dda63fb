//===- LLMOpFolders.cpp - folders of the llm dialect's ops ----------------===//
#include "llmc/Dialect/LLM/IR/LLMOps.h"

using namespace mlir;
using namespace llmc::llm;

// A split into a single part is the identity.
LogicalResult SplitOp::fold(FoldAdaptor, SmallVectorImpl<OpFoldResult> &results) {
  if (getNumResults() != 1)
    return failure();
  results.push_back(getInput());
  return success();
}
