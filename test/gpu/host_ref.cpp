//===- host_ref.cpp - host-kernel references for the GPU kernel check -----===//
#include "host_ref.h"

#include "llmc_host_kernels.h"

#include <algorithm>
#include <omp.h>

namespace lh = llmc::host;

namespace {

void omp_parallel_for(void*, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>((n + grain - 1) / grain, 8 * omp_get_max_threads()));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) fn(ctx, b, e);
  }
}

llmc_host_step_info host_step(const ref::Step& s) {
  llmc_host_step_info h{};
  h.num_tokens = s.T;
  h.num_seqs = s.S;
  h.num_logits = s.num_logits;
  h.tokens = s.tokens;
  h.positions = s.positions;
  h.query_starts = s.query_starts;
  h.context_lens = s.context_lens;
  h.block_tables = s.block_tables;
  h.max_blocks = s.max_blocks;
  h.slot_mapping = s.slot_mapping;
  h.logits_rows = s.logits_rows;
  h.block_size = s.block_size;
  h.pool = nullptr;
  h.parallel_for = omp_parallel_for;
  return h;
}

template <class F>
bool linear_fmt(int64_t N, int64_t K, const llmc_host_step_info* h, const float* x, const uint8_t* w,
                float* y) {
#define LLMC_LIN(n, k)                                        \
  if (N == n && K == k) {                                     \
    lh::linear<F, n, k, false>(h, x, w, nullptr, y);          \
    return true;                                              \
  }
  LLMC_LIN(960, 576)
  LLMC_LIN(576, 576)
  LLMC_LIN(3072, 576)
  LLMC_LIN(576, 1536)
#undef LLMC_LIN
  return false;
}

template <int64_t Heads>
void rope_heads(bool interleaved, const llmc_host_step_info* h, const float* x, float* out,
                double theta) {
  if (interleaved)
    lh::rope<Heads, 64, lh::rope_style::interleaved>(h, x, out, theta);
  else
    lh::rope<Heads, 64, lh::rope_style::half>(h, x, out, theta);
}

} // namespace

namespace ref {

const char* simd_name() { return lh::kSimd ? "AVX2" : "scalar"; }

int64_t row_bytes(WFmt f, int64_t K) {
  return f == WFmt::q4_1 ? lh::fmt::q4_1::row_bytes(K) : lh::fmt::q8_0::row_bytes(K);
}

void dequant(WFmt f, const uint8_t* w, int64_t rows, int64_t K, float* out) {
  const int64_t rb = row_bytes(f, K);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if (f == WFmt::q4_1)
      lh::fmt::q4_1::dequant_row(w + r * rb, out + r * K, K);
    else
      lh::fmt::q8_0::dequant_row(w + r * rb, out + r * K, K);
  }
}

bool linear(WFmt f, int64_t N, int64_t K, const Step& s, const float* x, const uint8_t* w, float* y) {
  const llmc_host_step_info h = host_step(s);
  return f == WFmt::q4_1 ? linear_fmt<lh::fmt::q4_1>(N, K, &h, x, w, y)
                         : linear_fmt<lh::fmt::q8_0>(N, K, &h, x, w, y);
}

void lm_head(WFmt f, const Step& s, const float* x, const uint8_t* w, float* logits) {
  const llmc_host_step_info h = host_step(s);
  if (f == WFmt::q4_1)
    lh::lm_head<lh::fmt::q4_1, 49152, 576>(&h, x, w, logits);
  else
    lh::lm_head<lh::fmt::q8_0, 49152, 576>(&h, x, w, logits);
}

void rms_norm(bool bf16_weight, const Step& s, const float* x, const void* w, float* out, double eps) {
  const llmc_host_step_info h = host_step(s);
  if (bf16_weight)
    lh::rms_norm<576, lh::fmt::bf16>(&h, x, w, out, eps);
  else
    lh::rms_norm<576, lh::fmt::f32>(&h, x, w, out, eps);
}

bool rms_norm(int64_t hidden, bool bf16_weight, const Step& s, const float* x, const void* w, float* out,
              double eps) {
  const llmc_host_step_info h = host_step(s);
#define LLMC_NORM(n)                                                  \
  if (hidden == n) {                                                  \
    if (bf16_weight)                                                  \
      lh::rms_norm<n, lh::fmt::bf16>(&h, x, w, out, eps);             \
    else                                                              \
      lh::rms_norm<n, lh::fmt::f32>(&h, x, w, out, eps);              \
    return true;                                                      \
  }
  LLMC_NORM(576)
  LLMC_NORM(4096)
#undef LLMC_NORM
  return false;
}

bool rope(int heads, bool interleaved, const Step& s, const float* x, float* out, double theta) {
  const llmc_host_step_info h = host_step(s);
  if (heads == 9)
    rope_heads<9>(interleaved, &h, x, out, theta);
  else if (heads == 3)
    rope_heads<3>(interleaved, &h, x, out, theta);
  else
    return false;
  return true;
}

void rope_inv_freq(double theta, double* inv) {
  lh::detail::rope_inv_freq(32, 64, theta, lh::rope_scaling{}, nullptr, inv);
}

void paged_attention(const Step& s, const float* q, const float* k, const float* v, float* kcache,
                     float* vcache, float* out, float scale, int64_t window) {
  const llmc_host_step_info h = host_step(s);
  lh::paged_attention<9, 3, 64>(&h, q, k, v, kcache, vcache, out, scale, window);
}

bool paged_attention(int heads, int kv_heads, int head_dim, const Step& s, const float* q, const float* k,
                     const float* v, float* kcache, float* vcache, float* out, float scale, int64_t window) {
  const llmc_host_step_info h = host_step(s);
  if (heads == 9 && kv_heads == 3 && head_dim == 64)
    lh::paged_attention<9, 3, 64>(&h, q, k, v, kcache, vcache, out, scale, window);
  else if (heads == 32 && kv_heads == 8 && head_dim == 128)
    lh::paged_attention<32, 8, 128>(&h, q, k, v, kcache, vcache, out, scale, window);
  else
    return false;
  return true;
}

void embed(WFmt f, const Step& s, const uint8_t* table, float* out) {
  const llmc_host_step_info h = host_step(s);
  if (f == WFmt::q4_1)
    lh::embed<lh::fmt::q4_1, 49152, 576>(&h, table, out);
  else
    lh::embed<lh::fmt::q8_0, 49152, 576>(&h, table, out);
}

} // namespace ref
