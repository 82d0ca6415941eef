// Speculative rows and rollbacks (issue 19), checked on any runner: a verification row returns
// every position's logits, and a rollback to any accepted length leaves the state exactly as a run
// without speculation, whatever position the first rejected draft had. Checked bit for bit
// against plain one-token decoding of the accepted tokens, so a CUDA runner needs batch
// invariance (its chunked forward then rounds as its decode does).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"

namespace deepinfer::runtime::testing {

constexpr int kDrafts = 4;
constexpr int kPrompt = 150;   // crosses a 128-token page
constexpr int kAccepted = 14;  // tokens decoded after the prompt
constexpr int kPromptChunk = 64;

inline bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// For a failure message: how far apart two logits rows are.
inline std::string row_gap(const float* a, const float* b, int64_t n) {
  int64_t first = -1;
  float worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    if (first < 0) first = i;
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  return "first differing logit " + std::to_string(first) + ", max |diff| " + std::to_string(worst);
}

// For a failure message: where two byte strings of state pages part (as floats).
inline std::string bytes_gap(const std::string& a, const std::string& b, int64_t page_bytes) {
  if (a.size() != b.size())
    return std::to_string(a.size()) + " bytes vs " + std::to_string(b.size());
  int64_t first = -1, count = 0;
  for (size_t i = 0; i + 4 <= a.size(); i += 4) {
    if (std::memcmp(&a[i], &b[i], 4) == 0) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++count;
  }
  if (first < 0) return "same bytes";
  float x = 0, y = 0;
  std::memcpy(&x, &a[size_t(first)], 4);
  std::memcpy(&y, &b[size_t(first)], 4);
  return std::to_string(count) + " floats differ, the first at page " +
         std::to_string(first / page_bytes) + " float " + std::to_string(first % page_bytes / 4) +
         " (" + std::to_string(x) + " vs " + std::to_string(y) + ")";
}

// Logits after each of `tokens` decoded one at a time after `prompt` (run in chunks of
// prompt_chunk): row i follows tokens[i]. pages_before_last (if set) gets the constant pages
// (rings, compressor windows) as bytes just before the last token runs.
inline std::vector<float> plain_decode(ModelRunner& r, const std::vector<int32_t>& prompt,
                                       const std::vector<int32_t>& tokens,
                                       int64_t prompt_chunk = kPrompt,
                                       std::string* pages_before_last = nullptr) {
  auto kv = kv::KvManager::create(r.page_spec());
  EXPECT_TRUE(kv.ok());
  std::vector<int32_t> all = prompt;
  run_chunked(r, *kv, 1, all, 0, prompt_chunk);
  std::vector<float> rows;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (pages_before_last && i + 1 == tokens.size()) {
      auto bytes = r.read_pages(*kv->state_pages(1));
      EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
      if (bytes.ok()) *pages_before_last = *bytes;
    }
    all.push_back(tokens[i]);
    const auto l = run_chunked(r, *kv, 1, all, static_cast<int64_t>(all.size()) - 1, 1);
    rows.insert(rows.end(), l.begin(), l.end());
  }
  r.release(1);
  return rows;
}

// Decodes `tokens` with speculative rows of one accepted token plus kDrafts drafts, of which
// the first `good` are the next tokens and the rest wrong, each row rolled back to its accepted
// prefix: with the next row in one step, or (rollback_alone) in a step of its own first, as the
// engine does (a drafter reads the state between them). Checks every accepted position's logits
// against `ref`; rollback_alone also reads the constant pages after the last rollback, which
// must be `plain`'s (a run without speculation) bit for bit.
inline void decode_speculatively(ModelRunner& r, const std::vector<int32_t>& prompt,
                                 const std::vector<int32_t>& tokens, int good,
                                 const std::vector<float>& ref, bool rollback_alone = false,
                                 const std::string& plain = {}) {
  const int64_t vocab = r.info().vocab_size;
  auto kv = kv::KvManager::create(r.page_spec());
  ASSERT_TRUE(kv.ok());
  const uint64_t seq = 2;
  run_chunked(r, *kv, seq, prompt, 0, kPromptChunk);
  std::mt19937_64 rng(good);
  size_t done = 0;  // tokens[0..done) are in the state
  std::vector<Rollback> pending;
  while (done < tokens.size()) {
    std::vector<int32_t> row_ids = {tokens[done]};
    for (int d = 1; d <= kDrafts; ++d) {
      const size_t at = done + d;
      const bool right = d <= good && at < tokens.size();
      // A wrong draft differs from the right token (when there is one).
      int32_t wrong = static_cast<int32_t>(2 + rng() % 1000);
      if (at < tokens.size() && wrong == tokens[at]) ++wrong;
      row_ids.push_back(right ? tokens[at] : wrong);
    }
    const int64_t pos = kPrompt + static_cast<int64_t>(done);
    ASSERT_TRUE(kv->reserve(seq, pos + kDrafts + 1));
    StepBatch b;
    b.rollbacks = pending;
    if (rollback_alone && !pending.empty()) {
      StepOutput none;
      ASSERT_TRUE(r.execute(b, &none).ok());
      b.rollbacks.clear();
    }
    StepRow row{seq, pos, row_ids.data(), kDrafts + 1, kv->state_pages(seq), kv->block_table(seq),
                true};
    row.speculative = true;
    b.rows.push_back(row);
    StepOutput out;
    Status st = r.execute(b, &out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(out.num_logit_rows, kDrafts + 1);
    // Accepted: the sampled token and the right drafts, up to the end of `tokens`.
    const int accepted = 1 + static_cast<int>(std::min<size_t>(good, tokens.size() - done - 1));
    for (int t = 0; t < accepted; ++t)
      EXPECT_TRUE(same_bits(out.logits + t * vocab, &ref[(done + t) * vocab], vocab))
          << "good " << good << ", position " << pos + t << ": "
          << row_gap(out.logits + t * vocab, &ref[(done + t) * vocab], vocab);
    done += accepted;
    pending = {
        {seq, kPrompt + static_cast<int64_t>(done), kv->state_pages(seq), kv->block_table(seq)}};
  }
  StepBatch b;
  b.rollbacks = pending;
  if (rollback_alone) {  // the rolled-back state as the pages hold it, then the plain token
    StepOutput none;
    ASSERT_TRUE(r.execute(b, &none).ok());
    b.rollbacks.clear();
    auto bytes = r.read_pages(*kv->state_pages(seq));
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    EXPECT_TRUE(*bytes == plain) << "good " << good << ": constant pages after the rollbacks: "
                                 << bytes_gap(*bytes, plain, r.page_spec().page_bytes);
  }
  // The rolled-back state continues like the plain one: one more plain token.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), tokens.begin(), tokens.end());
  all.push_back(5);
  const int64_t pos = static_cast<int64_t>(all.size()) - 1;
  ASSERT_TRUE(kv->reserve(seq, pos + 1));
  b.rows.push_back({seq, pos, &all[pos], 1, kv->state_pages(seq), kv->block_table(seq), true});
  StepOutput out;
  ASSERT_TRUE(r.execute(b, &out).ok());
  ASSERT_EQ(out.num_logit_rows, 1);
  EXPECT_TRUE(same_bits(out.logits, &ref[tokens.size() * vocab], vocab))
      << "good " << good << ": " << row_gap(out.logits, &ref[tokens.size() * vocab], vocab);
  r.release(seq);
}

inline void expect_rollbacks_are_exact(ModelRunner* r) {
  ASSERT_NE(r, nullptr);
  const auto prompt = random_ids(kPrompt, 41);
  auto tokens = random_ids(kAccepted, 42);
  std::vector<int32_t> with_tail = tokens;
  with_tail.push_back(5);
  // The speculative runs take the prompt in chunks of 64; plain decoding after it in one chunk
  // must give the same bits too (batch invariance covers chunking), checked apart so that a
  // failure names which of the two parted.
  std::string plain;  // the constant pages after `tokens`, for the rollback-alone runs
  const std::vector<float> ref = plain_decode(*r, prompt, with_tail, kPromptChunk, &plain);
  const std::vector<float> one_chunk = plain_decode(*r, prompt, with_tail, kPrompt);
  const int64_t vocab = r->info().vocab_size;
  for (size_t i = 0; i < with_tail.size(); ++i)
    EXPECT_TRUE(same_bits(&one_chunk[i * vocab], &ref[i * vocab], vocab))
        << "prompt in one chunk vs in chunks of " << kPromptChunk << ", position " << kPrompt + i
        << ": " << row_gap(&one_chunk[i * vocab], &ref[i * vocab], vocab);
  // The first rejected draft at every position, and none rejected; rollbacks with the next row
  // and on their own.
  ASSERT_FALSE(plain.empty());
  for (int good = 0; good <= kDrafts; ++good) {
    decode_speculatively(*r, prompt, tokens, good, ref);
    decode_speculatively(*r, prompt, tokens, good, ref, /*rollback_alone=*/true, plain);
  }
}

// A rollback with no speculative row before it, one past the row's end, and a valid one after
// that failure (which kept the row's snapshot).
inline void expect_rollback_errors(ModelRunner* r) {
  ASSERT_NE(r, nullptr);
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  const auto ids = random_ids(20, 3);
  run_chunked(*r, *kv, 1, ids, 0, 10);
  StepBatch b;
  b.rollbacks.push_back({1, 15, kv->state_pages(1), kv->block_table(1)});
  StepOutput out;
  Status st = r->execute(b, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("was not speculative"), std::string::npos) << st.to_string();

  ASSERT_TRUE(kv->reserve(1, 23));
  std::vector<int32_t> spec = {7, 8, 9};
  StepBatch s;
  StepRow row{1, 20, spec.data(), 3, kv->state_pages(1), kv->block_table(1), true};
  row.speculative = true;
  s.rows.push_back(row);
  ASSERT_TRUE(r->execute(s, &out).ok());
  StepBatch too_far;
  too_far.rollbacks.push_back({1, 24, kv->state_pages(1), kv->block_table(1)});
  st = r->execute(too_far, &out);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.to_string();
  EXPECT_NE(st.message().find("allows [20, 23]"), std::string::npos) << st.to_string();
  // The failed rollback kept the row's snapshot: a valid one still works.
  StepBatch back;
  back.rollbacks.push_back({1, 21, kv->state_pages(1), kv->block_table(1)});
  EXPECT_TRUE(r->execute(back, &out).ok());
}

}  // namespace deepinfer::runtime::testing
