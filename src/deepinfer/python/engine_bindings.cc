// pybind11 module `deepinfer._deepinfer`: a thin JSON-in/JSON-out bridge to engine::Engine, so the
// Python layer (deepinfer/__init__.py) owns the vLLM-style classes and the C++ side stays small.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "deepinfer/engine/engine.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "deepinfer/runtime/device.h"

namespace py = pybind11;
using nlohmann::json;

namespace deepinfer {
namespace {

[[noreturn]] void raise(const Status& st) { throw py::value_error(st.to_string()); }

json output_to_json(const RequestOutput& o) {
  json outs = json::array();
  for (const auto& c : o.outputs) {
    json lps = json::array();
    for (const auto& lp : c.logprobs) {
      json top = json::array();
      for (const auto& [id, v] : lp.top) top.push_back({id, v});
      lps.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"top", top}});
    }
    outs.push_back({{"index", c.index},
                    {"token_ids", c.token_ids},
                    {"text", c.text},
                    {"finish_reason", c.finish_reason ? json(*c.finish_reason) : json()},
                    {"stop_reason", c.stop_reason ? json(*c.stop_reason) : json()},
                    {"logprobs", c.logprobs.empty() ? json() : lps}});
  }
  return {{"request_id", o.request_id},
          {"prompt_token_ids", o.prompt_token_ids},
          {"outputs", outs},
          {"usage",
           {{"prompt_tokens", o.usage.prompt_tokens},
            {"completion_tokens", o.usage.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", o.usage.cached_tokens}}},
            {"prompt_cache_hit_tokens", o.usage.cached_tokens},
            {"prompt_cache_miss_tokens", o.usage.prompt_tokens - o.usage.cached_tokens}}}};
}

class PyEngine {
 public:
  explicit PyEngine(const std::string& args_json) {
    json a = json::parse(args_json);
    EngineArgs args;
    // Device and memory first: a bad value fails before the default model is written.
    if (a.contains("device") && !a["device"].is_null()) {
      auto d = runtime::parse_device(a["device"].get<std::string>(), "device");
      if (!d.ok()) raise(d.status());
      args.device = *d;
    } else {
      auto d = runtime::default_device();  // DEEPINFER_ACCELERATOR, else cpu
      if (!d.ok()) raise(d.status());
      args.device = *d;
    }
    args.gpu_memory_utilization = a.value("gpu_memory_utilization", args.gpu_memory_utilization);
    if (!(args.gpu_memory_utilization > 0 && args.gpu_memory_utilization <= 1))
      raise(invalid_argument("gpu_memory_utilization must be in (0, 1], got " +
                             json(args.gpu_memory_utilization).dump()));
    args.model = a.value("model", std::string());
    if (args.model.empty()) {
      auto dir = v4::ensure_default_model(a.value("tokenizer_dir", std::string()));
      if (!dir.ok()) raise(dir.status());
      args.model = *dir;
    }
    args.numerics = a.value("numerics", args.numerics);
    args.cuda_graphs = a.value("cuda_graphs", args.cuda_graphs);
    args.kv_memory_bytes = a.value("kv_memory_bytes", args.kv_memory_bytes);
    args.max_num_seqs = a.value("max_num_seqs", args.max_num_seqs);
    args.max_num_batched_tokens = a.value("max_num_batched_tokens", args.max_num_batched_tokens);
    args.max_model_len = a.value("max_model_len", args.max_model_len);
    args.policy = a.value("policy", args.policy);
    args.seed = a.value("seed", args.seed);
    args.special_tokens_in_content =
        a.value("special_tokens_in_content", args.special_tokens_in_content);
    args.enable_prefix_cache = a.value("enable_prefix_cache", args.enable_prefix_cache);
    args.kv_host_memory_bytes = a.value("kv_host_memory_bytes", args.kv_host_memory_bytes);
    args.kv_disk_dir = a.value("kv_disk_dir", args.kv_disk_dir);
    args.kv_disk_bytes = a.value("kv_disk_bytes", args.kv_disk_bytes);
    args.kv_cluster_dir = a.value("kv_cluster_dir", args.kv_cluster_dir);
    args.kv_cluster_bytes = a.value("kv_cluster_bytes", args.kv_cluster_bytes);
    args.kv_cluster_redis = a.value("kv_cluster_redis", args.kv_cluster_redis);
    args.kv_cache_interval = a.value("kv_cache_interval", args.kv_cache_interval);
    args.kv_retention_agent_s = a.value("kv_retention_agent_s", args.kv_retention_agent_s);
    args.kv_retention_chat_s = a.value("kv_retention_chat_s", args.kv_retention_chat_s);
    args.kv_cache_salt = a.value("kv_cache_salt", args.kv_cache_salt);
    if (a.contains("json_whitespace") && !a["json_whitespace"].is_null()) {
      const json& v = a["json_whitespace"];
      if (!v.is_string() || (v != "bounded" && v != "flexible"))
        raise(invalid_argument("json_whitespace must be 'bounded' or 'flexible', got " + v.dump()));
      args.json_flexible_whitespace = v == "flexible";
    }
    // DeepSeek's switches: absent or None leaves them to their DEEPINFER_* variables.
    if (a.contains("batch_invariant") && !a["batch_invariant"].is_null()) {
      if (!a["batch_invariant"].is_boolean())
        raise(invalid_argument("batch_invariant must be True or False, got " +
                               a["batch_invariant"].dump()));
      args.switches.batch_invariant = a["batch_invariant"].get<bool>();
    }
    if (a.contains("yoco_prefill_truncation_mode") &&
        !a["yoco_prefill_truncation_mode"].is_null()) {
      const json& v = a["yoco_prefill_truncation_mode"];
      auto m = parse_yoco_mode(v.is_string() ? v.get<std::string>() : v.dump());
      if (!m.ok()) raise(invalid_argument("yoco_prefill_truncation_mode " + m.status().message()));
      args.switches.yoco_mode = *m;
    }
    if (a.contains("yoco_prefill_keep_tokens") && !a["yoco_prefill_keep_tokens"].is_null()) {
      if (!a["yoco_prefill_keep_tokens"].is_number_integer())
        raise(invalid_argument("yoco_prefill_keep_tokens must be an integer, got " +
                               a["yoco_prefill_keep_tokens"].dump()));
      args.switches.yoco_keep_tokens = a["yoco_prefill_keep_tokens"].get<int64_t>();
    }
    if (a.contains("enable_mtp") && !a["enable_mtp"].is_null()) {
      if (!a["enable_mtp"].is_boolean())
        raise(invalid_argument("enable_mtp must be True or False, got " + a["enable_mtp"].dump()));
      args.switches.enable_mtp = a["enable_mtp"].get<bool>();
    }
    if (a.contains("num_speculative_tokens") && !a["num_speculative_tokens"].is_null()) {
      if (!a["num_speculative_tokens"].is_number_integer())
        raise(invalid_argument("num_speculative_tokens must be an integer, got " +
                               a["num_speculative_tokens"].dump()));
      args.switches.nextn_decode = a["num_speculative_tokens"].get<int64_t>();
    }
    py::gil_scoped_release release;
    auto e = Engine::create(args);
    if (!e.ok()) {
      py::gil_scoped_acquire acquire;
      raise(e.status());
    }
    engine_ = std::move(e).value();
    model_dir_ = args.model;
  }

  // Each request: {"prompt" | "prompt_token_ids" | "chat", "params": {...}}. Runs them together.
  std::vector<std::string> generate(const std::vector<std::string>& requests) {
    std::vector<GenerateRequest> reqs;
    for (const std::string& text : requests) {
      json r = json::parse(text);
      GenerateRequest g;
      if (r.contains("prompt")) g.prompt = r["prompt"].get<std::string>();
      if (r.contains("prompt_token_ids"))
        g.prompt_ids = r["prompt_token_ids"].get<std::vector<int32_t>>();
      if (r.contains("chat")) g.chat = r["chat"];
      if (r.contains("cache_retention")) {
        const std::string v = r["cache_retention"].is_string()
                                  ? r["cache_retention"].get<std::string>()
                                  : r["cache_retention"].dump();
        const auto c = parse_cache_retention(v);
        if (!c)
          raise(invalid_argument("cache_retention must be \"agent\", \"chat\" or \"none\", got " +
                                 v));
        g.cache_retention = *c;
      }
      auto p = sample::sampling_params_from_json(r.value("params", json::object()));
      if (!p.ok()) raise(p.status());
      g.params = *p;
      reqs.push_back(std::move(g));
    }
    std::vector<RequestOutput> outs(reqs.size());
    Status first_error;
    {
      py::gil_scoped_release release;
      std::mutex m;
      std::condition_variable cv;
      size_t done = 0, submitted = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        Status st = engine_->submit(reqs[i], [&, i](const RequestOutput& o) {
          if (!o.finished) return;
          std::lock_guard<std::mutex> lock(m);
          outs[i] = o;
          ++done;
          cv.notify_all();
        });
        if (!st.ok()) {
          first_error = st.with_context("request " + std::to_string(i));
          break;
        }
        ++submitted;
      }
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return done == submitted; });
    }
    if (!first_error.ok()) raise(first_error);
    // A request the engine took and then ended on an error (one the KV pool can never hold, a
    // failed step): raised as a submit error is, not returned as an empty "abort".
    for (size_t i = 0; i < outs.size(); ++i)
      if (!outs[i].status.ok()) raise(outs[i].status.with_context("request " + std::to_string(i)));
    std::vector<std::string> out;
    for (const auto& o : outs) out.push_back(output_to_json(o).dump());
    return out;
  }

  std::string model_dir() const { return model_dir_; }

  std::string capacity() const {
    const EngineCapacity c = engine_->capacity();
    return json{{"device", c.device},         {"device_name", c.device_name},
                {"numerics", c.numerics},     {"weight_bytes", c.weight_bytes},
                {"num_pages", c.num_pages},   {"page_bytes", c.page_bytes},
                {"max_tokens", c.max_tokens}, {"max_sequences", c.max_sequences}}
        .dump();
  }

 private:
  std::unique_ptr<Engine> engine_;
  std::string model_dir_;
};

}  // namespace
}  // namespace deepinfer

PYBIND11_MODULE(_deepinfer, m) {
  m.doc() = "deepinfer engine bridge (use the deepinfer package, not this module)";
  py::class_<deepinfer::PyEngine>(m, "Engine")
      .def(py::init<const std::string&>())
      .def("generate", &deepinfer::PyEngine::generate)
      .def_property_readonly("model_dir", &deepinfer::PyEngine::model_dir)
      .def("capacity", &deepinfer::PyEngine::capacity);
}
