#include "llmc/runtime/serve/http_server.h"

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <nlohmann/json.hpp>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace llmc::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using beast::error_code;
using Parser = http::request_parser<http::string_body>;

// One parser configuration for the server and ParseHttpRequest.
void ConfigureParser(Parser& parser, const HttpLimits& limits) {
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
}

HttpRequest ToRequest(http::request<http::string_body>&& msg) {
  HttpRequest r;
  r.method = std::string(msg.method_string());
  r.target = std::string(msg.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& field : msg) {
    std::string name(field.name_string());
    absl::AsciiStrToLower(&name);
    r.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  r.keep_alive = msg.keep_alive();
  r.body = std::move(msg.body());
  return r;
}

bool IsParseError(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message &&
         ec != http::error::need_more;
}

// The status for a request the parser refused.
absl::Status ParseFailure(const error_code& ec) {
  if (ec == http::error::header_limit)
    return absl::OutOfRangeError("request headers are larger than the server accepts");
  if (ec == http::error::body_limit)
    return absl::ResourceExhaustedError("request body is larger than the server accepts");
  if (ec == http::error::need_more || ec == http::error::partial_message ||
      ec == http::error::end_of_stream)
    return absl::UnavailableError("the request is incomplete");
  return absl::InvalidArgumentError(absl::StrFormat("malformed HTTP request: %s", ec.message()));
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOutOfRange: return 431;
    case absl::StatusCode::kResourceExhausted: return 413;
    default: return 400;
  }
}

template <class Body>
std::string Serialize(http::response<Body>& res, bool header_only) {
  http::response_serializer<Body> sr{res};
  sr.split(header_only);
  std::string out;
  error_code ec;
  do {
    sr.next(ec, [&](error_code& wec, const auto& buffers) {
      wec = {};
      size_t n = 0;
      for (auto b : beast::buffers_range_ref(buffers)) {
        out.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      sr.consume(n);
    });
  } while (!ec && !(header_only ? sr.is_header_done() : sr.is_done()));
  return out;
}

template <class Body>
void SetCommon(http::response<Body>& res, const std::string& content_type,
               const HttpHeaders& headers, bool keep_alive) {
  res.set(http::field::server, "llmc");
  res.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) res.set(name, value);
  res.keep_alive(keep_alive);
}

// The OpenAI-style error body for a request the parser refused.
std::string ErrorJson(const absl::Status& status) {
  nlohmann::json err = {{"message", std::string(status.message())},
                        {"type", "invalid_request_error"},
                        {"param", nullptr},
                        {"code", nullptr}};
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return {};
}

absl::StatusOr<HttpRequest> ParseHttpRequest(std::string_view bytes, const HttpLimits& limits) {
  Parser parser;
  ConfigureParser(parser, limits);
  parser.eager(true);
  while (!parser.is_done()) {
    error_code ec;
    const size_t used = parser.put(net::const_buffer(bytes.data(), bytes.size()), ec);
    if (ec) return ParseFailure(ec);
    if (used == 0) return ParseFailure(http::error::need_more);
    bytes.remove_prefix(used);
  }
  return ToRequest(parser.release());
}

namespace {
// What Stop() needs of a connection, declared before State holds them.
class Closable {
 public:
  virtual ~Closable() = default;
  // Closes the connection on its strand (a request in flight is cancelled).
  virtual void PostClose() = 0;
};
}  // namespace

struct HttpServer::State {
  State(const HttpLimits& l, HttpHandler h)
      : limits(l),
        handler(std::move(h)),
        acceptor(net::make_strand(ioc)),
        work(net::make_work_guard(ioc)) {}

  net::io_context ioc;
  HttpLimits limits;
  HttpHandler handler;
  tcp::acceptor acceptor;
  net::executor_work_guard<net::io_context::executor_type> work;
  std::vector<std::thread> threads;
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> exchanges{0};
  std::atomic<int> running_threads{0};
  std::atomic<bool> stopped{false};
  int port = 0;

  // Every connection, for Stop(); expired ones are pruned as it grows.
  std::mutex mu;
  std::vector<std::weak_ptr<Closable>> open;
  void Register(std::weak_ptr<Closable> c) {
    std::lock_guard<std::mutex> lock(mu);
    if (open.size() >= 64 && open.size() == open.capacity())
      std::erase_if(open, [](const std::weak_ptr<Closable>& w) { return w.expired(); });
    open.push_back(std::move(c));
  }
};

namespace {

class Connection;

class Exchange final : public HttpExchange, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Connection> conn, HttpRequest request)
      : conn_(std::move(conn)), request_(std::move(request)) {}
  const HttpRequest& request() const override { return request_; }
  void Respond(HttpResponse response) override;
  void BeginStream(int status, std::string content_type, HttpHeaders headers) override;
  void Write(std::string data) override;
  void EndStream() override;
  void Post(std::function<void()> fn) override;
  void OnCancel(std::function<void()> fn) override;

  // Strand state, owned by the connection.
  std::function<void()> cancel;
  bool ended = false;      // the last byte of the response is queued
  bool streaming = false;  // BeginStream ran
  bool gone = false;       // the client went away before the end

 private:
  std::shared_ptr<Connection> conn_;
  HttpRequest request_;
};

class Connection : public Closable, public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<HttpServer::State> state)
      : stream_(std::move(socket)), state_(std::move(state)) {
    ++state_->connections;
  }
  ~Connection() { --state_->connections; }

  void Start() {
    state_->Register(shared_from_this());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadRequest(); });
  }
  void PostClose() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }
  auto executor() { return stream_.get_executor(); }

  // Strand only, from here on.
  void Respond(Exchange& ex, HttpResponse r) {
    if (!Current(ex) || ex.ended || ex.streaming) return;
    ex.ended = true;
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    SetCommon(res, r.content_type, r.headers, keep_alive_);
    res.body() = std::move(r.body);
    res.prepare_payload();
    Queue(Serialize(res, /*header_only=*/false), /*last=*/true);
  }

  void BeginStream(Exchange& ex, int status, const std::string& content_type,
                   const HttpHeaders& headers) {
    if (!Current(ex) || ex.ended || ex.streaming) return;
    ex.streaming = true;
    http::response<http::empty_body> res{static_cast<http::status>(status), 11};
    SetCommon(res, content_type, headers, keep_alive_);
    res.set(http::field::cache_control, "no-cache");
    res.chunked(true);
    Queue(Serialize(res, /*header_only=*/true), /*last=*/false);
  }

  void Write(Exchange& ex, const std::string& data) {
    // An empty chunk would end the body.
    if (!Current(ex) || ex.ended || !ex.streaming || data.empty()) return;
    Queue(beast::buffers_to_string(http::make_chunk(net::const_buffer(data.data(), data.size()))),
          /*last=*/false);
  }

  void EndStream(Exchange& ex) {
    if (!Current(ex) || ex.ended || !ex.streaming) return;
    ex.ended = true;
    Queue(beast::buffers_to_string(http::make_chunk_last()), /*last=*/true);
  }

  void SetCancel(Exchange& ex, std::function<void()> fn) {
    if (ex.gone) {
      fn();
    } else if (!ex.ended) {
      ex.cancel = std::move(fn);
    }
  }

 private:
  bool Current(const Exchange& ex) const { return !closed_ && exchange_.get() == &ex; }

  void ReadRequest() {
    if (closed_) return;
    parser_.emplace();
    ConfigureParser(*parser_, state_->limits);
    stream_.expires_after(state_->limits.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    if (ec) {
      if (IsParseError(ec)) {
        // Answer what was wrong, then close: the stream cannot be trusted.
        const absl::Status why = ParseFailure(ec);
        keep_alive_ = false;
        http::response<http::string_body> res{static_cast<http::status>(HttpStatusOf(why)), 11};
        SetCommon(res, "application/json", {}, false);
        res.body() = ErrorJson(why);
        res.prepare_payload();
        Queue(Serialize(res, false), /*last=*/true);
      } else {
        Close();  // end of stream, timeout, reset
      }
      return;
    }
    stream_.expires_never();
    HttpRequest request = ToRequest(parser_->release());
    parser_.reset();
    keep_alive_ = request.keep_alive;
    exchange_ = std::make_shared<Exchange>(shared_from_this(), std::move(request));
    ++state_->exchanges;  // until FinishExchange or Close drops it
    Watch();
    state_->handler(exchange_);
  }

  // A read kept pending while an exchange is open: it completes when the
  // client disconnects (or pipelines its next request, which is kept).
  void Watch() {
    watching_ = true;
    stream_.async_read_some(net::buffer(watch_buf_),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->OnWatch(ec, n);
                            });
  }

  void OnWatch(error_code ec, size_t n) {
    watching_ = false;
    if (!ec) {
      auto dst = buffer_.prepare(n);
      net::buffer_copy(dst, net::buffer(watch_buf_, n));
      buffer_.commit(n);
      if (buffer_.size() > state_->limits.max_header_bytes + state_->limits.max_body_bytes) {
        Close();
        return;
      }
      if (read_next_) {  // the exchange ended as these bytes came: they start the next one
        read_next_ = false;
        ReadRequest();
      } else {
        Watch();
      }
      return;
    }
    if (ec == net::error::operation_aborted && read_next_) {
      read_next_ = false;
      ReadRequest();
      return;
    }
    if (ec == net::error::eof) {
      Hangup();
    } else {
      Close();
    }
  }

  // The client ended its side (it went away, or half-closed): its request
  // is cancelled, but what was queued for it before (a finish the server
  // already counted) still goes out, then the connection closes. Without
  // the flush a client starved of its reads lost a finished answer's last
  // events while /metrics counted it finished by length.
  void Hangup() {
    if (!writing_ && out_.empty()) {
      Close();
      return;
    }
    keep_alive_ = false;
    close_after_write_ = true;
    DropExchange();  // nothing more is queued for it
  }

  void Queue(std::string bytes, bool last) {
    out_.push_back(std::move(bytes));
    if (last) end_after_write_ = true;
    DoWrite();
  }

  void DoWrite() {
    if (writing_ || out_.empty() || closed_) return;
    writing_ = true;
    // Everything queued goes out in one write (many SSE events of one step).
    writing_buf_.clear();
    for (std::string& s : out_) writing_buf_ += s;
    out_.clear();
    stream_.expires_after(state_->limits.write_timeout);
    net::async_write(stream_, net::buffer(writing_buf_),
                     [self = shared_from_this()](error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(error_code ec) {
    writing_ = false;
    if (ec) {
      Close();
      return;
    }
    if (!out_.empty()) {
      DoWrite();
    } else if (close_after_write_) {
      Close();
    } else if (end_after_write_) {
      FinishExchange();
    }
  }

  void FinishExchange() {
    end_after_write_ = false;
    if (exchange_) {
      exchange_->cancel = nullptr;
      --state_->exchanges;
    }
    exchange_.reset();
    if (!keep_alive_) {
      error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      Close();
      return;
    }
    if (watching_) {
      read_next_ = true;
      error_code ignored;
      stream_.socket().cancel(ignored);  // OnWatch then reads the next request
    } else {
      ReadRequest();
    }
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    DropExchange();
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  // Detaches the open exchange; one not ended is cancelled (its client is
  // gone).
  void DropExchange() {
    if (exchange_) {
      // Taken out either way: the callback holds its handler's state, which
      // holds the exchange (a cycle if it stayed).
      std::function<void()> cancel = std::move(exchange_->cancel);
      exchange_->cancel = nullptr;
      if (!exchange_->ended) {
        exchange_->gone = true;
        if (cancel) cancel();
      }
      --state_->exchanges;
    }
    exchange_.reset();  // it holds this connection: break the cycle
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::State> state_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::shared_ptr<Exchange> exchange_;
  std::deque<std::string> out_;
  std::string writing_buf_;
  char watch_buf_[1024];
  bool keep_alive_ = true;
  bool writing_ = false;
  bool watching_ = false;
  bool read_next_ = false;
  bool end_after_write_ = false;
  bool close_after_write_ = false;  // Hangup: flush, then close
  bool closed_ = false;
};

// The answer's bytes are dispatched: on the connection's strand (a job's
// Drain) they are queued at once, so what a handler counted before the
// client hung up is queued before that hang-up is seen (and flushed by
// it); from another thread they are posted.
void Exchange::Respond(HttpResponse response) {
  net::dispatch(conn_->executor(), [self = shared_from_this(), r = std::move(response)]() mutable {
    self->conn_->Respond(*self, std::move(r));
  });
}

void Exchange::BeginStream(int status, std::string content_type, HttpHeaders headers) {
  net::dispatch(conn_->executor(), [self = shared_from_this(), status, ct = std::move(content_type),
                                h = std::move(headers)] {
    self->conn_->BeginStream(*self, status, ct, h);
  });
}

void Exchange::Write(std::string data) {
  net::dispatch(conn_->executor(),
            [self = shared_from_this(), d = std::move(data)] { self->conn_->Write(*self, d); });
}

void Exchange::EndStream() {
  net::dispatch(conn_->executor(), [self = shared_from_this()] { self->conn_->EndStream(*self); });
}

void Exchange::Post(std::function<void()> fn) {
  net::post(conn_->executor(), [self = shared_from_this(), f = std::move(fn)] { f(); });
}

void Exchange::OnCancel(std::function<void()> fn) {
  net::post(conn_->executor(), [self = shared_from_this(), f = std::move(fn)]() mutable {
    self->conn_->SetCancel(*self, std::move(f));
  });
}

void Accept(const std::shared_ptr<HttpServer::State>& st) {
  st->acceptor.async_accept(net::make_strand(st->ioc), [st](error_code ec, tcp::socket socket) {
    if (!st->acceptor.is_open()) return;  // StopAccepting
    if (ec) {
      // Out of descriptors or similar: wait a little rather than spin.
      auto timer = std::make_shared<net::steady_timer>(st->acceptor.get_executor(),
                                                        std::chrono::milliseconds(50));
      timer->async_wait([st, timer](error_code) { Accept(st); });
      return;
    }
    std::make_shared<Connection>(std::move(socket), st)->Start();
    Accept(st);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                              int threads,
                                                              const HttpLimits& limits,
                                                              HttpHandler handler) {
  if (threads < 1)
    return absl::InvalidArgumentError(absl::StrFormat("HTTP threads must be >= 1, got %d", threads));
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrFormat("port must be in [0, 65535], got %d", port));
  auto st = std::make_shared<State>(limits, std::move(handler));
  error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrFormat("bad --host '%s': %s", host, ec.message()));
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto fail = [&](const char* what) {
    return absl::UnavailableError(
        absl::StrFormat("cannot %s %s:%d: %s", what, host, port, ec.message()));
  };
  st->acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open a socket for");
  st->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return fail("configure");
  st->acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  st->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  st->port = st->acceptor.local_endpoint().port();
  Accept(st);
  for (int i = 0; i < threads; ++i) {
    ++st->running_threads;
    st->threads.emplace_back([raw = st.get()] {
      raw->ioc.run();
      --raw->running_threads;
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(st)));
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return state_->port; }

void HttpServer::StopAccepting() {
  net::post(state_->acceptor.get_executor(), [st = state_] {
    error_code ignored;
    st->acceptor.close(ignored);
  });
}

int64_t HttpServer::open_connections() const { return state_->connections.load(); }

int64_t HttpServer::open_exchanges() const { return state_->exchanges.load(); }

void HttpServer::Stop() {
  if (state_->stopped.exchange(true)) return;
  StopAccepting();
  std::vector<std::weak_ptr<Closable>> open;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    open.swap(state_->open);
  }
  for (auto& weak : open)
    if (auto c = weak.lock()) c->PostClose();
  // With every socket closed the pending operations complete (aborted) and
  // release their connections; run() returns once nothing is left. A
  // handler that does not finish within a second is cut short.
  state_->work.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (state_->running_threads > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  state_->ioc.stop();
  for (std::thread& t : state_->threads) t.join();
  state_->threads.clear();
}

}  // namespace llmc::serve
