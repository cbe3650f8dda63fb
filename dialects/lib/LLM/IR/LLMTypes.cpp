//===- LLMTypes.cpp - types of the llm dialect ----------------------------===//
#include "llmc/Dialect/LLM/IR/LLMTypes.h"

#include "llmc/Dialect/LLM/IR/LLMDialect.h"
#include "llmc/core/weight_format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace llmc::llm;

#define GET_TYPEDEF_CLASSES
#include "llmc/Dialect/LLM/IR/LLMOpsTypes.cpp.inc"

void LLMDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "llmc/Dialect/LLM/IR/LLMOpsTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// WeightType
//===----------------------------------------------------------------------===//

static std::string listFormats() {
  std::string names;
  for (uint32_t i = 0; i <= getMaxEnumValForWeightFormat(); ++i) {
    if (i) names += ", ";
    names += stringifyWeightFormat(static_cast<WeightFormat>(i)).str();
  }
  return names;
}

// !llm.weight<576x576, q4_1> or !llm.weight<1536x576, i4, group = 128>
Type WeightType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() ||
      parser.parseDimensionList(shape, /*allowDynamic=*/false, /*withTrailingX=*/false) ||
      parser.parseComma())
    return {};
  StringRef keyword;
  llvm::SMLoc formatLoc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return {};
  std::optional<WeightFormat> format = symbolizeWeightFormat(keyword);
  if (!format) {
    parser.emitError(formatLoc) << "unknown weight format '" << keyword
                                << "'; expected one of " << listFormats();
    return {};
  }
  int64_t group = 0;
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("group") || parser.parseEqual() || parser.parseInteger(group)))
    return {};
  if (parser.parseGreater())
    return {};
  return parser.getChecked<WeightType>(loc, parser.getContext(), shape, *format, group);
}

void WeightType::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleave(getShape(), printer, "x");
  printer << ", " << stringifyWeightFormat(getFormat());
  if (getGroup() != 0)
    printer << ", group = " << getGroup();
  printer << ">";
}

LogicalResult WeightType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> shape, WeightFormat format, int64_t group) {
  if (shape.empty() || shape.size() > 2)
    return emitError() << "weight must have rank 1 or 2, got rank " << shape.size();
  for (int64_t d : shape)
    if (d <= 0)
      return emitError() << "weight dimensions must be positive, got " << d;
  std::optional<llmc::WeightFormatInfo> info =
      llmc::LookupWeightFormat(stringifyWeightFormat(format).str());
  if (!info)
    return emitError() << "weight format '" << stringifyWeightFormat(format)
                       << "' has no entry in the weight-format table (core/)";
  int64_t inner = shape.back();
  if (info->grouped) {
    if (group != 32 && group != 64 && group != 128)
      return emitError() << "weight format '" << stringifyWeightFormat(format)
                         << "' needs group = 32, 64 or 128, got " << group;
    if (inner % group != 0)
      return emitError() << "innermost weight dimension " << inner
                         << " is not a multiple of the quantization group " << group;
    return success();
  }
  if (group != 0)
    return emitError() << "group applies only to the i8 and i4 formats, not '"
                       << stringifyWeightFormat(format) << "'";
  if (inner % info->block_elems != 0)
    return emitError() << "innermost weight dimension " << inner << " is not a multiple of the "
                       << stringifyWeightFormat(format) << " block size " << info->block_elems;
  return success();
}

int64_t WeightType::getNumElements() const {
  int64_t n = 1;
  for (int64_t d : getShape())
    n *= d;
  return n;
}

int64_t WeightType::getByteSize() const {
  return llmc::WeightByteSize(stringifyWeightFormat(getFormat()).str(), getNumElements(),
                              getGroup());
}

bool WeightType::isQuantized() const {
  WeightFormat f = getFormat();
  return f != WeightFormat::f32 && f != WeightFormat::f16 && f != WeightFormat::bf16;
}

//===----------------------------------------------------------------------===//
// KVCacheType
//===----------------------------------------------------------------------===//

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError, int64_t kvHeads,
                                  int64_t headDim, Type elementType) {
  if (kvHeads <= 0)
    return emitError() << "kv_cache kv_heads must be positive, got " << kvHeads;
  if (headDim <= 0 || headDim % 2 != 0)
    return emitError() << "kv_cache head_dim must be positive and even, got " << headDim;
  if (!elementType.isF32() && !elementType.isF16() && !elementType.isBF16())
    return emitError() << "kv_cache element type must be f32, f16 or bf16, got " << elementType;
  return success();
}
