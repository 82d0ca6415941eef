// v41::StateLayout against hand-worked V4.1-Flash numbers (spec §11.1) and an independent
// enumeration of where compressed entries go.
#include "deepinfer/model/deepseek_v41/state_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>

#include "deepinfer/model/deepseek_v41/tiny_model.h"

namespace deepinfer::v41 {
namespace {

// The released 40-layer schedule on V4.1-Flash's dims: the v41-flash-8layer preset's config
// (spec §11.1 dims) with §11.1's layer lists.
Config flash_config() {
  auto text = tiny_model_config_json(
      "v41-flash-8layer", std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3");
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  auto parsed = parse_config_json(*text, "v41-flash-8layer");
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
  Config c = *parsed;
  c.num_layers = 40;
  c.num_nextn_layers = 3;
  c.compress_ratios = {0, 0};
  c.compress_ratios.insert(c.compress_ratios.end(), 18, 2);
  c.compress_ratios.insert(c.compress_ratios.end(), 20, 1);
  c.compress_ratios.insert(c.compress_ratios.end(), 3, 0);
  c.kv_source_layer_ids = {2, 8, 14, 20};
  c.index_source_layer_ids = {2, 8, 14, 20, 24, 28, 32, 36};
  c.candidate_source_layer_id = 20;
  c.engram.layer_ids = {1, 14};
  Status st = finalize_config(&c, "v41-flash");
  EXPECT_TRUE(st.ok()) << st.to_string();
  return c;
}

// By hand, fp32: the ratio-2 sources 2, 8, 14 end 64 groups per 128 tokens, each a 512-float
// entry and a 128-float key: 3 x 64 x 640 = 122,880; the ratio-1 source 20 ends 128:
// 128 x 640 = 81,920. 204,800 floats = 819,200 B per page, 6,400 B/token (V4-Flash: 13,760,
// deepseek_v4/state_layout_test.cc): consumers add nothing.
TEST(V41StateLayout, FlashPageIsTheSourcesGrowingStateOf128Tokens) {
  StateLayout lay(flash_config(), 128);
  EXPECT_EQ(lay.token_floats_per_page(), 204'800);
  EXPECT_EQ(lay.page_bytes(), 819'200);
  EXPECT_EQ(lay.page_bytes() / 128, 6'400);
}

// Constant floats by hand: rings 40 x 128 x 512 = 2,621,440; the ratio-2 sources' unfinished
// groups 3 x 2 x 2 x 512 = 6,144; the Engram look-back 3 (N = 4): 2,627,587. A page (204,800)
// takes three rings (196,608) and the small buffers fit in what is left, so 40 rings need
// ceil(40 / 3) = 14 pages.
TEST(V41StateLayout, FlashConstantRowsAreDisjointAndNeverStraddleAPage) {
  StateLayout lay(flash_config(), 128);
  int64_t floats = 0;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_page;  // page -> [begin, end)
  auto visit = [&](const RowBuffer& b) {
    if (b.rows == 0) return;
    const RowPlace first = lay.buffer_place(b);
    ASSERT_LE(first.offset + int64_t{b.rows} * b.width, lay.page_floats()) << "buffer straddles";
    for (int i = 0; i < b.rows; ++i) {
      const RowPlace& r = lay.constant_rows()[b.first + i];
      ASSERT_EQ(r.page, first.page);
      ASSERT_EQ(r.offset, first.offset + int64_t{i} * b.width);
      ASSERT_LT(r.page, lay.constant_pages());
      by_page[r.page].push_back({r.offset, r.offset + b.width});
      floats += b.width;
    }
  };
  for (const LayerLayout& ll : lay.layers()) {
    visit(ll.ring);
    visit(ll.source.pending_kv);
    visit(ll.source.pending_gate);
  }
  visit(lay.engram_history());
  EXPECT_EQ(floats, 2'627'587);
  EXPECT_EQ(static_cast<int64_t>(lay.constant_rows().size()), 40 * 128 + 3 * 2 * 2 + 3);
  for (auto& [page, spans] : by_page) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "overlap in page " << page;
  }
  EXPECT_EQ(lay.constant_pages(), 14);
}

// Entries placed by an independent enumeration: walk the tokens, and whenever a group ends,
// give it the next free slot of the page holding that token.
TEST(V41StateLayout, EntriesGoToThePageWhereTheirGroupEnds) {
  const Config base = flash_config();
  for (int page_tokens : {1, 3, 16, 128}) {
    StateLayout lay(base, page_tokens);
    for (int layer : {2, 20}) {
      const SourceLayout& s = lay.layers()[layer].source;
      ASSERT_EQ(s.ratio, base.compress_ratio(layer));
      std::map<int64_t, int> used;  // page -> slots taken
      int64_t e = 0;
      for (int64_t t = 0; t < 600; ++t) {
        if ((t + 1) % s.ratio != 0) continue;
        const int64_t want_page = t / page_tokens;
        const int slot = used[want_page]++;
        int64_t page, entry, key;
        lay.entry_place(s, e++, &page, &entry, &key);
        ASSERT_EQ(page, want_page) << "layer " << layer << " page_tokens " << page_tokens;
        ASSERT_EQ(entry, s.entry_offset + int64_t{slot} * 512);
        ASSERT_EQ(key, s.key_offset + int64_t{slot} * 128);
        ASSERT_LE(entry + 512, lay.page_floats());
        ASSERT_LE(key + 128, lay.page_floats());
      }
    }
    // Consumers own no growing state.
    EXPECT_EQ(lay.layers()[3].source.ratio, 0);
    EXPECT_EQ(lay.layers()[21].source.ratio, 0);
  }
}

}  // namespace
}  // namespace deepinfer::v41
