// llmc CUDA kernel library: GGUF weights decoded for the tensor-core GEMM
// straight into pairs of the activation type, with half-precision pair
// arithmetic instead of float.
//
// Why: gemm_mma decodes every weight it multiplies (4-bit weights are read
// as 4 bits), and the float decoder spends about five instructions a weight
// on it (extract, int-to-float, subtract 8, scale, and half a pack), which
// with the loop's other work makes the q4_0 GEMM issue-bound at 307
// instructions per 32 mma (SASS, sm_90) against bf16's 133. Here a nibble
// becomes the integer q - 8 in Act with bit operations: it is placed in the
// mantissa of a power of two whose ulp is 1 (0x4300 is bf16 128.0, 0x6400
// f16 1024.0) and the power plus 8 is subtracted, two elements per
// instruction, exactly. The scale is then applied to the pair:
//  - f16: one multiply, rounded once: the float decoder's d * (q - 8) is
//    exact in float and rounded once to f16 too;
//  - bf16: d (an f16, 11 significant bits) is split into d_hi = bf16(d) and
//    d_lo = d - d_hi (at most 4 bits, exact), d_lo * (q - 8) is exact in
//    bf16, and one fused multiply-add d_hi * (q - 8) + d_lo * (q - 8)
//    rounds d * (q - 8) once.
// So the pairs are bit-exact with from_float<Act> of the float decoder's
// values, up to the sign of zero: cuda_formats_test checks that on the
// host, where the pair arithmetic is the toolkit's host __hsub2/__hmul2
// and, for lack of a host __hfma2, fmaf rounded once to bf16 (the same
// result for these operands: fma2 below).
//
// (Decoding to q - 8 alone and applying d to each block's mma products
// instead was tried and measured in SASS: the extra multiply-add per output
// element and block costs as much as the decode saves; docs/cuda.md.)
//
// A format here gives decode8<Act>(row, g, out): elements 8g .. 8g+7 of a
// row as 4 words of Act pairs (element 2i in the low half). Compiles for the
// host too (LLMC_HD).
#ifndef LLMC_CUDA_MMA_WEIGHTS_CUH_
#define LLMC_CUDA_MMA_WEIGHTS_CUH_

#include "llmc_cuda_formats.cuh"

namespace llmc {
namespace cuda {
namespace mmaw {

// Bytes of {a, b} chosen by the selector's nibbles (PRMT; 4 and above pick b's).
LLMC_HD u32 byte_perm(u32 a, u32 b, u32 sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, sel);
#else
  const unsigned long long ab = static_cast<unsigned long long>(b) << 32 | a;
  u32 r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<u32>((ab >> (8 * ((sel >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
#endif
}

// The power of two whose ulp is 1 in Act, as the bits of a pair.
template <class Act> struct int_base;
template <> struct int_base<__nv_bfloat16> { static constexpr u32 bits2 = 0x43004300u; }; // 128
template <> struct int_base<__half> { static constexpr u32 bits2 = 0x64006400u; };         // 1024

// Pair arithmetic on the bits of two Act: a - b, a * b, a * b + c, each
// rounded once (HADD2/HMUL2/HFMA2 on the device).
template <class Act> struct pair_type;
template <> struct pair_type<__half> {
  using T2 = __half2;
  using Raw = __half2_raw;
};
template <> struct pair_type<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  using Raw = __nv_bfloat162_raw;
};
#if defined(__CUDA_ARCH__)
template <class Act> struct pair_ops {
  using T2 = typename pair_type<Act>::T2;
  static __device__ __forceinline__ T2 in(const u32& a) { return *reinterpret_cast<const T2*>(&a); }
  static __device__ __forceinline__ u32 out(const T2& r) { return *reinterpret_cast<const u32*>(&r); }
};
#else // the host (tests, CPU emulation): through the raw structs, no type punning
template <class Act> struct pair_ops {
  using T2 = typename pair_type<Act>::T2;
  using Raw = typename pair_type<Act>::Raw;
  static T2 in(u32 a) {
    Raw r;
    r.x = static_cast<unsigned short>(a & 0xffffu);
    r.y = static_cast<unsigned short>(a >> 16);
    return T2(r);
  }
  static u32 out(const T2& v) {
    const Raw r = v;
    return static_cast<u32>(r.x) | static_cast<u32>(r.y) << 16;
  }
};
#endif
template <class Act> LLMC_HD u32 sub2(u32 a, u32 b) {
  using P = pair_ops<Act>;
  return P::out(__hsub2(P::in(a), P::in(b)));
}
template <class Act> LLMC_HD u32 mul2(u32 a, u32 b) {
  using P = pair_ops<Act>;
  return P::out(__hmul2(P::in(a), P::in(b)));
}
template <class Act> LLMC_HD u32 fma2(u32 a, u32 b, u32 c) {
  using P = pair_ops<Act>;
#if defined(__CUDA_ARCH__)
  return P::out(__hfma2(P::in(a), P::in(b), P::in(c)));
#else
  // The toolkit has no host __hfma2: fmaf, then one rounding to Act. That
  // is the fused result whenever a * b + c is exact in float, as it is for
  // scale2's operands (16 significant bits at most), and for q4_K's step
  // decoder's unless D q and M are more than 2^12 (bf16) or 2^8 (f16)
  // apart; then float rounds first, and the result may be one Act ulp off
  // the device's (host/device parity only: within the tested bound).
  const typename P::T2 x = P::in(a), y = P::in(b), z = P::in(c);
  return P::out(typename P::T2(
      from_float<Act>(fmaf(to_float(x.x), to_float(y.x), to_float(z.x))),
      from_float<Act>(fmaf(to_float(x.y), to_float(y.y), to_float(z.y)))));
#endif
}

// Two floats as an Act pair, each rounded to nearest (gemm_mma's pack2, for
// the host too).
template <class Act> LLMC_HD u32 floats2(float a, float b);
template <> LLMC_HD u32 floats2<__half>(float a, float b) {
  return pair_ops<__half>::out(__floats2half2_rn(a, b));
}
template <> LLMC_HD u32 floats2<__nv_bfloat16>(float a, float b) {
  return pair_ops<__nv_bfloat16>::out(__floats2bfloat162_rn(a, b));
}

// An f16 scale applied to Act pairs of small integers v (|v| <= 16),
// rounding d * v once (see the top of the file).
template <class Act> struct scale2;
template <> struct scale2<__half> {
  u32 d2;
  LLMC_HD explicit scale2(u32 d_bits) : d2(d_bits | d_bits << 16) {}
  LLMC_HD u32 apply(u32 v) const { return mul2<__half>(d2, v); }
};
template <> struct scale2<__nv_bfloat16> {
  u32 hi2, lo2;
  LLMC_HD explicit scale2(u32 d_bits) {
    const float d = f16_bits(static_cast<u16>(d_bits));
    const u32 hi = __bfloat16_as_ushort(__float2bfloat16_rn(d));
    const u32 lo = __bfloat16_as_ushort(__float2bfloat16_rn(d - bits_to_float(hi << 16)));
    hi2 = hi | hi << 16;
    lo2 = lo | lo << 16;
  }
  LLMC_HD u32 apply(u32 v) const {
    return fma2<__nv_bfloat16>(hi2, v, mul2<__nv_bfloat16>(lo2, v));
  }
};

// Eight nibbles, one per byte of lo then hi (low or high halves: shift 0 or
// 4), as four Act pairs q - Bias.
template <class Act, int Bias> LLMC_HD void nibbles8(u32 lo, u32 hi, int shift, u32 (&out)[4]) {
  static_assert(Bias >= 0 && Bias < 128, "nibbles8: the bias must fit in the mantissa");
  lo = (lo >> shift) & 0x0f0f0f0fu;
  hi = (hi >> shift) & 0x0f0f0f0fu;
  // Byte pairs (0, 1) and (2, 3) of a word into the two 16-bit halves, with
  // the power of two's high byte filled in by the same PRMT (selector 4:
  // byte 0 of `fill`); the pair is then {lo - Bias, hi - Bias} exactly.
  constexpr u32 base = int_base<Act>::bits2, fill = base | base >> 8;
  constexpr u32 bias = base | (Bias << 16) | Bias;
  out[0] = sub2<Act>(byte_perm(lo, fill, 0x4140), bias);
  out[1] = sub2<Act>(byte_perm(lo, fill, 0x4342), bias);
  out[2] = sub2<Act>(byte_perm(hi, fill, 0x4140), bias);
  out[3] = sub2<Act>(byte_perm(hi, fill, 0x4342), bias);
}

// Formats without a decoder here take gemm_mma's float path.
template <class Fmt> struct of { static constexpr bool value = false; };

// q4_0 {f16 d; u8 qs[16]}: group g is the low (g % 4 < 2) or high nibbles
// of qs[8 (g % 2) ..] of block g / 4; w = d * (q - 8).
template <> struct of<fmt::q4_0> {
  static constexpr bool value = true;
  template <class Act> LLMC_HD static void decode8(const u8* row, int g, u32 (&out)[4]) {
    const u8* b = row + (g >> 2) * 18;
    u32 lo, hi;
    fmt::ld8b(b + 2 + (g & 1) * 8, lo, hi);
    nibbles8<Act, 8>(lo, hi, (g & 2) ? 4 : 0, out);
    const scale2<Act> d(fmt::ld16(b));
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = d.apply(out[i]);
  }

  // Rows of K % 64 == 0 elements (an even number of 18-byte blocks) start
  // 4-byte aligned, so block kt of every row starts at the same offset, 0
  // or 2, past a 4-byte word: decode_step reads it in whole words.
  LLMC_HD static constexpr bool step_rows(int k) { return k % 64 == 0; }
  // step_load(row + row_bytes(32 n), kt - n, ...) loads what
  // step_load(row, kt, ...) does for n a multiple of this (the words' offset
  // past 4-byte alignment depends on kt % 2 only); 0: for no n but 0.
  static constexpr int rebase_steps = 2;

  // Step kt (elements 32 kt .. 32 kt + 31: block kt) of a row whose start is
  // 4-byte aligned, Count of its four 8-element groups: all four (Count 4,
  // first 0), or groups first and first + 2 (Count 2, first 0 or 1: the low
  // and high nibbles of the same 8 bytes). out[4 c ..] is the c-th, as
  // decode8 gives it. One scale conversion for all of them, and aligned
  // 4-byte loads (five at most) where decode8 takes five 2-byte loads a
  // group: the bytes are realigned by one PRMT a word, whose selector is
  // the same for every lane (the offset depends on kt only). In two halves,
  // so that a loop can load a step's words before other work and decode
  // them after it: step_load, then step_decode.
  template <int Count> struct step_words {
    static_assert(Count == 2 || Count == 4, "q4_0 decode_step: 2 or 4 groups");
    u32 w[Count == 4 ? 5 : 4]; // the scale's word, then the words of qs the groups need
  };
  // Nothing is shared between the steps of a quartet (see step_decoder):
  // each block has its scale.
  struct step_state {};
  template <int Count>
  LLMC_HD static void step_load(const u8* row, int kt, int first, int phase, step_words<Count>& sw) {
    (void)first, (void)phase; // Count 4 takes every group
    const int off = kt * 18;
    const u32* w = reinterpret_cast<const u32*>(row + (off - (off & 2)));
    if constexpr (Count == 4) { // w[0 .. 4]: the block's 18 bytes and 2 beside them
#pragma unroll
      for (int i = 0; i < 5; ++i) sw.w[i] = w[i];
    } else { // w[0], then w[2 first .. 2 first + 2]: qs bytes 8 first .. 8 first + 7
      sw.w[0] = w[0];
#pragma unroll
      for (int i = 0; i < 3; ++i) sw.w[i + 1] = w[2 * first + i];
    }
  }
  template <class Act, int Count>
  LLMC_HD static void step_decode(const step_words<Count>& sw, int kt, int phase, step_state& st,
                                  u32 (&out)[4 * Count]) {
    (void)phase, (void)st;
    const int s = (kt * 18) & 2;
    const u32 sel = s ? 0x7654u : 0x5432u; // bytes s + 2 .. s + 5 of a word pair
    const scale2<Act> d((sw.w[0] >> (8 * s)) & 0xffffu);
    constexpr int NQ = Count == 4 ? 4 : 2; // words of qs the groups need
    // qs word i spans sw.w[i + j], sw.w[i + j + 1]: j = 0 with Count 4 (w[0]
    // also holds the scale), 1 with Count 2.
    constexpr int j = Count == 4 ? 0 : 1;
    u32 qs[NQ];
#pragma unroll
    for (int i = 0; i < NQ; ++i) qs[i] = byte_perm(sw.w[i + j], sw.w[i + j + 1], sel);
#pragma unroll
    for (int c = 0; c < Count; ++c) {
      // Count 4: group c is words 2 (c & 1) and up, high nibbles for c >= 2;
      // Count 2: the two words, low nibbles then high.
      const int wi = Count == 4 ? 2 * (c & 1) : 0;
      const bool high = Count == 4 ? c >= 2 : c == 1;
      u32 o[4];
      nibbles8<Act, 8>(qs[wi], qs[wi + 1], high ? 4 : 0, o);
#pragma unroll
      for (int i = 0; i < 4; ++i) out[4 * c + i] = d.apply(o[i]);
    }
  }
  template <class Act, int Count>
  LLMC_HD static void decode_step(const u8* row, int kt, int first, u32 (&out)[4 * Count]) {
    step_words<Count> sw;
    step_state st;
    step_load<Count>(row, kt, first, -1, sw);
    step_decode<Act, Count>(sw, kt, -1, st, out);
  }
};

// Formats the GEMM decodes a whole 32-element step of a row at a time
// (step_rows, step_words, step_state, step_load, step_decode as q4_0's
// above): one thread a tile row, or two.
//
// `phase` is kt % 4 where the caller knows it at compile time (an unrolled
// loop over steps whose first is a multiple of 4), -1 where it does not.
// A format may share work between the four steps of such a quartet through
// `step_state`: what step_decode computes at phase 0 and reads at phases 1
// to 3 (at -1 it decodes the step from its own words alone). So the caller
// decodes a quartet's steps in order, phase 0 first, with one step_state,
// and step_load skips what phases 1 to 3 do not read.
template <class Fmt> struct step_decoder { static constexpr bool value = false; };
template <> struct step_decoder<fmt::q4_0> : of<fmt::q4_0> {};

// q4_K by steps: step kt is sub-block kt % 8 of super-block kt / 8, whose
// 16-byte header (d, dmin, scales) and 32 quant bytes (low or high nibbles)
// come in three 16-byte loads, its scale and min decoded once, where
// decode8 takes a header and an 8-byte load for every 8 weights. Rows of
// K % 256 == 0 (whole 144-byte super-blocks) are 16-byte aligned.
//
// The weights are w = D q - M, D = d sc and M = dmin m in float, in pair
// arithmetic: the nibbles become exact Act pairs q as q4_0's do, then one
// fused multiply-add a pair with D and -M rounded to Act. So, unlike q4_0,
// not bit-exact with the float decoder: D and M carry Act's rounding
// (2^-8 relative in bf16, 2^-11 in f16) into w, at most
// eps (15 |D| + |M|) beyond w's own rounding (cuda_formats_test checks
// that bound). In the float decoder the extract, int-to-float, multiply-add
// and half a pack cost four instructions a weight; here two PRMTs, a
// subtraction and a multiply-add a pair, two a weight, which is what lets
// the 4-warp tiles' loop unroll without spills.
template <> struct step_decoder<fmt::q4_K> {
  static constexpr bool value = true;
  LLMC_HD static constexpr bool step_rows(int k) { return k % 256 == 0; }
  // A super-block a rebase (see q4_0's), longer than the GEMM's rounds.
  static constexpr int rebase_steps = 8;
  template <int Count> struct step_words {
    static_assert(Count == 2 || Count == 4, "q4_K decode_step: 2 or 4 groups");
    uint4 head;                   // d, dmin, scales[12] (phase 0 or unknown)
    u32 q[Count == 4 ? 8 : 4];    // the groups' quant bytes
  };
  // A quartet of steps is sub-blocks 0-3 or 4-7 of one super-block: its
  // four 6-bit scales and mins, byte i for sub-block 4 h + i, and the
  // super-block's d and dmin as floats. Unpacked from the header once a
  // quartet, where k4_scale_min takes about 14 shifts and masks a step to
  // unpack one (SASS sm_90), and the header's load is left to phase 0.
  struct step_state {
    u32 sc4, m4;
    float d, dmin;
  };
  template <int Count>
  LLMC_HD static void step_load(const u8* row, int kt, int first, int phase, step_words<Count>& sw) {
    (void)first; // Count 4 takes every group
    const u8* b = row + (kt >> 3) * fmt::q4_K::block_bytes;
    const u8* qs = b + 16 + 32 * ((kt & 7) >> 1); // this sub-block pair's 32 bytes
    if (phase <= 0) sw.head = *reinterpret_cast<const uint4*>(b);
    if constexpr (Count == 4) {
      const uint4 lo = *reinterpret_cast<const uint4*>(qs), hi = *reinterpret_cast<const uint4*>(qs + 16);
      sw.q[0] = lo.x, sw.q[1] = lo.y, sw.q[2] = lo.z, sw.q[3] = lo.w;
      sw.q[4] = hi.x, sw.q[5] = hi.y, sw.q[6] = hi.z, sw.q[7] = hi.w;
    } else { // groups first and first + 2: bytes 8 first .. and 16 + 8 first ..
      const uint2 a = *reinterpret_cast<const uint2*>(qs + 8 * first);
      const uint2 c = *reinterpret_cast<const uint2*>(qs + 16 + 8 * first);
      sw.q[0] = a.x, sw.q[1] = a.y, sw.q[2] = c.x, sw.q[3] = c.y;
    }
  }
  template <class Act, int Count>
  LLMC_HD static void step_decode(const step_words<Count>& sw, int kt, int phase, step_state& st,
                                  u32 (&out)[4 * Count]) {
    float d, m;
    if (phase < 0) { // the step alone
      fmt::k4_scale_min(sw.head, kt & 7, &d, &m);
    } else {
      if (phase == 0) {
        // k4_scale_min for the quartet's four sub-blocks at once (scales[0..3],
        // [4..7], [8..11] are words y, z, w): 0-3 take 6 bits of the first
        // two words' bytes; 4-7 the third's nibbles below the first two's
        // top 2 bits.
        const uint4& h = sw.head;
        if (kt & 4) {
          st.sc4 = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
          st.m4 = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
        } else {
          st.sc4 = h.y & 0x3f3f3f3fu;
          st.m4 = h.z & 0x3f3f3f3fu;
        }
        st.d = lo_f16(h.x);
        st.dmin = hi_f16(h.x);
      }
      // Byte `phase` of each, zero-extended (one PRMT: byte 0 of 0 above it).
      const u32 sel = 0x4440u | static_cast<u32>(phase);
      d = st.d * static_cast<float>(byte_perm(st.sc4, 0u, sel));
      m = st.dmin * static_cast<float>(byte_perm(st.m4, 0u, sel));
    }
    const u32 d2 = floats2<Act>(d, d), neg_m2 = floats2<Act>(-m, -m);
#pragma unroll
    for (int c = 0; c < Count; ++c) {
      u32 q[4];
      nibbles8<Act, 0>(sw.q[2 * c], sw.q[2 * c + 1], 4 * (kt & 1), q);
#pragma unroll
      for (int i = 0; i < 4; ++i) out[4 * c + i] = fma2<Act>(d2, q[i], neg_m2);
    }
  }
  template <class Act, int Count>
  LLMC_HD static void decode_step(const u8* row, int kt, int first, u32 (&out)[4 * Count]) {
    step_words<Count> sw;
    step_state st;
    step_load<Count>(row, kt, first, -1, sw);
    step_decode<Act, Count>(sw, kt, -1, st, out);
  }
};

} // namespace mmaw
} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_MMA_WEIGHTS_CUH_
