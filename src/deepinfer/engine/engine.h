// deepinfer's public C++ API: an inference engine over one model. Requests (prompt ids, text, or
// an OpenAI-style chat request through the DeepSeek recipe) are submitted from any thread; the
// engine's step loop runs on its own thread and streams RequestOutputs to each request's callback.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/clock.h"
#include "deepinfer/base/status.h"
#include "deepinfer/engine/cache_retention.h"
#include "deepinfer/engine/drafter.h"
#include "deepinfer/engine/sequence_handoff.h"
#include "deepinfer/engine/switches.h"
#include "deepinfer/recipe/markers.h"
#include "deepinfer/runtime/device.h"
#include "deepinfer/runtime/expert_group.h"
#include "deepinfer/sample/sampling_params.h"

namespace deepinfer {

struct EngineArgs {
  std::string model;  // checkpoint directory
  // Unset: DEEPINFER_ACCELERATOR (nvidia | cpu), else cpu.
  std::optional<runtime::Device> device;
  // "auto" (official on cpu, plain on cuda, the only numerics the GPU forward has) | "official"
  // | "plain".
  std::string numerics = "auto";
  // --kv-memory: the page pool's bytes. 0: 1 GiB on cpu; on cuda what gpu_memory_utilization
  // leaves after the weights.
  int64_t kv_memory_bytes = 0;
  // cuda: fraction of the GPU's memory for weights + page pool (the pool gets what is left).
  double gpu_memory_utilization = 0.9;
  bool cuda_graphs = true;                // cuda: decode steps replay CUDA graphs
  int max_num_seqs = 64;                  // running sequences at once
  // Per-step token budget (chunked prefill). 0: default_batched_tokens(device), 8192 on cuda
  // and 2048 on cpu (decision 0019).
  int64_t max_num_batched_tokens = 0;
  int64_t max_model_len = 0;              // 0: 65536
  std::string policy = "fcfs";            // "fcfs" | "priority"
  uint64_t seed = 0;                      // for requests without their own seed
  // Chat requests: false (default) tokenizes message text (contents, reasoning, tool schemas,
  // calls and results) as plain text, so only the recipe's own markers become control tokens;
  // true matches added tokens in that text too (the old behaviour: content can forge turns).
  bool special_tokens_in_content = false;
  // json_schema / json_object output: false (default) allows in each gap between JSON tokens
  // nothing, one space, or one newline and an indent of up to 16 spaces or tabs, so a weak model
  // cannot spend max_tokens on blank lines; true allows up to 16 bytes of any JSON whitespace.
  bool json_flexible_whitespace = false;
  // Called while weights load: (tensors done, tensors total, bytes done, bytes total).
  std::function<void(int64_t, int64_t, int64_t, int64_t)> on_load_progress;
  // DeepSeek's switches (engine/switches.h): unset fields come from DEEPINFER_BATCH_INVARIANT,
  // DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE and DEEPINFER_YOCO_PREFILL_KEEP_TOKENS.
  SwitchArgs switches;
  // Prefix caching (DeepSeek's context caching; engine/prefix_caching.h): on by default, the
  // device and host tiers always, disk and cluster when their directories are given.
  bool enable_prefix_cache = true;                  // --no-prefix-cache: off
  int64_t kv_host_memory_bytes = int64_t{4} << 30;  // --kv-host-memory (0: no host tier)
  std::string kv_disk_dir;                          // --kv-disk-dir
  int64_t kv_disk_bytes = int64_t{64} << 30;        // --kv-disk-bytes
  std::string kv_cluster_dir;                       // --kv-cluster-dir (shared filesystem)
  int64_t kv_cluster_bytes = int64_t{256} << 30;    // --kv-cluster-bytes
  std::string kv_cluster_redis;                     // --kv-cluster-redis redis://host:port
  int64_t kv_cache_interval = 2048;                 // --kv-cache-interval (tokens)
  int64_t kv_retention_agent_s = 3 * 86400;         // --kv-retention-agent (seconds)
  int64_t kv_retention_chat_s = 7 * 86400;          // --kv-retention-chat (seconds)
  std::string kv_cache_salt;                        // --kv-cache-salt: separates checkpoints
  // Tests: the clock retention is measured on (null: the system clock).
  std::shared_ptr<const Clock> clock;
  // Speculative decoding with this drafter (drafter.h; tests and bench's oracle) instead of the
  // MTP layer that switches.enable_mtp picks: each decoding sequence's next step verifies up to
  // switches' nextn_decode drafts. The CPU runner only so far; outputs are unchanged, only the
  // step count moves.
  std::shared_ptr<Drafter> drafter;
  // Expert parallelism (issue 22; --expert-parallel-size/-rank/-address): this engine is one
  // rank of a group joined at rank 0's address (Engine::create waits for every rank). Attention
  // is data-parallel (each rank serves its own requests), the routed experts are sharded over
  // the ranks, and the ranks step in lockstep: an idle rank runs empty steps while another has
  // work. A rank that fails or leaves takes the group down; every rank's requests then fail
  // with that error. CPU only so far; no speculative decoding.
  runtime::ExpertGroupOptions expert_parallel;
  // EPLB (--eplb-plan; docs/decisions/0013): the plan file placing the routed experts over the
  // group, replicas of hot experts included (`deepinfer eplb plan` writes it). Needs
  // expert_parallel.size > 1. Empty: expert e on rank e % size.
  std::string eplb_plan;
  // Two-batch overlap (--no-two-batch-overlap turns it off; docs/decisions/0015): each MoE
  // exchange of the group runs as two micro-batches whose communication overlaps compute. The
  // outputs are the same either way; every rank must be given the same value.
  bool two_batch_overlap = true;
  // Test hook (`serve --debug-scripted-output FILE`): when set, every sample's tokens are this
  // text's encoding and then EOS instead of sampled ones; detokenizing, stop rules and streaming
  // stay the real ones. Only for tests of output parsing (tool calls, reasoning) on a tiny model.
  std::string debug_scripted_output;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-n alternatives, best first
};

struct CompletionOutput {
  int index = 0;                         // 0..n-1
  std::vector<int32_t> token_ids;        // all generated so far
  std::string text;                      // all text so far (stop string handling applied)
  std::vector<int32_t> delta_token_ids;  // new in this update
  std::string delta_text;
  std::vector<TokenLogprobs> logprobs;       // when requested: one per generated token
  std::optional<std::string> finish_reason;  // "stop" | "length" | "abort"
  std::optional<std::string> stop_reason;    // the stop string or token that matched
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens taken from the prefix cache
  // Speculative decoding: drafts that became output tokens (completion_tokens_details).
  int64_t accepted_prediction_tokens = 0;
};

struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;
  bool finished = false;
  Usage usage;
  Status status;  // not ok: the request ended on this error after it started (outputs are partial)
  // export_state: the final output's sequence state (null on an error).
  std::shared_ptr<const SequenceHandoff> handoff;
};

struct GenerateRequest {
  std::string request_id;           // unique among live requests; empty: generated
  std::vector<int32_t> prompt_ids;  // one of prompt_ids, prompt, chat
  std::optional<std::string> prompt;
  std::optional<nlohmann::json> chat;  // OpenAI-style request: messages, tools, thinking, ...
  sample::SamplingParams params;
  int priority = 0;  // lower runs first under the priority policy
  CacheRetention cache_retention = CacheRetention::kDefault;
  // Prefill/decode disaggregation (n = 1 only). export_state: compute the prompt and sample the
  // first token, then finish ("length") with the sequence's state in RequestOutput::handoff.
  // import_state: start from such a state instead of computing the prompt: the prompt must
  // tokenize to its prompt_ids and the engine must have its fingerprint; the first token is the
  // handoff's (reported with the first output) and decoding goes on from there, giving the
  // tokens one engine would have given for the same params and seed.
  bool export_state = false;
  // With export_state: keep the state in device memory, for a decode worker on this host to
  // map (CUDA IPC; the handoff's pages are then empty). Refused where the runner has none.
  bool export_ipc = false;
  std::shared_ptr<const SequenceHandoff> import_state;
};

// Per-step time split, accumulated since start (for `deepinfer bench`).
struct EngineStats {
  int64_t steps = 0;
  double schedule_s = 0, forward_s = 0, sample_s = 0, output_s = 0, total_s = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0, preemptions = 0;
  // Speculative decoding: drafts verified and accepted; accepted_at[i]: verifications whose
  // draft i (0-based) was accepted (so accepted_at[i] / verifications is the acceptance rate at
  // position i).
  int64_t spec_verifications = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_at;
  // Scheduler sequences after the latest step (gauges for /metrics).
  int64_t num_running = 0, num_waiting = 0;
};

// The prefix cache, for /metrics (running totals unless said otherwise).
struct PrefixCacheStats {
  bool enabled = false;
  int64_t queried_tokens = 0;  // prompt tokens of requests started
  // Hit tokens by the tier the units were found in: device, host, disk, cluster.
  std::array<int64_t, 4> hit_tokens{};
  int64_t loads = 0;           // promotions from a lower tier
  double load_seconds = 0;     // their total time
  int64_t promoted_bytes = 0;  // written into device pages by those loads
  // Per tier (device, host, disk, cluster): units and bytes held now, bytes written and read,
  // evictions by cause.
  std::array<int64_t, 4> units{}, bytes{}, bytes_written{}, bytes_read{};
  std::array<int64_t, 4> evicted_capacity{}, evicted_expired{};
  int64_t corrupt_dropped = 0;  // units that failed verification (disk, cluster)
  int64_t write_errors = 0, writes_dropped = 0;
  bool redis_healthy = false;
};

struct EngineCapacity {
  int64_t max_tokens = 0, max_sequences = 0, num_pages = 0;
  int64_t page_bytes = 0;      // every page is this many bytes of the runner's page pool
  int64_t page_tokens = 0;     // tokens per page
  int64_t constant_pages = 0;  // pages every sequence holds whatever its length
  std::string device;          // "cpu" | "cuda"
  std::string device_name;     // e.g. "cpu", "NVIDIA H200"
  std::string numerics;        // what the runner computes: "official" | "plain"
  int64_t weight_bytes = 0;    // weights on the device
  int64_t max_num_batched_tokens = 0;  // the step budget in use (a 0 argument resolved)
};

class Engine {
 public:
  using Callback = std::function<void(const RequestOutput&)>;

  static StatusOr<std::unique_ptr<Engine>> create(const EngineArgs& args);
  virtual ~Engine() = default;

  // Validates and enqueues; `on_output` is called from the engine thread for every update and
  // once with finished = true. Errors (bad params, prompt too long) come back here, before any
  // work.
  virtual Status submit(GenerateRequest request, Callback on_output) = 0;
  // Thread-safe; the request finishes with finish_reason "abort" and frees all its state.
  virtual void cancel(const std::string& request_id) = 0;
  // Blocking convenience: submit and wait for the final output.
  virtual StatusOr<RequestOutput> generate(GenerateRequest request) = 0;

  virtual EngineStats stats() const = 0;
  virtual PrefixCacheStats prefix_cache_stats() const = 0;
  // Routed picks per main layer per expert of this engine's forwards since it started (its own
  // requests' tokens, on an expert-parallel rank), EPLB's input; thread-safe. Empty where the
  // runner does not count (CUDA).
  virtual std::vector<std::vector<uint64_t>> expert_counts() const { return {}; }
  // A CUDA IPC handoff (SequenceHandoff::ipc_handle) from another process: copies its state
  // into device memory of this one (device_pages), so the exporter may free its own; any
  // thread. No-op for a handoff that carries its pages. Errors name the handle's trouble.
  virtual Status map_ipc_state(SequenceHandoff* h) {
    return h->ipc_handle.empty() ? ok_status()
                                 : unimplemented("this engine cannot take a CUDA IPC state");
  }
  virtual EngineCapacity capacity() const = 0;
  // For tests: pages a new sequence could take (free, or held only by the prefix cache); back to
  // capacity().num_pages when idle.
  virtual int64_t kv_free_pages() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eos_token_id() const = 0;
  // The chat format of the model's family (config.json's model_type): V4 for deepseek_v4, V4.1
  // for deepseek_v41. Chat prompts are encoded in it, and model output is parsed in it.
  virtual recipe::Variant chat_variant() const = 0;
  // Tokenize / detokenize with the model's tokenizer (error when the model has none).
  virtual StatusOr<std::vector<int32_t>> tokenize(const std::string& text) const = 0;
  // The prompt ids `request` would run on (its prompt_ids, prompt or chat, tokenized exactly as
  // submit does), e.g. to size a default max_tokens.
  virtual StatusOr<std::vector<int32_t>> prompt_token_ids(const GenerateRequest& request) const = 0;
  virtual StatusOr<std::string> detokenize(const std::vector<int32_t>& ids) const = 0;
};

}  // namespace deepinfer
