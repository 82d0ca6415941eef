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

// Expert parallelism (EngineArgs::expert_parallel): one process per rank.
void add_expert_parallel_flags(CLI::App& app, EngineArgs* a) {
  app.add_option("--expert-parallel-size", a->expert_parallel.size,
                 "ranks of an expert-parallel group: each process is one rank with its own "
                 "requests (data-parallel attention) and 1/N of the routed experts, stepping in "
                 "lockstep with the others (CPU only so far; no speculative decoding)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--expert-parallel-rank", a->expert_parallel.rank,
                 "this process's rank in the group (0 listens at --expert-parallel-address)")
      ->capture_default_str();
  app.add_option("--expert-parallel-address", a->expert_parallel.address,
                 "host:port of rank 0, where the ranks join (and rank 0 listens)")
      ->capture_default_str();
  app.add_option("--eplb-plan", a->eplb_plan,
                 "EPLB plan (JSON, from `deepinfer eplb plan`): which rank holds which routed "
                 "experts per layer, with redundant copies of hot experts; every rank of the group "
                 "gets the same file (default: expert e on rank e % size)");
  app.add_flag_callback(
      "--no-two-batch-overlap", [a] { a->two_batch_overlap = false; },
      "expert parallelism: run each MoE exchange serially (dispatch, experts, combine) instead "
      "of as two micro-batches whose communication overlaps compute; the outputs are the same, "
      "every rank must be given the same setting (to measure the overlap against)");
}

// The prefix cache's flags (engine/prefix_caching.h, kv/unit_tiers.h).
void add_prefix_cache_flags(CLI::App& app, EngineArgs* a) {
  app.add_flag_callback(
      "--no-prefix-cache", [a] { a->enable_prefix_cache = false; },
      "turn the prefix cache off (on by default, as DeepSeek's context caching: a request "
      "reuses the state of the longest cached prefix of its prompt, in 128-token blocks)");
  app.add_option("--kv-host-memory", a->kv_host_memory_bytes,
                 "bytes of host memory for the prefix cache's host tier (0: no host tier)")
      ->capture_default_str();
  app.add_option("--kv-disk-dir", a->kv_disk_dir,
                 "directory for the prefix cache's disk tier (checksummed unit files; the cache "
                 "survives a restart); default: no disk tier");
  app.add_option("--kv-disk-bytes", a->kv_disk_bytes, "capacity of --kv-disk-dir in bytes")
      ->capture_default_str();
  app.add_option("--kv-cluster-dir", a->kv_cluster_dir,
                 "shared-filesystem directory (3FS, CephFS, NFS) for the cluster tier, seen by "
                 "every replica; default: no cluster tier");
  app.add_option("--kv-cluster-bytes", a->kv_cluster_bytes,
                 "this replica's capacity in --kv-cluster-dir, in bytes")
      ->capture_default_str();
  app.add_option("--kv-cluster-redis", a->kv_cluster_redis,
                 "redis://host:port of the cluster-wide index of --kv-cluster-dir (its key "
                 "expiry carries the retention); default: the directory is the index");
  app.add_option("--kv-cache-interval", a->kv_cache_interval,
                 "tokens between the prefix cache's persistence points inside long prompts (a "
                 "multiple of 128)")
      ->capture_default_str();
  app.add_option("--kv-retention-agent", a->kv_retention_agent_s,
                 "seconds the cache keeps agent requests' state (requests with tools, or "
                 "cache_retention \"agent\"), extended by each hit")
      ->capture_default_str();
  app.add_option("--kv-retention-chat", a->kv_retention_chat_s,
                 "seconds the cache keeps chat requests' state, extended by each hit")
      ->capture_default_str();
  app.add_option("--kv-cache-salt", a->kv_cache_salt,
                 "a string mixed into every cache key: separates checkpoints the fingerprint "
                 "(config, weight sizes and samples) can't tell apart");
}

// DeepSeek's switches (engine/switches.h): a flag given wins over its DEEPINFER_* variable.
void add_switch_flags(CLI::App& app, EngineArgs* a) {
  app.add_flag_callback(
      "--batch-invariant", [a] { a->switches.batch_invariant = true; },
      "batch-invariant inference: a request's logits do not depend on what else is batched "
      "or how its prompt is chunked (default: $DEEPINFER_BATCH_INVARIANT, else off). The CPU "
      "runner always is; on cuda its GEMMs run as fixed-order GEMVs, much slower for prefill "
      "and large batches (README's switch table gives the cost)");
  app.add_flag_callback(
      "--no-batch-invariant", [a] { a->switches.batch_invariant = false; },
      "turn batch invariance off whatever DEEPINFER_BATCH_INVARIANT says");
  app.add_option_function<std::string>(
         "--yoco-prefill-truncation-mode",
         [a](const std::string& s) { a->switches.yoco_mode = *parse_yoco_mode(s); },
         "off or compact: prefill positions before the last --yoco-prefill-keep-tokens skip "
         "the work that feeds nothing cached (the final layer's MoE and the head); default: "
         "$DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE, else off")
      ->check(CLI::IsMember({"off", "compact"}));
  app.add_option_function<int64_t>(
         "--yoco-prefill-keep-tokens", [a](const int64_t& n) { a->switches.yoco_keep_tokens = n; },
         "prompt positions kept whole under compact truncation (default: "
         "$DEEPINFER_YOCO_PREFILL_KEEP_TOKENS, else 140)")
      ->check(CLI::PositiveNumber);
  app.add_flag_callback(
      "--enable-mtp", [a] { a->switches.enable_mtp = true; },
      "speculative decoding with the checkpoint's MTP layer (V4) or DSpark (V4.1): drafts "
      "verified in one step, outputs unchanged (default: $DEEPINFER_ENABLE_MTP_VARLEN, else off). "
      "On cuda only V4's MTP layer drafts so far (DSpark turns itself off there); a "
      "checkpoint without draft weights turns it off");
  app.add_flag_callback(
      "--no-enable-mtp", [a] { a->switches.enable_mtp = false; },
      "turn MTP off whatever DEEPINFER_ENABLE_MTP_VARLEN says");
  app.add_option_function<int64_t>(
         "--num-speculative-tokens", [a](const int64_t& n) { a->switches.nextn_decode = n; },
         "draft length cap per step (default: $DEEPINFER_USE_NEXTN_DECODE, else 5)")
      ->check(CLI::PositiveNumber);
}

}  // namespace

void add_engine_flags(CLI::App& app, EngineArgs* a) {
  add_expert_parallel_flags(app, a);
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
                 "tokens per engine step (chunked prefill budget); 0: 8192 on cuda, 2048 on cpu")
      ->capture_default_str();
  app.add_option("--max-model-len", a->max_model_len, "prompt + output limit (0: 65536)")
      ->capture_default_str();
  app.add_option("--policy", a->policy, "scheduling policy: fcfs or priority")
      ->capture_default_str();
  add_prefix_cache_flags(app, a);
  add_switch_flags(app, a);
  app.add_option_function<std::string>(
         "--json-whitespace",
         [a](const std::string& s) { a->json_flexible_whitespace = s == "flexible"; },
         "json_schema / json_object output: bounded (default: each gap between JSON tokens is "
         "nothing, one space, or one newline and an indent of up to 16, so a weak model cannot "
         "spend max_tokens on blank lines) or flexible (up to 16 bytes of any JSON whitespace)")
      ->check(CLI::IsMember({"bounded", "flexible"}));
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
