// The CPU state in pages the way the engine's pool hands them out: pages recycled from other
// sequences (here: poisoned with NaN), any page size, token pages touched only once the tokens
// they cover are being processed. Logits must equal those of a state in fresh heap pages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "golden_fixture.h"

namespace deepinfer::v4 {
namespace {

using deepinfer::testing::golden_dir;
using deepinfer::testing::make_ids;

// Pages full of NaN, as a recycled pool page may hold anything; records which token pages the
// forward asks for.
class PoisonedPages final : public StatePages {
 public:
  explicit PoisonedPages(int64_t page_floats) : page_floats_(page_floats) {}
  float* constant_page(int64_t k) override { return get(constant_, k); }
  float* token_page(int64_t p) override {
    max_token_page = std::max(max_token_page, p);
    return get(tokens_, p);
  }
  int64_t max_token_page = -1;

 private:
  float* get(std::map<int64_t, std::vector<float>>& pages, int64_t i) {
    auto& v = pages[i];
    if (v.empty()) v.assign(page_floats_, std::numeric_limits<float>::quiet_NaN());
    return v.data();
  }
  int64_t page_floats_;
  std::map<int64_t, std::vector<float>> constant_, tokens_;
};

class PagedState : public ::testing::TestWithParam<const char*> {};

TEST_P(PagedState, PoisonedPagesOfAnySizeGiveHeapStateLogits) {
  auto m = CpuModel::load(golden_dir(GetParam()), ModelOptions::with_numerics(Numerics::kOfficial));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const CpuModel& model = **m;
  const Config& c = model.config();
  const int64_t n = 75;
  const auto ids = make_ids(n, c.vocab_size, 11);

  SequenceState heap = model.new_sequence();
  std::vector<float> want;
  ASSERT_TRUE(model.forward(heap, ids.data(), n, true, &want).ok());

  for (int page_tokens : {1, 7, 16, 128}) {
    SCOPED_TRACE("page_tokens " + std::to_string(page_tokens));
    auto layout = std::make_shared<const StateLayout>(c, page_tokens);
    auto owned = std::make_unique<PoisonedPages>(layout->page_floats());
    PoisonedPages* pages = owned.get();
    SequenceState s = make_sequence_state(c, layout, std::move(owned));
    std::vector<float> got, chunk;
    // Prefill in uneven chunks, then decode: each call may only touch pages of tokens so far.
    int64_t pos = 0;
    for (int64_t len : {13, 1, 29, 2}) {
      ASSERT_TRUE(model.forward(s, &ids[pos], len, true, &chunk).ok());
      got.insert(got.end(), chunk.begin(), chunk.end());
      pos += len;
      EXPECT_LE(pages->max_token_page, (pos - 1) / page_tokens);
    }
    for (; pos < n; ++pos) {
      ASSERT_TRUE(model.forward(s, &ids[pos], 1, true, &chunk).ok());
      got.insert(got.end(), chunk.begin(), chunk.end());
      EXPECT_LE(pages->max_token_page, pos / page_tokens);
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << "logit " << i;
      ASSERT_EQ(got[i], want[i]) << "logit " << i;  // same arithmetic, only the memory differs
    }
    // And the pages serialize to the same bytes as the heap state.
    EXPECT_EQ(s.serialize(), heap.serialize());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PagedState,
                         ::testing::Values("mixed_selective", "sliding_hash", "hca_clamp"));

}  // namespace
}  // namespace deepinfer::v4
