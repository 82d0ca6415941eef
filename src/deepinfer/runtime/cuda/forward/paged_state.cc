#include "deepinfer/runtime/cuda/forward/paged_state.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/base/check.h"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"

namespace deepinfer::cuda {

int decode_max_selected(const v4::Config& c, int64_t max_tokens) {
  int64_t most = c.index_topk;
  for (int l = 0; l < c.num_layers; ++l)
    if (c.compress_ratio(l) > 4) most = std::max(most, max_tokens / c.compress_ratio(l));
  return static_cast<int>(most);
}

PagedState::PagedState(const v4::Config& c, int page_tokens, int64_t max_tokens, int64_t max_rows)
    : c_(c),
      layout_(c, page_tokens),
      max_token_pages_((max_tokens + page_tokens - 1) / page_tokens),
      max_rows_(max_rows),
      places_(layout_.layers().size() * kKinds),
      segment_table_(size_t(std::max<int64_t>(1, max_token_pages_))),
      row_ptrs_(size_t(c.num_layers) * kKinds * max_rows),
      row_tables_(size_t(max_rows * std::max<int64_t>(1, max_token_pages_))) {
  auto place = [&](int l, Kind k, const v4::RowBuffer& b) {
    if (b.rows == 0) return;
    const v4::RowPlace p = layout_.buffer_place(b);
    places_[size_t(l) * kKinds + k] = Place{p.page, p.offset};
  };
  for (int l = 0; l < int(layout_.layers().size()); ++l) {  // the MTP layer's ring too
    const v4::LayerLayout& ll = layout_.layers()[l];
    place(l, kRing, ll.ring);
    place(l, kCompKv, ll.comp.pending_kv), place(l, kCompGate, ll.comp.pending_gate);
    place(l, kCompPrevKv, ll.comp.prev_kv), place(l, kCompPrevGate, ll.comp.prev_gate);
    place(l, kIdxKv, ll.index.pending_kv), place(l, kIdxGate, ll.index.pending_gate);
    place(l, kIdxPrevKv, ll.index.prev_kv), place(l, kIdxPrevGate, ll.index.prev_gate);
  }
  // Small (layers x 9 x max_rows pointers, max_rows block tables): failing is a broken host.
  DI_CHECK(host_ptrs_.reserve(row_ptrs_.size()).ok());
  DI_CHECK(host_tables_.reserve(row_tables_.size()).ok());
  std::fill(host_tables_.get(), host_tables_.get() + row_tables_.size(), 0);
  segment_.layers.resize(layout_.layers().size());
}

void PagedState::allocate(int64_t num_pages) {
  pool_ = DeviceBuffer<float>();  // free first: the old and new pool need not fit together
  pool_ = DeviceBuffer<float>(size_t(num_pages * layout_.page_floats()));
  num_pages_ = num_pages;
  // The decode views hold the pool's address.
  slots_.clear();
  float** dev = row_ptrs_.get();
  for (int l = 0; l < c_.num_layers; ++l) {
    const v4::LayerLayout& ll = layout_.layers()[l];
    auto table = [&](Kind k) -> float* const* {
      return places_[size_t(l) * kKinds + k].page < 0 ? nullptr
                                                      : dev + (size_t(l) * kKinds + k) * max_rows_;
    };
    LayerSlots s;
    s.ring = table(kRing);
    s.ring_rows = c_.sliding_window;
    s.comp = CompressorSlots{table(kCompKv), table(kCompGate), table(kCompPrevKv),
                             table(kCompPrevGate), entry_pages(ll.comp, row_tables_.get())};
    s.index = CompressorSlots{table(kIdxKv), table(kIdxGate), table(kIdxPrevKv),
                              table(kIdxPrevGate), entry_pages(ll.index, row_tables_.get())};
    slots_.push_back(s);
  }
}

EntryPages PagedState::entry_pages(const v4::CompressorLayout& cl, const int32_t* tables) const {
  EntryPages e;
  if (cl.ratio == 0) return e;
  e.pool = pool_.get();
  e.tables = tables;
  e.table_stride = std::max<int64_t>(1, max_token_pages_);
  e.page_floats = layout_.page_floats();
  e.offset = cl.entry_offset;
  e.page_tokens = layout_.page_tokens();
  e.ratio = cl.ratio;
  e.dim = cl.dim;
  return e;
}

CompressorView PagedState::compressor_view(const v4::CompressorLayout& cl, const Place* places,
                                           const int32_t* constant_pages,
                                           const int32_t* table) const {
  CompressorView v;
  if (cl.ratio == 0) return v;
  v.ratio = cl.ratio;
  v.width = cl.width;
  v.dim = cl.dim;
  v.pending_kv = address(places[0], constant_pages);
  v.pending_gate = address(places[1], constant_pages);
  v.prev_kv = address(places[2], constant_pages);
  v.prev_gate = address(places[3], constant_pages);
  v.entries = entry_pages(cl, table);
  return v;
}

void PagedState::resolve_into(const PagedSequence& seq, const int32_t* table,
                              SegmentState* out) const {
  out->layers.resize(layout_.layers().size());
  for (int l = 0; l < int(layout_.layers().size()); ++l) {
    const v4::LayerLayout& ll = layout_.layers()[l];
    const Place* p = &places_[size_t(l) * kKinds];
    LayerView& v = out->layers[l];
    v.ring = address(p[kRing], seq.constant_pages);
    v.ring_rows = c_.sliding_window;
    v.comp = compressor_view(ll.comp, p + kCompKv, seq.constant_pages, table);
    v.index = compressor_view(ll.index, p + kIdxKv, seq.constant_pages, table);
  }
}

const SegmentState& PagedState::resolve(const PagedSequence& seq, cudaStream_t stream) {
  if (seq.num_token_pages > 0)
    DI_CUDA_CHECK(cudaMemcpyAsync(segment_table_.get(), seq.token_pages,
                                  seq.num_token_pages * sizeof(int32_t), cudaMemcpyHostToDevice,
                                  stream));
  resolve_into(seq, segment_table_.get(), &segment_);
  return segment_;
}

const std::vector<SegmentState>& PagedState::resolve_rows(const PagedSequence* seqs, int64_t count,
                                                          cudaStream_t stream) {
  DI_CHECK(count >= 1 && count <= max_rows_);
  const int64_t stride = std::max<int64_t>(1, max_token_pages_);
  row_segments_.resize(size_t(count));
  for (int64_t b = 0; b < count; ++b) {
    if (seqs[b].num_token_pages > 0)
      std::memcpy(host_tables_.get() + b * stride, seqs[b].token_pages,
                  seqs[b].num_token_pages * sizeof(int32_t));
    resolve_into(seqs[b], row_tables_.get() + b * stride, &row_segments_[size_t(b)]);
  }
  DI_CUDA_CHECK(cudaMemcpyAsync(row_tables_.get(), host_tables_.get(),
                                count * stride * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  return row_segments_;
}

const std::vector<SegmentSnapshot>& PagedState::snapshot_copies(const PagedSequence& seq, int64_t n,
                                                                cudaStream_t stream) {
  snapshots_.clear();
  snapshot_states_.resize(size_t(seq.num_snapshots));  // before any pointer into it is taken
  for (int64_t k = 0; k < seq.num_snapshots; ++k) {
    const PagedSnapshot& sn = seq.snapshots[k];
    if (sn.end_pos <= seq.num_tokens || sn.end_pos > seq.num_tokens + n) continue;
    for (int64_t p = 0; p < layout_.constant_pages(); ++p)
      DI_CUDA_CHECK(cudaMemcpyAsync(page(sn.constant_pages[p]), page(seq.constant_pages[p]),
                                    page_bytes(), cudaMemcpyDeviceToDevice, stream));
    PagedSequence copy;
    copy.constant_pages = sn.constant_pages;
    resolve_into(copy, nullptr, &snapshot_states_[size_t(k)]);
    snapshots_.push_back({sn.end_pos, &snapshot_states_[size_t(k)]});
  }
  return snapshots_;
}

void PagedState::reset(const PagedSequence& seq, cudaStream_t stream) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int l = 0; l < c_.num_layers; ++l) {
    const v4::LayerLayout& ll = layout_.layers()[l];
    const Place* p = &places_[size_t(l) * kKinds];
    auto fill = [&](Kind k, int64_t floats, float value) {
      if (float* a = address(p[k], seq.constant_pages)) fill_floats(a, floats, value, stream);
    };
    for (const auto& [cl, base] : {std::pair{&ll.comp, kCompKv}, std::pair{&ll.index, kIdxKv}}) {
      const int64_t pending = int64_t{cl->ratio} * cl->width, prev = int64_t{cl->ratio} * cl->dim;
      fill(Kind(base), pending, 0.0f);
      fill(Kind(base + 1), pending, ninf);
      fill(Kind(base + 2), prev, 0.0f);
      fill(Kind(base + 3), prev, ninf);
    }
  }
  // The MTP layer's ring starts at zeros, as the CPU's: its drafts may attend rows no draft
  // wrote (the prompt's positions).
  for (size_t l = c_.num_layers; l < layout_.layers().size(); ++l) {
    const v4::RowBuffer& ring = layout_.layers()[l].ring;
    if (float* a = address(places_[l * kKinds + kRing], seq.constant_pages))
      fill_floats(a, int64_t(ring.rows) * ring.width, 0.0f, stream);
  }
}

void PagedState::stage_rows(const PagedSequence* seqs, int64_t count, cudaStream_t stream) {
  const int64_t stride = std::max<int64_t>(1, max_token_pages_);
  for (int64_t b = 0; b < count; ++b) {
    const PagedSequence& s = seqs[b];
    for (int l = 0; l < c_.num_layers; ++l)
      for (int k = 0; k < kKinds; ++k) {
        const size_t at = size_t(l) * kKinds + k;
        host_ptrs_.get()[at * max_rows_ + b] = address(places_[at], s.constant_pages);
      }
    std::memcpy(host_tables_.get() + b * stride, s.token_pages,
                s.num_token_pages * sizeof(int32_t));
  }
  // Every [layer][kind] run of pointers up to row count (one copy of the whole array is simplest
  // and small: layers x 9 x max_rows pointers).
  DI_CUDA_CHECK(cudaMemcpyAsync(row_ptrs_.get(), host_ptrs_.get(),
                                row_ptrs_.size() * sizeof(float*), cudaMemcpyHostToDevice, stream));
  DI_CUDA_CHECK(cudaMemcpyAsync(row_tables_.get(), host_tables_.get(),
                                count * stride * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
}

}  // namespace deepinfer::cuda
