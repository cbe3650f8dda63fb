#include "llmc/runtime/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "llmc/core/status_macros.h"
#include "llmc_cuda_philox.cuh"

namespace llmc {

// The host and the device sum and walk a draw by the same chunks.
static_assert(sample_internal::kDrawChunks == size_t(philox::kDrawChunks));

namespace {

using sample_internal::Candidate;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();
// Up to this k, top-k keeps a k-entry heap while scanning the logits; above
// it, all candidates are gathered and the k-th value found by nth_element.
constexpr size_t kHeapMaxK = 1024;

// NaN counts as masked; +inf as the largest float, so that differences to the
// maximum stay finite.
inline float Clean(float v) {
  if (v != v) return kNegInf;
  return v < kMaxFloat ? v : kMaxFloat;
}

// A strict total order (higher logit first, then lower id), so that every
// selection and sort below has one answer whatever the standard library.
inline bool Better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Calls fn(id, logit) for every id in ascending order, with the penalized
// logit for the ids in `penalized` (sorted by id, unique), the cleaned raw
// logit otherwise. Walking the gaps between penalized ids costs no lookup per
// token and needs no copy of the logits.
template <typename Fn>
void ForEachLogit(std::span<const float> logits, std::span<const Candidate> penalized, Fn&& fn) {
  size_t i = 0;
  for (const Candidate& p : penalized) {
    const size_t end = static_cast<size_t>(p.id);
    for (; i < end; ++i) fn(static_cast<int32_t>(i), Clean(logits[i]));
    fn(p.id, p.logit);
    i = end + 1;
  }
  for (; i < logits.size(); ++i) fn(static_cast<int32_t>(i), Clean(logits[i]));
}

// The chunked order of a draw over survivors in id order (sampler.h's
// kDrawChunks): survivor i belongs to chunk id / chunk_size; a chunk's
// weight is the sum of its survivors' in id order, the total the sum of the
// chunks' in chunk order. The device sampler sums the same way, one thread
// a chunk.
double ChunkSums(std::span<const Candidate> cand, std::span<const double> weights, size_t vocab,
                 std::vector<double>* chunk_sums) {
  const size_t chunk = sample_internal::DrawChunkSize(vocab);
  chunk_sums->assign(sample_internal::kDrawChunks, 0.0);
  for (size_t i = 0; i < cand.size(); ++i)
    (*chunk_sums)[static_cast<size_t>(cand[i].id) / chunk] += weights[i];
  double sum = 0;
  for (double c : *chunk_sums) sum += c;
  return sum;
}

// The token at `target` (in [0, sum)) of the chunked order: the first
// chunk with weight whose running total passes target, then inside it the
// first survivor whose running sum passes what is left; when rounding
// leaves a walk short, the last chunk or survivor with weight.
int32_t ChunkedDraw(std::span<const Candidate> cand, std::span<const double> weights, size_t vocab,
                    std::span<const double> chunk_sums, double target) {
  const size_t chunk = sample_internal::DrawChunkSize(vocab);
  // The chunk the target falls in; when rounding leaves it past every
  // chunk, the last chunk with weight.
  size_t c = 0;
  double acc = 0, before = 0;
  for (size_t k = 0; k < chunk_sums.size(); ++k) {
    if (chunk_sums[k] <= 0) continue;
    c = k;
    before = acc;
    if (target < acc + chunk_sums[k]) break;
    acc += chunk_sums[k];
  }
  acc = before;
  const double left = target - acc;
  int32_t token = 0;
  double run = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    if (static_cast<size_t>(cand[i].id) / chunk != c || weights[i] <= 0) continue;
    run += weights[i];
    token = cand[i].id;
    if (left < run) break;
  }
  return token;
}

// Keeps the k best candidates offered so far in `heap`, whose front is the
// worst of them.
inline void HeapOffer(std::vector<Candidate>& heap, size_t k, Candidate c) {
  if (heap.size() < k) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), Better);
  } else if (Better(c, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), Better);
    heap.back() = c;
    std::push_heap(heap.begin(), heap.end(), Better);
  }
}

}  // namespace

uint64_t sample_internal::DrawBits(uint64_t seed, uint64_t index) {
  return philox::draw_bits(seed, index);
}

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& params, SamplerScratch* scratch) {
  LLMC_RETURN_IF_ERROR(params.Validate());
  return Sampler(params, scratch);
}

Sampler::Sampler(const SamplingParams& params, SamplerScratch* scratch)
    : params_(params),
      draws_(0),
      owned_scratch_(scratch ? nullptr : std::make_unique<SamplerScratch>()),
      scratch_(scratch ? scratch : owned_scratch_.get()) {}

Sampler::~Sampler() = default;

void PenaltyWindow(std::span<const int32_t> previous, int repeat_last_n, int64_t vocab,
                   std::vector<std::pair<int32_t, int32_t>>* out) {
  out->clear();
  if (repeat_last_n == 0) return;
  if (repeat_last_n > 0 && previous.size() > static_cast<size_t>(repeat_last_n))
    previous = previous.last(static_cast<size_t>(repeat_last_n));
  for (int32_t t : previous)
    if (t >= 0 && t < vocab) out->push_back({t, 0});
  std::sort(out->begin(), out->end());
  // One entry per distinct token, from its run of equal ids, in place.
  size_t kept = 0;
  for (size_t i = 0; i < out->size();) {
    size_t j = i + 1;
    while (j < out->size() && (*out)[j].first == (*out)[i].first) ++j;
    (*out)[kept++] = {(*out)[i].first, static_cast<int32_t>(j - i)};
    i = j;
  }
  out->resize(kept);
}

void Sampler::BuildPenalties(std::span<const float> logits, std::span<const int32_t> previous) {
  std::vector<Candidate>& penalized = scratch_->penalized;
  penalized.clear();
  const float repeat = params_.repetition_penalty;
  const float frequency = params_.frequency_penalty;
  const float presence = params_.presence_penalty;
  // The common case, every penalty off: nothing to count, sort or allocate.
  if (params_.repeat_last_n == 0 || (repeat == 1.0f && frequency == 0.0f && presence == 0.0f))
    return;
  std::vector<std::pair<int32_t, int32_t>>& window = scratch_->window;
  PenaltyWindow(previous, params_.repeat_last_n, static_cast<int64_t>(logits.size()), &window);
  // As llama.cpp's llama_sampler_penalties: the repetition penalty once
  // however often the token occurs, then count * frequency + presence
  // subtracted.
  for (const auto& [id, occurrences] : window) {
    const float count = static_cast<float>(occurrences);
    float v = Clean(logits[static_cast<size_t>(id)]);
    v = v > 0 ? v / repeat : v * repeat;
    v -= count * frequency + presence;
    penalized.push_back({Clean(v), id});
  }
}

int32_t Sampler::Greedy(std::span<const float> logits) const {
  float best = kNegInf;
  int32_t best_id = 0;
  ForEachLogit(logits, scratch_->penalized, [&](int32_t id, float v) {
    if (v > best) {  // strict: the first (lowest) id wins ties
      best = v;
      best_id = id;
    }
  });
  return best_id;
}

void Sampler::SelectTopK(std::span<const float> logits, size_t k, bool* sorted) {
  std::vector<Candidate>& cand = scratch_->candidates;
  cand.clear();
  const size_t vocab = logits.size();
  if (k < vocab && k <= kHeapMaxK) {
    // Ids come in ascending order, so a later token must beat the worst kept
    // one strictly; `floor` is that logit once the heap is full.
    float floor = kNegInf;
    ForEachLogit(logits, scratch_->penalized, [&](int32_t id, float v) {
      if (!(v > floor)) return;
      HeapOffer(cand, k, {v, id});
      if (cand.size() == k) floor = cand.front().logit;
    });
    std::sort(cand.begin(), cand.end(), Better);
    *sorted = true;
    return;
  }
  // Masked tokens can never be drawn: leave them out.
  ForEachLogit(logits, scratch_->penalized, [&](int32_t id, float v) {
    if (v != kNegInf) cand.push_back({v, id});
  });
  *sorted = false;
  if (k >= cand.size()) return;
  // A large k: find the k-th best value on a copy, then filter in place so
  // that the survivors stay in id order (which nth_element's implementation-
  // defined arrangement would not give).
  std::vector<float>& values = scratch_->values;
  values.resize(cand.size());
  for (size_t i = 0; i < cand.size(); ++i) values[i] = cand[i].logit;
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(k - 1), values.end(),
                   std::greater<float>());
  const float kth = values[k - 1];
  const size_t above = static_cast<size_t>(
      std::count_if(values.begin(), values.begin() + static_cast<ptrdiff_t>(k - 1),
                    [kth](float v) { return v > kth; }));
  size_t ties_left = k - above;  // tokens equal to the k-th value: lowest ids first
  size_t out = 0;
  for (const Candidate& c : cand) {
    if (c.logit > kth) {
      cand[out++] = c;
    } else if (c.logit == kth && ties_left > 0) {
      cand[out++] = c;
      --ties_left;
    }
  }
  cand.resize(out);
}

double Sampler::Prepare(std::span<const float> logits) {
  const size_t vocab = logits.size();
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab;
  const bool top_p = params_.top_p < 1.0f;
  // Top-p alone looks for its prefix among the kTopPCandidates best.
  const size_t k = top_k   ? static_cast<size_t>(params_.top_k)
                   : top_p ? std::min(sample_internal::kTopPCandidates, vocab)
                           : vocab;
  bool sorted = false;
  SelectTopK(logits, k, &sorted);
  std::vector<Candidate>& cand = scratch_->candidates;
  std::vector<double>& weights = scratch_->weights;
  weights.clear();
  if (cand.empty()) return 0;

  float max_logit = cand[0].logit;
  if (!sorted) {
    for (const Candidate& c : cand) max_logit = std::max(max_logit, c.logit);
  }

  // top-p: the shortest descending prefix whose mass reaches top_p of the
  // top-k survivors' (without top-k: of the whole vocabulary's); the token
  // that crosses the line is kept.
  if (top_p && cand.size() > 1) {
    if (!sorted) {
      std::sort(cand.begin(), cand.end(), Better);
      sorted = true;
    }
    double mass = 0;
    if (top_k) {
      for (const Candidate& c : cand) mass += std::exp(c.logit - max_logit);
    } else {
      mass = VocabMass(logits, max_logit);
    }
    cand.resize(TopPSorted(max_logit, mass));
  }

  // min-p: p >= min_p * p_max, i.e. logit >= max + log(min_p) (llama.cpp's
  // test). It compares with the best token, which top-p always keeps, so
  // applying it after top-p keeps the intersection of the two sets.
  // remove_if is stable.
  if (params_.min_p > 0) {
    const float threshold = max_logit + std::log(params_.min_p);
    cand.erase(std::remove_if(cand.begin(), cand.end(),
                              [threshold](const Candidate& c) { return c.logit < threshold; }),
               cand.end());
  }

  // Temperature, then the (unnormalized) softmax the draw uses.
  const float temperature = params_.temperature;
  weights.resize(cand.size());
  for (size_t i = 0; i < cand.size(); ++i)
    weights[i] = std::exp((cand[i].logit - max_logit) / temperature);
  // Survivors in id order (no top-k or top-p sorted them) are summed and
  // walked by chunks of the vocabulary, as the device sampler does.
  scratch_->id_order = !sorted;
  if (scratch_->id_order) return ChunkSums(cand, weights, vocab, &scratch_->chunk_sums);
  double sum = 0;
  for (double w : weights) sum += w;
  return sum;
}

size_t Sampler::TopPSorted(float max_logit, double mass) const {
  const std::vector<Candidate>& cand = scratch_->candidates;
  const double target = static_cast<double>(params_.top_p) * mass;
  double cum = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    cum += std::exp(cand[i].logit - max_logit);
    if (cum >= target) return i + 1;
  }
  return cand.size();
}

double Sampler::VocabMass(std::span<const float> logits, float max_logit) const {
  const size_t chunk = sample_internal::DrawChunkSize(logits.size());
  std::vector<double>& chunk_sums = scratch_->chunk_sums;
  chunk_sums.assign(sample_internal::kDrawChunks, 0.0);
  ForEachLogit(logits, scratch_->penalized, [&](int32_t id, float v) {
    if (v != kNegInf) chunk_sums[static_cast<size_t>(id) / chunk] += std::exp(v - max_logit);
  });
  double mass = 0;
  for (double c : chunk_sums) mass += c;
  return mass;
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> previous_tokens,
                        SampleResult* out) {
  if (out != nullptr) {
    out->token = -1;
    out->logprob = std::numeric_limits<float>::quiet_NaN();
    out->top_logprobs.clear();
  }
  if (logits.empty()) return -1;
  BuildPenalties(logits, previous_tokens);
  int32_t token = 0;
  // The n-th token's draw is Philox's output for (seed, n), greedy or not,
  // whatever survives: a function of the request alone.
  const uint64_t index = draws_++;
  if (params_.temperature <= 0) {
    token = Greedy(logits);
  } else {
    const double u = sample_internal::UnitInterval(sample_internal::DrawBits(params_.seed, index));
    const double sum = Prepare(logits);
    const std::vector<Candidate>& cand = scratch_->candidates;
    const std::vector<double>& weights = scratch_->weights;
    if (sum > 0 && scratch_->id_order) {
      token = ChunkedDraw(cand, weights, logits.size(), scratch_->chunk_sums, u * sum);
    } else if (sum > 0) {
      const double target = u * sum;
      double acc = 0;
      for (size_t i = 0; i < cand.size(); ++i) {
        if (weights[i] <= 0) continue;
        acc += weights[i];
        token = cand[i].id;  // the last positive one if rounding leaves acc short
        if (target < acc) break;
      }
    }
  }
  if (out != nullptr) {
    out->token = token;
    if (params_.logprobs > 0) ComputeLogprobs(logits, token, out);
  }
  return token;
}

void Sampler::Distribution(std::span<const float> logits, std::span<const int32_t> previous_tokens,
                           std::vector<TokenProb>* out) {
  out->clear();
  if (logits.empty()) return;
  BuildPenalties(logits, previous_tokens);
  if (params_.temperature <= 0) {
    out->push_back({Greedy(logits), 1.0f});
    return;
  }
  const double sum = Prepare(logits);
  const std::vector<Candidate>& cand = scratch_->candidates;
  if (cand.empty()) {
    out->push_back({0, 1.0f});
    return;
  }
  for (size_t i = 0; i < cand.size(); ++i)
    out->push_back({cand[i].id, static_cast<float>(scratch_->weights[i] / sum)});
}

void Sampler::TokenLogprobs(std::span<const float> logits, int32_t token, SampleResult* out) {
  out->token = token;
  out->logprob = std::numeric_limits<float>::quiet_NaN();
  out->top_logprobs.clear();
  if (token < 0 || size_t(token) >= logits.size()) return;
  ComputeLogprobs(logits, token, out);
}

void Sampler::ComputeLogprobs(std::span<const float> logits, int32_t token, SampleResult* out) {
  const size_t n = std::min(static_cast<size_t>(std::max(params_.logprobs, 0)), logits.size());
  std::vector<Candidate>& top = scratch_->top;
  top.clear();
  float max_logit = kNegInf;
  float floor = kNegInf;  // as in SelectTopK
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = Clean(logits[i]);
    max_logit = std::max(max_logit, v);
    if (n == 0 || !(v > floor)) continue;
    HeapOffer(top, n, {v, static_cast<int32_t>(i)});
    if (top.size() == n) floor = top.front().logit;
  }
  if (max_logit == kNegInf) {  // everything masked: no distribution
    out->logprob = kNegInf;
    return;
  }
  // Summed by the chunks of a draw (kDrawChunks), as the device sampler
  // sums, one thread a chunk.
  const size_t chunk = sample_internal::DrawChunkSize(logits.size());
  double sum = 0;
  for (size_t begin = 0; begin < logits.size(); begin += chunk) {
    double part = 0;
    for (size_t i = begin; i < std::min(logits.size(), begin + chunk); ++i)
      part += std::exp(Clean(logits[i]) - max_logit);
    sum += part;
  }
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  out->logprob = static_cast<float>(Clean(logits[static_cast<size_t>(token)]) - log_z);
  std::sort(top.begin(), top.end(), Better);
  for (const Candidate& c : top)
    out->top_logprobs.push_back({c.id, static_cast<float>(c.logit - log_z)});
}

int32_t GreedyToken(std::span<const float> logits, std::span<const int32_t> masked) {
  float best = kNegInf;
  int32_t best_id = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = Clean(logits[i]);
    if (!(v > best)) continue;  // strict: the first (lowest) id wins ties
    if (std::find(masked.begin(), masked.end(), int32_t(i)) != masked.end()) continue;
    best = v;
    best_id = int32_t(i);
  }
  return best_id;
}

std::span<const float> MaskTokens(std::span<const float> logits, std::span<const int32_t> masked,
                                  std::vector<float>* scratch) {
  if (masked.empty()) return logits;
  scratch->assign(logits.begin(), logits.end());
  for (int32_t t : masked)
    if (t >= 0 && size_t(t) < scratch->size())
      (*scratch)[size_t(t)] = -std::numeric_limits<float>::infinity();
  return *scratch;
}

}  // namespace llmc
