//===- WeightStore.cpp - the bytes behind each llm.weight -----------------===//
#include "WeightStore.h"

#include "Artifact/WeightSlice.h"

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/quantize.h"
#include "llmc/core/weight_format.h"

#include "absl/strings/str_format.h"

#include <cstring>
#include <tuple>

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

// The shape of `source`'s slice for `shard`, from the stored tensor's byte
// count in `storedFormat` and the slice type's shape (whose other dimension
// is the stored one; for rows of a concat, each part is sliced on its own).
absl::StatusOr<std::vector<int64_t>> partSliceShape(llm::ShardAttr shard,
                                                    llm::WeightType type,
                                                    const std::string &storedFormat,
                                                    uint64_t bytes) {
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  const int64_t dim = shard.getDim();
  if (shape.size() == 1) {
    const int64_t count = elementsIn(storedFormat, bytes);
    if (count < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("%d bytes are not whole %s elements", bytes, storedFormat));
    return std::vector<int64_t>{shard.pieceSize(count)};
  }
  // The stored row width: the slice's, or all pieces of it when columns are cut.
  const int64_t storedInner = dim == 1 ? shape[1] * shard.getPieces() : shape[1];
  const int64_t rowBytes = WeightByteSize(storedFormat, storedInner);
  if (rowBytes <= 0 || bytes % rowBytes != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d bytes are not whole rows of %d %s elements", bytes, storedInner, storedFormat));
  const int64_t storedRows = int64_t(bytes / rowBytes);
  if (dim == 0)
    return std::vector<int64_t>{shard.pieceSize(storedRows), shape[1]};
  return std::vector<int64_t>{storedRows, shape[1]};
}

// Rows [begin, end) of a stored tensor whose rows are `inner` elements of
// `format`: a byte range, as rows are whole blocks.
absl::StatusOr<std::pair<const uint8_t *, uint64_t>>
rowRange(const uint8_t *data, uint64_t size, const std::string &format, int64_t inner,
         int64_t begin, int64_t end) {
  const int64_t rowBytes = WeightByteSize(format, inner);
  if (rowBytes <= 0 || size % rowBytes != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d bytes are not whole rows of %d %s elements", size, inner, format));
  const int64_t rows = int64_t(size / rowBytes);
  if (end > rows)
    return absl::InvalidArgumentError(
        absl::StrFormat("rows [%d, %d) are past its %d rows", begin, end, rows));
  return std::make_pair(data + begin * rowBytes, uint64_t((end - begin) * rowBytes));
}

} // namespace

absl::StatusOr<WeightStore::Bytes> WeightStore::stored(const std::string &name) const {
  std::optional<ImportedModel::RawTensor> raw = model.rawTensor(name);
  if (!raw)
    return absl::NotFoundError(
        absl::StrFormat("%s: no tensor '%s' in the model", model.path(), name));
  return Bytes{raw->data, raw->size};
}

absl::StatusOr<WeightStore::Bytes> WeightStore::materialize(llm::WeightOp op, int64_t rank) {
  llm::WeightType type = op.getType();
  std::string name = op.getName().str();
  std::string format = llm::stringifyWeightFormat(type.getFormat()).str();
  int64_t elements = 1;
  for (int64_t d : type.getShape())
    elements *= d;
  const int64_t expected = WeightByteSize(format, elements, type.getGroup());
  std::optional<llvm::StringRef> from = op.getFrom();
  std::optional<mlir::ArrayAttr> parts = op.getParts();
  std::optional<llvm::ArrayRef<int64_t>> rows = op.getRows();
  std::optional<llm::ShardAttr> shard = op.getShard();
  std::optional<llvm::APFloat> offset = op.getOffset();

  if (!from && !parts && !shard && !offset) {
    // The stored tensor as it is: a view of the model file.
    absl::StatusOr<Bytes> bytes = stored(name);
    if (!bytes.ok())
      return bytes.status();
    if (expected >= 0 && int64_t(bytes->size) != expected)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' holds %d bytes, but its type needs %d", model.path(), name,
          bytes->size, expected));
    return bytes;
  }

  // Derived: each stored part (or the tensor itself) is cut to its `rows`,
  // sliced for `rank` (shard), decoded to f32, shifted (plus) and encoded in
  // the type's format (from), and the results are joined row after row
  // (concat). Rows and blocks stay whole, so doing this part by part equals
  // doing it on the joined tensor.
  std::vector<std::string> sources;
  if (parts) {
    for (mlir::Attribute a : *parts)
      sources.push_back(mlir::cast<mlir::StringAttr>(a).getValue().str());
  } else {
    sources.push_back(name);
  }
  const std::string storedFormat = from ? from->str() : format;
  auto out = std::make_unique<std::vector<uint8_t>>();
  out->reserve(expected > 0 ? expected : 0);
  std::vector<float> values;
  std::vector<uint8_t> sliced;
  for (size_t index = 0; index < sources.size(); ++index) {
    const std::string &source = sources[index];
    absl::StatusOr<Bytes> bytes = stored(source);
    if (!bytes.ok())
      return absl::NotFoundError(
          absl::StrFormat("weight '%s': %s", name, bytes.status().message()));
    const uint8_t *data = bytes->data;
    uint64_t size = bytes->size;
    if (rows) {
      const int64_t rank2 = type.getShape().size() == 2;
      const int64_t inner = !rank2 ? 1
                            : shard && shard->getDim() == 1
                                ? type.getShape()[1] * shard->getPieces()
                                : type.getShape()[1];
      auto range = rowRange(data, size, storedFormat, inner, (*rows)[2 * index],
                            (*rows)[2 * index + 1]);
      if (!range.ok())
        return absl::InvalidArgumentError(absl::StrFormat("weight '%s': tensor '%s': %s", name,
                                                          source, range.status().message()));
      std::tie(data, size) = *range;
    }
    if (shard) {
      absl::StatusOr<std::vector<int64_t>> shape =
          partSliceShape(*shard, type, storedFormat, size);
      absl::StatusOr<std::vector<uint8_t>> slice =
          shape.ok() ? SliceStoredTensor(data, size, storedFormat, *shape, int(shard->getDim()),
                                         shard->pieceOf(rank))
                     : absl::StatusOr<std::vector<uint8_t>>(shape.status());
      if (!slice.ok())
        return absl::InvalidArgumentError(absl::StrFormat(
            "weight '%s': slicing tensor '%s' for rank %d: %s", name, source, rank,
            slice.status().message()));
      sliced = std::move(*slice);
      data = sliced.data();
      size = sliced.size();
    }
    if (!from && !offset) {
      out->insert(out->end(), data, data + size);
      continue;
    }
    const int64_t count = elementsIn(storedFormat, size);
    if (count < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("weight '%s': tensor '%s' holds %d bytes, not whole %s elements", name,
                          source, size, storedFormat));
    values.resize(count);
    absl::Status st = Dequantize(storedFormat, data, size, count, values.data());
    if (st.ok() && offset) {
      const float add = float(offset->convertToDouble());
      for (float &v : values)
        v += add;
    }
    if (st.ok())
      st = encode(values, format, type.getGroup(), *out);
    if (!st.ok())
      return absl::Status(st.code(),
                          absl::StrFormat("weight '%s': converting '%s' from %s to %s: %s", name,
                                          source, storedFormat, format, st.message()));
  }
  if (expected >= 0 && int64_t(out->size()) != expected)
    return absl::InvalidArgumentError(absl::StrFormat(
        "weight '%s': derived from %d stored tensor(s) it holds %d bytes, but a %s weight of its "
        "shape needs %d",
        name, sources.size(), out->size(), format, expected));
  owned.push_back(std::move(out));
  return Bytes{owned.back()->data(), owned.back()->size()};
}

} // namespace llmc
