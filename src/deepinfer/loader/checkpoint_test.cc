#include "deepinfer/loader/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/test_util.h"

namespace deepinfer {
namespace {

void write_one(const std::string& path, const std::vector<std::string>& names) {
  SafetensorsWriter w;
  for (const std::string& n : names) w.add(n, DType::kU8, {2}, {1, 2});
  ASSERT_TRUE(w.write(path).ok());
}

void expect_error(const StatusOr<std::unique_ptr<Checkpoint>>& ckpt, StatusCode code,
                  std::initializer_list<std::string> names) {
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), code) << ckpt.status().to_string();
  for (const std::string& n : names)
    EXPECT_NE(ckpt.status().message().find(n), std::string::npos) << ckpt.status().message();
}

const char* kIndex = "/model.safetensors.index.json";

TEST(Checkpoint, SingleFileInTransformersSpelling) {
  TempDir dir;
  write_one(dir.path() + "/model.safetensors",
            {"model.layers.0.attn.norm.weight", "model.layers.0.attn_norm.weight",
             "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"});
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  const std::vector<std::string> want = {"embed.weight", "head.weight",
                                         "layers.0.attn.kv_norm.weight",
                                         "layers.0.attn_norm.weight", "norm.weight"};
  EXPECT_EQ((*ckpt)->canonical_names(), want);
  const TensorInfo* t = (*ckpt)->find("layers.0.attn.kv_norm.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "model.layers.0.attn.norm.weight");
  // Queries in an on-disk spelling are canonicalized too.
  EXPECT_EQ((*ckpt)->find("model.layers.0.attn.norm.weight"), t);
  EXPECT_EQ((*ckpt)->find("layers.0.attn.norm.weight"), t);
  EXPECT_EQ((*ckpt)->find("model.embed_tokens.weight"), (*ckpt)->find("embed.weight"));
  EXPECT_EQ((*ckpt)->find("missing.weight"), nullptr);
  EXPECT_EQ((*ckpt)->dir(), dir.path());
}

TEST(Checkpoint, FallsBackToEverySafetensorsFile) {
  TempDir dir;
  write_one(dir.path() + "/b.safetensors", {"layers.1.w"});
  write_one(dir.path() + "/a.safetensors", {"layers.0.w"});
  write_file_bytes(dir.path() + "/config.json", "{}");
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ((*ckpt)->canonical_names(), (std::vector<std::string>{"layers.0.w", "layers.1.w"}));
  EXPECT_EQ((*ckpt)->find("layers.1.w")->file, dir.path() + "/b.safetensors");
}

TEST(Checkpoint, IndexTakesPrecedenceAndUnlistedFilesAreIgnored) {
  TempDir dir;
  write_one(dir.path() + "/s1.safetensors", {"x"});
  write_one(dir.path() + "/stale.safetensors", {"x"});  // would be a duplicate if globbed
  write_file_bytes(dir.path() + kIndex, R"({"metadata":{},"weight_map":{"x":"s1.safetensors"}})");
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ((*ckpt)->find("x")->file, dir.path() + "/s1.safetensors");
}

TEST(CheckpointCorrupt, MissingOrEmptyDirectory) {
  expect_error(Checkpoint::open("/nonexistent/ckpt"), StatusCode::kNotFound, {"/nonexistent/ckpt"});
  TempDir dir;
  expect_error(Checkpoint::open(dir.path()), StatusCode::kNotFound, {dir.path()});
}

TEST(CheckpointCorrupt, IndexNamesAMissingShard) {
  TempDir dir;
  write_one(dir.path() + "/s1.safetensors", {"a"});
  write_file_bytes(dir.path() + kIndex,
                   R"({"weight_map":{"a":"s1.safetensors","b.weight":"s2.safetensors"}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kNotFound,
               {"model.safetensors.index.json", "s2.safetensors", "b.weight"});
}

TEST(CheckpointCorrupt, IndexNamesATensorItsShardLacks) {
  TempDir dir;
  write_one(dir.path() + "/s1.safetensors", {"a"});
  write_one(dir.path() + "/s2.safetensors", {"b"});
  write_file_bytes(dir.path() + kIndex,
                   R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kNotFound,
               {"model.safetensors.index.json", "'b'", "s1.safetensors"});
}

TEST(CheckpointCorrupt, DuplicateTensorAcrossShards) {
  TempDir dir;
  write_one(dir.path() + "/s1.safetensors", {"a", "layers.0.w"});
  write_one(dir.path() + "/s2.safetensors", {"layers.0.w"});
  write_file_bytes(dir.path() + kIndex,
                   R"({"weight_map":{"a":"s1.safetensors","layers.0.w":"s2.safetensors"}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss,
               {"'layers.0.w'", "s1.safetensors", "s2.safetensors"});
}

TEST(CheckpointCorrupt, SameTensorUnderBothSpellings) {
  TempDir dir;
  write_one(dir.path() + "/model.safetensors",
            {"layers.0.attn.kv_norm.weight", "model.layers.0.attn.norm.weight"});
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss,
               {"'layers.0.attn.kv_norm.weight'", "model.layers.0.attn.norm.weight"});
}

TEST(CheckpointCorrupt, BadIndexJson) {
  TempDir dir;
  write_file_bytes(dir.path() + kIndex, R"({"weight_map": {"a": )");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss,
               {"model.safetensors.index.json"});
  write_file_bytes(dir.path() + kIndex, R"({"metadata": {}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss, {"weight_map"});
  write_file_bytes(dir.path() + kIndex, R"({"weight_map": {"a": 3}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss, {"'a'"});
  write_file_bytes(dir.path() + kIndex, R"({"weight_map": {"a": "../x.safetensors"}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss, {"../x.safetensors"});
}

TEST(CheckpointCorrupt, CorruptShardIsNamed) {
  TempDir dir;
  write_file_bytes(dir.path() + "/model-00001-of-00001.safetensors", "garbage");
  write_file_bytes(dir.path() + kIndex,
                   R"({"weight_map":{"a":"model-00001-of-00001.safetensors"}})");
  expect_error(Checkpoint::open(dir.path()), StatusCode::kDataLoss,
               {"model-00001-of-00001.safetensors"});
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// tests/golden (the lead's tools/golden/make_hf_fixtures.py, transformers 5.17) holds the names
// save_pretrained wrote (hf_saved_names.txt) and the same model in Hub spelling
// (mixed_selective/model.safetensors). Canonicalizing the former must give exactly the latter.
TEST(Checkpoint, TransformersSavedNamesMapOntoTheHubNames) {
  const std::string golden = std::string(DEEPINFER_SOURCE_DIR) + "/tests/golden";
  if (!std::filesystem::exists(golden + "/hf_saved_names.txt")) GTEST_SKIP() << "no " << golden;
  std::ifstream names_in(golden + "/hf_saved_names.txt");
  std::vector<std::string> hf_names;
  for (std::string line; std::getline(names_in, line);) {
    if (!line.empty()) hf_names.push_back(line.substr(0, line.find(' ')));
  }
  ASSERT_GT(hf_names.size(), 100u);
  TempDir dir;
  write_one(dir.path() + "/model.safetensors", hf_names);
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();

  auto hub = SafetensorsFile::open(golden + "/mixed_selective/model.safetensors");
  ASSERT_TRUE(hub.ok()) << hub.status().to_string();
  std::vector<std::string> hub_names;
  for (const TensorInfo& t : (*hub)->tensors()) hub_names.push_back(t.name);
  EXPECT_EQ((*ckpt)->canonical_names(), hub_names);
  EXPECT_EQ((*ckpt)->find("layers.0.attn.kv_norm.weight")->name, "model.layers.0.attn.norm.weight");
  EXPECT_EQ((*ckpt)->find("hc_head_fn")->name, "model.hc_head.hc_fn");
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Files written by the Python safetensors library must pass our validation unchanged.
TEST(SafetensorsFile, OpensEveryPythonWrittenGoldenFile) {
  const std::string golden = std::string(DEEPINFER_SOURCE_DIR) + "/tests/golden";
  if (!std::filesystem::exists(golden)) GTEST_SKIP() << "no " << golden;
  int opened = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(golden)) {
    if (e.path().extension() != ".safetensors") continue;
    auto file = SafetensorsFile::open(e.path().string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    EXPECT_FALSE((*file)->tensors().empty()) << e.path();
    ++opened;
  }
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace deepinfer
