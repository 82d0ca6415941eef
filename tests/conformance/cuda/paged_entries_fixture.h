// Test inputs for ops that read compressed entries through block tables: every sequence's
// entries scattered over the pages of one pool in a shuffled order, with the tables that find
// them (EntryPages), laid out with the page arithmetic written out here independently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "cuda_test_util.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/entry_pages.h"

namespace deepinfer::cuda::testing {

class PagedEntriesFixture {
 public:
  // entries[s]: sequence s's entries [n_s, dim] in order. Pages of page_tokens tokens hold the
  // entries whose window of `ratio` tokens ends in them, behind `offset` floats of other data.
  PagedEntriesFixture(const std::vector<std::vector<float>>& entries, int dim, int ratio,
                      int page_tokens, int64_t offset = 24) {
    const int64_t slots = (page_tokens + ratio - 1) / ratio;
    page_floats_ = offset + slots * dim + 8;  // trailing floats another compressor would use
    int64_t stride = 1;
    for (const auto& e : entries) {
      const int64_t n = int64_t(e.size()) / dim;
      stride = std::max<int64_t>(stride, n == 0 ? 1 : (n * ratio - 1) / page_tokens + 1);
    }
    const int64_t pages = stride * int64_t(entries.size());
    std::vector<int32_t> ids(pages);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng());
    std::vector<float> pool = randn(pages * page_floats_);  // unused floats hold noise
    std::vector<int32_t> tables(ids.begin(), ids.end());
    for (size_t s = 0; s < entries.size(); ++s) {
      const int64_t n = int64_t(entries[s].size()) / dim;
      for (int64_t e = 0; e < n; ++e) {
        const int64_t last_token = (e + 1) * ratio - 1, page = last_token / page_tokens;
        // Entries ending in earlier pages come first: this is the page's slot of entry e.
        const int64_t first_in_page = (page * page_tokens) / ratio;
        const int64_t at =
            int64_t{tables[s * stride + page]} * page_floats_ + offset + (e - first_in_page) * dim;
        std::copy_n(entries[s].begin() + e * dim, dim, pool.begin() + at);
      }
    }
    pool_ = DeviceBuffer<float>(pool);
    tables_ = DeviceBuffer<int32_t>(tables);
    view_.pool = pool_.get();
    view_.tables = tables_.get();
    view_.table_stride = stride;
    view_.page_floats = page_floats_;
    view_.offset = offset;
    view_.page_tokens = page_tokens;
    view_.ratio = ratio;
    view_.dim = dim;
  }
  const EntryPages& view() const { return view_; }

 private:
  int64_t page_floats_ = 0;
  DeviceBuffer<float> pool_;
  DeviceBuffer<int32_t> tables_;
  EntryPages view_;
};

}  // namespace deepinfer::cuda::testing
