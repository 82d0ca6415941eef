#include "deepinfer/cli/cuda_bench/cuda_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

#include "deepinfer/cli/cuda_bench/roofline.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"

namespace deepinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

struct Row {
  Row(std::string n, std::string k, int64_t b, int64_t t, int64_t ctx)
      : name(std::move(n)), kind(std::move(k)), batch(b), tokens(t), context(ctx) {}
  std::string name, kind;  // kind: prefill, decode, long_prefill, long_decode
  int64_t batch = 1, tokens = 0, context = 0;
  double ms = 0;  // prefill: the whole prompt; decode: one step (median)
  std::vector<double> all_ms;
  StepFloor floor;
  double ref_ms = 0;
  std::string ref_error;                    // set when the reference ran and failed on this row
  int64_t replayed = 0;                     // decode: timed steps that ran from a CUDA graph
  std::map<std::string, double> phases_ms;  // --phase-times: GPU ms per step (prefill: per run)

  // Decode: one token per sequence per step; prefill: the prompt.
  double tokens_per_s() const {
    const bool decode = kind == "decode" || kind == "long_decode";
    return ms > 0 ? double(decode ? batch : tokens) / (ms / 1e3) : 0;
  }
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// --phase-times: extra decode steps per row, with an event per forward phase.
constexpr int kPhaseSteps = 3;

// Our measurements. Returns false (after printing why) on an error.
bool measure(const CudaBenchOptions& o, const v4::Config& c, const Roofline& roof,
             std::vector<Row>* rows, int64_t* weight_bytes, int64_t* stored_bytes, double* load_s) {
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  cuda::CudaModelOptions mo;
  mo.max_sequences = max_batch + 1;  // slot 0 keeps the context every batch starts from
  mo.max_tokens = std::max({o.context, o.prefill_len, o.long_context}) + o.warmup + o.steps + 1 +
                  (o.phase_times ? kPhaseSteps : 0);
  mo.max_chunk = std::max<int64_t>(o.prefill_chunk, max_batch);
  mo.cuda_graphs = o.cuda_graphs;
  mo.batch_invariant = o.batch_invariant;
  int64_t next_report = 0;
  mo.progress = [&](const v4::LoadProgress& p) {
    if (p.bytes_done < next_report && p.tensors_done < p.tensors_total) return;
    next_report = p.bytes_done + p.bytes_total / 20;
    std::fprintf(stderr, "loading weights: %.1f / %.1f GB (%lld / %lld tensors)\n",
                 p.bytes_done / 1e9, p.bytes_total / 1e9, (long long)p.tensors_done,
                 (long long)p.tensors_total);
  };
  const auto t_load = Clock::now();
  auto loaded = cuda::CudaModel::load(o.model_dir, mo);
  if (!loaded.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", loaded.status().to_string().c_str());
    return false;
  }
  *load_s = ms_since(t_load) / 1e3;
  std::unique_ptr<cuda::CudaModel> m = std::move(*loaded);
  *weight_bytes = m->weight_bytes();
  *stored_bytes = m->stored_weight_bytes();
  std::fprintf(stderr, "loaded in %.1f s: %.1f GB of weights on the device (%.1f GB stored)\n",
               *load_s, *weight_bytes / 1e9, *stored_bytes / 1e9);

  std::mt19937_64 rng(o.seed);
  auto random_ids = [&](int64_t n) {
    std::vector<int32_t> ids(n);
    for (auto& id : ids) id = static_cast<int32_t>(2 + rng() % uint64_t(c.vocab_size - 2));
    return ids;
  };
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "deepinfer bench: %s\n", st.to_string().c_str());
    return false;
  };
  auto prefill = [&](int slot, const std::vector<int32_t>& ids, double* ms) {
    m->reset(slot);
    const auto t0 = Clock::now();
    const Status st = m->forward(slot, ids.data(), int64_t(ids.size()), false, nullptr);
    *ms = ms_since(t0);
    return st;
  };
  // Warm-up steps are a bucket's eager step and its capture; the timed ones should all replay.
  auto decode_steps = [&](const std::vector<int>& slots, Row* r) {
    std::vector<int32_t> greedy;
    int64_t replayed_before = 0;
    for (int i = 0; i < o.warmup + o.steps; ++i) {
      const std::vector<int32_t> ids = random_ids(int64_t(slots.size()));
      if (i == o.warmup) replayed_before = m->decode_steps().replayed;
      const auto t0 = Clock::now();
      RETURN_IF_ERROR(m->decode(slots.data(), ids.data(), int64_t(slots.size()), nullptr, &greedy));
      if (i >= o.warmup) r->all_ms.push_back(ms_since(t0));
    }
    r->replayed = m->decode_steps().replayed - replayed_before;
    return ok_status();
  };

  // --phase-times: `runs` more runs of `work` (eager, an event per phase), averaged into the row.
  auto phases = [&](Row* r, int runs, const std::function<Status()>& work) -> Status {
    if (!o.phase_times) return ok_status();
    m->set_phase_timing(true);
    for (int i = 0; i < runs; ++i) RETURN_IF_ERROR(work());
    for (const auto& [name, ms] : m->take_phase_times_ms()) r->phases_ms[name] = ms / runs;
    m->set_phase_timing(false);
    std::vector<std::pair<double, std::string>> by_time;
    double total = 0;
    for (const auto& [name, ms] : r->phases_ms) by_time.push_back({ms, name}), total += ms;
    std::sort(by_time.rbegin(), by_time.rend());
    std::fprintf(stderr, "%s: GPU time per phase (eager, %.2f ms in all):\n", r->name.c_str(),
                 total);
    for (const auto& [ms, name] : by_time)
      std::fprintf(stderr, "  %8.3f ms  %5.1f%%  %s\n", ms, 100 * ms / total, name.c_str());
    return ok_status();
  };

  // Prefill: one untimed warm-up (GEMM plans, scratch growth), then the median of 3.
  double ms = 0;
  if (Status st = prefill(0, random_ids(std::min<int64_t>(512, o.prefill_len)), &ms); !st.ok())
    return fail(st);
  Row pre{"prefill " + std::to_string(o.prefill_len), "prefill", 1, o.prefill_len, 0};
  for (int rep = 0; rep < 3; ++rep) {
    if (Status st = prefill(0, random_ids(o.prefill_len), &ms); !st.ok()) return fail(st);
    pre.all_ms.push_back(ms);
    std::fprintf(stderr, "%s: %.1f ms\n", pre.name.c_str(), ms);
  }
  pre.ms = median(pre.all_ms);
  pre.floor = roof.prefill(o.prefill_len);
  if (Status st = phases(&pre, 1, [&] { return prefill(0, random_ids(o.prefill_len), &ms); });
      !st.ok())
    return fail(st);
  rows->push_back(pre);

  // Decode: every batch starts from a copy of slot 0's context; each row gets its own random
  // token every step, so rows route to different experts.
  if (o.context != o.prefill_len) {
    if (Status st = prefill(0, random_ids(o.context), &ms); !st.ok()) return fail(st);
  }
  for (int B : o.batches) {
    std::vector<int> slots;
    for (int s = 1; s <= B; ++s) {
      if (Status st = m->copy_sequence(0, s); !st.ok()) return fail(st);
      slots.push_back(s);
    }
    Row r{"decode B=" + std::to_string(B) + " @ ctx " + std::to_string(o.context), "decode", B, 0,
          o.context};
    if (Status st = decode_steps(slots, &r); !st.ok()) return fail(st);
    r.ms = median(r.all_ms);
    r.floor = roof.decode(B, o.context);
    if (Status st = phases(&r, kPhaseSteps,
                           [&] {
                             const std::vector<int32_t> ids = random_ids(int64_t(slots.size()));
                             return m->decode(slots.data(), ids.data(), int64_t(slots.size()),
                                              nullptr, nullptr);
                           });
        !st.ok())
      return fail(st);
    std::fprintf(stderr, "%s: %.2f ms per step (%lld of %zu timed steps from a CUDA graph)\n",
                 r.name.c_str(), r.ms, (long long)r.replayed, r.all_ms.size());
    rows->push_back(r);
  }

  if (o.long_context > 0) {
    const std::string ctx = std::to_string(o.long_context);
    Row lp{"long ctx " + ctx + ": prefill", "long_prefill", 1, o.long_context, 0};
    std::fprintf(stderr, "long-context prefill of %s tokens ...\n", ctx.c_str());
    if (Status st = prefill(1, random_ids(o.long_context), &lp.ms); !st.ok()) return fail(st);
    lp.floor = roof.prefill(o.long_context);
    if (Status st = phases(&lp, 1,
                           [&] {
                             double unused = 0;
                             return prefill(1, random_ids(o.long_context), &unused);
                           });
        !st.ok())
      return fail(st);
    rows->push_back(lp);
    Row ld{"long ctx " + ctx + ": decode B=1", "long_decode", 1, 0, o.long_context};
    if (Status st = decode_steps({1}, &ld); !st.ok()) return fail(st);
    ld.ms = median(ld.all_ms);
    ld.floor = roof.decode(1, o.long_context);
    if (Status st = phases(&ld, kPhaseSteps,
                           [&] {
                             const int slot = 1;
                             const std::vector<int32_t> ids = random_ids(1);
                             return m->decode(&slot, ids.data(), 1, nullptr, nullptr);
                           });
        !st.ok())
      return fail(st);
    std::fprintf(stderr, "%s: %.2f ms per step (%lld of %zu timed steps from a CUDA graph)\n",
                 ld.name.c_str(), ld.ms, (long long)ld.replayed, ld.all_ms.size());
    rows->push_back(ld);
  }
  return true;  // the model is freed here, before any reference run needs the GPU
}

// Runs the transformers reference and fills ref_ms / ref_error of the matching rows.
nlohmann::json run_reference(const CudaBenchOptions& o, std::vector<Row>* rows) {
  const std::string out = o.json_path.empty() ? "bench_reference.json" : o.json_path + ".ref.json";
  std::string cmd = shell_quote(o.python) + " " + shell_quote(o.reference_script) + " --model " +
                    shell_quote(o.model_dir) + " --prefill-len " + std::to_string(o.prefill_len) +
                    " --context " + std::to_string(o.context) + " --batch-sizes " +
                    join(o.batches) + " --decode-steps " + std::to_string(o.steps) +
                    " --long-context " + std::to_string(o.long_context) + " --json " +
                    shell_quote(out) + (o.reference_args.empty() ? "" : " " + o.reference_args);
  std::fprintf(stderr, "reference: %s\n", cmd.c_str());
  const int rc = std::system(cmd.c_str());
  nlohmann::json ref;
  std::ifstream in(out);
  if (rc != 0 || !in) {
    std::fprintf(stderr, "deepinfer bench: the reference run failed (exit %d, %s)\n", rc,
                 in ? "result file present" : ("no " + out).c_str());
    for (Row& r : *rows) r.ref_error = "reference run failed";
    return {{"error", "exit " + std::to_string(rc)}};
  }
  ref = nlohmann::json::parse(in, nullptr, false);
  if (ref.is_discarded() || !ref.contains("results")) {
    for (Row& r : *rows) r.ref_error = "unreadable " + out;
    return {{"error", "unreadable " + out}};
  }
  for (Row& r : *rows) {
    r.ref_error = "not run";
    for (const auto& x : ref["results"]) {
      if (x.value("kind", "") != r.kind || x.value("batch", 0) != r.batch) continue;
      if (x.contains("error")) {
        r.ref_error = x["error"].get<std::string>().substr(0, 60);
      } else {
        r.ref_ms = x.value("step_ms", 0.0);
        r.ref_error.clear();
      }
    }
  }
  return ref;
}

}  // namespace

int run_cuda_bench(const CudaBenchOptions& o) {
  auto cfg = v4::load_config(o.model_dir);
  if (!cfg.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", cfg.status().to_string().c_str());
    return 1;
  }
  auto roof = Roofline::open(o.model_dir, *cfg);
  if (!roof.ok()) {
    std::fprintf(stderr, "deepinfer bench: %s\n", roof.status().to_string().c_str());
    return 1;
  }
  std::vector<Row> rows;
  int64_t weight_bytes = 0, stored_bytes = 0;
  double load_s = 0;
  if (!measure(o, *cfg, *roof, &rows, &weight_bytes, &stored_bytes, &load_s)) return 1;
  nlohmann::json ref;
  if (o.reference == "transformers") ref = run_reference(o, &rows);

  const Hardware hw;
  std::printf(
      "deepinfer bench %s --device cuda  model=%s  layers=%d  weights on device %.1f GB, stored "
      "%.1f GB (%.2fx; load %.1f s)  prefill chunks of %lld tokens%s\n",
      o.mode.c_str(), o.model_dir.c_str(), cfg->num_layers, weight_bytes / 1e9, stored_bytes / 1e9,
      double(weight_bytes) / double(std::max<int64_t>(stored_bytes, 1)), load_s,
      static_cast<long long>(o.prefill_chunk), o.batch_invariant ? "  batch-invariant" : "");
  std::printf(
      "floor = max((weight + state bytes) / %.1f TB/s, FLOPs / %.0f TFLOP/s); weights as stored "
      "(FP8, MXFP4, BF16), state as bf16\n\n",
      hw.bytes_per_s / 1e12, hw.flops_per_s / 1e12);
  std::printf(
      "| config | deepinfer ms | deepinfer tok/s | floor ms | bytes GB | TFLOP | measured / floor "
      "|%s\n",
      o.reference.empty() ? ""
                          : " transformers ms | transformers tok/s | transformers / deepinfer |");
  std::printf("|---|---:|---:|---:|---:|---:|---:|%s\n",
              o.reference.empty() ? "" : "---:|---:|---:|");
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& r : rows) {
    const double floor_ms = 1e3 * r.floor.seconds(hw);
    std::printf("| %s | %.2f | %.1f | %.3f | %.2f | %.3f | %.1fx |", r.name.c_str(), r.ms,
                r.tokens_per_s(), floor_ms, (r.floor.weight_bytes + r.floor.state_bytes) / 1e9,
                r.floor.flops / 1e12, r.ms / floor_ms);
    if (!o.reference.empty()) {
      if (!r.ref_error.empty()) {
        std::printf(" %s | | |", r.ref_error.c_str());
      } else {
        const double tps = r.tokens_per_s() * r.ms / r.ref_ms;
        std::printf(" %.2f | %.1f | %.2fx |", r.ref_ms, tps, r.ref_ms / r.ms);
      }
    }
    std::printf("\n");
    nlohmann::json j = {{"name", r.name},
                        {"kind", r.kind},
                        {"batch", r.batch},
                        {"tokens", r.tokens},
                        {"context", r.context},
                        {"ms", r.ms},
                        {"all_ms", r.all_ms},
                        {"tokens_per_s", r.tokens_per_s()},
                        {"floor_ms", floor_ms},
                        {"floor_weight_bytes", r.floor.weight_bytes},
                        {"floor_state_bytes", r.floor.state_bytes},
                        {"floor_flops", r.floor.flops},
                        {"measured_over_floor", r.ms / floor_ms}};
    if (r.kind == "decode" || r.kind == "long_decode") j["timed_steps_from_graph"] = r.replayed;
    if (!r.phases_ms.empty()) j["phase_ms"] = r.phases_ms;
    if (!o.reference.empty()) {
      if (r.ref_error.empty())
        j["transformers_ms"] = r.ref_ms;
      else
        j["transformers_error"] = r.ref_error;
    }
    jrows.push_back(j);
  }
  nlohmann::json out = {
      {"mode", o.mode},
      {"device", "cuda"},
      {"model", o.model_dir},
      {"weights_on_device_bytes", weight_bytes},
      {"weights_stored_bytes", stored_bytes},
      {"load_s", load_s},
      {"warmup_steps", o.warmup},
      {"cuda_graphs", o.cuda_graphs},
      {"batch_invariant", o.batch_invariant},
      {"timed_steps", o.steps},
      {"prefill_chunk", o.prefill_chunk},
      {"hardware", {{"bytes_per_s", hw.bytes_per_s}, {"flops_per_s", hw.flops_per_s}}},
      {"rows", jrows}};
  if (!ref.is_null()) out["reference"] = ref;
  const std::string path = o.json_path.empty() ? "bench_" + o.mode + "_cuda.json" : o.json_path;
  std::ofstream(path) << out.dump(2) << "\n";
  std::printf("\nwrote %s\n", path.c_str());
  return 0;
}

}  // namespace deepinfer::cli
