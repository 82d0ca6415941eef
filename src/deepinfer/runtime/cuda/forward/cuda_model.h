// The deepseek_v4 forward on one GPU, composed from the backend/cuda ops: load a checkpoint
// directory as CpuModel does, keep sequences' state in device slots, and run any chunking of
// prefill and batched decode. Plain numerics only (what transformers computes); MTP is not
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

struct CudaModelOptions {
  v4::ModelOptions model{v4::Numerics::kPlain, {}};
  int64_t max_tokens = 4096;  // sequence capacity (positions) the device state is sized for
  int64_t max_chunk = 256;    // longer forward calls run in chunks of this many tokens
  int max_sequences = 1;      // sequence slots, each with its own state; decode() batches them
  // 0: exactly max_sequences slots. In (0, 1]: at most max_sequences, as many as keep the
  // device's used memory (this process and any other) within this fraction of its total: after
  // the weights, a profile step sizes the scratch (a max_chunk prefill chunk of one slot, the
  // position-dependent and decode buffers at their largest), then slots are added one at a time
  // while the next one fits, less a margin for what grows later (graphs, cuBLASLt). Not even one
  // fitting is resource_exhausted.
  double memory_fraction = 0;
  // decode() replays each batch bucket's step from a CUDA graph (buckets: powers of two up to
  // max_chunk, padded with rows that touch no sequence). Off: the same launches, eagerly.
  bool cuda_graphs = true;
  std::function<void(const v4::LoadProgress&)> progress;  // load: called after every tensor
};

class CudaModel {
 public:
  // unimplemented for official numerics (its simulated FP8/FP4 quantization is not on the GPU),
  // invalid_argument for capacities the ops can't serve; load errors name the file and tensor.
  static StatusOr<std::unique_ptr<CudaModel>> load(const std::string& dir,
                                                   const CudaModelOptions& options);
  ~CudaModel();

  // The longest max_tokens the ops can serve (the indexer's top-k capacity).
  static int64_t max_supported_tokens();

  const v4::Config& config() const;
  int max_sequences() const;
  int64_t weight_bytes() const;  // bytes of weights on the device
  // Bytes of one slot's state as read_sequence writes it: its token count (int64), then every
  // state buffer (device_state.h's order). Fixed by the config, max_tokens and max_chunk.
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
