// DeepSeek's switches: the environment variables when a field is unset, the field when given,
// and errors that name the variable or the field.
#include "deepinfer/engine/switches.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace deepinfer {
namespace {

class SwitchesTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"DEEPINFER_BATCH_INVARIANT", "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE",
                          "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS"})
      ::unsetenv(v);
  }
};

TEST_F(SwitchesTest, OffByDefault) {
  auto s = resolve_switches({});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->batch_invariant);
  EXPECT_EQ(s->yoco_keep_tokens, 0);
}

TEST_F(SwitchesTest, EnvironmentWhenUnsetAndFieldsWinOverIt) {
  ::setenv("DEEPINFER_BATCH_INVARIANT", "1", 1);
  ::setenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "compact", 1);
  auto s = resolve_switches({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(s->batch_invariant);
  EXPECT_EQ(s->yoco_keep_tokens, kDefaultYocoKeepTokens);
  ::setenv("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", "64", 1);
  EXPECT_EQ(resolve_switches({})->yoco_keep_tokens, 64);

  SwitchArgs given;
  given.batch_invariant = false;
  given.yoco_mode = YocoMode::kOff;
  s = resolve_switches(given);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->batch_invariant);
  EXPECT_EQ(s->yoco_keep_tokens, 0);
  given.yoco_mode = YocoMode::kCompact;
  given.yoco_keep_tokens = 9;
  EXPECT_EQ(resolve_switches(given)->yoco_keep_tokens, 9);
}

TEST_F(SwitchesTest, BadValuesNameTheVariableOrField) {
  auto expect_error = [](const SwitchArgs& given, const std::string& fragment) {
    auto s = resolve_switches(given);
    ASSERT_FALSE(s.ok()) << fragment;
    EXPECT_NE(s.status().message().find(fragment), std::string::npos) << s.status().message();
  };
  ::setenv("DEEPINFER_BATCH_INVARIANT", "yes", 1);
  expect_error({}, "DEEPINFER_BATCH_INVARIANT must be 1 or 0, got 'yes'");
  ::unsetenv("DEEPINFER_BATCH_INVARIANT");
  ::setenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "full", 1);
  expect_error({}, "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE must be off or compact, got 'full'");
  ::setenv("DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "compact", 1);
  ::setenv("DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", "0", 1);
  expect_error({}, "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS must be a positive integer, got '0'");
  SwitchArgs given;
  given.yoco_keep_tokens = -3;
  expect_error(given, "yoco_prefill_keep_tokens must be at least 1, got -3");
}

}  // namespace
}  // namespace deepinfer
