// A client that goes away while its response is still queued: the server
// cancels the exchange, writes what it had queued before (a client that
// only half-closed reads it), then closes. The serve e2e's cancel case
// counted a request finished by length whose last events the server had
// dropped on the hang-up (CI, under the sanitizers).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "llmc/runtime/serve/http_server.h"

namespace llmc::serve {
namespace {

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += size_t(n);
  }
  return true;
}

template <class Pred>
bool WaitFor(Pred pred) {
  for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return pred();
}

// 32 MiB: far more than loopback's socket buffers hold, so most of it is
// still in the server's queue when the client hangs up.
constexpr size_t kChunk = size_t(1) << 20, kChunks = 32;

struct StreamingServer {
  std::atomic<bool> cancelled{false};
  std::promise<void> queued;
  std::unique_ptr<HttpServer> server;

  StreamingServer() {
    auto started = HttpServer::Start(
        "127.0.0.1", 0, 1, HttpLimits{}, [this](std::shared_ptr<HttpExchange> ex) {
          ex->OnCancel([this] { cancelled = true; });
          ex->BeginStream(200, "text/plain", {});
          for (size_t i = 0; i < kChunks; ++i) ex->Write(std::string(kChunk, char('a' + i % 26)));
          ex->Post([this] { queued.set_value(); });  // after the writes: all queued
        });
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) server = std::move(*started);
  }
};

// Connects, asks for the stream and waits until all of it is queued; -1 on
// failure.
int RequestAndWaitQueued(StreamingServer& s) {
  if (!s.server) return -1;
  int fd = Connect(s.server->port());
  if (fd < 0 || !SendAll(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n") ||
      s.queued.get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    return -1;
  return fd;
}

TEST(HttpServerHangup, WhatWasQueuedStillGoesOutAfterAHalfClose) {
  StreamingServer s;
  int fd = RequestAndWaitQueued(s);
  ASSERT_GE(fd, 0);
  ::shutdown(fd, SHUT_WR);  // gone, as far as the server can tell
  size_t body = 0;
  char buf[1 << 16];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    for (ssize_t i = 0; i < n; ++i) body += buf[i] >= 'a' && buf[i] <= 'z';
  ::close(fd);
  // Every payload byte (the headers and chunk sizes are not lower-case
  // letters, bar "chunked" and such: a few dozen).
  EXPECT_GE(body, kChunks * kChunk);
  EXPECT_LT(body, kChunks * kChunk + 200);
  EXPECT_TRUE(s.cancelled) << "the exchange was not cancelled";
  EXPECT_TRUE(WaitFor([&] { return s.server->open_exchanges() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return s.server->open_connections() == 0; }));
}

TEST(HttpServerHangup, AClientThatClosesWithoutReadingIsLetGo) {
  StreamingServer s;
  int fd = RequestAndWaitQueued(s);
  ASSERT_GE(fd, 0);
  ::close(fd);  // unread bytes: the kernel resets the connection, the flush fails
  EXPECT_TRUE(WaitFor([&] { return s.cancelled.load(); }));
  EXPECT_TRUE(WaitFor([&] { return s.server->open_connections() == 0; }));
}

}  // namespace
}  // namespace llmc::serve
