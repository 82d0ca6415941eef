#include "deepinfer/model/deepseek_v4/state_layout.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::v4 {
namespace {

CompressorLayout compressor(int ratio, int dim, int page_tokens) {
  CompressorLayout cl;
  cl.ratio = ratio;
  cl.dim = dim;
  cl.width = is_csa_ratio(ratio) ? 2 * dim : dim;
  // Entries end at tokens k*ratio - 1: a page of page_tokens tokens holds at most this many.
  cl.slots_per_page = (page_tokens + ratio - 1) / ratio;
  return cl;
}

}  // namespace

StateLayout::StateLayout(const Config& c, int page_tokens) : PageGeometry(page_tokens) {
  DI_CHECK(page_tokens > 0);
  // Growing part first: it fixes the page size.
  for (int l = 0; l <= c.num_layers; ++l) {
    LayerLayout ll;
    const int r = l < c.num_layers ? c.compress_ratio(l) : 0;
    if (r > 0) {
      ll.comp = compressor(r, c.head_dim, page_tokens);
      ll.comp.entry_offset = page_floats_;
      page_floats_ += int64_t{ll.comp.slots_per_page} * ll.comp.dim;
      if (is_csa_ratio(r)) {
        ll.index = compressor(r, c.index_head_dim, page_tokens);
        ll.index.entry_offset = page_floats_;
        page_floats_ += int64_t{ll.index.slots_per_page} * ll.index.dim;
      }
    }
    layers_.push_back(ll);
  }
  // Every constant buffer lies whole within one page, so a device kernel can address it from
  // its first row: a page holds at least the largest (a ring, or an HCA window of 128 rows).
  int64_t largest = int64_t{c.sliding_window} * c.head_dim;
  for (const auto& ll : layers_)
    for (const CompressorLayout* cl : {&ll.comp, &ll.index})
      largest = std::max<int64_t>(largest, int64_t{cl->ratio} * cl->width);
  page_floats_ = std::max(page_floats_, largest);

  constant_ = ConstantRows(page_floats_);
  auto add = [&](int rows, int width) { return constant_.add(rows, width); };
  auto add_compressor = [&](CompressorLayout& cl) {
    if (cl.ratio == 0) return;
    cl.pending_kv = add(cl.ratio, cl.width);
    cl.pending_gate = add(cl.ratio, cl.width);
    if (is_csa_ratio(cl.ratio)) {
      cl.prev_kv = add(cl.ratio, cl.dim);
      cl.prev_gate = add(cl.ratio, cl.dim);
    }
  };
  for (auto& ll : layers_) {
    ll.ring = add(c.sliding_window, c.head_dim);
    add_compressor(ll.comp);
    add_compressor(ll.index);
  }
}

RowBuffer ConstantRows::add(int rows, int width) {
  DI_CHECK(int64_t{width} <= page_floats_);
  RowBuffer b{static_cast<int64_t>(rows_.size()), rows, width};
  if (used_ + int64_t{rows} * width > page_floats_) {
    ++page_;
    used_ = 0;
  }
  for (int i = 0; i < rows; ++i) {
    rows_.push_back({page_, used_});
    used_ += width;
  }
  return b;
}

RowPlace ConstantRows::buffer_place(const RowBuffer& b) const {
  DI_CHECK(b.rows > 0 && b.first >= 0 && b.first < static_cast<int64_t>(rows_.size()));
  return rows_[b.first];
}

void StateLayout::entry_place(const CompressorLayout& cl, int64_t e, int64_t* page,
                              int64_t* offset) const {
  const int64_t last_token = (e + 1) * cl.ratio - 1;
  *page = last_token / page_tokens_;
  // The first entry ending in page p is floor(p * page_tokens / ratio).
  const int64_t slot = e - (*page * page_tokens_) / cl.ratio;
  DI_CHECK(slot >= 0 && slot < cl.slots_per_page);
  *offset = cl.entry_offset + slot * cl.dim;
}

}  // namespace deepinfer::v4
