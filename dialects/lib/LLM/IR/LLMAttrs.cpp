//===- LLMAttrs.cpp - enums and attributes of the llm dialect -------------===//
#include "llmc/Dialect/LLM/IR/LLMDialect.h"
#include "llmc/Dialect/LLM/IR/LLMTypes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace llmc::llm;

#include "llmc/Dialect/LLM/IR/LLMEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "llmc/Dialect/LLM/IR/LLMAttrs.cpp.inc"

void LLMDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "llmc/Dialect/LLM/IR/LLMAttrs.cpp.inc"
      >();
}

LogicalResult RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      RopeScalingKind kind, FloatAttr factor,
                                      FloatAttr lowFreqFactor, FloatAttr highFreqFactor,
                                      int64_t originalMaxPosition) {
  if (!(factor.getValueAsDouble() > 0))
    return emitError() << "rope_scaling factor must be positive, got "
                       << factor.getValueAsDouble();
  if (originalMaxPosition <= 0)
    return emitError() << "rope_scaling original_max_position must be positive, got "
                       << originalMaxPosition;
  if (kind == RopeScalingKind::llama3) {
    double low = lowFreqFactor.getValueAsDouble(), high = highFreqFactor.getValueAsDouble();
    if (!(low > 0) || !(high > low))
      return emitError() << "llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor, got "
                         << low << " and " << high;
  }
  return success();
}
