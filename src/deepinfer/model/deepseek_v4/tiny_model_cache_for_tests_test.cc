// The tests' model cache: a second process's model is a private copy of the first one's, made
// without writing; another recipe, or no cache directory, writes afresh.
#include "deepinfer/model/deepseek_v4/tiny_model_cache_for_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <iterator>

namespace deepinfer::v4 {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

class TestModelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) / ("model_cache_test_" + std::to_string(::getpid()));
    fs::remove_all(base_);
    const char* old = std::getenv("DEEPINFER_TEST_MODEL_CACHE");
    if (old) saved_ = old, had_ = true;
    ::setenv("DEEPINFER_TEST_MODEL_CACHE", (base_ / "cache").c_str(), 1);
  }
  void TearDown() override {
    if (had_)
      ::setenv("DEEPINFER_TEST_MODEL_CACHE", saved_.c_str(), 1);
    else
      ::unsetenv("DEEPINFER_TEST_MODEL_CACHE");
    fs::remove_all(base_);
  }
  // A "model" whose one file names the recipe and counts the writes.
  Status make(const std::string& dir, const std::string& what) {
    return write_through_test_model_cache(dir, what, [&](const std::string& d) {
      ++writes_;
      fs::create_directories(d);
      std::ofstream(fs::path(d) / "weights") << what << " #" << writes_;
      return ok_status();
    });
  }
  fs::path base_;
  std::string saved_;
  bool had_ = false;
  int writes_ = 0;
};

TEST_F(TestModelCache, ALaterProcessCopiesTheModelAndKeepsItsCopyToItself) {
  ASSERT_TRUE(make((base_ / "first").string(), "recipe A").ok());
  ASSERT_TRUE(make((base_ / "second").string(), "recipe A").ok());
  EXPECT_EQ(writes_, 1);
  EXPECT_EQ(read(base_ / "second" / "weights"), "recipe A #1");
  std::ofstream(base_ / "second" / "weights") << "changed by its test";
  ASSERT_TRUE(make((base_ / "third").string(), "recipe A").ok());
  EXPECT_EQ(writes_, 1);
  EXPECT_EQ(read(base_ / "third" / "weights"), "recipe A #1");
}

TEST_F(TestModelCache, AnotherRecipeIsWrittenAfresh) {
  ASSERT_TRUE(make((base_ / "a").string(), "recipe A").ok());
  ASSERT_TRUE(make((base_ / "b").string(), "recipe B").ok());
  EXPECT_EQ(writes_, 2);
  EXPECT_EQ(read(base_ / "b" / "weights"), "recipe B #2");
}

TEST_F(TestModelCache, WithoutTheCacheDirectoryEveryModelIsWritten) {
  ::unsetenv("DEEPINFER_TEST_MODEL_CACHE");
  ASSERT_TRUE(make((base_ / "a").string(), "recipe A").ok());
  ASSERT_TRUE(make((base_ / "b").string(), "recipe A").ok());
  EXPECT_EQ(writes_, 2);
  EXPECT_FALSE(fs::exists(base_ / "cache"));
}

TEST_F(TestModelCache, AFailedWriteIsReportedAndNotKept) {
  Status st = write_through_test_model_cache(
      (base_ / "a").string(), "recipe A",
      [](const std::string&) { return invalid_argument("no room"); });
  EXPECT_FALSE(st.ok());
  ASSERT_TRUE(make((base_ / "b").string(), "recipe A").ok());
  EXPECT_EQ(writes_, 1);
}

}  // namespace
}  // namespace deepinfer::v4
