// Snapshots inside a row (StepRow::snapshots, docs/decisions/0020), checked on any runner that
// takes them: a 300-token prompt run as one row with snapshots at 128 and 256 leaves in each
// snapshot's pages exactly the constant pages of the same prompt run in rows that end there, the
// row's own state and logits are those of the run without snapshots, and a sequence started from
// a snapshot continues as the original does. Bit for bit, so a CUDA runner needs batch invariance
// (its forward is then chunking-invariant). Malformed snapshots are errors before any row runs.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"
#include "deepinfer/runtime/testing/speculative_rows_check.h"

namespace deepinfer::runtime::testing {

constexpr int64_t kSnapshotPrompt = 300;
constexpr int64_t kSnapshotAt[] = {128, 256};

// Zeroes pages, so bytes no state op writes (the last constant page's tail) compare equal.
inline void zero_pages(ModelRunner& r, const std::vector<int32_t>& pages) {
  const std::string zeros(pages.size() * static_cast<size_t>(r.page_spec().page_bytes), '\0');
  ASSERT_TRUE(r.write_pages(pages, zeros).ok());
}

inline std::string page_bytes_of(ModelRunner& r, const std::vector<int32_t>& pages) {
  auto bytes = r.read_pages(pages);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : std::string();
}

// One step of one row; its logits (the row wants them).
inline std::vector<float> run_row(ModelRunner& r, const StepRow& row) {
  StepBatch b;
  b.rows.push_back(row);
  StepOutput out;
  const Status st = r.execute(b, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return st.ok() ? logits_of(r, out) : std::vector<float>();
}

inline void expect_row_snapshots_are_exact(ModelRunner* runner) {
  ASSERT_NE(runner, nullptr);
  ModelRunner& r = *runner;
  ASSERT_TRUE(r.snapshots_inside_rows());
  const int64_t page_bytes = r.page_spec().page_bytes;
  const int64_t vocab = r.info().vocab_size;
  std::vector<int32_t> ids = random_ids(kSnapshotPrompt + 1, 91);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + kSnapshotPrompt);
  auto kv = kv::KvManager::create(r.page_spec());
  ASSERT_TRUE(kv.ok());

  // The reference: rows ending at each snapshot position, the constant pages read there.
  const uint64_t ref = 1, seq = 2, child = 3;
  ASSERT_TRUE(kv->reserve(ref, kSnapshotPrompt + 1));
  zero_pages(r, *kv->state_pages(ref));
  std::vector<std::string> want;
  int64_t pos = 0;
  std::vector<float> ref_logits;
  for (int64_t end : {kSnapshotAt[0], kSnapshotAt[1], kSnapshotPrompt}) {
    ref_logits = run_row(r, {ref, pos, &prompt[pos], end - pos, kv->state_pages(ref),
                             kv->block_table(ref), end == kSnapshotPrompt});
    if (end < kSnapshotPrompt) want.push_back(page_bytes_of(r, *kv->state_pages(ref)));
    pos = end;
  }

  // The prompt as one row with both snapshots.
  ASSERT_TRUE(kv->reserve(seq, kSnapshotPrompt + 1));
  zero_pages(r, *kv->state_pages(seq));
  std::vector<std::vector<int32_t>> snaps;
  for (size_t k = 0; k < 2; ++k) {
    std::optional<std::vector<int32_t>> pages = kv->allocate_snapshot();
    ASSERT_TRUE(pages.has_value());
    zero_pages(r, *pages);
    snaps.push_back(*pages);
  }
  StepRow row{seq, 0, prompt.data(), kSnapshotPrompt, kv->state_pages(seq), kv->block_table(seq),
              true};
  for (size_t k = 0; k < 2; ++k) row.snapshots.push_back({kSnapshotAt[k], &snaps[k]});
  const std::vector<float> logits = run_row(r, row);
  ASSERT_EQ(logits.size(), size_t(vocab));
  EXPECT_TRUE(same_bits(logits.data(), ref_logits.data(), vocab))
      << row_gap(logits.data(), ref_logits.data(), vocab);
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(page_bytes_of(r, snaps[k]), want[k])
        << "snapshot at " << kSnapshotAt[k] << ": "
        << bytes_gap(page_bytes_of(r, snaps[k]), want[k], page_bytes);
  EXPECT_EQ(page_bytes_of(r, *kv->state_pages(seq)), page_bytes_of(r, *kv->state_pages(ref)));

  // A sequence started from the snapshot at 256 (its constant pages copied from it, the first
  // two token pages shared) continues as the original: the prompt's rest, then one more token.
  ASSERT_TRUE(kv->reserve(child, kSnapshotPrompt + 1));
  std::vector<int32_t> table = *kv->block_table(child);
  const std::vector<int32_t>& seq_table = *kv->block_table(seq);
  for (int64_t i = 0; i < kSnapshotAt[1] / r.page_spec().page_tokens; ++i) table[i] = seq_table[i];
  StepBatch start;
  for (size_t i = 0; i < snaps[1].size(); ++i)
    start.page_copies.push_back({snaps[1][i], (*kv->state_pages(child))[i]});
  start.rows.push_back({child, kSnapshotAt[1], &prompt[kSnapshotAt[1]],
                        kSnapshotPrompt - kSnapshotAt[1], kv->state_pages(child), &table, true});
  StepOutput out;
  Status st = r.execute(start, &out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const std::vector<float> resumed = logits_of(r, out);
  ASSERT_EQ(resumed.size(), size_t(vocab));
  EXPECT_TRUE(same_bits(resumed.data(), ref_logits.data(), vocab))
      << row_gap(resumed.data(), ref_logits.data(), vocab);
  const std::vector<float> next_ref =
      run_row(r, {ref, kSnapshotPrompt, &ids[kSnapshotPrompt], 1, kv->state_pages(ref),
                  kv->block_table(ref), true});
  const std::vector<float> next_child = run_row(
      r, {child, kSnapshotPrompt, &ids[kSnapshotPrompt], 1, kv->state_pages(child), &table, true});
  ASSERT_EQ(next_child.size(), size_t(vocab));
  ASSERT_EQ(next_ref.size(), size_t(vocab));
  EXPECT_TRUE(same_bits(next_child.data(), next_ref.data(), vocab))
      << row_gap(next_child.data(), next_ref.data(), vocab);
  for (uint64_t id : {ref, seq, child}) r.release(id);
}

// Malformed snapshots are refused with invalid_argument naming the snapshot, and nothing runs:
// the sequence's next good row still starts at position 0.
inline void expect_row_snapshot_errors(ModelRunner* runner) {
  ASSERT_NE(runner, nullptr);
  ModelRunner& r = *runner;
  const std::vector<int32_t> prompt = random_ids(200, 92);
  auto kv = kv::KvManager::create(r.page_spec());
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(kv->reserve(1, 200));
  std::optional<std::vector<int32_t>> pages = kv->allocate_snapshot();
  ASSERT_TRUE(pages.has_value());
  const std::vector<int32_t> short_pages(pages->begin(), pages->end() - 1);
  const std::vector<int32_t> own = *kv->state_pages(1);
  const std::vector<int32_t> outside(pages->size(), static_cast<int32_t>(r.page_spec().num_pages));
  struct Bad {
    int64_t end_pos;
    const std::vector<int32_t>* pages;
    bool speculative;
    const char* says;
  };
  const Bad bad[] = {{0, &*pages, false, "not inside"},
                     {200, &*pages, false, "not inside"},
                     {128, &short_pages, false, "pages, the layout"},
                     {128, &own, false, "own constant pages"},
                     {128, &outside, false, "outside the pool"},
                     {128, &*pages, true, "speculative"}};
  for (const Bad& b : bad) {
    StepRow row{1, 0, prompt.data(), 200, kv->state_pages(1), kv->block_table(1), true};
    row.speculative = b.speculative;
    row.snapshots.push_back({b.end_pos, b.pages});
    StepBatch batch;
    batch.rows.push_back(row);
    StepOutput out;
    const Status st = r.execute(batch, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.says << ": " << st.to_string();
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.to_string();
    EXPECT_NE(st.message().find("snapshot"), std::string::npos) << st.to_string();
  }
  const std::vector<float> logits =
      run_row(r, {1, 0, prompt.data(), 200, kv->state_pages(1), kv->block_table(1), true});
  EXPECT_EQ(logits.size(), size_t(r.info().vocab_size));
  r.release(1);
}

}  // namespace deepinfer::runtime::testing
