// JSON pieces every endpoint answers with: OpenAI's error object and the
// dump settings (invalid UTF-8 from a model's byte tokens is replaced, never
// thrown on).
#ifndef LLMC_RUNTIME_SERVE_API_JSON_H_
#define LLMC_RUNTIME_SERVE_API_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "llmc/runtime/serve/http_server.h"
#include "llmc/runtime/serve/openai_request.h"

namespace llmc::serve {

inline std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json ErrorJson(const ApiError& e);
HttpResponse ErrorResponse(const ApiError& e);
// The HTTP status for an engine error: 400 for the request's own fault
// (InvalidArgument, ResourceExhausted: it can never fit), 503 while shutting
// down, 500 otherwise.
ApiError EngineError(const absl::Status& status);

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_API_JSON_H_
