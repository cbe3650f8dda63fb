//===- WeightStore.cpp - the bytes behind each llm.weight -----------------===//
#include "WeightStore.h"

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/quantize.h"
#include "llmc/core/weight_format.h"

#include "absl/strings/str_format.h"

#include <cstring>

namespace llmc {
namespace {

// Elements in `bytes` bytes of the (non-grouped) format `format`; -1 if they
// are not whole blocks.
int64_t elementsIn(const std::string &format, uint64_t bytes) {
  std::optional<WeightFormatInfo> info = LookupWeightFormat(format);
  if (!info || info->grouped || bytes % info->block_bytes != 0)
    return -1;
  return int64_t(bytes / info->block_bytes) * info->block_elems;
}

// Appends `count` floats to `out` in `format` (`group` for i8/i4).
absl::Status encode(const std::vector<float> &values, const std::string &format, int64_t group,
                    std::vector<uint8_t> &out) {
  const int64_t count = int64_t(values.size());
  const int64_t bytes = WeightByteSize(format, count, group);
  if (bytes < 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d elements do not fit the %s format (group %d)", count, format, group));
  const size_t at = out.size();
  out.resize(at + bytes);
  uint8_t *dst = out.data() + at;
  if (format == "i8" || format == "i4")
    return QuantizeGroupwise(format, group, values.data(), count, dst, bytes);
  if (format == "f32") {
    std::memcpy(dst, values.data(), bytes);
    return absl::OkStatus();
  }
  if (format == "f16" || format == "bf16") {
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h = format == "f16" ? FloatToHalf(values[i]) : FloatToBF16(values[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrFormat("converting into %s is not supported", format));
}

} // namespace

absl::StatusOr<WeightStore::Bytes> WeightStore::stored(const std::string &name) const {
  std::optional<ImportedModel::RawTensor> raw = model.rawTensor(name);
  if (!raw)
    return absl::NotFoundError(
        absl::StrFormat("%s: no tensor '%s' in the model", model.path(), name));
  return Bytes{raw->data, raw->size};
}

absl::StatusOr<WeightStore::Bytes> WeightStore::materialize(llm::WeightOp op) {
  llm::WeightType type = op.getType();
  std::string name = op.getName().str();
  std::string format = llm::stringifyWeightFormat(type.getFormat()).str();
  int64_t elements = 1;
  for (int64_t d : type.getShape())
    elements *= d;
  const int64_t expected = WeightByteSize(format, elements, type.getGroup());

  if (std::optional<llvm::StringRef> from = op.getFrom()) {
    // Each stored part (or the tensor itself) is decoded to f32 and encoded
    // in the type's format; rows stay whole, so converting part by part and
    // joining equals joining then converting.
    std::vector<std::string> sources;
    if (std::optional<mlir::ArrayAttr> parts = op.getParts()) {
      for (mlir::Attribute a : *parts)
        sources.push_back(mlir::cast<mlir::StringAttr>(a).getValue().str());
    } else {
      sources.push_back(name);
    }
    auto converted = std::make_unique<std::vector<uint8_t>>();
    converted->reserve(expected > 0 ? expected : 0);
    std::vector<float> values;
    for (const std::string &source : sources) {
      absl::StatusOr<Bytes> bytes = stored(source);
      if (!bytes.ok())
        return absl::NotFoundError(
            absl::StrFormat("weight '%s': %s", name, bytes.status().message()));
      const int64_t count = elementsIn(from->str(), bytes->size);
      if (count < 0)
        return absl::InvalidArgumentError(absl::StrFormat(
            "weight '%s': tensor '%s' holds %d bytes, not whole %s elements", name, source,
            bytes->size, from->str()));
      values.resize(count);
      absl::Status st = Dequantize(from->str(), bytes->data, bytes->size, count, values.data());
      if (st.ok())
        st = encode(values, format, type.getGroup(), *converted);
      if (!st.ok())
        return absl::Status(st.code(), absl::StrFormat("weight '%s': converting '%s' from %s to %s: %s",
                                                       name, source, from->str(), format,
                                                       st.message()));
    }
    if (expected >= 0 && int64_t(converted->size()) != expected)
      return absl::InvalidArgumentError(absl::StrFormat(
          "weight '%s': converted from %s it holds %d bytes, but a %s weight of its shape needs %d",
          name, from->str(), converted->size(), format, expected));
    owned.push_back(std::move(converted));
    return Bytes{owned.back()->data(), owned.back()->size()};
  }

  if (std::optional<mlir::ArrayAttr> parts = op.getParts()) {
    // Row-major weights in a row-wise format: joining rows is joining bytes.
    auto joined = std::make_unique<std::vector<uint8_t>>();
    joined->reserve(expected > 0 ? expected : 0);
    for (mlir::Attribute a : *parts) {
      std::string part = mlir::cast<mlir::StringAttr>(a).getValue().str();
      absl::StatusOr<Bytes> bytes = stored(part);
      if (!bytes.ok())
        return absl::NotFoundError(absl::StrFormat("weight '%s' (concat): %s", name,
                                                   bytes.status().message()));
      joined->insert(joined->end(), bytes->data, bytes->data + bytes->size);
    }
    if (expected >= 0 && int64_t(joined->size()) != expected)
      return absl::InvalidArgumentError(absl::StrFormat(
          "weight '%s': its parts hold %d bytes, but a %s weight of its shape needs %d", name,
          joined->size(), format, expected));
    owned.push_back(std::move(joined));
    return Bytes{owned.back()->data(), owned.back()->size()};
  }

  absl::StatusOr<Bytes> bytes = stored(name);
  if (!bytes.ok())
    return bytes.status();
  if (expected >= 0 && int64_t(bytes->size) != expected)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor '%s' holds %d bytes, but its type needs %d", model.path(), name, bytes->size,
        expected));
  return bytes;
}

} // namespace llmc
