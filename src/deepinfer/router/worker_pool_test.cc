// The worker list's registration rules, the /load, registration and handoff bodies, and the
// latency quantiles, by hand-derived expectations.
#include "deepinfer/router/worker_pool.h"

#include <gtest/gtest.h>

#include "deepinfer/router/load_report.h"
#include "deepinfer/router/pd_forward.h"
#include "deepinfer/router/registration.h"
#include "deepinfer/router/router_metrics.h"

namespace deepinfer::router {
namespace {

WorkerUrl url(const std::string& s) { return *parse_worker_url(s); }

TEST(WorkerPool, RegisteredWorkersJoinHeartbeatLeaveAndExpire) {
  WorkerPool pool("decode", {url("http://127.0.0.1:1")}, make_round_robin_policy());
  auto t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  EXPECT_TRUE(pool.join(url("http://127.0.0.1:2/"), 6, at(0)));
  EXPECT_EQ(pool.size(), 2u);
  EXPECT_FALSE(pool.join(url("http://127.0.0.1:2"), 6, at(2)));  // a heartbeat: expires at 8
  EXPECT_FALSE(pool.join(url("http://127.0.0.1:1"), 6, at(2)));  // static: unchanged
  EXPECT_FALSE(pool[0].registered);
  EXPECT_EQ(pool.joins, 1u);
  EXPECT_EQ(pool.expire(at(7.9)), 0u);
  EXPECT_EQ(pool.expire(at(8.0)), 1u);
  EXPECT_FALSE(pool[1].present);
  EXPECT_EQ(pool.num_healthy(), 1u);
  // Unavailable to the policy while gone: round robin only ever finds worker 0.
  EXPECT_EQ(pool.pick("", {})->worker, 0u);
  EXPECT_EQ(pool.pick("", {})->worker, 0u);
  // Back in the same slot; then it leaves.
  EXPECT_TRUE(pool.join(url("http://127.0.0.1:2"), 1, at(9)));
  EXPECT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool.joins, 2u);
  EXPECT_EQ(pool.pick("", {})->worker, 1u);
  EXPECT_TRUE(pool.leave(url("http://127.0.0.1:2")));
  EXPECT_EQ(pool.leaves, 1u);
  EXPECT_EQ(pool.expire(at(100)), 0u);  // gone already: no expiry counted
  EXPECT_EQ(pool.expiries, 1u);
  // A static worker that says it is leaving is ejected, not dropped: checks readmit it.
  EXPECT_TRUE(pool.leave(url("http://127.0.0.1:1")));
  EXPECT_TRUE(pool[0].present);
  EXPECT_FALSE(pool[0].healthy);
  EXPECT_FALSE(pool.pick("", {}).has_value());
  EXPECT_FALSE(pool.leave(url("http://127.0.0.1:3")));
}

TEST(LoadReport, ReadsTheFourFieldsAndNamesABadOne) {
  WorkerLoad w;
  ASSERT_TRUE(
      parse_load_report(
          R"({"role":"decode","num_running":3,"num_waiting":1,"kv_usage":0.25,"max_num_seqs":64})",
          w)
          .ok());
  EXPECT_TRUE(w.load_known);
  EXPECT_EQ(w.num_running, 3);
  EXPECT_EQ(w.num_waiting, 1);
  EXPECT_DOUBLE_EQ(w.kv_usage, 0.25);
  EXPECT_EQ(w.max_num_seqs, 64);
  auto bad =
      parse_load_report(R"({"num_running":3,"num_waiting":1,"kv_usage":1.5,"max_num_seqs":64})", w);
  EXPECT_NE(bad.message().find("'kv_usage'"), std::string::npos);
  EXPECT_EQ(w.num_running, 3);  // unchanged
  EXPECT_NE(parse_load_report(R"({"num_waiting":1})", w).message().find("'num_running'"),
            std::string::npos);
}

TEST(Registration, ParsesAndNamesTheField) {
  auto r =
      parse_registration(R"({"url":"http://127.0.0.1:9/","role":"prefill","ttl_s":2.5})", false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->url.text, "http://127.0.0.1:9");
  EXPECT_EQ(r->role, "prefill");
  EXPECT_DOUBLE_EQ(r->ttl_s, 2.5);
  EXPECT_EQ(parse_registration(R"({"url":"http://h:1"})", false)->ttl_s, 6);
  auto msg = [](const char* body, bool leave = false) {
    auto x = parse_registration(body, leave);
    return x.ok() ? std::string("ok") : x.status().message();
  };
  EXPECT_NE(msg(R"({"role":"both"})").find("'url'"), std::string::npos);
  EXPECT_NE(msg(R"({"url":"ftp://h:1"})").find("'url'"), std::string::npos);
  EXPECT_NE(msg(R"({"url":"http://h:1","role":"mixed"})").find("'role' 'mixed'"),
            std::string::npos);
  EXPECT_NE(msg(R"({"url":"http://h:1","ttl_s":0})").find("'ttl_s'"), std::string::npos);
  EXPECT_NE(msg("[1]").find("JSON object"), std::string::npos);
  EXPECT_EQ(msg(R"({"url":"http://h:1","role":"mixed"})", /*leave=*/true), "ok");
}

TEST(Handoff, TokenNullOrNotAHandoff) {
  auto t = parse_handoff(
      R"({"object":"deepinfer.prefill_handoff","handoff":"abc.123","prompt_tokens":5})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->token, "abc.123");
  auto none =
      parse_handoff(R"({"object":"deepinfer.prefill_handoff","handoff":null,"reason":"n > 1"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->token.has_value());
  EXPECT_EQ(none->reason, "n > 1");
  EXPECT_FALSE(parse_handoff(R"({"object":"text_completion","choices":[]})").ok());
  EXPECT_FALSE(parse_handoff(R"({"object":"deepinfer.prefill_handoff","handoff":"a b"})").ok());
  EXPECT_FALSE(parse_handoff(R"({"object":"deepinfer.prefill_handoff","handoff":""})").ok());
}

TEST(LatencySamples, NearestRankQuantiles) {
  LatencySamples s;
  EXPECT_EQ(s.quantile(0.5), 0);
  for (int i = 100; i >= 1; --i) s.add(i * 0.001);  // 1..100 ms
  EXPECT_DOUBLE_EQ(s.quantile(0.5), 0.050);         // rank ceil(50) = 50
  EXPECT_DOUBLE_EQ(s.quantile(0.99), 0.099);
  EXPECT_DOUBLE_EQ(s.quantile(1.0), 0.100);
  EXPECT_EQ(s.count(), 100u);
  EXPECT_NEAR(s.sum(), 5.05, 1e-9);
}

}  // namespace
}  // namespace deepinfer::router
