// deepinfer bench latency|throughput: runs synthetic requests through the engine and reports
// TTFT, ITL, tokens/s and the per-step time split, next to the memory-bandwidth floor for the
// same work (weight bytes read per decode step / measured copy bandwidth). Writes a JSON file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/cuda_bench/cuda_bench.h"
#include "deepinfer/cli/engine_flags.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/weights.h"

namespace {

using Clock = std::chrono::steady_clock;
using deepinfer::Engine;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5))];
}

// Copy bandwidth of this machine (bytes read + written per second), best of a few runs.
double measure_copy_bandwidth() {
  const size_t n = 256u << 20;
  std::vector<char> a(n, 1), b(n, 0);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n / s);
  }
  return best + (b[n / 2] == 2 ? 1 : 0);  // keep the copy observable
}

// fp32 weight bytes one decode step of one sequence reads: everything but the routed experts,
// plus the expected share K/E of them; the embedding contributes one row.
double decode_weight_bytes(const deepinfer::v4::Config& c) {
  double bytes = 0;
  for (const auto& s : deepinfer::v4::weight_manifest(c)) {
    double numel = 1;
    for (int64_t d : s.shape) numel *= static_cast<double>(d);
    if (s.name == "embed.weight") numel = static_cast<double>(c.hidden_size);
    if (s.kind == deepinfer::v4::WeightKind::kExpert)
      numel *= static_cast<double>(c.experts_per_token) / c.n_routed_experts;
    bytes += 4 * numel;
  }
  return bytes;
}

// --device cuda: the prefill length is --input-len when given, else 4096 (the prompt).
int64_t cuda_prefill_len(const CLI::App& app, int input_len) {
  return app.get_option("--input-len")->count() > 0 ? input_len : 4096;
}

int run_cuda(const std::string& mode, const std::string& model_arg, const std::string& batches_arg,
             const std::string& json_path, int64_t prefill_len,
             deepinfer::cli::CudaBenchOptions o) {
#if DEEPINFER_HAVE_CUDA
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", dir.status().to_string().c_str());
    return 1;
  }
  o.mode = mode;
  o.model_dir = *dir;
  o.prefill_len = prefill_len;
  o.json_path = json_path;
  const std::string list =
      batches_arg.empty() ? (mode == "latency" ? "1" : "8,32,128") : batches_arg;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, end - at);
    char* rest = nullptr;
    const long b = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || b < 1 || b > 256) {
      std::fprintf(stderr, "deepinfer bench: --batch-sizes: '%s' is not a batch size in 1..256\n",
                   item.c_str());
      return 1;
    }
    o.batches.push_back(static_cast<int>(b));
    at = end + 1;
  }
  if (o.context < 1 || o.prefill_len < 1 || o.steps < 1 || o.long_context < 0) {
    std::fprintf(stderr,
                 "deepinfer bench: --context, --input-len and --steps must be positive, "
                 "--long-context at least 0\n");
    return 1;
  }
  if (!o.reference.empty() && o.reference != "transformers") {
    std::fprintf(stderr, "deepinfer bench: --reference: '%s' is not 'transformers'\n",
                 o.reference.c_str());
    return 1;
  }
  if (o.reference_script.empty()) o.reference_script = DEEPINFER_REFERENCE_SCRIPT;
  return deepinfer::cli::run_cuda_bench(o);
#else
  std::fprintf(stderr,
               "deepinfer bench: --device cuda: this binary was built without the CUDA backend "
               "(no nvcc at configure time)\n");
  return 1;
#endif
}

int run_bench(int argc, char** argv) {
  std::string mode, model_arg, json_path;
  int num_requests = 0, batch = 1, input_len = 128, output_len = 32;
  deepinfer::EngineArgs args;
  CLI::App app{"Benchmark the engine on synthetic requests", "deepinfer bench"};
  app.add_option("MODE", mode, "latency (one batch) or throughput (many requests)")
      ->required()
      ->check(CLI::IsMember({"latency", "throughput"}));
  app.add_option("--model", model_arg, "model directory (default: embedded tiny model)");
  app.add_option("--batch-size", batch, "latency: sequences in the batch")->capture_default_str();
  app.add_option("--num-prompts", num_requests, "throughput: requests (default 64)");
  app.add_option("--input-len", input_len,
                 "prompt tokens per request (cuda: the prefill prompt, default 4096)")
      ->capture_default_str();
  app.add_option("--output-len", output_len, "generated tokens per request")->capture_default_str();
  deepinfer::cli::add_engine_flags(app, &args);
  app.add_option("--output-json", json_path,
                 "where to write the JSON result (default bench_MODE.json, with --device cuda "
                 "bench_MODE_cuda.json)");
  // The GPU forward, timed directly (cli/cuda_bench/cuda_bench.h).
  std::string device = "cpu", batches_arg;
  deepinfer::cli::CudaBenchOptions cu;
  app.add_option("--device", device,
                 "cpu: the engine on the CPU reference; cuda: the GPU forward (CudaModel) alone, "
                 "prefill and batched decode steps next to their roofline floor")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--batch-sizes", batches_arg,
                 "cuda: decode batch sizes, comma-separated (default: latency 1, throughput "
                 "8,32,128)");
  app.add_option("--context", cu.context, "cuda: context tokens per sequence before decode")
      ->capture_default_str();
  app.add_option("--steps", cu.steps, "cuda: timed decode steps per batch size, after 2 warm-up")
      ->capture_default_str();
  app.add_option("--long-context", cu.long_context,
                 "cuda: also prefill this many tokens and time batch-1 decode there (0: skip)")
      ->capture_default_str();
  app.add_flag("--phase-times", cu.phase_times,
               "cuda: after each row's timed runs, a few more (eager) with the GPU time of every "
               "forward phase (attention projections/state/output, MoE router/experts, mHC, head)");
  app.add_flag(
      "--no-cuda-graphs", [&](int64_t) { cu.cuda_graphs = false; },
      "cuda: launch every decode step eagerly instead of replaying each batch size's "
      "CUDA graph");
  app.add_option("--reference", cu.reference,
                 "cuda: 'transformers' also runs DeepseekV4ForCausalLM (eager) on the same GPU and "
                 "model via --reference-script, after freeing ours, and prints it alongside");
  app.add_option("--reference-script", cu.reference_script,
                 "cuda: the reference script (default bench/transformers_reference_bench.py)");
  app.add_option("--reference-args", cu.reference_args,
                 "cuda: extra arguments for the reference script, e.g. '--load dequant'");
  app.add_option("--python", cu.python, "cuda: python interpreter for the reference")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (device == "cuda")
    return run_cuda(mode, model_arg, batches_arg, json_path, cuda_prefill_len(app, input_len), cu);
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", dir.status().to_string().c_str());
    return 1;
  }
  auto cfg = deepinfer::v4::load_config(*dir);
  if (!cfg.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", cfg.status().to_string().c_str());
    return 1;
  }
  args.model = *dir;
  if (mode == "latency") args.max_num_seqs = std::max(args.max_num_seqs, batch);
  auto engine = Engine::create(args);
  if (!engine.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  const int n = mode == "latency" ? batch : (num_requests > 0 ? num_requests : 64);
  std::mt19937_64 rng(42);
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  std::vector<double> ttft(n, 0);
  std::vector<std::vector<double>> token_times(n);
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    deepinfer::GenerateRequest r;
    for (int k = 0; k < input_len; ++k) r.prompt_ids.push_back(2 + rng() % 100000);
    r.params.temperature = 0;
    r.params.max_tokens = output_len;
    r.params.ignore_eos = true;
    auto st = (*engine)->submit(r, [&, i](const deepinfer::RequestOutput& o) {
      double t = std::chrono::duration<double>(Clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(m);
      for (size_t k = 0; k < o.outputs[0].delta_token_ids.size(); ++k) token_times[i].push_back(t);
      if (o.finished) {
        ++done;
        cv.notify_all();
      }
    });
    if (!st.ok()) {
      std::fprintf(stderr, "deepinfer bench: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done == n; });
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> itl;
  for (int i = 0; i < n; ++i) {
    ttft[i] = token_times[i].empty() ? 0 : token_times[i][0];
    for (size_t k = 1; k < token_times[i].size(); ++k)
      itl.push_back(token_times[i][k] - token_times[i][k - 1]);
  }
  const auto s = (*engine)->stats();
  const double out_tok = static_cast<double>(n) * output_len;
  const double bw = measure_copy_bandwidth();
  // Floor for one decode step: the CPU reference runs each sequence's forward separately (no
  // batched GEMM yet), so a step with B decoding sequences reads the weights B times.
  const int concurrent = std::min(n, args.max_num_seqs);
  const double floor_step = concurrent * decode_weight_bytes(*cfg) / bw;
  const double itl50 = percentile(itl, 50);
  std::printf("deepinfer bench %s  model=%s  requests=%d input=%d output=%d budget=%lld\n",
              mode.c_str(), dir->c_str(), n, input_len, output_len,
              (long long)args.max_num_batched_tokens);
  std::printf("| metric | value |\n|---|---|\n");
  std::printf("| wall time | %.3f s |\n| output tokens/s | %.1f |\n", wall, out_tok / wall);
  std::printf("| total tokens/s (prompt+output) | %.1f |\n",
              (static_cast<double>(n) * input_len + out_tok) / wall);
  std::printf("| TTFT p50 / p99 | %.2f / %.2f ms |\n", 1e3 * percentile(ttft, 50),
              1e3 * percentile(ttft, 99));
  std::printf("| ITL p50 / p99 | %.2f / %.2f ms |\n", 1e3 * percentile(itl, 50),
              1e3 * percentile(itl, 99));
  std::printf(
      "| decode step floor (%d seqs x %.1f MB fp32 weights / %.1f GB/s measured copy) | %.2f ms "
      "|\n",
      concurrent, decode_weight_bytes(*cfg) / 1e6, bw / 1e9, 1e3 * floor_step);
  std::printf("| decode step measured (ITL p50) / floor | %.1fx |\n",
              floor_step > 0 ? itl50 / floor_step : 0.0);
  std::printf("\nstep-time breakdown over %lld steps (%.1f ms/step):\n", (long long)s.steps,
              s.steps ? 1e3 * s.total_s / s.steps : 0.0);
  std::printf("| phase | total s | share |\n|---|---|---|\n");
  const double tot = std::max(1e-12, s.total_s);
  for (auto [name, v] :
       {std::pair{"schedule", s.schedule_s},
        {"forward", s.forward_s},
        {"sample", s.sample_s},
        {"output", s.output_s},
        {"other", s.total_s - s.schedule_s - s.forward_s - s.sample_s - s.output_s}})
    std::printf("| %s | %.4f | %.2f%% |\n", name, v, 100 * v / tot);
  nlohmann::json j = {{"mode", mode},
                      {"model", *dir},
                      {"requests", n},
                      {"input_len", input_len},
                      {"output_len", output_len},
                      {"wall_s", wall},
                      {"output_tokens_per_s", out_tok / wall},
                      {"ttft_ms_p50", 1e3 * percentile(ttft, 50)},
                      {"ttft_ms_p99", 1e3 * percentile(ttft, 99)},
                      {"itl_ms_p50", 1e3 * percentile(itl, 50)},
                      {"itl_ms_p99", 1e3 * percentile(itl, 99)},
                      {"decode_step_floor_ms", 1e3 * floor_step},
                      {"decode_step_over_floor", floor_step > 0 ? itl50 / floor_step : 0.0},
                      {"copy_bandwidth_gbs", bw / 1e9},
                      {"steps", s.steps},
                      {"step_s",
                       {{"schedule", s.schedule_s},
                        {"forward", s.forward_s},
                        {"sample", s.sample_s},
                        {"output", s.output_s},
                        {"total", s.total_s}}},
                      {"scheduler_share", s.schedule_s / tot}};
  if (json_path.empty()) json_path = "bench_" + mode + ".json";
  std::ofstream(json_path) << j.dump(2) << "\n";
  std::printf("\nwrote %s\n", json_path.c_str());
  return 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kBench, "bench", "benchmark the engine: latency | throughput",
                           run_bench);
