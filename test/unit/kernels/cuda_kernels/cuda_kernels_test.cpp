//===- cuda_kernels_test.cpp - every CUDA kernel template compiles --------===//
//
// Instantiates every template of llmc_cuda_kernels.cuh for SmolLM2-135M's
// shapes (hidden 576, 9/3 heads x 64, intermediate 1536, vocab 49152; q4_1
// and q8_0 weights; f16 and bf16 activations) and a synthetic shape (hidden
// 256, 4/2 heads x 64, every weight format; f32 and f16 activations), the way
// the CUDA emitter will (extern "C" __global__ wrappers around __device__
// templates, fused epilogues as functors), compiles each with NVRTC for sm_80
// and sm_90, runs ptxas -v over every kernel and prints the table. Asserts no
// compile error and no spills in any kernel (GEMV, tensor-core GEMM in each
// of its tiles, norm, RoPE, cache writes, embedding, attention).
//
// Numerics are NOT checked here (no GPU on the build machines): this proves
// the templates instantiate, compile and fit in registers, nothing more.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>
#include <map>
#include <vector>

namespace llmc::cuda::test {
namespace {

struct Shape {
  std::string name;
  int hidden, heads, kv_heads, head_dim, inter, vocab;
  std::vector<std::string> formats; // weight formats of the linears
  std::string act;                  // "__half", "__nv_bfloat16", "float"
};

// Replaces $NAME by vars[NAME], longest names first ($QKV before $Q).
std::string sub(std::string s, const std::map<std::string, std::string> &vars) {
  std::vector<std::pair<std::string, std::string>> byLength(vars.begin(), vars.end());
  std::stable_sort(byLength.begin(), byLength.end(),
                   [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
  for (const auto &[k, v] : byLength) {
    std::string key = "$" + k;
    for (size_t p = s.find(key); p != std::string::npos; p = s.find(key, p + v.size()))
      s.replace(p, key.size(), v);
  }
  return s;
}

// The source an emitter would write for one model: one wrapper per kernel.
std::string instantiate(const Shape &m) {
  const int qkv = (m.heads + 2 * m.kv_heads) * m.head_dim;
  std::map<std::string, std::string> v = {
      {"A", m.act},
      {"H", std::to_string(m.hidden)},
      {"NH", std::to_string(m.heads)},
      {"KV", std::to_string(m.kv_heads)},
      {"HD", std::to_string(m.head_dim)},
      {"I", std::to_string(m.inter)},
      {"V", std::to_string(m.vocab)},
      {"QKV", std::to_string(qkv)},
      {"Q", std::to_string(m.heads * m.head_dim)},
  };
  std::string s = sub(R"(#include "llmc_cuda_kernels.cuh"
using namespace llmc::cuda;
typedef $A A;
#define LB __launch_bounds__(128, 4) // minBlocks: see README (spills)

// A generated epilogue: residual add, as the emitter writes it from
// ExprEmitter statements (t0 = GEMM lane, t1 = loaded residual).
template <int N> struct residual_epilogue {
  static constexpr int kRows = 1;
  const A* res; A* y;
  __device__ static int row(int n, int) { return n; }
  __device__ void operator()(int t, int n, const float (&acc)[1]) const {
    const float t0 = acc[0];
    const float t1 = to_float(res[(long long)t * N + n]);
    auto e0 = t0 + t1;
    y[(long long)t * N + n] = from_float<A>(e0);
  }
};
template <int N> struct logits_epilogue {
  static constexpr int kRows = 1;
  float* logits;
  __device__ static int row(int n, int) { return n; }
  __device__ void operator()(int i, int n, const float (&acc)[1]) const {
    logits[(long long)i * N + n] = acc[0];
  }
};

__device__ const double rope_inv_freq[$HD / 2] = {0.0};

extern "C" __global__ void LB norm_rms(int T, const A* x, const void* w, A* y) {
  rms_norm<$H, fmt::f32, A, 128>(T, x, w, y, 1e-5f);
}
extern "C" __global__ void LB norm_rms_bf16w(int T, const A* x, const void* w, A* y) {
  rms_norm<$H, fmt::bf16, A, 128>(T, x, w, y, 1e-5f);
}
extern "C" __global__ void LB rope_half(step_info s, const A* x, A* y) {
  rope<$NH, $HD, rope_style::half, A>(s, x, y, rope_inv_freq);
}
extern "C" __global__ void LB rope_interleaved(step_info s, const A* x, A* y) {
  rope<$NH, $HD, rope_style::interleaved, A>(s, x, y, rope_inv_freq);
}
extern "C" __global__ void LB rope_qkv_cache(step_info s, const A* qkv, A* q, A* kc, A* vc) {
  rope_qkv_cache_write<$NH, $KV, $HD, rope_style::half, A>(s, qkv, q, kc, vc, rope_inv_freq);
}
extern "C" __global__ void LB cache_write(step_info s, const A* k, const A* v, A* kc, A* vc) {
  kv_cache_write<$KV, $HD, A>(s, k, v, kc, vc);
}
extern "C" __global__ void LB attn_decode(step_info s, const A* q, const A* kc, const A* vc, A* o,
                                          float* scratch, float scale) {
  paged_attention_decode<$NH, $KV, $HD, A, 256, 4>(
      s, q, kc, vc, o, attn_scratch_of<$NH, $HD>(scratch, s.num_tokens, gridDim.x), scale, 0);
}
extern "C" __global__ void LB attn_decode_window(step_info s, const A* q, const A* kc, const A* vc,
                                                 A* o, float* scratch, float scale) {
  paged_attention_decode<$NH, $KV, $HD, A, 128, 4>(
      s, q, kc, vc, o, attn_scratch_of<$NH, $HD>(scratch, s.num_tokens, gridDim.x), scale, 4096);
}
extern "C" __global__ void LB attn_clear(float* scratch) { attn_counters_clear<$NH>(scratch); }
)",
                      v);
  for (const std::string &f : m.formats) {
    v["F"] = f;
    // A C identifier for the entry names: i4<128> -> i4_128_.
    std::string n = f;
    for (char &c : n)
      if (c == '<' || c == '>')
        c = '_';
    v["N"] = n;
    s += sub(R"(
extern "C" __global__ void LB embed_$N(step_info s, const void* table, A* y) {
  embed<fmt::$F, $V, $H, A>(s, table, y);
}
// cuBLASLt's B operand from a quantized weight (the emitter's lt_deq).
extern "C" __global__ void LB dequantize_gate_up_$N(const void* w, A* b) {
  dequantize_weight<fmt::$F, $I, $H, A>(w, b);
}
// Decode GEMVs of a Llama layer, with their fused prologues and epilogues.
extern "C" __global__ void LB gemv_qkv_norm_$N(int T, const A* x, const void* w, const void* nw, A* y) {
  gemv<fmt::$F, $QKV, $H, 4, 4, A>(T, nullptr, x, w, rms_norm_prologue<$H>{nw, 1e-5f},
                                   store_epilogue<$QKV, A>{y});
}
extern "C" __global__ void LB gemv_o_residual_$N(int T, const A* x, const void* w, const A* r, A* y) {
  gemv<fmt::$F, $H, $Q, 4, 4, A>(T, nullptr, x, w, no_prologue{}, residual_epilogue<$H>{r, y});
}
extern "C" __global__ void LB gemv_gate_up_silu_$N(int T, const A* x, const void* w, const void* nw, A* y) {
  gemv<fmt::$F, $I, $H, 4, 4, A>(T, nullptr, x, w, rms_norm_prologue<$H>{nw, 1e-5f},
                                 silu_mul_epilogue<$I, A>{y});
}
extern "C" __global__ void LB gemv_down_residual_$N(int T, const A* x, const void* w, const A* r, A* y) {
  gemv<fmt::$F, $H, $I, 4, 4, A>(T, nullptr, x, w, no_prologue{}, residual_epilogue<$H>{r, y});
}
extern "C" __global__ void LB gemv_lm_head_$N(step_info s, const A* x, const void* w, const void* nw, float* l) {
  gemv<fmt::$F, $V, $H, 4, 4, A>(s.num_logits, s.logits_rows, x, w, rms_norm_prologue<$H>{nw, 1e-5f},
                                 logits_epilogue<$V>{l});
}
extern "C" __global__ void LB gemv_t8_gate_up_silu_$N(int T, const A* x, const void* w, A* y) {
  gemv<fmt::$F, $I, $H, 8, 4, A>(T, nullptr, x, w, no_prologue{}, silu_mul_epilogue<$I, A>{y});
}
)",
             v);
    if (m.act != "float")
      s += sub(R"(
// Prefill GEMMs on tensor cores: the norm into the A operand first, then
// the GEMM in each tile llmc-select-gemm-tiles picks (64-token tiles of 64
// or 128 weight rows; 128-token tiles of 64 or 128).
extern "C" __global__ void LB gemm_operand_norm_$N(int T, const A* x, const void* nw, A* a) {
  gemm_operand<$H, A>(T, nullptr, x, rms_norm_prologue<$H>{nw, 1e-5f}, a);
}
#define LB256 __launch_bounds__(256, 2)
#define LB3 __launch_bounds__(128, 3)
extern "C" __global__ void LB gemm_qkv_$N(int T, const A* x, const void* w, A* y) {
  gemm_mma<fmt::$F, $QKV, $H, A, gemm_tile<64, 64, 2, 2, 4>>(T, nullptr, x, w, store_epilogue<$QKV, A>{y});
}
extern "C" __global__ void LB3 gemm_l_qkv_$N(int T, const A* x, const void* w, A* y) {
  gemm_mma<fmt::$F, $QKV, $H, A, gemm_tile<128, 64, 2, 2, 4>>(T, nullptr, x, w, store_epilogue<$QKV, A>{y});
}
extern "C" __global__ void LB gemm_o_residual_$N(int T, const A* x, const void* w, const A* r, A* y) {
  gemm_mma<fmt::$F, $H, $Q, A, gemm_tile<64, 64, 2, 2, 4>>(T, nullptr, x, w, residual_epilogue<$H>{r, y});
}
extern "C" __global__ void LB3 gemm_gate_up_silu_$N(int T, const A* x, const void* w, A* y) {
  gemm_mma<fmt::$F, $I, $H, A, gemm_tile<64, 128, 2, 2, 4>>(T, nullptr, x, w, silu_mul_epilogue<$I, A>{y});
}
extern "C" __global__ void LB256 gemm_l_gate_up_silu_$N(int T, const A* x, const void* w, A* y) {
  gemm_mma<fmt::$F, $I, $H, A, gemm_tile<128, 128, 2, 4, 3>>(T, nullptr, x, w, silu_mul_epilogue<$I, A>{y});
}
extern "C" __global__ void LB3 gemm_l_down_residual_$N(int T, const A* x, const void* w, const A* r, A* y) {
  gemm_mma<fmt::$F, $H, $I, A, gemm_tile<128, 64, 2, 2, 4>>(T, nullptr, x, w, residual_epilogue<$H>{r, y});
}
extern "C" __global__ void LB256 gemm_l_lm_head_$N(step_info s, const A* x, const void* w, float* l) {
  gemm_mma<fmt::$F, $V, $H, A, gemm_tile<128, 128, 2, 4, 3>>(s.num_logits, s.logits_rows, x, w, logits_epilogue<$V>{l});
}
)",
               v);
  }
  return s;
}

std::string tempDir() {
  llvm::SmallString<128> dir;
  (void)llvm::sys::fs::createUniqueDirectory("llmc-cuda-test", dir);
  return std::string(dir.str());
}

// Kernels that must not spill: all of them (the tensor-core GEMM too, since
// its tiles and __launch_bounds__ leave room for its accumulators).
bool mustNotSpill(const std::string &) { return true; }

void compileAndCheck(const Shape &m) {
  const NVRTCCompiler *c = compiler();
  ASSERT_NE(c, nullptr);
  std::string dir = tempDir();
  CompileOptions o = kernelLibraryOptions(dir);
  std::string src = instantiate(m);
  auto out = c->compile(src, m.name + ".cu", o);
  llvm::sys::fs::remove_directories(dir);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 2u);
  size_t expected = 0;
  for (size_t p = src.find("__global__"); p != std::string::npos; p = src.find("__global__", p + 1))
    ++expected;
  for (const CompiledPtx &ptx : *out) {
    std::printf("--- %s, %s activations, ptxas -arch=%s -v (NVRTC %s)\n%s", m.name.c_str(),
                m.act.c_str(), ptx.arch.c_str(), c->version().c_str(),
                formatReport(ptx.report).c_str());
    EXPECT_EQ(ptx.report.kernels.size(), expected) << ptx.report.log;
    for (const KernelResources &k : ptx.report.kernels) {
      EXPECT_GT(k.registers, 0) << k.name;
      EXPECT_LE(k.registers, 255) << k.name;
      if (mustNotSpill(k.name))
        EXPECT_FALSE(k.hasSpills()) << ptx.arch << " " << k.name << " spills " << k.spill_stores
                                    << " bytes stored, " << k.spill_loads << " loaded";
      else if (k.hasSpills())
        std::printf("NOTE: %s %s spills %d/%d bytes (store/load)\n", ptx.arch.c_str(),
                    k.name.c_str(), k.spill_stores, k.spill_loads);
      EXPECT_LE(k.shared_bytes, 48 * 1024) << k.name; // static shared memory limit
    }
  }
}

const std::vector<std::string> kAllFormats = {"f32", "f16", "bf16", "q8_0",
                                              "q4_0", "q4_1", "q5_0", "q5_1"};

TEST(CudaKernels, SmolLM2Half) {
  compileAndCheck({"smollm2_f16", 576, 9, 3, 64, 1536, 49152, {"q4_1", "q8_0"}, "__half"});
}
TEST(CudaKernels, SmolLM2Bf16) {
  compileAndCheck({"smollm2_bf16", 576, 9, 3, 64, 1536, 49152, {"q4_1", "q8_0"}, "__nv_bfloat16"});
}
TEST(CudaKernels, SyntheticF32AllFormats) {
  compileAndCheck({"synthetic_f32", 256, 4, 2, 64, 512, 1024, kAllFormats, "float"});
}
// k-quant super-blocks and the quantize pass's group-wise integers (their
// decoders are checked on the host by cuda_format_tests).
const std::vector<std::string> kBlockFormats = {"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "i8<128>", "i4<128>",
                                                "i4<32>"};
TEST(CudaKernels, SyntheticBf16KQuantsAndGroupwise) {
  compileAndCheck({"synthetic_bf16_blocks", 256, 4, 2, 64, 512, 1024, kBlockFormats,
                   "__nv_bfloat16"});
}
TEST(CudaKernels, SyntheticHalfAllFormats) {
  compileAndCheck({"synthetic_f16", 256, 4, 2, 64, 512, 1024, kAllFormats, "__half"});
}

TEST(NVRTCCompiler, CompileErrorCarriesTheLog) {
  CompileOptions o;
  o.archs = {"sm_80"};
  o.use_cache = false;
  auto out = compiler()->compile("extern \"C\" __global__ void k() { undefined_thing(); }",
                                 "broken.cu", o);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("undefined_thing"), std::string::npos)
      << out.status().message();
  EXPECT_NE(out.status().message().find("sm_80"), std::string::npos);
}

TEST(NVRTCCompiler, UnknownArchIsNamed) {
  CompileOptions o;
  o.archs = {"compute_80"};
  auto out = compiler()->compile("", "x.cu", o);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("compute_80"), std::string::npos);
}

TEST(NVRTCCompiler, IdenticalSourcesHitTheCache) {
  std::string dir = tempDir();
  CompileOptions o;
  o.archs = {"sm_90"};
  o.cache_dir = dir;
  const std::string src = "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }";
  auto first = compiler()->compile(src, "k.cu", o);
  auto second = compiler()->compile(src, "k.cu", o);
  auto other = compiler()->compile(src + "\n// changed", "k.cu", o);
  llvm::sys::fs::remove_directories(dir);
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  EXPECT_FALSE((*first)[0].from_cache);
  EXPECT_TRUE((*second)[0].from_cache);
  EXPECT_FALSE((*other)[0].from_cache);
  EXPECT_EQ((*first)[0].ptx, (*second)[0].ptx);
  // The report is recomputed from the cached PTX.
  ASSERT_EQ((*second)[0].report.kernels.size(), 1u);
  EXPECT_EQ((*second)[0].report.kernels[0].name, "k");
}

TEST(NVRTCCompiler, ParsesPtxasReport) {
  const std::string log = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm' for 'sm_80'
ptxas info    : Function properties for gemm
    16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 27904 bytes smem, 392 bytes cmem[0]
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
)";
  PtxasReport r = parsePtxasReport(log, "sm_80");
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels[0].name, "gemm");
  EXPECT_EQ(r.kernels[0].registers, 255);
  EXPECT_EQ(r.kernels[0].stack_bytes, 16);
  EXPECT_EQ(r.kernels[0].spill_stores, 24);
  EXPECT_EQ(r.kernels[0].spill_loads, 20);
  EXPECT_EQ(r.kernels[0].shared_bytes, 27904);
  EXPECT_EQ(r.kernels[0].const_bytes, 392);
  EXPECT_EQ(r.kernels[1].registers, 8);
  EXPECT_EQ(r.kernels[1].shared_bytes, 0);
  EXPECT_FALSE(r.kernels[1].hasSpills());
  EXPECT_NE(r.find("k"), nullptr);
}

} // namespace
} // namespace llmc::cuda::test
