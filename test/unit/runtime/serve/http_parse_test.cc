// ParseHttpRequest: the server's parser and limits on whole byte strings.
#include <gtest/gtest.h>

#include <string>

#include "llmc/runtime/serve/http_server.h"

namespace llmc::serve {
namespace {

HttpLimits Limits(size_t header_bytes = 16 * 1024, size_t body_bytes = 1024 * 1024) {
  HttpLimits l;
  l.max_header_bytes = header_bytes;
  l.max_body_bytes = body_bytes;
  return l;
}

TEST(ParseHttpRequest, Get) {
  auto r = ParseHttpRequest(
      "GET /v1/models?verbose=1&x=y HTTP/1.1\r\n"
      "Host: localhost:8000\r\n"
      "User-Agent: curl/8.0\r\n"
      "X-Custom-Header: MixedCase Value\r\n"
      "\r\n",
      Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->target, "/v1/models?verbose=1&x=y");
  EXPECT_EQ(r->path, "/v1/models");
  EXPECT_TRUE(r->body.empty());
  EXPECT_TRUE(r->keep_alive);  // HTTP/1.1's default
  ASSERT_EQ(r->headers.size(), 3u);
  EXPECT_EQ(r->headers[0].first, "host");
  EXPECT_EQ(r->headers[0].second, "localhost:8000");
  EXPECT_EQ(r->headers[2].first, "x-custom-header");
  EXPECT_EQ(r->Header("user-agent"), "curl/8.0");
  EXPECT_EQ(r->Header("x-custom-header"), "MixedCase Value");  // values keep their case
  EXPECT_EQ(r->Header("absent"), "");
}

TEST(ParseHttpRequest, PostWithContentLength) {
  const std::string body = R"({"prompt": "hi", "max_tokens": 4})";
  const std::string bytes = "POST /v1/completions HTTP/1.1\r\n"
                            "Host: h\r\n"
                            "Content-Type: application/json\r\n"
                            "CONTENT-LENGTH: " + std::to_string(body.size()) + "\r\n"
                            "Connection: close\r\n"
                            "\r\n" + body;
  auto r = ParseHttpRequest(bytes, Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->path, "/v1/completions");
  EXPECT_EQ(r->target, "/v1/completions");
  EXPECT_EQ(r->body, body);
  EXPECT_FALSE(r->keep_alive);
  EXPECT_EQ(r->Header("content-type"), "application/json");
  EXPECT_EQ(r->Header("content-length"), std::to_string(body.size()));
  EXPECT_EQ(r->Header("connection"), "close");
}

TEST(ParseHttpRequest, KeepAliveByVersion) {
  auto r10 = ParseHttpRequest("GET / HTTP/1.0\r\n\r\n", Limits());
  ASSERT_TRUE(r10.ok()) << r10.status();
  EXPECT_FALSE(r10->keep_alive);
  auto r10ka = ParseHttpRequest("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", Limits());
  ASSERT_TRUE(r10ka.ok()) << r10ka.status();
  EXPECT_TRUE(r10ka->keep_alive);
  auto r11 = ParseHttpRequest("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", Limits());
  ASSERT_TRUE(r11.ok()) << r11.status();
  EXPECT_TRUE(r11->keep_alive);
  auto close = ParseHttpRequest("GET / HTTP/1.1\r\nconnection: Close\r\n\r\n", Limits());
  ASSERT_TRUE(close.ok()) << close.status();
  EXPECT_FALSE(close->keep_alive);
}

TEST(ParseHttpRequest, ChunkedBody) {
  auto r = ParseHttpRequest(
      "POST /tokenize HTTP/1.1\r\n"
      "Host: h\r\n"
      "Transfer-Encoding: chunked\r\n"
      "\r\n"
      "5\r\n{\"pro\r\n"
      "a;ext=1\r\nmpt\": \"x\"}\r\n"
      "0\r\n"
      "\r\n",
      Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/tokenize");
  EXPECT_EQ(r->body, R"({"prompt": "x"})");
  EXPECT_EQ(r->Header("transfer-encoding"), "chunked");
}

TEST(ParseHttpRequest, ExtraBytesAfterTheRequestAreLeft) {
  // A pipelined second request is not part of the first.
  auto r = ParseHttpRequest(
      "POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nokGET /b HTTP/1.1\r\n\r\n", Limits());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, "/a");
  EXPECT_EQ(r->body, "ok");
}

TEST(ParseHttpRequest, HeadersOverTheLimit) {
  const std::string big(2000, 'a');
  auto r = ParseHttpRequest("GET / HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n", Limits(1024));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  // Also while the headers are still incomplete.
  r = ParseHttpRequest("GET / HTTP/1.1\r\nX-Big: " + big, Limits(1024));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
  // The same request fits a larger limit.
  EXPECT_TRUE(ParseHttpRequest("GET / HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n", Limits(4096)).ok());
}

TEST(ParseHttpRequest, ContentLengthOverTheLimit) {
  // Refused from the header alone, before any body byte.
  auto r = ParseHttpRequest("POST /v1/completions HTTP/1.1\r\nContent-Length: 1025\r\n\r\n",
                            Limits(16 * 1024, 1024));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  r = ParseHttpRequest("POST / HTTP/1.1\r\nContent-Length: 1024\r\n\r\n" + std::string(1024, 'x'),
                       Limits(16 * 1024, 1024));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body.size(), 1024u);
}

TEST(ParseHttpRequest, ChunkedBodyOverTheLimit) {
  std::string bytes = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) bytes += "200\r\n" + std::string(0x200, 'x') + "\r\n";
  bytes += "0\r\n\r\n";
  auto r = ParseHttpRequest(bytes, Limits(16 * 1024, 1024));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
}

TEST(ParseHttpRequest, Garbage) {
  for (const char* bytes : {"\x01\x02\x03 garbage\r\n\r\n", "GET / HTTP/9.9\r\n\r\n",
                            "GET  / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
                            "POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
                            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    SCOPED_TRACE(bytes);
    auto r = ParseHttpRequest(bytes, Limits());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(ParseHttpRequest, Truncated) {
  for (const char* bytes : {"", "GET", "GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: h\r\n",
                            "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
                            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"}) {
    SCOPED_TRACE(bytes);
    auto r = ParseHttpRequest(bytes, Limits());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  }
}

}  // namespace
}  // namespace llmc::serve
