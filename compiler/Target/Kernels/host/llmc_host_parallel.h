// llmc host kernel library: parallel.
//
// How kernels split work: chunk sizes (grains), per-thread scratch, loops
// over token rows and over elements.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_PARALLEL_H_
#define LLMC_HOST_PARALLEL_H_

#include "llmc_host_simd.h"

namespace llmc {
namespace host {
namespace detail {

// Weight rows per parallel chunk: about 64 chunks (2–16 threads each get 4+
// of them, so a dynamic pool balances within a chunk), but at least ~16K
// multiply-adds per chunk so the pool's overhead stays small.
inline int64_t rows_grain(int64_t n, int64_t k, int64_t m) {
  const int64_t work = std::max<int64_t>(k * std::max<int64_t>(m, 1), 1);
  int64_t g = std::max<int64_t>((n + 63) / 64, (16384 + work - 1) / work);
  return std::min(std::max<int64_t>(g, 1), std::max<int64_t>(n, 1));
}

// Token rows per parallel chunk for per-token kernels (norms, rope, embed):
// at least ~16K elements per chunk.
inline int64_t token_grain(int64_t width) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
}

inline constexpr int64_t kParallelElems = 1 << 16;  // elementwise: parallel above this
inline constexpr int64_t kElemGrain = 1 << 14;

template <class VecOp, class ScalarOp>
inline void map_elems(const llmc_host_step_info* step, int64_t total, const VecOp& vop,
                      const ScalarOp& sop) {
  auto body = [&](int64_t b, int64_t e) {
    const int64_t vend = b + (e - b) / 8 * 8;
    for (int64_t i = b; i < vend; i += 8) vop(i);
    for (int64_t i = vend; i < e; ++i) sop(i);
  };
  if (total >= kParallelElems)
    parallel_for(step, total, kElemGrain, body);
  else
    body(0, total);
}

// Per-thread scratch that grows and is kept between calls; `Tag` keeps the
// prologue's rows apart from the GEMM tiles and the RoPE tables.
template <class Tag>
LLMC_HOST_OWN_STATE inline float* scratch(size_t floats) {
  thread_local struct buffer {
    float* p = nullptr;
    size_t n = 0;
    ~buffer() { delete[] p; }
  } buf;
  if (buf.n < floats) {
    delete[] buf.p;
    buf.p = new float[floats];
    buf.n = floats;
  }
  return buf.p;
}
struct prologue_tag {};
struct tile_tag {};

// Runs f(r0, r1) over [0, rows): on the calling thread when the work is
// small (a decode step), else across the pool.
template <class F>
inline void for_rows(const llmc_host_step_info* step, int64_t rows, int64_t width, const F& f) {
  if (rows * width < kParallelElems)
    f(int64_t{0}, rows);
  else
    parallel_for(step, rows, token_grain(width), f);
}
// for_rows over the step's tokens.
template <class F>
inline void for_tokens(const llmc_host_step_info* step, int64_t width, const F& f) {
  for_rows(step, step->num_tokens, width, f);
}

}  // namespace detail
}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_PARALLEL_H_
