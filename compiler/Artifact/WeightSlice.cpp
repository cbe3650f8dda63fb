//===- WeightSlice.cpp - one rank's slice of a stored tensor --------------===//
#include "Artifact/WeightSlice.h"

#include "llmc/core/weight_format.h"

#include "absl/strings/str_format.h"

#include <cstring>

namespace llmc {

absl::StatusOr<std::vector<uint8_t>> SliceStoredTensor(const uint8_t *data, uint64_t size,
                                                       const std::string &format,
                                                       const std::vector<int64_t> &sliceShape,
                                                       int dim, int64_t piece) {
  std::optional<WeightFormatInfo> info = LookupWeightFormat(format);
  if (!info || info->grouped)
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot slice a stored tensor in format '%s'", format));
  if (sliceShape.empty() || sliceShape.size() > 2 || dim < 0 || dim >= int(sliceShape.size()) ||
      piece < 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad slice: dimension %d, piece %d of a rank-%d slice", dim, piece, sliceShape.size()));
  // As a row-major [rows, inner] matrix (a vector is one row).
  const bool cutRows = sliceShape.size() == 2 && dim == 0;
  const int64_t rows = sliceShape.size() == 2 ? sliceShape[0] : 1;
  const int64_t inner = sliceShape.back();
  if (cutRows) {
    const int64_t rowBytes = WeightByteSize(format, inner);
    if (rowBytes <= 0 || size % rowBytes != 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("%d bytes are not whole rows of %d %s elements", size, inner, format));
    const int64_t storedRows = int64_t(size / rowBytes);
    // Rows past the end stay zero (a padded last slice may even be all padding).
    std::vector<uint8_t> out(rows * rowBytes, 0);
    const int64_t first = piece * rows;
    const int64_t copied = std::max<int64_t>(0, std::min(rows, storedRows - first));
    if (copied > 0)
      std::memcpy(out.data(), data + first * rowBytes, copied * rowBytes);
    return out;
  }
  // Columns: the same byte range of every row, in whole blocks.
  if (size % rows != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("%d bytes are not %d rows of equal size", size, rows));
  const int64_t rowBytes = int64_t(size / rows);
  if (rowBytes % info->block_bytes != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("a row of %d bytes is not whole %s blocks of %d bytes", rowBytes, format,
                        info->block_bytes));
  const int64_t storedInner = rowBytes / info->block_bytes * info->block_elems;
  const int64_t begin = piece * inner;
  if (begin % info->block_elems != 0 || inner % info->block_elems != 0 ||
      begin + inner > storedInner)
    return absl::InvalidArgumentError(
        absl::StrFormat("columns %d..%d are not whole %s blocks of %d within the %d stored columns",
                        begin, begin + inner, format, info->block_elems, storedInner));
  const int64_t sliceBytes = inner / info->block_elems * info->block_bytes;
  const int64_t offset = begin / info->block_elems * info->block_bytes;
  std::vector<uint8_t> out(rows * sliceBytes);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * sliceBytes, data + r * rowBytes + offset, sliceBytes);
  return out;
}

} // namespace llmc
