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

// #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0,
//                   high_freq_factor = 4.0, original_max_position = 8192>
Attribute RopeScalingAttr::parse(AsmParser &parser, Type) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<RopeScalingKind> kind = symbolizeRopeScalingKind(kindName);
  if (!kind) {
    parser.emitError(loc) << "unknown rope_scaling kind '" << kindName
                          << "'; expected none, linear or llama3";
    return {};
  }
  double factor = 0, low = 0, high = 0;
  int64_t original = 0;
  auto parseNumber = [&](StringRef key, double &out) {
    return failure(parser.parseComma() || parser.parseKeyword(key) || parser.parseEqual() ||
                   parser.parseFloat(out));
  };
  if (failed(parseNumber("factor", factor)) || failed(parseNumber("low_freq_factor", low)) ||
      failed(parseNumber("high_freq_factor", high)) || parser.parseComma() ||
      parser.parseKeyword("original_max_position") || parser.parseEqual() ||
      parser.parseInteger(original) || parser.parseGreater())
    return {};
  MLIRContext *ctx = parser.getContext();
  auto f64 = [&](double v) { return FloatAttr::get(Float64Type::get(ctx), v); };
  return parser.getChecked<RopeScalingAttr>(loc, ctx, *kind, f64(factor), f64(low), f64(high),
                                            original);
}

void RopeScalingAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyRopeScalingKind(getKind()) << ", factor = ";
  printer.printFloat(getFactor().getValue());
  printer << ", low_freq_factor = ";
  printer.printFloat(getLowFreqFactor().getValue());
  printer << ", high_freq_factor = ";
  printer.printFloat(getHighFreqFactor().getValue());
  printer << ", original_max_position = " << getOriginalMaxPosition() << ">";
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

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t dim,
                                int64_t pieces, int64_t ranks) {
  if (dim < 0)
    return emitError() << "shard dim must be non-negative, got " << dim;
  if (pieces < 1 || ranks < 1)
    return emitError() << "shard pieces and ranks must be positive, got " << pieces << " and "
                       << ranks;
  if (ranks % pieces != 0)
    return emitError() << "shard: " << ranks << " ranks cannot share " << pieces
                       << " pieces evenly (ranks must be a multiple of pieces)";
  return success();
}
