#include "llmc/runtime/artifact/dummy_weights.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "llmc/core/format/dequantize.h"
#include "llmc/core/weight_format.h"

namespace llmc {
namespace {

// Bytes of one chunk: each chunk has its own random stream, so chunks can be
// generated in any order, on any thread, with the same result.
constexpr uint64_t kChunkBytes = uint64_t{1} << 20;

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t StreamSeed(uint64_t seed, uint64_t tensor, uint64_t chunk) {
  uint64_t s = seed;
  uint64_t a = SplitMix(s) ^ (tensor * 0xd6e8feb86659fd93ull);
  uint64_t b = SplitMix(a) ^ (chunk * 0xa0761d6478bd642full);
  return SplitMix(b);
}

// A uniform float in [-1, 1) from 24 random bits.
inline float Signed(uint32_t bits24) { return float(int32_t(bits24) - (1 << 23)) * (1.0f / (1 << 23)); }

enum class Kind { kMatrix, kNorm, kBias };

enum class Layout {
  kF32, kF16, kBF16,  // one element per "block"
  kQ8_0, kQ4_0, kQ4_1, kQ5_0, kQ5_1,
  kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K,
  kI8, kI4,
};

struct Plan {
  Kind kind = Kind::kMatrix;
  Layout layout = Layout::kF32;
  uint64_t block_elems = 1, block_bytes = 4;
  uint64_t blocks = 0;        // in the tensor
  uint64_t chunk_blocks = 1;  // per chunk
  float scale = 0;            // the blocks' nominal scale d
  uint64_t chunks() const { return (blocks + chunk_blocks - 1) / chunk_blocks; }
};

absl::Status Bad(const ManifestTensor& t, uint64_t index, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("dummy weights: tensor ", index, " ('", t.name, "'): ", why));
}

absl::Status MakePlan(const ManifestTensor& t, uint64_t index, Plan* p) {
  auto info = LookupWeightFormat(t.format);
  if (!info) return Bad(t, index, absl::StrCat("unknown format '", t.format, "'"));
  int64_t elements = 1;
  for (int64_t d : t.shape) {
    if (d <= 0) return Bad(t, index, "a dimension is not positive");
    elements *= d;
  }
  int64_t bytes = WeightByteSize(t.format, elements, t.group);
  if (bytes < 0 || uint64_t(bytes) != t.bytes)
    return Bad(t, index, absl::StrCat("bytes is ", t.bytes, " but ", t.format, " over ",
                                      elements, " elements takes ", bytes));
  if (t.shape.size() >= 2)
    p->kind = Kind::kMatrix;
  else if (t.name.find("bias") != std::string::npos)
    p->kind = Kind::kBias;
  else
    p->kind = Kind::kNorm;
  const std::string& f = t.format;
  p->block_elems = info->grouped ? uint64_t(t.group) : uint64_t(info->block_elems);
  p->block_bytes = info->grouped ? uint64_t(GroupwiseBlockBytes(f, t.group))
                                 : uint64_t(info->block_bytes);
  if (f == "f32") p->layout = Layout::kF32;
  else if (f == "f16") p->layout = Layout::kF16;
  else if (f == "bf16") p->layout = Layout::kBF16;
  else if (f == "q8_0") p->layout = Layout::kQ8_0, p->scale = 0.02f / 127;
  else if (f == "q4_0") p->layout = Layout::kQ4_0, p->scale = 0.02f / 8;
  else if (f == "q4_1") p->layout = Layout::kQ4_1, p->scale = 0.02f / 8;
  else if (f == "q5_0") p->layout = Layout::kQ5_0, p->scale = 0.02f / 16;
  else if (f == "q5_1") p->layout = Layout::kQ5_1, p->scale = 0.02f / 16;
  // k-quants: every sub-block scale (and min) at its largest, 63 (q2_k: 15,
  // q3_k: 31 or -32, q6_k: 64), so the super-block's d sets the range as for
  // the 32-element formats.
  else if (f == "q2_k") p->layout = Layout::kQ2_K, p->scale = 0.02f / (2 * 15);
  else if (f == "q3_k") p->layout = Layout::kQ3_K, p->scale = 0.02f / (4 * 32);
  else if (f == "q4_k") p->layout = Layout::kQ4_K, p->scale = 0.02f / (8 * 63);
  else if (f == "q5_k") p->layout = Layout::kQ5_K, p->scale = 0.02f / (16 * 63);
  else if (f == "q6_k") p->layout = Layout::kQ6_K, p->scale = 0.02f / (32 * 64);
  else if (f == "i8") p->layout = Layout::kI8, p->scale = 0.02f / 127;
  else if (f == "i4") p->layout = Layout::kI4, p->scale = 0.02f / 8;
  else
    return Bad(t, index, absl::StrCat("format '", f, "' cannot be generated as dummy weights"));
  // Block formats hold matrices; a 1-D block tensor gets matrix-like values.
  bool is_float = p->layout == Layout::kF32 || p->layout == Layout::kF16 ||
                  p->layout == Layout::kBF16;
  if (!is_float) p->kind = Kind::kMatrix;
  p->blocks = uint64_t(elements) / p->block_elems;
  p->chunk_blocks = std::max<uint64_t>(1, kChunkBytes / p->block_bytes);
  return absl::OkStatus();
}

inline void Store16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Fills `n` bytes with random words.
void RandomBytes(uint64_t& state, uint8_t* out, uint64_t n) {
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = SplitMix(state);
    std::memcpy(out + i, &w, 8);
  }
  if (i < n) {
    uint64_t w = SplitMix(state);
    std::memcpy(out + i, &w, n - i);
  }
}

// Chunk `chunk` of a tensor planned as `p`, written at `out` (the tensor's start).
void GenerateChunk(const Plan& p, const uint16_t* scales, uint64_t seed, uint64_t index,
                   uint64_t chunk, uint8_t* out) {
  uint64_t state = StreamSeed(seed, index, chunk);
  uint64_t first = chunk * p.chunk_blocks;
  uint64_t n = std::min(p.chunk_blocks, p.blocks - first);
  uint8_t* dst = out + first * p.block_bytes;
  float amp = p.kind == Kind::kMatrix ? 0.02f : 0.01f;
  float center = p.kind == Kind::kNorm ? 1.0f : 0.0f;
  switch (p.layout) {
    case Layout::kF32: {
      float* d = reinterpret_cast<float*>(dst);  // tensors are 64-byte aligned
      for (uint64_t i = 0; i < n; i += 2) {
        uint64_t w = SplitMix(state);
        d[i] = center + amp * Signed(uint32_t(w) >> 8);
        if (i + 1 < n) d[i + 1] = center + amp * Signed(uint32_t(w >> 32) >> 8);
      }
      return;
    }
    case Layout::kF16:
    case Layout::kBF16: {
      bool half = p.layout == Layout::kF16;
      for (uint64_t i = 0; i < n; i += 2) {
        uint64_t w = SplitMix(state);
        float a = center + amp * Signed(uint32_t(w) >> 8);
        Store16(dst + 2 * i, half ? FloatToHalf(a) : FloatToBF16(a));
        if (i + 1 < n) {
          float b = center + amp * Signed(uint32_t(w >> 32) >> 8);
          Store16(dst + 2 * i + 2, half ? FloatToHalf(b) : FloatToBF16(b));
        }
      }
      return;
    }
    default:
      break;
  }
  // Block formats: random quant bits everywhere, then each block's header
  // (scale from a table of 256 picked by a random byte of the block itself).
  RandomBytes(state, dst, n * p.block_bytes);
  static constexpr uint16_t kHalfEight = 0x4800;    // 8.0 in f16 (i4's zero point)
  static constexpr uint16_t kHalfSign = 0x8000;
  // Formats whose quants sit around a zero point they do not straddle evenly
  // (q4_0: q - 8 for q in 0..15, mean -1/2) would give every weight of a
  // matrix the same small bias. Summed over a row it dominates: a Llama-3-8B
  // shape in q4_0 gave every token the same argmax. Half their blocks, chosen
  // at random, get a negative scale (llama.cpp's own q4_0/q8_0 blocks have
  // either sign), so the bias cancels; the centered formats keep theirs.
  const bool flip_signs = p.layout == Layout::kQ8_0 || p.layout == Layout::kQ4_0 ||
                          p.layout == Layout::kQ5_0 || p.layout == Layout::kI8 ||
                          p.layout == Layout::kI4 || p.layout == Layout::kQ6_K;
  uint64_t signs = 0;
  for (uint64_t b = 0; b < n; ++b) {
    uint8_t* blk = dst + b * p.block_bytes;
    uint8_t pick = blk[p.block_bytes - 1];
    if (b % 64 == 0) signs = SplitMix(state);
    uint16_t d = scales[pick];
    if (flip_signs && ((signs >> (b % 64)) & 1)) d ^= kHalfSign;
    switch (p.layout) {
      case Layout::kQ8_0:
      case Layout::kQ4_0:
      case Layout::kQ5_0:
      case Layout::kI8:
        Store16(blk, d);
        break;
      case Layout::kQ4_1:
      case Layout::kQ5_1: {
        Store16(blk, d);
        // Quants 0..15 (0..31) around the middle: m = -7.5d (-15.5d).
        float m = -(p.layout == Layout::kQ4_1 ? 7.5f : 15.5f) * HalfToFloat(d);
        Store16(blk + 2, FloatToHalf(m));
        break;
      }
      case Layout::kI4:
        Store16(blk, d);
        Store16(blk + 2, kHalfEight);
        break;
      case Layout::kQ2_K:
        // {scales[16], qs[64], d, dmin}: scale bytes 0xff make every 4-bit
        // scale and min 15; dmin centers the quants (1.5 steps).
        std::memset(blk, 0xff, 16);
        Store16(blk + 80, d);
        Store16(blk + 82, FloatToHalf(1.5f * HalfToFloat(d)));
        break;
      case Layout::kQ3_K:
        // {hmask[32], qs[64], scales[12], d}: x = d * scale * (q - 4), q - 4
        // in [-4, 3]. Scale bytes alternating 0xff, 0x00 make the sub-block
        // scales alternate 31 and -32 (stored plus 32: 63 and 0), so the
        // values center on 0.
        for (int i = 0; i < 12; ++i) blk[96 + i] = i % 2 ? 0x00 : 0xff;
        Store16(blk + 108, d);
        break;
      case Layout::kQ4_K:
      case Layout::kQ5_K: {
        // {d, dmin, scales[12], ...}: all 12 bytes 0xff make every 6-bit
        // scale and min 63; dmin centers the quants (7.5 / 15.5 steps).
        Store16(blk, d);
        float steps = p.layout == Layout::kQ4_K ? 7.5f : 15.5f;
        Store16(blk + 2, FloatToHalf(steps * HalfToFloat(d)));
        std::memset(blk + 4, 0xff, 12);
        break;
      }
      case Layout::kQ6_K:
        // {ql[128], qh[64], int8 scales[16], d}: x = d * 64 * (q - 32).
        std::memset(blk + 192, 64, 16);
        Store16(blk + 208, d);
        break;
      default:
        break;
    }
  }
}

// The 256 f16 scales of a tensor: its nominal scale times [0.75, 1.25).
std::vector<uint16_t> ScaleTable(const Plan& p) {
  std::vector<uint16_t> t(256);
  for (int i = 0; i < 256; ++i) t[i] = FloatToHalf(p.scale * (0.75f + 0.5f * float(i) / 256.0f));
  return t;
}

}  // namespace

absl::Status GenerateDummyTensor(const ManifestTensor& t, uint64_t seed, uint64_t index,
                                 uint8_t* out) {
  Plan p;
  if (auto st = MakePlan(t, index, &p); !st.ok()) return st;
  std::vector<uint16_t> scales = ScaleTable(p);
  for (uint64_t c = 0; c < p.chunks(); ++c) GenerateChunk(p, scales.data(), seed, index, c, out);
  return absl::OkStatus();
}

absl::Status GenerateDummyWeights(const ManifestWeights& weights, uint8_t* base, int threads) {
  struct Item {
    uint64_t tensor, chunk;
  };
  std::vector<Plan> plans(weights.tensors.size());
  std::vector<std::vector<uint16_t>> scales(plans.size());
  std::vector<Item> items;
  for (size_t i = 0; i < plans.size(); ++i) {
    const ManifestTensor& t = weights.tensors[i];
    if (auto st = MakePlan(t, i, &plans[i]); !st.ok()) return st;
    if (t.offset > weights.size || t.bytes > weights.size - t.offset)
      return Bad(t, i, absl::StrCat("bytes [", t.offset, ", ", t.offset + t.bytes,
                                    ") run past weights.size ", weights.size));
    scales[i] = ScaleTable(plans[i]);
    for (uint64_t c = 0; c < plans[i].chunks(); ++c) items.push_back({i, c});
  }
  if (threads <= 0) threads = int(std::min(32u, std::max(1u, std::thread::hardware_concurrency())));
  threads = int(std::min<size_t>(size_t(threads), std::max<size_t>(items.size(), 1)));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < items.size();) {
      const Item& it = items[k];
      GenerateChunk(plans[it.tensor], scales[it.tensor].data(), weights.dummy_seed, it.tensor,
                    it.chunk, base + weights.tensors[it.tensor].offset);
    }
  };
  if (threads <= 1) {
    work();
    return absl::OkStatus();
  }
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  return absl::OkStatus();
}

}  // namespace llmc
