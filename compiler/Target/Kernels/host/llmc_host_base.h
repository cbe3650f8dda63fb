// llmc host kernel library: base.
//
// Configuration shared by every part: the SIMD switch, inlining macros,
// accepted activation types, RoPE/GELU enums and parallel_for over the
// step's thread pool.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_BASE_H_
#define LLMC_HOST_BASE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "host_abi.h"

#if !defined(LLMC_HOST_FORCE_SCALAR) && defined(__AVX2__) && defined(__FMA__) && \
    defined(__F16C__)
#define LLMC_HOST_SIMD 1
#include <immintrin.h>
#else
#define LLMC_HOST_SIMD 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LLMC_HOST_INLINE inline __attribute__((always_inline))
#define LLMC_HOST_LAMBDA_INLINE __attribute__((always_inline))
#define LLMC_HOST_UNROLL _Pragma("GCC unroll 16")
// For the functions that keep per-thread state in a static: hidden, so that
// every artifact's library has its own. A static of a default-visibility
// inline function is one STB_GNU_UNIQUE object for the whole process, shared
// by every artifact loaded (RTLD_LOCAL or not), whatever its layout in the
// llmc version that built each one.
#define LLMC_HOST_OWN_STATE __attribute__((visibility("hidden")))
#else
#define LLMC_HOST_INLINE inline
#define LLMC_HOST_LAMBDA_INLINE
#define LLMC_HOST_UNROLL
#define LLMC_HOST_OWN_STATE
#endif

namespace llmc {
namespace host {

// True when the AVX2/FMA/F16C code paths are compiled in.
inline constexpr bool kSimd = LLMC_HOST_SIMD != 0;

// Activation element types the kernels accept. Adding f16/bf16 activations
// means adding their storage types here and a load/store pair in detail::.
template <class Act>
inline constexpr bool is_supported_activation = std::is_same_v<Act, float>;

enum class rope_style { half, interleaved };  // HF rotate_half | GGML normal mode
enum class rope_scaling_kind { none, linear, llama3 };
enum class gelu_approx { erf, tanh };

// Hugging Face `rope_scaling` (the dialect's #llm.rope_scaling).
struct rope_scaling {
  rope_scaling_kind kind = rope_scaling_kind::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

// Runs f(begin, end) over [0, n) through the step's thread pool, in chunks of
// at least `grain` items (the pool decides the split). Serial when the step
// has no pool or n <= grain. Returns when every chunk is done.
template <class F>
inline void parallel_for(const llmc_host_step_info* step, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (step == nullptr || step->parallel_for == nullptr || n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  llmc_range_fn tramp = [](void* ctx, int64_t begin, int64_t end) {
    (*static_cast<Fn*>(ctx))(begin, end);
  };
  step->parallel_for(step->pool, n, grain, tramp,
                     const_cast<void*>(static_cast<const void*>(std::addressof(f))));
}

}  // namespace host
}  // namespace llmc

#define LLMC_HOST_CHECK_ACT(Act)                       \
  static_assert(::llmc::host::is_supported_activation<Act>, \
                "llmc host kernels: only f32 activations are implemented")

#endif  // LLMC_HOST_BASE_H_
