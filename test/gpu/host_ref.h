//===- host_ref.h - host-kernel references for the GPU kernel check -------===//
//
// A thin, non-template interface over compiler/Target/Kernels/host/
// llmc_host_kernels.h (f32 activations, Q8 = false), instantiated in
// host_ref.cpp for the SmolLM2-135M shapes that kernel_check.cu runs. Kept in
// its own translation unit so the host header is compiled by the system C++
// compiler (AVX2 with -march=native), not by nvcc's front end.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_TEST_GPU_HOST_REF_H
#define LLMC_TEST_GPU_HOST_REF_H

#include <cstdint>

namespace ref {

enum class WFmt { q4_1, q8_0 };

// Mirrors llmc_host_step_info (pool: an OpenMP parallel_for).
struct Step {
  int64_t T = 0, S = 1, num_logits = 0, max_blocks = 0, block_size = 16;
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* query_starts = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* slot_mapping = nullptr;
  const int32_t* logits_rows = nullptr;
};

const char* simd_name(); // "AVX2" or "scalar"
int64_t row_bytes(WFmt f, int64_t K);
void dequant(WFmt f, const uint8_t* w, int64_t rows, int64_t K, float* out);
// linear<Fmt, N, K, false>: N x K in {960x576, 576x576, 3072x576, 576x1536}.
// Returns false for a shape that is not instantiated.
bool linear(WFmt f, int64_t N, int64_t K, const Step& s, const float* x, const uint8_t* w, float* y);
// lm_head<Fmt, 49152, 576>.
void lm_head(WFmt f, const Step& s, const float* x, const uint8_t* w, float* logits);
// rms_norm<576, f32 | bf16 weight>.
void rms_norm(bool bf16_weight, const Step& s, const float* x, const void* w, float* out, double eps);
// rms_norm<hidden, f32 | bf16 weight> for hidden 576 or 4096; false for others.
bool rms_norm(int64_t hidden, bool bf16_weight, const Step& s, const float* x, const void* w, float* out,
              double eps);
// rope<heads, 64, half | interleaved>, heads 9 or 3. False for other heads.
bool rope(int heads, bool interleaved, const Step& s, const float* x, float* out, double theta);
void rope_inv_freq(double theta, double* inv); // 32 pairs of head_dim 64
// paged_attention<9, 3, 64>.
void paged_attention(const Step& s, const float* q, const float* k, const float* v, float* kcache,
                     float* vcache, float* out, float scale, int64_t window);
// paged_attention<heads, kv_heads, head_dim> for 9/3 x 64 (SmolLM2) and 32/8 x 128
// (Llama-3-8B); false for other shapes.
bool paged_attention(int heads, int kv_heads, int head_dim, const Step& s, const float* q, const float* k,
                     const float* v, float* kcache, float* vcache, float* out, float scale, int64_t window);
// embed<Fmt, 49152, 576>.
void embed(WFmt f, const Step& s, const uint8_t* table, float* out);

} // namespace ref

#endif
