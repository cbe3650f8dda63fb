//===- WeightStore.cpp - the bytes behind each llm.weight -----------------===//
#include "WeightStore.h"

#include "llmc/runtime/weight_format.h"

#include "absl/strings/str_format.h"

namespace llmc {

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

  if (op.getFrom())
    return absl::UnimplementedError(absl::StrFormat(
        "weight '%s': converting from %s to %s is not supported", name, *op.getFrom(), format));

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
