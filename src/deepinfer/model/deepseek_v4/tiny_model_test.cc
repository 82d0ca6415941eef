// make-tiny-model's deepseek_v4 presets and its streamed writer: the flash presets' configs
// against the spec, name-seeded values shared by a short and a long model, and a streamed
// checkpoint that loads and runs.
#include "deepinfer/model/deepseek_v4/tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "deepinfer/loader/checkpoint.h"
#include "deepinfer/loader/tensor_info.h"
#include "deepinfer/loader/test_util.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/cpu_model.h"
#include "deepinfer/model/deepseek_v4/tiny_model_presets.h"

namespace deepinfer::v4 {
namespace {

using nlohmann::json;

json preset_json(const std::string& name) {
  const TinyPreset* p = find_tiny_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return p ? json::parse(tiny_preset_config_json(*p)) : json();
}

// Spec §2.1, the real checkpoint's config.json: 44 compress_ratios (43 layers + MTP); layers 0
// and 1 sliding, even layers 2..42 CSA (4), odd layers 3..41 HCA (128), the MTP layer 0.
const std::vector<int> kSpecRatios = {
    0, 0,                                                                            // layers 0-1
    4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,  // 2-21
    4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,  // 22-41
    4,                                                                               // layer 42
    0};                                                                              // MTP

TEST(TinyModelPresets, V4FlashFullHasTheRealConfig) {
  const json j = preset_json("v4-flash-full");
  ASSERT_EQ(kSpecRatios.size(), 44u);
  // Spec §2.1 values.
  EXPECT_EQ(j["num_hidden_layers"], 43);
  EXPECT_EQ(j["compress_ratios"].get<std::vector<int>>(), kSpecRatios);
  EXPECT_EQ(j["num_hash_layers"], 3);
  EXPECT_EQ(j["num_nextn_predict_layers"], 1);
  EXPECT_EQ(j["vocab_size"], 129280);
  EXPECT_EQ(j["hidden_size"], 4096);
  EXPECT_EQ(j["num_attention_heads"], 64);
  EXPECT_EQ(j["num_key_value_heads"], 1);
  EXPECT_EQ(j["head_dim"], 512);
  EXPECT_EQ(j["qk_rope_head_dim"], 64);
  EXPECT_EQ(j["q_lora_rank"], 1024);
  EXPECT_EQ(j["o_groups"], 8);
  EXPECT_EQ(j["o_lora_rank"], 1024);
  EXPECT_EQ(j["sliding_window"], 128);
  EXPECT_EQ(j["index_n_heads"], 64);
  EXPECT_EQ(j["index_head_dim"], 128);
  EXPECT_EQ(j["index_topk"], 512);
  EXPECT_EQ(j["n_routed_experts"], 256);
  EXPECT_EQ(j["num_experts_per_tok"], 6);
  EXPECT_EQ(j["n_shared_experts"], 1);
  EXPECT_EQ(j["moe_intermediate_size"], 2048);
  EXPECT_EQ(j["hc_mult"], 4);
  EXPECT_EQ(j["routed_scaling_factor"], 1.5);

  // Spec §1 (the real checkpoint's inventory): 69,187 tensors, 148.66 GiB.
  TinyModelOptions o;
  o.preset = "v4-flash-full";
  auto plan = plan_tiny_model(o);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->streamed);
  EXPECT_EQ(plan->tensors, 69187u);
  EXPECT_NEAR(plan->total_bytes / double(1ull << 30), 148.66, 0.05);
  auto written = json::parse(plan->config_json);
  EXPECT_EQ(written["quantization_config"]["weight_block_size"], json({128, 128}));  // §2.1
}

// The 8-layer model is the full model cut after layer 7: every other field equal, so the two
// share embed, head and layers 0-7 tensor for tensor (issue 22's 8-layer-prefix check).
TEST(TinyModelPresets, V4Flash8LayerIsTheFullModelsFirst8Layers) {
  json eight = preset_json("v4-flash-8layer"), full = preset_json("v4-flash-full");
  const std::vector<int> ratios = eight["compress_ratios"].get<std::vector<int>>();
  std::vector<int> expected(kSpecRatios.begin(), kSpecRatios.begin() + 8);
  expected.push_back(0);  // MTP
  EXPECT_EQ(ratios, expected);
  EXPECT_EQ(eight["num_hidden_layers"], 8);
  for (json* j : {&eight, &full}) {
    j->erase("compress_ratios");
    j->erase("num_hidden_layers");
  }
  EXPECT_EQ(eight, full);
  TinyModelOptions o;
  o.preset = "v4-flash-8layer";
  auto plan = plan_tiny_model(o);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->streamed);
  EXPECT_GE(plan->max_shard_bytes, size_t{4} << 30);
}

// A small config on V4-Flash's schedule cut to `layers` layers, written to dir/name.json.
std::string small_flash_config(const std::string& dir, const std::string& name, int layers) {
  const std::string path = dir + "/" + name + ".json";
  std::ofstream(path) << tiny_preset_config_json({name, v4_flash_compress_ratios(layers), 3});
  return path;
}

std::string write_streamed(const std::string& dir, const std::string& config, uint64_t seed,
                           size_t shard_bytes) {
  TinyModelOptions o;
  o.config_path = config;
  o.seed = seed;
  o.quantized = true;
  o.streamed = true;
  o.max_shard_bytes = shard_bytes;
  size_t max_held = 0;
  o.stream_progress = [&](const StreamingWriteProgress& p) { max_held = p.max_shards_held; };
  Status st = write_tiny_model(dir, o);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_LE(max_held, 2u);
  return dir;
}

bool same_bytes(const TensorInfo& a, const TensorInfo& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes &&
         std::memcmp(a.data, b.data, a.nbytes) == 0;
}

TEST(TinyModelStreamed, ShortAndLongModelsFromOneSeedShareTheirCommonTensorsBitwise) {
  TempDir tmp;
  const std::string short_cfg = small_flash_config(tmp.path(), "short", 4);
  const std::string long_cfg = small_flash_config(tmp.path(), "long", 7);
  // Different shard sizes too: placement on disk must not matter either.
  write_streamed(tmp.path() + "/short", short_cfg, 11, 1 << 20);
  write_streamed(tmp.path() + "/long", long_cfg, 11, 3 << 20);
  write_streamed(tmp.path() + "/other_seed", short_cfg, 12, 1 << 20);
  auto s = Checkpoint::open(tmp.path() + "/short");
  auto l = Checkpoint::open(tmp.path() + "/long");
  auto o = Checkpoint::open(tmp.path() + "/other_seed");
  ASSERT_TRUE(s.ok() && l.ok() && o.ok());
  size_t shared = 0, differs_by_seed = 0;
  for (const std::string& name : (*s)->canonical_names()) {
    const TensorInfo* in_long = (*l)->find(name);
    ASSERT_NE(in_long, nullptr) << name;
    EXPECT_TRUE(same_bytes(*(*s)->find(name), *in_long)) << name;
    ++shared;
    if (!same_bytes(*(*s)->find(name), *(*o)->find(name))) ++differs_by_seed;
  }
  EXPECT_GT((*l)->canonical_names().size(), shared);  // the long model has more layers
  EXPECT_NE((*l)->find("layers.6.attn.wq_a.weight"), nullptr);
  EXPECT_EQ((*s)->find("layers.4.attn.wq_a.weight"), nullptr);
  // Every tensor is random (a constant one would share trivially), and so depends on the seed:
  // all but the E8M0 scales, which only move when a block's range crosses a power of two.
  EXPECT_GT(differs_by_seed, shared / 2);
  EXPECT_FALSE(same_bytes(*(*s)->find("embed.weight"), *(*o)->find("embed.weight")));
  EXPECT_FALSE(same_bytes(*(*s)->find("layers.0.ffn.gate.tid2eid"),
                          *(*o)->find("layers.0.ffn.gate.tid2eid")));
}

// The streamed writer lays a preset out exactly as the in-memory path does (same index, same
// names, dtypes and shapes; other values), and what it writes loads and runs.
TEST(TinyModelStreamed, WritesTheInMemoryLayoutAndLoadsAndRuns) {
  TempDir tmp;
  TinyModelOptions o;
  o.quantized = true;
  o.seed = 3;
  ASSERT_TRUE(write_tiny_model(tmp.path() + "/in_memory", o).ok());
  o.streamed = true;
  ASSERT_TRUE(write_tiny_model(tmp.path() + "/streamed", o).ok());
  const std::string index = "/model.safetensors.index.json";
  EXPECT_EQ(read_file_bytes(tmp.path() + "/streamed" + index),
            read_file_bytes(tmp.path() + "/in_memory" + index));
  EXPECT_EQ(read_file_bytes(tmp.path() + "/streamed/config.json"),
            read_file_bytes(tmp.path() + "/in_memory/config.json"));
  auto a = Checkpoint::open(tmp.path() + "/in_memory");
  auto b = Checkpoint::open(tmp.path() + "/streamed");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->canonical_names(), (*b)->canonical_names());
  for (const std::string& name : (*a)->canonical_names()) {
    EXPECT_EQ((*a)->find(name)->dtype, (*b)->find(name)->dtype) << name;
    EXPECT_EQ((*a)->find(name)->shape, (*b)->find(name)->shape) << name;
  }
  auto plan = plan_tiny_model(o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->tensors, (*b)->canonical_names().size());
  EXPECT_EQ(
      json::parse(read_file_bytes(tmp.path() + "/streamed" + index))["metadata"]["total_size"],
      plan->total_bytes);

  ModelOptions mo;
  mo.numerics = Numerics::kPlain;
  auto m = CpuModel::load(tmp.path() + "/streamed", mo);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  SequenceState state = (*m)->new_sequence();
  const std::vector<int32_t> ids = {5, 900, 17, 40000, 3, 77};
  std::vector<float> logits;
  ASSERT_TRUE((*m)->forward(state, ids.data(), ids.size(), false, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>((*m)->config().vocab_size));
  float spread = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    spread = std::max(spread, std::fabs(v - logits[0]));
  }
  EXPECT_GT(spread, 0.0f);  // not a degenerate model
}

}  // namespace
}  // namespace deepinfer::v4
