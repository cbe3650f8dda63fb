// Token sampling for one sequence: greedy, temperature, top-k, top-p, min-p,
// repetition, presence and frequency penalties, seeded and reproducible, with
// logprobs.
//
// Order (llama.cpp's default sampler chain, common/sampling.cpp):
//
//   penalties → top-k → top-p → min-p → temperature → softmax → draw
//
// - The penalties come first because they change which tokens are likely;
//   the truncations must see the penalized logits. They are llama.cpp's
//   llama_sampler_penalties: for each distinct token with count c > 0 among
//   the last repeat_last_n previous tokens, the repetition penalty (divide a
//   positive logit, multiply a negative one), then subtract
//   c * frequency_penalty + presence_penalty. With all three off (or
//   repeat_last_n 0) they cost nothing; otherwise O(n log n) in the window
//   size n, never O(V).
// - top-k, top-p and min-p look at the temperature-1 distribution, and
//   temperature only reshapes the survivors. So temperature changes how
//   adventurous the draw is among plausible tokens without letting a high
//   temperature pull in the long tail (the reason llama.cpp puts it last;
//   vLLM applies temperature first, so a high temperature widens its top-p
//   set).
// - top-p renormalizes over the top-k survivors before accumulating mass
//   (as llama.cpp does). Without top-k its mass is the whole vocabulary's,
//   and the shortest prefix reaching top_p of it is looked for among the
//   kTopPCandidates best tokens: a prefix longer than that (a nearly flat
//   distribution) is cut there. That is what lets the device sampler run
//   top-p alone in one block (its top-k select), as OpenAI clients send
//   it, with the same tokens as here. min-p compares against the most
//   likely token, which every step keeps, so it does not care about
//   normalization; top-p then min-p keeps exactly the intersection of the
//   two sets.
// - Greedy (temperature 0) is the argmax of the penalized logits, ties to the
//   lowest id; the truncations cannot change it, so they are skipped.
//
// Randomness: the n-th Sample() of a sampler (n from 0, greedy calls
// counted) draws 64 bits from Philox-4x32-10 keyed by the seed, at counter
// n (llmc_cuda_philox.cuh, which device sampling kernels share), turned
// into a double in [0, 1) by our own arithmetic. A token's draw is thus a
// function of the request's seed and the token's index in its output,
// never of its batch-mates or of the order rows are sampled in. The draw
// walks the survivors in an order that depends only on logits and ids
// (with top-k or top-p: descending logit, then id; without: id order,
// summed and walked by chunks of the vocabulary as the device sampler does,
// kDrawChunks; so is top-p's whole-vocabulary mass), and
// every selection uses a strict total order, so the same seed gives the
// same tokens everywhere, up to last-bit differences of exp between C
// libraries.
//
// Cost, vocabulary V: one pass over the logits for top-k with k <= 1024 (a
// k-entry heap; the logits are not copied), plus O(k log k); a larger k
// gathers all candidates and finds the k-th by nth_element. Without top-k,
// top-p is the heap's selection of kTopPCandidates and a pass of expf over
// V for the mass. The final softmax is over the survivors only. Logprobs
// add one pass of expf over V. Scratch buffers live in a SamplerScratch
// and are reused: once they have grown to what the rows need, Sample()
// allocates nothing (top_logprobs reuses the capacity of the caller's
// SampleResult).
//
// NaN logits count as -inf (masked), +inf as the largest float.
#ifndef LLMC_RUNTIME_SAMPLE_SAMPLER_H_
#define LLMC_RUNTIME_SAMPLE_SAMPLER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/sample/sampling_params.h"

namespace llmc {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};

struct SampleResult {
  int32_t token = -1;
  // Logprobs are the log-softmax of the raw logits, before the penalties,
  // temperature and truncation: the model's own distribution over the whole
  // vocabulary (vLLM V1's default, logprobs_mode "raw_logprobs").
  // They are defined for greedy requests too, and exp() of all V of them
  // sums to 1. Only filled when params.logprobs > 0: `logprob` (NaN
  // otherwise) is the chosen token's, `top_logprobs` the params.logprobs most
  // likely tokens, best first (ties: lowest id). An API that wants the chosen
  // token's logprob alone asks for 1 and ignores top_logprobs.
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs;
};

// A token and the probability the final draw gives it.
struct TokenProb {
  int32_t token = -1;
  float prob = 0;
};

namespace sample_internal {

struct Candidate {
  float logit;
  int32_t id;
};

// A draw over survivors left in id order (no top-k sort, no top-p) sums
// and walks them by kDrawChunks contiguous chunks of the vocabulary, each
// DrawChunkSize(vocab) ids: the device sampler's order, one thread a chunk,
// so both give the same token from the same weights.
inline constexpr size_t kDrawChunks = 256;
// Top-p without top-k looks for its prefix among this many best tokens
// (the device sampler's top-k limit, kMaxPickTopK: static_assert in
// step_runner.cc).
inline constexpr size_t kTopPCandidates = 1024;
inline size_t DrawChunkSize(size_t vocab) { return (vocab + kDrawChunks - 1) / kDrawChunks; }

// [0, 1) from the top 53 bits: exact in a double, the same on every machine.
inline double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The 64 random bits of draw `index` of seed `seed` (philox::draw_bits).
uint64_t DrawBits(uint64_t seed, uint64_t index);

}  // namespace sample_internal

// Buffers that Sample() reuses from call to call, sized by the vocabulary at
// worst. Samplers of one thread may share one (an engine sampling 256
// sequences needs one, not 256); never use one from two threads at once.
class SamplerScratch {
 public:
  SamplerScratch() = default;
  SamplerScratch(const SamplerScratch&) = delete;
  SamplerScratch& operator=(const SamplerScratch&) = delete;

 private:
  friend class Sampler;
  std::vector<sample_internal::Candidate> candidates;  // survivors
  std::vector<sample_internal::Candidate> penalized;   // distinct window tokens, by id
  std::vector<sample_internal::Candidate> top;         // top-N logprobs heap
  std::vector<float> values;    // large top-k threshold
  std::vector<double> weights;  // final draw weights
  std::vector<double> chunk_sums;  // the weights by chunk (id order)
  std::vector<std::pair<int32_t, int32_t>> window;  // the penalties' (token, count)
  bool id_order = false;           // the survivors are in id order: chunked draw
};

class Sampler {
 public:
  // Validates `params` first.
  static absl::StatusOr<Sampler> Create(const SamplingParams& params,
                                        SamplerScratch* scratch = nullptr);
  // `params` must pass Validate(). `scratch` (not owned) must outlive the
  // sampler; nullptr: the sampler owns its own.
  explicit Sampler(const SamplingParams& params, SamplerScratch* scratch = nullptr);
  Sampler(Sampler&&) noexcept = default;
  Sampler& operator=(Sampler&&) noexcept = default;
  ~Sampler();

  // Picks the next token from one row of logits (one entry per vocabulary
  // id). `previous_tokens`: the sequence so far (prompt and output), of which
  // the penalties read the last repeat_last_n; ids outside the vocabulary are
  // ignored. Returns the token (also in out->token when `out`
  // is given), or -1 when `logits` is empty. When every logit is masked
  // (-inf), returns 0.
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> previous_tokens,
                 SampleResult* out = nullptr);

  // The distribution Sample() would draw from now, without drawing: the
  // surviving tokens and their probabilities (summing to 1), in the order the
  // draw visits them. For tests and debugging; does not touch the RNG.
  void Distribution(std::span<const float> logits, std::span<const int32_t> previous_tokens,
                    std::vector<TokenProb>* out);

  // The logprobs of a given `token` (a scored prompt's next token, no
  // draw): out->token, its raw logprob and the params' `logprobs` best,
  // as Sample() reports a drawn token's; all with the same arithmetic.
  void TokenLogprobs(std::span<const float> logits, int32_t token, SampleResult* out);

  const SamplingParams& params() const { return params_; }
  // The draw counter of the next Sample() (the token's index in the
  // output): for one token of a request whose earlier ones were sampled
  // elsewhere (a runner's pick, PickOnHost).
  void SetDrawIndex(uint64_t index) { draws_ = index; }

 private:
  void BuildPenalties(std::span<const float> logits, std::span<const int32_t> previous);
  int32_t Greedy(std::span<const float> logits) const;
  // Leaves the survivors in scratch_->candidates and their unnormalized
  // final weights in scratch_->weights; returns the weights' sum.
  double Prepare(std::span<const float> logits);
  // The k best (the whole vocabulary for k >= V) into scratch_->candidates.
  void SelectTopK(std::span<const float> logits, size_t k, bool* sorted);
  // top-p over scratch_->candidates, sorted best first, of total weight
  // `mass` (exp(logit - max_logit) summed); returns how many survive.
  size_t TopPSorted(float max_logit, double mass) const;
  // The whole vocabulary's exp(logit - max_logit), summed by kDrawChunks.
  double VocabMass(std::span<const float> logits, float max_logit) const;
  void ComputeLogprobs(std::span<const float> logits, int32_t token, SampleResult* out);

  SamplingParams params_;
  uint64_t draws_;  // Sample() calls so far: the next draw's Philox counter
  std::unique_ptr<SamplerScratch> owned_scratch_;
  SamplerScratch* scratch_;
};

// What the penalties act on: the distinct tokens among the last
// repeat_last_n of `previous` (all of them with -1, none with 0), ascending,
// each with how often it occurs there; ids outside [0, vocab) are ignored.
// Sampler::Sample's penalties and a runner's picks (StepBatch::penalties)
// both start from it.
void PenaltyWindow(std::span<const int32_t> previous, int repeat_last_n, int64_t vocab,
                   std::vector<std::pair<int32_t, int32_t>>* out);

// The greedy token of one row: the argmax of `logits` with every id of
// `masked` at -inf, ties to the lowest id, NaN masked and +inf the largest
// float; 0 when nothing is above -inf. What Sampler::Sample gives a greedy
// request without penalties from MaskTokens(logits, masked), without the
// copy; the device's greedy pick (llmc_cuda_sample.cuh) matches it.
int32_t GreedyToken(std::span<const float> logits, std::span<const int32_t> masked);

// `logits` with every id of `masked` set to -inf, as llama.cpp's
// --ignore-eos masks the end-of-generation tokens (a logit bias of -inf):
// the text goes on as if the model had never wanted to stop. Returns
// `logits` itself when nothing is masked, else a view of `*scratch`.
std::span<const float> MaskTokens(std::span<const float> logits, std::span<const int32_t> masked,
                                  std::vector<float>* scratch);

}  // namespace llmc

#endif  // LLMC_RUNTIME_SAMPLE_SAMPLER_H_
