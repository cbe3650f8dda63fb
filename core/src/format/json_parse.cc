#include "json_parse.h"

#include <cstdlib>
#include <set>

#include "absl/strings/str_format.h"

namespace llmc::format_internal {
namespace {

using nlohmann::json;

// Reruns a failed parse only to learn why it failed: the non-throwing DOM
// parser says nothing but "discarded", while the SAX interface hands over the
// exception object (never thrown) with line, column and reason.
class ErrorCatcher : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    message = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    if (size_t end = message.find("] ");
        !message.empty() && message[0] == '[' && end != std::string::npos)
      message.erase(0, end + 2);
    return false;
  }
  std::string message;
};

// Shortest text that reads back as `v`, always with a fraction or exponent so
// that 576.0 does not print as the integer it was mistaken for.
std::string DescribeFloat(double v) {
  std::string text = absl::StrFormat("%.15g", v);
  if (std::strtod(text.c_str(), nullptr) != v) text = absl::StrFormat("%.17g", v);
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

}  // namespace

absl::StatusOr<json> ParseJson(std::string_view text, const std::string& what,
                               std::string* duplicate_key) {
  std::set<std::string, std::less<>> seen;
  std::string duplicate;
  json::parser_callback_t callback = nullptr;
  if (duplicate_key != nullptr) {
    callback = [&](int depth, json::parse_event_t event, json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key && duplicate.empty() &&
          parsed.is_string()) {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!seen.insert(key).second) duplicate = key;
      }
      return true;
    };
  }
  json j = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ErrorCatcher catcher;
    json::sax_parse(text.begin(), text.end(), &catcher);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: invalid JSON: %s", what, catcher.message.empty() ? "parse failed" : catcher.message));
  }
  if (duplicate_key != nullptr) *duplicate_key = std::move(duplicate);
  return j;
}

std::string DescribeJson(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case json::value_t::number_integer: return absl::StrFormat("%d", value.get<int64_t>());
    case json::value_t::number_unsigned: return absl::StrFormat("%d", value.get<uint64_t>());
    case json::value_t::number_float: return DescribeFloat(value.get<double>());
    default: return value.type_name();
  }
}

}  // namespace llmc::format_internal
