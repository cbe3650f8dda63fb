// The CUDA runner's bookkeeping as pure functions, so that it is tested
// without a GPU: device buffer sizes, the attention split policy and its
// scratch, the per-step staging of the batch's int32 arrays, which launches
// a step makes (by their `when`) with what grids, and the packing of each
// launch's llmc_cuda_args (cuda_abi.h).
#ifndef LLMC_RUNTIME_EXEC_CUDA_STEP_PLAN_H_
#define LLMC_RUNTIME_EXEC_CUDA_STEP_PLAN_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/cuda_abi.h"
#include "llmc/core/artifact/cuda_launch_expr.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/runtime/cuda/driver_types.h"
#include "llmc/runtime/exec/step_batch.h"

namespace llmc {

// Bytes per element of a CUDA activation type: bf16/f16 2, f32 4; 0 if unknown.
int64_t CudaActivationBytes(const std::string& dtype);

// Device bytes of manifest buffer `index`: its rows (max_batch_tokens or
// max_logits) x row_elems elements of the activation type, except buffers of
// logits rows (the logits, a TP rank's slice of them), always f32.
int64_t CudaBufferBytes(const Manifest& m, size_t index, int64_t max_batch_tokens,
                        int64_t max_logits);

// Flash-decoding: the most `splits` an attention kernel takes. A token of
// the generated attention (paged_attention_decode) uses at most cdiv(its
// context, split_keys) splits, so a step needs no more than cdiv(longest
// context, split_keys); with fewer (the grid's cap min(splits,cap), or
// SelectLaunches' cut once the blocks fill the GPU) each split covers a
// wider share of the keys. 1 for kernels that do not split (split_keys 0).
// The scratch is sized by this count, which bounds every cut one.
int64_t AttentionSplits(int64_t max_context, int64_t split_keys);

// Blocks per SM that an attention launch reaches before it splits keys:
// a wave and a half of the decode kernel (2 blocks an SM at 190
// registers). Past that a split only adds its block's setup, partials and
// merge: at 256 sequences of 256 keys they were three quarters of the
// kernel's instructions (docs/cuda.md). FlashAttention's heuristic stops
// splitting at 0.8 waves; the report put 2, 3 and 4 within 2% of each
// other on the 8B shape but for 4 sequences at 4,096 keys, where 3 was best.
inline constexpr int64_t kAttentionFillBlocksPerSm = 3;

// Where each of the batch's int32 arrays lies in the step's upload, in
// int32 elements from its start; every array starts on a 64-byte boundary.
// The arrays the step's kernels read (llmc_cuda_step_info) come first and
// end at `step_end`, the block tables last among them; the sampler's and
// the feed's inputs follow.
struct StagingLayout {
  int64_t tokens = 0, positions = 0, query_starts = 0, context_lens = 0, slot_mapping = 0,
          logits_rows = 0, block_tables = 0;
  int64_t step_end = 0;
  // The device sampler's inputs (cuda_abi.h): the picks as llmc_cuda_pick,
  // the ids they mask and the tokens they penalize (llmc_cuda_penalty).
  int64_t picks = 0, masked_ids = 0, penalties = 0;
  // The token feed's (llmc_cuda_feed): where the step's fed tokens come
  // from.
  int64_t feeds = 0;
  int64_t total = 0;          // int32 elements of the whole area
  int64_t block_columns = 0;  // columns of the staged block_tables (step_info.max_blocks)
  // A decode step padded to a CUDA graph's batch size: its T = S = L (0:
  // the batch's own sizes).
  int64_t rows = 0;
};
inline constexpr int64_t kStagingAlignInts = 16;
// `block_columns`: the staged block tables' column count, at least
// batch.max_blocks (0: batch.max_blocks). `rows`: a decode batch's
// sequences padded to this many (a CUDA graph's bucket, at least
// batch.num_seqs(); 0: none). Padding rows are sequences of no context
// that write no cache slot: token 0 at position 0, query i, context 0,
// slot -1, their own logits row; the kernels read no block table of theirs.
StagingLayout PlanStaging(const StepBatch& batch, int64_t block_columns = 0, int64_t rows = 0);
// Writes the arrays at their offsets into `out` (layout.total elements).
// Unpadded, the alignment gaps are zeroed and a row's columns past
// batch.max_blocks are -1. Padded (a graph step), only what the upload
// reads is written: the block tables' first batch.max_blocks columns of the
// batch's rows (UploadRows), the rest of every array in full.
void PackStaging(const StepBatch& batch, const StagingLayout& layout, int32_t* out);
// The step's llmc_cuda_step_info, its pointers into the staging area uploaded
// at device address `staging`; max_blocks is layout.block_columns, and a
// padded layout's rows are its T, S and L.
llmc_cuda_step_info MakeStepInfo(const StepBatch& batch, const StagingLayout& layout,
                                 cuda::CUdeviceptr staging, int64_t block_size);

// Every launch of every cuda.kernels entry, parsed once at load.
struct ParsedLaunch {
  std::array<GridExpr, 3> grid;
  WhenExpr when;
  unsigned block = 0;
};
absl::StatusOr<std::vector<std::vector<ParsedLaunch>>> ParseCudaLaunches(const ManifestCuda& cuda);

// The launch variables of a step other than `splits` (which is per kernel):
// T, L, Q (its longest query) and S.
LaunchVars StepLaunchVars(const StepBatch& batch);

// f32 elements of scratch one step needs (the layouts are the kernels' own):
// a header of kScratchHeaderFloats, then the most that one launch of the
// step needs:
//  - the split attention (attn_scratch in llmc_cuda_attention.cuh), for the
//    kernel needing most: a ticket counter per token and head (tokens x
//    heads rounded up to 4, so that the partials start 16-byte aligned; the
//    cache write zeroes them every step) and tokens x heads x splits x
//    (head_dim + 2) (the partial outputs, and their max and sum; splits as
//    the launch's grid has it, e.g. min(splits,32)). Only split launches (a
//    grid over `splits`) that run in this step with more than one split
//    need partials: with one split the kernel writes its output directly,
//    and a prefill step that takes the flash-attention kernel (when Q > ...)
//    needs none;
//  - a split-K GEMM (gemm_split in llmc_cuda_gemm.cuh) that runs in this
//    step: its grid's blocks x its split_floats.
// Launches run one after another, so they share the space.
inline constexpr int64_t kScratchHeaderFloats = 4;
int64_t StepScratchFloats(const ManifestCuda& cuda,
                          const std::vector<std::vector<ParsedLaunch>>& parsed,
                          const LaunchVars& step, int64_t max_context);

// Ticket counters the split-K GEMMs need (args.tickets): the most output
// tiles (grid x * y) of any launch with split_floats at `most`, the largest
// step the runner takes (tiles only grow with T and L). 0: no split-K GEMM.
int64_t SplitGemmTickets(const ManifestCuda& cuda,
                         const std::vector<std::vector<ParsedLaunch>>& parsed,
                         const LaunchVars& most);

// What a selected launch runs: one of the kernel's launches, a part of the
// cuBLASLt GEMM that replaces its own (manifest kernels[i].gemm: the weight
// dequantized when it is not in the activation type, the A operand, the
// matmul, the epilogue), or the step entry's collective (NCCL; a
// tensor-parallel plan).
enum class LaunchKind : uint8_t {
  kKernel,
  kGemmDequant,
  kGemmPre,
  kGemmMatmul,
  kGemmEpi,
  kCollective
};

// One launch a step makes.
struct SelectedLaunch {
  size_t step = 0;    // into cuda.steps
  size_t launch = 0;  // into the step's kernel's launches (kKernel)
  std::array<unsigned, 3> grid{};
  unsigned block = 0;
  int64_t splits = 1;
  LaunchKind kind = LaunchKind::kKernel;
  int64_t rows = 0;   // the GEMM's rows (the gemm kinds)
};
// The launches of one step (`step`: its T, L, Q and S) of longest context
// `max_context`, in plan order: every launch of each step entry whose `when`
// holds, and each collective entry as one kCollective launch. An attention
// launch whose grid has `splits` takes AttentionSplits' count, or fewer: the
// fewest whose blocks reach `fill_blocks` (the GPU's SMs times
// kAttentionFillBlocksPerSm; 0: no cut), at least 1; with `fill_rows` > 0,
// the blocks counted are those of a decode step of that many sequences
// (BucketLaunchVars) instead of the step's own. Fills `out` (cleared
// first; reused across steps so the hot path does not allocate).
// InvalidArgument when a grid dimension falls outside what CUDA launches
// (x 1 to 2^31-1, y and z 1 to 65535).
absl::Status SelectLaunches(const ManifestCuda& cuda,
                            const std::vector<std::vector<ParsedLaunch>>& parsed,
                            const LaunchVars& step, int64_t max_context, int64_t fill_blocks,
                            std::vector<SelectedLaunch>* out, int64_t fill_rows = 0);

// Which kernels' GEMMs cuBLASLt runs (RunnerOptions.gemm): none (the
// generated GEMV/GEMM), every one the artifact offers, or per kernel and
// row count as `llmc tune` measured: `tuned[k]` lists (max_rows, cuBLASLt?)
// by ascending max_rows; a GEMM of r rows takes the first entry with
// max_rows >= r, else the last; a kernel without entries keeps its own.
struct GemmPolicy {
  enum class Mode { kOwn, kCublasLt, kTuned } mode = Mode::kOwn;
  std::vector<std::vector<std::pair<int64_t, bool>>> tuned;
  bool UsesCublasLt(const ManifestCuda& cuda, size_t kernel, int64_t rows) const;
  // At some row count.
  bool MayUseCublasLt(const ManifestCuda& cuda, size_t kernel) const;
};
// Replaces, in each step entry whose kernel's GEMM `policy` gives to
// cuBLASLt, the launches marked impl "llmc" by the GEMM's deq launch (only
// for a weight not in the activation type: grid cdiv(n * k / 8, 256) x
// 256), pre launch, the matmul and its epi launch (where the first of them
// was). `step` gives the
// GEMM's rows (T or L). `scratch` (optional) is reused for the rewritten
// list, so that a runner's hot path does not allocate.
void ApplyGemmPolicy(const ManifestCuda& cuda, const GemmPolicy& policy, const LaunchVars& step,
                     std::vector<SelectedLaunch>* launches,
                     std::vector<SelectedLaunch>* scratch = nullptr);

// CUDA graphs (RunnerOptions.cuda_graphs). A graph bakes in its launches'
// grids and kernel parameters. The runner captures one per batch-size
// bucket at load, for decode steps (every sequence one token) of at most
// kCudaGraphMaxTokens sequences; a decode step of S sequences replays the
// smallest bucket's graph of at least S, its batch padded to the bucket
// (PlanStaging's `rows`). What a graph's launches depend on is fixed per
// bucket: T = S = L = the bucket, Q = 1, block tables as wide as the
// longest context allowed (a step with wider ones runs launch by launch),
// and the attention splits that context takes
// (SelectLaunches at that context: a token's own split count, from its
// context and the grid, is the one a step of the bucket's size would give
// it, and the splits past it add exact zeros). Prefill steps run launch by
// launch.
inline constexpr int64_t kCudaGraphMaxTokens = 256;
// The buckets up to `most` (the runner's largest decode batch): 1, 2, 4, 8,
// then steps of a half and of a third (16, 24, 32, 48, 64, 96, 128, 192,
// 256), so that past 16 padding adds at most half a batch; and `most`
// itself where it falls between two. Ascending.
std::vector<int64_t> CudaGraphBuckets(int64_t most);
// The smallest bucket of CudaGraphBuckets(kCudaGraphMaxTokens) that holds
// `seqs` sequences (0: none). A decode step's attention splits are cut as
// this bucket's are (SelectLaunches' `fill_rows`), graph or not: so a step
// launched one by one and the same step replayed from its bucket's graph
// compute the same bits (where no memory budget left that bucket out).
int64_t CudaGraphBucketOf(int64_t seqs);
// The launch variables of a bucket's decode step: T = L = S = bucket, Q = 1.
LaunchVars BucketLaunchVars(int64_t bucket);
bool IsGraphStep(const StepBatch& batch);
// Field by field (the struct has padding).
bool SameStepInfo(const llmc_cuda_step_info& a, const llmc_cuda_step_info& b);
bool SameLaunches(const std::vector<SelectedLaunch>& a, const std::vector<SelectedLaunch>& b);

// The device addresses a step plan binds.
struct CudaBindings {
  std::vector<cuda::CUdeviceptr> buffers;  // per manifest buffer; 0 where not allocated
  cuda::CUdeviceptr weights = 0;           // the weight file's copy; tensors at their offsets
  std::vector<cuda::CUdeviceptr> caches;   // 2 per layer: K, V
  cuda::CUdeviceptr scratch = 0;           // 0 when no kernel splits attention
  cuda::CUdeviceptr gemm_a = 0, gemm_d = 0; // cuBLASLt operands; 0 without cuBLASLt GEMMs
  cuda::CUdeviceptr gemm_b = 0;             // dequantized weights; 0 without such GEMMs
  cuda::CUdeviceptr tickets = 0;            // split-K GEMMs' tickets; 0 without them
};
// llmc_cuda_args of cuda.steps entry `step`, bindings in the step's order.
absl::StatusOr<llmc_cuda_args> PackArgs(const Manifest& m, const ManifestStep& step,
                                        const CudaBindings& bindings);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_CUDA_STEP_PLAN_H_
