/* The calling convention between the runtime's CUDA backend and the kernels
 * `llmc compile --target=sm_XX` generates (the CUDA twin of host_abi.h).
 * Plain C with no includes, so NVRTC compiles it inside the generated source
 * and the runtime includes it as is.
 *
 * Every kernel is `extern "C" __global__ void <symbol>(llmc_cuda_step_info s,
 * llmc_cuda_args a)`: both structs travel by value as kernel parameters. The
 * manifest's `cuda.steps` say which buffers, weights and caches fill `a`, in
 * order; `cuda.kernels[i].launches` give each launch's grid and block.
 */
#ifndef LLMC_CORE_ARTIFACT_CUDA_ABI_H_
#define LLMC_CORE_ARTIFACT_CUDA_ABI_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a field below changes, or what a binding holds; manifests
 * record it. 3: every buffer of logits rows is f32 (the LM head's slices of
 * a tensor-parallel rank too, not the activation type). 4: `scratch` holds
 * the split attention's ticket counters before its partials (a runtime that
 * sizes scratch for partials only would be overrun). 5: `gemm_b`, the
 * dequantized weight of a cuBLASLt GEMM over quantized weights. 6: `gemm_a`
 * also holds the generated tensor-core GEMM's A operand (the manifest's
 * operand_k), not only cuBLASLt's. 7: `tickets`, and `scratch` also holds a
 * split-K GEMM's partials (a launch's split_floats per block). 8: the
 * device sampler's entries (manifest cuda.samplers) and llmc_cuda_pick. 9:
 * a pick carries its sampling parameters and Philox seed and counter, the
 * logprobs it asks for (a.buffers[4]) and its penalties (a.buffers[5]). 10:
 * a pick's `forced` token (a scored prompt's next token: no choice, its
 * logprob). 11: the token feed's entry (manifest cuda.samplers, kind
 * "feed"), for a step scheduled before the one before it has run. 12: a
 * pick may ask for top-p without top-k (an older sampler would ignore its
 * top_p). */
#define LLMC_CUDA_ABI_VERSION 12

/* Most bindings of one kind a launch may have. */
#define LLMC_CUDA_MAX_BUFFERS 12
#define LLMC_CUDA_MAX_WEIGHTS 12

/* Per-step metadata (device pointers; int32 everywhere). Must match
 * llmc::cuda::step_info in llmc_cuda_kernels.cuh field for field; the
 * generated source checks the size. */
typedef struct llmc_cuda_step_info {
  int num_tokens;          /* T */
  int num_seqs;            /* S */
  int num_logits;          /* rows of logits_rows */
  int max_blocks;          /* columns of block_tables */
  int block_size;          /* tokens per KV block */
  const int* tokens;       /* [T] */
  const int* positions;    /* [T] */
  const int* query_starts; /* [S + 1] */
  const int* context_lens; /* [S] */
  const int* block_tables; /* [S, max_blocks] */
  const int* slot_mapping; /* [T] */
  const int* logits_rows;  /* [num_logits] */
} llmc_cuda_step_info;

/* What one launch binds. A KV cache is K then V, each [num_blocks,
 * block_size, kv_heads, head_dim] in the activation type. `scratch` is the
 * runtime's f32 scratch for split attention (ticket counters, then
 * partials; or a split-K GEMM's partials, after the same header). */
typedef struct llmc_cuda_args {
  void* buffers[LLMC_CUDA_MAX_BUFFERS];
  const void* weights[LLMC_CUDA_MAX_WEIGHTS];
  void* caches[2];
  float* scratch;
  /* A cuBLASLt GEMM's operands (manifest cuda.kernels[i].gemm): A [rows, k]
   * in the activation type, written by the kernel's `pre` entry, and D
   * [rows, n] f32, read by its `epi` entry. Null unless the runner has
   * cuBLASLt GEMMs. */
  void* gemm_a;
  float* gemm_d;
  /* B [n, k] in the activation type when the weight is quantized: written by
   * the kernel's `deq` entry, read by the cuBLASLt GEMM instead of the
   * weight. Null unless the runner has such GEMMs. */
  void* gemm_b;
  /* Split-K GEMMs' ticket counters, one per output tile (the most any
   * launch's grid x * y reaches): zero between launches, which the runtime
   * makes so at allocation and each tile's last block keeps so. Null unless
   * some launch has split_floats. */
  int* tickets;
} llmc_cuda_args;

/* The device sampler. Its entry (manifest cuda.samplers, kind "sample")
 * takes the same two parameters, bound otherwise: s.num_logits is the count
 * of picks (grid x; one block a pick) and
 *   a.buffers[0]  the step's logits, f32 [rows, vocab] (the logits buffer)
 *   a.buffers[1]  the picks, llmc_cuda_pick [num_logits]
 *   a.buffers[2]  the masked token ids the picks' ranges index (int)
 *   a.buffers[3]  the picked token ids, int [num_logits] (written)
 *   a.buffers[4]  the logprobs the picks ask for, llmc_cuda_logprob: a pick
 *                 with logprobs N > 0 writes 1 + N of them from its
 *                 logprob_begin, its token's then the N best (best first;
 *                 token -1 where fewer exist) (written)
 *   a.buffers[5]  the penalized tokens the picks' ranges index,
 *                 llmc_cuda_penalty; a pick's are distinct (the logits
 *                 buffer's rows are changed in place and restored)
 * The vocabulary is the entry's own constant. */
typedef struct llmc_cuda_pick {
  int row;        /* the logits row it reads */
  int mask_begin; /* ids [mask_begin, mask_begin + mask_count) of */
  int mask_count; /* a.buffers[2] never win */
  /* The host sampler's parameters (sampling_params.h): temperature 0 is
   * greedy; top_k in [1, LLMC_CUDA_MAX_PICK_TOP_K] and below the vocabulary
   * keeps the k best, which top_p and min_p then cut; without top-k,
   * top_p cuts the LLMC_CUDA_MAX_PICK_TOP_K best by the whole vocabulary's
   * mass (the host sampler's kTopPCandidates), then min_p. */
  int top_k;
  float temperature;
  float top_p;
  float min_p;
  /* The raw log-softmax's top-N (0: none), written from logprob_begin. */
  int logprobs;
  int logprob_begin;
  /* The penalties (llama.cpp's): penalties[penalty_begin, + penalty_count)
   * of a.buffers[5] are the distinct tokens of the request's window and
   * their counts; each has its logit divided (positive) or multiplied by
   * repetition_penalty, then count * frequency_penalty + presence_penalty
   * subtracted, before any choice (not for the logprobs: raw). */
  int penalty_begin;
  int penalty_count;
  float repetition_penalty;
  float presence_penalty;
  float frequency_penalty;
  /* >= 0: the token is given (a scored prompt's next token), no choice is
   * made, and its logprob with the `logprobs` best is written (1 + logprobs
   * entries even at 0). -1: a pick. */
  int forced;
  unsigned long long seed; /* Philox-4x32-10's key */
  unsigned long long draw; /* and counter: the token's index in the output */
} llmc_cuda_pick;

/* A penalized token of a pick and how often it occurs in its window. */
typedef struct llmc_cuda_penalty {
  int token;
  int count;
} llmc_cuda_penalty;

/* Most penalized tokens of one pick (their raw logits wait in shared
 * memory). */
#define LLMC_CUDA_MAX_PICK_PENALTIES 1024

/* One logprob a pick gives: a token and its raw log-softmax. */
typedef struct llmc_cuda_logprob {
  int token;
  float logprob;
} llmc_cuda_logprob;

/* The token feed. Its entry (manifest cuda.samplers, kind "feed") runs
 * first in a step scheduled while the step before it was still running
 * (asynchronous scheduling): a request's token in the new step is the one
 * the step before picks, which never went to the host. s.num_logits is the
 * count of feeds (one thread each; grid x covers them in blocks of the
 * entry's block), and
 *   a.buffers[0]  the step's token ids, int [num_tokens] (written)
 *   a.buffers[1]  the feeds, llmc_cuda_feed [num_logits]
 *   a.buffers[2]  the picked token ids of the step before (the sampler's
 *                 a.buffers[3]), int */
typedef struct llmc_cuda_feed {
  int token; /* the index into the step's tokens it writes */
  int pick;  /* the index into the step before's picked ids it reads */
} llmc_cuda_feed;

/* The most top logprobs a pick may ask (OpenAI's top_logprobs limit). */
#define LLMC_CUDA_MAX_PICK_LOGPROBS 20

/* Most masked ids of one pick (they are staged in shared memory). */
#define LLMC_CUDA_MAX_PICK_MASKED 64
/* The largest top-k a pick may ask (its survivors are sorted in shared
 * memory). */
#define LLMC_CUDA_MAX_PICK_TOP_K 1024

#ifdef __cplusplus
}
#endif

#endif /* LLMC_CORE_ARTIFACT_CUDA_ABI_H_ */
