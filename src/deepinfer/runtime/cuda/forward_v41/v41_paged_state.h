// deepseek_v41 sequences' state on the device: one pool of pages laid out by v41::StateLayout,
// the description the CPU runner's host pages use (fp32 on both), so a page has the same size and
// places on either device. Constant pages hold the per-layer window rings, the KV sources'
// unfinished groups and the Engram look-back; token pages the KV sources' compressed entries and
// indexer keys, found through the sequence's block table (EntryPages).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/entry_pages.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/state_layout.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"  // PagedSequence

namespace deepinfer::cuda::v41f {

// One layer of one sequence, resolved to device addresses.
struct V41LayerView {
  float* ring = nullptr;  // sliding_window rows of head_dim; position p at row p % window
  // KV sources: the unfinished group's raw rows (ratio > 1: ratio rows of head_dim each), and the
  // compressed entries and indexer keys through the sequence's block table.
  float *pending_kv = nullptr, *pending_gate = nullptr;
  EntryPages entries, keys;
};

struct V41SequenceView {
  std::vector<V41LayerView> layers;
  float* engram_history = nullptr;  // engram_max_ngram_size - 1 int32 ids (as float bits)
};

class V41PagedState {
 public:
  // max_tokens bounds a block table; max_rows the sequences one call resolves together.
  V41PagedState(const v41::Config& c, int page_tokens, int64_t max_tokens, int64_t max_rows);
  V41PagedState(const V41PagedState&) = delete;
  V41PagedState& operator=(const V41PagedState&) = delete;

  const v41::StateLayout& layout() const { return layout_; }
  int64_t max_token_pages() const { return max_token_pages_; }
  int64_t num_pages() const { return num_pages_; }
  int64_t page_bytes() const { return layout_.page_bytes(); }
  int64_t pool_bytes(int64_t n) const { return n * page_bytes(); }
  void allocate(int64_t num_pages);  // contents undefined
  float* page(int32_t id) const { return pool_.get() + int64_t{id} * layout_.page_floats(); }

  // Resolves `count` sequences (count <= max_rows), uploading their block tables on `stream`
  // (valid until the next resolve).
  std::vector<V41SequenceView> resolve(const PagedSequence* seqs, int64_t count,
                                       cudaStream_t stream);
  // A fresh sequence: its constant pages zeroed (as the CPU's make_sequence_state).
  void reset(const PagedSequence& seq, cudaStream_t stream);

 private:
  float* constant(const v4::RowBuffer& b, const int32_t* constant_pages) const;

  v41::Config c_;
  v41::StateLayout layout_;
  int64_t max_token_pages_ = 0, max_rows_ = 0, num_pages_ = 0;
  DeviceBuffer<float> pool_;
  DeviceBuffer<int32_t> tables_;  // [max_rows, max_token_pages]
  std::vector<int32_t> host_tables_;
};

}  // namespace deepinfer::cuda::v41f
