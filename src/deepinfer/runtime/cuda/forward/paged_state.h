// Every sequence's decode state on the device: one pool of fixed-size pages laid out by
// v4::StateLayout, the same description the CPU runner's host pages use (fp32 on both), so a
// page has the same size and places on either device. A sequence owns constant pages (rings, the
// compressors' unfinished windows and CSA overlap halves) and token pages (compressed entries
// and indexer keys) named by its block table; the host resolves its constant buffers to device
// addresses, the kernels find entries through the block table (EntryPages).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/state_layout.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"
#include "deepinfer/runtime/cuda/forward/pinned_buffer.h"
#include "deepinfer/runtime/cuda/forward/slot_views.h"

namespace deepinfer::cuda {

// A sequence's state resolved for one forward segment: per layer its views (row 0 of the
// entries' tables is the segment's block table on the device).
struct SegmentState {
  std::vector<LayerView> layers;
};

// A snapshot (PagedSnapshot) ending in a segment: its copy of the constant state, which held the
// state at the segment's start, is advanced over the segment's rows before end_pos.
struct SegmentSnapshot {
  int64_t end_pos = 0;
  const SegmentState* state = nullptr;  // the copy's views
};

// The largest compressed-entry list a decode row can attend (the width of the decode tables'
// selections): the indexer's top-k (CSA) or every visible entry of the smallest HCA ratio.
int decode_max_selected(const v4::Config& c, int64_t max_tokens);

class PagedState {
 public:
  // max_tokens bounds a block table (max_tokens / page_tokens pages, rounded up); max_rows a
  // decode step's rows.
  PagedState(const v4::Config& c, int page_tokens, int64_t max_tokens, int64_t max_rows);
  PagedState(const PagedState&) = delete;
  PagedState& operator=(const PagedState&) = delete;

  const v4::StateLayout& layout() const { return layout_; }
  int64_t max_token_pages() const { return max_token_pages_; }
  int64_t num_pages() const { return num_pages_; }
  int64_t page_bytes() const { return layout_.page_bytes(); }
  // Bytes of a pool of n pages.
  int64_t pool_bytes(int64_t n) const { return n * page_bytes(); }

  // (Re)allocates the pool with n pages; its contents are undefined.
  void allocate(int64_t num_pages);
  float* page(int32_t id) const { return pool_.get() + int64_t{id} * layout_.page_floats(); }

  // Resolves one sequence for a prefill segment, uploading its block table on `stream` (valid
  // until the next resolve).
  const SegmentState& resolve(const PagedSequence& seq, cudaStream_t stream);
  // Resolves count <= max_rows() sequences for one forward of several segments (speculative
  // verification), their block tables in the decode tables' rows (valid until the next resolve
  // or stage_rows).
  const std::vector<SegmentState>& resolve_rows(const PagedSequence* seqs, int64_t count,
                                                cudaStream_t stream);
  int64_t max_rows() const { return max_rows_; }
  // The snapshots of seq (checked: check_sequence) that end in its next chunk of n tokens: each
  // one's pages get a copy of seq's constant pages, queued on `stream` (the state at the chunk's
  // start), and the copies' views, constant buffers only (valid until the next call).
  const std::vector<SegmentSnapshot>& snapshot_copies(const PagedSequence& seq, int64_t n,
                                                      cudaStream_t stream);
  // Sets a fresh sequence's constant state (compressors: kv 0, gate -inf as on the CPU).
  void reset(const PagedSequence& seq, cudaStream_t stream);

  // Fills the decode tables' rows 0 .. count - 1 from seqs and uploads them on `stream`; the
  // views stay at fixed device addresses, so a captured graph reads each step's tables.
  void stage_rows(const PagedSequence* seqs, int64_t count, cudaStream_t stream);
  const LayerSlots& layer_slots(int l) const { return slots_[l]; }

 private:
  // Where each constant buffer of a layer lies: page index among the constant pages and float
  // offset, or page -1 where the layer lacks it.
  enum Kind {
    kRing,
    kCompKv,
    kCompGate,
    kCompPrevKv,
    kCompPrevGate,
    kIdxKv,
    kIdxGate,
    kIdxPrevKv,
    kIdxPrevGate,
    kKinds
  };
  struct Place {
    int64_t page = -1, offset = 0;
  };
  float* address(const Place& p, const int32_t* constant_pages) const {
    return p.page < 0 ? nullptr : page(constant_pages[p.page]) + p.offset;
  }
  EntryPages entry_pages(const v4::CompressorLayout& cl, const int32_t* tables) const;
  // seq's views with its block table at `table` on the device.
  void resolve_into(const PagedSequence& seq, const int32_t* table, SegmentState* out) const;
  CompressorView compressor_view(const v4::CompressorLayout& cl, const Place* places,
                                 const int32_t* constant_pages, const int32_t* table) const;

  v4::Config c_;
  v4::StateLayout layout_;
  int64_t max_token_pages_ = 0, max_rows_ = 0, num_pages_ = 0;
  std::vector<Place> places_;  // [layer * kKinds + kind]
  DeviceBuffer<float> pool_;
  DeviceBuffer<int32_t> segment_table_;  // [max_token_pages]
  SegmentState segment_;
  std::vector<SegmentState> row_segments_;     // resolve_rows'
  std::vector<SegmentState> snapshot_states_;  // snapshot_copies'
  std::vector<SegmentSnapshot> snapshots_;
  // Decode tables: [layer][kind][max_rows] pointers and [max_rows][max_token_pages] page ids,
  // staged in page-locked memory and uploaded per step.
  DeviceBuffer<float*> row_ptrs_;
  DeviceBuffer<int32_t> row_tables_;
  PinnedBuffer<float*> host_ptrs_;
  PinnedBuffer<int32_t> host_tables_;
  std::vector<LayerSlots> slots_;
};

}  // namespace deepinfer::cuda
