// detect_model_family: the V4 and V4.1 golden fixtures, and errors that name the file and
// model_type.
#include "deepinfer/model/model_family.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

TEST(ModelFamily, V4FixturesAreDeepseekV4) {
  for (const char* name : {"mixed_selective", "sliding_hash", "hca_clamp"}) {
    auto f = detect_model_family(std::string(DEEPINFER_SOURCE_DIR) + "/tests/golden/" + name);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status().to_string();
    EXPECT_EQ(*f, ModelFamily::kDeepseekV4) << name;
  }
}

TEST(ModelFamily, V41FixturesAreDeepseekV41) {
  int seen = 0;
  for (const auto& e : fs::directory_iterator(std::string(DEEPINFER_SHARED_DIR) + "/golden_v41")) {
    if (!fs::exists(e.path() / "config.json")) continue;
    auto f = detect_model_family(e.path().string());
    ASSERT_TRUE(f.ok()) << e.path() << ": " << f.status().to_string();
    EXPECT_EQ(*f, ModelFamily::kDeepseekV41) << e.path();
    ++seen;
  }
  EXPECT_GE(seen, 5);
}

TEST(ModelFamily, FlatTextConfigIsDeepseekV41) {
  auto f = model_family_from_config_json(R"({"model_type": "deepseek_v41_text"})", "flat.json");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f, ModelFamily::kDeepseekV41);
  EXPECT_STREQ(model_family_name(*f), "deepseek_v41");
  EXPECT_STREQ(model_family_name(ModelFamily::kDeepseekV4), "deepseek_v4");
}

class ModelFamilyErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("model_family_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(dir_ / "config.json") << text; }
  std::string path() const { return (dir_ / "config.json").string(); }
  fs::path dir_;
};

TEST_F(ModelFamilyErrors, UnknownModelTypeNamesItAndTheFile) {
  write(R"({"model_type": "deepseek_v3", "hidden_size": 7168})");
  auto f = detect_model_family(dir_.string());
  ASSERT_FALSE(f.ok());
  const std::string& m = f.status().message();
  EXPECT_NE(m.find(path()), std::string::npos) << m;
  EXPECT_NE(m.find("model_type"), std::string::npos) << m;
  EXPECT_NE(m.find("deepseek_v3"), std::string::npos) << m;
}

TEST_F(ModelFamilyErrors, MissingOrMistypedModelType) {
  for (const char* text :
       {R"({"hidden_size": 64})", R"({"model_type": null})", R"({"model_type": 41})"}) {
    write(text);
    auto f = detect_model_family(dir_.string());
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_NE(f.status().message().find(path()), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("model_type"), std::string::npos) << f.status().message();
  }
}

TEST_F(ModelFamilyErrors, NotJsonOrNoFile) {
  write("{\"model_type\": ");
  auto f = detect_model_family(dir_.string());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path()), std::string::npos) << f.status().message();
  fs::remove(dir_ / "config.json");
  f = detect_model_family(dir_.string());
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find(path()), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace deepinfer
