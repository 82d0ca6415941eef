// The seam between the engine and a model on a device (DESIGN.md: like vLLM's
// execute_model(SchedulerOutput)). A runner owns the weights, the page pool that holds every
// sequence's state, and whatever a device needs for a step (input staging, graphs). The engine
// knows a model only through this interface; kv/ knows it only as the page spec.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/backend/collective.h"
#include "deepinfer/base/status.h"
#include "deepinfer/kv/page_spec.h"
#include "deepinfer/runtime/device.h"
#include "deepinfer/runtime/step_batch.h"

namespace deepinfer::runtime {

enum class Numerics { kAuto, kOfficial, kPlain };  // kAuto: official on cpu, plain on cuda

struct RunnerOptions {
  std::string model_dir;
  Device device = Device::kCpu;
  Numerics numerics = Numerics::kAuto;
  // The page pool's bytes. 0: 1 GiB on cpu; on cuda what gpu_memory_utilization leaves after
  // the weights (given, it replaces that budget, as vLLM's kv_cache_memory_bytes).
  int64_t kv_memory_bytes = 0;
  // cuda: the fraction of the device's memory the runner may fill (weights, then the page pool
  // from what is left, as vLLM's --gpu-memory-utilization).
  double gpu_memory_utilization = 0.9;
  int64_t max_model_len = 65536;  // the longest sequence (cuda: per-sequence capacity)
  // max_model_len was not asked for: a runner that serves less lowers it to what it serves and
  // says so in ModelInfo::max_model_len (otherwise a longer one is refused, naming the flag).
  bool max_model_len_defaulted = false;
  int max_num_seqs = 64;                  // sequences running at once
  int64_t max_num_batched_tokens = 2048;  // tokens per step
  bool cuda_graphs = true;                // cuda: replay decode steps from CUDA graphs
  // Every reduction's order independent of the batch (DEEPINFER_BATCH_INVARIANT). The CPU
  // runner is so by construction (each row runs alone, DESIGN.md); the CUDA runner then takes
  // one fixed-order kernel per op at every row count (docs/decisions/0014).
  bool batch_invariant = false;
  // Speculative decoding (DEEPINFER_ENABLE_MTP_VARLEN): keep what mtp_draft needs from each
  // sequence's first token on. V4.1 on the CPU: the DSpark drafter's windows of the target's
  // taps, which cost a projection per position, so they are kept only when asked for; without
  // it mtp_draft is unimplemented there. V4's MTP layer needs nothing more.
  bool drafting = false;
  // Expert parallelism (issue 22; not owned, outlives the runner): this runner is one rank of
  // the group, holding its share of the routed experts and running its own sequences. Every
  // execute() is collective: the ranks' calls must match one for one (an idle rank executes an
  // empty batch). CPU runner only so far. Null: one rank.
  Collective* expert_group = nullptr;
  // EPLB (issue 22, docs/decisions/0013): a plan file (model/eplb/placement_json.h) saying which
  // rank holds which routed experts, replicas included; it must fit the model and the group.
  // Empty: expert e on rank e % size.
  std::string eplb_plan;
  // Expert parallelism: overlap each MoE exchange's communication with compute (two
  // micro-batches, docs/decisions/0015). The same logits either way; the same on every rank.
  bool two_batch_overlap = true;
  // Called while weights load: (tensors done, tensors total, bytes done, bytes total).
  std::function<void(int64_t, int64_t, int64_t, int64_t)> on_load_progress;
};

struct ModelInfo {
  std::string model_type;  // config.json's: "deepseek_v4" | "deepseek_v41" (picks the chat format)
  int64_t vocab_size = 0;
  int32_t eos_token_id = 0;
  std::string numerics;  // "official" | "plain": what the runner computes
  Device device = Device::kCpu;
  std::string device_name;   // e.g. "cpu", "NVIDIA H200"
  int64_t weight_bytes = 0;  // weights held by the runner (on its device)
  // The most sequences the runner can hold at once whatever their length (0: only the pool
  // bounds it); the engine caps max_num_seqs by it.
  int64_t max_sequences = 0;
  // > 0: the longest sequence the runner serves, when it lowered a defaulted max_model_len.
  int64_t max_model_len = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelInfo& info() const = 0;
  // The page pool: page size, count and per-sequence constant pages. All kv/ learns of a model.
  virtual const kv::PageSpec& page_spec() const = 0;

  // Runs one step. A failure (device error, out of memory) is returned, never an abort; the
  // engine then fails the requests whose rows were in the batch and releases them.
  virtual Status execute(const StepBatch& batch, StepOutput* out) = 0;
  // Whether execute() takes StepRow::snapshots. Without it the engine ends prefill chunks at the
  // prefix cache's persistence points and copies the constant pages after the step.
  virtual bool snapshots_inside_rows() const { return false; }
  // The sequence's pages went back to the pool (finished, cancelled, preempted): drop anything
  // the runner keeps for it. No-op for an unknown sequence.
  virtual void release(uint64_t seq_id) = 0;

  // Speculative decoding with the model's own drafter (V4: the MTP layer; V4.1: DSpark, whose
  // block caps the drafts): up to max_drafts tokens to follow `token`, the one just sampled for
  // the sequence's next position (its state holds every position before it: call after the
  // step's rollbacks). Writes only the drafter's own state. unimplemented, saying why, where the
  // runner or the checkpoint has no drafting (the default); ok with no drafts while a drafter's
  // state is being rebuilt (a sequence restarted from cached or imported pages).
  virtual Status mtp_draft(uint64_t seq_id, int32_t token, int64_t max_drafts,
                           std::vector<int32_t>* out) {
    (void)seq_id, (void)token, (void)max_drafts, (void)out;
    return unimplemented("this runner has no MTP drafting");
  }
  // mtp_draft for several sequences at once ((*out)[i] gets sequence i's drafts; a max_drafts of
  // 0 asks none). The default asks each in turn: a sequence whose call fails gets none, and
  // unimplemented is returned at once. A GPU runner drafts them together.
  virtual Status mtp_draft_batch(const std::vector<uint64_t>& seq_ids,
                                 const std::vector<int32_t>& tokens,
                                 const std::vector<int64_t>& max_drafts,
                                 std::vector<std::vector<int32_t>>* out) {
    out->assign(seq_ids.size(), {});
    for (size_t i = 0; i < seq_ids.size(); ++i) {
      if (max_drafts[i] < 1) continue;
      const Status st = mtp_draft(seq_ids[i], tokens[i], max_drafts[i], &(*out)[i]);
      if (st.ok()) continue;
      (*out)[i].clear();
      if (st.code() == StatusCode::kUnimplemented) return st;
    }
    return ok_status();
  }

  // Routed picks per main layer per expert of every forward so far (EPLB's input), readable
  // from any thread. Empty where the runner does not count (CUDA).
  virtual std::vector<std::vector<uint64_t>> expert_counts() const { return {}; }

  // Raw page I/O (prefix cache, offload tiers, disaggregation): the bytes of `pages`, page after
  // page, page_spec().page_bytes each, in the runner's own state layout.
  virtual StatusOr<std::string> read_pages(const std::vector<int32_t>& pages) = 0;
  virtual Status write_pages(const std::vector<int32_t>& pages, std::string_view bytes) = 0;

  // The same bytes kept in device memory, for a decode worker on this host (CUDA IPC,
  // --disagg-cuda-ipc). export_pages_ipc copies `pages` into a fresh device buffer another
  // process can map by `ipc_handle`; the buffer lives while `buffer` is held. map_ipc_pages
  // (any thread: it touches no runner state) copies another process's exported buffer into a
  // fresh buffer of this one, so the exporter may free its own at once. write_pages_device
  // writes such a buffer of this process into `pages`. The defaults refuse (no device memory).
  struct DevicePages {
    std::string ipc_handle;
    int64_t bytes = 0;
    std::shared_ptr<void> buffer;
  };
  virtual StatusOr<DevicePages> export_pages_ipc(const std::vector<int32_t>& pages) {
    (void)pages;
    return unimplemented("CUDA IPC state export needs --device cuda");
  }
  virtual StatusOr<DevicePages> map_ipc_pages(const std::string& ipc_handle, int64_t bytes) {
    (void)ipc_handle, (void)bytes;
    return unimplemented(
        "a CUDA IPC state (from a prefill worker's --disagg-cuda-ipc) needs "
        "--device cuda on the decode worker");
  }
  virtual Status write_pages_device(const std::vector<int32_t>& pages, const DevicePages& src) {
    (void)pages, (void)src;
    return unimplemented("device pages need --device cuda");
  }
};

// Loads the model in `options.model_dir` on `options.device`. unimplemented when this binary
// was built without that device's backend; load errors name the file and tensor.
StatusOr<std::unique_ptr<ModelRunner>> create_runner(const RunnerOptions& options);

}  // namespace deepinfer::runtime
