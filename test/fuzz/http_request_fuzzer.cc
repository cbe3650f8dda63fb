// libFuzzer target: the HTTP server's request parser (Boost.Beast with the
// server's limits, through ParseHttpRequest) on arbitrary bytes must return a
// request or one of the four statuses the server answers with, never crash,
// hang or read past the bytes; a request it returns keeps the limits and is
// what the handlers rely on: a non-empty method token and target, the path
// the target up to its query, lower-cased header names.
//
// The request-target is whatever Beast accepts (any run of visible bytes:
// "foo", "?a" and "h:80" parse too), so the path is not checked to be origin-
// form; routing compares it with the known paths and answers 404.
//
// Seeds: test/fuzz/corpus/http_request/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "llmc/runtime/serve/http_server.h"

namespace {

bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

// Aborts, naming the broken invariant, when `cond` is false.
#define Check(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                    \
      std::abort();                                                     \
    }                                                                   \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  llmc::serve::HttpLimits limits;
  limits.max_header_bytes = 4 * 1024;
  limits.max_body_bytes = 64 * 1024;
  auto r = llmc::serve::ParseHttpRequest(bytes, limits);
  if (!r.ok()) {
    switch (r.status().code()) {
      case absl::StatusCode::kInvalidArgument:   // 400
      case absl::StatusCode::kResourceExhausted:  // 413
      case absl::StatusCode::kOutOfRange:         // 431
      case absl::StatusCode::kUnavailable:        // incomplete
        break;
      default:
        std::abort();
    }
    Check(!r.status().message().empty());
    return 0;
  }
  const llmc::serve::HttpRequest& req = *r;
  Check(!req.method.empty());
  for (unsigned char c : req.method) Check(IsTokenChar(c));
  Check(!req.target.empty());
  for (unsigned char c : req.target) Check(c > 0x20 && c != 0x7f);
  Check(req.path == req.target.substr(0, req.target.find('?')));
  Check(req.path.find('?') == std::string::npos);
  for (size_t i = 0; i < req.headers.size(); ++i) {
    const auto& [name, value] = req.headers[i];
    Check(!name.empty());
    for (unsigned char c : name) Check(IsTokenChar(c) && !(c >= 'A' && c <= 'Z'));
    for (unsigned char c : value) Check(c != '\r' && c != '\n' && c != '\0');
    // Header() answers the first header of each name.
    size_t first = 0;
    while (req.headers[first].first != name) ++first;
    Check(req.Header(name) == req.headers[first].second);
  }
  Check(req.body.size() <= limits.max_body_bytes);
  // The request's head and body came from the bytes.
  Check(req.method.size() + req.target.size() + req.body.size() <= size);
  // The same bytes parse the same way.
  auto again = llmc::serve::ParseHttpRequest(bytes, limits);
  Check(again.ok() && again->target == req.target && again->body == req.body &&
        again->headers == req.headers && again->keep_alive == req.keep_alive);
  return 0;
}
