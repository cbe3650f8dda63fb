// JSON parsing for the format readers (safetensors headers, config.json,
// index files). Internal to core/src/format: nlohmann types never appear
// in a public header.
#ifndef LLMC_RUNTIME_SRC_FORMAT_JSON_PARSE_H_
#define LLMC_RUNTIME_SRC_FORMAT_JSON_PARSE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace llmc::format_internal {

// Parses `text` without letting an exception escape. A syntax error becomes
// "<what>: <why> at line L, column C" with nlohmann's reason. When
// `duplicate_key` is non-null it receives the first key that occurs twice in
// the top-level object (empty if none): nlohmann keeps the last value of a
// repeated key silently, which for a safetensors header would hide a tensor.
absl::StatusOr<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                         std::string* duplicate_key = nullptr);

// "an object", "a string", "the number 576.5", ... for "must be X, got Y".
std::string DescribeJson(const nlohmann::json& value);

}  // namespace llmc::format_internal

#endif  // LLMC_RUNTIME_SRC_FORMAT_JSON_PARSE_H_
