#include "llmc/core/format/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "llmc/core/format/block_decode.h"
#include "llmc/core/format/dequantize.h"
#include "llmc/core/weight_format.h"

namespace llmc {
namespace {

constexpr float kHalfMax = 65504.0f;

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Ties to even, as torch.round and numpy.round (the default FP environment).
float RoundEven(float v) { return std::nearbyint(v); }

// Rounds a positive scale to f16; errors if it does not fit.
absl::Status HalfScale(float s, int64_t group_index, uint16_t* h, float* rounded) {
  if (!(s <= kHalfMax))
    return absl::InvalidArgumentError(absl::StrFormat(
        "group %d: scale %g is beyond the f16 range (weights too large to quantize)",
        group_index, s));
  *h = FloatToHalf(s);
  *rounded = HalfToFloat(*h);
  return absl::OkStatus();
}

absl::Status QuantizeI8Group(const float* x, int64_t g, int64_t index, uint8_t* out) {
  float amax = 0.0f;
  for (int64_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(x[i]));
  uint16_t h;
  float s;
  if (absl::Status st = HalfScale(amax / 127.0f, index, &h, &s); !st.ok()) return st;
  StoreU16(out, h);
  int8_t* q = reinterpret_cast<int8_t*>(out + 2);
  for (int64_t i = 0; i < g; ++i) {
    // A scale that rounded down to f16 can put |x|/s just above 127: clamp.
    const float v = s > 0.0f ? RoundEven(x[i] / s) : 0.0f;
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
  return absl::OkStatus();
}

absl::Status QuantizeI4Group(const float* x, int64_t g, int64_t index, uint8_t* out) {
  // The range always includes 0, so the zero point lies in 0..15.
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < g; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  uint16_t h;
  float s;
  if (absl::Status st = HalfScale((hi - lo) / 15.0f, index, &h, &s); !st.ok()) return st;
  const float z = s > 0.0f ? std::clamp(RoundEven(-lo / s), 0.0f, 15.0f) : 0.0f;
  StoreU16(out, h);
  StoreU16(out + 2, FloatToHalf(z));
  uint8_t* qs = out + 4;
  std::memset(qs, 0, static_cast<size_t>(g / 2));
  for (int64_t i = 0; i < g; ++i) {
    const float v = s > 0.0f ? RoundEven(x[i] / s) + z : z;
    const auto q = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
    const int64_t chunk = i / 32, j = i % 32;
    uint8_t& byte = qs[16 * chunk + (j % 16)];
    byte |= j < 16 ? q : static_cast<uint8_t>(q << 4);
  }
  return absl::OkStatus();
}

// Checks the format, the group and the element count; returns the bytes
// `count` elements take.
absl::StatusOr<int64_t> CheckShape(std::string_view format, int64_t group, int64_t count) {
  if (format != "i8" && format != "i4")
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is not a group-wise format (expected i8 or i4)", format));
  if (group != 32 && group != 64 && group != 128)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: group must be 32, 64 or 128, got %d", format, group));
  if (count < 0 || count % group != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d elements are not a whole number of groups of %d", format, count, group));
  return WeightByteSize(format, count, group);
}

}  // namespace

absl::Status QuantizeGroupwise(std::string_view format, int64_t group, const float* src,
                               int64_t count, uint8_t* dst, size_t dst_bytes) {
  absl::StatusOr<int64_t> bytes = CheckShape(format, group, count);
  if (!bytes.ok()) return bytes.status();
  if (dst_bytes < static_cast<size_t>(*bytes))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d elements need %d bytes, the destination has %d", format, count, *bytes,
        dst_bytes));
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(src[i]))
      return absl::InvalidArgumentError(
          absl::StrFormat("element %d is %g: only finite weights can be quantized", i, src[i]));
  const int64_t block = GroupwiseBlockBytes(format, group);
  const bool i8 = format == "i8";
  for (int64_t b = 0; b < count / group; ++b) {
    const float* x = src + b * group;
    uint8_t* out = dst + b * block;
    absl::Status st = i8 ? QuantizeI8Group(x, group, b, out) : QuantizeI4Group(x, group, b, out);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status DequantizeGroupwise(std::string_view format, int64_t group, const uint8_t* src,
                                 size_t src_bytes, int64_t count, float* dst) {
  absl::StatusOr<int64_t> bytes = CheckShape(format, group, count);
  if (!bytes.ok()) return bytes.status();
  if (src_bytes < static_cast<size_t>(*bytes))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d elements need %d bytes, the source has %d", format, count, *bytes, src_bytes));
  const int64_t block = GroupwiseBlockBytes(format, group);
  const bool i8 = format == "i8";
  for (int64_t b = 0; b < count / group; ++b) {
    const uint8_t* x = src + b * block;
    float* y = dst + b * group;
    const float s = gguf::load_half(x);
    if (i8) {
      const int8_t* q = reinterpret_cast<const int8_t*>(x + 2);
      for (int64_t i = 0; i < group; ++i) y[i] = static_cast<float>(q[i]) * s;
      continue;
    }
    const float z = gguf::load_half(x + 2);
    const uint8_t* qs = x + 4;
    // 32-element chunks of nibble pairs, as q4_0 (block_decode.h).
    for (int64_t i = 0; i < group; ++i) {
      const int q = gguf::nibble32(qs + 16 * (i / 32), static_cast<int>(i % 32));
      y[i] = (static_cast<float>(q) - z) * s;
    }
  }
  return absl::OkStatus();
}

}  // namespace llmc
