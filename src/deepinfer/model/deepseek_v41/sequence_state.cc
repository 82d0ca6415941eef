#include "deepinfer/model/deepseek_v41/sequence_state.h"

#include <algorithm>

#include "deepinfer/base/check.h"

namespace deepinfer::v41 {
namespace {

// init: zero the rows (a fresh state); otherwise keep what the pages hold.
std::vector<float*> bind_rows(const StateLayout& lay, v4::StatePages& pages, const RowBuffer& b,
                              bool init) {
  std::vector<float*> rows(b.rows);
  for (int i = 0; i < b.rows; ++i) {
    const RowPlace& at = lay.constant_rows()[b.first + i];
    rows[i] = pages.constant_page(at.page) + at.offset;
    if (init) std::fill(rows[i], rows[i] + b.width, 0.0f);
  }
  return rows;
}

SequenceState bind_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                         std::unique_ptr<v4::StatePages> pages, bool init) {
  if (!layout) layout = std::make_shared<StateLayout>(c, kDefaultPageTokens);
  if (!pages) pages = std::make_unique<v4::HeapStatePages>(layout->page_floats());
  DI_CHECK(static_cast<int>(layout->layers().size()) == c.num_layers);
  SequenceState s;
  for (const LayerLayout& ll : layout->layers()) {
    s.window.push_back(bind_rows(*layout, *pages, ll.ring, init));
    KvSourceState src;
    src.ratio = ll.source.ratio;
    if (src.ratio > 0) {
      src.pending_kv = bind_rows(*layout, *pages, ll.source.pending_kv, init);
      src.pending_gate = bind_rows(*layout, *pages, ll.source.pending_gate, init);
      src.pages = pages.get();
      src.layout = layout.get();
      src.place = &ll.source;
    }
    s.sources.push_back(std::move(src));
  }
  s.engram_history = bind_rows(*layout, *pages, layout->engram_history(), init);
  s.layout = std::move(layout);
  s.pages = std::move(pages);
  return s;
}

}  // namespace

void KvSourceState::append_entry(float** entry, float** key) {
  DI_CHECK(pages != nullptr && place != nullptr);
  int64_t page, entry_offset, key_offset;
  layout->entry_place(*place, num_entries(), &page, &entry_offset, &key_offset);
  float* base = pages->token_page(page);
  *entry = base + entry_offset;
  *key = base + key_offset;
  entries.push_back(*entry);
  index_keys.push_back(*key);
}

SequenceState make_sequence_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                                  std::unique_ptr<v4::StatePages> pages) {
  return bind_state(c, std::move(layout), std::move(pages), /*init=*/true);
}

SequenceState adopt_sequence_state(const Config& c, std::shared_ptr<const StateLayout> layout,
                                   std::unique_ptr<v4::StatePages> pages, int64_t num_tokens) {
  SequenceState s = bind_state(c, std::move(layout), std::move(pages), /*init=*/false);
  for (KvSourceState& src : s.sources) {
    if (src.ratio == 0) continue;
    src.pending = num_tokens % src.ratio;
    float *entry, *key;
    for (int64_t e = 0; e < num_tokens / src.ratio; ++e) src.append_entry(&entry, &key);
  }
  s.num_tokens = num_tokens;
  return s;
}

}  // namespace deepinfer::v41
