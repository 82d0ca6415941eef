// DSpark drafting on the CPU runner (V4.1, RunnerOptions::drafting, decision 0012): the drafter's
// state follows exactly the positions a run without speculation computes. The reference decodes
// one token a step and asks for DSpark's block at every position; the runs under test must get
// the same blocks, bit for bit: after speculative rows rolled back at every draft position (and
// accepted whole), after a fork (the child takes its parent's state), after a preemption (state
// dropped, recomputed, under YOCO truncation), and, for a sequence adopted from pages without its
// drafter state (prefix cache, handoff), none until a whole window was absorbed again and the
// reference's from then on.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/loader/checkpoint_copy_for_tests.h"
#include "deepinfer/loader/test_util.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cpu/cpu_runner.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"

namespace deepinfer::runtime {
namespace {

using runtime::testing::random_ids;
using runtime::testing::run_chunked;

constexpr int kDrafts = 5;    // the tiny preset's dspark_block_size
constexpr int kPrompt = 40;   // past the tiny model's 16-token window
constexpr int kDecoded = 24;  // tokens decoded after the prompt
constexpr int64_t kWindow = 16;

const std::string& dspark_dir() { return v41::tiny_model_dir_for_test(true, "v41-dspark"); }

std::unique_ptr<ModelRunner> make_runner(const std::string& dir, bool drafting) {
  RunnerOptions o;
  o.model_dir = dir;
  o.kv_memory_bytes = int64_t{64} << 20;
  o.drafting = drafting;
  auto r = create_runner(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::vector<int32_t> drafts_of(ModelRunner& r, uint64_t seq, int32_t anchor) {
  std::vector<int32_t> d;
  const Status st = r.mtp_draft(seq, anchor, kDrafts, &d);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return d;
}

// One plain decode step of tokens[pos] for seq; its logits.
std::vector<float> decode_one(ModelRunner& r, kv::KvManager& kv, uint64_t seq,
                              const std::vector<int32_t>& ids, int64_t pos) {
  EXPECT_TRUE(kv.reserve(seq, pos + 1));
  StepBatch b;
  b.rows.push_back({seq, pos, &ids[pos], 1, kv.state_pages(seq), kv.block_table(seq), true});
  StepOutput out;
  const Status st = r.execute(b, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? runtime::testing::logits_of(r, out) : std::vector<float>();
}

struct Fixture {
  std::unique_ptr<ModelRunner> runner;
  std::vector<int32_t> ids;                // prompt, then the decoded tokens
  std::vector<std::vector<int32_t>> want;  // want[i]: the block after ids[kPrompt + i]
  std::vector<std::vector<float>> logits;  // logits[i]: after ids[kPrompt + i] is computed
};

// The reference: the prompt in chunks of 7, then one token a step, DSpark's block asked for
// after each.
Fixture reference() {
  Fixture f;
  f.runner = make_runner(dspark_dir(), true);
  if (!f.runner) return f;
  // Past the decoded span too: a speculative row near the end carries up to kDrafts more
  // (their positions are never checked, but they are read).
  f.ids = random_ids(kPrompt + kDecoded + kDrafts + 1, 71);
  auto kv = kv::KvManager::create(f.runner->page_spec());
  EXPECT_TRUE(kv.ok());
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + kPrompt);
  run_chunked(*f.runner, *kv, 1, prompt, 0, 7);
  for (int i = 0; i <= kDecoded; ++i) {
    f.want.push_back(drafts_of(*f.runner, 1, f.ids[kPrompt + i]));
    EXPECT_EQ(f.want.back().size(), size_t(kDrafts));
    if (i < kDecoded) f.logits.push_back(decode_one(*f.runner, *kv, 1, f.ids, kPrompt + i));
  }
  f.runner->release(1);
  // The blocks differ along the sequence (the check below could tell states apart).
  EXPECT_NE(f.want[0], f.want[kDecoded]);
  return f;
}

// Speculative rows [ids[done], drafts...] whose first `good` drafts are the next tokens and the
// rest wrong, each rolled back to its accepted length as the engine does (none when all were
// accepted, unless roll_back_full); the accepted positions' logits and, after each rollback,
// DSpark's block must be the reference's.
void decode_speculatively(Fixture& f, int good, bool roll_back_full) {
  ModelRunner& r = *f.runner;
  auto kv = kv::KvManager::create(r.page_spec());
  ASSERT_TRUE(kv.ok());
  const uint64_t seq = 10 + good;
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + kPrompt);
  run_chunked(r, *kv, seq, prompt, 0, 16);
  std::mt19937_64 rng(good);
  int done = 0;  // ids[kPrompt .. kPrompt + done) are in the state
  while (done < kDecoded) {
    ASSERT_EQ(drafts_of(r, seq, f.ids[kPrompt + done]), f.want[done])
        << "good " << good << ", after " << done << " decoded";
    const int64_t pos = kPrompt + done;
    std::vector<int32_t> row_ids = {f.ids[pos]};
    for (int d = 1; d <= kDrafts; ++d) {
      int32_t wrong = static_cast<int32_t>(2 + rng() % 1000);
      if (wrong == f.ids[pos + d]) ++wrong;
      row_ids.push_back(d <= good ? f.ids[pos + d] : wrong);
    }
    ASSERT_TRUE(kv->reserve(seq, pos + kDrafts + 1));
    StepBatch b;
    StepRow row{seq, pos, row_ids.data(), kDrafts + 1, kv->state_pages(seq), kv->block_table(seq),
                true};
    row.speculative = true;
    b.rows.push_back(row);
    StepOutput out;
    Status st = r.execute(b, &out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const int accepted = std::min(1 + good, kDecoded - done);
    const int64_t vocab = r.info().vocab_size;
    ASSERT_EQ(out.num_logit_rows, kDrafts + 1);
    for (int t = 0; t < accepted; ++t)  // the target's logits at every accepted position
      EXPECT_EQ(std::memcmp(out.logits + t * vocab, f.logits[done + t].data(), vocab * 4), 0)
          << "good " << good << ", position " << pos + t;
    done += accepted;
    if (accepted == kDrafts + 1 && !roll_back_full) continue;
    StepBatch cut;
    cut.rollbacks.push_back({seq, kPrompt + done, kv->state_pages(seq), kv->block_table(seq)});
    st = r.execute(cut, &out);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  EXPECT_EQ(drafts_of(r, seq, f.ids[kPrompt + done]), f.want[done]) << "good " << good;
  r.release(seq);
}

TEST(DsparkDrafting, RollbacksAtEveryDraftPositionKeepTheDrafterState) {
  Fixture f = reference();
  ASSERT_NE(f.runner, nullptr);
  // The first rejected draft at every position, then none rejected (with and without the
  // rollback that cuts nothing).
  for (int good = 0; good < kDrafts; ++good) decode_speculatively(f, good, false);
  decode_speculatively(f, kDrafts, false);
  decode_speculatively(f, kDrafts, true);
}

TEST(DsparkDrafting, ForkPreemptionAndAdoptedPagesKeepOrRebuildTheState) {
  Fixture f = reference();
  ASSERT_NE(f.runner, nullptr);
  ModelRunner& r = *f.runner;
  auto kv = kv::KvManager::create(r.page_spec());
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + kPrompt);

  // Preemption: the state is dropped and the sequence recomputed from position 0, in chunks of
  // 15 under YOCO compact truncation (only the last position's logits needed: the taps of the
  // window's positions must stay exact), drafting as before.
  run_chunked(r, *kv, 1, prompt, 0, 13);
  r.release(1);
  kv->free(1);
  for (int64_t pos = 0; pos < kPrompt; pos += 15) {
    const int64_t n = std::min<int64_t>(15, kPrompt - pos);
    ASSERT_TRUE(kv->reserve(1, pos + n));
    StepBatch b;
    b.rows.push_back(
        {1, pos, &prompt[pos], n, kv->state_pages(1), kv->block_table(1), pos + n == kPrompt});
    b.rows.back().keep_from_pos = kPrompt - 1;
    StepOutput out;
    ASSERT_TRUE(r.execute(b, &out).ok());
  }
  EXPECT_EQ(drafts_of(r, 1, f.ids[kPrompt]), f.want[0]);

  // Fork (n > 1): the child's first row runs right after the page copies, with the parent's
  // DSpark state.
  std::vector<kv::PageCopy> copies;
  ASSERT_TRUE(kv->fork(1, 2, kPrompt, &copies));
  ASSERT_TRUE(kv->reserve(2, kPrompt + 1));
  StepBatch b;
  b.page_copies = copies;
  b.rows.push_back({2, kPrompt, &f.ids[kPrompt], 1, kv->state_pages(2), kv->block_table(2), true});
  StepOutput out;
  ASSERT_TRUE(r.execute(b, &out).ok());
  EXPECT_EQ(drafts_of(r, 2, f.ids[kPrompt + 1]), f.want[1]);

  // Pages written from outside (prefix cache, handoff): the runner adopts the sequence without
  // DSpark state, proposes nothing until a window is absorbed, then the reference's blocks.
  ASSERT_TRUE(kv->reserve(3, kPrompt));
  auto bytes = r.read_pages(*kv->state_pages(1));
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(r.write_pages(*kv->state_pages(3), *bytes).ok());
  auto table = r.read_pages(*kv->block_table(1));
  ASSERT_TRUE(table.ok());
  ASSERT_TRUE(r.write_pages(*kv->block_table(3), *table).ok());
  for (int i = 0; i < kDecoded; ++i) {
    EXPECT_EQ(decode_one(r, *kv, 3, f.ids, kPrompt + i), f.logits[i])
        << "adopted, position " << kPrompt + i;
    const std::vector<int32_t> got = drafts_of(r, 3, f.ids[kPrompt + i + 1]);
    if (i + 1 < kWindow)
      EXPECT_TRUE(got.empty()) << "drafts from a partial window, " << i + 1 << " absorbed";
    else
      EXPECT_EQ(got, f.want[i + 1]) << i + 1 << " absorbed since the adoption";
  }
}

// The v41-dspark preset ends on an index source; with layer 4 the last one, layers 5 and 6 trail
// it, and YOCO compact truncation would trim them, but taps are read at layers 5 and 6 and the
// window must stay exact: a prompt run in chunks of 15 (the last shorter than the 16-row window)
// with only its last logits wanted drafts as one run in full.
TEST(DsparkDrafting, YocoTrimmedTrailingLayersKeepTheWindowsTaps) {
  std::ifstream in(dspark_dir() + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  nlohmann::json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  text["index_source_layer_ids"] = {2, 4};
  TempDir dir;
  const std::string config_path = dir.path() + "/trailing.config.json";
  std::ofstream(config_path) << cfg.dump(2);
  v4::TinyModelOptions o;
  o.config_path = config_path;
  o.quantized = true;
  o.tokenizer_dir = std::string(DEEPINFER_SOURCE_DIR) + "/assets/tokenizers/deepseek_v3";
  const std::string model = dir.path() + "/model";
  const Status written = v41::write_tiny_model(model, o);
  ASSERT_TRUE(written.ok()) << written.to_string();
  auto r = make_runner(model, true);
  ASSERT_NE(r, nullptr);
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> prompt = random_ids(kPrompt, 72);
  run_chunked(*r, *kv, 1, prompt, 0, kPrompt);
  const std::vector<int32_t> want = drafts_of(*r, 1, 9);
  ASSERT_EQ(want.size(), size_t(kDrafts));
  for (int64_t pos = 0; pos < kPrompt; pos += 15) {
    const int64_t n = std::min<int64_t>(15, kPrompt - pos);
    ASSERT_TRUE(kv->reserve(2, pos + n));
    StepBatch b;
    b.rows.push_back(
        {2, pos, &prompt[pos], n, kv->state_pages(2), kv->block_table(2), pos + n == kPrompt});
    b.rows.back().keep_from_pos = kPrompt - 1;
    StepOutput out;
    ASSERT_TRUE(r->execute(b, &out).ok());
  }
  EXPECT_EQ(drafts_of(*r, 2, 9), want);
}

// Without draft tensors (transformers' save_pretrained) or without drafting asked for, the
// runner decodes and mtp_draft is unimplemented, saying why.
TEST(DsparkDrafting, NoDrafterIsUnimplementedAndSaysWhy) {
  TempDir dir;
  const Status copied =
      deepinfer::testing::copy_checkpoint_without_draft_tensors(dspark_dir(), dir.path());
  ASSERT_TRUE(copied.ok()) << copied.to_string();
  for (bool weights : {false, true}) {
    auto r = make_runner(weights ? dspark_dir() : dir.path(), /*drafting=*/!weights);
    ASSERT_NE(r, nullptr);
    auto kv = kv::KvManager::create(r->page_spec());
    ASSERT_TRUE(kv.ok());
    const auto logits = run_chunked(*r, *kv, 1, random_ids(20, 4), 0, 8);
    EXPECT_EQ(logits.size(), size_t(r->info().vocab_size));
    std::vector<int32_t> d;
    const Status st = r->mtp_draft(1, 7, kDrafts, &d);
    EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.to_string();
    EXPECT_NE(st.message().find(weights ? "RunnerOptions::drafting" : "no draft tensors (mtp.*)"),
              std::string::npos)
        << st.to_string();
    EXPECT_TRUE(d.empty());
  }
}

}  // namespace
}  // namespace deepinfer::runtime
