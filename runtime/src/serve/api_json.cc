#include "llmc/runtime/serve/api_json.h"

namespace llmc::serve {

nlohmann::ordered_json ErrorJson(const ApiError& e) {
  nlohmann::ordered_json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param);
  err["code"] = e.status;
  return {{"error", err}};
}

HttpResponse ErrorResponse(const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  r.body = Dump(ErrorJson(e));
  return r;
}

ApiError EngineError(const absl::Status& status) {
  ApiError e;
  e.message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      e.status = 400;
      break;
    case absl::StatusCode::kUnavailable:
      e.status = 503;
      e.type = "service_unavailable";
      break;
    default:
      e.status = 500;
      e.type = "internal_error";
      break;
  }
  return e;
}

}  // namespace llmc::serve
