// Tests of the host kernel template library (compiler/Target/Kernels/host/
// llmc_host_kernels.h) against naive double-precision references written
// here, sharing no code with the kernels. Weights are random blocks of every
// format (random bytes, valid random f16 scales); their reference values come
// from llmc::Dequantize (bit-exact with ggml).
//
// Tolerances (|got - ref| <= tol, per element):
//  - dot products (linear, lm_head, Fmt::dot): 1e-5 * sum_k |w_k x_k| (+ |bias|),
//    i.e. relative 1e-5 to the magnitude that f32 summation error scales with;
//  - dequantized values (dequant_row, embed): exact for f32/f16/bf16; for the
//    block formats 1e-6 * max |value| of the 32-element group (the kernels
//    may fuse ggml's multiply and add into one FMA);
//  - norms, rope, attention, elementwise: relative 1e-5 of the magnitude of the
//    terms that are summed (stated at each check), plus 1e-30 absolute for
//    results that underflow.
// Every kernel runs with no pool, a serial pool (chunks of `grain` in order)
// and a threaded pool (random chunk sizes >= grain, shuffled, 4 threads).
// The same file builds twice: host_kernel_tests (AVX2/FMA/F16C) and
// host_kernel_tests_scalar (LLMC_HOST_FORCE_SCALAR, the portable fallback).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <iterator>
#include <thread>
#include <utility>
#include <vector>

#include "llmc/runtime/format/dequantize.h"
#include "llmc/runtime/format/quantize.h"
#include "llmc_host_kernels.h"

namespace {

namespace lh = llmc::host;
namespace fmt = llmc::host::fmt;

//===----------------------------------------------------------------------===//
// Thread pools and steps
//===----------------------------------------------------------------------===//

enum class Pool { kNone, kSerial, kThreaded };
constexpr Pool kAllPools[] = {Pool::kNone, Pool::kSerial, Pool::kThreaded};

const char* PoolName(Pool p) {
  switch (p) {
    case Pool::kNone: return "no pool";
    case Pool::kSerial: return "serial pool";
    case Pool::kThreaded: return "threaded pool";
  }
  return "?";
}

struct PoolState {
  uint64_t seed = 1;
};

void SerialPool(void*, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
  for (int64_t b = 0; b < n; b += grain) fn(ctx, b, std::min(n, b + grain));
}

// Chunks of 1-3 grains (the last may be shorter), in random order, on 4 threads.
void ThreadedPool(void* pool, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
  auto* st = static_cast<PoolState*>(pool);
  std::mt19937_64 rng(st->seed++);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t b = 0; b < n;) {
    const int64_t e = std::min(n, b + grain * static_cast<int64_t>(1 + rng() % 3));
    chunks.emplace_back(b, e);
    b = e;
  }
  std::shuffle(chunks.begin(), chunks.end(), rng);
  constexpr int kThreads = 4;
  std::atomic<size_t> next{0};
  std::atomic<int> started{0};
  auto worker = [&] {
    // Start together, so that chunks really overlap.
    ++started;
    while (started.load() < kThreads) std::this_thread::yield();
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();)
      fn(ctx, chunks[i].first, chunks[i].second);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < kThreads; ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

struct Step {
  std::vector<int32_t> tokens, positions, query_starts, context_lens, block_tables, slot_mapping,
      logits_rows;
  int64_t num_tokens = 0, num_seqs = 0, max_blocks = 0, block_size = 16;
  PoolState pool_state;
  llmc_host_step_info info{};

  template <class V>
  static const int32_t* Ptr(const V& v) {
    return v.empty() ? nullptr : v.data();
  }
  const llmc_host_step_info* Get(Pool p) {
    info = llmc_host_step_info{};
    info.num_tokens = num_tokens;
    info.num_seqs = num_seqs;
    info.num_logits = static_cast<int64_t>(logits_rows.size());
    info.tokens = Ptr(tokens);
    info.positions = Ptr(positions);
    info.query_starts = Ptr(query_starts);
    info.context_lens = Ptr(context_lens);
    info.block_tables = Ptr(block_tables);
    info.max_blocks = max_blocks;
    info.slot_mapping = Ptr(slot_mapping);
    info.logits_rows = Ptr(logits_rows);
    info.block_size = block_size;
    info.pool = &pool_state;
    info.parallel_for = p == Pool::kNone     ? nullptr
                        : p == Pool::kSerial ? &SerialPool
                                             : &ThreadedPool;
    return &info;
  }
};

// A step of T tokens in one sequence (enough for the non-attention kernels).
void MakeTokens(Step& s, int64_t T) {
  s.num_tokens = T;
  s.num_seqs = 1;
  s.tokens.assign(T, 0);
  s.positions.resize(T);
  for (int64_t t = 0; t < T; ++t) s.positions[t] = static_cast<int32_t>(t);
  s.query_starts = {0, static_cast<int32_t>(T)};
  s.context_lens = {static_cast<int32_t>(T)};
}

//===----------------------------------------------------------------------===//
// Random data
//===----------------------------------------------------------------------===//

std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Offsets of the f16 scale fields (d, m/dmin; s, z) inside a block.
std::vector<int> ScaleOffsets(std::string_view name) {
  if (name == "q8_0" || name == "q4_0" || name == "q5_0" || name == "i8") return {0};
  if (name == "i4") return {0, 2};
  if (name == "q4_1" || name == "q5_1" || name == "q4_k" || name == "q5_k") return {0, 2};
  if (name == "q2_k") return {80, 82};
  if (name == "q3_k") return {108};
  if (name == "q6_k") return {208};
  return {};
}

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// rows x k weights in Fmt: plain formats from uniform(-1, 1); block formats
// from random bytes with every f16 scale replaced by a random finite value
// of magnitude 0.005 .. 0.1 and random sign.
template <class Fmt>
std::vector<uint8_t> RandomWeights(int64_t rows, int64_t k, std::mt19937& rng) {
  const std::string_view name = Fmt::name;
  std::vector<uint8_t> w(static_cast<size_t>(Fmt::row_bytes(k) * rows));
  const int64_t count = rows * k;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  if (name == "f32") {
    for (int64_t i = 0; i < count; ++i) {
      const float v = u(rng);
      std::memcpy(w.data() + 4 * i, &v, 4);
    }
  } else if (name == "f16") {
    for (int64_t i = 0; i < count; ++i) StoreU16(w.data() + 2 * i, llmc::FloatToHalf(u(rng)));
  } else if (name == "bf16") {
    for (int64_t i = 0; i < count; ++i) StoreU16(w.data() + 2 * i, llmc::FloatToBF16(u(rng)));
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
    std::uniform_real_distribution<float> mag(0.005f, 0.1f);
    const int64_t blocks = count / Fmt::block_elems;
    for (int64_t b = 0; b < blocks; ++b)
      for (int off : ScaleOffsets(name)) {
        const float v = (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
        StoreU16(w.data() + b * Fmt::block_bytes + off, llmc::FloatToHalf(v));
      }
  }
  return w;
}

// The runtime's dequantizer for Fmt: llmc::Dequantize, or for the group-wise
// i8<G>/i4<G> tags (which have a `group`) llmc::DequantizeGroupwise.
template <class Fmt>
absl::Status RuntimeDequantize(const uint8_t* src, size_t bytes, int64_t count, float* dst) {
  if constexpr (requires { Fmt::group; })
    return llmc::DequantizeGroupwise(Fmt::name, Fmt::group, src, bytes, count, dst);
  else
    return llmc::Dequantize(Fmt::name, src, bytes, count, dst);
}

template <class Fmt>
std::vector<float> Reference(const std::vector<uint8_t>& w, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  const absl::Status st = RuntimeDequantize<Fmt>(w.data(), w.size(), count, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

// Counts mismatches; reports the first few with their context.
class Checker {
 public:
  explicit Checker(std::string what) : what_(std::move(what)) {}
  ~Checker() { EXPECT_EQ(failures_, 0) << what_ << ": " << failures_ << " mismatches"; }
  void Check(double got, double ref, double tol, const std::string& where) {
    ++checked_;
    const double err = std::fabs(got - ref);
    if (err <= tol && !std::isnan(got)) return;
    if (++failures_ <= 5)
      ADD_FAILURE() << what_ << " at " << where << ": got " << got << ", want " << ref
                    << " (error " << err << " > tolerance " << tol << ")";
  }
  int64_t checked() const { return checked_; }

 private:
  std::string what_;
  int64_t failures_ = 0;
  int64_t checked_ = 0;
};

std::string At(int64_t a, int64_t b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%lld, %lld]", static_cast<long long>(a),
                static_cast<long long>(b));
  return buf;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

//===----------------------------------------------------------------------===//
// Weight formats: dequant_row, dot, linear, lm_head, embed
//===----------------------------------------------------------------------===//

template <class Fmt>
constexpr int64_t TestK() {
  // k-quants: two super-blocks; 32-blocks and groups: three; plain: not a
  // multiple of 32 (exercises the tail).
  return Fmt::block_elems == 256 ? 512 : Fmt::block_elems == 1 ? 100 : 3 * Fmt::block_elems;
}

template <class Fmt>
class HostFormatTest : public ::testing::Test {};
using AllFormats = ::testing::Types<fmt::f32, fmt::f16, fmt::bf16, fmt::q8_0, fmt::q4_0, fmt::q4_1,
                                    fmt::q5_0, fmt::q5_1, fmt::q2_k, fmt::q3_k, fmt::q4_k,
                                    fmt::q5_k, fmt::q6_k, fmt::i8<32>, fmt::i8<128>,
                                    fmt::i4<32>, fmt::i4<64>, fmt::i4<128>>;
class FormatNames {
 public:
  template <class T>
  static std::string GetName(int) {
    if constexpr (requires { T::group; })
      return std::string(T::name) + "_g" + std::to_string(T::group);
    else
      return T::name;
  }
};
TYPED_TEST_SUITE(HostFormatTest, AllFormats, FormatNames);

// Compares dequantized values: exact for plain formats, else within 1e-6 of
// the largest magnitude of the element's 32-element group.
void CheckDequantized(Checker& c, bool plain, const float* got, const float* ref, int64_t k,
                      int64_t row) {
  for (int64_t g = 0; g < k; g += 32) {
    double mx = 0;
    for (int64_t i = g; i < std::min(k, g + 32); ++i) mx = std::max(mx, std::fabs(double(ref[i])));
    for (int64_t i = g; i < std::min(k, g + 32); ++i)
      c.Check(got[i], ref[i], plain ? 0.0 : 1e-6 * mx, At(row, i));
  }
}

TYPED_TEST(HostFormatTest, LayoutMatchesRuntimeTable) {
  using Fmt = TypeParam;
  // Dequantize rejects a buffer one byte short of the format's block size,
  // so the tag's block_bytes is exactly the runtime's.
  std::vector<uint8_t> w(Fmt::block_bytes);
  std::vector<float> out(Fmt::block_elems);
  EXPECT_TRUE(RuntimeDequantize<Fmt>(w.data(), w.size(), Fmt::block_elems, out.data()).ok());
  EXPECT_FALSE(RuntimeDequantize<Fmt>(w.data(), w.size() - 1, Fmt::block_elems, out.data()).ok());
  EXPECT_EQ(Fmt::row_bytes(Fmt::block_elems * 3), 3 * Fmt::block_bytes);
}

TYPED_TEST(HostFormatTest, DequantRowMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t K = TestK<Fmt>(), Rows = 5;
  std::mt19937 rng(11);
  const auto w = RandomWeights<Fmt>(Rows, K, rng);
  const auto ref = Reference<Fmt>(w, Rows * K);
  Checker c(std::string(Fmt::name) + " dequant_row");
  std::vector<float> y(K);
  for (int64_t r = 0; r < Rows; ++r) {
    std::fill(y.begin(), y.end(), kNaN);
    Fmt::dequant_row(w.data() + r * Fmt::row_bytes(K), y.data(), K);
    CheckDequantized(c, Fmt::is_plain, y.data(), ref.data() + r * K, K, r);
  }
  EXPECT_EQ(c.checked(), Rows * K);
}

TYPED_TEST(HostFormatTest, DotMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t K = TestK<Fmt>() * 3, Rows = 7;
  std::mt19937 rng(12);
  const auto w = RandomWeights<Fmt>(Rows, K, rng);
  const auto ref = Reference<Fmt>(w, Rows * K);
  const auto x = RandomFloats(K, rng);
  Checker c(std::string(Fmt::name) + " dot");
  for (int64_t r = 0; r < Rows; ++r) {
    double want = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      want += double(ref[r * K + k]) * x[k];
      mag += std::fabs(double(ref[r * K + k]) * x[k]);
    }
    const float got = Fmt::dot(w.data() + r * Fmt::row_bytes(K), x.data(), K);
    c.Check(got, want, 1e-5 * mag, At(r, 0));
  }
}

template <class Fmt, int64_t N, int64_t K, bool HasBias, class BiasFmt = fmt::f32>
void CheckLinear(int64_t T, Pool pool, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto w = RandomWeights<Fmt>(N, K, rng);
  const auto ref = Reference<Fmt>(w, N * K);
  const auto bias = RandomWeights<BiasFmt>(1, N, rng);
  const auto bias_ref = Reference<BiasFmt>(bias, N);
  const auto x = RandomFloats(T * K, rng);
  std::vector<float> y(T * N, kNaN);
  Step s;
  MakeTokens(s, T);
  lh::linear<Fmt, N, K, HasBias, BiasFmt>(s.Get(pool), x.data(), w.data(),
                                          HasBias ? bias.data() : nullptr, y.data());
  Checker c(std::string("linear ") + Fmt::name + " T=" + std::to_string(T) +
            (HasBias ? " +bias " : " ") + PoolName(pool));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double want = HasBias ? bias_ref[n] : 0.0, mag = std::fabs(want);
      for (int64_t k = 0; k < K; ++k) {
        want += double(ref[n * K + k]) * x[t * K + k];
        mag += std::fabs(double(ref[n * K + k]) * x[t * K + k]);
      }
      c.Check(y[t * N + n], want, 1e-5 * mag, At(t, n));
    }
}

TYPED_TEST(HostFormatTest, LinearMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t K = TestK<Fmt>();
  uint32_t seed = 100;
  for (int64_t T : {1, 3, 17})
    for (Pool p : kAllPools) {
      CheckLinear<Fmt, 37, K, false>(T, p, seed++);
      CheckLinear<Fmt, 37, K, true>(T, p, seed++);
    }
}

TYPED_TEST(HostFormatTest, LmHeadMatchesReference) {
  using Fmt = TypeParam;
  constexpr int64_t Hidden = TestK<Fmt>(), Vocab = 45;
  std::mt19937 rng(21);
  const auto w = RandomWeights<Fmt>(Vocab, Hidden, rng);
  const auto ref = Reference<Fmt>(w, Vocab * Hidden);
  const std::vector<std::pair<int64_t, std::vector<int32_t>>> cases = {
      {1, {0}}, {3, {2, 0}}, {17, {16, 0, 8, -1, 17, 3, 5, 7, 9, 11, 13}}};
  for (const auto& [T, rows] : cases)
    for (Pool p : kAllPools) {
      const auto x = RandomFloats(T * Hidden, rng);
      Step s;
      MakeTokens(s, T);
      s.logits_rows = rows;
      const int64_t M = static_cast<int64_t>(rows.size());
      std::vector<float> logits(M * Vocab, kNaN);
      lh::lm_head<Fmt, Vocab, Hidden>(s.Get(p), x.data(), w.data(), logits.data());
      Checker c(std::string("lm_head ") + Fmt::name + " T=" + std::to_string(T) + " " +
                PoolName(p));
      for (int64_t i = 0; i < M; ++i) {
        const int64_t row = rows[i];
        const bool valid = row >= 0 && row < T;
        for (int64_t v = 0; v < Vocab; ++v) {
          double want = 0, mag = 0;
          for (int64_t k = 0; valid && k < Hidden; ++k) {
            want += double(ref[v * Hidden + k]) * x[row * Hidden + k];
            mag += std::fabs(double(ref[v * Hidden + k]) * x[row * Hidden + k]);
          }
          c.Check(logits[i * Vocab + v], want, 1e-5 * mag, At(i, v));
        }
      }
    }
}

TYPED_TEST(HostFormatTest, EmbedMatchesReferenceAndZeroesBadIds) {
  using Fmt = TypeParam;
  constexpr int64_t Hidden = TestK<Fmt>(), Vocab = 11;
  std::mt19937 rng(31);
  const auto table = RandomWeights<Fmt>(Vocab, Hidden, rng);
  const auto ref = Reference<Fmt>(table, Vocab * Hidden);
  for (int64_t T : {1, 3, 17, 700})
    for (Pool p : kAllPools) {
      Step s;
      MakeTokens(s, T);
      for (int64_t t = 0; t < T; ++t) s.tokens[t] = static_cast<int32_t>(rng() % Vocab);
      if (T >= 17) {
        s.tokens[1] = -1;
        s.tokens[4] = Vocab;
        s.tokens[9] = std::numeric_limits<int32_t>::max();
        s.tokens[T - 1] = std::numeric_limits<int32_t>::min();
      }
      std::vector<float> out(T * Hidden, kNaN);
      lh::embed<Fmt, Vocab, Hidden>(s.Get(p), table.data(), out.data());
      Checker c(std::string("embed ") + Fmt::name + " T=" + std::to_string(T) + " " +
                PoolName(p));
      const std::vector<float> zeros(Hidden, 0.0f);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t id = s.tokens[t];
        const float* want = id >= 0 && id < Vocab ? ref.data() + id * Hidden : zeros.data();
        CheckDequantized(c, Fmt::is_plain, out.data() + t * Hidden, want, Hidden, t);
      }
    }
}

//===----------------------------------------------------------------------===//
// q8 activations (integer dot products) for the 32-element block formats
//===----------------------------------------------------------------------===//

// The rounding rule, written out independently: per 32 values, d = amax/127
// and q = round-half-even(x * 127 / amax).
struct TestQ8Row {
  std::vector<float> d, s;
  std::vector<int> q;
};
TestQ8Row QuantizeQ8(const float* x, int64_t k) {
  TestQ8Row r;
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::nearbyint(x[32 * b + i] * id));
      r.q.push_back(q);
      sum += q;
    }
    r.d.push_back(amax / 127.0f);
    r.s.push_back(amax / 127.0f * static_cast<float>(sum));
  }
  return r;
}

template <class Fmt>
class HostQ8Test : public ::testing::Test {};
using Q8Formats = ::testing::Types<fmt::q8_0, fmt::q4_0, fmt::q4_1, fmt::q5_0, fmt::q5_1>;
TYPED_TEST_SUITE(HostQ8Test, Q8Formats, FormatNames);

TEST(HostQ8Quantize, MatchesTheRoundingRule) {
  std::mt19937 rng(5);
  auto x = RandomFloats(32 * 6, rng, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) x[32 * 2 + i] = 0.0f;        // an all-zero block
  x[32 * 3 + 7] = 100.0f;                                    // one outlier
  for (int i = 0; i < 32; ++i) x[32 * 4 + i] = 0.5f * (i - 16) / 127.0f * 127.0f;  // ties
  std::vector<lh::block_q8> y(6);
  lh::detail::quantize_row_q8(x.data(), y.data(), 32 * 6);
  const TestQ8Row want = QuantizeQ8(x.data(), 32 * 6);
  for (int b = 0; b < 6; ++b) {
    EXPECT_FLOAT_EQ(y[b].d, want.d[b]) << "block " << b;
    EXPECT_NEAR(y[b].s, want.s[b], 1e-5 * std::fabs(want.s[b])) << "block " << b;
    for (int i = 0; i < 32; ++i) EXPECT_EQ(int(y[b].q[i]), want.q[32 * b + i]) << b << "," << i;
  }
}

// linear<..., Q8 = true> against the dequantized weights times the
// activations rounded by the rule above (the integer sums are exact; the
// tolerance covers f32 scales and accumulation).
TYPED_TEST(HostQ8Test, LinearMatchesQuantizedReference) {
  using Fmt = TypeParam;
  constexpr int64_t N = 37, K = 96;
  uint32_t seed = 700;
  for (int64_t T : {1, 3, 17})
    for (Pool p : kAllPools) {
      std::mt19937 rng(seed++);
      const auto w = RandomWeights<Fmt>(N, K, rng);
      const auto ref = Reference<Fmt>(w, N * K);
      const auto x = RandomFloats(T * K, rng);
      std::vector<float> y(T * N, kNaN);
      Step s;
      MakeTokens(s, T);
      lh::linear<Fmt, N, K, false, fmt::f32, float, true>(s.Get(p), x.data(), w.data(), nullptr,
                                                          y.data());
      Checker c(std::string("linear q8 ") + Fmt::name + " T=" + std::to_string(T) + " " +
                PoolName(p));
      for (int64_t t = 0; t < T; ++t) {
        const TestQ8Row xq = QuantizeQ8(x.data() + t * K, K);
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double xv = double(xq.q[k]) * xq.d[k / 32];
            want += double(ref[n * K + k]) * xv;
            mag += std::fabs(double(ref[n * K + k]) * xv);
          }
          c.Check(y[t * N + n], want, 1e-5 * mag, At(t, n));
        }
      }
      // And the rounding stays small against the exact product.
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          exact += double(ref[n * K + k]) * x[k];
          mag += std::fabs(double(ref[n * K + k]) * x[k]);
        }
        EXPECT_LE(std::fabs(y[n] - exact), 0.02 * mag) << Fmt::name << " row " << n;
      }
    }
}

TYPED_TEST(HostQ8Test, LmHeadMatchesQuantizedReference) {
  using Fmt = TypeParam;
  constexpr int64_t Hidden = 64, Vocab = 45;
  std::mt19937 rng(31);
  const auto w = RandomWeights<Fmt>(Vocab, Hidden, rng);
  const auto ref = Reference<Fmt>(w, Vocab * Hidden);
  const int64_t T = 5;
  const std::vector<int32_t> rows = {4, 0, -1, 2};
  for (Pool p : kAllPools) {
    const auto x = RandomFloats(T * Hidden, rng);
    Step s;
    MakeTokens(s, T);
    s.logits_rows = rows;
    std::vector<float> logits(rows.size() * Vocab, kNaN);
    lh::lm_head<Fmt, Vocab, Hidden, float, true>(s.Get(p), x.data(), w.data(), logits.data());
    Checker c(std::string("lm_head q8 ") + Fmt::name + " " + PoolName(p));
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool valid = rows[i] >= 0 && rows[i] < T;
      const TestQ8Row xq = QuantizeQ8(x.data() + (valid ? rows[i] : 0) * Hidden, Hidden);
      for (int64_t v = 0; v < Vocab; ++v) {
        double want = 0, mag = 0;
        for (int64_t k = 0; valid && k < Hidden; ++k) {
          const double xv = double(xq.q[k]) * xq.d[k / 32];
          want += double(ref[v * Hidden + k]) * xv;
          mag += std::fabs(double(ref[v * Hidden + k]) * xv);
        }
        c.Check(logits[i * Vocab + v], want, 1e-5 * mag, At(int64_t(i), v));
      }
    }
  }
}

TEST(HostLinearTest, HalfAndBFloatBiases) {
  uint32_t seed = 500;
  for (Pool p : kAllPools)
    for (int64_t T : {1, 9}) {
      CheckLinear<fmt::q8_0, 19, 64, true, fmt::f16>(T, p, seed++);
      CheckLinear<fmt::bf16, 19, 64, true, fmt::bf16>(T, p, seed++);
    }
}

TEST(HostLinearTest, LargerShapesAndTokenCounts) {
  // Several weight-row tiles per chunk (with no pool, one chunk holds all
  // rows) and every token-group size (8, 4, 2, 1).
  uint32_t seed = 600;
  for (Pool p : kAllPools)
    for (int64_t T : {2, 15, 33}) {
      CheckLinear<fmt::q4_k, 300, 1024, true>(T, p, seed++);
      CheckLinear<fmt::q4_1, 257, 576, false>(T, p, seed++);
    }
}

TEST(HostLinearTest, NoTokensWritesNothing) {
  std::vector<float> y(4, 7.0f);
  Step s;
  MakeTokens(s, 0);
  lh::linear<fmt::f32, 2, 2, false>(s.Get(Pool::kThreaded), static_cast<const float*>(nullptr),
                                    nullptr, nullptr, y.data());
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

template <int64_t H, class WFmt>
void CheckRmsNorm(int64_t T, Pool p, bool in_place, uint32_t seed, float amp = 1.0f) {
  std::mt19937 rng(seed);
  const auto w = RandomWeights<WFmt>(1, H, rng);
  const auto wref = Reference<WFmt>(w, H);
  const auto x = RandomFloats(T * H, rng, -3.0f * amp, 2.0f * amp);
  std::vector<float> out = in_place ? x : std::vector<float>(T * H, kNaN);
  Step s;
  MakeTokens(s, T);
  const double eps = 1e-5;
  lh::rms_norm<H, WFmt>(s.Get(p), in_place ? out.data() : x.data(), w.data(), out.data(), eps);
  Checker c("rms_norm H=" + std::to_string(H) + " " + WFmt::name + " T=" + std::to_string(T) +
            " " + PoolName(p));
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(x[t * H + i]) * x[t * H + i];
    const double r = 1.0 / std::sqrt(ss / H + eps);
    for (int64_t i = 0; i < H; ++i) {
      const double want = double(x[t * H + i]) * r * wref[i];
      c.Check(out[t * H + i], want, 1e-5 * std::fabs(want) + 1e-30, At(t, i));
    }
  }
}

TEST(HostNormTest, RmsNormMatchesReference) {
  uint32_t seed = 700;
  for (Pool p : kAllPools)
    for (int64_t T : {1, 3, 17, 40}) {
      CheckRmsNorm<576, fmt::f32>(T, p, false, seed++);
      CheckRmsNorm<576, fmt::f16>(T, p, true, seed++);
      CheckRmsNorm<100, fmt::bf16>(T, p, false, seed++);
      CheckRmsNorm<1030, fmt::f32>(T, p, true, seed++);
      // Inputs so small that eps changes the result by ~50%.
      CheckRmsNorm<64, fmt::f32>(T, p, false, seed++, 2e-3f);
    }
}

template <int64_t H, bool HasBias, class WFmt>
void CheckLayerNorm(int64_t T, Pool p, bool in_place, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  const auto w = RandomWeights<WFmt>(1, H, rng);
  const auto b = RandomWeights<WFmt>(1, H, rng);
  const auto wref = Reference<WFmt>(w, H);
  const auto bref = Reference<WFmt>(b, H);
  const auto x = RandomFloats(T * H, rng, lo, hi);
  std::vector<float> out = in_place ? x : std::vector<float>(T * H, kNaN);
  Step s;
  MakeTokens(s, T);
  const double eps = 1e-5;
  lh::layer_norm<H, HasBias, WFmt>(s.Get(p), in_place ? out.data() : x.data(), w.data(),
                                   HasBias ? b.data() : nullptr, out.data(), eps);
  Checker c("layer_norm H=" + std::to_string(H) + " " + WFmt::name + " T=" + std::to_string(T) +
            " " + PoolName(p));
  for (int64_t t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < H; ++i) mean += x[t * H + i];
    mean /= H;
    for (int64_t i = 0; i < H; ++i) var += (x[t * H + i] - mean) * (x[t * H + i] - mean);
    const double r = 1.0 / std::sqrt(var / H + eps);
    for (int64_t i = 0; i < H; ++i) {
      const double bi = HasBias ? bref[i] : 0.0;
      const double want = (x[t * H + i] - mean) * r * wref[i] + bi;
      // (x - mean) is rounded in f32: the error scales with |x| + |mean|.
      const double tol =
          1e-5 * ((std::fabs(x[t * H + i]) + std::fabs(mean)) * r * std::fabs(wref[i]) +
                  std::fabs(bi));
      c.Check(out[t * H + i], want, tol, At(t, i));
    }
  }
}

TEST(HostNormTest, LayerNormMatchesReference) {
  uint32_t seed = 800;
  for (Pool p : kAllPools)
    for (int64_t T : {1, 3, 17}) {
      // Non-zero means; in the first two a spread so small that eps matters.
      CheckLayerNorm<768, true, fmt::f32>(T, p, false, seed++, 0.995f, 1.005f);
      CheckLayerNorm<768, false, fmt::f32>(T, p, true, seed++, 0.995f, 1.005f);
      CheckLayerNorm<50, true, fmt::bf16>(T, p, false, seed++, -1.0f, 3.0f);
      CheckLayerNorm<50, true, fmt::f16>(T, p, true, seed++, -1.0f, 3.0f);
    }
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// Inverse frequencies from the formulas (Hugging Face's
// _compute_default/_linear/_llama3_parameters, llama.cpp's freq_factors).
std::vector<double> RefInvFreq(int64_t head_dim, double theta, const lh::rope_scaling& sc,
                               const std::vector<float>& factors) {
  const double pi = std::acos(-1.0);
  std::vector<double> inv(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
    if (sc.kind == lh::rope_scaling_kind::linear) f = f / sc.factor;
    if (sc.kind == lh::rope_scaling_kind::llama3) {
      const double low_wavelen = sc.original_max_position / sc.low_freq_factor;
      const double high_wavelen = sc.original_max_position / sc.high_freq_factor;
      const double wavelen = 2 * pi / f;
      const double scaled = wavelen > low_wavelen ? f / sc.factor : f;
      const double smooth = (sc.original_max_position / wavelen - sc.low_freq_factor) /
                            (sc.high_freq_factor - sc.low_freq_factor);
      const double smoothed = (1 - smooth) * scaled / sc.factor + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
    if (!factors.empty()) f /= factors[i];
    inv[i] = f;
  }
  return inv;
}

template <int64_t Heads, int64_t D, lh::rope_style Style>
void CheckRope(const lh::rope_scaling& sc, bool use_factors, bool in_place, Pool p, uint32_t seed) {
  std::mt19937 rng(seed);
  constexpr int64_t W = Heads * D, T = 13;
  const double theta = 500000.0;
  std::vector<float> factors;
  if (use_factors) factors = RandomFloats(D / 2, rng, 1.0f, 8.0f);
  const auto x = RandomFloats(T * W, rng);
  Step s;
  MakeTokens(s, T);
  const int32_t positions[T] = {0, 1, 2, 7, 100, 1000, 4095, 8191, 8192, 30000, 131071, 200000, 5};
  s.positions.assign(positions, positions + T);
  std::vector<float> out = in_place ? x : std::vector<float>(T * W, kNaN);
  lh::rope<Heads, D, Style>(s.Get(p), in_place ? out.data() : x.data(), out.data(), theta, sc,
                            use_factors ? factors.data() : nullptr);
  const auto inv = RefInvFreq(D, theta, sc, factors);
  Checker c(std::string("rope ") + (Style == lh::rope_style::half ? "half" : "interleaved") +
            " D=" + std::to_string(D) + " scaling=" + std::to_string(int(sc.kind)) +
            (use_factors ? " freq_factors" : "") + " " + PoolName(p));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Heads; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double a = positions[t] * inv[i];
        int64_t i0, i1;
        if (Style == lh::rope_style::half) {
          i0 = i;
          i1 = i + D / 2;
        } else {
          i0 = 2 * i;
          i1 = 2 * i + 1;
        }
        const double x0 = x[t * W + h * D + i0], x1 = x[t * W + h * D + i1];
        const double tol = 1e-5 * (std::fabs(x0) + std::fabs(x1));
        c.Check(out[t * W + h * D + i0], x0 * std::cos(a) - x1 * std::sin(a), tol, At(t, i0));
        c.Check(out[t * W + h * D + i1], x1 * std::cos(a) + x0 * std::sin(a), tol, At(t, i1));
      }
}

TEST(HostRopeTest, LlamaThreeScalingCoversAllRegimes) {
  // Sanity of the test itself: with theta 5e5 and head_dim 64 the llama3
  // parameters below keep some frequencies, scale some and smooth some.
  const lh::rope_scaling sc{lh::rope_scaling_kind::llama3, 8.0, 1.0, 4.0, 8192};
  const auto plain = RefInvFreq(64, 500000.0, {}, {});
  const auto scaled = RefInvFreq(64, 500000.0, sc, {});
  int kept = 0, divided = 0, smoothed = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    if (scaled[i] == plain[i]) ++kept;
    else if (std::fabs(scaled[i] - plain[i] / 8) < 1e-18) ++divided;
    else ++smoothed;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(HostRopeTest, MatchesFormulas) {
  const lh::rope_scaling none{};
  const lh::rope_scaling linear{lh::rope_scaling_kind::linear, 4.0, 1.0, 4.0, 8192};
  const lh::rope_scaling llama3{lh::rope_scaling_kind::llama3, 8.0, 1.0, 4.0, 8192};
  uint32_t seed = 900;
  for (Pool p : kAllPools)
    for (const auto* sc : {&none, &linear, &llama3})
      for (bool factors : {false, true}) {
        if (factors && sc != &none) continue;
        for (bool in_place : {false, true}) {
          CheckRope<3, 64, lh::rope_style::half>(*sc, factors, in_place, p, seed++);
          CheckRope<3, 64, lh::rope_style::interleaved>(*sc, factors, in_place, p, seed++);
          CheckRope<2, 20, lh::rope_style::half>(*sc, factors, in_place, p, seed++);
          CheckRope<2, 20, lh::rope_style::interleaved>(*sc, factors, in_place, p, seed++);
        }
      }
}

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

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Inputs in [-12, 12] with a few extremes.
std::vector<float> ElementwiseInput(int64_t n, std::mt19937& rng) {
  auto x = RandomFloats(n, rng, -12.0f, 12.0f);
  const float extremes[] = {-100.0f, 100.0f, -88.5f, 88.5f, -87.0f, 1e-6f, -1e-6f, 30.0f, -30.0f};
  for (size_t i = 0; i < std::size(extremes) && i < x.size(); ++i) x[i * 7 % x.size()] = extremes[i];
  return x;
}

double RefSigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z)); }

template <int64_t N>
void CheckElementwise(int64_t T, Pool p, bool in_place, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto a = ElementwiseInput(T * N, rng);
  const auto b = RandomFloats(T * N, rng, -3.0f, 3.0f);
  Step s;
  MakeTokens(s, T);
  const auto* st = s.Get(p);
  const std::string suffix = " N=" + std::to_string(N) + " T=" + std::to_string(T) + " " +
                             PoolName(p) + (in_place ? " in place" : "");
  auto run = [&](const char* name, auto kernel, auto ref) {
    std::vector<float> y = in_place ? a : std::vector<float>(T * N, kNaN);
    kernel(in_place ? y.data() : a.data(), y.data());
    Checker c(name + suffix);
    for (int64_t i = 0; i < T * N; ++i) {
      const double want = ref(double(a[i]), double(b[i]));
      c.Check(y[i], want, 1e-5 * std::fabs(want) + 1e-30, At(i / N, i % N));
    }
  };
  run("silu", [&](const float* x, float* y) { lh::silu<N>(st, x, y); },
      [](double x, double) { return x * RefSigmoid(x); });
  run("gelu_erf", [&](const float* x, float* y) { lh::gelu<N, lh::gelu_approx::erf>(st, x, y); },
      [](double x, double) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); });
  // 0.5 (1 + tanh(u)) computed as sigmoid(2u), which is exact and avoids the
  // cancellation of 1 + tanh(u) for negative u.
  run("gelu_tanh", [&](const float* x, float* y) { lh::gelu<N, lh::gelu_approx::tanh>(st, x, y); },
      [](double x, double) {
        const double u = std::sqrt(2.0 / std::acos(-1.0)) * (x + 0.044715 * x * x * x);
        return x * RefSigmoid(2 * u);
      });
  run("mul", [&](const float* x, float* y) { lh::mul<N>(st, x, b.data(), y); },
      [](double x, double y) { return x * y; });
  run("add", [&](const float* x, float* y) { lh::add<N>(st, x, b.data(), y); },
      [](double x, double y) { return x + y; });
  run("silu_mul", [&](const float* x, float* y) { lh::silu_mul<N>(st, x, b.data(), y); },
      [](double x, double y) { return x * RefSigmoid(x) * y; });
}

TEST(HostElementwiseTest, MatchesFormulas) {
  uint32_t seed = 5000;
  for (Pool p : kAllPools)
    for (bool in_place : {false, true}) {
      CheckElementwise<100>(1, p, in_place, seed++);
      CheckElementwise<100>(3, p, in_place, seed++);
      CheckElementwise<4096>(17, p, in_place, seed++);  // above the parallel threshold
    }
}

//===----------------------------------------------------------------------===//
// parallel_for
//===----------------------------------------------------------------------===//

TEST(HostParallelForTest, CoversTheRangeOnce) {
  for (Pool p : kAllPools)
    for (int64_t n : {0, 1, 7, 1000})
      for (int64_t grain : {0, 1, 3, 64, 5000}) {
        Step s;
        std::vector<std::atomic<int>> hits(n);
        for (auto& h : hits) h = 0;
        std::atomic<int> calls{0};
        lh::parallel_for(s.Get(p), n, grain, [&](int64_t b, int64_t e) {
          ++calls;
          EXPECT_LT(b, e);
          for (int64_t i = b; i < e; ++i) ++hits[i];
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << PoolName(p) << " n=" << n << " grain=" << grain;
        if (n == 0) {
          EXPECT_EQ(calls.load(), 0);
        } else if (p == Pool::kNone || n <= std::max<int64_t>(grain, 1)) {
          EXPECT_EQ(calls.load(), 1);
        }
      }
}

TEST(HostParallelForTest, ReportsTheCodePath) {
#ifdef LLMC_HOST_FORCE_SCALAR
  EXPECT_FALSE(lh::kSimd);
#else
  // host_kernel_tests is built with -march=x86-64-v3.
  EXPECT_TRUE(lh::kSimd);
#endif
}

}  // namespace
