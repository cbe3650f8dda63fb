// llmc CUDA kernel library: int8 dot products of GGUF weight blocks with
// quantized activations (the decode GEMV's inner loop, gemv_q8).
//
// Why: a 4-bit weight dequantized to float costs 5+ instructions (shift,
// mask, int-to-float on the quarter-rate pipe, scale, FMA); the H200 issues
// about 4.4 thread-instructions per 4-bit weight at full memory bandwidth,
// so that kernel was bound by instructions at 20% of DRAM bandwidth (ncu,
// 2026-12-04). Here a 32-bit word of packed quants becomes four int8 lanes
// with one or two logic ops and meets four int8 activations in one dp4a;
// the block scales are applied once per 32 (or 16) elements in float.
// Activations are quantized per 32-element block to int8 with a float scale
// dx (as llama.cpp's q8_1): x ~ dx * xq, and s = dx * sum(xq) carries the
// block sum that the formats with an offset (q4_0's -8, q4_1's min) need.
//
// A "chunk" is what one lane loads and reduces in one trip of the GEMV's
// loop: whole blocks (or half a k-quant super-block) starting at a byte
// offset the widest possible loads can reach. Each format gives
//   kElems        weight elements per chunk (a multiple of 32),
//   kWords        32-bit words a lane holds for one chunk,
//   load(row, c, w)        the words of chunk c of a row,
//   dot(w, c, xq, xs)      sum over the chunk of weight * activation, with
//                          xq the chunk's int8 activations as kElems/4 words
//                          and xs its kElems/32 blocks' {dx, s}.
// Compiles for the host too (LLMC_HD): cuda_format_tests checks every dot
// against the float decoders.
#ifndef LLMC_CUDA_DOT_Q8_CUH_
#define LLMC_CUDA_DOT_Q8_CUH_

#include "llmc_cuda_formats.cuh"

namespace llmc {
namespace cuda {
namespace q8 {

// Four int8 products added to c (dp4a); the host version for the unit tests
// and the CPU emulation.
LLMC_HD int dp4a(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i)
    c += static_cast<int>(static_cast<signed char>(static_cast<u32>(a) >> (8 * i))) *
         static_cast<int>(static_cast<signed char>(static_cast<u32>(b) >> (8 * i)));
  return c;
#endif
}

// The 32-bit word at an even byte offset of a chunk's words (offsets are
// compile-time constants after unrolling, so this is a register move or one
// funnel shift).
LLMC_HD u32 word_at(const u32* w, int byte) {
  const int i = byte >> 2;
  return (byte & 2) ? ((w[i] >> 16) | (w[i + 1] << 16)) : w[i];
}
// The f16 at an even byte offset, as float.
LLMC_HD float half_at(const u32* w, int byte) {
  return f16_bits(static_cast<u16>(w[byte >> 2] >> ((byte & 2) * 8)));
}

// n words from p (aligned to Width bytes) with Width-byte loads.
template <int Width> LLMC_HD void load_words(const u8* p, u32* w, int n) {
  if (Width == 16) {
    for (int i = 0; i < n / 4; ++i) {
      const uint4 v = reinterpret_cast<const uint4*>(p)[i];
      w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
    }
  } else if (Width == 8) {
    for (int i = 0; i < n / 2; ++i) {
      const uint2 v = reinterpret_cast<const uint2*>(p)[i];
      w[2 * i] = v.x; w[2 * i + 1] = v.y;
    }
  } else {
    for (int i = 0; i < n; ++i) w[i] = reinterpret_cast<const u32*>(p)[i];
  }
}

// Bits 0..3 of t moved to bit 4 of bytes 0..3 (a q5 high bit beside its
// nibble): the four copies of t that the multiply makes do not overlap.
LLMC_HD u32 spread4(u32 t) { return (((t & 0xfu) * 0x00204081u) & 0x01010101u) << 4; }

// dp4a of the 8 quant words of one 32-element block (nibble layout of
// q4_0/q4_1/q5_*: word m's low nibbles are elements 4m..4m+3, its high
// nibbles 16+4m..16+4m+3) with the block's 8 activation words.
LLMC_HD int dot_nibbles(const u32* w, int qs, const int* xq) {
  int sum = 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const u32 q = word_at(w, qs + 4 * m);
    sum = dp4a(static_cast<int>(q & 0x0f0f0f0fu), xq[m], sum);
    sum = dp4a(static_cast<int>((q >> 4) & 0x0f0f0f0fu), xq[4 + m], sum);
  }
  return sum;
}
// The same with q5's fifth bits from qh (bit e of qh for element e).
LLMC_HD int dot_nibbles5(const u32* w, int qs, u32 qh, const int* xq) {
  int sum = 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const u32 q = word_at(w, qs + 4 * m);
    sum = dp4a(static_cast<int>((q & 0x0f0f0f0fu) | spread4(qh >> (4 * m))), xq[m], sum);
    sum = dp4a(static_cast<int>(((q >> 4) & 0x0f0f0f0fu) | spread4(qh >> (16 + 4 * m))), xq[4 + m],
               sum);
  }
  return sum;
}

//===----------------------------------------------------------------------===//
// The 32-element formats: a chunk is kBlocks whole blocks, loaded with
// 8-byte loads (a row of them is a multiple of 8 bytes when K is a multiple
// of kElems, and rows start 64-byte aligned).
//===----------------------------------------------------------------------===//

// q4_0 {f16 d; u8 qs[16]} x4 = 72 bytes: sum d * (q - 8) * x.
struct q4_0 {
  using Fmt = fmt::q4_0;
  static constexpr int kBlocks = 4, kElems = 128, kBytes = 72, kWords = 18;
  LLMC_HD static void load(const u8* row, int c, u32* w) { load_words<8>(row + c * kBytes, w, kWords); }
  LLMC_HD static float dot(const u32* w, int, const int* xq, const float2* xs) {
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
      const int o = 18 * b;
      const int sum = dot_nibbles(w, o + 2, xq + 8 * b);
      acc = fmaf(half_at(w, o), fmaf(xs[b].x, static_cast<float>(sum), -8.0f * xs[b].y), acc);
    }
    return acc;
  }
};

// q4_1 {f16 d; f16 m; u8 qs[16]} x2 = 40 bytes: sum (d * q + m) * x.
struct q4_1 {
  using Fmt = fmt::q4_1;
  static constexpr int kBlocks = 2, kElems = 64, kBytes = 40, kWords = 10;
  LLMC_HD static void load(const u8* row, int c, u32* w) { load_words<8>(row + c * kBytes, w, kWords); }
  LLMC_HD static float dot(const u32* w, int, const int* xq, const float2* xs) {
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
      const int o = 20 * b;
      const int sum = dot_nibbles(w, o + 4, xq + 8 * b);
      acc = fmaf(half_at(w, o) * xs[b].x, static_cast<float>(sum), acc);
      acc = fmaf(half_at(w, o + 2), xs[b].y, acc);
    }
    return acc;
  }
};

// q5_0 {f16 d; u8 qh[4]; u8 qs[16]} x4 = 88 bytes: sum d * (q - 16) * x.
struct q5_0 {
  using Fmt = fmt::q5_0;
  static constexpr int kBlocks = 4, kElems = 128, kBytes = 88, kWords = 22;
  LLMC_HD static void load(const u8* row, int c, u32* w) { load_words<8>(row + c * kBytes, w, kWords); }
  LLMC_HD static float dot(const u32* w, int, const int* xq, const float2* xs) {
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
      const int o = 22 * b;
      const int sum = dot_nibbles5(w, o + 6, word_at(w, o + 2), xq + 8 * b);
      acc = fmaf(half_at(w, o), fmaf(xs[b].x, static_cast<float>(sum), -16.0f * xs[b].y), acc);
    }
    return acc;
  }
};

// q5_1 {f16 d; f16 m; u8 qh[4]; u8 qs[16]} = 24 bytes: sum (d * q + m) * x.
struct q5_1 {
  using Fmt = fmt::q5_1;
  static constexpr int kBlocks = 1, kElems = 32, kBytes = 24, kWords = 6;
  LLMC_HD static void load(const u8* row, int c, u32* w) { load_words<8>(row + c * kBytes, w, kWords); }
  LLMC_HD static float dot(const u32* w, int, const int* xq, const float2* xs) {
    const int sum = dot_nibbles5(w, 8, w[1], xq);
    return fmaf(half_at(w, 0) * xs[0].x, static_cast<float>(sum), half_at(w, 2) * xs[0].y);
  }
};

// q8_0 {f16 d; i8 qs[32]} x4 = 136 bytes: sum d * q * x.
struct q8_0 {
  using Fmt = fmt::q8_0;
  static constexpr int kBlocks = 4, kElems = 128, kBytes = 136, kWords = 34;
  LLMC_HD static void load(const u8* row, int c, u32* w) { load_words<8>(row + c * kBytes, w, kWords); }
  LLMC_HD static float dot(const u32* w, int, const int* xq, const float2* xs) {
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < kBlocks; ++b) {
      const int o = 34 * b;
      int sum = 0;
#pragma unroll
      for (int m = 0; m < 8; ++m) sum = dp4a(static_cast<int>(word_at(w, o + 2 + 4 * m)), xq[8 * b + m], sum);
      acc = fmaf(half_at(w, o) * xs[b].x, static_cast<float>(sum), acc);
    }
    return acc;
  }
};

//===----------------------------------------------------------------------===//
// k-quants: a chunk is half a 256-element super-block (128 elements, four
// 32-element sub-blocks of q4_K/q5_K), so that a row of K = 4096 keeps all
// 32 lanes busy. Chunk c is half h = c & 1 of super-block c >> 1; both halves
// load the super-block's header (16-byte loads: rows of 144 and 176 bytes
// keep every super-block 16-byte aligned).
//===----------------------------------------------------------------------===//

// Byte j (0..11) of the 12 scale bytes held in words w[1..3].
LLMC_HD u32 scale_byte(const u32* w, int j) { return (w[1 + (j >> 2)] >> (8 * (j & 3))) & 0xffu; }
// scale_min_k4 for sub-block 4h + s of the super-block (s compile-time, h
// per lane): both branches computed, one selected, so lanes of either half
// never diverge.
LLMC_HD void scale_min_half(const u32* w, int h, int s, float* sc, float* mn) {
  const u32 a = scale_byte(w, s), b = scale_byte(w, s + 4), hi = scale_byte(w, s + 8);
  const u32 sc1 = (hi & 0x0fu) | ((a >> 6) << 4), mn1 = (hi >> 4) | ((b >> 6) << 4);
  *sc = static_cast<float>(h ? sc1 : (a & 63u));
  *mn = static_cast<float>(h ? mn1 : (b & 63u));
}

// q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]} = 144 bytes. Words: 0..3
// the header, 4..19 the half's 64 quant bytes (64-element groups 2h, 2h+1:
// low nibbles sub-block 4h + 2g, high nibbles 4h + 2g + 1).
struct q4_K {
  using Fmt = fmt::q4_K;
  static constexpr int kElems = 128, kWords = 20;
  LLMC_HD static void load(const u8* row, int c, u32* w) {
    const u8* b = row + (c >> 1) * 144;
    load_words<16>(b, w, 4);
    load_words<16>(b + 16 + 64 * (c & 1), w + 4, 16);
  }
  LLMC_HD static float dot(const u32* w, int c, const int* xq, const float2* xs) {
    const int h = c & 1;
    const float d = half_at(w, 0), dmin = half_at(w, 2);
    float acc = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int g = s >> 1, shift = 4 * (s & 1);
      int sum = 0;
#pragma unroll
      for (int m = 0; m < 8; ++m)
        sum = dp4a(static_cast<int>((w[4 + 8 * g + m] >> shift) & 0x0f0f0f0fu), xq[8 * s + m], sum);
      float sc, mn;
      scale_min_half(w, h, s, &sc, &mn);
      acc = fmaf(d * sc * xs[s].x, static_cast<float>(sum), acc);
      acc = fmaf(-dmin * mn, xs[s].y, acc);
    }
    return acc;
  }
};

// q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} = 176 bytes.
// Words: 0..3 header, 4..11 all of qh (element l of sub-block j: bit j of
// qh[l]), 12..27 the half's quant bytes.
struct q5_K {
  using Fmt = fmt::q5_K;
  static constexpr int kElems = 128, kWords = 28;
  LLMC_HD static void load(const u8* row, int c, u32* w) {
    const u8* b = row + (c >> 1) * 176;
    load_words<16>(b, w, 12);
    load_words<16>(b + 48 + 64 * (c & 1), w + 12, 16);
  }
  LLMC_HD static float dot(const u32* w, int c, const int* xq, const float2* xs) {
    const int h = c & 1;
    const float d = half_at(w, 0), dmin = half_at(w, 2);
    float acc = 0.0f;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int g = s >> 1, shift = 4 * (s & 1), j = 4 * h + s;
      int sum = 0;
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const u32 q = ((w[12 + 8 * g + m] >> shift) & 0x0f0f0f0fu) | (((w[4 + m] >> j) & 0x01010101u) << 4);
        sum = dp4a(static_cast<int>(q), xq[8 * s + m], sum);
      }
      float sc, mn;
      scale_min_half(w, h, s, &sc, &mn);
      acc = fmaf(d * sc * xs[s].x, static_cast<float>(sum), acc);
      acc = fmaf(-dmin * mn, xs[s].y, acc);
    }
    return acc;
  }
};

// q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} = 210 bytes, only
// 2-byte aligned: each region of the half is read as 4-byte words from the
// aligned address below it and realigned with a funnel shift. Words: 0..15
// ql[64h..], 16..23 qh[32h..], 24..25 scales[8h..], 26 d (low half).
// Element r = 32k + l of the half: low nibble (k < 2) or high nibble of
// ql byte l + 32(k & 1), bits 2k..2k+1 of qh byte l, scale 8h + l/16 + 2k;
// x = d * scale * (q - 32).
struct q6_K {
  using Fmt = fmt::q6_K;
  static constexpr int kElems = 128, kWords = 27;
  // n words of the 2-byte-aligned bytes at p: n or n+1 aligned loads, so
  // nothing outside [p, p + 4n) beyond the two bytes below p is read.
  LLMC_HD static void load_unaligned(const u8* p, u32* w, int n) {
    const int odd = static_cast<int>(reinterpret_cast<unsigned long long>(p) & 2);
    const u32* a = reinterpret_cast<const u32*>(p - odd);
    u32 prev = a[0];
    for (int i = 0; i < n; ++i) {
      const u32 next = (odd || i + 1 < n) ? a[i + 1] : 0u;
      w[i] = odd ? ((prev >> 16) | (next << 16)) : prev;
      prev = next;
    }
  }
  LLMC_HD static void load(const u8* row, int c, u32* w) {
    const u8* b = row + (c >> 1) * 210;
    const int h = c & 1;
    load_unaligned(b + 64 * h, w, 16);
    load_unaligned(b + 128 + 32 * h, w + 16, 8);
    load_unaligned(b + 192 + 8 * h, w + 24, 2);
    w[26] = *reinterpret_cast<const u16*>(b + 208);
  }
  LLMC_HD static float dot(const u32* w, int, const int* xq, const float2* xs) {
    const float d = half_at(w, 104);
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Two 16-element halves of the quarter, each with its own scale.
      float part = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int sum = 0, xsum = 0;
#pragma unroll
        for (int m = 4 * half; m < 4 * half + 4; ++m) {
          const u32 lo = (w[8 * (k & 1) + m] >> (4 * (k >> 1))) & 0x0f0f0f0fu;
          const u32 hi = ((w[16 + m] >> (2 * k)) & 0x03030303u) << 4;
          sum = dp4a(static_cast<int>(lo | hi), xq[8 * k + m], sum);
          xsum = dp4a(0x01010101, xq[8 * k + m], xsum);
        }
        const int j = 2 * k + half;  // scale byte of the half's 8
        const float sc = static_cast<float>(static_cast<signed char>(w[24 + (j >> 2)] >> (8 * (j & 3))));
        part = fmaf(sc, static_cast<float>(sum - 32 * xsum), part);
      }
      acc = fmaf(d * xs[k].x, part, acc);
    }
    return acc;
  }
};

} // namespace q8
} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_DOT_Q8_CUH_
