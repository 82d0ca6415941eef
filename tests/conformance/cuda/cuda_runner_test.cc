// The CUDA model runner (runtime/cuda/cuda_runner.h) driven as the engine drives it, through
// execute(StepBatch), on every golden fixture in plain numerics. Expected logits come from the
// CPU reference (CpuModel's full prefill: a causal model's row at position p depends on ids[0..p]
// only, so any chunking, batching or fork must reproduce it), held to the tolerance of
// cuda_model_test: rows from the GPU's first differing discrete choice on (a bf16 near-tie) are
// not held. The runner's own contract is checked too: pages laid out as the CPU runner's, rows in
// row order, forks by page copy, page bytes that round-trip, and errors (never aborts) for a batch
// that disagrees with the pages.
#include "deepinfer/runtime/cuda/cuda_runner.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cpu_decisions.h"
#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/deepseek_v41/tiny_model.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cuda/forward/cuda_model.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/runtime/testing/speculative_rows_check.h"
#include "golden_fixture.h"
#include "logits_tolerance.h"
#include "runner_rows.h"

namespace deepinfer::cuda {
namespace {

using runtime::ModelRunner;
using runtime::StepBatch;
using runtime::StepOutput;
using runtime::StepRow;

constexpr int kMaxSeqs = 4;
constexpr int64_t kMaxModelLen = 256;
constexpr int64_t kBatchedTokens = 256;  // the runner's prefill chunk (as the traced model's)

using Seq = testing::RunnerSeq;

Seq seq_at(uint64_t id, int k, const kv::PageSpec& spec) {
  return testing::runner_seq(id, k, spec, kMaxModelLen, kMaxSeqs);
}

StepRow make_row(const Seq& s, const std::vector<int32_t>& ids, int64_t start, int64_t n,
                 bool wants_logits) {
  return testing::runner_row(s, ids, start, n, wants_logits);
}

runtime::RunnerOptions runner_options(const std::string& dir) {
  runtime::RunnerOptions o;
  o.model_dir = dir;
  o.device = runtime::Device::kCuda;
  o.numerics = runtime::Numerics::kPlain;
  o.max_model_len = kMaxModelLen;
  o.max_num_seqs = kMaxSeqs;
  o.max_num_batched_tokens = kBatchedTokens;
  o.gpu_memory_utilization = 0.9;
  return o;
}

class CudaRunnerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    fixture_ = testing::load_fixture(GetParam());
    ASSERT_FALSE(fixture_.ids.empty());
    dir_ = testing::golden_dir(GetParam());
    auto cpu = v4::CpuModel::load(dir_, CudaModelOptions{}.model);  // plain numerics
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    const v4::Config& c = (*cpu)->config();
    vocab_ = c.vocab_size;
    eos_ = c.eos_token_id;
    const int64_t L = static_cast<int64_t>(fixture_.ids.size());
    v4::SequenceState st = (*cpu)->new_sequence();
    ASSERT_TRUE((*cpu)->forward(st, fixture_.ids.data(), L, true, &want_).ok());

    // Where the GPU's choices first leave the CPU's (a single-sequence full prefill, traced):
    // rows from there on are not held, and that choice must be a near-tie.
    auto ckpt = Checkpoint::open(dir_);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    auto weights = v4::load_weights(**ckpt, c);
    ASSERT_TRUE(weights.ok()) << weights.status().to_string();
    const auto decisions = choices::cpu_decisions(c, *weights, fixture_.ids);
    CudaModelOptions mo;
    mo.max_chunk = kBatchedTokens;
    auto traced = CudaModel::load(dir_, mo);
    ASSERT_TRUE(traced.ok()) << traced.status().to_string();
    DecisionTrace trace;
    (*traced)->set_trace(&trace);
    std::vector<float> logits;
    ASSERT_TRUE((*traced)->forward(fixture_.ids.data(), L, true, &logits).ok());
    const choices::Flip flip = choices::first_flip(decisions, trace);
    held_ = std::min(L, flip.pos);
    std::printf("[%s] rows before position %lld held (%s)\n", GetParam().c_str(),
                static_cast<long long>(held_), flip.describe().c_str());
    if (flip.found()) {
      EXPECT_LT(flip.gap, kNearTie) << "a decision flipped with a clear gap: " << flip.describe();
    }
  }

  // kv_memory_bytes 0: the pool takes what --gpu-memory-utilization leaves, so only one such
  // runner fits on the device at a time.
  std::unique_ptr<ModelRunner> runner(int64_t kv_memory_bytes = 0) {
    runtime::RunnerOptions o = runner_options(dir_);
    o.kv_memory_bytes = kv_memory_bytes;
    auto r = runtime::cuda::create_cuda_runner(o);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(*r) : nullptr;
  }

  // Runs a batch that must succeed; its logits rows.
  std::vector<float> run(ModelRunner& r, const StepBatch& batch) {
    StepOutput out;
    const Status st = r.execute(batch, &out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    int64_t wants = 0;
    for (const StepRow& row : batch.rows) wants += row.wants_logits ? 1 : 0;
    EXPECT_EQ(out.num_logit_rows, wants);
    if (!st.ok() || wants == 0) return {};
    EXPECT_NE(out.logits, nullptr);
    std::vector<float> rows(out.logits, out.logits + wants * vocab_);
    // Poison the runner's buffer: a later step must write every row it returns.
    std::fill(out.logits, out.logits + wants * vocab_, std::nanf(""));
    return rows;
  }

  // A logits row of position pos against the CPU's (when held); counts what it held.
  void expect_cpu_row(const float* got, int64_t pos, const std::string& what) {
    if (pos >= held_) return;
    const double e = row_rel_l2(got, &want_[pos * vocab_], vocab_);
    worst_ = std::max(worst_, e);
    ++held_rows_;
    EXPECT_LE(e, kRowTol) << what << ", position " << pos;
  }
  void report(const char* what) const {
    std::printf("[%s] %s: %lld rows held, max relative L2 error %.3e\n", GetParam().c_str(), what,
                static_cast<long long>(held_rows_), worst_);
  }

  testing::GoldenFixture fixture_;
  std::string dir_;
  std::vector<float> want_;  // CPU logits, every position
  int64_t vocab_ = 0, eos_ = 0;
  int64_t held_ = 0;  // positions before this are held to kRowTol
  int64_t held_rows_ = 0;
  double worst_ = 0;
};

TEST_P(CudaRunnerTest, DescribesItsModelAndPages) {
  auto r = runner();
  ASSERT_TRUE(r);
  const runtime::ModelInfo& info = r->info();
  EXPECT_EQ(info.vocab_size, vocab_);
  EXPECT_EQ(info.eos_token_id, eos_);
  EXPECT_EQ(info.numerics, "plain");
  EXPECT_EQ(info.device, runtime::Device::kCuda);
  EXPECT_FALSE(info.device_name.empty());
  EXPECT_GT(info.weight_bytes, 0);
  EXPECT_EQ(info.max_sequences, 0);  // the pool bounds it
  const kv::PageSpec& spec = r->page_spec();
  // One state layout for both devices: the CPU runner's pages of this model are the same.
  runtime::RunnerOptions co = runner_options(dir_);
  co.device = runtime::Device::kCpu;
  co.kv_memory_bytes = 64 << 20;
  auto cpu = runtime::create_runner(co);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ(spec.page_tokens, (*cpu)->page_spec().page_tokens);
  EXPECT_EQ(spec.page_bytes, (*cpu)->page_spec().page_bytes);
  EXPECT_EQ(spec.constant_pages_per_seq, (*cpu)->page_spec().constant_pages_per_seq);
  EXPECT_GT(spec.constant_pages_per_seq, 0);
  // A tiny model's pool, sized from 0.9 of the device, holds every test's pages many times over.
  EXPECT_GE(spec.num_pages,
            kMaxSeqs * (spec.constant_pages_per_seq + spec.pages_for_tokens(kMaxModelLen)));
}

// The prompt as one prefill row, then one decode row per step, on the pool's last page.
TEST_P(CudaRunnerTest, PrefillThenDecodeMatchesCpu) {
  const std::vector<int32_t>& ids = fixture_.ids;
  const int64_t L = static_cast<int64_t>(ids.size()), P = fixture_.prefill_len;
  auto r = runner();
  ASSERT_TRUE(r);
  const Seq s = seq_at(7, kMaxSeqs - 1, r->page_spec());
  StepBatch b;
  b.rows = {make_row(s, ids, 0, P, true)};
  std::vector<float> got = run(*r, b);
  ASSERT_EQ(got.size(), size_t(vocab_));
  expect_cpu_row(got.data(), P - 1, "prefill");
  for (int64_t t = P; t < L; ++t) {
    b.rows = {make_row(s, ids, t, 1, true)};
    got = run(*r, b);
    ASSERT_EQ(got.size(), size_t(vocab_));
    expect_cpu_row(got.data(), t, "decode");
  }
  report("prefill + decode");
  EXPECT_GT(held_rows_, 1);
}

// Three sequences in one runner: prefill rows together, a step that mixes decode rows with a
// prefill chunk (so decode runs as one group and the rows are put back in order), then decode
// steps of all three in shuffled row order. Each row must match the CPU, and the same rows run
// sequence by sequence (each alone in its steps) on another runner.
TEST_P(CudaRunnerTest, BatchedRowsMatchEachSequenceAlone) {
  const std::vector<int32_t>& ids = fixture_.ids;
  const int64_t steps = 4;
  const int64_t top = held_ - steps - 1;  // every decoded position is held
  ASSERT_GE(top, 5) << "the first near-tie flip comes too early for " << steps << " steps";
  const kv::PageSpec spec = runner()->page_spec();
  const std::vector<Seq> seqs = {seq_at(10, 2, spec), seq_at(11, 0, spec), seq_at(12, 1, spec)};
  const std::vector<int64_t> lens = {top, top - 2, std::max<int64_t>(1, top - 6)};
  struct Item {
    int seq;
    int64_t start, n;
    bool wants;
  };
  std::vector<std::vector<Item>> schedule;
  schedule.push_back({{0, 0, lens[0], true}, {1, 0, 2, false}, {2, 0, lens[2], true}});
  schedule.push_back({{0, lens[0], 1, true}, {1, 2, lens[1] - 2, true}, {2, lens[2], 1, true}});
  for (int64_t j = 1; j < steps; ++j)
    schedule.push_back(
        {{2, lens[2] + j, 1, true}, {0, lens[0] + j, 1, true}, {1, lens[1] + j - 1, 1, true}});

  // Logits per (sequence, position) from running the schedule, all sequences or one.
  using Rows = std::map<std::pair<int, int64_t>, std::vector<float>>;
  auto run_schedule = [&](ModelRunner& r, int only) {
    Rows rows;
    for (const std::vector<Item>& step : schedule) {
      StepBatch b;
      std::vector<std::pair<int, int64_t>> keys;
      for (const Item& it : step) {
        if (only >= 0 && it.seq != only) continue;
        b.rows.push_back(make_row(seqs[it.seq], ids, it.start, it.n, it.wants));
        if (it.wants) keys.push_back({it.seq, it.start + it.n - 1});
      }
      if (b.rows.empty()) continue;
      const std::vector<float> got = run(r, b);
      if (got.size() != keys.size() * size_t(vocab_)) return rows;
      for (size_t k = 0; k < keys.size(); ++k)
        rows[keys[k]].assign(got.begin() + k * vocab_, got.begin() + (k + 1) * vocab_);
    }
    return rows;
  };
  auto batched = runner();
  ASSERT_TRUE(batched);
  const Rows together = run_schedule(*batched, -1);
  batched.reset();
  auto single = runner();
  ASSERT_TRUE(single);
  Rows alone;
  for (int k = 0; k < 3; ++k) alone.merge(run_schedule(*single, k));
  ASSERT_EQ(together.size(), alone.size());
  double worst_alone = 0;
  for (const auto& [key, row] : together) {
    const std::string what = "sequence " + std::to_string(key.first);
    expect_cpu_row(row.data(), key.second, what);
    const double e = row_rel_l2(row.data(), alone.at(key).data(), vocab_);
    worst_alone = std::max(worst_alone, e);
    EXPECT_LE(e, kRowTol) << what << " batched vs alone, position " << key.second;
  }
  report("batched rows");
  std::printf("[%s] batched vs alone: max relative L2 error %.3e over %zu rows\n",
              GetParam().c_str(), worst_alone, together.size());
  EXPECT_EQ(held_rows_, static_cast<int64_t>(together.size()));
}

// Greedy rows with argmax_only: the runner returns each row's argmax and copies no logits back.
// The same steps with logits on a second runner (the same launches, so the same logits) must
// give that argmax as their first largest logit, for a prefill row and batched decode rows.
TEST_P(CudaRunnerTest, ArgmaxOnlyRowsReturnTheirLogitsArgmax) {
  const std::vector<int32_t>& ids = fixture_.ids;
  const int64_t P = fixture_.prefill_len;
  ASSERT_LT(P + 3, static_cast<int64_t>(ids.size()));
  // Two runners alive at once: each gets a small fixed pool.
  auto greedy = runner(int64_t{256} << 20), full = runner(int64_t{256} << 20);
  ASSERT_TRUE(greedy && full);
  const kv::PageSpec& spec = greedy->page_spec();
  const Seq a = seq_at(1, 0, spec), b = seq_at(2, 1, spec);
  auto step = [&](ModelRunner& r, std::vector<StepRow> rows, bool argmax_only) {
    StepBatch batch;
    for (StepRow& row : rows) row.argmax_only = argmax_only;
    batch.rows = std::move(rows);
    StepOutput out;
    const Status st = r.execute(batch, &out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    std::vector<int32_t> got;
    for (int64_t k = 0; st.ok() && k < out.num_logit_rows; ++k) {
      if (argmax_only) {
        got.push_back(out.argmax[k]);
      } else {
        const float* row = out.logits + k * vocab_;
        got.push_back(static_cast<int32_t>(std::max_element(row, row + vocab_) - row));
      }
    }
    return got;
  };
  std::vector<std::vector<int32_t>> results[2];
  for (int pass = 0; pass < 2; ++pass) {
    ModelRunner& r = pass == 0 ? *greedy : *full;
    const bool argmax_only = pass == 0;
    results[pass].push_back(
        step(r, {make_row(a, ids, 0, P, true), make_row(b, ids, 0, P - 1, true)}, argmax_only));
    for (int64_t t = 0; t < 3; ++t)
      results[pass].push_back(
          step(r, {make_row(a, ids, P + t, 1, true), make_row(b, ids, P - 1 + t, 1, true)},
               argmax_only));
  }
  EXPECT_EQ(results[0], results[1]);
  ASSERT_EQ(results[0].size(), 4u);
  for (const auto& r : results[0]) EXPECT_EQ(r.size(), 2u);
}

// The page copies that make `child` a fork of `parent` holding `tokens` tokens, as
// KvManager::fork plans them: its own copies of the constant pages and of the page the next token
// writes into; earlier token pages are full, so the child shares them (its table names the
// parent's).
std::vector<kv::PageCopy> fork_pages(const Seq& parent, Seq& child, int64_t tokens,
                                     int64_t page_tokens) {
  std::vector<kv::PageCopy> copies;
  for (size_t k = 0; k < parent.constant.size(); ++k)
    copies.push_back({parent.constant[k], child.constant[k]});
  const int64_t partial = tokens / page_tokens;
  for (int64_t k = 0; k < partial; ++k) child.table[k] = parent.table[k];
  copies.push_back({parent.table[partial], child.table[partial]});
  return copies;
}

// n > 1 as the engine does it: the child's pages are copies of the parent's (page_copies, before
// any row) or shared full pages, and both continue from the same state.
TEST_P(CudaRunnerTest, ForkedPageContinuesAsItsParent) {
  const std::vector<int32_t>& ids = fixture_.ids;
  const int64_t P = fixture_.prefill_len;
  ASSERT_LT(P + 3, static_cast<int64_t>(ids.size()));
  auto r = runner();
  ASSERT_TRUE(r);
  const kv::PageSpec& spec = r->page_spec();
  const Seq parent = seq_at(1, 0, spec);
  Seq child = seq_at(2, 2, spec), second = seq_at(3, 3, spec);
  StepBatch b;
  b.rows = {make_row(parent, ids, 0, P, false)};
  run(*r, b);
  // The child alone in the step that forks it, then the parent alone: the same launches on the
  // same state, so the same bits.
  b.page_copies = fork_pages(parent, child, P, spec.page_tokens);
  b.rows = {make_row(child, ids, P, 1, true)};
  const std::vector<float> from_child = run(*r, b);
  b.page_copies.clear();
  b.rows = {make_row(parent, ids, P, 1, true)};
  const std::vector<float> from_parent = run(*r, b);
  ASSERT_EQ(from_child.size(), size_t(vocab_));
  EXPECT_TRUE(from_child == from_parent);
  expect_cpu_row(from_parent.data(), P, "parent");
  // The child takes another token; the parent's next row is untouched by it.
  std::vector<int32_t> other = ids;
  other[P + 1] = (ids[P + 1] + 1) % static_cast<int32_t>(vocab_);
  b.rows = {make_row(child, other, P + 1, 1, true), make_row(parent, ids, P + 1, 1, true)};
  const std::vector<float> both = run(*r, b);
  ASSERT_EQ(both.size(), size_t(2 * vocab_));
  expect_cpu_row(both.data() + vocab_, P + 1, "parent next to its diverged child");
  // A fork and its first row in one step with the parent's row.
  b.page_copies = fork_pages(parent, second, P + 2, spec.page_tokens);
  b.rows = {make_row(second, ids, P + 2, 1, true), make_row(parent, ids, P + 2, 1, true)};
  const std::vector<float> fork_step = run(*r, b);
  ASSERT_EQ(fork_step.size(), size_t(2 * vocab_));
  expect_cpu_row(fork_step.data(), P + 2, "second child");
  expect_cpu_row(fork_step.data() + vocab_, P + 2, "parent");
  EXPECT_LE(row_rel_l2(fork_step.data(), fork_step.data() + vocab_, vocab_), kRowTol);
  report("forks");
}

// A batch that disagrees with the pages is refused with a Status, changes nothing (every check
// runs before any row), and the runner goes on serving.
TEST_P(CudaRunnerTest, BatchesThatDisagreeWithThePagesAreErrors) {
  const std::vector<int32_t>& ids = fixture_.ids;
  const int64_t P = fixture_.prefill_len;
  auto r = runner();
  ASSERT_TRUE(r);
  const kv::PageSpec& spec = r->page_spec();
  const Seq s = seq_at(1, 0, spec), other = seq_at(2, 1, spec);
  StepBatch b;
  b.rows = {make_row(s, ids, 0, P, false)};
  run(*r, b);
  auto refused = [&](StepBatch batch, const char* needle, const char* what) {
    StepOutput out;
    const Status st = r->execute(batch, &out);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(needle), std::string::npos) << what << ": " << st.to_string();
    std::printf("[%s] %s: %s\n", GetParam().c_str(), what, st.to_string().c_str());
  };
  Seq short_table = other;
  short_table.table.clear();
  // A valid row first: the batch is still refused as a whole, before that row runs.
  b.rows = {make_row(s, ids, P, 1, true), make_row(short_table, ids, 0, 5, true)};
  refused(b, "block table", "a block table too short for the row");
  Seq few_constant = other;
  few_constant.constant.pop_back();
  b.rows = {make_row(few_constant, ids, 0, 5, true)};
  refused(b, "constant pages", "too few constant pages");
  Seq outside = other;
  outside.table[0] = static_cast<int32_t>(spec.num_pages);
  b.rows = {make_row(outside, ids, 0, 1, true)};
  refused(b, "outside the pool", "token page outside the pool");
  outside = other;
  outside.constant[0] = -1;
  b.rows = {make_row(outside, ids, 0, 1, true)};
  refused(b, "outside the pool", "constant page outside the pool");
  Seq same = other;
  same.constant[0] = s.constant[0];
  b.rows = {make_row(s, ids, P, 1, true), make_row(same, ids, 0, 1, true)};
  refused(b, "also written by row", "two rows on one constant page");
  same = other;
  same.table[P / spec.page_tokens] = s.table[P / spec.page_tokens];
  b.rows = {make_row(s, ids, P, 1, true), make_row(same, ids, P, 1, true)};
  refused(b, "also written by row", "two rows writing one token page");
  std::vector<int32_t> bad = ids;
  bad[P] = static_cast<int32_t>(vocab_);
  b.rows = {make_row(s, bad, P, 1, true)};
  refused(b, "vocabulary", "token id outside the vocabulary");
  std::vector<int32_t> long_ids(kMaxModelLen + 1, ids[0]);
  b.rows = {make_row(other, long_ids, 0, kMaxModelLen + 1, true)};
  refused(b, "--max-model-len", "a row past max_model_len");
  b.rows.clear();
  b.page_copies = {{0, static_cast<int32_t>(spec.num_pages)}};
  refused(b, "outside the pool", "page copy outside the pool");
  // The sequence is where it was.
  b.page_copies.clear();
  b.rows = {make_row(s, ids, P, 1, true)};
  const std::vector<float> got = run(*r, b);
  ASSERT_EQ(got.size(), size_t(vocab_));
  expect_cpu_row(got.data(), P, "after the refused batches");
  EXPECT_EQ(held_rows_, P < held_ ? 1 : 0);
}

// read_pages / write_pages: a sequence's page bytes written to other pages make a sequence that
// continues exactly as the source.
TEST_P(CudaRunnerTest, PageBytesRoundTrip) {
  const std::vector<int32_t>& ids = fixture_.ids;
  const int64_t P = fixture_.prefill_len;
  auto r = runner();
  ASSERT_TRUE(r);
  const kv::PageSpec& spec = r->page_spec();
  const int64_t page_bytes = spec.page_bytes;
  const Seq source = seq_at(1, 0, spec), restored = seq_at(2, 1, spec);
  StepBatch b;
  b.rows = {make_row(source, ids, 0, P, false)};
  run(*r, b);
  auto pages_of = [](const Seq& q) {
    std::vector<int32_t> v = q.constant;
    v.insert(v.end(), q.table.begin(), q.table.end());
    return v;
  };
  const std::vector<int32_t> from = pages_of(source), to = pages_of(restored);
  auto bytes = r->read_pages(from);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ASSERT_EQ(static_cast<int64_t>(bytes->size()), int64_t(from.size()) * page_bytes);
  ASSERT_TRUE(r->write_pages(to, *bytes).ok());
  auto back = r->read_pages(to);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(*back == *bytes);
  b.rows = {make_row(restored, ids, P, 1, true)};
  const std::vector<float> a = run(*r, b);
  b.rows = {make_row(source, ids, P, 1, true)};
  const std::vector<float> c = run(*r, b);
  ASSERT_EQ(a.size(), size_t(vocab_));
  EXPECT_TRUE(a == c);
  expect_cpu_row(a.data(), P, "restored pages");
  // Misuse is refused.
  EXPECT_FALSE(r->write_pages(to, std::string_view(*bytes).substr(1)).ok());
  EXPECT_FALSE(r->write_pages({static_cast<int32_t>(spec.num_pages)},
                              std::string_view(*bytes).substr(0, page_bytes))
                   .ok());
  EXPECT_FALSE(r->read_pages({-1}).ok());
}

INSTANTIATE_TEST_SUITE_P(Golden, CudaRunnerTest,
                         ::testing::Values("hca_clamp", "mixed_fullk", "mixed_selective",
                                           "selective_noties", "sliding_hash"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(CudaRunnerOptionsTest, OfficialNumericsIsRefused) {
  runtime::RunnerOptions o = runner_options(testing::golden_dir("mixed_fullk"));
  o.numerics = runtime::Numerics::kOfficial;
  auto r = runtime::cuda::create_cuda_runner(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("--numerics plain"), std::string::npos)
      << r.status().to_string();
}

TEST(CudaRunnerOptionsTest, TooLittleDeviceMemoryNamesTheFlag) {
  runtime::RunnerOptions o = runner_options(testing::golden_dir("mixed_fullk"));
  o.gpu_memory_utilization = 1e-3;  // below the margin kept for what grows after the profile
  auto r = runtime::cuda::create_cuda_runner(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("--gpu-memory-utilization"), std::string::npos)
      << r.status().to_string();
  std::printf("%s\n", r.status().to_string().c_str());
}

TEST(CudaRunnerOptionsTest, MaxModelLenBeyondTheOpsIsRefused) {
  runtime::RunnerOptions o = runner_options(testing::golden_dir("mixed_fullk"));
  o.max_model_len = CudaModel::max_supported_tokens() + 1;
  auto r = runtime::cuda::create_cuda_runner(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--max-model-len"), std::string::npos)
      << r.status().to_string();
}

// A random model of v4_flash_3layer_config.json here (V4-Flash's per-layer dims, one layer of each
// kind, 8 experts; DEEPINFER_RUNNER_STRESS_CONFIG names another config.json), a pool
// sized by DEEPINFER_RUNNER_STRESS_UTILIZATION (default 0.3, so memory and not --max-num-seqs
// bounds it), then the steps that grow the forward's scratch most: prefill chunks up to the end of
// the context, and decode steps of every slot at once (eager, captured, replayed). The device's
// used memory must stay within the utilization.
TEST(CudaRunnerMemoryTest, LargestStepsStayWithinTheUtilization) {
  const char* config_env = std::getenv("DEEPINFER_RUNNER_STRESS_CONFIG");
  const char* source_env = std::getenv("DEEPINFER_SOURCE_DIR");
  const std::string config =
      config_env && *config_env
          ? std::string(config_env)
          : std::string(source_env && *source_env ? source_env : DEEPINFER_SOURCE_DIR) +
                "/tests/conformance/cuda/v4_flash_3layer_config.json";
  const char* util_env = std::getenv("DEEPINFER_RUNNER_STRESS_UTILIZATION");
  const double util = util_env && *util_env ? std::atof(util_env) : 0.3;
  const std::string dir =
      (std::filesystem::temp_directory_path() / "deepinfer_cuda_runner_stress").string();
  v4::TinyModelOptions mo;
  mo.config_path = config;
  mo.seed = 1;
  mo.max_shard_bytes = size_t{4} << 30;
  ASSERT_TRUE(v4::write_tiny_model(dir, mo).ok());
  runtime::RunnerOptions o = runner_options(dir);
  o.max_model_len = CudaModel::max_supported_tokens();
  o.max_num_seqs = 1024;
  o.max_num_batched_tokens = 2048;
  o.gpu_memory_utilization = util;
  auto made = runtime::cuda::create_cuda_runner(o);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  ModelRunner& r = **made;
  const kv::PageSpec& spec = r.page_spec();
  const int64_t L = o.max_model_len, C = spec.constant_pages_per_seq;
  // Sequence 0 holds a whole context; every other one C + 1 pages, as many as the pool and
  // --max-num-seqs allow.
  const int64_t full = C + spec.pages_for_tokens(L);
  const int64_t n = std::min<int64_t>(o.max_num_seqs, 1 + (spec.num_pages - full) / (C + 1));
  ASSERT_GE(n, 2);
  const std::vector<int32_t> ids = testing::make_ids(L, r.info().vocab_size, 5);
  std::vector<Seq> seqs(n);
  int32_t next = 0;
  for (int64_t k = 0; k < n; ++k) {
    seqs[k].id = uint64_t(k);
    for (int64_t j = 0; j < C; ++j) seqs[k].constant.push_back(next++);
    for (int64_t j = 0; j < (k == 0 ? full - C : 1); ++j) seqs[k].table.push_back(next++);
  }
  StepOutput out;
  StepBatch b;
  // Page 0 to three short of the end, in chunks of 2048; every other page one token.
  for (int64_t start = 0; start < L - 3; start += 2048) {
    b.rows = {make_row(seqs[0], ids, start, std::min<int64_t>(2048, L - 3 - start), false)};
    ASSERT_TRUE(r.execute(b, &out).ok()) << "chunk at " << start;
  }
  b.rows.clear();
  for (int64_t p = 1; p < n; ++p) b.rows.push_back(make_row(seqs[p], ids, 0, 1, false));
  ASSERT_TRUE(r.execute(b, &out).ok());
  for (int64_t j = 0; j < 3; ++j) {
    b.rows.clear();
    b.rows.push_back(make_row(seqs[0], ids, L - 3 + j, 1, true));
    for (int64_t p = 1; p < n; ++p) b.rows.push_back(make_row(seqs[p], ids, 1 + j, 1, true));
    const Status st = r.execute(b, &out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(out.num_logit_rows, n);
    for (int64_t k = 0; k < n * r.info().vocab_size; k += 4099)
      ASSERT_TRUE(std::isfinite(out.logits[k])) << "decode step " << j;
  }
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  const double used = double(total - free), limit = util * double(total);
  std::printf(
      "stress: %lld sequences, pages of %.1f MiB (one of %lld tokens), used %.2f GiB after the "
      "largest steps, "
      "limit %.2f GiB (%.3f of %.2f GiB), headroom %.0f MiB\n",
      static_cast<long long>(n), double(spec.page_bytes) / (1 << 20), static_cast<long long>(L),
      used / (1 << 30), limit / (1 << 30), util, double(total) / (1 << 30),
      (limit - used) / (1 << 20));
  EXPECT_LE(used, limit);
  std::filesystem::remove_all(dir);
}

// Speculative rows and rollbacks (issue 19) on the GPU, both families: under batch invariance a
// verification row's logits and a rolled-back state are bit for bit those of plain decoding
// (runtime/testing/speculative_rows_check.h, which the CPU runner passes too).
std::unique_ptr<ModelRunner> invariant_runner(const std::string& dir,
                                              int64_t max_model_len = kMaxModelLen) {
  runtime::RunnerOptions o = runner_options(dir);
  o.max_model_len = max_model_len;
  o.batch_invariant = true;
  o.kv_memory_bytes = int64_t{256} << 20;  // beside the other runners a test may hold
  auto r = runtime::create_runner(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

// DEEPINFER_SPEC_ROWS_MODEL (a deepseek_v4 checkpoint, e.g. v4-flash-8layer) and
// DEEPINFER_SPEC_ROWS_MAX_MODEL_LEN run the V4 case on that model and runner length instead: a
// v4-flash-8layer oracle run under batch invariance parted where the tiny models hold
// (docs/gpu_next_full_h200/; scripts/gpu_next_check.sh b bisects it).
TEST(CudaSpeculativeRows, DeepseekV4RollbackToAnyAcceptedLengthEqualsPlainDecoding) {
  if (const char* m = std::getenv("DEEPINFER_SPEC_ROWS_MODEL"); m && *m) {
    const char* len = std::getenv("DEEPINFER_SPEC_ROWS_MAX_MODEL_LEN");
    std::printf("speculative rows on %s\n", m);
    runtime::testing::expect_rollbacks_are_exact(
        invariant_runner(m, len && *len ? std::strtoll(len, nullptr, 10) : kMaxModelLen).get());
    return;
  }
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 29;
  runtime::testing::expect_rollbacks_are_exact(
      invariant_runner(v4::write_tiny_model_for_test("cuda_speculative_v4", o)).get());
}

TEST(CudaSpeculativeRows, DeepseekV41RollbackToAnyAcceptedLengthEqualsPlainDecoding) {
  runtime::testing::expect_rollbacks_are_exact(
      invariant_runner(v41::tiny_model_dir_for_test(/*quantized=*/true)).get());
}

TEST(CudaSpeculativeRows, RollbacksOutsideASpeculativeRowAreErrors) {
  v4::TinyModelOptions o;
  o.seed = 30;
  runtime::testing::expect_rollback_errors(
      invariant_runner(v4::write_tiny_model_for_test("cuda_speculative_errors", o)).get());
}

// YOCO compact on the GPU (issues 17 and 19): a 300-token prompt in chunks of 100 whose
// positions before the last 5 skip what feeds no cached state gives the same last logits, and the
// same next decode step, bit for bit under batch invariance. deepseek_v4 skips the last layer's
// MoE; deepseek_v41 runs its trailing layers (after the last one with cached state) only on the
// rows later rows read, in the final chunk and the ones before it.
void expect_yoco_keeps_logits_and_state(const std::string& dir) {
  auto r = invariant_runner(dir, /*max_model_len=*/512);  // a 300-token prompt and a step
  ASSERT_NE(r, nullptr);
  const std::vector<int32_t> prompt = runtime::testing::random_ids(300, 77);
  const int64_t vocab = r->info().vocab_size;
  std::vector<std::vector<float>> last(2), next(2);
  for (int keep : {0, 1}) {
    auto kv = kv::KvManager::create(r->page_spec());
    ASSERT_TRUE(kv.ok());
    const uint64_t seq = 10 + keep;
    StepOutput out;
    for (int64_t pos = 0; pos < 300; pos += 100) {  // the keep position lies in the last chunk
      ASSERT_TRUE(kv->reserve(seq, pos + 100));
      StepRow row{seq,
                  pos,
                  &prompt[pos],
                  100,
                  kv->state_pages(seq),
                  kv->block_table(seq),
                  pos + 100 == 300};
      row.keep_from_pos = keep ? 295 : 0;
      StepBatch b;
      b.rows.push_back(row);
      ASSERT_TRUE(r->execute(b, &out).ok());
    }
    last[keep].assign(out.logits, out.logits + vocab);
    const int32_t token = 9;
    ASSERT_TRUE(kv->reserve(seq, 301));
    StepBatch b;
    b.rows.push_back({seq, 300, &token, 1, kv->state_pages(seq), kv->block_table(seq), true});
    ASSERT_TRUE(r->execute(b, &out).ok());
    next[keep].assign(out.logits, out.logits + vocab);
    r->release(seq);
  }
  EXPECT_EQ(last[0], last[1]);
  EXPECT_EQ(next[0], next[1]);
}

TEST(CudaYoco, DeepseekV4KeptLogitsAndStateAreUnchanged) {
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 31;
  expect_yoco_keeps_logits_and_state(v4::write_tiny_model_for_test("cuda_yoco_v4", o));
}

TEST(CudaYoco, DeepseekV41TrailingLayersKeepTheKeptLogitsAndState) {
  // The tiny schedule with index sources 2 and 4 only: layers 5 and 6 trail (window 16).
  std::ifstream in(v41::tiny_model_dir_for_test(/*quantized=*/true) + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  nlohmann::json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  text["index_source_layer_ids"] = {2, 4};
  const std::string base = ::testing::TempDir() + "/cuda_yoco_v41_" + std::to_string(::getpid());
  std::filesystem::create_directories(base);
  std::ofstream(base + "/trailing.config.json") << cfg.dump(2);
  v4::TinyModelOptions o;
  o.config_path = base + "/trailing.config.json";
  o.quantized = true;
  o.tokenizer_dir = v4::tests_source_dir() + "/assets/tokenizers/deepseek_v3";  // Engram's map
  ASSERT_TRUE(v41::write_tiny_model(base + "/model", o).ok());
  expect_yoco_keeps_logits_and_state(base + "/model");
  std::filesystem::remove_all(base);
}

// MTP drafting on the GPU (issue 19): sequences drafted together get the drafts copies of them get
// alone
// (bitwise forward under batch invariance, so the same greedy picks), and the drafts follow the
// CPU runner's MTP layer: at least half of the first drafts agree (a bf16 forward may pick
// differently at a near-tie; a wrong MTP forward agrees with none of 129k ids).
TEST(CudaMtp, DraftsAloneEqualDraftsTogetherAndFollowTheCpu) {
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 33;
  const std::string dir = v4::write_tiny_model_for_test("cuda_mtp_v4", o);
  runtime::RunnerOptions go = runner_options(dir);
  go.batch_invariant = true;
  go.drafting = true;
  go.kv_memory_bytes = int64_t{256} << 20;
  auto gpu = runtime::create_runner(go);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  runtime::RunnerOptions co;
  co.model_dir = dir;
  co.drafting = true;
  co.kv_memory_bytes = int64_t{256} << 20;
  auto cpu = runtime::create_runner(co);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  constexpr int kSeqs = 8, kDrafts = 4;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kSeqs; ++i)
    prompts.push_back(runtime::testing::random_ids(20 + 17 * i, 50 + i));
  std::vector<uint64_t> ids;
  std::vector<int32_t> tokens;
  std::vector<int64_t> counts(kSeqs, kDrafts);
  std::vector<std::unique_ptr<kv::KvManager>> kvs;
  // Drafting writes the MTP ring at the drafted positions, which later drafts of the same
  // sequence read: the GPU gets every prompt twice (ids i + 1 drafted together, ids i + 101
  // alone), so each set drafts from the state the prompts left.
  for (ModelRunner* r : {gpu->get(), cpu->get()}) {
    auto kv = kv::KvManager::create(r->page_spec());
    ASSERT_TRUE(kv.ok());
    kvs.push_back(std::make_unique<kv::KvManager>(std::move(*kv)));
    for (int i = 0; i < kSeqs; ++i) {
      runtime::testing::run_chunked(*r, *kvs.back(), uint64_t(i + 1), prompts[i], 0, 64);
      if (r == gpu->get())
        runtime::testing::run_chunked(*r, *kvs.back(), uint64_t(i + 101), prompts[i], 0, 64);
    }
  }
  for (int i = 0; i < kSeqs; ++i) {
    ids.push_back(uint64_t(i + 1));
    tokens.push_back(int32_t(7 + i));
  }
  std::vector<std::vector<int32_t>> together, alone(kSeqs), on_cpu;
  ASSERT_TRUE((*gpu)->mtp_draft_batch(ids, tokens, counts, &together).ok());
  for (int i = 0; i < kSeqs; ++i)
    ASSERT_TRUE((*gpu)->mtp_draft(ids[i] + 100, tokens[i], kDrafts, &alone[i]).ok());
  ASSERT_TRUE((*cpu)->mtp_draft_batch(ids, tokens, counts, &on_cpu).ok());
  int agree = 0;
  for (int i = 0; i < kSeqs; ++i) {
    ASSERT_EQ(together[i].size(), size_t(kDrafts)) << "sequence " << i;
    EXPECT_EQ(together[i], alone[i]) << "sequence " << i;
    ASSERT_EQ(on_cpu[i].size(), size_t(kDrafts)) << "sequence " << i;
    agree += together[i][0] == on_cpu[i][0];
    std::printf("sequence %d: gpu", i);
    for (int32_t t : together[i]) std::printf(" %d", t);
    std::printf(" | cpu");
    for (int32_t t : on_cpu[i]) std::printf(" %d", t);
    std::printf("\n");
  }
  EXPECT_GE(agree, kSeqs / 2) << agree << " of " << kSeqs << " first drafts agree with the CPU";
}

}  // namespace
}  // namespace deepinfer::cuda
