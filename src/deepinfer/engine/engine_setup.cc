#include "deepinfer/engine/engine_setup.h"

#include <algorithm>
#include <filesystem>

namespace deepinfer {
namespace {

StatusOr<runtime::Numerics> parse_numerics(const std::string& s) {
  if (s == "auto" || s.empty()) return runtime::Numerics::kAuto;
  if (s == "official") return runtime::Numerics::kOfficial;
  if (s == "plain") return runtime::Numerics::kPlain;
  return invalid_argument("numerics must be auto, official or plain, got '" + s + "'");
}

}  // namespace

int64_t default_batched_tokens(runtime::Device d) {
  return d == runtime::Device::kCuda ? 8192 : 2048;
}

StatusOr<runtime::Device> engine_device(const EngineArgs& args) {
  if (args.device) return *args.device;
  return runtime::default_device();
}

Status resolve_step_budget(EngineArgs* args) {
  if (args->max_num_batched_tokens != 0) return ok_status();
  ASSIGN_OR_RETURN(const runtime::Device d, engine_device(*args));
  args->max_num_batched_tokens = default_batched_tokens(d);
  return ok_status();
}

void fit_to_runner(const runtime::ModelInfo& info, EngineArgs* args) {
  if (args->max_model_len <= 0 && info.max_model_len > 0) args->max_model_len = info.max_model_len;
  if (info.max_sequences > 0)
    args->max_num_seqs =
        static_cast<int>(std::min<int64_t>(args->max_num_seqs, info.max_sequences));
}

sched::SchedulerConfig sched_config(const EngineArgs& a) {
  sched::SchedulerConfig c;
  c.max_num_batched_tokens = a.max_num_batched_tokens;
  c.max_num_seqs = a.max_num_seqs;
  c.max_model_len = a.max_model_len > 0 ? a.max_model_len : 65536;
  c.policy = a.policy == "priority" ? sched::SchedPolicy::kPriority : sched::SchedPolicy::kFcfs;
  return c;
}

StatusOr<runtime::RunnerOptions> runner_options(const EngineArgs& args) {
  runtime::RunnerOptions ro;
  ASSIGN_OR_RETURN(ro.numerics, parse_numerics(args.numerics));
  if (args.policy != "fcfs" && args.policy != "priority")
    return invalid_argument("policy must be 'fcfs' or 'priority', got '" + args.policy + "'");
  if (args.max_num_seqs <= 0) return invalid_argument("max_num_seqs must be positive");
  if (!(args.gpu_memory_utilization > 0 && args.gpu_memory_utilization <= 1))
    return invalid_argument("gpu_memory_utilization must be in (0, 1], got " +
                            std::to_string(args.gpu_memory_utilization));
  RETURN_IF_ERROR(sched::Scheduler::validate(sched_config(args)));
  ASSIGN_OR_RETURN(ro.device, engine_device(args));
  ro.model_dir = args.model;
  ro.kv_memory_bytes = args.kv_memory_bytes;
  ro.gpu_memory_utilization = args.gpu_memory_utilization;
  ro.max_model_len = sched_config(args).max_model_len;
  ro.max_model_len_defaulted = args.max_model_len <= 0;
  ro.max_num_seqs = args.max_num_seqs;
  ro.max_num_batched_tokens = args.max_num_batched_tokens;
  ro.cuda_graphs = args.cuda_graphs;
  ro.on_load_progress = args.on_load_progress;
  ro.eplb_plan = args.eplb_plan;
  ro.two_batch_overlap = args.two_batch_overlap;
  return ro;
}

StatusOr<PrefixCachingOptions> prefix_cache_options(const EngineArgs& args, const std::string& fp,
                                                    int page_tokens,
                                                    std::unique_ptr<kv::UnitTiers>* tiers) {
  PrefixCachingOptions o;
  o.interval_tokens = args.kv_cache_interval;
  o.agent_retention_s = args.kv_retention_agent_s;
  o.chat_retention_s = args.kv_retention_chat_s;
  o.clock = args.clock.get();
  RETURN_IF_ERROR(PrefixCaching::validate(o, page_tokens));
  if (args.kv_host_memory_bytes < 0 || args.kv_disk_bytes < 0 || args.kv_cluster_bytes < 0)
    return invalid_argument(
        "--kv-host-memory, --kv-disk-bytes and --kv-cluster-bytes must not "
        "be negative");
  kv::UnitTiersOptions& t = o.tiers;
  t.fingerprint = fp;
  t.host_bytes = args.kv_host_memory_bytes;
  t.disk_dir = args.kv_disk_dir;
  t.disk_bytes = args.kv_disk_bytes;
  t.cluster_dir = args.kv_cluster_dir;
  t.cluster_bytes = args.kv_cluster_bytes;
  t.cluster_redis = args.kv_cluster_redis;
  t.clock = o.clock;
  if (t.host_bytes > 0 || !t.disk_dir.empty() || !t.cluster_dir.empty() ||
      !t.cluster_redis.empty()) {
    ASSIGN_OR_RETURN(*tiers, kv::UnitTiers::open(t));
  }
  return o;
}

StatusOr<std::unique_ptr<Collective>> join_group_if_asked(const EngineArgs& args,
                                                          const Switches& switches,
                                                          runtime::RunnerOptions* ro) {
  std::unique_ptr<Collective> group;
  if (!args.eplb_plan.empty() && args.expert_parallel.size <= 1)
    return invalid_argument("--eplb-plan " + args.eplb_plan +
                            ": a plan places experts over an expert-parallel group; it needs "
                            "--expert-parallel-size > 1");
  if (args.expert_parallel.size > 1) {
    if (ro->device != runtime::Device::kCpu)
      return unimplemented(
          "--expert-parallel-size: expert parallelism runs on the CPU runner only so far (the "
          "GPU's needs NCCL and a multi-GPU machine)");
    if (switches.enable_mtp || args.drafter)
      return invalid_argument(
          "--expert-parallel-size does not combine with speculative decoding yet (a rejected "
          "draft's replay would step one rank alone)");
    ASSIGN_OR_RETURN(group, runtime::join_expert_group(args.expert_parallel));
    ro->expert_group = group.get();
  }
  return group;
}

Status load_tokenizer(const EngineArgs& args, std::unique_ptr<tokenizer::Tokenizer>* tok,
                      std::vector<int32_t>* scripted) {
  if (std::filesystem::exists(args.model + "/tokenizer.json")) {
    ASSIGN_OR_RETURN(*tok, tokenizer::Tokenizer::from_file(args.model));
  }
  if (!args.debug_scripted_output.empty()) {
    if (!*tok) return failed_precondition("debug_scripted_output needs the model's tokenizer.json");
    ASSIGN_OR_RETURN(*scripted, (*tok)->encode(args.debug_scripted_output));
  }
  return ok_status();
}

Status check_prompt(const std::vector<int32_t>& prompt, int64_t max_tokens, int64_t vocab,
                    int64_t max_model_len) {
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " is outside the vocabulary");
  if (prompt.empty()) return invalid_argument("prompt is empty");
  const int64_t need = static_cast<int64_t>(prompt.size()) + max_tokens;
  if (need > max_model_len)
    return invalid_argument("prompt (" + std::to_string(prompt.size()) + " tokens) + max_tokens (" +
                            std::to_string(max_tokens) + ") exceeds max_model_len (" +
                            std::to_string(max_model_len) + ")");
  return ok_status();
}

Status check_pool_room(int64_t prompt_len, int64_t max_new_tokens, int64_t pool_tokens) {
  const int64_t state = prompt_len + max_new_tokens - 1;
  if (state <= pool_tokens) return ok_status();
  return invalid_argument("prompt (" + std::to_string(prompt_len) + " tokens) + max_tokens (" +
                          std::to_string(max_new_tokens) + ") needs the KV state of " +
                          std::to_string(state) + " tokens, more than the pool holds for one " +
                          "sequence (" + std::to_string(pool_tokens) +
                          "); lower max_tokens or raise --kv-memory");
}

EngineCapacity engine_capacity(const kv::KvCapacity& c, const kv::PageSpec& spec,
                               const runtime::ModelInfo& info, int64_t max_model_len) {
  EngineCapacity cap;
  cap.max_tokens = std::min(c.max_tokens, max_model_len);
  cap.max_sequences = c.max_sequences;
  cap.num_pages = c.num_pages;
  cap.page_bytes = spec.page_bytes;
  cap.page_tokens = spec.page_tokens;
  cap.constant_pages = spec.constant_pages_per_seq;
  cap.device = runtime::device_name(info.device);
  cap.device_name = info.device_name;
  cap.numerics = info.numerics;
  cap.weight_bytes = info.weight_bytes;
  return cap;
}

kv::Retention request_retention(const GenerateRequest& r) {
  const bool tools = r.chat && r.chat->contains("tools") && (*r.chat)["tools"].is_array() &&
                     !(*r.chat)["tools"].empty();
  return retention_of(r.cache_retention, tools);
}

void add_step_stats(const EngineStats& step, EngineStats* total) {
  total->steps += 1;
  total->schedule_s += step.schedule_s;
  total->forward_s += step.forward_s;
  total->sample_s += step.sample_s;
  total->output_s += step.output_s;
  total->total_s += step.total_s;
  total->prefill_tokens += step.prefill_tokens;
  total->decode_tokens += step.decode_tokens;
  total->preemptions += step.preemptions;
  total->spec_verifications += step.spec_verifications;
  total->spec_draft_tokens += step.spec_draft_tokens;
  total->spec_accepted_tokens += step.spec_accepted_tokens;
  if (total->spec_accepted_at.size() < step.spec_accepted_at.size())
    total->spec_accepted_at.resize(step.spec_accepted_at.size());
  for (size_t i = 0; i < step.spec_accepted_at.size(); ++i)
    total->spec_accepted_at[i] += step.spec_accepted_at[i];
}

}  // namespace deepinfer
