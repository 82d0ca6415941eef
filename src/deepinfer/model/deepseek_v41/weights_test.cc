// v41::weight_manifest / load_weights against every shared/golden_v41 fixture: the expected tensor
// set and values come from the fixture's model.safetensors, read here with a plain header parse
// (not through the manifest or Checkpoint). Modified copies (one tensor removed, one extra, one
// reshaped, one with a wrong dtype) must fail naming the tensor; FP8 (32x32 and 128x128 blocks),
// MXFP4 experts and an FP8 Engram table dequantize to hand-computed values.
#include "deepinfer/model/deepseek_v41/engram_rows.h"
#include "deepinfer/model/deepseek_v41/weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/name_map.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/test_util.h"

namespace deepinfer::v41 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<fs::path> fixture_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(std::string(DEEPINFER_SHARED_DIR) + "/golden_v41"))
    if (fs::exists(e.path() / "model.safetensors")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// A fixture's model.safetensors as records keyed by the on-disk name, from the raw header.
std::map<std::string, TensorRecord> read_fixture(const fs::path& dir) {
  const std::string bytes = read_file_bytes((dir / "model.safetensors").string());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  const json h = json::parse(bytes.substr(8, n));
  std::map<std::string, TensorRecord> out;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") continue;
    auto dt = parse_dtype(v["dtype"].get<std::string>());
    EXPECT_TRUE(dt.ok()) << name;
    const size_t begin = v["data_offsets"][0], end = v["data_offsets"][1];
    const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes.data()) + 8 + n;
    out[name] = TensorRecord{name, *dt, v["shape"].get<std::vector<int64_t>>(),
                             std::vector<uint8_t>(p + begin, p + end)};
  }
  return out;
}

Status write_copy(const std::string& dir, const std::map<std::string, TensorRecord>& recs) {
  SafetensorsWriter w;
  for (const auto& [name, r] : recs) w.add(r);
  return w.write(dir + "/model.safetensors");
}

Config fixture_config(const fs::path& dir) {
  auto c = load_config(dir.string());
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : Config{};
}

// The status of load_weights on a copy of `recs` written to a fresh directory.
Status load_copy(const std::map<std::string, TensorRecord>& recs, const Config& c,
                 std::string* file = nullptr) {
  TempDir dir;
  Status st = write_copy(dir.path(), recs);
  if (!st.ok()) return st;
  if (file) *file = dir.path() + "/model.safetensors";
  auto ckpt = Checkpoint::open(dir.path());
  if (!ckpt.ok()) return ckpt.status();
  return load_weights(**ckpt, c).status();
}

TEST(V41Weights, AllFixturesAreFound) { EXPECT_GE(fixture_dirs().size(), 5u); }

// Every fixture loads; the manifest (plus the Engram scales it consumes) is exactly the file's
// tensor set; every loaded value equals the file's F32 bytes.
TEST(V41Weights, EveryFixtureLoadsWithExactlyItsTensors) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    const Config c = fixture_config(dir);
    const auto recs = read_fixture(dir);
    std::set<std::string> file_names;
    for (const auto& [name, r] : recs) file_names.insert(canonical_tensor_name(name));

    std::set<std::string> manifest_names;
    for (const WeightSpec& s : weight_manifest(c)) {
      EXPECT_TRUE(manifest_names.insert(s.name).second) << "duplicate " << s.name;
      if (s.kind == WeightKind::kEngramTable)
        manifest_names.insert(s.name.substr(0, s.name.size() - 7) + ".scale");
    }
    EXPECT_EQ(manifest_names, file_names);

    auto ckpt = Checkpoint::open(dir.string());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    int64_t last_done = 0;
    auto w = load_weights(**ckpt, c, [&](const v4::LoadProgress& p) {
      EXPECT_EQ(p.tensors_done, last_done + 1);
      last_done = p.tensors_done;
    });
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(last_done, static_cast<int64_t>(weight_manifest(c).size()));
    for (const auto& [name, r] : recs) {
      const std::string cn = canonical_tensor_name(name);
      // Engram tables and their scales stay in the checkpoint (EngramRows reads them in place).
      if (cn.ends_with("engram.embed.scale") || cn.ends_with("engram.embed.weight")) {
        EXPECT_FALSE(w->has(cn));
        continue;
      }
      ASSERT_TRUE(w->has(cn)) << cn;
      ASSERT_EQ(r.dtype, DType::kF32) << name;
      const auto& v = w->f32().at(cn);
      ASSERT_EQ(v.size() * 4, r.bytes.size()) << name;
      EXPECT_EQ(std::memcmp(v.data(), r.bytes.data(), r.bytes.size()), 0) << name;
    }
  }
}

// The per-role tensor sets the README's table describes, on multi_src_alltopk and engram_ratio1.
TEST(V41Weights, ManifestFollowsTheLayerRoles) {
  auto has = [](const std::vector<WeightSpec>& m, const std::string& n) {
    return std::any_of(m.begin(), m.end(), [&](const WeightSpec& s) { return s.name == n; });
  };
  const fs::path root = fs::path(DEEPINFER_SHARED_DIR) / "golden_v41";
  const auto m = weight_manifest(fixture_config(root / "v41_multi_src_alltopk"));
  EXPECT_TRUE(has(m, "layers.1.attn.compressor.wgate.weight"));   // ratio-2 source
  EXPECT_FALSE(has(m, "layers.3.attn.compressor.wgate.weight"));  // ratio-1 source
  EXPECT_TRUE(has(m, "layers.3.attn.compressor.wkv.weight"));
  EXPECT_TRUE(has(m, "layers.3.attn.indexer.wk.weight"));
  EXPECT_TRUE(has(m, "layers.5.attn.indexer.wq_b.weight"));  // Reindex: own query side...
  EXPECT_TRUE(has(m, "layers.5.attn.indexer.weights_proj.weight"));
  EXPECT_FALSE(has(m, "layers.5.attn.indexer.wk.weight"));  // ...the group's keys
  EXPECT_FALSE(has(m, "layers.5.attn.compressor.wkv.weight"));
  for (int l : {0, 2, 4, 6}) {
    const std::string p = "layers." + std::to_string(l) + ".attn.";
    EXPECT_FALSE(has(m, p + "indexer.wq_b.weight")) << l;
    EXPECT_FALSE(has(m, p + "compressor.wkv.weight")) << l;
  }
  EXPECT_TRUE(has(m, "head.weight"));
  EXPECT_FALSE(has(m, "hc_head_fn"));
  const auto e = weight_manifest(fixture_config(root / "v41_engram_ratio1"));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const WeightSpec& s : e) shapes[s.name] = s.shape;
  EXPECT_EQ(shapes["layers.1.engram.embed.weight"], (std::vector<int64_t>{168, 32}));
  EXPECT_EQ(shapes["layers.3.engram.embed.weight"], (std::vector<int64_t>{240, 32}));
  EXPECT_EQ(shapes["layers.1.engram.wkv.weight"], (std::vector<int64_t>{320, 128}));
  EXPECT_TRUE(has(e, "layers.3.engram.q_weight"));
  EXPECT_FALSE(has(e, "layers.2.engram.q_weight"));
}

// Removing any one tensor of the Engram fixture (every one, in turn) fails naming it.
TEST(V41Weights, EachRemovedTensorIsNamed) {
  const fs::path dir = fs::path(DEEPINFER_SHARED_DIR) / "golden_v41" / "v41_engram_ratio1";
  const Config c = fixture_config(dir);
  const auto recs = read_fixture(dir);
  for (const auto& [name, r] : recs) {
    auto copy = recs;
    copy.erase(name);
    Status st = load_copy(copy, c);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
    EXPECT_NE(st.message().find("'" + canonical_tensor_name(name) + "'"), std::string::npos)
        << name << ": " << st.to_string();
  }
}

TEST(V41Weights, ModifiedFixtureCopiesFailNamingTheTensor) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    const Config c = fixture_config(dir);
    const auto recs = read_fixture(dir);
    std::string file;
    {  // removed: an indexer tensor of an index source
      auto copy = recs;
      const std::string victim = "model.layers." + std::to_string(c.index_source_layer_ids.back()) +
                                 ".attn.indexer.weights_proj.weight";
      ASSERT_EQ(copy.erase(victim), 1u);
      Status st = load_copy(copy, c);
      EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
      EXPECT_NE(st.message().find(canonical_tensor_name(victim)), std::string::npos)
          << st.to_string();
    }
    {  // extra: a compressor on a layer that is not a KV source, and a stray tensor
      for (const std::string extra :
           {"model.layers.0.attn.compressor.wkv.weight", "model.layers.1.attn.bogus"}) {
        auto copy = recs;
        copy[extra] = TensorRecord{extra, DType::kF32, {2}, std::vector<uint8_t>(8, 0)};
        Status st = load_copy(copy, c, &file);
        EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
        EXPECT_NE(st.message().find("unexpected tensor '" + extra + "'"), std::string::npos)
            << st.to_string();
        EXPECT_NE(st.message().find(file), std::string::npos) << st.to_string();
      }
    }
    {  // reshaped: same bytes, transposed shape
      auto copy = recs;
      const std::string victim = "model.layers.1.attn.wq_a.weight";
      auto& shape = copy.at(victim).shape;
      std::swap(shape[0], shape[1]);
      Status st = load_copy(copy, c, &file);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_NE(st.message().find("'" + victim + "' in " + file), std::string::npos)
          << st.to_string();
      EXPECT_NE(st.message().find("expected [32, 64]"), std::string::npos) << st.to_string();
    }
    {  // wrong dtype: a norm gain stored as I32
      auto copy = recs;
      const std::string victim = "model.norm.weight";
      copy.at(victim).dtype = DType::kI32;
      Status st = load_copy(copy, c, &file);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_NE(st.message().find("'" + victim + "' in " + file), std::string::npos)
          << st.to_string();
      EXPECT_NE(st.message().find("I32"), std::string::npos) << st.to_string();
    }
  }
}

TEST(V41Weights, TiedEmbeddingsNeedNoHead) {
  const fs::path dir = fs::path(DEEPINFER_SHARED_DIR) / "golden_v41" / "v41_single_src_alltopk";
  Config c = fixture_config(dir);
  auto recs = read_fixture(dir);
  ASSERT_EQ(recs.erase("lm_head.weight"), 1u);
  EXPECT_FALSE(load_copy(recs, c).ok());
  c.tie_word_embeddings = true;
  TempDir tmp;
  ASSERT_TRUE(write_copy(tmp.path(), recs).ok());
  auto ckpt = Checkpoint::open(tmp.path());
  ASSERT_TRUE(ckpt.ok());
  auto w = load_weights(**ckpt, c);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->f32().at("head.weight"), w->f32().at("embed.weight"));
}

// Quantized storage, written into a copy of the Engram fixture.
std::vector<uint8_t> u8(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }
uint8_t fp8_byte(int64_t r, int64_t k) {  // 0x38 = 1, 0x40 = 2, 0xC4 = -3, 0x30 = 0.5
  constexpr uint8_t b[4] = {0x38, 0x40, 0xC4, 0x30};
  return b[(r * 3 + k) % 4];
}
float fp8_val(int64_t r, int64_t k) {
  constexpr float v[4] = {1, 2, -3, 0.5f};
  return v[(r * 3 + k) % 4];
}

TEST(V41Weights, QuantizedStorageDequantizes) {
  const fs::path dir = fs::path(DEEPINFER_SHARED_DIR) / "golden_v41" / "v41_engram_ratio1";
  const Config c = fixture_config(dir);  // blocks 32x32 (the default)
  auto recs = read_fixture(dir);
  auto fp8 = [&](const std::string& name, int64_t rows, int64_t cols) {
    std::vector<uint8_t> b(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) b[r * cols + k] = fp8_byte(r, k);
    recs[name] = TensorRecord{name, DType::kF8E4M3, {rows, cols}, b};
  };
  auto scale = [&](const std::string& name, std::vector<int64_t> shape, DType dt) {
    const size_t n = shape[0] * shape[1];
    std::vector<uint8_t> b(n * dtype_size(dt));
    for (size_t i = 0; i < n; ++i) {
      const int e = static_cast<int>(i % 3) - 1;  // 2^-1, 2^0, 2^1
      if (dt == DType::kF8E8M0) {
        b[i] = static_cast<uint8_t>(127 + e);
      } else {
        const float f = std::ldexp(1.0f, e);
        std::memcpy(&b[4 * i], &f, 4);
      }
    }
    recs[name] = TensorRecord{name, dt, std::move(shape), b};
  };
  // Dense wq_a [32, 64] with 32x32 blocks: scale [1, 2].
  fp8("model.layers.0.attn.wq_a.weight", 32, 64);
  scale("model.layers.0.attn.wq_a.scale", {1, 2}, DType::kF8E8M0);
  // wo_a [32, 128] with 128x128 blocks: scale [1, 1].
  fp8("model.layers.0.attn.wo_a.weight", 32, 128);
  scale("model.layers.0.attn.wo_a.scale", {1, 1}, DType::kF8E8M0);
  // Expert w1 [16, 64] as MXFP4: packed [16, 32], scale [16, 2]; nibble pattern per byte.
  {
    std::vector<uint8_t> b(16 * 32);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 % 256);
    recs["model.layers.2.ffn.experts.1.w1.weight"] =
        TensorRecord{"model.layers.2.ffn.experts.1.w1.weight", DType::kU8, {16, 32}, b};
    scale("model.layers.2.ffn.experts.1.w1.scale", {16, 2}, DType::kF8E8M0);
  }
  // Engram table [168, 32] as FP8 with F32 row scales [168, 1] (replacing the fixture's ones).
  fp8("model.layers.1.engram.embed.weight", 168, 32);
  scale("model.layers.1.engram.embed.scale", {168, 1}, DType::kF32);

  TempDir tmp;
  ASSERT_TRUE(write_copy(tmp.path(), recs).ok());
  auto ckpt = Checkpoint::open(tmp.path());
  ASSERT_TRUE(ckpt.ok());
  auto w = load_weights(**ckpt, c);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  auto sc = [](int64_t i) { return std::ldexp(1.0f, static_cast<int>(i % 3) - 1); };
  {
    const auto& v = w->f32().at("layers.0.attn.wq_a.weight");
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t k = 0; k < 64; ++k) ASSERT_EQ(v[r * 64 + k], fp8_val(r, k) * sc(k / 32));
  }
  {
    const auto& v = w->f32().at("layers.0.attn.wo_a.weight");
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(v[r * 128 + k], fp8_val(r, k) * sc(0));
  }
  {
    const auto& v = w->f32().at("layers.2.ffn.experts.1.w1.weight");
    constexpr float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t k = 0; k < 64; ++k) {
        const uint8_t byte = static_cast<uint8_t>((r * 32 + k / 2) * 37 % 256);
        const uint8_t nib = k % 2 ? byte >> 4 : byte & 15;
        const float want = (nib & 8 ? -1.0f : 1.0f) * mag[nib & 7] * sc(r * 2 + k / 32);
        ASSERT_EQ(v[r * 64 + k], want) << r << "," << k;
      }
  }
  {
    // The Engram table is not in the fp32 weights: EngramRows reads it in place.
    EXPECT_FALSE(w->has("layers.1.engram.embed.weight"));
    auto rows = EngramRows::open(**ckpt, "layers.1.engram.embed.weight");
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    std::vector<int64_t> ids(168);
    for (int64_t r = 0; r < 168; ++r) ids[r] = r;
    std::vector<float> v(168 * 32);
    rows->gather(ids.data(), 168, v.data());
    for (int64_t r = 0; r < 168; ++r)
      for (int64_t k = 0; k < 32; ++k) ASSERT_EQ(v[r * 32 + k], fp8_val(r, k) * sc(r));
  }

  // A quantized weight without its scale, a scale of the wrong shape, FP4 outside the experts.
  {
    auto copy = recs;
    copy.erase("model.layers.0.attn.wq_a.scale");
    Status st = load_copy(copy, c);
    EXPECT_NE(st.message().find("'model.layers.0.attn.wq_a.weight'"), std::string::npos)
        << st.to_string();
    EXPECT_NE(st.message().find(".scale"), std::string::npos) << st.to_string();
  }
  {
    auto copy = recs;
    copy.at("model.layers.0.attn.wq_a.scale").shape = {2, 1};
    Status st = load_copy(copy, c);
    EXPECT_NE(st.message().find("model.layers.0.attn.wq_a.scale"), std::string::npos)
        << st.to_string();
  }
  {
    auto copy = recs;
    copy.at("model.layers.1.engram.embed.scale").shape = {1, 168};
    Status st = load_copy(copy, c);
    EXPECT_NE(st.message().find("model.layers.1.engram.embed.scale"), std::string::npos)
        << st.to_string();
  }
  {
    auto copy = recs;
    copy["model.layers.0.attn.wq_b.weight"] =
        TensorRecord{"model.layers.0.attn.wq_b.weight", DType::kU8, {256, 16}, u8(256 * 16, 0)};
    copy["model.layers.0.attn.wq_b.scale"] =
        TensorRecord{"model.layers.0.attn.wq_b.scale", DType::kF8E8M0, {256, 1}, u8(256, 127)};
    Status st = load_copy(copy, c);
    EXPECT_NE(st.message().find("'model.layers.0.attn.wq_b.weight'"), std::string::npos)
        << st.to_string();
    EXPECT_NE(st.message().find("FP4"), std::string::npos) << st.to_string();
  }
}

}  // namespace
}  // namespace deepinfer::v41
