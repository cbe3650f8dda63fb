// An asynchronous HTTP/1.1 server (Boost.Beast on Asio): a few I/O threads
// hold any number of idle, waiting or streaming connections; nothing here
// blocks a thread on a client.
//
// Each connection reads one request at a time (keep-alive and pipelining as
// HTTP/1.1 allows) and hands it to the handler as an HttpExchange, which the
// handler answers whole (Respond) or as a chunked stream (BeginStream, Write,
// EndStream), from any thread. While an exchange is open the connection
// keeps a read pending on the socket, so a client that goes away is noticed
// at once (not at the next write): the exchange's cancel callback runs and
// the handler can abort the work it started. What was queued for the
// client before it went away is still written (one that only half-closed
// reads it), then the connection closes.
//
// Limits: a request whose headers exceed max_header_bytes is answered 431,
// a body over max_body_bytes 413 (from Content-Length, before the body is
// read), unparsable bytes 400; a client that does not deliver a whole
// request within read_timeout (or sends nothing for that long between
// requests) is disconnected, as is one that stops reading a response for
// write_timeout.
//
// Beast stays inside http_server.cc: this header is all a handler sees.
#ifndef LLMC_RUNTIME_SERVE_HTTP_SERVER_H_
#define LLMC_RUNTIME_SERVE_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace llmc::serve {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 8 * 1024 * 1024;
  std::chrono::milliseconds read_timeout{30'000};
  std::chrono::milliseconds write_timeout{60'000};
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // target without the query
  HttpHeaders headers;  // names lower-cased
  std::string body;
  bool keep_alive = true;

  // The first header named `lower_name`; empty when absent.
  std::string_view Header(std::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;  // extra ones, e.g. Retry-After
};

// One request being answered. Every method is thread-safe and returns at
// once (the work runs on the connection's strand); calls after the exchange
// ended, or after the client went away, do nothing.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual const HttpRequest& request() const = 0;
  // The whole response; ends the exchange.
  virtual void Respond(HttpResponse response) = 0;
  // Starts a chunked response (status and headers now, body in Write calls).
  virtual void BeginStream(int status, std::string content_type, HttpHeaders headers) = 0;
  virtual void Write(std::string data) = 0;
  virtual void EndStream() = 0;
  // Runs `fn` on the connection's strand, after the calls made before it.
  virtual void Post(std::function<void()> fn) = 0;
  // `fn` runs once, on the strand, if the client disconnects (or times out)
  // before the exchange ended. Set it before starting work that needs it.
  virtual void OnCancel(std::function<void()> fn) = 0;
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;

// What the connection would make of `bytes` as one request under `limits`
// (the parser and its settings the server uses): the request, or the status
// the server would answer (InvalidArgument: 400, ResourceExhausted: 413 for
// the body, OutOfRange: 431 for the headers) with the parser's message;
// Unavailable when the bytes end before the request does. For tests and the
// fuzz target.
absl::StatusOr<HttpRequest> ParseHttpRequest(std::string_view bytes, const HttpLimits& limits);

class HttpServer {
 public:
  // Binds host:port (port 0: any free one) and starts `threads` I/O threads.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           int threads, const HttpLimits& limits,
                                                           HttpHandler handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Closes the listening socket; open connections go on.
  void StopAccepting();
  // Connections open now (idle ones included).
  int64_t open_connections() const;
  // Requests read and not yet answered to their last byte written (or cut
  // off by their client): what a graceful shutdown waits for.
  int64_t open_exchanges() const;
  // Closes every connection and joins the I/O threads. Idempotent.
  void Stop();

  struct State;

 private:
  explicit HttpServer(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_HTTP_SERVER_H_
