#include "deepinfer/cli/engine_flags.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "deepinfer/runtime/device.h"

namespace deepinfer::cli {
namespace {

// CLI11 prefixes a validator's message with the flag's name ("--device: ...").
CLI::Validator device_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return runtime::parse_device(s).ok() ? std::string()
                                             : "must be cpu or cuda (nvidia), got '" + s + "'";
      },
      "cpu|cuda", "device");
}

CLI::Validator fraction_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(v > 0 && v <= 1))
          return "must be a fraction in (0, 1], got '" + s + "'";
        return std::string();
      },
      "(0,1]", "fraction");
}

std::string device_default_text() {
  const char* env = std::getenv("DEEPINFER_ACCELERATOR");
  return env && *env ? std::string("now DEEPINFER_ACCELERATOR=") + env
                     : std::string("DEEPINFER_ACCELERATOR is unset");
}

}  // namespace

void add_engine_flags(CLI::App& app, EngineArgs* a) {
  app.add_option_function<std::string>(
         "--device", [a](const std::string& s) { a->device = *runtime::parse_device(s); },
         "where the model runs: cpu (the reference backend) or cuda (also spelled nvidia); "
         "default: $DEEPINFER_ACCELERATOR (nvidia | cpu) when set, else cpu (" +
             device_default_text() + ")")
      ->check(device_validator());
  app.add_option("--numerics", a->numerics,
                 "auto (official on cpu, plain on cuda), official (simulated quantization, as "
                 "the reference inference/model.py) or plain (as transformers)")
      ->check(CLI::IsMember({"auto", "official", "plain"}))
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                 "cuda: fraction of the GPU's memory for weights and the KV pool, in (0, 1] (the "
                 "pool gets what the weights leave); ignored on cpu")
      ->check(fraction_validator())
      ->capture_default_str();
  app.add_flag_callback(
      "--no-cuda-graphs", [a] { a->cuda_graphs = false; },
      "cuda: launch every decode step eagerly instead of replaying CUDA graphs");
  app.add_option("--kv-memory", a->kv_memory_bytes,
                 "bytes for sequence state (the KV pool), e.g. 1073741824; 0: 1 GiB on cpu, on "
                 "cuda what --gpu-memory-utilization leaves after the weights (a value replaces "
                 "that budget)")
      ->capture_default_str();
  app.add_option("--max-num-seqs", a->max_num_seqs, "running sequences at once")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", a->max_num_batched_tokens,
                 "tokens per engine step (chunked prefill budget)")
      ->capture_default_str();
  app.add_option("--max-model-len", a->max_model_len, "prompt + output limit (0: 65536)")
      ->capture_default_str();
  app.add_option("--policy", a->policy, "scheduling policy: fcfs or priority")
      ->capture_default_str();
  app.add_flag("--special-tokens-in-content", a->special_tokens_in_content,
               "chat requests: let message text that spells a special token (<｜Assistant｜>, "
               "</think>, DSML tags) become that control token (unsafe with untrusted users; "
               "default: such text is tokenized as plain text)");
}

Status resolve_engine_device(EngineArgs* a) {
  if (a->device) return ok_status();
  ASSIGN_OR_RETURN(runtime::Device d, runtime::default_device());
  a->device = d;
  return ok_status();
}

void print_engine_capacity(const char* command, const EngineCapacity& cap) {
  const std::string dev = cap.device_name.empty() || cap.device_name == cap.device
                              ? cap.device
                              : cap.device + " (" + cap.device_name + ")";
  std::fprintf(
      stderr,
      "deepinfer %s: device %s, numerics %s, weights %.2f GiB; KV pool %lld pages of "
      "%lld bytes: up to %lld tokens for one sequence, or %lld sequences of up to one page "
      "of tokens each\n",
      command, dev.c_str(), cap.numerics.c_str(), cap.weight_bytes / double(1ll << 30),
      (long long)cap.num_pages, (long long)cap.page_bytes, (long long)cap.max_tokens,
      (long long)cap.max_sequences);
}

}  // namespace deepinfer::cli
