// The router's pure pieces: worker URLs, SSE event framing, what is read from a body.
#include <gtest/gtest.h>

#include "deepinfer/router/route_info.h"
#include "deepinfer/router/sse_events.h"
#include "deepinfer/router/worker_url.h"

namespace deepinfer::router {
namespace {

TEST(WorkerUrl, ParsesHostAndPortAndNamesTheUrlInErrors) {
  auto u = parse_worker_url("http://127.0.0.1:8001/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8001);
  EXPECT_EQ(u->text, "http://127.0.0.1:8001");
  EXPECT_EQ(parse_worker_url("http://worker")->port, 80);
  EXPECT_EQ(parse_worker_url("http://[::1]:9")->host, "::1");
  for (const char* bad :
       {"https://a:1", "a:1", "http://:80", "http://a:0", "http://a:x", "http://a:1/v1"}) {
    auto r = parse_worker_url(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(SseEventBuffer, ReleasesWholeEventsOnlyAndSeesDone) {
  SseEventBuffer b;
  b.feed("data: {\"a\":1}\n\ndata: {\"b\"");
  EXPECT_EQ(b.take_complete(), "data: {\"a\":1}\n\n");
  EXPECT_TRUE(b.has_partial());
  b.feed(":2}\n");
  EXPECT_EQ(b.take_complete(), "");
  b.feed("\r\ndata: [DONE]");
  EXPECT_FALSE(b.saw_done());  // the line is not over yet
  EXPECT_EQ(b.take_complete(), "data: {\"b\":2}\n\r\n");
  b.feed("\n\n");
  EXPECT_TRUE(b.saw_done());
  EXPECT_EQ(b.take_complete(), "data: [DONE]\n\n");
  EXPECT_FALSE(b.has_partial());
}

TEST(SseEventBuffer, ErrorEventsEndTheStreamAsTheServerDoes) {
  std::string e = sse_error_events("worker http://w:1 failed", "worker_failed");
  EXPECT_EQ(e,
            "data: {\"error\":{\"code\":\"worker_failed\",\"message\":\"worker http://w:1 "
            "failed\",\"param\":null,\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n");
}

TEST(RouteInfo, ChatTextIsTheMessagesAndCompletionsThePrompt) {
  auto chat = route_info(R"({"stream": true, "messages": [{"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "hi"}]}]})");
  EXPECT_TRUE(chat.stream);
  EXPECT_EQ(chat.text, "system\nbe brief\nuser\nhi\n");
  EXPECT_EQ(route_info(R"({"prompt": "Hello"})").text, "Hello");
  EXPECT_FALSE(route_info(R"({"prompt": "Hello"})").stream);
  EXPECT_EQ(route_info(R"({"prompt": [1, 2, 3]})").text, "1,2,3,");
  EXPECT_EQ(route_info(R"({"prompt": ["first", "second"]})").text, "first");
}

TEST(RouteInfo, AnUnreadableBodyRoutesByItsBytes) {
  EXPECT_EQ(route_info("{not json").text, "{not json");
  std::string deep(600, '[');
  EXPECT_EQ(route_info(deep).text, deep);  // never handed to the recursive parser
  EXPECT_FALSE(route_info(R"({"stream": "yes"})").stream);
}

}  // namespace
}  // namespace deepinfer::router
