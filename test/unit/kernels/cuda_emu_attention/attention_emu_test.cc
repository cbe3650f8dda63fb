// Attention on tensor cores, run on the CPU under emulation (test/cuda-emu)
// against a float64 loop.
//
// Decode (paged_attention_decode_mma): contexts long enough that every warp
// of a split takes several 16-key chunks (its online softmax across them,
// the masked tail chunk), windows, short prefill chunks (several queries of
// one sequence), and peaked scores whose row maxima jump past the first
// chunk (the lazy rescale of O). The end-to-end emulated tests reach the
// kernel only with splits of at most 64 keys, one chunk per warp.
//
// Prefill (paged_attention_prefill): its full-tile and masked-tile loops,
// chunks continuing a context, windows, and K/V row copies shared by 1 to 4
// threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "llmc/core/artifact/cuda_abi.h"

extern "C" {
int llmc_emu_run(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                 unsigned bz, void** params);
void emu_decode_mma_32_8_128_bf16(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_decode_ffma_32_8_128_bf16(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_decode_mma_9_3_64_f16(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_prefill_32_8_128_bf16_w8(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_prefill_9_3_64_f16_w4(const llmc_cuda_step_info s, const llmc_cuda_args a);
void emu_prefill_4_2_16_bf16_w8(const llmc_cuda_step_info s, const llmc_cuda_args a);
}

namespace {

constexpr int kSplitKeys = 64, kMaxSplits = 4, kWarps = 4;

// 16-bit storage formats: round to nearest even, and back.
uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float FromBf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t ToF16(float f) {  // normal range only (the test's values are)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = int((u >> 23) & 0xff) - 127 + 15;
  uint32_t mant = u & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // flush (|f| < 2^-14)
  uint32_t h = sign | uint32_t(exp) << 10 | mant >> 13;
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}
float FromF16(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const float mant = float(h & 0x3ff);
  const float v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1.0f + mant / 1024.0f, exp - 15);
  return (h & 0x8000u) ? -v : v;
}

struct Shape {
  int heads, kv_heads, head_dim;
  bool bf16;
  int prefill_warps = 0;  // > 0: the flash-attention prefill kernel's grid
  int block_size = 16;    // tokens per KV cache block
};

// One step through an attention kernel: sequence i has context ctx[i] and
// its last qlen[i] positions as queries (1: decode; more: a short prefill
// chunk, each token its own blocks); the cache blocks are shuffled. The
// grid has `grid_splits` splits (0: the runtime's most, cdiv(longest,
// kSplitKeys) capped at kMaxSplits; fewer: as the runtime launches a step
// whose tokens fill the GPU without them). Returns max |out - ref| / max
// |ref| over every (token, head) row.
double AttentionError(void (*entry)(const llmc_cuda_step_info, const llmc_cuda_args), const Shape& sh,
                   const std::vector<int>& ctx, int window, float q_gain, uint32_t seed,
                   std::vector<int> qlen = {}, int grid_splits = 0) {
  if (qlen.empty()) qlen.assign(ctx.size(), 1);
  const int S = int(ctx.size()), H = sh.heads, KvH = sh.kv_heads, D = sh.head_dim;
  int T = 0;
  for (int n : qlen) T += n;
  const int G = H / KvH, kBlockSize = sh.block_size;
  auto to16 = [&](float f) { return sh.bf16 ? ToBf16(f) : ToF16(f); };
  auto from16 = [&](uint16_t b) { return sh.bf16 ? FromBf16(b) : FromF16(b); };
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uq(-4.0f * q_gain, 4.0f * q_gain), ukv(-1.0f, 1.0f);

  std::vector<int> max_blocks_of(S);
  int max_blocks = 0, num_blocks = 0;
  for (int s = 0; s < S; ++s) {
    max_blocks_of[s] = (ctx[s] + kBlockSize - 1) / kBlockSize;
    max_blocks = std::max(max_blocks, max_blocks_of[s]);
    num_blocks += max_blocks_of[s];
  }
  std::vector<int> perm(num_blocks);
  for (int i = 0; i < num_blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> btab(size_t(S) * max_blocks, 0), positions, qstarts(S + 1), lens(S), seq_of;
  for (int s = 0, next = 0; s < S; ++s) {
    for (int b = 0; b < max_blocks_of[s]; ++b) btab[size_t(s) * max_blocks + b] = perm[next++];
    qstarts[s] = int(positions.size());
    for (int i = 0; i < qlen[s]; ++i) {
      positions.push_back(ctx[s] - qlen[s] + i);
      seq_of.push_back(s);
    }
    lens[s] = ctx[s];
  }
  qstarts[S] = T;
  const size_t cache_elems = size_t(num_blocks) * kBlockSize * KvH * D;
  std::vector<uint16_t> q(size_t(T) * H * D), kc(cache_elems), vc(cache_elems);
  for (auto& x : q) x = to16(uq(rng));
  for (auto& x : kc) x = to16(ukv(rng));
  for (auto& x : vc) x = to16(ukv(rng));

  int longest = 0;
  for (int c : ctx) longest = std::max(longest, c);
  const int splits =
      grid_splits > 0 ? grid_splits : std::min((longest + kSplitKeys - 1) / kSplitKeys, kMaxSplits);
  // The runtime's scratch: header, counters (zero), partials.
  std::vector<float> scratch(4 + ((size_t(T) * H + 3) & ~size_t(3)) +
                             size_t(T) * H * splits * (D + 2));
  std::vector<uint16_t> out(size_t(T) * H * D, 0xffff);  // NaN: unwritten rows fail
  const float scale = float(1.0 / std::sqrt(double(D)));

  llmc_cuda_step_info si{};
  si.num_tokens = T;
  si.num_seqs = S;
  si.max_blocks = max_blocks;
  si.block_size = kBlockSize;
  si.positions = positions.data();
  si.query_starts = qstarts.data();
  si.context_lens = lens.data();
  si.block_tables = btab.data();
  llmc_cuda_args a{};
  a.buffers[0] = q.data();
  a.buffers[1] = out.data();
  a.buffers[2] = const_cast<float*>(&scale);
  a.buffers[3] = &window;
  a.caches[0] = kc.data();
  a.caches[1] = vc.data();
  a.scratch = scratch.data();
  void* params[2] = {&si, &a};
  if (sh.prefill_warps > 0) {
    // (Heads, cdiv(longest query, 16 * warps), S): every query row in a block.
    const int rows = 16 * sh.prefill_warps, longest_q = *std::max_element(qlen.begin(), qlen.end());
    EXPECT_EQ(llmc_emu_run(reinterpret_cast<void*>(entry), H, (longest_q + rows - 1) / rows, S,
                           32 * sh.prefill_warps, 1, 1, params),
              0);
  } else {
    EXPECT_EQ(llmc_emu_run(reinterpret_cast<void*>(entry), splits, KvH, T, 32 * kWarps, 1, 1, params),
              0);
  }

  double worst = 0;
  for (int t = 0; t < T; ++t) {
    const int seq = seq_of[t], last = positions[t];
    const int first = window > 0 ? std::max(0, last - window + 1) : 0;
    for (int h = 0; h < H; ++h) {
      const int g = h / G;
      std::vector<double> p(last - first + 1), o(D, 0.0);
      double mx = -1e300, l = 0;
      for (int k = first; k <= last; ++k) {
        const size_t row =
            (size_t(btab[size_t(seq) * max_blocks + k / kBlockSize]) * kBlockSize + k % kBlockSize) * KvH + g;
        double dot = 0;
        for (int d = 0; d < D; ++d)
          dot += double(from16(q[(size_t(t) * H + h) * D + d])) * from16(kc[row * D + d]);
        p[k - first] = dot * scale;
        mx = std::max(mx, p[k - first]);
      }
      for (int k = first; k <= last; ++k) {
        const size_t row =
            (size_t(btab[size_t(seq) * max_blocks + k / kBlockSize]) * kBlockSize + k % kBlockSize) * KvH + g;
        const double w = std::exp(p[k - first] - mx);
        l += w;
        for (int d = 0; d < D; ++d) o[d] += w * from16(vc[row * D + d]);
      }
      double ref_max = 0, err = 0;
      for (int d = 0; d < D; ++d) {
        const double ref = o[d] / l, got = from16(out[(size_t(t) * H + h) * D + d]);
        ref_max = std::max(ref_max, std::fabs(ref));
        err = std::isnan(got) ? INFINITY : std::max(err, std::fabs(got - ref));
      }
      worst = std::max(worst, err / std::max(ref_max, 1e-30));
    }
  }
  return worst;
}

// Tolerance: the 16-bit output rounding and P rounded to 16 bits before
// P V, relative to the row's largest value.
constexpr double kTolBf16 = 2e-2, kTolF16 = 4e-3;

TEST(CudaEmuDecodeAttention, TensorCoresMatchFloat64Bf16) {
  const Shape sh{32, 8, 128, true};
  // 1, 15 and 16 keys (a partial chunk, one exact), 300 (5 splits capped to
  // 4), 1,000 (four splits of 250: four chunks per warp, the last masked).
  const std::vector<int> ctx = {1, 15, 16, 300, 1000};
  EXPECT_LT(AttentionError(emu_decode_mma_32_8_128_bf16, sh, ctx, 0, 1.0f, 1), kTolBf16);
  EXPECT_LT(AttentionError(emu_decode_mma_32_8_128_bf16, sh, ctx, 200, 1.0f, 2), kTolBf16);
  // Short prefill chunks through the decode kernel: 9 and 16 queries of
  // one sequence, each token with its own key range and splits.
  EXPECT_LT(AttentionError(emu_decode_mma_32_8_128_bf16, sh, {40, 1000}, 0, 1.0f, 5, {9, 16}), kTolBf16);
  // The FFMA kernel on the same inputs: the reference's own check.
  EXPECT_LT(AttentionError(emu_decode_ffma_32_8_128_bf16, sh, ctx, 0, 1.0f, 1), kTolBf16);
}

TEST(CudaEmuDecodeAttention, FewerSplitsThanTheContextGivesWidenEach) {
  // The runtime's grid with fewer splits than a token's keys would take (1
  // and 3 of at most 4): each split widens to cover them, on both kernels
  // (a kernel that kept 64 keys a split would leave most keys unread).
  const Shape sh{32, 8, 128, true};
  const std::vector<int> ctx = {1, 70, 300, 1000};
  for (int splits : {1, 3}) {
    EXPECT_LT(AttentionError(emu_decode_mma_32_8_128_bf16, sh, ctx, 0, 1.0f, 6, {}, splits), kTolBf16)
        << splits;
    EXPECT_LT(AttentionError(emu_decode_ffma_32_8_128_bf16, sh, ctx, 0, 1.0f, 6, {}, splits), kTolBf16)
        << splits;
  }
  EXPECT_LT(AttentionError(emu_decode_mma_32_8_128_bf16, sh, {40, 1000}, 100, 1.0f, 7, {9, 16}, 2),
            kTolBf16);
}

TEST(CudaEmuDecodeAttention, PeakedScoresRescaleAcrossChunksF16) {
  // Scores x 8: a row's maximum moves by more than 2^8 between the chunks
  // of one warp, so O is rescaled past the first chunk.
  const Shape sh{9, 3, 64, false};
  const std::vector<int> ctx = {7, 33, 700, 1000};
  EXPECT_LT(AttentionError(emu_decode_mma_9_3_64_f16, sh, ctx, 0, 8.0f, 3), kTolF16);
  EXPECT_LT(AttentionError(emu_decode_mma_9_3_64_f16, sh, ctx, 333, 8.0f, 4), kTolF16);
}

// Flash-attention prefill (paged_attention_prefill): whole prompts from
// position 0 of lengths that are and are not multiples of the 64-key and
// 128-row tiles (the full-tile loop, then the masked tiles at the
// diagonal), a chunk continuing a 800-key context (its diagonal off the
// tile grid: three masked tiles), and windows whose start falls inside
// tiles (masked tiles before the full ones).
TEST(CudaEmuPrefillAttention, FullAndMaskedTilesMatchFloat64Bf16) {
  const Shape sh{32, 8, 128, true, 8};
  const std::vector<int> ctx = {300, 17, 128, 129, 1000};
  const std::vector<int> qlen = {300, 17, 128, 129, 200};
  EXPECT_LT(AttentionError(emu_prefill_32_8_128_bf16_w8, sh, ctx, 0, 1.0f, 11, qlen), kTolBf16);
  EXPECT_LT(AttentionError(emu_prefill_32_8_128_bf16_w8, sh, ctx, 100, 1.0f, 12, qlen), kTolBf16);
  EXPECT_LT(AttentionError(emu_prefill_32_8_128_bf16_w8, sh, {700}, 57, 1.0f, 13, {700}), kTolBf16);
}

TEST(CudaEmuPrefillAttention, PeakedScoresAndFewerWarpsF16) {
  // 4 warps (64-row query tiles, 2 threads a K/V row); scores x 8 move a
  // row's maximum by more than 2^8 between tiles (O's lazy rescale).
  const Shape sh{9, 3, 64, false, 4};
  EXPECT_LT(AttentionError(emu_prefill_9_3_64_f16_w4, sh, {257, 64, 500}, 0, 8.0f, 14, {257, 64, 130}),
            kTolF16);
  EXPECT_LT(AttentionError(emu_prefill_9_3_64_f16_w4, sh, {257, 500}, 90, 8.0f, 15, {257, 130}), kTolF16);
}

TEST(CudaEmuPrefillAttention, NarrowHeadsLeaveThreadsWithoutRows) {
  // head_dim 16: 2 chunks a row, 2 threads a row, 128 of 256 threads load.
  const Shape sh{4, 2, 16, true, 8};
  EXPECT_LT(AttentionError(emu_prefill_4_2_16_bf16_w8, sh, {333, 90}, 0, 1.0f, 16, {333, 41}), kTolBf16);
}

TEST(CudaEmuPrefillAttention, CacheBlocksOfAnySize) {
  // A key's cache block and slot come from a float reciprocal of the block
  // size corrected to exact. 1/61 rounds down in f32: the product alone
  // would put keys 61, 122, ... in the block before theirs.
  for (int bs : {61, 1}) {
    const Shape sh{4, 2, 16, true, 8, bs};
    EXPECT_LT(AttentionError(emu_prefill_4_2_16_bf16_w8, sh, {500, 90}, 0, 1.0f, 17, {500, 41}),
              kTolBf16)
        << bs;
  }
}

}  // namespace
