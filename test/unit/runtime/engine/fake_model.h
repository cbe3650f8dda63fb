// A model for engine tests without an artifact: a 24-token byte-level BPE
// tokenizer and a StepRunner whose "KV cache" stores token ids. Its logits
// for a row are a function of the row's whole context, read back through
// the block table from the cache slots the engine assigned, so a wrong slot
// mapping, block table, prefix-cache hit or recompute after preemption
// changes the tokens that come out. It picks the tokens of the batch's
// picks as a GPU runner would (StepBatch::picks) and leaves NaN in their
// logits rows, so that an engine reading a picked row's logits goes wrong.
// With `feeds` it feeds tokens as a GPU runner does (StepBatch::feeds, from
// the picks of the step run before), so a wrong feed, or a placeholder
// token left standing, changes the cache and the tokens after.
#ifndef LLMC_TEST_UNIT_RUNTIME_ENGINE_FAKE_MODEL_H_
#define LLMC_TEST_UNIT_RUNTIME_ENGINE_FAKE_MODEL_H_

#include <cstdint>
#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "llmc/runtime/engine/loaded_model.h"
#include "llmc/runtime/exec/step_batch.h"
#include "llmc/runtime/exec/step_runner.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc::testing {

inline constexpr int32_t kFakeVocab = 24;  // 0: BOS, 1: EOS, 2..23: letters a..v
inline constexpr int32_t kFakeEos = 1;

class FakeRunner : public StepRunner {
 public:
  FakeRunner(int64_t num_blocks, int64_t block_size, int64_t max_batch_tokens, int64_t max_logits)
      : num_blocks_(num_blocks),
        block_size_(block_size),
        max_batch_tokens_(max_batch_tokens),
        max_logits_(max_logits),
        cache_(size_t(num_blocks * block_size), -1) {}

  absl::StatusOr<StepOutput> Step(StepAccess, const StepBatch& b) override {
    ++steps_;
    if (fail_at_step_ == steps_) return absl::InternalError("fake runner: injected failure");
    if (auto st = ValidateStepBatch(
            b, {max_batch_tokens_, max_logits_, num_blocks_, block_size_, kFakeVocab});
        !st.ok())
      return st;
    if (!b.feeds.empty() && !feeds_)
      return absl::InvalidArgumentError("fake runner: a batch with feeds, and it feeds none");
    max_tokens_seen_ = std::max(max_tokens_seen_, b.num_tokens());
    for (int64_t t = 0; t < b.num_tokens(); ++t)
      cache_[size_t(b.slot_mapping[size_t(t)])] = b.tokens[size_t(t)];
    // The picks of the step before are still host_picks_'s.
    for (const TokenFeed& f : b.feeds) {
      if (size_t(f.pick) >= host_picks_.tokens().size())
        return absl::InvalidArgumentError(absl::StrFormat(
            "fake runner: feed from pick %d of a step with %d", f.pick,
            host_picks_.tokens().size()));
      cache_[size_t(b.slot_mapping[size_t(f.token)])] = host_picks_.tokens()[size_t(f.pick)];
    }
    feeds_seen_ += int64_t(b.feeds.size());
    logits_.assign(b.logits_rows.size() * kFakeVocab, 0.f);
    for (size_t i = 0; i < b.logits_rows.size(); ++i) {
      const int32_t row = b.logits_rows[i];
      int64_t s = 0;
      while (b.query_starts[size_t(s + 1)] <= row) ++s;
      // The context: positions 0..pos of sequence s, read from the cache.
      uint64_t h = 1469598103934665603ull;
      for (int32_t p = 0; p <= b.positions[size_t(row)]; ++p) {
        const int32_t block = b.block_tables[size_t(s * b.max_blocks + p / block_size_)];
        h = (h ^ uint64_t(cache_[size_t(block * block_size_ + p % block_size_)] + 7)) *
            1099511628211ull;
      }
      float* out = logits_.data() + i * kFakeVocab;
      // A clear favourite, with a runner-up close enough for sampling to
      // pick it sometimes; EOS when the hash says so (1 time in 16).
      const int32_t best = (h >> 20) % 16 == 0 ? kFakeEos : int32_t(2 + (h >> 8) % 22);
      for (int32_t v = 0; v < kFakeVocab; ++v) out[v] = -float((h >> (v % 32)) % 5);
      out[best] = 6.f;
      out[2 + (best + 5) % 22] = 5.f;
    }
    const StepOutput out = host_picks_.Pick(b, logits_.data(), kFakeVocab);
    picks_seen_ += int64_t(b.picks.size());
    for (const RowPick& p : b.picks)
      std::fill_n(logits_.data() + p.row * kFakeVocab, kFakeVocab,
                  std::numeric_limits<float>::quiet_NaN());
    return out;
  }

  // Several steps in flight, as a pipeline's stages hold them: a step runs
  // (writes its cache slots) at Submit, in submission order as the stages
  // would, and its logits wait to be collected.
  int64_t max_steps_in_flight() const override { return steps_in_flight_; }
  bool feeds_tokens() const override { return feeds_; }
  absl::Status Submit(StepAccess key, const StepBatch& b) override {
    absl::StatusOr<StepOutput> out = Step(key, b);
    if (out.ok())
      submitted_.push_back(Output{std::vector<float>(out->logits, out->logits + logits_.size()),
                                  host_picks_.tokens(), host_picks_.logprobs()});
    else
      submitted_.push_back(out.status());
    max_in_flight_seen_ = std::max(max_in_flight_seen_, int64_t(submitted_.size()));
    return absl::OkStatus();
  }
  absl::StatusOr<StepOutput> Collect(StepAccess) override {
    if (submitted_.empty()) return absl::FailedPreconditionError("fake runner: nothing submitted");
    collected_ = std::move(submitted_.front());
    submitted_.pop_front();
    if (!collected_.ok()) return collected_.status();
    return StepOutput{collected_->logits.data(), collected_->picked.data(),
                      collected_->logprobs.data()};
  }
  int64_t block_size() const override { return block_size_; }
  int64_t num_blocks() const override { return num_blocks_; }
  int64_t vocab_size() const override { return kFakeVocab; }
  int64_t max_batch_tokens() const override { return max_batch_tokens_; }
  int64_t max_logits() const override { return max_logits_; }
  int64_t kv_cache_bytes() const override { return num_blocks_ * block_size_ * 4; }
  int threads() const override { return 1; }
  std::string ExecutionSummary() const override { return "fake"; }

  int64_t fail_at_step_ = -1;
  int64_t steps_ = 0;
  int64_t max_tokens_seen_ = 0;
  int64_t steps_in_flight_ = 1;
  int64_t max_in_flight_seen_ = 0;
  int64_t picks_seen_ = 0;  // StepBatch picks over all steps
  bool feeds_ = false;      // feeds_tokens()
  int64_t feeds_seen_ = 0;  // StepBatch feeds over all steps

 private:
  struct Output {
    std::vector<float> logits;
    std::vector<int32_t> picked;
    std::vector<PickLogprob> logprobs;
  };
  int64_t num_blocks_, block_size_, max_batch_tokens_, max_logits_;
  std::vector<int32_t> cache_;
  std::vector<float> logits_;
  HostPicks host_picks_;
  std::deque<absl::StatusOr<Output>> submitted_;
  absl::StatusOr<Output> collected_;
};

inline std::unique_ptr<Tokenizer> FakeTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  vocab["<s>"] = 0;
  vocab["</s>"] = 1;
  for (int32_t i = 0; i < 22; ++i) vocab[std::string(1, char('a' + i))] = 2 + i;
  nlohmann::json j = {
      {"added_tokens",
       {{{"id", 0}, {"content", "<s>"}, {"special", true}},
        {{"id", 1}, {"content", "</s>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  auto tok = Tokenizer::FromTokenizerJson(j.dump(), "fake/tokenizer.json",
                                          R"({"bos_token": "<s>", "eos_token": "</s>"})");
  return tok.ok() ? std::move(tok).value() : nullptr;
}

struct FakeModelOptions {
  int64_t num_blocks = 64;
  int64_t block_size = 4;
  int64_t max_batch_tokens = 32;
  int64_t max_logits = 16;
  int64_t max_position = 4096;
  int64_t steps_in_flight = 1;  // FakeRunner::max_steps_in_flight()
  bool feeds = false;           // FakeRunner::feeds_tokens()
};

// The runner is also returned through `runner_out` (owned by the model).
inline LoadedModel FakeModel(const FakeModelOptions& o, FakeRunner** runner_out = nullptr) {
  LoadedModel m;
  m.tokenizer = FakeTokenizer();
  auto runner =
      std::make_unique<FakeRunner>(o.num_blocks, o.block_size, o.max_batch_tokens, o.max_logits);
  runner->steps_in_flight_ = o.steps_in_flight;
  runner->feeds_ = o.feeds;
  if (runner_out) *runner_out = runner.get();
  m.runner = std::move(runner);
  m.eos_ids = EndOfGenerationIds(*m.tokenizer);
  m.max_position = o.max_position;
  return m;
}

}  // namespace llmc::testing

#endif  // LLMC_TEST_UNIT_RUNTIME_ENGINE_FAKE_MODEL_H_
