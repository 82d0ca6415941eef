// parse_config_json / load_config: the golden fixtures' configs, the transformers save_pretrained
// spelling, a full V4-Flash config (spec §2.1), and errors that name the field.
#include "deepinfer/model/deepseek_v4/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deepinfer::v4 {
namespace {

using nlohmann::json;

std::string golden(const std::string& rel) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/golden/" + rel;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Values read by hand from tests/golden/<name>/config.json; everything not listed here is the
// same in all five (vocab 512, hidden 64, 4 heads of 32 with 16 RoPE dims, q_lora 32, o_groups 2,
// o_lora 16, window 16, 8 experts top-2 + 1 shared of 32, hc_mult 4, ...).
struct GoldenExpect {
  const char* name;
  int num_layers;
  std::vector<int> ratios;
  int num_hash_layers;
  int index_n_heads;
  int index_topk;
  double swiglu_limit;
};

const GoldenExpect kGolden[] = {
    {"mixed_selective", 4, {0, 4, 16, 4}, 2, 2, 4, 10.0},
    {"mixed_fullk", 4, {0, 4, 16, 4}, 2, 2, 64, 10.0},
    {"sliding_hash", 2, {0, 0}, 2, 2, 4, 10.0},
    {"hca_clamp", 3, {16, 4, 16}, 0, 2, 64, 0.5},
    {"selective_noties", 4, {0, 4, 16, 4}, 1, 8, 3, 10.0},
};

void expect_common_tiny_fields(const Config& c) {
  EXPECT_EQ(c.model_type, "deepseek_v4");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.nope_dim(), 16);
  EXPECT_EQ(c.q_lora_rank, 32);
  EXPECT_EQ(c.o_groups, 2);
  EXPECT_EQ(c.o_lora_rank, 16);
  EXPECT_EQ(c.sliding_window, 16);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.compress_rope_theta, 160000.0);
  EXPECT_TRUE(c.yarn.enabled);
  EXPECT_DOUBLE_EQ(c.yarn.factor, 16.0);
  EXPECT_EQ(c.yarn.original_max_position_embeddings, 65536);
  EXPECT_DOUBLE_EQ(c.yarn.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.yarn.beta_slow, 1.0);
  EXPECT_EQ(c.index_head_dim, 32);
  EXPECT_EQ(c.n_routed_experts, 8);
  EXPECT_EQ(c.experts_per_token, 2);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.mix_hc(), 24);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c.hc_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.num_mtp_layers, 0);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_FALSE(c.fp8_weights);
}

void expect_golden(const Config& c, const GoldenExpect& e) {
  expect_common_tiny_fields(c);
  EXPECT_EQ(c.num_layers, e.num_layers);
  EXPECT_EQ(c.compress_ratios, e.ratios);
  EXPECT_EQ(c.num_hash_layers, e.num_hash_layers);
  for (int l = 0; l < e.num_layers; ++l) EXPECT_EQ(c.is_hash_layer(l), l < e.num_hash_layers);
  EXPECT_EQ(c.index_n_heads, e.index_n_heads);
  EXPECT_EQ(c.index_topk, e.index_topk);
  EXPECT_DOUBLE_EQ(c.swiglu_limit, e.swiglu_limit);
}

class GoldenConfig : public ::testing::TestWithParam<GoldenExpect> {};

TEST_P(GoldenConfig, LoadConfigReadsEveryField) {
  auto c = load_config(golden(GetParam().name));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_golden(*c, GetParam());
}

// The fixtures carry both spellings; with the Hub-only keys removed the transformers spelling
// (layer_types + compress_rates, mlp_layer_types, rope_parameters) must give the same Config.
TEST_P(GoldenConfig, TransformersSpellingAloneGivesTheSameFields) {
  json j = json::parse(read_text(golden(std::string(GetParam().name) + "/config.json")));
  for (const char* k :
       {"compress_ratios", "num_hash_layers", "rope_scaling", "compress_rope_theta"})
    ASSERT_EQ(j.erase(k), 1u) << k;
  auto c = parse_config_json(j.dump(), "stripped");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_golden(*c, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenConfig, ::testing::ValuesIn(kGolden),
                         [](const auto& info) { return std::string(info.param.name); });

// tests/golden/hf_saved_config.json: what transformers 5.17 save_pretrained writes (no
// compress_ratios, no num_hash_layers, no rope_scaling).
TEST(HfSavedConfig, ParsesTransformersSpelling) {
  const std::string path = golden("hf_saved_config.json");
  auto c = parse_config_json(read_text(path), path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_common_tiny_fields(*c);
  EXPECT_EQ(c->num_layers, 4);
  // layer_types sliding, CSA, HCA, CSA with compress_rates {CSA: 4, HCA: 16}.
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 4, 16, 4}));
  // mlp_layer_types hash_moe, hash_moe, moe, moe.
  EXPECT_EQ(c->num_hash_layers, 2);
  EXPECT_EQ(c->index_n_heads, 2);
  EXPECT_EQ(c->index_topk, 64);
  EXPECT_DOUBLE_EQ(c->swiglu_limit, 10.0);
}

TEST(HfSavedConfig, RopeDimFromPartialRotaryFactor) {
  json j = json::parse(read_text(golden("hf_saved_config.json")));
  j.erase("qk_rope_head_dim");
  ASSERT_DOUBLE_EQ(j["partial_rotary_factor"].get<double>(), 0.5);
  auto c = parse_config_json(j.dump(), "hf");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rope_dim, 16);  // 0.5 * head_dim 32
}

TEST(HfSavedConfig, CompressRatesOverrideTheLayerTypeDefaults) {
  json j = json::parse(read_text(golden("hf_saved_config.json")));
  j["compress_rates"]["heavily_compressed_attention"] = 32;
  auto c = parse_config_json(j.dump(), "hf");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 4, 32, 4}));
  // Without compress_rates the layer types mean the real model's 4 and 128.
  j.erase("compress_rates");
  c = parse_config_json(j.dump(), "hf");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 4, 128, 4}));
}

// Spec §2.1, the real V4-Flash config.json.
json flash_config() {
  std::vector<int> ratios = {0, 0};
  for (int l = 2; l < 43; ++l) ratios.push_back(l % 2 == 0 ? 4 : 128);
  ratios.push_back(0);  // the MTP layer
  return json{
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"model_type", "deepseek_v4"},
      {"torch_dtype", "bfloat16"},
      {"vocab_size", 129280},
      {"hidden_size", 4096},
      {"num_hidden_layers", 43},
      {"num_attention_heads", 64},
      {"num_key_value_heads", 1},
      {"head_dim", 512},
      {"qk_rope_head_dim", 64},
      {"q_lora_rank", 1024},
      {"o_groups", 8},
      {"o_lora_rank", 1024},
      {"sliding_window", 128},
      {"compress_rope_theta", 160000},
      {"rope_theta", 10000},
      {"rope_scaling",
       {{"type", "yarn"},
        {"factor", 16},
        {"original_max_position_embeddings", 65536},
        {"beta_fast", 32},
        {"beta_slow", 1}}},
      {"max_position_embeddings", 1048576},
      {"compress_ratios", ratios},
      {"index_n_heads", 64},
      {"index_head_dim", 128},
      {"index_topk", 512},
      {"n_routed_experts", 256},
      {"num_experts_per_tok", 6},
      {"n_shared_experts", 1},
      {"moe_intermediate_size", 2048},
      {"scoring_func", "sqrtsoftplus"},
      {"topk_method", "noaux_tc"},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"num_hash_layers", 3},
      {"swiglu_limit", 10.0},
      {"hidden_act", "silu"},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"rms_norm_eps", 1e-6},
      {"num_nextn_predict_layers", 1},
      {"tie_word_embeddings", false},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"attention_bias", false},
      {"quantization_config",
       {{"quant_method", "fp8"},
        {"fmt", "e4m3"},
        {"scale_fmt", "ue8m0"},
        {"weight_block_size", {128, 128}},
        {"activation_scheme", "dynamic"}}},
      {"transformers_version", "4.57.1"},
  };
}

TEST(FlashConfig, ParsesSpecConfig) {
  auto c = parse_config_json(flash_config().dump(), "flash/config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->vocab_size, 129280);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->num_layers, 43);
  EXPECT_EQ(c->num_heads, 64);
  EXPECT_EQ(c->head_dim, 512);
  EXPECT_EQ(c->rope_dim, 64);
  EXPECT_EQ(c->nope_dim(), 448);  // spec §2.3
  EXPECT_EQ(c->q_lora_rank, 1024);
  EXPECT_EQ(c->o_groups, 8);
  EXPECT_EQ(c->o_lora_rank, 1024);
  EXPECT_EQ(c->sliding_window, 128);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->compress_rope_theta, 160000.0);
  EXPECT_TRUE(c->yarn.enabled);
  EXPECT_DOUBLE_EQ(c->yarn.factor, 16.0);
  EXPECT_EQ(c->yarn.original_max_position_embeddings, 65536);
  EXPECT_DOUBLE_EQ(c->yarn.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c->yarn.beta_slow, 1.0);
  ASSERT_EQ(c->compress_ratios.size(), 44u);
  int csa = 0, hca = 0;
  for (int l = 0; l < 43; ++l) {
    csa += c->compress_ratio(l) == 4;
    hca += c->compress_ratio(l) == 128;
  }
  EXPECT_EQ(csa, 21);
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(c->compress_ratio(0), 0);
  EXPECT_EQ(c->compress_ratio(1), 0);
  EXPECT_EQ(c->compress_ratio(2), 4);
  EXPECT_EQ(c->compress_ratio(3), 128);
  EXPECT_EQ(c->compress_ratio(41), 128);
  EXPECT_EQ(c->compress_ratio(42), 4);
  EXPECT_EQ(c->compress_ratio(43), 0);
  EXPECT_EQ(c->index_n_heads, 64);
  EXPECT_EQ(c->index_head_dim, 128);
  EXPECT_EQ(c->index_topk, 512);
  EXPECT_EQ(c->n_routed_experts, 256);
  EXPECT_EQ(c->experts_per_token, 6);
  EXPECT_EQ(c->n_shared_experts, 1);
  EXPECT_EQ(c->moe_intermediate_size, 2048);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.5);
  EXPECT_EQ(c->num_hash_layers, 3);
  EXPECT_TRUE(c->is_hash_layer(2));
  EXPECT_FALSE(c->is_hash_layer(3));
  EXPECT_DOUBLE_EQ(c->swiglu_limit, 10.0);
  EXPECT_EQ(c->hc_mult, 4);
  EXPECT_EQ(c->mix_hc(), 24);
  EXPECT_EQ(c->hc_sinkhorn_iters, 20);
  EXPECT_EQ(c->num_mtp_layers, 1);
  EXPECT_EQ(c->bos_token_id, 0);
  EXPECT_EQ(c->eos_token_id, 1);
  EXPECT_TRUE(c->fp8_weights);
  EXPECT_EQ(c->weight_block_rows, 128);
  EXPECT_EQ(c->weight_block_cols, 128);
}

TEST(FlashConfig, WeightBlockSizeIsRead) {
  json j = flash_config();
  j["quantization_config"]["weight_block_size"] = {64, 32};
  auto c = parse_config_json(j.dump(), "flash");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->weight_block_rows, 64);
  EXPECT_EQ(c->weight_block_cols, 32);
}

// --- errors: each names the origin and the field ---------------------------------------------

void expect_error(const json& j, const std::vector<std::string>& needles) {
  auto c = parse_config_json(j.dump(), "my/config.json");
  ASSERT_FALSE(c.ok()) << "accepted: " << j.dump().substr(0, 200);
  const std::string& msg = c.status().message();
  EXPECT_NE(msg.find("my/config.json"), std::string::npos) << msg;
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
}

TEST(ConfigErrors, UnknownModelType) {
  json j = flash_config();
  j["model_type"] = "deepseek_v3";
  expect_error(j, {"model_type", "deepseek_v3"});
  j.erase("model_type");
  expect_error(j, {"model_type"});
}

TEST(ConfigErrors, MissingField) {
  for (const char* field :
       {"hidden_size", "vocab_size", "num_hidden_layers", "head_dim", "sliding_window",
        "index_topk", "num_experts_per_tok", "hc_mult", "swiglu_limit", "qk_rope_head_dim"}) {
    SCOPED_TRACE(field);
    json j = flash_config();
    ASSERT_EQ(j.erase(field), 1u);
    expect_error(j, {field});
  }
  json j = flash_config();
  j.erase("compress_ratios");
  expect_error(j, {"compress_ratios"});
  j = flash_config();
  j["hidden_size"] = nullptr;
  expect_error(j, {"hidden_size"});
}

TEST(ConfigErrors, WrongType) {
  json j = flash_config();
  j["num_attention_heads"] = "64";
  expect_error(j, {"num_attention_heads"});
  j = flash_config();
  j["sliding_window"] = 128.5;
  expect_error(j, {"sliding_window"});
  j = flash_config();
  j["rms_norm_eps"] = "1e-6";
  expect_error(j, {"rms_norm_eps"});
  j = flash_config();
  j["model_type"] = 4;
  expect_error(j, {"model_type"});
  j = flash_config();
  j["compress_ratios"] = "0,0,4";
  expect_error(j, {"compress_ratios"});
  j = flash_config();
  j["compress_ratios"][5] = "4";
  expect_error(j, {"compress_ratios"});
}

TEST(ConfigErrors, CompressRatiosLengthMismatch) {
  json j = flash_config();
  j["compress_ratios"].erase(j["compress_ratios"].size() - 1);  // 43: forgot the MTP entry
  expect_error(j, {"compress_ratios", "43", "44"});
  j = flash_config();
  j["compress_ratios"].push_back(0);
  expect_error(j, {"compress_ratios", "45"});
}

TEST(ConfigErrors, BadCompressRatioValues) {
  json j = flash_config();
  j["compress_ratios"][3] = 100;
  expect_error(j, {"compress_ratios[3]"});
  j = flash_config();
  j["compress_ratios"][43] = 4;  // the MTP layer is sliding only
  expect_error(j, {"compress_ratios[43]"});
}

TEST(ConfigErrors, UnsupportedScoringFunc) {
  json j = flash_config();
  j["scoring_func"] = "softmax";
  expect_error(j, {"scoring_func", "softmax"});
  j["scoring_func"] = 1;
  expect_error(j, {"scoring_func"});
}

TEST(ConfigErrors, MalformedQuantizationConfig) {
  json j = flash_config();
  j["quantization_config"].erase("quant_method");
  expect_error(j, {"quantization_config", "quant_method"});
  j = flash_config();
  j["quantization_config"]["quant_method"] = "awq";
  expect_error(j, {"quant_method", "awq"});
  j = flash_config();
  j["quantization_config"]["quant_method"] = 8;
  expect_error(j, {"quant_method"});
  j = flash_config();
  j["quantization_config"]["weight_block_size"] = {128};
  expect_error(j, {"weight_block_size"});
  j = flash_config();
  j["quantization_config"]["weight_block_size"] = {128, "128"};
  expect_error(j, {"weight_block_size"});
  j = flash_config();
  j["quantization_config"]["weight_block_size"] = "128x128";
  expect_error(j, {"weight_block_size"});
  j = flash_config();
  j["quantization_config"] = "fp8";
  expect_error(j, {"quantization_config"});
}

TEST(ConfigErrors, StructuralChecks) {
  json j = flash_config();
  j["num_attention_heads"] = 60;  // not a multiple of o_groups 8
  expect_error(j, {"o_groups"});
  j = flash_config();
  j["num_experts_per_tok"] = 300;
  expect_error(j, {"num_experts_per_tok"});
  j = flash_config();
  j["hidden_size"] = 0;
  expect_error(j, {"hidden_size"});
  j = flash_config();
  j["qk_rope_head_dim"] = 63;
  expect_error(j, {"qk_rope_head_dim"});
  j = flash_config();
  j["rope_scaling"]["type"] = "ntk";
  expect_error(j, {"ntk"});
  j = flash_config();
  j["rope_scaling"].erase("factor");
  expect_error(j, {"factor"});
}

TEST(ConfigErrors, NotJsonOrMissingFile) {
  auto c = parse_config_json("{\"model_type\": ", "broken.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("broken.json"), std::string::npos);
  c = parse_config_json("[1, 2]", "array.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("array.json"), std::string::npos);
  c = load_config("/nonexistent/model_dir");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/model_dir/config.json"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace deepinfer::v4
