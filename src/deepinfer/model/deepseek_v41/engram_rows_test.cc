// EngramRows reads an Engram table in place: gathered rows must equal the loader's own full-table
// dequantization (a separate, separately tested path) and hand-computed values, for F8_E4M3 with
// per-32-channel and per-row E8M0 scales and for float tables; errors name the tensor.
#include "deepinfer/model/deepseek_v41/engram_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "deepinfer/loader/dequantize.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::v41 {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRows = 37, kDim = 96;  // 96 = 3 scale blocks of 32

struct Table {
  std::unique_ptr<Checkpoint> ckpt;
  fs::path dir;
  ~Table() { fs::remove_all(dir); }
};

// An FP8 table (random bytes that decode to finite values) with scales per 32 channels
// (scale_cols = 3) or per row (1), written as a one-shard checkpoint.
std::unique_ptr<Table> fp8_table(const std::string& name, int64_t scale_cols) {
  std::mt19937 rng(7);
  std::vector<uint8_t> values(kRows * kDim), scales(kRows * scale_cols);
  for (auto& b : values) {
    do b = static_cast<uint8_t>(rng());
    while ((b & 0x7f) == 0x7f);  // no NaN encodings
  }
  for (auto& s : scales) s = static_cast<uint8_t>(120 + rng() % 15);  // 2^-7 .. 2^7
  SafetensorsWriter w;
  w.add("layers.1.engram.embed.weight", DType::kF8E4M3, {kRows, kDim}, values);
  w.add("layers.1.engram.embed.scale", DType::kF8E8M0, {kRows, scale_cols}, scales);
  auto t = std::make_unique<Table>();
  t->dir = fs::path(::testing::TempDir()) / name;
  fs::create_directories(t->dir);
  EXPECT_TRUE(w.write((t->dir / "model.safetensors").string()).ok());
  auto c = Checkpoint::open(t->dir.string());
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (c.ok()) t->ckpt = std::move(*c);
  return t;
}

void expect_rows_match_full_dequant(int64_t scale_cols) {
  auto t = fp8_table("engram_rows_fp8_" + std::to_string(scale_cols), scale_cols);
  ASSERT_TRUE(t->ckpt);
  auto rows = EngramRows::open(*t->ckpt, "layers.1.engram.embed.weight");
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  EXPECT_EQ(rows->num_rows(), kRows);
  EXPECT_EQ(rows->dim(), kDim);
  EXPECT_EQ(rows->row_bytes(), kDim + scale_cols);
  const TensorInfo& w = *t->ckpt->find("layers.1.engram.embed.weight");
  const TensorInfo& s = *t->ckpt->find("layers.1.engram.embed.scale");
  std::vector<float> full(kRows * kDim);
  ASSERT_TRUE(dequantize_fp8_block(w, s, 1, scale_cols == 1 ? int(kDim) : 32, full.data()).ok());
  const std::vector<int64_t> ids = {0, 36, 5, 5, 17, 36};  // repeats and both ends
  std::vector<float> got(ids.size() * kDim);
  rows->gather(ids.data(), static_cast<int64_t>(ids.size()), got.data());
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t d = 0; d < kDim; ++d)
      ASSERT_EQ(got[i * kDim + d], full[ids[i] * kDim + d]) << "row " << ids[i] << " ch " << d;
  // By hand: value byte * 2^(scale byte - 127), the scale of channel d's block.
  const int64_t r = 17, d = 70;
  const float want =
      fp8e4m3_to_float(w.data[r * kDim + d]) *
      std::ldexp(1.0f, int(s.data[r * scale_cols + (scale_cols == 1 ? 0 : d / 32)]) - 127);
  EXPECT_EQ(got[4 * kDim + d], want);
}

TEST(EngramRows, Fp8RowsWithScalesPer32ChannelsEqualTheFullDequantization) {
  expect_rows_match_full_dequant(3);
}

TEST(EngramRows, Fp8RowsWithOneScalePerRowEqualTheFullDequantization) {
  expect_rows_match_full_dequant(1);
}

TEST(EngramRows, FloatTablesAreReadAsStored) {
  std::vector<float> values(kRows * kDim);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * float(i % 101) - 3.0f;
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  SafetensorsWriter w;
  w.add("layers.1.engram.embed.weight", DType::kF32, {kRows, kDim}, bytes);
  const fs::path dir = fs::path(::testing::TempDir()) / "engram_rows_f32";
  fs::create_directories(dir);
  ASSERT_TRUE(w.write((dir / "model.safetensors").string()).ok());
  auto c = Checkpoint::open(dir.string());
  ASSERT_TRUE(c.ok());
  auto rows = EngramRows::open(**c, "layers.1.engram.embed.weight");
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  const int64_t id = 30;
  std::vector<float> got(kDim);
  rows->gather(&id, 1, got.data());
  EXPECT_EQ(got, std::vector<float>(values.begin() + id * kDim, values.begin() + (id + 1) * kDim));
  fs::remove_all(dir);
}

TEST(EngramRows, MissingTableOrScaleIsNamed) {
  auto t = fp8_table("engram_rows_missing", 3);
  ASSERT_TRUE(t->ckpt);
  auto none = EngramRows::open(*t->ckpt, "layers.14.engram.embed.weight");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("layers.14.engram.embed.weight"), std::string::npos);
  // A table whose scale is absent.
  SafetensorsWriter w;
  w.add("layers.1.engram.embed.weight", DType::kF8E4M3, {kRows, kDim},
        std::vector<uint8_t>(kRows * kDim, 0x38));
  const fs::path dir = fs::path(::testing::TempDir()) / "engram_rows_no_scale";
  fs::create_directories(dir);
  ASSERT_TRUE(w.write((dir / "model.safetensors").string()).ok());
  auto c = Checkpoint::open(dir.string());
  ASSERT_TRUE(c.ok());
  auto rows = EngramRows::open(**c, "layers.1.engram.embed.weight");
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("layers.1.engram.embed.scale"), std::string::npos)
      << rows.status().to_string();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::v41
