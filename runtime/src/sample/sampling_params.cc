#include "llmc/runtime/sample/sampling_params.h"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"

namespace llmc {
namespace {

absl::Status FieldError(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrFormat("sampling params: field '%s' %s", field, why));
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  // Written so that NaN fails every range check.
  if (!(temperature >= 0 && std::isfinite(temperature)))
    return FieldError("temperature",
                      absl::StrFormat("must be >= 0 (0: greedy), got %g", temperature));
  if (!(top_p > 0 && top_p <= 1))
    return FieldError("top_p", absl::StrFormat("must be in (0, 1], got %g", top_p));
  if (!(min_p >= 0 && min_p <= 1))
    return FieldError("min_p", absl::StrFormat("must be in [0, 1], got %g", min_p));
  if (!(repetition_penalty > 0 && std::isfinite(repetition_penalty)))
    return FieldError("repetition_penalty",
                      absl::StrFormat("must be positive (1: off), got %g", repetition_penalty));
  if (repeat_last_n < -1)
    return FieldError(
        "repeat_last_n",
        absl::StrFormat("must be >= -1 (-1: all previous tokens, 0: off), got %d", repeat_last_n));
  if (!(presence_penalty >= -2 && presence_penalty <= 2))
    return FieldError("presence_penalty",
                      absl::StrFormat("must be in [-2, 2], got %g", presence_penalty));
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
    return FieldError("frequency_penalty",
                      absl::StrFormat("must be in [-2, 2], got %g", frequency_penalty));
  if (max_tokens < 1 && max_tokens != -1)
    return FieldError("max_tokens",
                      absl::StrFormat("must be >= 1, or -1 for no limit, got %d", max_tokens));
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty())
      return FieldError(absl::StrFormat("stop[%d]", i), "must not be an empty string");
  }
  if (logprobs < 0 || logprobs > kMaxLogprobs)
    return FieldError("logprobs",
                      absl::StrFormat("must be in [0, %d], got %d", kMaxLogprobs, logprobs));
  return absl::OkStatus();
}

}  // namespace llmc
