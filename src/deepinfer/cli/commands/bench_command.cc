// deepinfer bench latency|throughput|forward|prefix-cache|serve.
//
// latency|throughput run synthetic requests through the engine on --device cpu or cuda
// (continuous batching, chunked prefill mixed with decode) and report output tokens/s, TTFT, ITL
// and the per-step time split, next to the memory-bandwidth floor of one decode step. On cuda
// they then free the engine and time the GPU forward alone (cuda_bench/) at the engine's decode
// batch, and print the engine's overhead over it. forward (cuda only) is that isolated forward
// over several batch sizes, with prefill, long context and the transformers reference. Every mode
// writes a JSON file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/commands/bench_prefix_cache.h"
#include "deepinfer/cli/commands/bench_serve.h"
#include "deepinfer/cli/cuda_bench/cuda_bench.h"
#include "deepinfer/cli/cuda_bench/roofline.h"
#include "deepinfer/cli/cuda_bench/roofline_v41.h"
#include "deepinfer/cli/engine_flags.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/engine/engine_setup.h"
#include "deepinfer/engine/oracle_drafter.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/weights.h"
#include "deepinfer/model/model_family.h"
#include "deepinfer/runtime/device.h"

namespace {

using Clock = std::chrono::steady_clock;
using deepinfer::Engine;
using deepinfer::runtime::Device;

int fail(const std::string& message) { return deepinfer::cli::command_failed("bench", message); }
int fail(const deepinfer::Status& st) { return deepinfer::cli::command_failed("bench", st); }

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

// fp32 weight bytes one decode step of one sequence reads on the CPU reference: everything but
// the routed experts, plus the expected share K/E of them; the embedding contributes one row.
double cpu_decode_weight_bytes(const deepinfer::v4::Config& c) {
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

// The same for V4.1: an Engram layer reads only a token's (max_ngram - 1) x n_heads table rows.
double cpu_decode_weight_bytes(const deepinfer::v41::Config& c) {
  double bytes = 0;
  for (const auto& s : deepinfer::v41::weight_manifest(c)) {
    double numel = 1;
    for (int64_t d : s.shape) numel *= static_cast<double>(d);
    if (s.name == "embed.weight") numel = static_cast<double>(c.hidden_size);
    if (s.kind == deepinfer::v41::WeightKind::kExpert)
      numel *= static_cast<double>(c.experts_per_token) / c.n_routed_experts;
    if (s.kind == deepinfer::v41::WeightKind::kEngramTable)
      numel =
          static_cast<double>(c.engram.max_ngram_size - 1) * c.engram.n_heads * c.engram.head_dim;
    bytes += 4 * numel;
  }
  return bytes;
}

// The CPU reference's per-sequence decode weight bytes for either family, and the config the
// GPU's roofline floors need.
struct FloorModel {
  double cpu_weight_bytes = 0;
  std::optional<deepinfer::v4::Config> v4;
  std::optional<deepinfer::v41::Config> v41;
};

deepinfer::StatusOr<FloorModel> floor_model(const std::string& dir) {
  ASSIGN_OR_RETURN(deepinfer::ModelFamily family, deepinfer::detect_model_family(dir));
  FloorModel m;
  if (family == deepinfer::ModelFamily::kDeepseekV41) {
    ASSIGN_OR_RETURN(deepinfer::v41::Config c, deepinfer::v41::load_config(dir));
    m.cpu_weight_bytes = cpu_decode_weight_bytes(c);
    m.v41 = std::move(c);
    return m;
  }
  ASSIGN_OR_RETURN(deepinfer::v4::Config c, deepinfer::v4::load_config(dir));
  m.cpu_weight_bytes = cpu_decode_weight_bytes(c);
  m.v4 = std::move(c);
  return m;
}

// The roofline of either family's step (cuda_bench/roofline.h, roofline_v41.h), or nullopt after
// saying why.
struct StepRoofline {
  std::function<deepinfer::cli::StepFloor(int64_t batch, int64_t context)> decode;
  std::function<deepinfer::cli::StepFloor(int64_t tokens)> prefill;
};

template <typename R, typename C>
std::optional<StepRoofline> roofline_of(const std::string& dir, const C& c) {
  auto roof = R::open(dir, c);
  if (!roof.ok()) {
    std::fprintf(stderr, "deepinfer bench: no roofline floor: %s\n",
                 roof.status().to_string().c_str());
    return std::nullopt;
  }
  auto r = std::make_shared<R>(std::move(*roof));
  return StepRoofline{[r](int64_t b, int64_t ctx) { return r->decode(b, ctx); },
                      [r](int64_t t) { return r->prefill(t); }};
}

std::optional<StepRoofline> open_roofline(const std::string& dir, const FloorModel& fm) {
  if (fm.v4) return roofline_of<deepinfer::cli::Roofline>(dir, *fm.v4);
  return roofline_of<deepinfer::cli::RooflineV41>(dir, *fm.v41);
}

#if DEEPINFER_HAVE_CUDA
// "1,8,32" -> {1, 8, 32}, each in 1..256.
deepinfer::Status parse_batch_sizes(const std::string& list, std::vector<int>* out) {
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, end - at);
    char* rest = nullptr;
    const long b = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || b < 1 || b > 256)
      return deepinfer::invalid_argument("--batch-sizes: '" + item +
                                         "' is not a batch size in 1..256");
    out->push_back(static_cast<int>(b));
    at = end + 1;
  }
  return deepinfer::ok_status();
}
#endif

// The options of the isolated GPU forward (cuda_bench.h), set by flags.
struct ForwardFlags {
  deepinfer::cli::CudaBenchOptions cu;
  std::string batch_sizes;
  bool skip_isolated = false;
  std::vector<double> spec_oracle_accept;  // latency|throughput: oracle drafter rates
  int warmup = -1;                         // latency|throughput: warm-up request sets (-1: auto)
};

// Flags that only `bench forward` reads; latency|throughput reject them rather than ignore them.
constexpr const char* kForwardOnlyFlags[] = {
    "--batch-sizes", "--context",          "--long-context",   "--prefill-chunk",
    "--reference",   "--reference-script", "--reference-args", "--python"};

int run_forward(const std::string& model_arg, const std::string& json_path, int64_t prefill_len,
                const ForwardFlags& f, const deepinfer::EngineArgs& args) {
  if (args.device != Device::kCuda)
    return fail(
        "bench forward times the GPU forward alone: it needs --device cuda (or "
        "DEEPINFER_ACCELERATOR=nvidia)");
#if DEEPINFER_HAVE_CUDA
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) return fail(dir.status());
  deepinfer::cli::CudaBenchOptions o = f.cu;
  o.mode = "forward";
  o.model_dir = *dir;
  o.prefill_len = prefill_len;
  o.json_path = json_path;
  o.cuda_graphs = args.cuda_graphs;
  auto switches = deepinfer::resolve_switches(args.switches);
  if (!switches.ok()) return fail(switches.status());
  o.batch_invariant = switches->batch_invariant;
  if (auto st = parse_batch_sizes(f.batch_sizes.empty() ? "1,8,32,128" : f.batch_sizes, &o.batches);
      !st.ok())
    return fail(st);
  if (o.prefill_chunk == 0) o.prefill_chunk = deepinfer::default_batched_tokens(Device::kCuda);
  if (o.context < 1 || o.prefill_len < 1 || o.steps < 1 || o.long_context < 0 ||
      o.prefill_chunk < 1)
    return fail(
        "--context, --input-len, --steps and --prefill-chunk must be positive, --long-context at "
        "least 0");
  if (!o.reference.empty() && o.reference != "transformers")
    return fail("--reference: '" + o.reference + "' is not 'transformers'");
  if (o.reference_script.empty()) o.reference_script = DEEPINFER_REFERENCE_SCRIPT;
  return deepinfer::cli::run_cuda_bench(o);
#else
  (void)model_arg, (void)json_path, (void)prefill_len, (void)f;
  return fail(
      "bench forward --device cuda: this binary was built without the CUDA backend (no nvcc at "
      "configure time)");
#endif
}

// What the clients of one engine run saw.
struct EngineRun {
  double wall_s = 0;
  std::vector<double> ttft, itl;  // seconds
  // Per request with two tokens or more: (last token's time - first's) / (tokens - 1), the
  // decode alone (speculation delivers tokens in bursts, so ITL's median says little).
  std::vector<double> tpot;
  std::vector<std::vector<int32_t>> prompts, outputs;
  double mean_tpot() const {
    double sum = 0;
    for (double t : tpot) sum += t;
    return tpot.empty() ? 0.0 : sum / double(tpot.size());
  }
};

deepinfer::StatusOr<EngineRun> drive(Engine& engine, int n, int input_len, int output_len,
                                     uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::mutex m;
  std::condition_variable cv;
  int done = 0;
  deepinfer::Status failed;  // the first request the engine ended on an error
  std::vector<std::vector<double>> token_times(n);
  EngineRun run;
  run.outputs.resize(static_cast<size_t>(n));
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    deepinfer::GenerateRequest r;
    for (int k = 0; k < input_len; ++k) r.prompt_ids.push_back(2 + rng() % 100000);
    run.prompts.push_back(r.prompt_ids);
    r.params.temperature = 0;
    r.params.max_tokens = output_len;
    r.params.ignore_eos = true;
    const deepinfer::Status st = engine.submit(r, [&, i](const deepinfer::RequestOutput& o) {
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(m);
      for (size_t k = 0; k < o.outputs[0].delta_token_ids.size(); ++k) token_times[i].push_back(t);
      if (o.finished) {
        run.outputs[size_t(i)] = o.outputs[0].token_ids;
        if (!o.status.ok() && failed.ok()) failed = o.status;
        ++done;
        cv.notify_all();
      }
    });
    if (!st.ok()) {  // the ones already taken still call back into this frame: wait for them
      std::unique_lock<std::mutex> lock(m);
      if (failed.ok()) failed = st;
      cv.wait(lock, [&] { return done == i; });
      return failed;
    }
  }
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done == n; });
  }
  if (!failed.ok()) return failed;  // a request the engine ended on an error: no figures
  run.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& times : token_times) {
    run.ttft.push_back(times.empty() ? 0 : times[0]);
    for (size_t k = 1; k < times.size(); ++k) run.itl.push_back(times[k] - times[k - 1]);
    if (times.size() >= 2) run.tpot.push_back((times.back() - times[0]) / double(times.size() - 1));
  }
  return run;
}

// `sets` request sets like the measured one but with other prompts (seeds past drive's 42, so
// the prefix cache holds nothing the measured run can use), run and discarded: a CUDA engine's
// first forward of a shape builds cuBLASLt plans and grows scratch, which no later request
// pays. Returns the engine's stats after them, to subtract.
deepinfer::StatusOr<deepinfer::EngineStats> warm_up(Engine& engine, int sets, int n, int input_len,
                                                    int output_len) {
  for (int w = 0; w < sets; ++w) {
    auto run = drive(engine, n, input_len, output_len, 1000 + static_cast<uint64_t>(w));
    if (!run.ok()) return run.status();
  }
  return engine.stats();
}

// The running totals of `now` since `then` (the gauges as they are now).
deepinfer::EngineStats stats_since(deepinfer::EngineStats now, const deepinfer::EngineStats& then) {
  now.steps -= then.steps;
  now.schedule_s -= then.schedule_s;
  now.forward_s -= then.forward_s;
  now.sample_s -= then.sample_s;
  now.output_s -= then.output_s;
  now.total_s -= then.total_s;
  now.prefill_tokens -= then.prefill_tokens;
  now.decode_tokens -= then.decode_tokens;
  now.preemptions -= then.preemptions;
  now.spec_verifications -= then.spec_verifications;
  now.spec_draft_tokens -= then.spec_draft_tokens;
  now.spec_accepted_tokens -= then.spec_accepted_tokens;
  for (size_t i = 0; i < now.spec_accepted_at.size() && i < then.spec_accepted_at.size(); ++i)
    now.spec_accepted_at[i] -= then.spec_accepted_at[i];
  return now;
}

// One decode step's floor for the engine's work at `batch` sequences.
struct DecodeFloor {
  double seconds = 0;
  std::string label;
  nlohmann::json json;
};

// cpu: the reference runs each sequence's forward separately (no batched GEMM), so a step with B
// decoding sequences reads the fp32 weights B times, at this machine's measured copy bandwidth.
DecodeFloor cpu_floor(double bytes, int batch) {
  const double bw = measure_copy_bandwidth();
  DecodeFloor f;
  f.seconds = batch * bytes / bw;
  char label[200];
  std::snprintf(label, sizeof label,
                "decode step floor (%d seqs x %.1f MB fp32 weights / %.1f GB/s measured copy)",
                batch, bytes / 1e6, bw / 1e9);
  f.label = label;
  f.json = {{"copy_bandwidth_gbs", bw / 1e9}, {"weight_bytes_per_seq", bytes}};
  return f;
}

// cuda: every weight on the device read once per step, at H200 bandwidth (what a batch that
// touches every expert reads); the roofline of the same step beside it is the floor
// (checkpoint-format bytes of the experts B tokens touch, bf16 state, FLOPs;
// cuda_bench/roofline.h and roofline_v41.h).
DecodeFloor cuda_floor(const std::optional<StepRoofline>& roof,
                       const deepinfer::EngineCapacity& cap, int batch, int64_t context,
                       std::optional<double>* roofline_s) {
  const deepinfer::cli::Hardware hw;
  DecodeFloor f;
  f.seconds = cap.weight_bytes / hw.bytes_per_s;
  char label[200];
  std::snprintf(label, sizeof label,
                "all %.2f GiB of on-device weights read once / %.1f TB/s (a small batch "
                "touches few experts: the roofline line is its floor)",
                cap.weight_bytes / double(1ll << 30), hw.bytes_per_s / 1e12);
  f.label = label;
  f.json = {{"hardware_bytes_per_s", hw.bytes_per_s}, {"weight_bytes", cap.weight_bytes}};
  if (!roof) return f;
  const deepinfer::cli::StepFloor step = roof->decode(batch, context);
  *roofline_s = step.seconds(hw);
  f.json["roofline"] = {{"weight_bytes", step.weight_bytes},
                        {"state_bytes", step.state_bytes},
                        {"flops", step.flops},
                        {"flops_per_s", hw.flops_per_s},
                        {"floor_ms", 1e3 * **roofline_s}};
  return f;
}

// The GPU forward alone (cuda_bench) at the engine's decode batch and mean context: its median
// decode step in ms, or nullopt (after saying why). Its own table goes to stdout.
std::optional<double> isolated_decode_ms(const std::string& dir, int batch, int64_t context,
                                         const ForwardFlags& f, const deepinfer::EngineArgs& args,
                                         const std::string& json_path) {
#if DEEPINFER_HAVE_CUDA
  if (batch > 256) {
    std::fprintf(stderr, "deepinfer bench: isolated forward skipped: batch %d is over 256\n",
                 batch);
    return std::nullopt;
  }
  deepinfer::cli::CudaBenchOptions o = f.cu;
  o.mode = "isolated";
  o.model_dir = dir;
  o.batches = {batch};
  o.context = context;
  o.prefill_len = context;
  o.cuda_graphs = args.cuda_graphs;
  o.json_path = json_path;
  std::printf("\nisolated GPU forward at the engine's decode batch (bench forward):\n");
  std::fflush(stdout);
  if (deepinfer::cli::run_cuda_bench(o) != 0) return std::nullopt;
  std::ifstream in(json_path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_discarded() && j.contains("rows"))
    for (const auto& row : j["rows"])
      if (row.value("kind", "") == "decode") return row.value("ms", 0.0);
  std::fprintf(stderr, "deepinfer bench: no decode row in %s\n", json_path.c_str());
  return std::nullopt;
#else
  (void)dir, (void)batch, (void)context, (void)f, (void)args, (void)json_path;
  std::fprintf(stderr, "deepinfer bench: isolated forward: not in this build (no CUDA)\n");
  return std::nullopt;
#endif
}

// Where two runs' outputs first part ("request 3 token 17: 1234 against 5678"), or "".
std::string first_parting(const std::vector<std::vector<int32_t>>& got,
                          const std::vector<std::vector<int32_t>>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const auto& a = got[i];
    const auto& b = want[i];
    for (size_t j = 0; j < std::max(a.size(), b.size()); ++j) {
      if (j < a.size() && j < b.size() && a[j] == b[j]) continue;
      const auto tok = [&](const std::vector<int32_t>& v) {
        return j < v.size() ? std::to_string(v[j]) : std::string("the end");
      };
      return "request " + std::to_string(i) + " token " + std::to_string(j) + ": " + tok(a) +
             " against " + tok(b);
    }
  }
  return got.size() == want.size() ? "" : "the request counts differ";
}

// --spec-oracle-accept: the same requests again with speculative decoding, the oracle drafter
// proposing the run above's own outputs at each acceptance rate (engine/oracle_drafter.h):
// what verification buys at that rate, the outputs checked equal to the run without drafts. On
// cuda without batch invariance a verification rounds as a prefill chunk does, not as a decode
// step, so an output may part at a near-tie: that is reported, not an error. The rates are in
// [0, 1]: run_engine_bench refused any other before running anything.
deepinfer::StatusOr<nlohmann::json> spec_oracle_runs(const deepinfer::EngineArgs& base, int n,
                                                     int input_len, int output_len,
                                                     const EngineRun& off, int64_t off_steps,
                                                     int64_t vocab_size, const ForwardFlags& f) {
  nlohmann::json rows = nlohmann::json::array();
  const double out_tok = static_cast<double>(n) * output_len;
  auto switches = deepinfer::resolve_switches(base.switches);
  if (!switches.ok()) return switches.status();
  const bool bitwise = base.device != Device::kCuda || switches->batch_invariant;
  std::printf("\nspeculative decoding, oracle drafter (up to %lld drafts per step):\n",
              (long long)base.switches.nextn_decode.value_or(deepinfer::kDefaultNextnDecode));
  // The wall includes the prompts' prefill, which speculation does not touch: the decode's own
  // speed-up is the mean TPOT's.
  const double off_tpot = off.mean_tpot();
  std::printf(
      "| acceptance | wall s | output tok/s | wall speed-up | TPOT ms | decode speed-up | steps | "
      "drafts | accepted | mean accepted per verification | accepted share by draft position | "
      "outputs as without drafts |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf("| off | %.3f | %.1f | 1.00x | %.2f | 1.00x | %lld | 0 | 0 | - | - | - |\n",
              off.wall_s, out_tok / off.wall_s, 1e3 * off_tpot, (long long)off_steps);
  for (double rate : f.spec_oracle_accept) {
    deepinfer::EngineArgs a = base;
    auto oracle = std::make_shared<deepinfer::OracleDrafter>(rate, 7, vocab_size);
    for (int i = 0; i < n; ++i) oracle->add(off.prompts[size_t(i)], off.outputs[size_t(i)]);
    a.drafter = oracle;
    auto engine = Engine::create(a);
    if (!engine.ok()) return engine.status();
    ASSIGN_OR_RETURN(const deepinfer::EngineStats warm,
                     warm_up(**engine, f.warmup, n, input_len, output_len));
    ASSIGN_OR_RETURN(EngineRun on, drive(**engine, n, input_len, output_len));
    const deepinfer::EngineStats st = stats_since((*engine)->stats(), warm);
    engine->reset();
    const bool same = on.outputs == off.outputs;
    const double mean_accepted =
        st.spec_verifications ? double(st.spec_accepted_tokens) / st.spec_verifications : 0.0;
    std::vector<double> at;
    std::string by_pos;
    for (int64_t c : st.spec_accepted_at) {
      at.push_back(st.spec_verifications ? double(c) / st.spec_verifications : 0.0);
      char b[16];
      std::snprintf(b, sizeof b, "%s%.2f", by_pos.empty() ? "" : " ", at.back());
      by_pos += b;
    }
    const double tpot = on.mean_tpot(), decode_speedup = tpot > 0 ? off_tpot / tpot : 0.0;
    std::printf(
        "| %.2f | %.3f | %.1f | %.2fx | %.2f | %.2fx | %lld | %lld | %lld | %.2f | %s | %s |\n",
        rate, on.wall_s, out_tok / on.wall_s, off.wall_s / on.wall_s, 1e3 * tpot, decode_speedup,
        (long long)st.steps, (long long)st.spec_draft_tokens, (long long)st.spec_accepted_tokens,
        mean_accepted, by_pos.c_str(),
        same      ? "yes"
        : bitwise ? "NO"
                  : "no (bf16, without batch invariance)");
    rows.push_back({{"accept_rate", rate},
                    {"wall_s", on.wall_s},
                    {"output_tokens_per_s", out_tok / on.wall_s},
                    {"speedup", off.wall_s / on.wall_s},
                    {"tpot_ms", 1e3 * tpot},
                    {"decode_speedup", decode_speedup},
                    {"steps", st.steps},
                    {"draft_tokens", st.spec_draft_tokens},
                    {"accepted_tokens", st.spec_accepted_tokens},
                    {"acceptance_by_position", at},
                    {"outputs_as_without_drafts", same},
                    {"bitwise_expected", bitwise}});
    const std::string parting = same ? "" : first_parting(on.outputs, off.outputs);
    if (!same) rows.back()["first_parting"] = parting;
    if (!same && bitwise)
      return deepinfer::internal_error(
          "speculative decoding changed an output at acceptance " + std::to_string(rate) +
          " (a bug: it must be lossless): " + parting + " without drafts");
    if (!same) std::printf("  outputs first part at %s without drafts\n", parting.c_str());
  }
  return nlohmann::json{{"off_wall_s", off.wall_s},
                        {"off_tpot_ms", 1e3 * off_tpot},
                        {"off_steps", off_steps},
                        {"rows", rows}};
}

int run_engine_bench(const std::string& mode, const std::string& model_arg, int n, int input_len,
                     int output_len, std::string json_path, const ForwardFlags& f,
                     deepinfer::EngineArgs args) {
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) return fail(dir.status());
  for (double rate : f.spec_oracle_accept)  // refused before anything runs
    if (!(rate >= 0 && rate <= 1)) {
      char b[64];
      std::snprintf(b, sizeof b, "--spec-oracle-accept %g: rates are in [0, 1]", rate);
      return fail(deepinfer::invalid_argument(b));
    }
  auto fm = floor_model(*dir);
  if (!fm.ok()) return fail(fm.status());
  args.model = *dir;
  auto engine = Engine::create(args);
  if (!engine.ok()) return fail(engine.status());
  const deepinfer::EngineCapacity cap = (*engine)->capacity();
  deepinfer::cli::print_engine_capacity("bench", cap);
  auto warm = warm_up(**engine, f.warmup, n, input_len, output_len);
  if (!warm.ok()) return fail(warm.status());
  auto run = drive(**engine, n, input_len, output_len);
  if (!run.ok()) return fail(run.status());
  const deepinfer::EngineStats s = stats_since((*engine)->stats(), *warm);
  const int64_t vocab_size = (*engine)->vocab_size();
  engine->reset();  // frees the device before the isolated forward loads its own copy

  const bool cuda = args.device == Device::kCuda;
  // The batch decode steps run at once the queue is full, and its sequences' mean context.
  const int batch = static_cast<int>(
      std::min<int64_t>({n, args.max_num_seqs, std::max<int64_t>(1, cap.max_sequences)}));
  const int64_t context = input_len + output_len / 2;
  std::optional<double> roofline_s;
  const std::optional<StepRoofline> roof = cuda ? open_roofline(*dir, *fm) : std::nullopt;
  const DecodeFloor floor = cuda ? cuda_floor(roof, cap, batch, context, &roofline_s)
                                 : cpu_floor(fm->cpu_weight_bytes, batch);
  const double out_tok = static_cast<double>(n) * output_len;
  const double itl50 = percentile(run->itl, 50);
  std::printf(
      "deepinfer bench %s  model=%s  device=%s (%s)  numerics=%s  requests=%d input=%d "
      "output=%d budget=%lld max_num_seqs=%d warm-up sets=%d\n",
      mode.c_str(), dir->c_str(), cap.device.c_str(), cap.device_name.c_str(), cap.numerics.c_str(),
      n, input_len, output_len, (long long)cap.max_num_batched_tokens, args.max_num_seqs, f.warmup);
  std::printf("| metric | value |\n|---|---|\n");
  std::printf("| wall time | %.3f s |\n| output tokens/s | %.1f |\n", run->wall_s,
              out_tok / run->wall_s);
  std::printf("| total tokens/s (prompt+output) | %.1f |\n",
              (static_cast<double>(n) * input_len + out_tok) / run->wall_s);
  std::printf("| TTFT p50 / p99 | %.2f / %.2f ms |\n", 1e3 * percentile(run->ttft, 50),
              1e3 * percentile(run->ttft, 99));
  std::printf("| ITL p50 / p99 | %.2f / %.2f ms |\n", 1e3 * itl50, 1e3 * percentile(run->itl, 99));
  std::printf("| %s | %.3f ms |\n", floor.label.c_str(), 1e3 * floor.seconds);
  // With --output-len 1 no step is a decode step: a ratio over the floors would read 0.0x.
  const std::string no_itl = "- (no decode step at --output-len 1)";
  const auto over = [&](double floor_s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1fx", itl50 / floor_s);
    return run->itl.empty() ? no_itl : std::string(b);
  };
  std::printf("| decode step measured (ITL p50, B=%d) / that | %s%s |\n", batch,
              floor.seconds > 0 ? over(floor.seconds).c_str() : "-",
              floor.seconds > 0 && itl50 < floor.seconds && !cuda && !run->itl.empty()
                  ? " (under this DRAM estimate: a model this small stays in the caches)"
                  : "");
  if (roofline_s)
    std::printf(
        "| roofline floor, B=%d @ ctx %lld (cuda_bench/roofline.h) / measured over it | %.3f ms "
        "/ %s |\n",
        batch, (long long)context, 1e3 * *roofline_s, over(*roofline_s).c_str());
  const double ttft50 = percentile(run->ttft, 50);
  std::optional<double> prefill_floor_s;
  if (roof) {  // TTFT also holds the queueing and the engine's step; the floor is the forward's
    prefill_floor_s = roof->prefill(input_len).seconds(deepinfer::cli::Hardware{});
    std::printf(
        "| roofline prefill floor, %d-token prompt / TTFT p50 over it | %.3f ms / %.1fx |\n",
        input_len, 1e3 * *prefill_floor_s, ttft50 / *prefill_floor_s);
  }
  std::printf("\nstep-time breakdown over %lld steps (%.2f ms/step):\n", (long long)s.steps,
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

  if (json_path.empty()) json_path = "bench_" + mode + (cuda ? "_cuda" : "") + ".json";
  nlohmann::json j = {{"mode", mode},
                      {"model", *dir},
                      {"device", cap.device},
                      {"device_name", cap.device_name},
                      {"numerics", cap.numerics},
                      {"weight_bytes", cap.weight_bytes},
                      {"kv_pages", cap.num_pages},
                      {"max_num_seqs", args.max_num_seqs},
                      {"cuda_graphs", args.cuda_graphs},
                      {"requests", n},
                      {"warmup_request_sets", f.warmup},
                      {"input_len", input_len},
                      {"output_len", output_len},
                      {"wall_s", run->wall_s},
                      {"output_tokens_per_s", out_tok / run->wall_s},
                      {"ttft_ms_p50", 1e3 * percentile(run->ttft, 50)},
                      {"ttft_ms_p99", 1e3 * percentile(run->ttft, 99)},
                      {"itl_ms_p50", 1e3 * itl50},
                      {"itl_ms_p99", 1e3 * percentile(run->itl, 99)},
                      {"decode_batch", batch},
                      {"decode_context", context},
                      {"decode_step_floor_ms", 1e3 * floor.seconds},
                      {"decode_step_over_floor", floor.seconds > 0 && !run->itl.empty()
                                                     ? nlohmann::json(itl50 / floor.seconds)
                                                     : nlohmann::json(nullptr)},
                      {"floor", floor.json},
                      {"steps", s.steps},
                      {"step_s",
                       {{"schedule", s.schedule_s},
                        {"forward", s.forward_s},
                        {"sample", s.sample_s},
                        {"output", s.output_s},
                        {"total", s.total_s}}},
                      {"scheduler_share", s.schedule_s / tot}};
  if (!cuda) j["copy_bandwidth_gbs"] = floor.json["copy_bandwidth_gbs"];
  if (prefill_floor_s) j["prefill_roofline_ms"] = 1e3 * *prefill_floor_s;

  if (cuda && !f.skip_isolated) {
    const std::string forward_json = json_path + ".forward.json";
    if (auto iso = isolated_decode_ms(*dir, batch, context, f, args, forward_json)) {
      const double engine_ms = 1e3 * itl50;
      const double overhead = engine_ms > 0 ? (engine_ms - *iso) / engine_ms : 0.0;
      std::printf(
          "\nengine overhead at B=%d, ctx %lld = (engine step (ITL p50) %.3f ms - isolated "
          "forward step %.3f ms) / engine step = %.1f%%\n",
          batch, (long long)context, engine_ms, *iso, 100 * overhead);
      j["isolated_forward_step_ms"] = *iso;
      j["isolated_forward_json"] = forward_json;
      j["engine_overhead"] = overhead;
    }
  }
  if (!f.spec_oracle_accept.empty()) {
    auto spec = spec_oracle_runs(args, n, input_len, output_len, *run, s.steps, vocab_size, f);
    if (!spec.ok()) return fail(spec.status());
    j["spec_oracle"] = *spec;
  }
  std::ofstream(json_path) << j.dump(2) << "\n";
  std::printf("\nwrote %s\n", json_path.c_str());
  return 0;
}

int run_bench(int argc, char** argv) {
  // serve has its own flags (a server to load, no engine).
  if (argc > 1 && std::strcmp(argv[1], "serve") == 0) return run_bench_serve(argc - 1, argv + 1);
  std::string mode, model_arg, json_path;
  int num_requests = 0, batch = 1, input_len = 128, output_len = 32;
  deepinfer::EngineArgs args;
  ForwardFlags f;
  CLI::App app{
      "Benchmark on synthetic requests. latency|throughput: through the engine on --device cpu "
      "or cuda (on cuda, then also the GPU forward alone at the same batch, and the engine's "
      "overhead over it). forward: the GPU forward alone (cuda only) over --batch-sizes, next to "
      "its roofline floor, optionally transformers alongside.",
      "deepinfer bench"};
  app.add_option("MODE", mode,
                 "latency (one batch), throughput (many requests), forward (the GPU forward "
                 "alone) or prefix-cache (TTFT of one --input-len prompt on a miss and on hits "
                 "from each cache tier, unit bytes per token, tier load bandwidth); `deepinfer "
                 "bench serve --help` loads a live server")
      ->required()
      ->check(CLI::IsMember({"latency", "throughput", "forward", "prefix-cache"}));
  app.add_option("--model", model_arg, "model directory (default: embedded tiny model)");
  app.add_option("--batch-size", batch, "latency: sequences in the batch")->capture_default_str();
  app.add_option("--num-prompts", num_requests, "throughput: requests (default 64)");
  app.add_option("--input-len", input_len,
                 "prompt tokens per request (forward: the prefill prompt, default 4096; "
                 "prefix-cache: default 16384)")
      ->capture_default_str();
  app.add_option("--output-len", output_len, "generated tokens per request")->capture_default_str();
  deepinfer::cli::add_engine_flags(app, &args);
  app.add_option("--output-json", json_path,
                 "where to write the JSON result (default bench_MODE.json; on cuda "
                 "bench_MODE_cuda.json, the isolated forward's beside it as "
                 "<json>.forward.json)");
  // The GPU forward timed directly (cli/cuda_bench/cuda_bench.h).
  auto& cu = f.cu;
  app.add_flag("--no-isolated", f.skip_isolated,
               "latency|throughput on cuda: skip the isolated-forward comparison");
  app.add_option("--spec-oracle-accept", f.spec_oracle_accept,
                 "latency|throughput: rerun with speculative decoding, an oracle drafter "
                 "proposing the first run's own outputs at each acceptance rate (e.g. 0.6,0.8); on "
                 "cuda its outputs match the first run's only with --batch-invariant")
      ->delimiter(',');
  app.add_option("--warmup-requests", f.warmup,
                 "latency|throughput: request sets like the measured one (other prompts, so the "
                 "prefix cache serves the measured run nothing) run and discarded first (default "
                 "1 on cuda, whose first forward of a shape builds GEMM plans and grows scratch; "
                 "0 on cpu)")
      ->check(CLI::Range(0, 100));
  app.add_option("--steps", cu.steps,
                 "cuda, forward and the isolated comparison: timed decode steps per batch size, "
                 "after 2 warm-up")
      ->capture_default_str();
  app.add_flag("--phase-times", cu.phase_times,
               "cuda, forward and the isolated comparison: after each row's timed runs, a few "
               "more (eager) with the GPU time of every forward phase (attention "
               "projections/state/output, MoE router/experts, mHC, head)");
  app.add_option("--batch-sizes", f.batch_sizes,
                 "forward: decode batch sizes, comma-separated (default 1,8,32,128)");
  app.add_option("--context", cu.context, "forward: context tokens per sequence before decode")
      ->capture_default_str();
  app.add_option("--long-context", cu.long_context,
                 "forward: also prefill this many tokens and time batch-1 decode there (0: skip)")
      ->capture_default_str();
  app.add_option("--prefill-chunk", cu.prefill_chunk,
                 "forward: prefill chunk tokens (default: the engine's step budget on cuda, "
                 "8192, so a prompt is chunked as serve chunks it)");
  app.add_option("--reference", cu.reference,
                 "forward: 'transformers' also runs DeepseekV4ForCausalLM (eager) on the same GPU "
                 "and model via --reference-script, after freeing ours, and prints it alongside");
  app.add_option("--reference-script", cu.reference_script,
                 "forward: the reference script (default bench/transformers_reference_bench.py)");
  app.add_option("--reference-args", cu.reference_args,
                 "forward: extra arguments for the reference script, e.g. '--load dequant'");
  app.add_option("--python", cu.python, "forward: python interpreter for the reference")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (auto st = deepinfer::cli::resolve_engine_device(&args); !st.ok()) return fail(st);
  if (mode == "forward") {
    const int64_t prefill_len = app.get_option("--input-len")->count() > 0 ? input_len : 4096;
    return run_forward(model_arg, json_path, prefill_len, f, args);
  }
  for (const char* flag : kForwardOnlyFlags)
    if (app.get_option(flag)->count() > 0)
      return fail(std::string(flag) + " is a 'bench forward' flag (the GPU forward alone); " +
                  mode +
                  " runs the engine, whose batch is --batch-size / --num-prompts and "
                  "--max-num-seqs");
  if (mode == "prefix-cache") {
    const int len = app.get_option("--input-len")->count() > 0 ? input_len : 16384;
    return deepinfer::cli::run_prefix_cache_bench(model_arg, len, json_path, args);
  }
  if (input_len < 1 || output_len < 1 || batch < 1 || num_requests < 0)
    return fail("--input-len, --output-len and --batch-size must be positive");
  if (mode == "latency") args.max_num_seqs = std::max(args.max_num_seqs, batch);
  const int n = mode == "latency" ? batch : (num_requests > 0 ? num_requests : 64);
  if (f.warmup < 0) f.warmup = args.device == Device::kCuda ? 1 : 0;
  return run_engine_bench(mode, model_arg, n, input_len, output_len, json_path, f, args);
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kBench, "bench",
                           "benchmark: latency | throughput (the engine), forward (the GPU "
                           "forward alone)",
                           run_bench);
