#include "deepinfer/cli/commands/bench_serve.h"

#include <CLI/CLI.hpp>

#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/cli/serve_bench/serve_bench.h"

int run_bench_serve(int argc, char** argv) {
  using deepinfer::cli::serve_bench::ServeBenchOptions;
  ServeBenchOptions o;
  o.tokenizer_dir = deepinfer::cli::bundled_tokenizer_dir();
  std::string rate = "inf";
  bool no_progress = false, eos = false;
  CLI::App app{
      "Load an OpenAI-compatible server (ours or a peer's) as `vllm bench serve` does: streamed "
      "requests, Poisson arrivals at --request-rate or all at once, at most --max-concurrency "
      "in flight. Reports TTFT, TPOT, ITL and E2E latency (mean and percentiles), request, "
      "output and total token throughput, goodput under --goodput SLOs and prompt tokens served "
      "from the server's cache; writes them as JSON.",
      "deepinfer bench serve"};
  app.add_option("--base-url", o.base_url, "the server, http://host:port")->required();
  app.add_option("--endpoint", o.endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  app.add_option("--model", o.model, "model name in requests (default: the first of /v1/models)");
  app.add_option("--tokenizer", o.tokenizer_dir,
                 "tokenizer directory for the random prompts (default: the bundled DeepSeek one)");
  app.add_option("--dataset-name", o.dataset.name, "random, shared-prefix or jsonl")
      ->capture_default_str();
  app.add_option("--dataset-path", o.dataset.path, "jsonl: one request per line");
  app.add_option("--num-prompts", o.dataset.num_prompts, "requests to send")->capture_default_str();
  app.add_option("--random-input-len", o.dataset.input_len,
                 "random, shared-prefix: prompt tokens (after the prefix)")
      ->capture_default_str();
  app.add_option("--random-output-len", o.dataset.output_len, "max_tokens per request")
      ->capture_default_str();
  app.add_option("--random-range-ratio", o.dataset.range_ratio,
                 "lengths drawn uniformly within +- this fraction")
      ->capture_default_str();
  app.add_option("--prefix-len", o.dataset.prefix_len, "shared-prefix: tokens per prefix")
      ->capture_default_str();
  app.add_option("--num-prefixes", o.dataset.num_prefixes, "shared-prefix: distinct prefixes")
      ->capture_default_str();
  app.add_option("--seed", o.dataset.seed, "prompts and arrivals")->capture_default_str();
  app.add_option("--request-rate", rate, "requests per second, Poisson arrivals; inf: all at once")
      ->capture_default_str();
  app.add_option("--max-concurrency", o.max_concurrency, "requests in flight at most (0: no cap)")
      ->capture_default_str();
  app.add_option("--num-warmups", o.num_warmups, "requests sent first, one at a time, not counted")
      ->capture_default_str();
  app.add_option("--temperature", o.temperature, "sampling temperature")->capture_default_str();
  app.add_flag("--no-ignore-eos", eos,
               "let requests stop at EOS (default: ignore_eos, so every "
               "request generates its max_tokens)");
  app.add_option("--goodput", o.goodput,
                 "SLOs for goodput, e.g. --goodput ttft:500 tpot:50 e2el:10000 (milliseconds)");
  app.add_option("--metric-percentiles", o.percentiles, "percentiles to report")
      ->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout_s, "seconds to wait on the server")
      ->capture_default_str();
  app.add_option("--output-json", o.json_path, "where the results go")->capture_default_str();
  app.add_flag("--disable-tqdm", no_progress, "no progress bar (one shows on a terminal)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (rate == "inf") {
    o.request_rate = std::numeric_limits<double>::infinity();
  } else {
    char* end = nullptr;
    o.request_rate = std::strtod(rate.c_str(), &end);
    if (rate.empty() || *end != '\0' || !(o.request_rate > 0)) {
      std::fprintf(stderr, "deepinfer bench serve: --request-rate '%s': a positive number or inf\n",
                   rate.c_str());
      return 1;
    }
  }
  o.ignore_eos = !eos;
  o.progress = !no_progress;
  return deepinfer::cli::serve_bench::run_serve_bench(o);
}
