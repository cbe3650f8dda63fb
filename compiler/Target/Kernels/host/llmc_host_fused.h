// llmc host kernel library: fused.
//
// Fused kernels: the pieces a fusion group's generated kernel composes
// (prologue rows, GEMM over merged weights with an epilogue per tile,
// elementwise groups) and the expression math they call.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_FUSED_H_
#define LLMC_HOST_FUSED_H_

#include "llmc_host_norms.h"
#include "llmc_host_rope.h"
#include "llmc_host_elementwise.h"
#include "llmc_host_q8.h"

namespace llmc {
namespace host {

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//
//
// A fusion group's generated kernel composes these: prologue rows (an
// elementwise expression and/or a norm, once per token), a GEMM over the
// regions of a merged weight, and an epilogue on each output tile (RoPE, then
// an elementwise expression written by the shared expression emitter).

// Elementwise math for generated expressions. The same statement text runs
// on 8 lanes (vf) and on single lanes (float) through overloading, and the
// CUDA target provides the same names; see compiler/Target/Common/ExprEmitter.
namespace detail {
LLMC_HOST_INLINE vf operator+(vf a, vf b) { return vadd(a, b); }
LLMC_HOST_INLINE vf operator-(vf a, vf b) { return vsub(a, b); }
LLMC_HOST_INLINE vf operator*(vf a, vf b) { return vmul(a, b); }
}  // namespace detail

namespace expr {
LLMC_HOST_INLINE float silu(float x) { return detail::silu1(x); }
LLMC_HOST_INLINE detail::vf silu(detail::vf x) { return detail::silu8(x); }
LLMC_HOST_INLINE float gelu_tanh(float x) { return detail::gelu_tanh1(x); }
LLMC_HOST_INLINE detail::vf gelu_tanh(detail::vf x) { return detail::gelu_tanh8(x); }
LLMC_HOST_INLINE float gelu_erf(float x) { return detail::gelu_erf1(x); }
LLMC_HOST_INLINE detail::vf gelu_erf(detail::vf x) {  // erfc has no vector form here
  alignas(32) float v[8];
  detail::vstore(v, x);
  for (float& e : v) e = detail::gelu_erf1(e);
  return detail::vload(v);
}
}  // namespace expr

// Lane tags: how generated bodies load and store V::n consecutive floats.
struct lanes8 {
  static LLMC_HOST_INLINE detail::vf load(const float* p) { return detail::vload(p); }
  static LLMC_HOST_INLINE void store(float* p, detail::vf v) { detail::vstore(p, v); }
};
struct lanes1 {
  static LLMC_HOST_INLINE float load(const float* p) { return *p; }
  static LLMC_HOST_INLINE void store(float* p, float v) { *p = v; }
};

// body(lanes, t, j) for rows [t0, t1) and columns [j0, j1): 8 columns at a
// time, then single columns.
template <class Body>
LLMC_HOST_INLINE void for_each_lane(int64_t t0, int64_t t1, int64_t j0, int64_t j1,
                                    const Body& body) {
  for (int64_t t = t0; t < t1; ++t) {
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) body(lanes8{}, t, j);
    for (; j < j1; ++j) body(lanes1{}, t, j);
  }
}


// Computes each token's prologue row row(t, out) into scratch [T, K] and
// returns it; the rows are ready when this returns.
template <int64_t K, class RowFn>
inline const float* prologue_rows(const llmc_host_step_info* step, const RowFn& row) {
  float* x = detail::scratch<detail::prologue_tag>(
      static_cast<size_t>(std::max<int64_t>(step->num_tokens, 1) * K));
  detail::for_tokens(step, K, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) row(t, x + t * K);
  });
  return x;
}

// cos/sin of every token of the step for one RoPE configuration, computed
// once per kernel and shared by the tiles that rotate heads.
template <int64_t HeadDim, rope_style Style>
struct rope_table {
  // [T][2][HeadDim]: cos row then sin row. Owned, so that the tables of one
  // kernel (Q and K may differ) never share or move each other's storage.
  std::vector<float> storage;
  float* cs = nullptr;

  // `slot` numbers the tables of one kernel (kept for the generated calls).
  void build(const llmc_host_step_info* step, int slot, double theta, const rope_scaling& sc,
             const float* freq_factors) {
    (void)slot;
    storage.resize(static_cast<size_t>(std::max<int64_t>(step->num_tokens, 1)) * 2 * HeadDim);
    cs = storage.data();
    detail::rope_fill_rows<HeadDim, Style>(step, theta, sc, freq_factors, cs);
  }

  // Rotates, in place, the heads in columns [j0, j1) (multiples of HeadDim)
  // of a tile holding tokens [t0, t1) with leading dimension ld.
  void apply(float* tile, int64_t ld, int64_t t0, int64_t t1, int64_t j0, int64_t j1) const {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = cs + t * 2 * HeadDim;
      float* row = tile + (t - t0) * ld;
      detail::rope_heads<HeadDim, Style>(row, row, (j1 - j0) / HeadDim, c, c + HeadDim);
    }
  }
};

// Where one projection's rows live in a merged weight, and the column
// granularity its epilogue needs (a RoPE head, or 8 lanes).
struct gemm_region {
  int64_t offset;
  int64_t width;
  int64_t align;
};

inline constexpr int64_t kFusedTokenBlock = 64;  // tokens per tile

// The GEMM of a fused group: x [T, K] times a merged weight [sum widths, K]
// in Fmt (+ an optional bias in BiasFmt over the merged rows), handed to
// epi(region, t0, t1, j0, j1, tiles, ld) tile by tile. Each tile holds tokens
// [t0, t1) and region-local columns [j0, j1); tiles[r] points at region r's
// values (leading dimension ld) and epi may overwrite them.
//
// Paired: every region has the same width and each tile holds the same
// columns of all of them (an epilogue that combines gate and up, region = -1).
// Otherwise each tile belongs to one region (Q, K, V with RoPE on two).
template <class Fmt, int64_t K, int64_t R, bool Paired, class BiasFmt, bool Q8, class XRow,
          class Epi>
void fused_gemm(const llmc_host_step_info* step, const XRow& xrow, const void* weight,
                const void* bias, const gemm_region (&regions)[R], const Epi& epi) {
  static_assert(K % Fmt::block_elems == 0, "K must be a whole number of blocks");
  static_assert(!Q8 || detail::takes_q8<Fmt>::value, "this format has no q8-activation path");
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const block_q8* xq = nullptr;
  if constexpr (Q8) xq = detail::quantize_rows_q8<K>(step, T, xrow);
  (void)xq;
  int64_t total = 0, align = 8;
  for (const gemm_region& g : regions) {
    total += g.width;
    align = std::max(align, g.align);
  }
  struct item {
    int64_t region, j0, j1;
  };
  std::vector<item> items;
  const int64_t grain = detail::rows_grain(total, K, T);
  auto chunk_of = [&](int64_t a, int64_t w) {
    const int64_t c = (grain + a - 1) / a * a;
    return std::min(std::max(c, a), w);
  };
  if constexpr (Paired) {
    const int64_t w = regions[0].width;
    const int64_t c = chunk_of(align, w);
    for (int64_t j = 0; j < w; j += c) items.push_back({-1, j, std::min(w, j + c)});
  } else {
    for (int64_t r = 0; r < R; ++r) {
      const int64_t c = chunk_of(regions[r].align, regions[r].width);
      for (int64_t j = 0; j < regions[r].width; j += c)
        items.push_back({r, j, std::min(regions[r].width, j + c)});
    }
  }
  const uint8_t* wb = static_cast<const uint8_t*>(weight);
  const int64_t tb = std::min<int64_t>(T, kFusedTokenBlock);
  auto run = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const item it = items[static_cast<size_t>(i)];
      const int64_t ld = it.j1 - it.j0;
      float* base = detail::scratch<detail::tile_tag>(static_cast<size_t>(R * tb * ld));
      float* tiles[R];
      for (int64_t r = 0; r < R; ++r) tiles[r] = base + r * tb * ld;
      for (int64_t t0 = 0; t0 < T; t0 += tb) {
        const int64_t t1 = std::min(T, t0 + tb);
        auto one = [&](int64_t r) {
          float* tile = tiles[r];
          const int64_t n0 = regions[r].offset + it.j0;
          auto store = [&](int64_t m, int64_t n, float v) {
            if constexpr (!std::is_void_v<BiasFmt>) v += detail::load_plain<BiasFmt>(bias, n);
            tile[m * ld + (n - n0)] = v;
          };
          if constexpr (Q8) {
            auto xr = [&](int64_t m) { return xq + (t0 + m) * (K / 32); };
            detail::gemm_q8<Fmt>(wb, K, n0, n0 + ld, t1 - t0, xr, store);
          } else {
            auto xr = [&](int64_t m) { return xrow(t0 + m); };
            detail::gemm<Fmt>(wb, K, n0, n0 + ld, t1 - t0, xr, store);
          }
        };
        if (it.region < 0)
          for (int64_t r = 0; r < R; ++r) one(r);
        else
          one(it.region);
        epi(it.region, t0, t1, it.j0, it.j1, static_cast<float* const*>(tiles), ld);
      }
    }
  };
  parallel_for(step, static_cast<int64_t>(items.size()), 1, run);
}

// An elementwise group without a GEMM: body(lanes, t, j) over [T, W].
template <int64_t W, class Body>
void fused_elementwise(const llmc_host_step_info* step, const Body& body) {
  detail::for_tokens(step, W, [&](int64_t t0, int64_t t1) { for_each_lane(t0, t1, 0, W, body); });
}

}  // namespace host
}  // namespace llmc

namespace llmc {
// Generated expressions name their functions llmc::expr::* on every target.
namespace expr = host::expr;
}  // namespace llmc

#endif  // LLMC_HOST_FUSED_H_
