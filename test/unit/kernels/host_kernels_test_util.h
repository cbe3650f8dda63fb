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
// The tests build twice: host_kernel_tests (AVX2/FMA/F16C) and
// host_kernel_tests_scalar (LLMC_HOST_FORCE_SCALAR, the portable fallback).
//
// This header holds what the test files share: the pools and steps, random
// weights and their reference values, and the comparison. The tests are split
// by topic: host_kernels_{formats,q8,norm_rope,attention,elementwise}_test.cpp.
#ifndef LLMC_TEST_UNIT_KERNELS_HOST_KERNELS_TEST_UTIL_H_
#define LLMC_TEST_UNIT_KERNELS_HOST_KERNELS_TEST_UTIL_H_

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
#include <thread>
#include <utility>
#include <vector>

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/quantize.h"
#include "llmc_host_kernels.h"

namespace llmc::host_test {

namespace lh = llmc::host;
namespace fmt = llmc::host::fmt;

//===----------------------------------------------------------------------===//
// Thread pools and steps
//===----------------------------------------------------------------------===//

enum class Pool { kNone, kSerial, kThreaded };
inline constexpr Pool kAllPools[] = {Pool::kNone, Pool::kSerial, Pool::kThreaded};

inline const char* PoolName(Pool p) {
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

inline void SerialPool(void*, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
  for (int64_t b = 0; b < n; b += grain) fn(ctx, b, std::min(n, b + grain));
}

// Chunks of 1-3 grains (the last may be shorter), in random order, on 4 threads.
inline void ThreadedPool(void* pool, int64_t n, int64_t grain, llmc_range_fn fn, void* ctx) {
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
inline void MakeTokens(Step& s, int64_t T) {
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

inline std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Offsets of the f16 scale fields (d, m/dmin; s, z) inside a block.
inline std::vector<int> ScaleOffsets(std::string_view name) {
  if (name == "q8_0" || name == "q4_0" || name == "q5_0" || name == "i8") return {0};
  if (name == "i4") return {0, 2};
  if (name == "q4_1" || name == "q5_1" || name == "q4_k" || name == "q5_k") return {0, 2};
  if (name == "q2_k") return {80, 82};
  if (name == "q3_k") return {108};
  if (name == "q6_k") return {208};
  return {};
}

inline void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

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

inline std::string At(int64_t a, int64_t b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%lld, %lld]", static_cast<long long>(a),
                static_cast<long long>(b));
  return buf;
}

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Test names of the weight-format tags: the format name, "_g<group>" for the
// group-wise i8<G>/i4<G>.
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

}  // namespace llmc::host_test

#endif  // LLMC_TEST_UNIT_KERNELS_HOST_KERNELS_TEST_UTIL_H_
