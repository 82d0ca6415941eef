// The V4.1 state in pages the way a runner's pool hands them out: pages recycled from other
// sequences (here: poisoned with NaN), any page size, token pages touched only once the tokens
// they cover are being processed, and a state adopted from copied pages mid-sequence. Logits
// must equal those of a state in fresh heap pages, bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/golden_v41_fixture.h"

namespace deepinfer::v41 {
namespace {

// Pages full of NaN; records which token pages the forward asks for.
class PoisonedPages final : public v4::StatePages {
 public:
  explicit PoisonedPages(int64_t page_floats) : page_floats_(page_floats) {}
  float* constant_page(int64_t k) override { return get(constant_, k); }
  float* token_page(int64_t p) override {
    max_token_page = std::max(max_token_page, p);
    return get(tokens_, p);
  }
  int64_t max_token_page = -1;
  // Every page this one holds, copied into `to` (a fork's page copies).
  void copy_into(PoisonedPages& to) const {
    to.constant_ = constant_;
    to.tokens_ = tokens_;
  }

 private:
  float* get(std::map<int64_t, std::vector<float>>& pages, int64_t i) {
    auto& v = pages[i];
    if (v.empty()) v.assign(page_floats_, std::numeric_limits<float>::quiet_NaN());
    return v.data();
  }
  int64_t page_floats_;
  std::map<int64_t, std::vector<float>> constant_, tokens_;
};

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(pick(rng));
  return ids;
}

class V41PagedState : public ::testing::TestWithParam<const char*> {};

TEST_P(V41PagedState, PoisonedPagesOfAnySizeGiveHeapStateLogits) {
  auto m = CpuModel::load(testing::fixture_dir(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const CpuModel& model = **m;
  const Config& c = model.config();
  const int64_t n = 75;
  const auto ids = random_ids(n, c.vocab_size, 11);

  SequenceState heap = model.new_sequence();
  std::vector<float> want;
  ASSERT_TRUE(model.forward(heap, ids.data(), n, true, &want).ok());

  for (int page_tokens : {1, 3, 16, 128}) {
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
  }
}

// A fork: the parent's pages copied after 41 tokens (a group of the ratio-2 sources is then
// unfinished) and adopted; the child continues exactly like the parent.
TEST_P(V41PagedState, AdoptedCopiesContinueLikeTheParent) {
  auto m = CpuModel::load(testing::fixture_dir(GetParam()));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const CpuModel& model = **m;
  const Config& c = model.config();
  const int64_t n = 60, split = 41;
  const auto ids = random_ids(n, c.vocab_size, 5);
  for (int page_tokens : {3, 128}) {
    SCOPED_TRACE("page_tokens " + std::to_string(page_tokens));
    auto layout = std::make_shared<const StateLayout>(c, page_tokens);
    auto owned = std::make_unique<PoisonedPages>(layout->page_floats());
    PoisonedPages* parent_pages = owned.get();
    SequenceState parent = make_sequence_state(c, layout, std::move(owned));
    std::vector<float> logits, want, got;
    ASSERT_TRUE(model.forward(parent, ids.data(), split, false, &logits).ok());
    auto copy = std::make_unique<PoisonedPages>(layout->page_floats());
    parent_pages->copy_into(*copy);
    SequenceState child = adopt_sequence_state(c, layout, std::move(copy), split);
    ASSERT_TRUE(model.forward(parent, &ids[split], n - split, true, &want).ok());
    ASSERT_TRUE(model.forward(child, &ids[split], n - split, true, &got).ok());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "logit " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, V41PagedState, ::testing::ValuesIn(testing::kFixtures),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace deepinfer::v41
