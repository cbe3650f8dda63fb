#include "llmc/runtime/exec/cuda_collective.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace llmc {
namespace {

// A buffer's element type on the device (CudaBufferBytes' rule): f32 for
// logits rows, else the activation type.
bool DeviceElem(const Manifest& m, size_t buffer, CudaElem* out) {
  if (m.buffers[buffer].rows == "logits") {
    *out = CudaElem::kF32;
    return true;
  }
  const std::string& t = m.cuda.activation_dtype;
  if (t == "f32")
    *out = CudaElem::kF32;
  else if (t == "f16")
    *out = CudaElem::kF16;
  else if (t == "bf16")
    *out = CudaElem::kBF16;
  else
    return false;
  return true;
}

}  // namespace

const char* CudaElemName(CudaElem e) {
  switch (e) {
    case CudaElem::kF32:
      return "f32";
    case CudaElem::kF16:
      return "f16";
    case CudaElem::kBF16:
      return "bf16";
  }
  return "?";
}

int64_t CudaElemBytes(CudaElem e) { return e == CudaElem::kF32 ? 4 : 2; }

std::string CudaCollective::Describe() const {
  return absl::StrFormat("CUDA step %d (%s of %d %s per %s row)", step,
                         kind == Kind::kAllReduceSum ? "all_reduce_sum" : "all_gather",
                         in_row_elems, CudaElemName(in_elem), logits_rows ? "logits" : "token");
}

absl::StatusOr<CudaCollective> MakeCudaCollective(const Manifest& m, size_t step, int64_t ranks) {
  const ManifestStep& s = m.cuda.steps[step];
  auto fail = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrFormat("CUDA step %d (%s): %s", step, s.collective, why));
  };
  CudaCollective c;
  c.step = step;
  if (s.collective == "all_reduce_sum")
    c.kind = CudaCollective::Kind::kAllReduceSum;
  else if (s.collective == "all_gather")
    c.kind = CudaCollective::Kind::kAllGather;
  else
    return fail("not a collective the CUDA executor knows");
  if (s.kernel != -1 || !s.weights.empty() || !s.caches.empty())
    return fail("a collective launches no kernel and binds no weights or caches");
  if (s.buffers.size() != 2) return fail("needs an input and an output buffer");
  for (int64_t b : s.buffers)
    if (b < 0 || size_t(b) >= m.buffers.size())
      return fail(absl::StrFormat("buffer %d is out of range", b));
  c.in_buffer = size_t(s.buffers[0]);
  c.out_buffer = size_t(s.buffers[1]);
  const ManifestBuffer& in = m.buffers[c.in_buffer];
  const ManifestBuffer& out = m.buffers[c.out_buffer];
  if (!DeviceElem(m, c.in_buffer, &c.in_elem) || !DeviceElem(m, c.out_buffer, &c.out_elem))
    return fail(
        absl::StrFormat("activation type '%s' is not bf16, f16 or f32", m.cuda.activation_dtype));
  // Neither collective converts: NCCL moves one type, and the runtime has
  // no kernel of its own to widen or narrow with.
  if (c.in_elem != c.out_elem)
    return fail(absl::StrFormat(
        "%s keeps the element type, not %s -> %s (buffer '%s' of %s rows to '%s' of %s rows; "
        "on the device logits rows are f32, other rows the activation type)",
        c.kind == CudaCollective::Kind::kAllReduceSum ? "an all-reduce" : "an all-gather",
        CudaElemName(c.in_elem), CudaElemName(c.out_elem), in.name, in.rows, out.name, out.rows));
  c.in_row_elems = s.in_row_elems;
  c.out_row_elems = s.out_row_elems;
  c.logits_rows = out.rows == "logits";
  if (in.rows != out.rows) return fail("its input and output rows differ in kind");
  // Rows are packed at the value's width, within the buffer's widest row.
  if (c.in_row_elems <= 0 || c.out_row_elems <= 0 || c.in_row_elems > in.row_elems ||
      c.out_row_elems > out.row_elems)
    return fail(absl::StrFormat("row widths %d -> %d do not fit its buffers (%d and %d elements)",
                                c.in_row_elems, c.out_row_elems, in.row_elems, out.row_elems));
  if (c.kind == CudaCollective::Kind::kAllReduceSum) {
    if (c.in_row_elems != c.out_row_elems) return fail("an all-reduce keeps the row width");
    return c;
  }
  if (c.in_buffer == c.out_buffer) return fail("an all-gather needs an output of its own");
  if (c.in_row_elems * ranks < c.out_row_elems || c.in_row_elems * (ranks - 1) >= c.out_row_elems)
    return fail(absl::StrFormat("%d ranks of %d columns do not make rows of %d", ranks,
                                c.in_row_elems, c.out_row_elems));
  return c;
}

std::string CudaTransfer::Describe() const {
  return absl::StrFormat("CUDA step %d (%s of %d bytes per token row %s rank %d)", step,
                         send ? "send" : "recv", row_bytes, send ? "to" : "from", peer_rank);
}

absl::StatusOr<CudaTransfer> MakeCudaTransfer(const Manifest& m, size_t step, int tp_rank) {
  const ManifestStep& s = m.cuda.steps[step];
  auto fail = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrFormat("CUDA step %d (%s): %s", step, s.collective, why));
  };
  CudaTransfer t;
  t.step = step;
  t.send = s.collective == "send";
  if (!t.send && s.collective != "recv") return fail("not a pipeline transfer");
  if (m.mesh.pp < 2) return fail("a pipeline transfer in an artifact without stages");
  if (s.kernel != -1 || !s.weights.empty() || !s.caches.empty() || s.buffers.size() != 1 ||
      s.buffers[0] < 0 || size_t(s.buffers[0]) >= m.buffers.size())
    return fail("a transfer launches no kernel and binds one buffer");
  t.buffer = size_t(s.buffers[0]);
  const ManifestBuffer& b = m.buffers[t.buffer];
  CudaElem elem;
  if (b.rows == "logits" || !DeviceElem(m, t.buffer, &elem))
    return fail(absl::StrFormat("buffer '%s' is not of token rows in bf16, f16 or f32", b.name));
  const int64_t row_elems = t.send ? s.in_row_elems : s.out_row_elems;
  if (row_elems <= 0 || row_elems > b.row_elems)
    return fail(absl::StrFormat("rows of %d elements do not fit buffer '%s' (%d)", row_elems,
                                b.name, b.row_elems));
  t.row_bytes = row_elems * CudaElemBytes(elem);
  t.peer_rank = int(s.peer * m.mesh.tp + tp_rank);
  return t;
}

int64_t CollectiveElements(const CudaCollective& c, int64_t rows) { return rows * c.in_row_elems; }

int64_t GatherScratchBytes(const CudaCollective& c, int64_t rows, int64_t ranks) {
  return ranks * rows * c.in_row_elems * CudaElemBytes(c.in_elem);
}

std::vector<GatherCopy> PlanGatherCopies(const CudaCollective& c, int64_t rows, int64_t ranks) {
  std::vector<GatherCopy> copies;
  const int64_t bytes = CudaElemBytes(c.in_elem);  // the output's too (MakeCudaCollective)
  const int64_t piece = c.in_row_elems;
  if (rows <= 0) return copies;
  for (int64_t k = 0; k < ranks; ++k) {
    const int64_t first = k * piece;
    const int64_t n = std::min(piece, c.out_row_elems - first);
    if (n <= 0) break;
    GatherCopy g;
    g.src_offset = k * rows * piece * bytes;
    g.src_pitch = piece * bytes;
    g.dst_offset = first * bytes;
    g.dst_pitch = c.out_row_elems * bytes;
    g.width_bytes = n * bytes;
    g.height = rows;
    copies.push_back(g);
  }
  return copies;
}

}  // namespace llmc
