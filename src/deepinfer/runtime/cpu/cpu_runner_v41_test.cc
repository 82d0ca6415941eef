// The CPU runner over a deepseek_v41 model (the v41-default tiny preset): its page pool, row
// batching, adoption of copied pages and page I/O must not change a single logit of the model's
// own forward; V4.1 numerics are plain only.
#include <gtest/gtest.h>

#include <random>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/model/deepseek_v41/cpu_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cpu/cpu_runner.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"

namespace deepinfer::runtime {
namespace {

using runtime::testing::logits_of;
using runtime::testing::random_ids;
using runtime::testing::run_chunked;

const std::string& model_dir() { return v41::tiny_model_dir_for_test(/*quantized=*/true); }

std::unique_ptr<ModelRunner> make_runner(int64_t kv_bytes = 64ll << 20) {
  RunnerOptions o;
  o.model_dir = model_dir();
  o.kv_memory_bytes = kv_bytes;
  auto r = create_runner(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The reference: the model's own forward over a standalone (heap) state, last-position logits.
std::vector<float> reference_logits(const std::vector<int32_t>& ids) {
  static const std::unique_ptr<v41::CpuModel> model = [] {
    auto m = v41::CpuModel::load(model_dir());
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(m).value() : nullptr;
  }();
  if (!model) return {};
  v41::SequenceState st = model->new_sequence();
  std::vector<float> logits;
  EXPECT_TRUE(
      model->forward(st, ids.data(), static_cast<int64_t>(ids.size()), false, &logits).ok());
  return logits;
}

// v41-default by hand: KV sources 2 (ratio 2: 64 groups per 128 tokens) and 4 (ratio 1: 128),
// each group a 64-float entry and a 32-float key: (64 + 128) x 96 floats = 73,728 B a page,
// above the largest constant buffer (a 16 x 64 ring).
TEST(CpuRunnerV41, PlainNumericsAndTheV41PageSize) {
  auto r = make_runner();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().numerics, "plain");
  EXPECT_EQ(r->page_spec().page_tokens, 128);
  EXPECT_EQ(r->page_spec().page_bytes, 73'728);
}

TEST(CpuRunnerV41, OfficialNumericsIsUnimplementedNamingTheFlag) {
  RunnerOptions o;
  o.model_dir = model_dir();
  o.numerics = Numerics::kOfficial;
  auto r = create_runner(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("--numerics official"), std::string::npos)
      << r.status().to_string();
}

TEST(CpuRunnerV41, ChunkedRowsMatchTheModelsOwnForward) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto ids = random_ids(300, 1);  // crosses page boundaries (128 tokens a page)
  EXPECT_EQ(run_chunked(*r, *kv, 7, ids, 0, 37), reference_logits(ids));
}

TEST(CpuRunnerV41, OneBatchOfSeveralSequencesEqualsEachAlone) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto a = random_ids(50, 2), b = random_ids(9, 3), c = random_ids(21, 4);
  ASSERT_TRUE(kv->reserve(1, 50));
  ASSERT_TRUE(kv->reserve(2, 9));
  ASSERT_TRUE(kv->reserve(3, 21));
  StepBatch batch;
  batch.rows.push_back({1, 0, a.data(), 50, kv->state_pages(1), kv->block_table(1), true});
  batch.rows.push_back({2, 0, b.data(), 9, kv->state_pages(2), kv->block_table(2), true});
  batch.rows.push_back({3, 0, c.data(), 21, kv->state_pages(3), kv->block_table(3), true});
  StepOutput out;
  ASSERT_TRUE(r->execute(batch, &out).ok());
  ASSERT_EQ(out.num_logit_rows, 3);
  const std::vector<float> got = logits_of(*r, out);
  size_t at = 0;
  for (const auto* ids : {&a, &b, &c}) {
    const auto want = reference_logits(*ids);
    EXPECT_EQ(std::vector<float>(got.begin() + at, got.begin() + at + want.size()), want);
    at += want.size();
  }
}

// Forked at 151 tokens: the ratio-2 source has an unfinished group, the Engram look-back spans
// the fork point, and the child shares the parent's full token page.
TEST(CpuRunnerV41, ForkedPagesContinueLikeTheParent) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  auto ids = random_ids(200, 4);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 151);
  run_chunked(*r, *kv, 1, prompt, 0, 64);
  std::vector<kv::PageCopy> copies;
  ASSERT_TRUE(kv->fork(1, 2, 151, &copies));
  StepBatch b;
  b.page_copies = copies;
  ASSERT_TRUE(kv->reserve(2, 200));
  b.rows.push_back({2, 151, &ids[151], 49, kv->state_pages(2), kv->block_table(2), true});
  StepOutput out;
  ASSERT_TRUE(r->execute(b, &out).ok());
  EXPECT_EQ(logits_of(*r, out), reference_logits(ids));
  // The parent continues too, undisturbed by its child.
  EXPECT_EQ(run_chunked(*r, *kv, 1, ids, 151, 49), reference_logits(ids));
}

TEST(CpuRunnerV41, PagesReadBackAndWrittenElsewhereResumeTheSequence) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  auto ids = random_ids(170, 6);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 141);
  run_chunked(*r, *kv, 1, prompt, 0, 141);
  std::vector<int32_t> from = *kv->state_pages(1);
  from.insert(from.end(), kv->block_table(1)->begin(), kv->block_table(1)->end());
  auto bytes = r->read_pages(from);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(kv->reserve(2, 141));
  std::vector<int32_t> to = *kv->state_pages(2);
  to.insert(to.end(), kv->block_table(2)->begin(), kv->block_table(2)->end());
  ASSERT_TRUE(r->write_pages(to, *bytes).ok());
  kv->free(1);
  r->release(1);
  EXPECT_EQ(run_chunked(*r, *kv, 2, ids, 141, 29), reference_logits(ids));
}

}  // namespace
}  // namespace deepinfer::runtime
