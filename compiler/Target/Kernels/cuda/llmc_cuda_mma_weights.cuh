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
  // scale2's operands (16 significant bits at most).
  const typename P::T2 x = P::in(a), y = P::in(b), z = P::in(c);
  return P::out(typename P::T2(
      from_float<Act>(fmaf(to_float(x.x), to_float(y.x), to_float(z.x))),
      from_float<Act>(fmaf(to_float(x.y), to_float(y.y), to_float(z.y)))));
#endif
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

// The values at bits 0..(Bits-1) and 16..(16+Bits-1) of x (Bits <= 7, other
// bits already clear) as the Act pair {lo - Bias, hi - Bias}.
template <class Act, int Bias> LLMC_HD u32 int_pair(u32 x) {
  static_assert(Bias >= 0 && Bias < 128, "int_pair: the bias must fit in the mantissa");
  return sub2<Act>(x | int_base<Act>::bits2, int_base<Act>::bits2 | (Bias << 16) | Bias);
}

// Eight nibbles, one per byte of lo then hi (low or high halves: shift 0 or
// 4), as four Act pairs q - Bias.
template <class Act, int Bias> LLMC_HD void nibbles8(u32 lo, u32 hi, int shift, u32 (&out)[4]) {
  lo = (lo >> shift) & 0x0f0f0f0fu;
  hi = (hi >> shift) & 0x0f0f0f0fu;
  // Byte pairs (0, 1) and (2, 3) of a word into the two 16-bit halves.
  out[0] = int_pair<Act, Bias>(byte_perm(lo, 0, 0x4140));
  out[1] = int_pair<Act, Bias>(byte_perm(lo, 0, 0x4342));
  out[2] = int_pair<Act, Bias>(byte_perm(hi, 0, 0x4140));
  out[3] = int_pair<Act, Bias>(byte_perm(hi, 0, 0x4342));
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
};

} // namespace mmaw
} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_MMA_WEIGHTS_CUH_
