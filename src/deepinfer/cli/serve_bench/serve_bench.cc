#include "deepinfer/cli/serve_bench/serve_bench.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "deepinfer/cli/serve_bench/sse.h"

namespace deepinfer::cli::serve_bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool is_chat(const ServeBenchOptions& o) {
  return o.endpoint.find("chat/completions") != std::string::npos;
}

// The text a streamed chunk adds (completions: choices[0].text; chat: delta content or
// reasoning), empty for role-only, usage-only and finish chunks.
std::string chunk_text(const json& j) {
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return "";
  const json& c = j["choices"][0];
  std::string t;
  if (c.contains("text") && c["text"].is_string()) t += c["text"].get<std::string>();
  if (c.contains("delta") && c["delta"].is_object()) {
    const json& d = c["delta"];
    for (const char* k : {"reasoning_content", "content"})
      if (d.contains(k) && d[k].is_string()) t += d[k].get<std::string>();
  }
  return t;
}

StatusOr<std::string> first_model(const BaseUrl& base, const ServeBenchOptions& o) {
  std::string body;
  ASSIGN_OR_RETURN(HttpResult r, http_request(base, "/v1/models", "", o.request_timeout_s,
                                              [&](std::string_view b) { body.append(b); }));
  const json j = json::parse(body, nullptr, false);
  if (r.status != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() ||
      j["data"].empty() || !j["data"][0].contains("id"))
    return failed_precondition("GET " + o.base_url + "/v1/models gave status " +
                               std::to_string(r.status) + " and no model id; pass --model");
  return j["data"][0]["id"].get<std::string>();
}

class Progress {
 public:
  Progress(int total, bool on) : total_(total), on_(on && isatty(STDERR_FILENO)) {}
  void tick(bool ok) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    failed_ += !ok;
    if (!on_) return;
    const int width = 40, filled = total_ ? width * done_ / total_ : width;
    std::fprintf(stderr, "\r[%.*s%*s] %d/%d requests%s", filled,
                 "########################################", width - filled, "", done_, total_,
                 failed_ ? (", " + std::to_string(failed_) + " failed").c_str() : "");
    if (done_ == total_) std::fprintf(stderr, "\n");
  }

 private:
  std::mutex mu_;
  int total_, done_ = 0, failed_ = 0;
  bool on_;
};

}  // namespace

std::string request_body(const ServeBenchOptions& o, const std::string& model,
                         const BenchRequest& r) {
  json j = {{"model", model},
            {"max_tokens", r.max_tokens},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}},
            {"temperature", o.temperature},
            {"ignore_eos", o.ignore_eos}};
  if (is_chat(o)) {
    j["messages"] =
        r.messages ? *r.messages : json::array({{{"role", "user"}, {"content", r.prompt}}});
  } else {
    j["prompt"] = r.prompt;
  }
  return j.dump();
}

RequestRecord send_one(const BaseUrl& base, const ServeBenchOptions& o, const std::string& body) {
  RequestRecord rec;
  const auto t0 = Clock::now();
  double last = -1;
  int64_t chunks = 0;
  bool usage = false, done = false;
  std::string error_body;
  SseSplitter sse([&](std::string_view data) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const json j = json::parse(data, nullptr, false);
    if (j.is_discarded()) return;
    if (j.contains("error")) {
      rec.error = j["error"].dump();
      return;
    }
    if (!chunk_text(j).empty()) {
      const double t = since(t0);
      if (last < 0) {
        rec.ttft_s = t;
      } else {
        rec.itl_s.push_back(t - last);
      }
      last = t;
      ++chunks;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      usage = true;
      rec.prompt_tokens = u.value("prompt_tokens", int64_t{0});
      rec.output_tokens = u.value("completion_tokens", int64_t{0});
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
        rec.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", int64_t{0});
    }
  });
  auto r = http_request(base, o.endpoint, body, o.request_timeout_s, [&](std::string_view b) {
    sse.feed(b);
    if (error_body.size() < 300) error_body.append(b.substr(0, 300 - error_body.size()));
  });
  sse.finish();
  rec.e2el_s = since(t0);
  if (!r.ok()) {
    rec.error = r.status().message();
  } else if (r->status != 200) {
    rec.error = "HTTP " + std::to_string(r->status) + ": " + error_body;
  } else if (rec.error.empty() && chunks == 0) {
    rec.error = "the stream carried no content";
  } else if (rec.error.empty() && !done) {
    rec.error = "the stream ended without [DONE]";
  }
  if (!usage) rec.output_tokens = chunks;
  rec.ok = rec.error.empty();
  return rec;
}

std::vector<double> arrival_times(int n, double rate, uint64_t seed) {
  std::vector<double> t(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (!std::isfinite(rate)) return t;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  double at = 0;
  for (double& x : t) x = (at += gap(rng));
  return t;
}

int run_serve_bench(const ServeBenchOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "deepinfer bench serve: %s\n", m.c_str());
    return 1;
  };
  auto base = parse_base_url(o.base_url);
  if (!base.ok()) return fail(base.status().message());
  auto slo = parse_goodput(o.goodput);
  if (!slo.ok()) return fail(slo.status().message());
  if (!(o.request_rate > 0)) return fail("--request-rate must be positive (inf: all at once)");
  if (o.max_concurrency < 0) return fail("--max-concurrency must be at least 0 (0: unbounded)");
  auto tok = tokenizer::Tokenizer::from_file(o.tokenizer_dir + "/tokenizer.json");
  if (!tok.ok()) return fail("--tokenizer: " + tok.status().message());
  std::string model = o.model;
  if (model.empty()) {
    auto m = first_model(*base, o);
    if (!m.ok()) return fail(m.status().message());
    model = *m;
  }
  DatasetOptions d = o.dataset;
  d.num_prompts += o.num_warmups;
  auto reqs = make_requests(d, **tok);
  if (!reqs.ok()) return fail(reqs.status().message());
  const int warm = std::min<int>(o.num_warmups, int(reqs->size()));
  std::fprintf(stderr,
               "bench serve: %s%s, model %s, %zu requests (%d warm-up), rate %s, "
               "max concurrency %s\n",
               o.base_url.c_str(), o.endpoint.c_str(), model.c_str(), reqs->size() - warm, warm,
               std::isfinite(o.request_rate) ? std::to_string(o.request_rate).c_str() : "inf",
               o.max_concurrency ? std::to_string(o.max_concurrency).c_str() : "unbounded");
  for (int i = 0; i < warm; ++i) {
    const RequestRecord r = send_one(*base, o, request_body(o, model, (*reqs)[i]));
    if (!r.ok) return fail("warm-up request failed: " + r.error);
  }
  const int n = int(reqs->size()) - warm;
  std::vector<RequestRecord> records(static_cast<size_t>(n));
  const std::vector<double> arrivals = arrival_times(n, o.request_rate, d.seed + 1);
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  Progress progress(n, o.progress);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(arrivals[size_t(i)]));
    if (o.max_concurrency > 0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return in_flight < o.max_concurrency; });
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ++in_flight;
    }
    std::string body = request_body(o, model, (*reqs)[size_t(warm + i)]);
    threads.emplace_back([&, i, body = std::move(body)] {
      records[size_t(i)] = send_one(*base, o, body);
      progress.tick(records[size_t(i)].ok);
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
      cv.notify_all();
    });
  }
  for (auto& t : threads) t.join();
  const double duration = since(t0);
  const Summary s = summarize(records, duration, *slo, o.percentiles);
  std::printf("%s", summary_text(s).c_str());
  json j = summary_json(s);
  j["base_url"] = o.base_url;
  j["endpoint"] = o.endpoint;
  j["model"] = model;
  j["dataset"] = {{"name", d.name},
                  {"num_prompts", n},
                  {"random_input_len", d.input_len},
                  {"random_output_len", d.output_len},
                  {"random_range_ratio", d.range_ratio},
                  {"seed", d.seed}};
  if (d.name == "shared-prefix") {
    j["dataset"]["prefix_len"] = d.prefix_len;
    j["dataset"]["num_prefixes"] = d.num_prefixes;
  }
  if (d.name == "jsonl") j["dataset"]["path"] = d.path;
  j["request_rate"] = std::isfinite(o.request_rate) ? json(o.request_rate) : json("inf");
  j["max_concurrency"] = o.max_concurrency;
  j["num_warmups"] = warm;
  std::ofstream(o.json_path) << j.dump(2) << "\n";
  std::printf("wrote %s\n", o.json_path.c_str());
  return s.completed > 0 ? 0 : 1;
}

}  // namespace deepinfer::cli::serve_bench
