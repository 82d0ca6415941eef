#include "deepinfer/model/deepseek_v41/state_layout.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::v41 {

StateLayout::StateLayout(const Config& c, int page_tokens) : v4::PageGeometry(page_tokens) {
  DI_CHECK(page_tokens > 0);
  // Growing part first: it fixes the page size. Only KV sources grow; consumers read theirs.
  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_kv_source(l)) continue;
    SourceLayout& s = layers_[l].source;
    s.ratio = c.compress_ratio(l);
    s.entry_dim = c.head_dim;
    s.key_dim = c.index_head_dim;
    // Groups end at tokens k*ratio - 1: a page of page_tokens tokens holds at most this many.
    s.slots_per_page = (page_tokens + s.ratio - 1) / s.ratio;
    s.entry_offset = token_floats_;
    token_floats_ += int64_t{s.slots_per_page} * s.entry_dim;
    s.key_offset = token_floats_;
    token_floats_ += int64_t{s.slots_per_page} * s.key_dim;
  }
  // Every constant buffer lies whole within one page, so a device kernel can address it from its
  // first row: a page holds at least the largest (a ring, in every V4.1 config so far).
  int64_t largest = int64_t{c.sliding_window} * c.head_dim;
  for (const LayerLayout& ll : layers_)
    if (ll.source.ratio > 1) largest = std::max(largest, int64_t{ll.source.ratio} * c.head_dim);
  const int history = c.engram.layer_ids.empty() ? 0 : c.engram.max_ngram_size - 1;
  page_floats_ = std::max({token_floats_, largest, int64_t{history}});

  constant_ = v4::ConstantRows(page_floats_);
  auto add = [&](int rows, int width) { return constant_.add(rows, width); };
  for (LayerLayout& ll : layers_) {
    ll.ring = add(c.sliding_window, c.head_dim);
    if (ll.source.ratio > 1) {
      ll.source.pending_kv = add(ll.source.ratio, c.head_dim);
      ll.source.pending_gate = add(ll.source.ratio, c.head_dim);
    }
  }
  if (history > 0) engram_history_ = add(history, 1);
}

void StateLayout::entry_place(const SourceLayout& s, int64_t e, int64_t* page,
                              int64_t* entry_offset, int64_t* key_offset) const {
  DI_CHECK(s.ratio > 0);
  const int64_t last_token = (e + 1) * s.ratio - 1;
  *page = last_token / page_tokens_;
  // The first group ending in page p is floor(p * page_tokens / ratio).
  const int64_t slot = e - (*page * page_tokens_) / s.ratio;
  DI_CHECK(slot >= 0 && slot < s.slots_per_page);
  *entry_offset = s.entry_offset + slot * s.entry_dim;
  *key_offset = s.key_offset + slot * s.key_dim;
}

}  // namespace deepinfer::v41
