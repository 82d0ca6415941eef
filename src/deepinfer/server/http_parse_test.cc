#include "deepinfer/server/http_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer::server {
namespace {

const HttpLimits kLimits{1024, 256, 4096};

TEST(ParsePipelined, ThreeRequestsInOneBufferComeOutInOrder) {
  const std::string bytes =
      "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
      "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n"
      "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  auto rs = parse_pipelined(bytes, kLimits);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].method, "POST");
  EXPECT_EQ(rs[0].body, "hello");
  EXPECT_EQ(rs[1].target, "/v1/models");
  EXPECT_EQ(rs[2].target, "/health");
  EXPECT_FALSE(rs[2].keep_alive);
  for (const auto& r : rs) EXPECT_FALSE(r.error.has_value());
}

TEST(ParsePipelined, LongRequestLineIs414AndLongFieldsAre431) {
  auto url = parse_pipelined("GET /" + std::string(2000, 'a') + " HTTP/1.1\r\n\r\n", kLimits);
  ASSERT_EQ(url.size(), 1u);
  ASSERT_TRUE(url[0].error.has_value());
  EXPECT_EQ(url[0].error->http_status, 414);
  // Within the header limit but over the URL limit: also 414.
  auto target = parse_pipelined("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n", kLimits);
  ASSERT_TRUE(target[0].error.has_value());
  EXPECT_EQ(target[0].error->http_status, 414);
  // Still unfinished but already over the header limit: refused without waiting for more.
  auto unfinished = parse_pipelined("GET /" + std::string(2000, 'a'), kLimits);
  ASSERT_EQ(unfinished.size(), 1u);
  ASSERT_TRUE(unfinished[0].error.has_value());
  EXPECT_EQ(unfinished[0].error->http_status, 414);
  auto unfinished_fields =
      parse_pipelined("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'b'), kLimits);
  ASSERT_EQ(unfinished_fields.size(), 1u);
  ASSERT_TRUE(unfinished_fields[0].error.has_value());
  EXPECT_EQ(unfinished_fields[0].error->http_status, 431);
  auto fields = parse_pipelined(
      "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(2000, 'b') + "\r\n\r\n", kLimits);
  ASSERT_TRUE(fields[0].error.has_value());
  EXPECT_EQ(fields[0].error->http_status, 431);
}

TEST(ParsePipelined, MalformedRequestLinesAre400) {
  for (std::string bytes : {"GARBAGE\r\n\r\n", "GET / HTTP/9.9x\r\n\r\n", "G@T / HTTP/1.1\r\n\r\n",
                            "GET / HTTP/1.1\r\nBad Field\r\n\r\n"}) {
    auto rs = parse_pipelined(bytes, kLimits);
    ASSERT_EQ(rs.size(), 1u) << bytes;
    ASSERT_TRUE(rs[0].error.has_value()) << bytes;
    EXPECT_EQ(rs[0].error->http_status, 400) << bytes;
  }
}

TEST(ParsePipelined, BodyOverTheLimitIs413) {
  auto rs = parse_pipelined("POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", kLimits);
  ASSERT_EQ(rs.size(), 1u);
  ASSERT_TRUE(rs[0].error.has_value());
  EXPECT_EQ(rs[0].error->http_status, 413);
}

TEST(ParsePipelined, AnIncompleteRequestWaitsForMoreBytes) {
  EXPECT_TRUE(parse_pipelined("GET /health HTTP/1.1\r\nHo", kLimits).empty());
  EXPECT_TRUE(parse_pipelined("POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nabc", kLimits).empty());
}

TEST(HeadError, PeerLeavingIsNoAnswer) {
  EXPECT_FALSE(head_error(boost::beast::http::error::end_of_stream, false, kLimits).has_value());
  EXPECT_FALSE(head_error(boost::asio::error::connection_reset, true, kLimits).has_value());
}

}  // namespace
}  // namespace deepinfer::server
