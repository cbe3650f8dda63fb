// llmc host kernel library: rope.
//
// Rotary position embeddings: inverse frequencies (HF scaling, llama.cpp
// freq_factors) and the rope kernel.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_ROPE_H_
#define LLMC_HOST_ROPE_H_

#include "llmc_host_parallel.h"

namespace llmc {
namespace host {
namespace detail {

// Inverse RoPE frequencies of the P pairs, in double.
inline void rope_inv_freq(int64_t pairs, int64_t head_dim, double theta, const rope_scaling& sc,
                          const float* freq_factors, double* inv) {
  constexpr double kPi = 3.14159265358979323846;
  for (int64_t i = 0; i < pairs; ++i) {
    double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (sc.kind == rope_scaling_kind::linear) {
      f /= sc.factor;
    } else if (sc.kind == rope_scaling_kind::llama3) {
      // Hugging Face's _compute_llama3_parameters.
      const double old_ctx = static_cast<double>(sc.original_max_position);
      const double low_wavelen = old_ctx / sc.low_freq_factor;
      const double high_wavelen = old_ctx / sc.high_freq_factor;
      const double wavelen = 2.0 * kPi / f;
      if (wavelen > low_wavelen) {
        f /= sc.factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth =
            (old_ctx / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        f = (1.0 - smooth) * f / sc.factor + smooth * f;
      }
    }
    if (freq_factors != nullptr) f /= static_cast<double>(freq_factors[i]);
    inv[i] = f;
  }
}

}  // namespace detail
}  // namespace host
}  // namespace llmc

namespace llmc {
namespace host {

// Rotary embedding of x [T, Heads*HeadDim] into out (out == x allowed) at
// step->positions. Pair i rotates by positions[t] * inv_freq[i], inv_freq[i] =
// theta^(-2i/HeadDim), scaled by `scaling` (HF semantics) and divided by
// freq_factors[i] when given (llama.cpp semantics; HeadDim/2 f32 values).
// Frequencies, angles, cos and sin are computed in double and rounded once to
// float: the result is within a few float ulps of exact, at any position.
namespace detail {

// cos/sin of one position for the HeadDim/2 pairs, laid out for Style: half
// keeps one value per pair; interleaved repeats it for both lanes of the pair
// with s = (-sin, sin) so that a pair rotates with one swap and one FMA.
template <int64_t HeadDim, rope_style Style>
LLMC_HOST_INLINE void rope_cos_sin(double pos, const double* inv, float* c, float* s) {
  constexpr int64_t P = HeadDim / 2;
  for (int64_t i = 0; i < P; ++i) {
    const double a = pos * inv[i];
    const float ci = static_cast<float>(std::cos(a)), si = static_cast<float>(std::sin(a));
    if constexpr (Style == rope_style::half) {
      c[i] = ci;
      s[i] = si;
    } else {
      c[2 * i] = c[2 * i + 1] = ci;
      s[2 * i] = -si;
      s[2 * i + 1] = si;
    }
  }
}

// Rotates `heads` consecutive heads of one token from xi into o (o == xi allowed).
template <int64_t HeadDim, rope_style Style>
LLMC_HOST_INLINE void rope_heads(const float* xi, float* o, int64_t heads, const float* c,
                                 const float* s) {
  constexpr int64_t P = HeadDim / 2;
  for (int64_t h = 0; h < heads; ++h, xi += HeadDim, o += HeadDim) {
    int64_t i = 0;
    if constexpr (Style == rope_style::half) {
      for (; i + 8 <= P; i += 8) {
        const vf x0 = vload(xi + i), x1 = vload(xi + P + i);
        const vf cv = vload(c + i), sv = vload(s + i);
        vstore(o + i, vsub(vmul(x0, cv), vmul(x1, sv)));
        vstore(o + P + i, vfma(x0, sv, vmul(x1, cv)));
      }
      for (; i < P; ++i) {
        const float x0 = xi[i], x1 = xi[P + i];
        o[i] = x0 * c[i] - x1 * s[i];
        o[P + i] = x1 * c[i] + x0 * s[i];
      }
    } else {
      for (; i + 8 <= HeadDim; i += 8) {
        const vf xv = vload(xi + i);
        vstore(o + i, vfma(vswap_pairs(xv), vload(s + i), vmul(xv, vload(c + i))));
      }
      for (; i < HeadDim; i += 2) {
        const float x0 = xi[i], x1 = xi[i + 1];
        o[i] = x0 * c[i] + x1 * s[i];  // s[i] = -sin
        o[i + 1] = x1 * c[i + 1] + x0 * s[i + 1];
      }
    }
  }
}

// Writes the cos/sin rows ([T][2][HeadDim]: cos row then sin row) of the
// step's positions into `table`.
template <int64_t HeadDim, rope_style Style>
inline void rope_fill_rows(const llmc_host_step_info* step, double theta, const rope_scaling& sc,
                           const float* freq_factors, float* table) {
  constexpr int64_t P = HeadDim / 2;
  double inv[P];
  rope_inv_freq(P, HeadDim, theta, sc, freq_factors, inv);
  const int32_t* positions = step->positions;
  for_tokens(step, 64 * HeadDim, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      rope_cos_sin<HeadDim, Style>(static_cast<double>(positions[t]), inv, table + t * 2 * HeadDim,
                                   table + t * 2 * HeadDim + HeadDim);
  });
}

// The cos/sin rows ([T][2][HeadDim]: cos row then sin row) of the step's
// positions for one RoPE configuration, kept on the calling thread and
// reused while the positions and the configuration stay the same: the query
// and key RoPEs of an attention kernel, and those of every layer of a step,
// then compute each position's cos/sin once instead of once per call (the
// same values: one rope_cos_sin per position either way). The key holds the
// frequency factors' values, not their address, so it never outlives them.
// The rows stay valid until the thread's next call with another key.
template <int64_t HeadDim, rope_style Style>
LLMC_HOST_OWN_STATE inline const float* rope_cos_sin_rows(const llmc_host_step_info* step,
                                                          double theta, const rope_scaling& sc,
                                                          const float* freq_factors) {
  constexpr int64_t P = HeadDim / 2;
  thread_local struct cache {
    bool valid = false, has_factors = false;
    double theta = 0;
    rope_scaling sc;
    float factors[P] = {};
    std::vector<int32_t> positions;
    std::vector<float> cs;
  } c;
  const int64_t T = step->num_tokens;
  const int32_t* positions = step->positions;
  const size_t n = static_cast<size_t>(T);
  const bool hit =
      c.valid && c.theta == theta && c.sc.kind == sc.kind && c.sc.factor == sc.factor &&
      c.sc.low_freq_factor == sc.low_freq_factor && c.sc.high_freq_factor == sc.high_freq_factor &&
      c.sc.original_max_position == sc.original_max_position &&
      c.has_factors == (freq_factors != nullptr) &&
      (freq_factors == nullptr || std::memcmp(c.factors, freq_factors, sizeof c.factors) == 0) &&
      c.positions.size() == n &&
      std::memcmp(c.positions.data(), positions, n * sizeof(int32_t)) == 0;
  if (hit) return c.cs.data();
  c.valid = false;
  c.cs.resize(n * 2 * HeadDim);
  float* table = c.cs.data();
  rope_fill_rows<HeadDim, Style>(step, theta, sc, freq_factors, table);
  c.theta = theta;
  c.sc = sc;
  c.has_factors = freq_factors != nullptr;
  if (freq_factors != nullptr) std::memcpy(c.factors, freq_factors, sizeof c.factors);
  c.positions.assign(positions, positions + n);
  c.valid = true;
  return table;
}

}  // namespace detail

template <int64_t Heads, int64_t HeadDim, rope_style Style, class Act = float>
void rope(const llmc_host_step_info* step, const Act* x, Act* out, double theta,
          const rope_scaling& scaling = {}, const float* freq_factors = nullptr) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(HeadDim % 2 == 0, "RoPE needs an even head_dim");
  constexpr int64_t W = Heads * HeadDim;
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const float* cs = detail::rope_cos_sin_rows<HeadDim, Style>(step, theta, scaling, freq_factors);
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = cs + t * 2 * HeadDim;
      detail::rope_heads<HeadDim, Style>(x + t * W, out + t * W, Heads, c, c + HeadDim);
    }
  };
  parallel_for(step, T, std::max<int64_t>(4, detail::token_grain(W)), body);
}

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_ROPE_H_
