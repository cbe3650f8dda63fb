#include "llmc/runtime/exec/kv_sizing.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "llmc/runtime/kv/block_pool.h"

namespace llmc {

int64_t KvBytesPerBlock(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim,
                        int64_t block_size, int64_t element_bytes) {
  return 2 * num_layers * num_kv_heads * head_dim * block_size * element_bytes;
}

absl::StatusOr<int64_t> KvCacheBlocks(const RunnerOptions& o, int64_t bytes_per_block,
                                      int64_t max_position, int64_t free_device_bytes) {
  int64_t blocks = 0;
  const char* source = "";
  if (o.num_blocks > 0) {
    blocks = o.num_blocks;
    source = "the block count asked for";
  } else if (o.kv_cache_bytes > 0) {
    blocks = o.kv_cache_bytes / bytes_per_block;
    source = "--kv-cache-size";
    if (blocks < 1)
      return absl::InvalidArgumentError(absl::StrFormat(
          "--kv-cache-size: %s holds no KV-cache block (one block of %d tokens takes %s)",
          FormatBytes(o.kv_cache_bytes), o.block_size, FormatBytes(bytes_per_block)));
  } else if (free_device_bytes >= 0 && o.kv_memory_fraction > 0) {
    blocks = int64_t(double(free_device_bytes) * o.kv_memory_fraction) / bytes_per_block;
    source = "the free device memory";
    // A default, not a request: a small model on a large GPU stops at
    // kMaxDefaultKvBlocks (the host keeps ~40 bytes of bookkeeping per block
    // and token slot besides).
    blocks =
        std::min<int64_t>({blocks, kMaxDefaultKvBlocks, ((int64_t(1) << 31) - 1) / o.block_size});
    if (blocks < 1)
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the KV cache: %.0f%% of the %s of device memory still free holds no block of %s; "
          "free device memory or give --kv-cache-size",
          o.kv_memory_fraction * 100, FormatBytes(free_device_bytes),
          FormatBytes(bytes_per_block)));
  } else {
    blocks = (max_position + o.block_size - 1) / o.block_size + 1;
  }
  if (blocks > BlockPool::kMaxBlocks || blocks * o.block_size > (int64_t(1) << 31) - 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "the KV cache: %d blocks of %d tokens (from %s) exceed the %d blocks and 2^31 slots "
        "@step addresses; lower it",
        blocks, o.block_size, source, BlockPool::kMaxBlocks));
  return blocks;
}

absl::StatusOr<int64_t> ParseByteSize(const std::string& flag, const std::string& text) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.'))
    ++digits;
  std::string unit = s.substr(digits);
  double value = 0;
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0 || digits == 0 || !absl::SimpleAtod(s.substr(0, digits), &value) ||
      !(value * scale >= 1) || value * scale > 9.0e18)
    return absl::InvalidArgumentError(absl::StrFormat(
        "flag --%s expects a size such as 2GiB, 512MiB or 1000000 (bytes), got '%s'", flag, text));
  return int64_t(value * scale);
}

std::string FormatBytes(int64_t bytes) {
  const double b = double(bytes);
  if (b >= 1024.0 * 1024 * 1024) return absl::StrFormat("%.2f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return absl::StrFormat("%.1f MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%d B", bytes);
}

}  // namespace llmc
