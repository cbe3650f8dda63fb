// How many KV-cache blocks a runner allocates, from RunnerOptions: one rule
// for both backends, so that `--kv-cache-size 2GiB` means the same blocks on
// the host and on a GPU with the same KV dtype.
#ifndef LLMC_RUNTIME_EXEC_KV_SIZING_H_
#define LLMC_RUNTIME_EXEC_KV_SIZING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "llmc/runtime/exec/step_runner.h"

namespace llmc {

// The most blocks the free-memory default takes (16M tokens at 16 a block).
inline constexpr int64_t kMaxDefaultKvBlocks = int64_t(1) << 20;

// Bytes of one block: K and V of every layer for block_size tokens.
int64_t KvBytesPerBlock(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim,
                        int64_t block_size, int64_t element_bytes);

// The number of blocks: options.num_blocks when positive; else
// options.kv_cache_bytes / bytes_per_block; else, when `free_device_bytes`
// is known (>= 0, a GPU) and options.kv_memory_fraction > 0, that fraction of
// it (at most kMaxDefaultKvBlocks); else enough for one sequence of
// `max_position` tokens plus a block.
// InvalidArgument when the bytes asked for hold no block, or more blocks
// than the slot ids of @step address (BlockPool::kMaxBlocks).
absl::StatusOr<int64_t> KvCacheBlocks(const RunnerOptions& options, int64_t bytes_per_block,
                                      int64_t max_position, int64_t free_device_bytes);

// "2GiB", "512MiB", "1.5G", "100000" (bytes) -> bytes. InvalidArgument
// naming `flag` on anything else or a size below one byte.
absl::StatusOr<int64_t> ParseByteSize(const std::string& flag, const std::string& text);

// "1.50 GiB", "12.0 MiB", "512 B": for reports.
std::string FormatBytes(int64_t bytes);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_KV_SIZING_H_
