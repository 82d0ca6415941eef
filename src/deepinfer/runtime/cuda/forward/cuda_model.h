// The deepseek_v4 forward on one GPU, composed from the backend/cuda ops: load a checkpoint
// directory as CpuModel does, keep sequences' state in a device page pool (v4::StateLayout's
// pages, as the CPU runner's), and run any chunking of prefill and batched decode over
// sequences named by their pages. Fixed "slots" (each a full set of pages) serve tests and
// benchmarks. Plain numerics only (what transformers computes); MTP is not
// included. Plain C++: no CUDA header is needed to use it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/runtime/cuda/forward/paged_forward.h"

namespace deepinfer::cuda {

// The discrete choices a forward made, for tests that tell a bf16 near-tie flip from a bug.
// Per layer, appended position by position: the routed experts of biased top-k layers
// (experts_per_token each, routing order) and the CSA indexer's picks (index_topk each,
// ascending, -1 padded); empty for layers without that choice.
struct DecisionTrace {
  std::vector<std::vector<int32_t>> experts, selected;
};

// How decode() steps ran: eagerly (a bucket's first step, or graphs off), captured, replayed.
struct DecodeStepCounts {
  int64_t eager = 0, captured = 0, replayed = 0;
};

// A copy of a sequence's constant state taken inside forward_paged (StepRow::snapshots): after the
// call, constant_pages (as many as the sequence's) hold the state after position end_pos - 1.
struct PagedSnapshot {
  int64_t end_pos = 0;
  const int32_t* constant_pages = nullptr;
};

// One sequence as its pages name it (the kv manager's tables): constant_pages() ids, then a
// block table covering its positions after the call; num_tokens positions are already in its
// state (0: it starts afresh and its constant state is initialized).
struct PagedSequence {
  const int32_t* constant_pages = nullptr;
  const int32_t* token_pages = nullptr;
  int64_t num_token_pages = 0;
  int64_t num_tokens = 0;
  // deepseek_v4 with drafting: where a call leaves the sequence's final hc streams (device,
  // hc_mult x hidden floats a row): its last row's for forward_paged and decode_paged, every
  // row's for verify_paged. Null: not kept.
  float* final_streams = nullptr;
  // deepseek_v41 with its DSpark drafter: where a call leaves every row's taps (device, rows x
  // dspark_target_layer_ids x hidden floats: each tap layer's input streams averaged, the
  // drafter's absorb input), row 0 being the call's first token. Null: not kept.
  float* taps = nullptr;
  // forward_paged on a family that takes_row_snapshots(): end_pos strictly increasing inside
  // the call's positions.
  const PagedSnapshot* snapshots = nullptr;
  int64_t num_snapshots = 0;
};

struct CudaModelOptions {
  v4::ModelOptions model = [] {  // plain numerics, every other field its default
    v4::ModelOptions o;
    o.numerics = v4::Numerics::kPlain;
    return o;
  }();
  int64_t max_tokens = 4096;  // sequence capacity (positions) the device state is sized for
  int64_t max_chunk = 256;    // longer forward calls run in chunks of this many tokens
  // The largest decode batch (with max_chunk) and the slots wanted.
  int max_sequences = 1;
  int page_tokens = 128;  // tokens per page of growing state (the CPU runner's too)
  // 0: a pool of exactly max_sequences slots. In (0, 1]: as many pages as keep the device's used
  // memory (this process and any other) within this fraction of its total: after the weights, a
  // profile step sizes the scratch (a max_chunk prefill chunk of one sequence, the
  // position-dependent and decode buffers at their largest), less a margin for what grows later
  // (graphs, cuBLASLt); slots are then the first min(max_sequences, pool / slot) of them. A pool
  // that can't hold one max_tokens sequence is resource_exhausted.
  double memory_fraction = 0;
  // With memory_fraction: > 0 makes the pool this many bytes instead (still after the profile
  // step, and refused when the device hasn't that much free).
  int64_t pool_bytes = 0;
  // decode() replays each batch bucket's step from a CUDA graph (buckets: powers of two up to
  // max_chunk, padded with rows that touch no sequence). Off: the same launches, eagerly.
  bool cuda_graphs = true;
  // A row's logits the same bits whatever else is in its batch or chunk (Gemm::
  // set_batch_invariant: no cuBLASLt; the grouped expert kernels at every batch size).
  bool batch_invariant = false;
  // Speculative decoding: upload the MTP layer (when the checkpoint has one) for mtp_draft.
  bool drafting = false;
  std::function<void(const v4::LoadProgress&)> progress;  // load: called after every tensor
};

class CudaModel final : public PagedForward {
 public:
  // unimplemented for official numerics (its simulated FP8/FP4 quantization is not on the GPU),
  // invalid_argument for capacities the ops can't serve; load errors name the file and tensor.
  static StatusOr<std::unique_ptr<CudaModel>> load(const std::string& dir,
                                                   const CudaModelOptions& options);
  ~CudaModel() override;

  // The longest max_tokens the ops can serve (the indexer's top-k capacity).
  static int64_t max_supported_tokens();

  const v4::Config& config() const;
  int max_sequences() const;              // slots
  int64_t weight_bytes() const override;  // bytes of weights on the device
  int64_t stored_weight_bytes() const;    // the same tensors' bytes in the checkpoint
  // The page pool (v4::StateLayout(config, page_tokens)).
  int page_tokens() const override;
  int64_t page_bytes() const override;
  int64_t constant_pages() const override;  // per sequence
  int64_t num_pages() const override;
  int64_t max_decode_rows() const override;  // the most sequences one decode call takes
  int64_t vocab_size() const override { return config().vocab_size; }
  int64_t eos_token_id() const override { return config().eos_token_id; }
  // Bytes of one slot's state as read_sequence writes it: its token count (int64), then its
  // pages (constant pages, then max_tokens' token pages).
  int64_t sequence_bytes() const;
  int64_t num_tokens(int slot = 0) const;  // next position of that sequence
  void reset(int slot = 0);                // start a new sequence in that slot

  // Appends ids[0..n) to slot 0 at positions num_tokens()...; logits gets n x vocab rows
  // (all_logits) or the last position's row.
  Status forward(const int32_t* ids, int64_t n, bool all_logits, std::vector<float>* logits);
  // The same for any slot (prefill of one sequence of a batch).
  Status forward(int slot, const int32_t* ids, int64_t n, bool all_logits,
                 std::vector<float>* logits);

  // One decode step of `count` distinct slots together: ids[b] is appended to slot slots[b]. Every
  // op runs once over all rows, the attention state through per-slot tables, so the step runs
  // from the CUDA graph of its bucket (see cuda_graphs). logits (if not null) gets count x vocab
  // rows; greedy (if not null) each row's argmax (ties to the lower id).
  Status decode(const int* slots, const int32_t* ids, int64_t count, std::vector<float>* logits,
                std::vector<int32_t>* greedy);
  // forward() and decode() writing logits into caller memory ((all_logits ? n : 1) or count rows
  // of vocab floats, or null for none); page-locked memory takes the copy at full speed.
  Status forward_into(int slot, const int32_t* ids, int64_t n, bool all_logits, float* logits);
  Status decode_into(const int* slots, const int32_t* ids, int64_t count, float* logits,
                     std::vector<int32_t>* greedy);

  // The same over sequences named by their pages (the runner's path): forward_paged appends
  // ids to seq at seq.num_tokens; decode_paged appends ids[b] to seqs[b], whose constant pages
  // must be distinct. Page ids outside the pool, or a block table too short for the positions,
  // are errors; nothing is run then.
  // argmax (if not null, and all_logits false): the last position's argmax (the CUDA argmax,
  // ties to the lower id), so a greedy caller can pass logits null and copy nothing back.
  // seq.snapshots: each gets a copy of the constant state before the chunk it ends in, advanced
  // by that chunk's state ops (compressors, ring) over the rows before its end_pos.
  Status forward_paged(const PagedSequence& seq, const int32_t* ids, int64_t n, bool all_logits,
                       float* logits, int32_t* argmax = nullptr,
                       int64_t keep_from_pos = 0) override;
  bool takes_row_snapshots() const override { return true; }
  Status decode_paged(const PagedSequence* seqs, const int32_t* ids, int64_t count, float* logits,
                      std::vector<int32_t>* greedy) override;
  Status verify_paged(const PagedSequence* seqs, const int32_t* ids, const int64_t* counts,
                      int64_t count, float* const* logits, const int64_t* skip = nullptr) override;
  int64_t final_stream_floats() const override;
  // MTP drafting (spec §7), every sequence at once: k greedy drafts chained through the MTP
  // layer after tokens[b] (just sampled for position seqs[b].num_tokens), from hidden[b] (device:
  // the final streams of the sequence's last position, as final_streams leaves them); drafts
  // gets count x k ids, sequence after sequence. Writes only the MTP layer's ring (constant
  // pages) at positions num_tokens .. num_tokens + k - 1, as CpuModel::mtp_draft does.
  // unimplemented without drafting or without an MTP layer.
  Status mtp_draft(const PagedSequence* seqs, const int32_t* tokens, const float* const* hidden,
                   int64_t count, int64_t k, int32_t* drafts) override;
  // Page to page on the device (forks), and pages to and from host bytes (page_bytes() each,
  // page after page): the raw page I/O of the runner.
  Status copy_pages(const int32_t* from, const int32_t* to, int64_t n) override;
  Status read_pages(const int32_t* pages, int64_t n, void* dst) override;
  Status write_pages(const int32_t* pages, int64_t n, const void* src) override;

  DecodeStepCounts decode_steps() const;
  // The row count a decode of `count` sequences runs at (its graph's bucket).
  int64_t decode_bucket(int64_t count) const;

  // Benchmarks: GPU time per forward phase (attention projections, state, MoE router and
  // experts, mHC, head, ...), summed over the calls since the last take. While on, decode runs
  // eagerly (a replayed graph has no phase marks), with an event per phase.
  void set_phase_timing(bool on);
  std::map<std::string, double> take_phase_times_ms();

  // Slot `to` becomes a copy of slot `from` (forks; benchmarks: many sequences of one context).
  Status copy_sequence(int from, int to);
  // A slot's whole state to and from host bytes (sequence_bytes() of them): page I/O. A CUDA
  // error is returned; write_sequence refuses a token count outside [0, max_tokens].
  Status read_sequence(int slot, void* dst);
  Status write_sequence(int slot, const void* src);

  // Runs the prompt in slot 0, then picks n_new tokens greedily (the CUDA argmax, ties to the
  // lower id), feeding each back through decode(); returns them. The sequence is left holding
  // prompt + all but the last.
  StatusOr<std::vector<int32_t>> generate_greedy(const int32_t* prompt, int64_t n, int64_t n_new);

  // Tests: every scratch and output buffer to NaN, so whatever a run leaves unwritten fails.
  void poison_scratch();
  // Tests: record decisions into *trace (sized here) from now on; null stops. Each MoE and CSA
  // layer then copies its choices to the host, so decode runs eagerly while a trace is set.
  void set_trace(DecisionTrace* trace);

  struct Impl;

 private:
  explicit CudaModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::cuda
