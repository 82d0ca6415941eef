// bench serve's pieces: HTTP response framing (Content-Length, chunked as peers send it, until
// close as our SSE responses are), SSE lines, the statistics (numpy's percentile definition,
// TPOT, goodput), Poisson arrivals, the datasets, and one request against a loopback socket that
// answers like a chunked OpenAI stream.
#include "deepinfer/cli/serve_bench/serve_bench.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <thread>

#include "deepinfer/cli/serve_bench/sse.h"

namespace deepinfer::cli::serve_bench {
namespace {

std::string read_all(std::string_view response, size_t step, Status* finish_status = nullptr,
                     int* status = nullptr) {
  std::string body;
  ResponseReader r([&](std::string_view b) { body.append(b); });
  for (size_t at = 0; at < response.size(); at += step) {
    Status st = r.feed(response.substr(at, step));
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  Status fin = r.done() ? Status() : r.finish();
  if (finish_status) *finish_status = fin;
  if (status) *status = r.status();
  return body;
}

TEST(ServeBenchHttp, ChunkedContentLengthAndUntilCloseBodiesDecodeAtAnySplit) {
  const std::string chunked =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n1a;ext=1\r\n, a chunked body: 26 bytes\r\n0\r\nX-Trailer: 1\r\n\r\n";
  const std::string length = "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope";
  const std::string close = "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\ndata: x\n\n";
  for (size_t step : {size_t{1}, size_t{3}, size_t{1000}}) {
    int status = 0;
    EXPECT_EQ(read_all(chunked, step, nullptr, &status), "hello, a chunked body: 26 bytes");
    EXPECT_EQ(status, 200);
    EXPECT_EQ(read_all(length, step, nullptr, &status), "nope");
    EXPECT_EQ(status, 404);
    EXPECT_EQ(read_all(close, step), "data: x\n\n");
  }
}

TEST(ServeBenchHttp, TruncatedAndMalformedResponsesAreErrors) {
  Status fin;
  read_all("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 4, &fin);
  EXPECT_FALSE(fin.ok());
  read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 4, &fin);
  EXPECT_FALSE(fin.ok());
  ResponseReader bad_size([](std::string_view) {});
  EXPECT_FALSE(bad_size.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").ok());
  ResponseReader bad_status([](std::string_view) {});
  EXPECT_FALSE(bad_status.feed("SMTP ready\r\n\r\n").ok());
}

TEST(ServeBenchHttp, BaseUrlsParseAndBadOnesNameTheUrl) {
  auto u = parse_base_url("http://127.0.0.1:8000/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->prefix, "");
  auto p = parse_base_url("http://example.org/api/");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->port, 80);
  EXPECT_EQ(p->prefix, "/api");
  for (const char* bad : {"https://x", "http://:80", "http://h:0", "http://h:99999", "ftp://h"}) {
    auto b = parse_base_url(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find(bad), std::string::npos) << b.status().message();
  }
}

TEST(ServeBenchSse, DataLinesAcrossFeedsAndAtTheEnd) {
  std::vector<std::string> got;
  SseSplitter s([&](std::string_view d) { got.emplace_back(d); });
  s.feed(": comment\r\ndata: {\"a\"");
  s.feed(":1}\r\n\r\nevent: x\ndata:[DONE]\n");
  s.feed("data: tail");
  s.finish();
  EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "[DONE]", "tail"}));
}

TEST(ServeBenchStats, PercentilesFollowNumpysLinearDefinition) {
  // numpy.percentile([1, 2, 3, 4], 50) = 2.5; of 1..10 at 90: 9.1; at 0 and 100 the ends.
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_NEAR(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90), 9.1, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({5, 7}, 0), 5);
  EXPECT_DOUBLE_EQ(percentile({5, 7}, 100), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(ServeBenchStats, TpotThroughputsAndGoodputFromRecords) {
  std::vector<RequestRecord> r(3);
  // 10 tokens in 1.0 s with the first at 0.1 s: TPOT (1.0 - 0.1) / 9 = 0.1 s.
  r[0] = {true, "", 100, 10, 64, 0.1, 1.0, {0.1, 0.1}};
  // 2 tokens, first at 0.5 s, done at 0.7 s: TPOT 0.2 s.
  r[1] = {true, "", 50, 2, 0, 0.5, 0.7, {0.2}};
  r[2].error = "HTTP 500: boom";
  EXPECT_NEAR(tpot_s(r[0]), 0.1, 1e-12);
  EXPECT_NEAR(tpot_s(r[1]), 0.2, 1e-12);
  auto slo = parse_goodput({"ttft:300", "tpot:150"});
  ASSERT_TRUE(slo.ok());
  const Summary s = summarize(r, 2.0, *slo, {50});
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.first_error, "HTTP 500: boom");
  EXPECT_EQ(s.input_tokens, 150);
  EXPECT_EQ(s.output_tokens, 12);
  EXPECT_EQ(s.cached_tokens, 64);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 6.0);
  EXPECT_DOUBLE_EQ(s.total_throughput, 81.0);
  ASSERT_TRUE(s.goodput.has_value());
  EXPECT_DOUBLE_EQ(*s.goodput, 0.5);  // only the first meets both SLOs
  EXPECT_NEAR(s.ttft_ms.mean, 300.0, 1e-9);
  EXPECT_NEAR(s.itl_ms.percentiles.at(50), 100.0, 1e-9);  // {100, 100, 200}
  for (const char* bad : {"ttft", "ttft:", "ttft:-1", "speed:5"})
    EXPECT_FALSE(parse_goodput({bad}).ok()) << bad;
}

TEST(ServeBenchArrivals, AllAtOnceOrPoissonWithTheRatesMean) {
  for (double t : arrival_times(5, std::numeric_limits<double>::infinity(), 1)) EXPECT_EQ(t, 0);
  const int n = 20000;
  const auto a = arrival_times(n, 10.0, 7);
  for (int i = 1; i < n; ++i) ASSERT_GT(a[i], a[i - 1]);
  // Exponential gaps of mean 1/10 s: the mean of 20000 has a standard error of 0.1/sqrt(20000).
  EXPECT_NEAR(a.back() / n, 0.1, 5 * 0.1 / std::sqrt(double(n)));
}

const tokenizer::Tokenizer& tok() {
  static auto t = tokenizer::Tokenizer::from_file(std::string(DEEPINFER_SOURCE_DIR) +
                                                  "/assets/tokenizers/deepseek_v3/tokenizer.json");
  return **t;
}

TEST(ServeBenchDatasets, RandomLengthsStayInRangeAndSharedPrefixesRepeat) {
  DatasetOptions o;
  o.num_prompts = 12;
  o.input_len = 40;
  o.output_len = 20;
  o.range_ratio = 0.5;
  auto r = make_requests(o, tok());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 12u);
  for (const auto& q : *r) {
    EXPECT_GE(q.max_tokens, 10);
    EXPECT_LE(q.max_tokens, 30);
    EXPECT_GT(q.input_tokens, 0);
  }
  o.name = "shared-prefix";
  o.prefix_len = 64;
  o.num_prefixes = 3;
  o.range_ratio = 0;
  auto s = make_requests(o, tok());
  ASSERT_TRUE(s.ok());
  auto common = [](const std::string& a, const std::string& b) {
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    return k;
  };
  // Requests 0 and 3 share prefix 0 (64 tokens of text); 0 and 1 start differently.
  EXPECT_GE(common((*s)[0].prompt, (*s)[3].prompt), 64u);
  EXPECT_LT(common((*s)[0].prompt, (*s)[1].prompt), common((*s)[0].prompt, (*s)[3].prompt));
}

TEST(ServeBenchDatasets, BadFlagsAndJsonlLinesAreNamed) {
  DatasetOptions o;
  o.name = "sharegpt";
  auto a = make_requests(o, tok());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--dataset-name"), std::string::npos);
  const std::string path = ::testing::TempDir() + "serve_bench_test.jsonl";
  std::ofstream(path) << "{\"prompt\": \"hi\", \"max_tokens\": 3}\n\n{\"text\": 1}\n";
  o.name = "jsonl";
  o.path = path;
  auto b = make_requests(o, tok());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(path + ":3"), std::string::npos) << b.status().message();
  std::ofstream(path) << "{\"prompt\": \"hi\", \"max_tokens\": 3}\n"
                         "{\"messages\": [{\"role\": \"user\", \"content\": \"yo\"}]}\n";
  auto c = make_requests(o, tok());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0].max_tokens, 3);
  EXPECT_TRUE((*c)[1].messages.has_value());
}

// A loopback socket answering one request with a chunked SSE stream, as vLLM's server does.
TEST(ServeBenchRequest, TimesAChunkedStreamAndReadsItsUsage) {
  const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ASSERT_EQ(::listen(ls, 1), 0);
  std::string received;
  std::thread server([&] {
    const int c = ::accept(ls, nullptr, nullptr);
    char buf[4096];
    while (received.find("\r\n\r\n") == std::string::npos ||
           received.size() < received.find("\r\n\r\n") + 4 + 10) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      received.append(buf, size_t(n));
    }
    auto chunk = [&](const std::string& s) {
      char h[16];
      std::snprintf(h, sizeof h, "%zx\r\n", s.size());
      const std::string out = h + s + "\r\n";
      (void)!::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    (void)!::send(c, head.data(), head.size(), MSG_NOSIGNAL);
    chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
    chunk("data: {\"choices\":[{\"text\":\"b\"}]}\n\ndata: {\"choices\":[{\"text\":\"c\"}]}\n\n");
    chunk(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,"
        "\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n");
    chunk("");
    ::close(c);
  });
  BaseUrl base;
  base.host = "127.0.0.1";
  base.port = ntohs(addr.sin_port);
  ServeBenchOptions o;
  BenchRequest q;
  q.prompt = "hello";
  q.max_tokens = 3;
  const RequestRecord r = send_one(base, o, request_body(o, "m", q));
  server.join();
  ::close(ls);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.prompt_tokens, 7);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.cached_tokens, 4);
  EXPECT_GT(r.ttft_s, 0);
  EXPECT_EQ(r.itl_s.size(), 2u);  // three content chunks
  EXPECT_GE(r.e2el_s, r.ttft_s);
  EXPECT_NE(received.find("POST /v1/completions HTTP/1.1"), std::string::npos) << received;
  EXPECT_NE(received.find("\"stream\":true"), std::string::npos) << received;
  EXPECT_NE(received.find("\"include_usage\":true"), std::string::npos) << received;
}

}  // namespace
}  // namespace deepinfer::cli::serve_bench
