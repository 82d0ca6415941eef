#include "deepinfer/server/metrics.h"

#include <gtest/gtest.h>

namespace deepinfer::server {
namespace {

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(0.5);
  h.observe(7);
  std::string out;
  h.render("x", "m=\"a\"", &out);
  EXPECT_NE(out.find("x_bucket{m=\"a\",le=\"0.10000000000000001\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{m=\"a\",le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{m=\"a\",le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum{m=\"a\"} 7.6500000000000004\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count{m=\"a\"} 4\n"), std::string::npos) << out;
}

TEST(Metrics, RenderHasVllmNamesWithPrefix) {
  Metrics m;
  m.on_first_token(0.2);
  m.on_inter_token(0.01);
  m.on_finished("abort", 1.5, 7, 3);
  m.on_http_status(200);
  std::string out = m.render("tiny", nullptr);
  for (const char* want :
       {"# TYPE deepinfer:num_requests_running gauge", "deepinfer:num_requests_waiting{",
        "deepinfer:kv_cache_usage_perc{model_name=\"tiny\"} 0\n",
        "deepinfer:prefix_cache_queries_total{model_name=\"tiny\"} 0\n",
        "deepinfer:prefix_cache_hits_total{",
        "deepinfer:prompt_tokens_total{model_name=\"tiny\"} 7\n",
        "deepinfer:generation_tokens_total{model_name=\"tiny\"} 3\n",
        "deepinfer:request_success_total{model_name=\"tiny\",finished_reason=\"abort\"} 1\n",
        "deepinfer:request_success_total{model_name=\"tiny\",finished_reason=\"stop\"} 0\n",
        "deepinfer:time_to_first_token_seconds_count{model_name=\"tiny\"} 1\n",
        "deepinfer:inter_token_latency_seconds_count{model_name=\"tiny\"} 1\n",
        "# TYPE deepinfer:e2e_request_latency_seconds histogram",
        "deepinfer:http_responses_total{model_name=\"tiny\",status=\"200\"} 1\n"})
    EXPECT_NE(out.find(want), std::string::npos) << want;
}

}  // namespace
}  // namespace deepinfer::server

namespace deepinfer::server {
namespace {

TEST(Metrics, SpeculativeDecodingCountersPerPosition) {
  EngineStats st;
  st.spec_verifications = 10;
  st.spec_draft_tokens = 30;
  st.spec_accepted_tokens = 12;
  st.spec_accepted_at = {7, 4, 1};
  const std::string out = render_spec_decode("model_name=\"m\"", st);
  EXPECT_NE(out.find("# TYPE deepinfer:spec_decode_num_drafts_total counter"), std::string::npos);
  EXPECT_NE(out.find("deepinfer:spec_decode_num_drafts_total{model_name=\"m\"} 10\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("deepinfer:spec_decode_num_draft_tokens_total{model_name=\"m\"} 30\n"),
            std::string::npos);
  EXPECT_NE(out.find("deepinfer:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 12\n"),
            std::string::npos);
  for (const char* line : {"deepinfer:spec_decode_num_accepted_tokens_per_pos_total{model_name="
                           "\"m\",position=\"0\"} 7\n",
                           "deepinfer:spec_decode_num_accepted_tokens_per_pos_total{model_name="
                           "\"m\",position=\"2\"} 1\n"})
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
}

}  // namespace
}  // namespace deepinfer::server
