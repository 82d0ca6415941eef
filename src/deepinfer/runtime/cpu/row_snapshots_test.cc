// Snapshots inside a row on the CPU runner (decision 0020), for both model families: the row
// runs in pieces and each snapshot's pages get the constant state at its position, bit for bit
// what a row ending there leaves, and a sequence started from one continues exactly.
#include <gtest/gtest.h>

#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cpu/cpu_runner.h"
#include "deepinfer/runtime/testing/row_snapshots_check.h"

namespace deepinfer::runtime {
namespace {

using testing::small_pool_runner;

TEST(CpuRowSnapshots, DeepseekV4SnapshotsEqualTheStateOfRowsEndingThere) {
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 33;
  testing::expect_row_snapshots_are_exact(
      small_pool_runner(v4::write_tiny_model_for_test("row_snapshots_v4", o)).get());
}

TEST(CpuRowSnapshots, DeepseekV41SnapshotsEqualTheStateOfRowsEndingThere) {
  testing::expect_row_snapshots_are_exact(
      small_pool_runner(v41::tiny_model_dir_for_test(/*quantized=*/true)).get());
}

TEST(CpuRowSnapshots, MalformedSnapshotsAreErrorsAndNothingRuns) {
  v4::TinyModelOptions o;
  o.seed = 34;
  testing::expect_row_snapshot_errors(
      small_pool_runner(v4::write_tiny_model_for_test("row_snapshot_errors", o)).get());
}

}  // namespace
}  // namespace deepinfer::runtime
