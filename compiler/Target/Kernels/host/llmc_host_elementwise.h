// llmc host kernel library: elementwise.
//
// Elementwise kernels (silu, gelu, mul, add, silu_mul) and their scalar and
// 8-lane activation functions.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_ELEMENTWISE_H_
#define LLMC_HOST_ELEMENTWISE_H_

#include "llmc_host_parallel.h"

namespace llmc {
namespace host {
namespace detail {

LLMC_HOST_INLINE float silu1(float x) { return x / (1.0f + std::exp(-x)); }
LLMC_HOST_INLINE vf silu8(vf x) { return vdiv(x, vadd(vset1(1.0f), vexp(vsub(vzero(), x)))); }

// gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3).
inline constexpr float kGeluC0 = 0.7978845608028654f;
inline constexpr float kGeluC1 = 0.7978845608028654f * 0.044715f;
LLMC_HOST_INLINE float gelu_tanh1(float x) {
  const float u2 = 2.0f * x * (kGeluC0 + kGeluC1 * x * x);
  return x / (1.0f + std::exp(-u2));
}
LLMC_HOST_INLINE vf gelu_tanh8(vf x) {
  const vf u2 = vmul(vset1(-2.0f), vmul(x, vfma(vset1(kGeluC1), vmul(x, x), vset1(kGeluC0))));
  return vdiv(x, vadd(vset1(1.0f), vexp(u2)));
}
// gelu_erf(x) = 0.5 x (1 + erf(x/sqrt 2)) = 0.5 x erfc(-x/sqrt 2), which keeps
// full relative accuracy for negative x.
LLMC_HOST_INLINE float gelu_erf1(float x) {
  return 0.5f * x * std::erfc(-x * 0.70710678118654752f);
}

}  // namespace detail
}  // namespace host
}  // namespace llmc

namespace llmc {
namespace host {

// Elementwise kernels on [T, N]; out may alias an input.
template <int64_t N, class Act = float>
void silu(const llmc_host_step_info* step, const Act* x, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) { detail::vstore(y + i, detail::silu8(detail::vload(x + i))); },
      [&](int64_t i) { y[i] = detail::silu1(x[i]); });
}

template <int64_t N, gelu_approx Approx, class Act = float>
void gelu(const llmc_host_step_info* step, const Act* x, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  if constexpr (Approx == gelu_approx::tanh) {
    detail::map_elems(
        step, step->num_tokens * N,
        [&](int64_t i) { detail::vstore(y + i, detail::gelu_tanh8(detail::vload(x + i))); },
        [&](int64_t i) { y[i] = detail::gelu_tanh1(x[i]); });
  } else {
    // Not vectorized (erfc); see README.
    auto one = [&](int64_t i) { y[i] = detail::gelu_erf1(x[i]); };
    detail::map_elems(
        step, step->num_tokens * N,
        [&](int64_t i) {
          for (int j = 0; j < 8; ++j) one(i + j);
        },
        one);
  }
}

template <int64_t N, class Act = float>
void mul(const llmc_host_step_info* step, const Act* a, const Act* b, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) { detail::vstore(y + i, detail::vmul(detail::vload(a + i), detail::vload(b + i))); },
      [&](int64_t i) { y[i] = a[i] * b[i]; });
}

template <int64_t N, class Act = float>
void add(const llmc_host_step_info* step, const Act* a, const Act* b, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) { detail::vstore(y + i, detail::vadd(detail::vload(a + i), detail::vload(b + i))); },
      [&](int64_t i) { y[i] = a[i] + b[i]; });
}

// y = silu(gate) * up (the SwiGLU of Llama MLPs, for a fused epilogue).
template <int64_t N, class Act = float>
void silu_mul(const llmc_host_step_info* step, const Act* gate, const Act* up, Act* y) {
  LLMC_HOST_CHECK_ACT(Act);
  detail::map_elems(
      step, step->num_tokens * N,
      [&](int64_t i) {
        detail::vstore(y + i, detail::vmul(detail::silu8(detail::vload(gate + i)),
                                           detail::vload(up + i)));
      },
      [&](int64_t i) { y[i] = detail::silu1(gate[i]) * up[i]; });
}

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_ELEMENTWISE_H_
