/* The calling convention between the runtime's host backend and the kernels
 * `llmc compile --target=host` generates. Plain C, so the generated sources
 * and the runtime agree without sharing any C++ type; both include this file
 * (the compiler copies it into each artifact's sources).
 *
 * A kernel is `void <symbol>(const llmc_host_args* args)`. It reads and writes
 * the buffers the step plan binds to it, reads weights in their packed
 * format, and splits its work across threads with `parallel_for`.
 */
#ifndef LLMC_CORE_ARTIFACT_HOST_ABI_H_
#define LLMC_CORE_ARTIFACT_HOST_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a field below changes; manifests record it and the runtime
 * refuses kernels built against another version. */
#define LLMC_HOST_ABI_VERSION 1

/* Runs fn(ctx, begin, end) over [0, n) on the runtime's threads, in chunks
 * of at least `grain` items. Returns when all chunks are done. */
typedef void (*llmc_range_fn)(void* ctx, int64_t begin, int64_t end);
typedef void (*llmc_parallel_for_fn)(void* pool, int64_t n, int64_t grain, llmc_range_fn fn,
                                     void* ctx);

/* Per-step metadata: the @step arguments of docs/architecture.md. */
typedef struct llmc_host_step_info {
  int64_t num_tokens;          /* T */
  int64_t num_seqs;            /* S */
  int64_t num_logits;          /* rows of logits_rows */
  const int32_t* tokens;       /* [T] */
  const int32_t* positions;    /* [T] */
  const int32_t* query_starts; /* [S + 1] */
  const int32_t* context_lens; /* [S] */
  const int32_t* block_tables; /* [S, max_blocks] */
  int64_t max_blocks;
  const int32_t* slot_mapping; /* [T] */
  const int32_t* logits_rows;  /* [num_logits] */
  int64_t block_size;          /* tokens per KV block */
  void* pool;                  /* opaque, for parallel_for */
  llmc_parallel_for_fn parallel_for;
} llmc_host_step_info;

/* What one kernel launch sees. The order of `buffers`, `weights` and `caches`
 * is the order the manifest's step entry lists them. A KV cache is K then V,
 * each [num_blocks, block_size, kv_heads, head_dim]. */
typedef struct llmc_host_args {
  const llmc_host_step_info* step;
  void* const* buffers;
  const void* const* weights;
  void* const* caches;
} llmc_host_args;

typedef void (*llmc_host_kernel_fn)(const llmc_host_args* args);

#ifdef __cplusplus
}
#endif

#endif /* LLMC_CORE_ARTIFACT_HOST_ABI_H_ */
