#include "llmc/runtime/sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "llmc/runtime/sample/sampler.h"

namespace llmc {
namespace {

void ExpectFieldError(const SamplingParams& p, const std::string& field) {
  absl::Status st = p.Validate();
  ASSERT_FALSE(st.ok()) << "expected an error naming " << field;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'" + field + "'"), std::string::npos) << st;
}

TEST(SamplingParams, DefaultsAreLlamaCppsAndValid) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
  EXPECT_EQ(p.logprobs, 0);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.0f);
}

TEST(SamplingParams, BoundaryValuesPass) {
  SamplingParams p;
  p.temperature = 0;  // greedy
  p.top_k = -1;       // off
  p.top_p = 1;
  p.min_p = 0;
  p.repeat_last_n = -1;
  p.max_tokens = -1;
  p.logprobs = kMaxLogprobs;
  EXPECT_TRUE(p.Validate().ok()) << p.Validate();
  p.min_p = 1;
  p.max_tokens = 1;
  p.repeat_last_n = 0;
  EXPECT_TRUE(p.Validate().ok()) << p.Validate();
}

TEST(SamplingParams, ErrorsNameTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::function<void(SamplingParams&)> change;
    std::string field;
  } cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "temperature"},
      {[&](SamplingParams& p) { p.temperature = nan; }, "temperature"},
      {[&](SamplingParams& p) { p.temperature = inf; }, "temperature"},
      {[](SamplingParams& p) { p.top_p = 0; }, "top_p"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p"},
      {[&](SamplingParams& p) { p.top_p = nan; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.01f; }, "min_p"},
      {[](SamplingParams& p) { p.min_p = 1.01f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.repetition_penalty = -1; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.repeat_last_n = -2; }, "repeat_last_n"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = -2.5f; }, "presence_penalty"},
      {[&](SamplingParams& p) { p.presence_penalty = nan; }, "presence_penalty"},
      {[&](SamplingParams& p) { p.presence_penalty = inf; }, "presence_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = 2.5f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = -2.5f; }, "frequency_penalty"},
      {[&](SamplingParams& p) { p.frequency_penalty = nan; }, "frequency_penalty"},
      {[&](SamplingParams& p) { p.frequency_penalty = -inf; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens"},
      {[](SamplingParams& p) { p.max_tokens = -5; }, "max_tokens"},
      {[](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "stop[1]"},
      {[](SamplingParams& p) { p.logprobs = -1; }, "logprobs"},
      {[](SamplingParams& p) { p.logprobs = kMaxLogprobs + 1; }, "logprobs"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.change(p);
    ExpectFieldError(p, c.field);
  }
}

TEST(SamplingParams, MessageSaysTheRangeAndTheValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(p.Validate().message(), "sampling params: field 'top_p' must be in (0, 1], got 1.5");
}

TEST(SamplingParams, PresenceAndFrequencyPenaltiesAreOpenAIsRange) {
  SamplingParams p;
  EXPECT_EQ(p.presence_penalty, 0.0f);  // off by default
  EXPECT_EQ(p.frequency_penalty, 0.0f);
  for (float v : {-2.0f, -0.5f, 0.0f, 1.0f, 2.0f}) {
    p.presence_penalty = v;
    p.frequency_penalty = -v;
    EXPECT_TRUE(p.Validate().ok()) << v << ": " << p.Validate();
  }
  p = SamplingParams();
  p.presence_penalty = 3;
  EXPECT_EQ(p.Validate().message(),
            "sampling params: field 'presence_penalty' must be in [-2, 2], got 3");
  p = SamplingParams();
  p.frequency_penalty = -2.5f;
  EXPECT_EQ(p.Validate().message(),
            "sampling params: field 'frequency_penalty' must be in [-2, 2], got -2.5");
  p.frequency_penalty = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(p.Validate().message(),
            "sampling params: field 'frequency_penalty' must be in [-2, 2], got nan");
  EXPECT_FALSE(Sampler::Create(p).ok());
}

TEST(SamplingParams, SamplerCreateValidates) {
  SamplingParams p;
  p.min_p = 2;
  absl::StatusOr<Sampler> bad = Sampler::Create(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'min_p'"), std::string::npos);
  EXPECT_TRUE(Sampler::Create(SamplingParams()).ok());
}

}  // namespace
}  // namespace llmc
