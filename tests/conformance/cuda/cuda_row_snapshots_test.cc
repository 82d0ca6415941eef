// Snapshots inside a row on the GPU (decision 0020): deepseek_v4's forward advances a copy of the
// constant state by the chunk's own state ops (compressors, window ring) to each snapshot's
// position, so a long prefill chunk needs no cut at the prefix cache's persistence points. Checked
// under batch invariance, bit for bit, by the check the CPU runner passes
// (runtime/testing/row_snapshots_check.h). deepseek_v41 on the GPU takes none yet: the runner
// says so, and refuses a row that carries some.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/model_runner.h"
#include "deepinfer/runtime/testing/row_snapshots_check.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"

namespace deepinfer::cuda {
namespace {

using runtime::ModelRunner;

// Chunks of 256 inside the runner: the 300-token row's snapshots fall inside its first chunk
// (128) and at that chunk's end (256).
std::unique_ptr<ModelRunner> invariant_runner(const std::string& dir) {
  runtime::RunnerOptions o;
  o.model_dir = dir;
  o.device = runtime::Device::kCuda;
  o.numerics = runtime::Numerics::kPlain;
  o.max_model_len = 512;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 256;
  o.batch_invariant = true;
  o.kv_memory_bytes = int64_t{256} << 20;
  auto r = runtime::create_runner(o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::string v4_model(const char* name, uint64_t seed) {
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = seed;
  return v4::write_tiny_model_for_test(name, o);
}

TEST(CudaRowSnapshots, DeepseekV4SnapshotsEqualTheStateOfRowsEndingThere) {
  runtime::testing::expect_row_snapshots_are_exact(
      invariant_runner(v4_model("cuda_row_snapshots_v4", 35)).get());
}

TEST(CudaRowSnapshots, MalformedSnapshotsAreErrorsAndNothingRuns) {
  runtime::testing::expect_row_snapshot_errors(
      invariant_runner(v4_model("cuda_row_snapshot_errors", 36)).get());
}

TEST(CudaRowSnapshots, DeepseekV41TakesNoneAndRefusesThem) {
  auto r = invariant_runner(v41::tiny_model_dir_for_test(/*quantized=*/true));
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->snapshots_inside_rows());
  const std::vector<int32_t> prompt = runtime::testing::random_ids(200, 93);
  auto kv = kv::KvManager::create(r->page_spec());
  ASSERT_TRUE(kv.ok());
  ASSERT_TRUE(kv->reserve(1, 200));
  std::optional<std::vector<int32_t>> pages = kv->allocate_snapshot();
  ASSERT_TRUE(pages.has_value());
  runtime::StepRow row{1, 0, prompt.data(), 200, kv->state_pages(1), kv->block_table(1), true};
  row.snapshots.push_back({128, &*pages});
  runtime::StepBatch b;
  b.rows.push_back(row);
  runtime::StepOutput out;
  const Status st = r->execute(b, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("snapshots inside a row"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace deepinfer::cuda
