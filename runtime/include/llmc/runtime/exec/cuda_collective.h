// The collectives of a tensor-parallel CUDA step plan (cuda.steps entries
// with `collective`, kernel -1, buffers [input, output]) as pure functions,
// so that they are tested without a GPU: what each moves, in which element
// type, checked against its buffers as the host plan's are
// (host_collective.h, manifest_validate.cc), and how an all-gather's
// rank-major result becomes rows of the output.
//
// Element types on the device (CudaBufferBytes): every buffer of logits rows
// (the logits, and the slice of them a vocabulary-parallel LM head writes on
// each rank) is f32, every other buffer the activation type (bf16, f16 or
// f32). So a collective's input and output have one element type: NCCL
// moves it unconverted, and an all-gather's rows are laid out on the device
// (PlanGatherCopies). One whose types differ is refused; the runtime has no
// kernel of its own to convert with (every kernel comes from the artifact).
#ifndef LLMC_RUNTIME_EXEC_CUDA_COLLECTIVE_H_
#define LLMC_RUNTIME_EXEC_CUDA_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/core/artifact/manifest.h"

namespace llmc {

enum class CudaElem { kF32, kF16, kBF16 };
// "f32", "f16", "bf16".
const char* CudaElemName(CudaElem e);
int64_t CudaElemBytes(CudaElem e);

struct CudaCollective {
  enum class Kind { kAllReduceSum, kAllGather };
  Kind kind = Kind::kAllReduceSum;
  size_t step = 0;                       // into cuda.steps
  size_t in_buffer = 0, out_buffer = 0;  // into buffers
  int64_t in_row_elems = 0, out_row_elems = 0;
  bool logits_rows = false;  // rows are the step's logits rows (L), else its tokens (T)
  CudaElem in_elem = CudaElem::kF32, out_elem = CudaElem::kF32;  // equal

  // "CUDA step 20 (all_gather of 151 bf16 per logits row)": how errors name it.
  std::string Describe() const;
};

// The collective of cuda.steps[step] (the CUDA plan of a tensor-parallel
// artifact of `ranks` ranks). FailedPrecondition naming the step when the
// plan asks for something this executor cannot run: another collective, a
// binding other than two buffers, input and output of different element
// types or kinds of rows, widths that do not fit the buffers, an all-reduce
// that changes the width, or an all-gather that the ranks' pieces do not
// fill.
absl::StatusOr<CudaCollective> MakeCudaCollective(const Manifest& m, size_t step, int64_t ranks);

// A pipeline stage's `send` or `recv` entry (buffers [hidden state], a
// neighbour stage as `peer`): the step's token rows of the buffer, in its
// device element type, to or from the same tensor-parallel rank of that
// stage (world rank peer * tp + this rank's tp rank), staged through host
// memory and the world communicator.
struct CudaTransfer {
  size_t step = 0;  // into cuda.steps
  bool send = false;
  size_t buffer = 0;
  int peer_rank = -1;  // in the world
  int64_t row_bytes = 0;

  // "CUDA step 0 (recv of 128 f16 per token row from rank 0)".
  std::string Describe() const;
};

// The transfer of cuda.steps[step] for tensor-parallel rank `tp_rank`.
// FailedPrecondition naming the step for a binding other than one buffer of
// token rows, an artifact without stages, or a row wider than the buffer.
absl::StatusOr<CudaTransfer> MakeCudaTransfer(const Manifest& m, size_t step, int tp_rank);

// Elements one rank sends: rows x in_row_elems (an all-reduce: also what
// it receives).
int64_t CollectiveElements(const CudaCollective& c, int64_t rows);

// Where an all-gather's result lies: ranks x [rows, in_row_elems] in a
// scratch area (what ncclAllGather writes), and the copies that make each
// output row the ranks' pieces side by side, cut to out_row_elems. One 2D
// copy per rank (cuMemcpy2DAsync): `height` rows of `width_bytes`, from the
// scratch (pitch: a piece) to the output (pitch: an output row). Ranks
// whose piece lies wholly past out_row_elems (padding) copy nothing.
struct GatherCopy {
  int64_t src_offset = 0, src_pitch = 0;  // bytes, from the scratch
  int64_t dst_offset = 0, dst_pitch = 0;  // bytes, from the output buffer
  int64_t width_bytes = 0, height = 0;
};
std::vector<GatherCopy> PlanGatherCopies(const CudaCollective& c, int64_t rows, int64_t ranks);
// Bytes of the scratch an all-gather of up to `rows` rows needs.
int64_t GatherScratchBytes(const CudaCollective& c, int64_t rows, int64_t ranks);

}  // namespace llmc

#endif  // LLMC_RUNTIME_EXEC_CUDA_COLLECTIVE_H_
