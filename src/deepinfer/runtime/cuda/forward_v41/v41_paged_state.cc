#include "deepinfer/runtime/cuda/forward_v41/v41_paged_state.h"

#include <algorithm>

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::cuda::v41f {

V41PagedState::V41PagedState(const v41::Config& c, int page_tokens, int64_t max_tokens,
                             int64_t max_rows)
    : c_(c),
      layout_(c, page_tokens),
      max_token_pages_((max_tokens + page_tokens - 1) / page_tokens),
      max_rows_(std::max<int64_t>(1, max_rows)),
      tables_(size_t(max_rows_ * std::max<int64_t>(1, max_token_pages_))),
      host_tables_(tables_.size(), 0) {}

void V41PagedState::allocate(int64_t num_pages) {
  pool_ = DeviceBuffer<float>();  // free the old pool first
  pool_ = DeviceBuffer<float>(size_t(num_pages * layout_.page_floats()));
  num_pages_ = num_pages;
}

float* V41PagedState::constant(const v4::RowBuffer& b, const int32_t* constant_pages) const {
  if (b.rows == 0) return nullptr;
  const v4::RowPlace at = layout_.buffer_place(b);
  return page(constant_pages[at.page]) + at.offset;
}

std::vector<V41SequenceView> V41PagedState::resolve(const PagedSequence* seqs, int64_t count,
                                                    cudaStream_t stream) {
  const int64_t stride = std::max<int64_t>(1, max_token_pages_);
  std::vector<V41SequenceView> views(count);
  for (int64_t b = 0; b < count; ++b) {
    const PagedSequence& s = seqs[b];
    std::copy(s.token_pages, s.token_pages + s.num_token_pages, &host_tables_[b * stride]);
    V41SequenceView& v = views[b];
    v.layers.resize(c_.num_layers);
    for (int l = 0; l < c_.num_layers; ++l) {
      const v41::LayerLayout& ll = layout_.layers()[l];
      V41LayerView& lv = v.layers[l];
      lv.ring = constant(ll.ring, s.constant_pages);
      const v41::SourceLayout& src = ll.source;
      if (src.ratio == 0) continue;
      lv.pending_kv = constant(src.pending_kv, s.constant_pages);
      lv.pending_gate = constant(src.pending_gate, s.constant_pages);
      EntryPages e;
      e.pool = pool_.get();
      e.tables = tables_.get() + b * stride;
      e.table_stride = stride;
      e.page_floats = layout_.page_floats();
      e.page_tokens = layout_.page_tokens();
      e.ratio = src.ratio;
      lv.entries = e;
      lv.entries.offset = src.entry_offset;
      lv.entries.dim = src.entry_dim;
      lv.keys = e;
      lv.keys.offset = src.key_offset;
      lv.keys.dim = src.key_dim;
    }
    v.engram_history = constant(layout_.engram_history(), s.constant_pages);
  }
  DI_CUDA_CHECK(cudaMemcpyAsync(tables_.get(), host_tables_.data(), count * stride * 4,
                                cudaMemcpyHostToDevice, stream));
  return views;
}

void V41PagedState::reset(const PagedSequence& seq, cudaStream_t stream) {
  for (int64_t k = 0; k < layout_.constant_pages(); ++k)
    DI_CUDA_CHECK(cudaMemsetAsync(page(seq.constant_pages[k]), 0, page_bytes(), stream));
}

}  // namespace deepinfer::cuda::v41f
