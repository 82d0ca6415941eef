#include "deepinfer/loader/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/safetensors_file.h"
#include "deepinfer/loader/test_util.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

TEST(SafetensorsWriter, WritesTheStandardLayoutByteForByte) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("x", DType::kF32, {1}, {0x00, 0x00, 0x80, 0x3f});  // 1.0f
  const std::string path = dir.path() + "/x.safetensors";
  ASSERT_TRUE(w.write(path).ok());
  // Hand-written expectation: the JSON is 54 bytes, padded with 2 spaces to 56.
  const std::string json = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ASSERT_EQ(json.size(), 54u);
  std::string expected("\x38\0\0\0\0\0\0\0", 8);
  expected += json + "  ";
  expected += std::string("\x00\x00\x80\x3f", 4);
  EXPECT_EQ(read_file_bytes(path), expected);
}

TEST(SafetensorsWriter, RoundTripsThroughTheReaderSortedWithMetadata) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("layers.0.b", DType::kBF16, {2, 2}, {0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40});
  w.add("a", DType::kF8E4M3, {3}, {0x38, 0x7e, 0x01});
  w.add("empty", DType::kI64, {0, 4}, {});
  const std::string path = dir.path() + "/m.safetensors";
  ASSERT_TRUE(w.write(path, {{"format", "pt"}}).ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const auto& ts = (*file)->tensors();
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].name, "a");
  EXPECT_EQ(ts[1].name, "empty");
  EXPECT_EQ(ts[2].name, "layers.0.b");
  const TensorInfo* b = (*file)->find("layers.0.b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(b->nbytes, 8u);
  EXPECT_EQ(b->data[2], 0x00);
  EXPECT_EQ(b->data[3], 0x40);
  EXPECT_EQ(b->file, path);
  const TensorInfo* a = (*file)->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->numel(), 3);
  EXPECT_EQ(a->data[1], 0x7e);
  EXPECT_EQ((*file)->find("empty")->numel(), 0);
  EXPECT_EQ((*file)->find("nope"), nullptr);
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  // Tensors sorted by name are laid out contiguously after an 8-aligned header.
  EXPECT_EQ(b->data, a->data + 3);
  uint64_t header_len;
  std::memcpy(&header_len, read_file_bytes(path).data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST(SafetensorsWriter, RejectsBadRecords) {
  TempDir dir;
  {
    SafetensorsWriter w;
    w.add("t", DType::kF32, {2}, {0, 0, 0, 0});
    Status st = w.write(dir.path() + "/a.safetensors");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("'t'"), std::string::npos) << st.message();
  }
  {
    SafetensorsWriter w;
    w.add("t", DType::kU8, {1}, {0});
    w.add("t", DType::kU8, {1}, {1});
    Status st = w.write(dir.path() + "/b.safetensors");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("twice"), std::string::npos) << st.message();
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/a.safetensors"));
}

std::vector<TensorRecord> four_tensors(const std::string& prefix) {
  std::vector<TensorRecord> v;
  for (int i = 0; i < 4; ++i) {
    std::vector<uint8_t> bytes(16, static_cast<uint8_t>(i + 1));
    v.push_back({prefix + "layers." + std::to_string(3 - i) + ".attn.norm.weight",
                 DType::kF32,
                 {4},
                 bytes});
  }
  return v;
}

TEST(ShardedWriter, SplitsIntoShardsWithAnIndexAndLoadsBack) {
  TempDir dir;
  // 16-byte tensors, at most 40 bytes a shard -> two tensors per shard, two shards.
  ASSERT_TRUE(write_sharded_safetensors(dir.path(), four_tensors(""), 40).ok());
  EXPECT_TRUE(fs::exists(dir.path() + "/model-00001-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(dir.path() + "/model-00002-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(dir.path() + "/model-00003-of-00003.safetensors"));

  const nlohmann::json index =
      nlohmann::json::parse(read_file_bytes(dir.path() + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 64);
  EXPECT_EQ(index["weight_map"]["layers.0.attn.norm.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["layers.1.attn.norm.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["layers.2.attn.norm.weight"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["layers.3.attn.norm.weight"], "model-00002-of-00002.safetensors");

  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ((*ckpt)->files().size(), 2u);
  const TensorInfo* t = (*ckpt)->find("layers.2.attn.kv_norm.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "layers.2.attn.norm.weight");
  EXPECT_EQ(t->data[0], 2);  // layers.2 was the second record (value i + 1 with i = 1)
  EXPECT_EQ(t->file, dir.path() + "/model-00002-of-00002.safetensors");
}

TEST(ShardedWriter, TransformersSpellingLoadsUnderCanonicalNames) {
  TempDir dir;
  ASSERT_TRUE(write_sharded_safetensors(dir.path(), four_tensors("model."), 16).ok());
  EXPECT_TRUE(fs::exists(dir.path() + "/model-00004-of-00004.safetensors"));
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  const std::vector<std::string> want = {
      "layers.0.attn.kv_norm.weight", "layers.1.attn.kv_norm.weight",
      "layers.2.attn.kv_norm.weight", "layers.3.attn.kv_norm.weight"};
  EXPECT_EQ((*ckpt)->canonical_names(), want);
  const TensorInfo* t = (*ckpt)->find("layers.0.attn.kv_norm.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name, "model.layers.0.attn.norm.weight");
  EXPECT_EQ(t->data[15], 4);
  // The on-disk spelling is accepted as a query too.
  EXPECT_EQ((*ckpt)->find("model.layers.0.attn.norm.weight"), t);
}

TEST(ShardedWriter, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  ASSERT_TRUE(write_sharded_safetensors(dir.path(), four_tensors(""), 1).ok());
  EXPECT_TRUE(fs::exists(dir.path() + "/model-00004-of-00004.safetensors"));
}

}  // namespace
}  // namespace deepinfer
