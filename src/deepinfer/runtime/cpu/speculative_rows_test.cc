// Speculative rows and rollbacks on the CPU runner (issue 19), for both model families: a
// verification row returns every position's logits, and a rollback to any accepted length
// leaves the state exactly as a run without speculation, whatever position the first rejected
// draft had. Checked bit for bit against plain one-token decoding of the accepted tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "deepinfer/kv/kv_manager.h"
#include "deepinfer/model/deepseek_v4/tiny_model_for_tests.h"
#include "deepinfer/model/deepseek_v41/tiny_model_for_tests.h"
#include "deepinfer/runtime/cpu/cpu_runner.h"
#include "deepinfer/runtime/testing/runner_test_steps.h"
#include "deepinfer/runtime/testing/speculative_rows_check.h"

namespace deepinfer::runtime {
namespace {

using testing::small_pool_runner;

void expect_rollbacks_are_exact(const std::string& dir) {
  testing::expect_rollbacks_are_exact(small_pool_runner(dir).get());
}

TEST(SpeculativeRows, DeepseekV4RollbackToAnyAcceptedLengthEqualsPlainDecoding) {
  v4::TinyModelOptions o;
  o.quantized = true;
  o.seed = 29;
  expect_rollbacks_are_exact(v4::write_tiny_model_for_test("speculative_v4", o));
}

TEST(SpeculativeRows, DeepseekV41RollbackToAnyAcceptedLengthEqualsPlainDecoding) {
  expect_rollbacks_are_exact(v41::tiny_model_dir_for_test(/*quantized=*/true));
}

TEST(SpeculativeRows, RollbacksOutsideASpeculativeRowAreErrors) {
  v4::TinyModelOptions o;
  o.seed = 30;
  testing::expect_rollback_errors(
      small_pool_runner(v4::write_tiny_model_for_test("speculative_errors", o)).get());
}

}  // namespace
}  // namespace deepinfer::runtime
