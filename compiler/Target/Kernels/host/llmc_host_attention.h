// llmc host kernel library: attention.
//
// Causal attention over the paged KV cache: cache write, online softmax
// per (token, kv head), flash-decoding splits of fixed size.
//
// Part of llmc_host_kernels.h, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_HOST_ATTENTION_H_
#define LLMC_HOST_ATTENTION_H_

#include "llmc_host_parallel.h"

namespace llmc {
namespace host {
namespace detail {

// The sequence owning token t (query_starts[s] <= t < query_starts[s+1]),
// or -1.
inline int64_t seq_of(const llmc_host_step_info* step, int64_t t) {
  const int32_t* qs = step->query_starts;
  const int64_t S = step->num_seqs;
  if (qs == nullptr || S <= 0) return -1;
  const int64_t s = std::upper_bound(qs, qs + S + 1, static_cast<int32_t>(t)) - qs - 1;
  if (s < 0 || s >= S || t >= qs[s + 1]) return -1;
  return s;
}

template <int64_t D>
LLMC_HOST_INLINE float dot_f32(const float* a, const float* b) {
  vf a0 = vzero(), a1 = vzero();
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) {
    a0 = vfma(vload(a + d), vload(b + d), a0);
    a1 = vfma(vload(a + d + 8), vload(b + d + 8), a1);
  }
  for (; d + 8 <= D; d += 8) a0 = vfma(vload(a + d), vload(b + d), a0);
  float s = vhsum(vadd(a0, a1));
  for (; d < D; ++d) s += a[d] * b[d];
  return s;
}

// out[i] = q . k_i for four keys.
template <int64_t D>
LLMC_HOST_INLINE void dot4_f32(const float* q, const float* k0, const float* k1, const float* k2,
                               const float* k3, float* out) {
  vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();
  int64_t d = 0;
  for (; d + 8 <= D; d += 8) {
    const vf qv = vload(q + d);
    a0 = vfma(qv, vload(k0 + d), a0);
    a1 = vfma(qv, vload(k1 + d), a1);
    a2 = vfma(qv, vload(k2 + d), a2);
    a3 = vfma(qv, vload(k3 + d), a3);
  }
  vhsum4(a0, a1, a2, a3, out);
  for (; d < D; ++d) {
    out[0] += q[d] * k0[d];
    out[1] += q[d] * k1[d];
    out[2] += q[d] * k2[d];
    out[3] += q[d] * k3[d];
  }
}

inline constexpr int kAttnTile = 32;  // keys per online-softmax update
// A token's keys are cut into ranges of this many, counted from its first
// key, that run in parallel (flash-decoding) and merge in order. The cut
// depends only on the token's own context, never on what else is in the
// step, so a request gets the same numbers batched as alone (the serving
// engine's batch invariance). A multiple of kAttnTile. 128 rather than 256:
// a decode token at 513-640 keys then has 5 ranges per kv head, which two
// threads share evenly, where 256 left 3 uneven ones (256, 256, 1-128) and
// SmolLM2's decode at depth 512 4% slower (bench/decode_builds.py).
inline constexpr int64_t kAttnSplitKeys = 128;
struct attn_units_tag {};

// The cache positions token t attends to: [*start, *end] of sequence *seq.
// False when the token belongs to no sequence or sees no key.
inline bool attn_range(const llmc_host_step_info* step, int64_t t, int64_t window, int64_t* seq,
                       int64_t* start, int64_t* end) {
  const int64_t s = seq_of(step, t);
  const int64_t bs = step->block_size;
  if (s < 0 || bs <= 0 || step->positions == nullptr || step->context_lens == nullptr)
    return false;
  const int64_t pos = step->positions[t];
  *seq = s;
  *end = std::min({pos, static_cast<int64_t>(step->context_lens[s]) - 1,
                   step->max_blocks * bs - 1});
  *start = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  return *end >= *start;
}

// Online softmax of token t for the GH query heads h0 .. h0+GH-1 (all sharing
// kv head kvh) over the cache positions [start, end] of sequence s, in tiles
// of 32 keys: on return m[g] is the running maximum score, l[g] the sum of
// exp(score - m[g]) and acc[g*D ..] the exp-weighted sum of V rows. Scores
// are soft-capped (softcap * tanh(score / softcap)) when softcap > 0.
template <int64_t Heads, int64_t KvHeads, int64_t D, int GH>
inline void attend_range(const llmc_host_step_info* step, int64_t s, int64_t t, int64_t kvh,
                         int64_t h0, const float* q, const float* kc, const float* vc,
                         float scale, float softcap, int64_t start, int64_t end, float* m,
                         float* l, float* acc) {
  constexpr int64_t QW = Heads * D, KVW = KvHeads * D;
  constexpr int TILE = kAttnTile;
  const int64_t bs = step->block_size;
  const int32_t* bt = step->block_tables + s * step->max_blocks;
  alignas(32) float qs[GH][D];
  alignas(32) float sc[GH][TILE];
  for (int g = 0; g < GH; ++g) {
    const float* qh = q + t * QW + (h0 + g) * D;
    for (int64_t d = 0; d < D; ++d) {
      qs[g][d] = qh[d] * scale;
      acc[g * D + d] = 0.0f;
    }
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
  }
  const float* kp[TILE];
  const float* vp[TILE];
  int64_t bi = start / bs, off = start % bs;
  for (int64_t p0 = start; p0 <= end; p0 += TILE) {
    const int n = static_cast<int>(std::min<int64_t>(TILE, end - p0 + 1));
    for (int j = 0; j < n; ++j) {
      const int64_t row = (static_cast<int64_t>(bt[bi]) * bs + off) * KVW + kvh * D;
      kp[j] = kc + row;
      vp[j] = vc + row;
      if (++off == bs) {
        off = 0;
        ++bi;
      }
    }
    for (int g = 0; g < GH; ++g) {
      // Scores of the tile; padding keys get -inf (weight 0).
      float* sg = sc[g];
      int j = 0;
      for (; j + 4 <= n; j += 4) dot4_f32<D>(qs[g], kp[j], kp[j + 1], kp[j + 2], kp[j + 3], sg + j);
      for (; j < n; ++j) sg[j] = dot_f32<D>(qs[g], kp[j]);
      if (softcap > 0.0f)
        for (int c = 0; c < n; ++c) sg[c] = softcap * std::tanh(sg[c] / softcap);
      for (; j < TILE; ++j) sg[j] = -std::numeric_limits<float>::infinity();
      // Online softmax update: one rescale of the accumulator per tile.
      vf mx = vload(sg);
      for (int v = 8; v < TILE; v += 8) mx = vmax(mx, vload(sg + v));
      const float mnew = std::max(m[g], vhmax(mx));
      const float alpha =
          m[g] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m[g] - mnew);
      const vf mv = vset1(mnew);
      vf ps = vzero();
      for (int v = 0; v < TILE; v += 8) {
        const vf p = vexp(vsub(vload(sg + v), mv));
        vstore(sg + v, p);
        ps = vadd(ps, p);
      }
      l[g] = l[g] * alpha + vhsum(ps);
      m[g] = mnew;
      float* ag = acc + g * D;
      if (alpha != 1.0f) {
        const vf av = vset1(alpha);
        int64_t d = 0;
        for (; d + 8 <= D; d += 8) vstore(ag + d, vmul(vload(ag + d), av));
        for (; d < D; ++d) ag[d] *= alpha;
      }
      // acc += sum_j p_j * v_j, 32 lanes of the head at a time in registers.
      int64_t d = 0;
      for (; d + 32 <= D; d += 32) {
        vf a0 = vload(ag + d), a1 = vload(ag + d + 8), a2 = vload(ag + d + 16),
           a3 = vload(ag + d + 24);
        for (int jj = 0; jj < n; ++jj) {
          const vf pj = vset1(sg[jj]);
          const float* vr = vp[jj] + d;
          a0 = vfma(pj, vload(vr), a0);
          a1 = vfma(pj, vload(vr + 8), a1);
          a2 = vfma(pj, vload(vr + 16), a2);
          a3 = vfma(pj, vload(vr + 24), a3);
        }
        vstore(ag + d, a0);
        vstore(ag + d + 8, a1);
        vstore(ag + d + 16, a2);
        vstore(ag + d + 24, a3);
      }
      for (; d + 8 <= D; d += 8) {
        vf a0 = vload(ag + d);
        for (int jj = 0; jj < n; ++jj) a0 = vfma(vset1(sg[jj]), vload(vp[jj] + d), a0);
        vstore(ag + d, a0);
      }
      for (; d < D; ++d) {
        float a = ag[d];
        for (int jj = 0; jj < n; ++jj) a += sg[jj] * vp[jj][d];
        ag[d] = a;
      }
    }
  }
}

// Scratch of the split path: owned by the thread that calls the kernel (the
// pool's workers write into it while that thread waits in parallel_for).
struct attn_tag {};
inline float* attn_scratch(size_t floats) { return scratch<attn_tag>(floats); }

}  // namespace detail
}  // namespace host
}  // namespace llmc

namespace llmc {
namespace host {

// Causal attention over the paged KV cache (one layer). q [T, Heads*HeadDim],
// k and v [T, KvHeads*HeadDim], out [T, Heads*HeadDim]; kcache and vcache
// [num_blocks, block_size, KvHeads, HeadDim]. First writes each new token's
// k/v row at slot_mapping[t] (negative slots are skipped), then token t of
// sequence s attends to the cache positions 0 .. positions[t] (clamped to
// context_lens[s] - 1), or the last `window` of them when window > 0, through
// block_tables[s, pos / block_size]. Online softmax in f32; `scale` multiplies
// q.k, and softcap > 0 caps the product at +-softcap (softcap * tanh(x /
// softcap), Gemma 2). A token outside every sequence, or with no visible key,
// gets zeros.
//
// Work items are (token, kv head) with all Heads/KvHeads query heads that
// share it, so each K/V row is read once per step. A token with more than
// kAttnSplitKeys keys has them split into ranges of that many that run in
// parallel, and the partial softmax states are merged in order.
template <int64_t Heads, int64_t KvHeads, int64_t HeadDim, class Act = float>
void paged_attention(const llmc_host_step_info* step, const Act* q, const Act* k, const Act* v,
                     Act* kcache, Act* vcache, Act* out, float scale, int64_t window = 0,
                     float softcap = 0.0f) {
  LLMC_HOST_CHECK_ACT(Act);
  static_assert(Heads > 0 && KvHeads > 0 && Heads % KvHeads == 0,
                "heads must be a multiple of kv_heads");
  constexpr int64_t G = Heads / KvHeads, D = HeadDim, QW = Heads * D, KVW = KvHeads * D;
  constexpr int GH = static_cast<int>(G);
  const int64_t T = step->num_tokens;
  if (T <= 0) return;
  const int32_t* slots = step->slot_mapping;
  parallel_for(step, T, detail::token_grain(2 * KVW), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t slot = slots[t];
      if (slot < 0) continue;
      std::memcpy(kcache + slot * KVW, k + t * KVW, sizeof(float) * KVW);
      std::memcpy(vcache + slot * KVW, v + t * KVW, sizeof(float) * KVW);
    }
  });

  // Work units: (token, kv head, key range); a token with n ranges has
  // units [first[t], first[t] + n * KvHeads), kv head major.
  const int64_t items = T * KvHeads;
  int64_t* first = reinterpret_cast<int64_t*>(
      detail::scratch<detail::attn_units_tag>(2 * static_cast<size_t>(T + 1)));
  first[0] = 0;
  bool split = false;
  for (int64_t t = 0; t < T; ++t) {
    int64_t s, b, e, n = 1;
    if (detail::attn_range(step, t, window, &s, &b, &e))
      n = (e - b + detail::kAttnSplitKeys) / detail::kAttnSplitKeys;
    split |= n > 1;
    first[t + 1] = first[t] + n * KvHeads;
  }
  auto ranges = [&](int64_t t) { return (first[t + 1] - first[t]) / KvHeads; };

  if (!split) {
    parallel_for(step, items, 1, [&](int64_t b, int64_t e) {
      alignas(32) float acc[G * D];
      float m[G], l[G];
      for (int64_t it = b; it < e; ++it) {
        const int64_t t = it / KvHeads, kvh = it % KvHeads;
        float* o = out + t * QW + kvh * G * D;
        int64_t s, start, end;
        if (!detail::attn_range(step, t, window, &s, &start, &end)) {
          std::fill(o, o + G * D, 0.0f);
          continue;
        }
        detail::attend_range<Heads, KvHeads, D, GH>(step, s, t, kvh, kvh * G, q, kcache, vcache,
                                                    scale, softcap, start, end, m, l, acc);
        for (int64_t g = 0; g < G; ++g) {
          const float inv = 1.0f / l[g];
          for (int64_t d = 0; d < D; ++d) o[g * D + d] = acc[g * D + d] * inv;
        }
      }
    });
    return;
  }

  // Partial (m, l, acc) per unit, then a merge per (token, kv head). A token
  // with one range merges one partial: acc * 1 / l, the same numbers as the
  // direct path above.
  constexpr int64_t PW = G * (D + 2);  // one partial: m[G], l[G], acc[G*D]
  const int64_t units = first[T];
  float* part = detail::attn_scratch(static_cast<size_t>(units * PW));
  parallel_for(step, units, 1, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t t = std::upper_bound(first, first + T + 1, u) - first - 1;
      const int64_t n = ranges(t), kvh = (u - first[t]) / n, sp = (u - first[t]) % n;
      float* pm = part + u * PW;
      float* pl = pm + G;
      int64_t s, start, end;
      if (!detail::attn_range(step, t, window, &s, &start, &end)) {
        for (int64_t g = 0; g < G; ++g) pl[g] = 0.0f;
        continue;
      }
      const int64_t lo = start + sp * detail::kAttnSplitKeys;
      const int64_t hi = std::min(end, lo + detail::kAttnSplitKeys - 1);
      detail::attend_range<Heads, KvHeads, D, GH>(step, s, t, kvh, kvh * G, q, kcache, vcache,
                                                  scale, softcap, lo, hi, pm, pl, pl + G);
    }
  });
  parallel_for(step, items, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / KvHeads, kvh = item % KvHeads;
      const int64_t n = ranges(t);
      const float* p0 = part + (first[t] + kvh * n) * PW;
      for (int64_t g = 0; g < G; ++g) {
        float* o = out + t * QW + (kvh * G + g) * D;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t sp = 0; sp < n; ++sp) {
          const float* pm = p0 + sp * PW;
          if (pm[G + g] > 0.0f) mx = std::max(mx, pm[g]);
        }
        std::fill(o, o + D, 0.0f);
        if (mx == -std::numeric_limits<float>::infinity()) continue;  // no visible key
        float den = 0.0f;
        for (int64_t sp = 0; sp < n; ++sp) {
          const float* pm = p0 + sp * PW;
          if (!(pm[G + g] > 0.0f)) continue;
          const float w = std::exp(pm[g] - mx);
          den += w * pm[G + g];
          const float* pa = pm + 2 * G + g * D;
          for (int64_t d = 0; d < D; ++d) o[d] += w * pa[d];
        }
        const float inv = 1.0f / den;
        for (int64_t d = 0; d < D; ++d) o[d] *= inv;
      }
    }
  });
}

}  // namespace host
}  // namespace llmc

#endif  // LLMC_HOST_ATTENTION_H_
