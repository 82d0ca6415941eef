// load_weights against tiny checkpoints written from weight_manifest(): the error for each kind of
// mismatch, FP8 block-scaled and MXFP4 dequantization against hand-computed values, and the
// transformers save_pretrained spelling.
#include "deepinfer/model/deepseek_v4/weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/test_util.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"

namespace deepinfer::v4 {
namespace {

using nlohmann::json;

// Two layers (sliding, CSA) + MTP; FP8 blocks of 24 x 40 so that 32 x 64 weights have partial
// blocks in both directions (scale [2, 2]).
Config tiny_config(bool mtp = true) {
  json j = {{"model_type", "deepseek_v4"},
            {"vocab_size", 16},
            {"hidden_size", 64},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 2},
            {"head_dim", 32},
            {"qk_rope_head_dim", 16},
            {"q_lora_rank", 32},
            {"o_groups", 1},
            {"o_lora_rank", 16},
            {"sliding_window", 8},
            {"index_n_heads", 1},
            {"index_head_dim", 32},
            {"index_topk", 2},
            {"n_routed_experts", 2},
            {"num_experts_per_tok", 1},
            {"n_shared_experts", 1},
            {"moe_intermediate_size", 64},
            {"swiglu_limit", 10.0},
            {"hc_mult", 2},
            {"hc_sinkhorn_iters", 3},
            {"num_hash_layers", 1},
            {"num_nextn_predict_layers", mtp ? 1 : 0},
            {"compress_ratios", mtp ? std::vector<int>{0, 4, 0} : std::vector<int>{0, 4}},
            {"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {24, 40}}}}};
  auto c = parse_config_json(j.dump(), "tiny");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : Config{};
}

// OCP E4M3FN bytes and their values, decoded by hand: 0x38 = 2^0, 0x40 = 2^1,
// 0xC4 = -(1 + 4/8) * 2^1, 0x30 = 2^-1, 0x3C = 1.5 * 2^0, 0x01 = subnormal 1/8 * 2^-6.
constexpr uint8_t kFp8Bytes[6] = {0x38, 0x40, 0xC4, 0x30, 0x3C, 0x01};
constexpr float kFp8Values[6] = {1.0f, 2.0f, -3.0f, 0.5f, 1.5f, 0.001953125f};
// E2M1 magnitudes for codes 0..7 (spec §3.4); bit 3 is the sign.
constexpr float kFp4Magnitude[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

int fp8_index(int64_t r, int64_t c) { return static_cast<int>((r * 5 + c) % 6); }
int fp8_scale_exp(int64_t br, int64_t bc) { return static_cast<int>((br * 3 + bc) % 5) - 2; }
uint8_t fp4_nibble(int64_t r, int64_t k) { return static_cast<uint8_t>((r * 3 + k * 7) % 16); }
int fp4_scale_exp(int64_t r, int64_t kb) { return static_cast<int>((r + kb) % 3) - 1; }

float expected_fp8(int64_t r, int64_t c, int br, int bc) {
  return kFp8Values[fp8_index(r, c)] * std::ldexp(1.0f, fp8_scale_exp(r / br, c / bc));
}
float expected_fp4(int64_t r, int64_t k) {
  const uint8_t n = fp4_nibble(r, k);
  return (n & 8 ? -1.0f : 1.0f) * kFp4Magnitude[n & 7] * std::ldexp(1.0f, fp4_scale_exp(r, k / 32));
}
// Deterministic distinct floats for the F32 tensors.
float float_value(size_t name_hash, int64_t i) {
  return static_cast<float>(static_cast<int64_t>((name_hash + 31 * i) % 1000) - 500) / 256.0f;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct Options {
  bool fp8_dense = true;    // kDense as F8_E4M3 + E8M0 scale (else F32)
  bool fp4_experts = true;  // kExpert as packed MXFP4 + E8M0 scale (else F32)
};

// The full manifest as records, keyed by name so tests can edit one before writing.
std::map<std::string, TensorRecord> make_records(const Config& c, Options o = {}) {
  std::map<std::string, TensorRecord> out;
  const int br = c.weight_block_rows, bc = c.weight_block_cols;
  for (const WeightSpec& s : weight_manifest(c)) {
    const int64_t n = numel(s.shape);
    if (s.kind == WeightKind::kIndex) {
      std::vector<int64_t> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = (i * 7 + 3) % c.n_routed_experts;
      std::vector<uint8_t> b(n * 8);
      std::memcpy(b.data(), v.data(), b.size());
      out[s.name] = {s.name, DType::kI64, s.shape, std::move(b)};
    } else if (s.kind == WeightKind::kDense && o.fp8_dense) {
      const int64_t rows = s.shape[0], cols = s.shape[1];
      std::vector<uint8_t> w(n);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k) w[r * cols + k] = kFp8Bytes[fp8_index(r, k)];
      const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
      std::vector<uint8_t> scale(sr * sc);
      for (int64_t i = 0; i < sr; ++i)
        for (int64_t j = 0; j < sc; ++j) scale[i * sc + j] = 127 + fp8_scale_exp(i, j);
      out[s.name] = {s.name, DType::kF8E4M3, s.shape, std::move(w)};
      const std::string sn = s.name.substr(0, s.name.size() - 7) + ".scale";
      out[sn] = {sn, DType::kF8E8M0, {sr, sc}, std::move(scale)};
    } else if (s.kind == WeightKind::kExpert && o.fp4_experts) {
      const int64_t rows = s.shape[0], cols = s.shape[1];
      std::vector<uint8_t> w(rows * cols / 2), scale(rows * cols / 32);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < cols / 2; ++b)
          w[r * cols / 2 + b] = fp4_nibble(r, 2 * b) | (fp4_nibble(r, 2 * b + 1) << 4);
        for (int64_t kb = 0; kb < cols / 32; ++kb)
          scale[r * cols / 32 + kb] = 127 + fp4_scale_exp(r, kb);
      }
      // Both byte dtypes occur in the wild; w2 as I8 here, w1/w3 as U8.
      const bool is_w2 = s.name.find(".w2.") != std::string::npos;
      out[s.name] = {s.name, is_w2 ? DType::kI8 : DType::kU8, {rows, cols / 2}, std::move(w)};
      const std::string sn = s.name.substr(0, s.name.size() - 7) + ".scale";
      out[sn] = {sn, DType::kF8E8M0, {rows, cols / 32}, std::move(scale)};
    } else {
      const size_t h = std::hash<std::string>{}(s.name);
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = float_value(h, i);
      out[s.name] = {s.name, DType::kF32, s.shape, f32_bytes(v)};
    }
  }
  return out;
}

Status write_checkpoint(const std::string& dir, const std::map<std::string, TensorRecord>& recs) {
  SafetensorsWriter w;
  for (const auto& [name, r] : recs) w.add(r);
  return w.write(dir + "/model.safetensors");
}

StatusOr<Weights> load_dir(const std::string& dir, const Config& c) {
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt.ok()) return ckpt.status();
  return load_weights(**ckpt, c);
}

// Writes `recs` and loads them; the error message (empty when it loaded).
std::string load_error(const std::map<std::string, TensorRecord>& recs, const Config& c) {
  TempDir dir;
  Status st = write_checkpoint(dir.path(), recs);
  EXPECT_TRUE(st.ok()) << st.to_string();
  auto w = load_dir(dir.path(), c);
  return w.ok() ? std::string() : w.status().message();
}

TEST(WeightManifest, HoldsTheSpecTensors) {
  const Config c = tiny_config();
  std::map<std::string, WeightSpec> m;
  for (const WeightSpec& s : weight_manifest(c)) EXPECT_TRUE(m.emplace(s.name, s).second) << s.name;
  auto shape = [&](const std::string& n) {
    EXPECT_TRUE(m.count(n)) << n;
    return m.count(n) ? m.at(n).shape : std::vector<int64_t>{};
  };
  // Shapes from spec §3.2 with the tiny dims (hc_mult 2: mix_hc (2+2)*2 = 8, hc_dim 128).
  EXPECT_EQ(shape("embed.weight"), (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(shape("hc_head_fn"), (std::vector<int64_t>{2, 128}));
  EXPECT_EQ(shape("layers.0.hc_attn_fn"), (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(shape("layers.0.attn.wq_b.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(shape("layers.0.attn.wo_a.weight"), (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(shape("layers.0.ffn.gate.tid2eid"), (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(shape("layers.1.ffn.gate.bias"), (std::vector<int64_t>{2}));
  EXPECT_EQ(shape("layers.1.attn.compressor.wkv.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape("layers.1.attn.compressor.ape"), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(shape("layers.1.attn.indexer.wq_b.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shape("layers.1.ffn.experts.1.w2.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape("mtp.0.e_proj.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape("mtp.0.hc_head_fn"), (std::vector<int64_t>{2, 128}));
  EXPECT_FALSE(m.count("layers.0.ffn.gate.bias"));  // hash layer
  EXPECT_FALSE(m.count("layers.1.ffn.gate.tid2eid"));
  EXPECT_FALSE(m.count("layers.0.attn.compressor.ape"));  // sliding layer
  EXPECT_FALSE(m.count("mtp.0.attn.compressor.ape"));
  EXPECT_FALSE(m.count("mtp.0.ffn.gate.tid2eid"));
  EXPECT_EQ(m.at("layers.0.attn.wkv.weight").kind, WeightKind::kDense);
  EXPECT_EQ(m.at("layers.0.ffn.experts.0.w1.weight").kind, WeightKind::kExpert);
  EXPECT_EQ(m.at("layers.0.attn.kv_norm.weight").kind, WeightKind::kFloat);
}

TEST(LoadWeights, Fp8DenseAndMxfp4ExpertsDequantize) {
  const Config c = tiny_config();
  ASSERT_EQ(c.weight_block_rows, 24);
  ASSERT_EQ(c.weight_block_cols, 40);
  TempDir dir;
  ASSERT_TRUE(write_checkpoint(dir.path(), make_records(c)).ok());
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  int64_t calls = 0;
  LoadProgress last;
  auto w = load_weights(**ckpt, c, [&](const LoadProgress& p) {
    ++calls;
    last = p;
  });
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const int64_t manifest_size = static_cast<int64_t>(weight_manifest(c).size());
  EXPECT_EQ(calls, manifest_size);
  EXPECT_EQ(last.tensors_done, manifest_size);
  EXPECT_EQ(last.tensors_total, manifest_size);
  EXPECT_EQ(last.bytes_done, last.bytes_total);

  // A few elements worked out by hand. wq_a [32, 64], blocks 24 x 40, scale [2, 2]:
  // (0,0): byte 0x38 = 1.0, block (0,0) scale 2^-2 -> 0.25.
  // (25,41): (25*5+41)%6 = 4 -> 0x3C = 1.5, block (1,1) scale 2^((3+1)%5-2) = 4 -> 6.0.
  // (23,39): (115+39)%6 = 4 -> 1.5, block (0,0) -> 0.375.  (24,0): 120%6 = 0 -> 1.0, block (1,0)
  // scale 2^(3-2) = 2 -> 2.0.  (0,40): 40%6 = 4 -> 1.5, block (0,1) 2^-1 -> 0.75.
  const float* wq_a = w->f("layers.0.attn.wq_a.weight");
  EXPECT_EQ(wq_a[0 * 64 + 0], 0.25f);
  EXPECT_EQ(wq_a[25 * 64 + 41], 6.0f);
  EXPECT_EQ(wq_a[23 * 64 + 39], 0.375f);
  EXPECT_EQ(wq_a[24 * 64 + 0], 2.0f);
  EXPECT_EQ(wq_a[0 * 64 + 40], 0.75f);
  // (2,1): 11%6 = 5 -> subnormal 2^-9, block (0,0) 2^-2 -> 2^-11.
  EXPECT_EQ(wq_a[2 * 64 + 1], std::ldexp(1.0f, -11));
  // MXFP4 expert w1 [64, 64] (packed [64, 32]):
  // (0,1): high nibble of byte 0, code 7 = 6.0, scale (0,0) = 2^-1 -> 3.0.
  // (1,40): (3+280)%16 = 11 = -1.5, scale (1, 40/32=1) = 2^((1+1)%3-1) = 2 -> -3.0.
  // (2,0): 6 -> code 6 = 4.0, scale (2,0) 2^(2-1) = 2 -> 8.0.
  const float* w1 = w->f("layers.1.ffn.experts.0.w1.weight");
  EXPECT_EQ(w1[0 * 64 + 1], 3.0f);
  EXPECT_EQ(w1[1 * 64 + 40], -3.0f);
  EXPECT_EQ(w1[2 * 64 + 0], 8.0f);

  // Every element of every quantized tensor against the hand-derived formulas, F32 copied.
  for (const WeightSpec& s : weight_manifest(c)) {
    const int64_t n = numel(s.shape);
    if (s.kind == WeightKind::kIndex) {
      const int32_t* v = w->i(s.name);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(v[i], (i * 7 + 3) % c.n_routed_experts) << s.name << " element " << i;
      continue;
    }
    ASSERT_TRUE(w->has(s.name)) << s.name;
    const float* v = w->f(s.name);
    const int64_t cols = s.shape.size() == 2 ? s.shape[1] : n;
    const size_t h = std::hash<std::string>{}(s.name);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = i / cols, k = i % cols;
      const float want = s.kind == WeightKind::kDense    ? expected_fp8(r, k, 24, 40)
                         : s.kind == WeightKind::kExpert ? expected_fp4(r, k)
                                                         : float_value(h, i);
      ASSERT_EQ(v[i], want) << s.name << " [" << r << "," << k << "]";
    }
  }
}

TEST(LoadWeights, AllFloatAndBf16CheckpointLoads) {
  const Config c = tiny_config();
  auto recs = make_records(c, {false, false});
  // One norm as BF16: 0x3F80 = 1.0, 0xC040 = -3.0 (bf16 = the top half of the fp32 bits).
  TensorRecord& norm = recs["layers.1.attn.kv_norm.weight"];
  norm.dtype = DType::kBF16;
  norm.bytes.assign(32 * 2, 0);
  for (int i = 0; i < 32; ++i) {
    const uint16_t bits = i % 2 ? 0xC040 : 0x3F80;
    std::memcpy(&norm.bytes[2 * i], &bits, 2);
  }
  TempDir dir;
  ASSERT_TRUE(write_checkpoint(dir.path(), recs).ok());
  auto w = load_dir(dir.path(), c);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const float* v = w->f("layers.1.attn.kv_norm.weight");
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -3.0f);
  EXPECT_EQ(v[31], -3.0f);
  const float* e = w->f("layers.0.ffn.experts.1.w3.weight");
  const size_t h = std::hash<std::string>{}("layers.0.ffn.experts.1.w3.weight");
  EXPECT_EQ(e[77], float_value(h, 77));
}

TEST(LoadWeights, MissingTensorIsNamed) {
  const Config c = tiny_config();
  for (const char* name : {"layers.1.attn.indexer.compressor.ape", "mtp.0.hnorm.weight",
                           "layers.0.ffn.experts.1.w2.weight", "hc_head_scale"}) {
    auto recs = make_records(c);
    ASSERT_EQ(recs.erase(name), 1u);
    if (std::string(name).ends_with(".w2.weight")) recs.erase("layers.0.ffn.experts.1.w2.scale");
    const std::string msg = load_error(recs, c);
    ASSERT_FALSE(msg.empty()) << name << " missing but loaded";
    EXPECT_NE(msg.find(std::string("'") + name + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  }
}

// transformers' save_pretrained keeps num_nextn_predict_layers in config.json but drops the
// mtp.* tensors: such a checkpoint loads with MTP off (and a forward runs); one that holds some
// MTP tensors keeps its MTP layer, so a missing one is still named (MissingTensorIsNamed).
TEST(LoadWeights, CheckpointWithoutMtpTensorsLoadsWithMtpOff) {
  const Config c = tiny_config(/*mtp=*/true);
  auto recs = make_records(c);
  std::erase_if(recs, [](const auto& kv) { return kv.first.starts_with("mtp."); });
  TempDir dir;
  ASSERT_TRUE(write_checkpoint(dir.path(), recs).ok());
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  Config loaded = c;
  EXPECT_TRUE(drop_absent_mtp(**ckpt, &loaded));
  EXPECT_EQ(loaded.num_mtp_layers, 0);
  EXPECT_EQ(loaded.compress_ratios, (std::vector<int>{0, 4}));
  EXPECT_TRUE(load_weights(**ckpt, loaded).ok());
  EXPECT_FALSE(load_weights(**ckpt, c).ok());  // the config as given still counts them

  auto model = CpuModel::load(dir.path(), c, ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->config().num_mtp_layers, 0);
  SequenceState st = (*model)->new_sequence();
  std::vector<float> logits;
  const int32_t ids[] = {3, 5, 7};
  EXPECT_TRUE((*model)->forward(st, ids, 3, false, &logits).ok());
  EXPECT_FALSE((*model)->mtp_forward(st, 9, &logits).ok());

  TempDir full_dir;
  ASSERT_TRUE(write_checkpoint(full_dir.path(), make_records(c)).ok());
  auto full = Checkpoint::open(full_dir.path());
  ASSERT_TRUE(full.ok());
  Config kept = c;
  EXPECT_FALSE(drop_absent_mtp(**full, &kept));
  EXPECT_EQ(kept.num_mtp_layers, 1);
}

TEST(LoadWeights, UnexpectedTensorIsNamedWithItsFile) {
  const Config c = tiny_config();
  auto recs = make_records(c);
  std::vector<float> junk(4, 1.0f);
  recs["layers.0.attn.bogus"] = {"layers.0.attn.bogus", DType::kF32, {4}, f32_bytes(junk)};
  // A second checkpoint of the same records, sharded, so the file in the message is telling.
  TempDir dir;
  std::vector<TensorRecord> all;
  for (auto& [n, r] : recs) all.push_back(r);
  ASSERT_TRUE(write_sharded_safetensors(dir.path(), all, 8 * 1024).ok());
  std::ifstream idx(dir.path() + "/model.safetensors.index.json");
  json index = json::parse(idx);
  const std::string shard = index["weight_map"]["layers.0.attn.bogus"];
  ASSERT_NE(shard, index["weight_map"]["embed.weight"].get<std::string>())
      << "want the extra tensor in a shard of its own kind for this test";
  auto w = load_dir(dir.path(), c);
  ASSERT_FALSE(w.ok());
  const std::string& msg = w.status().message();
  EXPECT_NE(msg.find("'layers.0.attn.bogus'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(shard), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected"), std::string::npos) << msg;

  // A stray .scale next to a float tensor is also unexpected.
  recs.erase("layers.0.attn.bogus");
  std::vector<uint8_t> one = {127};
  recs["layers.0.attn_norm.scale"] = {"layers.0.attn_norm.scale", DType::kF8E8M0, {1, 1}, one};
  const std::string msg2 = load_error(recs, c);
  EXPECT_NE(msg2.find("'layers.0.attn_norm.scale'"), std::string::npos) << msg2;
  EXPECT_NE(msg2.find("model.safetensors"), std::string::npos) << msg2;
}

TEST(LoadWeights, WrongShapeIsNamed) {
  const Config c = tiny_config();
  {  // F32
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.0.attn.attn_sink"];
    r.shape = {3};
    r.bytes.resize(12);
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.0.attn.attn_sink'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2]"), std::string::npos) << msg;
  }
  {  // transposed F32 matrix: same element count
    auto recs = make_records(c, {false, false});
    TensorRecord& r = recs["layers.1.attn.compressor.ape"];
    r.shape = {64, 4};
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.1.attn.compressor.ape'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[64,4]"), std::string::npos) << msg;
  }
  {  // FP8 dense
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.0.attn.wkv.weight"];
    r.shape = {32, 32};
    r.bytes.resize(32 * 32);
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.0.attn.wkv.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[32,64]"), std::string::npos) << msg;
  }
  {  // packed FP4 given with its logical (unpacked) shape
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.1.ffn.experts.1.w3.weight"];
    r.shape = {64, 64};
    r.bytes.resize(64 * 64);
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.1.ffn.experts.1.w3.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[64,32]"), std::string::npos) << msg;
  }
  {  // FP8 scale of the wrong shape
    auto recs = make_records(c);
    TensorRecord& s = recs["layers.0.attn.wq_a.scale"];
    s.shape = {1, 1};
    s.bytes.resize(1);
    EXPECT_NE(load_error(recs, c), "") << "a [1,1] scale for a [2,2]-block weight loaded";
  }
  {  // tid2eid
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.0.ffn.gate.tid2eid"];
    r.shape = {16, 2};
    r.bytes.resize(16 * 2 * 8);
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.0.ffn.gate.tid2eid'"), std::string::npos) << msg;
  }
}

TEST(LoadWeights, WrongDtypeIsNamed) {
  const Config c = tiny_config();
  {  // float tensor as I32
    auto recs = make_records(c);
    recs["layers.0.attn_norm.weight"].dtype = DType::kI32;
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.0.attn_norm.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("I32"), std::string::npos) << msg;
  }
  {  // tid2eid as F32
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.0.ffn.gate.tid2eid"];
    r.dtype = DType::kF32;
    r.bytes.resize(16 * 4);
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.0.ffn.gate.tid2eid'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("F32"), std::string::npos) << msg;
  }
  {  // an always-high-precision tensor (spec §3.5) stored as FP8 with a scale
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.1.attn.compressor.wkv.weight"];
    r.dtype = DType::kF8E4M3;
    r.bytes.assign(64 * 64, 0x38);
    std::vector<uint8_t> sc(4, 127);
    recs["layers.1.attn.compressor.wkv.scale"] = {
        "layers.1.attn.compressor.wkv.scale", DType::kF8E8M0, {2, 2}, sc};
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.1.attn.compressor.wkv.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("F8_E4M3"), std::string::npos) << msg;
  }
  {  // packed FP4 is for routed experts only
    auto recs = make_records(c);
    TensorRecord& r = recs["layers.0.attn.wq_b.weight"];  // [64, 32]
    r.dtype = DType::kU8;
    r.shape = {64, 16};
    r.bytes.assign(64 * 16, 0x22);
    std::vector<uint8_t> sc(64, 127);
    recs["layers.0.attn.wq_b.scale"] = {"layers.0.attn.wq_b.scale", DType::kF8E8M0, {64, 1}, sc};
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.0.attn.wq_b.weight'"), std::string::npos) << msg;
  }
  {  // expert as I16
    auto recs = make_records(c, {true, false});
    TensorRecord& r = recs["layers.1.ffn.experts.0.w1.weight"];
    r.dtype = DType::kI16;
    r.bytes.resize(64 * 64 * 2);
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'layers.1.ffn.experts.0.w1.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("I16"), std::string::npos) << msg;
  }
}

TEST(LoadWeights, QuantizedWeightWithoutScale) {
  const Config c = tiny_config();
  for (const char* base : {"layers.0.attn.wo_b", "layers.1.ffn.experts.1.w1", "mtp.0.h_proj"}) {
    auto recs = make_records(c);
    ASSERT_EQ(recs.erase(std::string(base) + ".scale"), 1u) << base;
    const std::string msg = load_error(recs, c);
    EXPECT_NE(msg.find("'" + std::string(base) + ".weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(".scale"), std::string::npos) << msg;
  }
}

TEST(LoadWeights, Tid2eidOutOfRange) {
  const Config c = tiny_config();
  auto recs = make_records(c);
  TensorRecord& r = recs["layers.0.ffn.gate.tid2eid"];
  const int64_t bad = c.n_routed_experts;  // one past the last expert
  std::memcpy(&r.bytes[5 * 8], &bad, 8);
  const std::string msg = load_error(recs, c);
  EXPECT_NE(msg.find("'layers.0.ffn.gate.tid2eid'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("element 5"), std::string::npos) << msg;
}

// The transformers save_pretrained spelling, as in tests/golden/hf_saved_names.txt: "model."
// prefix, embed_tokens, hc_head.hc_*, head.weight bare, and the KV norm as attn.norm.weight.
std::string hf_name(const std::string& canonical) {
  if (canonical == "head.weight") return canonical;
  if (canonical == "embed.weight") return "model.embed_tokens.weight";
  if (canonical.starts_with("hc_head_")) return "model.hc_head.hc_" + canonical.substr(8);
  std::string n = "model." + canonical;
  const size_t at = n.find(".attn.kv_norm.");
  if (at != std::string::npos) n.replace(at, 14, ".attn.norm.");
  return n;
}

TEST(LoadWeights, HfSavedSpellingLoads) {
  const Config c = tiny_config(/*mtp=*/false);
  auto recs = make_records(c);
  SafetensorsWriter w;
  int renamed_kv_norm = 0;
  for (auto& [name, r] : recs) {
    TensorRecord hf = r;
    hf.name = hf_name(name);
    renamed_kv_norm += hf.name.find(".attn.norm.weight") != std::string::npos;
    w.add(std::move(hf));
  }
  ASSERT_EQ(renamed_kv_norm, 2);
  TempDir dir;
  ASSERT_TRUE(w.write(dir.path() + "/model.safetensors").ok());
  auto weights = load_dir(dir.path(), c);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  const std::string kv = "layers.1.attn.kv_norm.weight";
  const float* v = weights->f(kv);
  const size_t h = std::hash<std::string>{}(kv);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(v[i], float_value(h, i)) << i;
  EXPECT_EQ(weights->f("layers.1.attn.wq_a.weight")[25 * 64 + 41], 6.0f);
  EXPECT_EQ(weights->f("hc_head_base")[1],
            float_value(std::hash<std::string>{}("hc_head_base"), 1));
}

// The names and shapes transformers 5.17 actually saved for tests/golden/hf_saved_config.json
// load as that config's checkpoint.
TEST(LoadWeights, TransformersSavedNamesMatchTheManifest) {
  const std::string g = std::string(DEEPINFER_SOURCE_DIR) + "/tests/golden/";
  std::ifstream cf(g + "hf_saved_config.json");
  std::stringstream ss;
  ss << cf.rdbuf();
  auto c = parse_config_json(ss.str(), "hf_saved_config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::ifstream names(g + "hf_saved_names.txt");
  ASSERT_TRUE(names.good());
  SafetensorsWriter w;
  std::string line;
  int count = 0;
  while (std::getline(names, line)) {
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    const std::string name = line.substr(0, sp);
    json dims = json::parse(line.substr(sp + 1));
    std::vector<int64_t> shape = dims.get<std::vector<int64_t>>();
    const bool index = name.ends_with("tid2eid");
    std::vector<uint8_t> bytes(numel(shape) * (index ? 8 : 4), 0);
    if (name == "model.layers.2.attn.norm.weight") {
      std::vector<float> v(numel(shape));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + static_cast<float>(i);
      bytes = f32_bytes(v);
    }
    w.add(name, index ? DType::kI64 : DType::kF32, shape, std::move(bytes));
    ++count;
  }
  EXPECT_EQ(count, static_cast<int>(weight_manifest(*c).size()));
  TempDir dir;
  ASSERT_TRUE(w.write(dir.path() + "/model.safetensors").ok());
  auto weights = load_dir(dir.path(), *c);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  EXPECT_EQ(weights->f("layers.2.attn.kv_norm.weight")[3], 3.5f);
}

}  // namespace
}  // namespace deepinfer::v4
