// The CPU runner against the reference model it wraps: its page pool, row batching, adoption of
// copied pages and page I/O must not change a single logit.
#include "deepinfer/runtime/cpu/cpu_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"

namespace deepinfer::runtime {
namespace {

using runtime::testing::logits_of;
using runtime::testing::random_ids;
using runtime::testing::run_chunked;

const std::string& model_dir() {
  static const std::string dir = v4::quantized_tiny_model_for_test("cpu_runner_test_model", 5);
  return dir;
}

std::unique_ptr<ModelRunner> make_runner(int64_t kv_bytes = 64ll << 20) {
  RunnerOptions o;
  o.model_dir = model_dir();
  o.kv_memory_bytes = kv_bytes;
  auto r = create_runner(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The reference: the model's own forward over a standalone state, last-position logits.
std::vector<float> reference_logits(const std::vector<int32_t>& ids) {
  auto m =
      v4::CpuModel::load(model_dir(), v4::ModelOptions::with_numerics(v4::Numerics::kOfficial));
  EXPECT_TRUE(m.ok());
  v4::SequenceState st = (*m)->new_sequence();
  std::vector<float> logits;
  EXPECT_TRUE((*m)->forward(st, ids.data(), static_cast<int64_t>(ids.size()), false, &logits).ok());
  return logits;
}

TEST(CpuRunner, ChunkedRowsMatchTheModelsOwnForward) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto ids = random_ids(300, 1);  // crosses page boundaries (128 tokens a page)
  EXPECT_EQ(run_chunked(*r, *kv, 7, ids, 0, 37), reference_logits(ids));
}

TEST(CpuRunner, OneBatchOfSeveralSequencesEqualsEachAlone) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto a = random_ids(50, 2), b = random_ids(9, 3);
  ASSERT_TRUE(kv->reserve(1, 50));
  ASSERT_TRUE(kv->reserve(2, 9));
  StepBatch batch;
  batch.rows.push_back({1, 0, a.data(), 50, kv->state_pages(1), kv->block_table(1), true});
  batch.rows.push_back({2, 0, b.data(), 9, kv->state_pages(2), kv->block_table(2), true});
  StepOutput out;
  ASSERT_TRUE(r->execute(batch, &out).ok());
  ASSERT_EQ(out.num_logit_rows, 2);
  const auto la = reference_logits(a), lb = reference_logits(b);
  const std::vector<float> got = logits_of(*r, out);
  const size_t v = la.size();
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + v), la);
  EXPECT_EQ(std::vector<float>(got.begin() + v, got.end()), lb);
}

// A greedy row's argmax_only: StepOutput::argmax holds the first of its largest logits (the
// sampler's greedy choice, ties to the lowest id), computed here from the reference logits.
TEST(CpuRunner, ArgmaxOnlyRowsReturnTheirGreedyToken) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto a = random_ids(40, 4), b = random_ids(12, 5);
  ASSERT_TRUE(kv->reserve(1, 40));
  ASSERT_TRUE(kv->reserve(2, 12));
  StepBatch batch;
  batch.rows.push_back({1, 0, a.data(), 40, kv->state_pages(1), kv->block_table(1), true, true});
  batch.rows.push_back({2, 0, b.data(), 12, kv->state_pages(2), kv->block_table(2), true, false});
  StepOutput out;
  ASSERT_TRUE(r->execute(batch, &out).ok());
  ASSERT_EQ(out.num_logit_rows, 2);
  ASSERT_NE(out.argmax, nullptr);
  const std::vector<float> la = reference_logits(a);
  const int32_t want = static_cast<int32_t>(std::max_element(la.begin(), la.end()) - la.begin());
  EXPECT_EQ(out.argmax[0], want);
  // The other row still gets its logits.
  const auto lb = reference_logits(b);
  const std::vector<float> got = logits_of(*r, out);
  EXPECT_EQ(std::vector<float>(got.begin() + lb.size(), got.end()), lb);
}

// One sequence's tokens: a prompt (logits wanted at its end) and then decode tokens.
struct Traced {
  std::vector<int32_t> ids;
  int64_t prompt_len = 0;
  int64_t done = 0;  // positions run so far
};

// Batch invariance on the CPU (DEEPINFER_BATCH_INVARIANT, issue 19): the target sequence's
// logits at the end of its prompt and at each decode token are bitwise those it has alone,
// inside 100 random batch compositions (0-3 neighbours per step, at any row) and chunkings.
TEST(CpuRunner, OneSequencesLogitsAreTheSameBitsInAnyBatchAndChunking) {
  auto r = make_runner(int64_t{256} << 20);
  const int64_t vocab = r->info().vocab_size;
  Traced target{random_ids(43, 31), 40, 0};
  // Alone: the prompt in one row, then one row per decode token.
  std::vector<float> alone;
  {
    auto kv = kv::KvManager::create(r->page_spec());
    ASSERT_TRUE(kv.ok());
    const std::vector<int32_t> prompt(target.ids.begin(), target.ids.begin() + 40);
    alone = run_chunked(*r, *kv, 1, prompt, 0, 40);
    for (int64_t pos = 40; pos < 43; ++pos) {
      const std::vector<int32_t> upto(target.ids.begin(), target.ids.begin() + pos + 1);
      const auto row = run_chunked(*r, *kv, 1, upto, pos, 1);
      alone.insert(alone.end(), row.begin(), row.end());
    }
    r->release(1);
  }
  std::mt19937_64 rng(0xB1);
  uint64_t next_id = 10;
  for (int trial = 0; trial < 100; ++trial) {
    auto kv = kv::KvManager::create(r->page_spec());
    ASSERT_TRUE(kv.ok());
    const uint64_t target_id = next_id++;
    Traced t = target;
    std::vector<std::pair<uint64_t, Traced>> others;
    for (int i = 0; i < 3; ++i) {
      const int64_t len = 1 + static_cast<int64_t>(rng() % 60);
      others.push_back({next_id++, {random_ids(static_cast<int>(len), rng()), len, 0}});
    }
    std::vector<float> got;
    while (t.done < static_cast<int64_t>(t.ids.size())) {
      StepBatch b;
      std::vector<std::pair<Traced*, uint64_t>> rows;
      for (auto& [id, o] : others)
        if (o.done < o.prompt_len && rng() % 2) rows.push_back({&o, id});
      rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(rng() % (rows.size() + 1)),
                  {&t, target_id});
      int64_t target_logit_row = -1, logit_rows = 0;
      for (auto& [seq, id] : rows) {
        // A prompt chunk ends at the prompt's end at the latest; decode goes a token a step.
        const int64_t left = seq->prompt_len - seq->done;
        const int64_t n = seq->done < seq->prompt_len
                              ? std::min<int64_t>(left, 1 + static_cast<int64_t>(rng() % 24))
                              : 1;
        const int64_t end = seq->done + n;
        ASSERT_TRUE(kv->reserve(id, end));
        const bool wants = seq == &t ? end >= t.prompt_len : rng() % 2 == 0;
        if (seq == &t && wants) target_logit_row = logit_rows;
        logit_rows += wants ? 1 : 0;
        b.rows.push_back({id, seq->done, &seq->ids[seq->done], n, kv->state_pages(id),
                          kv->block_table(id), wants});
        seq->done = end;
      }
      StepOutput out;
      ASSERT_TRUE(r->execute(b, &out).ok());
      if (target_logit_row >= 0)
        got.insert(got.end(), out.logits + target_logit_row * vocab,
                   out.logits + (target_logit_row + 1) * vocab);
    }
    ASSERT_EQ(got.size(), alone.size());
    EXPECT_TRUE(std::memcmp(got.data(), alone.data(), got.size() * sizeof(float)) == 0)
        << "trial " << trial;
    r->release(target_id);
    for (auto& [id, o] : others) r->release(id);
  }
}

TEST(CpuRunner, ForkedPagesContinueLikeTheParent) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  auto ids = random_ids(200, 4);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 150);
  run_chunked(*r, *kv, 1, prompt, 0, 64);
  std::vector<kv::PageCopy> copies;
  ASSERT_TRUE(kv->fork(1, 2, 150, &copies));
  StepBatch b;
  b.page_copies = copies;
  // The child (unknown to the runner) continues at 150 from the copied and shared pages.
  ASSERT_TRUE(kv->reserve(2, 200));
  b.rows.push_back({2, 150, &ids[150], 50, kv->state_pages(2), kv->block_table(2), true});
  StepOutput out;
  ASSERT_TRUE(r->execute(b, &out).ok());
  EXPECT_EQ(logits_of(*r, out), reference_logits(ids));
}

TEST(CpuRunner, PagesReadBackAndWrittenElsewhereResumeTheSequence) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  auto ids = random_ids(170, 6);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 140);
  run_chunked(*r, *kv, 1, prompt, 0, 140);
  std::vector<int32_t> from = *kv->state_pages(1);
  from.insert(from.end(), kv->block_table(1)->begin(), kv->block_table(1)->end());
  auto bytes = r->read_pages(from);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), from.size() * r->page_spec().page_bytes);
  ASSERT_TRUE(kv->reserve(2, 140));
  std::vector<int32_t> to = *kv->state_pages(2);
  to.insert(to.end(), kv->block_table(2)->begin(), kv->block_table(2)->end());
  ASSERT_TRUE(r->write_pages(to, *bytes).ok());
  kv->free(1);
  r->release(1);
  EXPECT_EQ(run_chunked(*r, *kv, 2, ids, 140, 30), reference_logits(ids));
  EXPECT_FALSE(r->write_pages(to, "short").ok());
  EXPECT_FALSE(r->read_pages({-1}).ok());
}

TEST(CpuRunner, AStepThatDisagreesWithTheSequencesPositionIsAnError) {
  auto r = make_runner();
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto ids = random_ids(20, 8);
  run_chunked(*r, *kv, 1, ids, 0, 20);
  StepBatch b;
  b.rows.push_back({1, 5, ids.data(), 1, kv->state_pages(1), kv->block_table(1), true});
  StepOutput out;
  Status st = r->execute(b, &out);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("holds 20 tokens"), std::string::npos) << st.to_string();
}

TEST(CpuRunner, APoolTooSmallForOneSequenceNamesKvMemory) {
  RunnerOptions o;
  o.model_dir = model_dir();
  o.kv_memory_bytes = 1000;
  auto r = create_runner(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--kv-memory 1000"), std::string::npos);
}

TEST(CreateRunner, AGpuWithoutTheCudaBackendIsUnimplementedOrLoads) {
  RunnerOptions o;
  o.model_dir = model_dir();
  o.device = Device::kCuda;
  o.numerics = Numerics::kOfficial;
  auto r = create_runner(o);
  // Built without CUDA: unimplemented; with it: the GPU forward has no official numerics.
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << r.status().to_string();
}

}  // namespace
}  // namespace deepinfer::runtime
