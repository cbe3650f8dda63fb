// Host kernel tests, paged attention: ragged batches of prefill and decode
// tokens over a paged KV cache, against softmax attention computed in double.
// See host_kernels_test_util.h for the references, the tolerances and the pools.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "host_kernels_test_util.h"

namespace {

using namespace llmc::host_test;

//===----------------------------------------------------------------------===//
// Paged attention
//===----------------------------------------------------------------------===//

struct SeqSpec {
  int32_t context;  // KV length after the step
  int32_t fresh;    // new tokens in this step (the last `fresh` positions)
};

// A ragged batch over a paged cache: each sequence's earlier tokens are
// already in the cache (random K/V), its new tokens come in k/v; blocks are
// assigned in random order from a pool with spare blocks.
template <int64_t Heads, int64_t KvHeads, int64_t D>
void CheckAttention(const std::vector<SeqSpec>& seqs, int64_t block_size, int64_t window,
                    float scale, float magnitude, Pool p, uint32_t seed) {
  constexpr int64_t QW = Heads * D, KVW = KvHeads * D, G = Heads / KvHeads;
  std::mt19937 rng(seed);
  const int64_t S = static_cast<int64_t>(seqs.size());
  int64_t max_blocks = 0, total_blocks = 3, T = 0;
  for (const auto& q : seqs) {
    const int64_t nb = (q.context + block_size - 1) / block_size;
    max_blocks = std::max(max_blocks, nb + 1);
    total_blocks += nb;
    T += q.fresh;
  }
  std::vector<int32_t> free_blocks(total_blocks);
  for (int64_t i = 0; i < total_blocks; ++i) free_blocks[i] = static_cast<int32_t>(i);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);

  Step s;
  s.num_tokens = T;
  s.num_seqs = S;
  s.block_size = block_size;
  s.max_blocks = max_blocks;
  s.block_tables.assign(S * max_blocks, -1);
  s.query_starts.push_back(0);
  // Full K/V history per sequence, [context, KVW].
  std::vector<std::vector<float>> keys(S), values(S);
  auto kcache = RandomFloats(total_blocks * block_size * KVW, rng, -50, 50);  // garbage
  auto vcache = RandomFloats(total_blocks * block_size * KVW, rng, -50, 50);
  std::vector<float> k(T * KVW), v(T * KVW);
  std::vector<int32_t> tok_seq;
  size_t next_block = 0;
  for (int64_t si = 0; si < S; ++si) {
    const auto& q = seqs[si];
    const int64_t nb = (q.context + block_size - 1) / block_size;
    for (int64_t b = 0; b < nb; ++b) s.block_tables[si * max_blocks + b] = free_blocks[next_block++];
    keys[si] = RandomFloats(q.context * KVW, rng, -magnitude, magnitude);
    values[si] = RandomFloats(q.context * KVW, rng);
    for (int64_t pos = 0; pos < q.context; ++pos) {
      const int64_t slot =
          int64_t(s.block_tables[si * max_blocks + pos / block_size]) * block_size +
          pos % block_size;
      const bool fresh = pos >= q.context - q.fresh;
      if (!fresh) {
        std::copy_n(keys[si].data() + pos * KVW, KVW, kcache.data() + slot * KVW);
        std::copy_n(values[si].data() + pos * KVW, KVW, vcache.data() + slot * KVW);
        continue;
      }
      const int64_t t = static_cast<int64_t>(s.positions.size());
      s.positions.push_back(static_cast<int32_t>(pos));
      s.slot_mapping.push_back(static_cast<int32_t>(slot));
      s.tokens.push_back(1);
      tok_seq.push_back(static_cast<int32_t>(si));
      std::copy_n(keys[si].data() + pos * KVW, KVW, k.data() + t * KVW);
      std::copy_n(values[si].data() + pos * KVW, KVW, v.data() + t * KVW);
    }
    s.query_starts.push_back(static_cast<int32_t>(s.positions.size()));
    s.context_lens.push_back(q.context);
  }
  // The cache after the step: the new tokens' rows written, nothing else.
  auto kcache_want = kcache, vcache_want = vcache;
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(k.data() + t * KVW, KVW, kcache_want.data() + s.slot_mapping[t] * KVW);
    std::copy_n(v.data() + t * KVW, KVW, vcache_want.data() + s.slot_mapping[t] * KVW);
  }

  const auto qv = RandomFloats(T * QW, rng, -magnitude, magnitude);
  std::vector<float> out(T * QW, kNaN);
  lh::paged_attention<Heads, KvHeads, D>(s.Get(p), qv.data(), k.data(), v.data(), kcache.data(),
                                         vcache.data(), out.data(), scale, window);
  const std::string what = "attention H=" + std::to_string(Heads) + " KV=" +
                           std::to_string(KvHeads) + " D=" + std::to_string(D) + " block=" +
                           std::to_string(block_size) + " window=" + std::to_string(window) +
                           " " + PoolName(p);
  EXPECT_TRUE(kcache == kcache_want) << what << ": K cache contents";
  EXPECT_TRUE(vcache == vcache_want) << what << ": V cache contents";

  Checker c(what);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t si = tok_seq[t], pos = s.positions[t];
    const int64_t start = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < Heads; ++h) {
      const int64_t kvh = h / G;
      std::vector<double> sc;
      double mx = -1e300;
      for (int64_t j = start; j <= pos; ++j) {
        double d = 0;
        for (int64_t e = 0; e < D; ++e)
          d += double(qv[t * QW + h * D + e]) * keys[si][j * KVW + kvh * D + e];
        sc.push_back(d * scale);
        mx = std::max(mx, sc.back());
      }
      double den = 0;
      for (auto& e : sc) den += (e = std::exp(e - mx));
      for (int64_t e = 0; e < D; ++e) {
        double num = 0, mag = 0;
        for (int64_t j = start; j <= pos; ++j) {
          const double vv = values[si][j * KVW + kvh * D + e];
          num += sc[j - start] * vv;
          mag += sc[j - start] * std::fabs(vv);
        }
        c.Check(out[t * QW + h * D + e], num / den, 1e-5 * mag / den + 1e-30, At(t, h * D + e));
      }
    }
  }
}

// Prefill chunks and decode tokens of several sequences in one step; one
// sequence with no new token.
const std::vector<SeqSpec> kRagged = {{7, 7}, {20, 1}, {13, 5}, {1, 1}, {9, 0}, {40, 3}, {33, 2}};
// Decode only, short contexts (few work items, but too few keys to split).
const std::vector<SeqSpec> kDecode = {{50, 1}, {3, 1}, {17, 1}};
// Decode with long contexts: fewer than 32 (token, kv head) items and >= 256
// keys, so each item's keys are split into ranges merged afterwards; the
// 5-token sequence leaves some of its ranges empty.
const std::vector<SeqSpec> kLongDecode = {{600, 1}, {5, 1}, {1000, 1}, {300, 1}};

TEST(HostAttentionTest, MultiHead) {
  uint32_t seed = 1000;
  for (Pool p : kAllPools)
    for (int64_t bs : {1, 3, 16})
      for (int64_t window : {0, 4}) {
        CheckAttention<4, 4, 32>(kRagged, bs, window, 0.17f, 1.0f, p, seed++);
        CheckAttention<4, 4, 32>(kDecode, bs, window, 0.17f, 1.0f, p, seed++);
      }
}

TEST(HostAttentionTest, GroupedQuery) {
  uint32_t seed = 2000;
  for (Pool p : kAllPools)
    for (int64_t bs : {1, 3, 16})
      for (int64_t window : {0, 5}) {
        CheckAttention<6, 2, 64>(kRagged, bs, window, 0.125f, 1.0f, p, seed++);
        CheckAttention<6, 2, 64>(kDecode, bs, window, 0.125f, 1.0f, p, seed++);
        CheckAttention<9, 3, 64>(kRagged, bs, window, 0.125f, 1.0f, p, seed++);
      }
}

TEST(HostAttentionTest, OddHeadDimsAndLargeScores) {
  // head_dim 40 (not a multiple of 32) and 36 (not a multiple of 8); scores
  // up to ~±40 so the running maximum changes by large steps.
  uint32_t seed = 3000;
  for (Pool p : kAllPools)
    for (int64_t bs : {3, 16}) {
      CheckAttention<4, 1, 40>(kRagged, bs, 0, 1.0f, 2.0f, p, seed++);
      CheckAttention<2, 1, 36>(kRagged, bs, 0, 1.0f, 2.0f, p, seed++);
      CheckAttention<2, 2, 36>(kDecode, bs, 7, 0.3f, 2.0f, p, seed++);
    }
}

TEST(HostAttentionTest, LongContextDecodeSplitsKeys) {
  uint32_t seed = 3500;
  for (Pool p : kAllPools)
    for (int64_t bs : {3, 16})
      for (int64_t window : {0, 300}) {
        CheckAttention<8, 2, 64>(kLongDecode, bs, window, 0.125f, 1.0f, p, seed++);
        CheckAttention<4, 4, 32>(kLongDecode, bs, window, 0.17f, 1.0f, p, seed++);
        CheckAttention<4, 1, 40>(kLongDecode, bs, window, 1.0f, 2.0f, p, seed++);
      }
}

TEST(HostAttentionTest, WindowLongerThanContextAndLongContext) {
  uint32_t seed = 4000;
  const std::vector<SeqSpec> long_ctx = {{300, 2}, {77, 30}};
  for (Pool p : kAllPools) {
    CheckAttention<6, 2, 64>(kRagged, 16, 100, 0.125f, 1.0f, p, seed++);
    CheckAttention<6, 2, 64>(long_ctx, 16, 0, 0.125f, 1.0f, p, seed++);
    CheckAttention<6, 2, 64>(long_ctx, 3, 64, 0.125f, 1.0f, p, seed++);
  }
}

}  // namespace
