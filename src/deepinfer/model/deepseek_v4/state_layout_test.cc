#include "deepinfer/model/deepseek_v4/state_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "deepinfer/model/deepseek_v4/testing/flash_config.h"

namespace deepinfer::v4 {
namespace {

Config flash_config() { return testing::flash_state_config(); }

// Worked by hand, fp32 per token: CSA 512 x 4 / 4 = 512 B + indexer 128 x 4 / 4 = 128 B (21
// layers), HCA 512 x 4 / 128 = 16 B (20 layers): 13,760 B/token (twice spec §7's 6,880 bf16);
// x 128 tokens = 1,761,280 B per page.
TEST(StateLayout, FlashPageIsTheSpecGrowingStateOf128Tokens) {
  StateLayout lay(flash_config(), 128);
  EXPECT_EQ(lay.page_bytes(), 1'761'280);
}

// Constant floats by hand: rings 44 x 128 x 512 = 2,883,584; CSA compressor windows
// 2 x 4 x 1024 + 2 x 4 x 512 = 12,288 and its indexer's 2 x 4 x 256 + 2 x 4 x 128 = 3,072
// (21 layers); HCA 2 x 128 x 512 = 131,072 (20 layers): 5,827,584 in all.
TEST(StateLayout, FlashConstantRowsAreDisjointAndNeverStraddleAPage) {
  StateLayout lay(flash_config(), 128);
  int64_t floats = 0;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_page;  // page -> [begin, end)
  auto visit = [&](const RowBuffer& b) {
    if (b.rows == 0) return;  // a buffer the layer lacks
    const RowPlace first = lay.buffer_place(b);
    ASSERT_LE(first.offset + int64_t{b.rows} * b.width, lay.page_floats()) << "buffer straddles";
    for (int i = 0; i < b.rows; ++i) {
      const RowPlace& r = lay.constant_rows()[b.first + i];
      // A buffer's rows follow each other in one page (device kernels address it whole).
      ASSERT_EQ(r.page, first.page);
      ASSERT_EQ(r.offset, first.offset + int64_t{i} * b.width);
      ASSERT_LT(r.page, lay.constant_pages());
      ASSERT_LE(r.offset + b.width, lay.page_floats());
      by_page[r.page].push_back({r.offset, r.offset + b.width});
      floats += b.width;
    }
  };
  for (const auto& ll : lay.layers()) {
    visit(ll.ring);
    for (const CompressorLayout* cl : {&ll.comp, &ll.index}) {
      visit(cl->pending_kv);
      visit(cl->pending_gate);
      visit(cl->prev_kv);
      visit(cl->prev_gate);
    }
  }
  EXPECT_EQ(floats, 5'827'584);
  EXPECT_EQ(static_cast<int64_t>(lay.constant_rows().size()),
            44 * 128 + 21 * (4 * 4 + 4 * 4) + 20 * 2 * 128);
  for (auto& [page, spans] : by_page) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "overlap in page " << page;
  }
  // 5,827,584 floats over pages of 440,320: 14 pages when nothing is wasted. Buffers never
  // straddle, so a page wastes less than the largest buffer (65,536 floats): at most
  // ceil(5,827,584 / (440,320 - 65,536)) = 16 pages.
  EXPECT_GE(lay.constant_pages(), 14);
  EXPECT_LE(lay.constant_pages(), 16);
}

// Entries placed by an independent enumeration: walk the tokens, and whenever a window ends,
// give the entry the next free slot of the page holding that token.
TEST(StateLayout, EntriesGoToThePageWhereTheirWindowEnds) {
  for (int page_tokens : {1, 5, 16, 128}) {
    for (int ratio : {3, 4, 128}) {
      Config c = flash_config();
      c.num_layers = 1;
      c.compress_ratios = {ratio, 0};
      StateLayout lay(c, page_tokens);
      const CompressorLayout& cl = lay.layers()[0].comp;
      std::map<int64_t, int> used;  // page -> slots taken
      int64_t e = 0;
      for (int64_t t = 0; t < 1000; ++t) {
        if ((t + 1) % ratio != 0) continue;
        const int64_t want_page = t / page_tokens;
        const int slot = used[want_page]++;
        int64_t page, offset;
        lay.entry_place(cl, e++, &page, &offset);
        ASSERT_EQ(page, want_page) << "ratio " << ratio << " page_tokens " << page_tokens;
        ASSERT_EQ(offset, cl.entry_offset + int64_t{slot} * cl.dim);
        ASSERT_LE(offset + cl.dim, lay.page_floats());
      }
    }
  }
}

// A model with no compressed layer still gets pages that hold a whole ring (128 x 512 floats).
TEST(StateLayout, SlidingOnlyModelHasPagesForItsRings) {
  Config c = flash_config();
  c.num_layers = 2;
  c.compress_ratios = {0, 0, 0};
  StateLayout lay(c, 128);
  EXPECT_EQ(lay.page_floats(), 128 * 512);
  EXPECT_EQ(lay.constant_pages(), 3);  // two main layers' rings and the MTP layer's
}

}  // namespace
}  // namespace deepinfer::v4
