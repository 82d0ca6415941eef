// v41::parse_config_json / load_config: every shared/golden_v41 fixture parses and its derived
// layer roles equal the roles recorded in the fixture's expected.json; the flat and Hub
// spellings give the same Config; the released V4.1-Flash config (spec §11.1); errors that name
// the file and the field.
#include "deepinfer/model/deepseek_v41/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deepinfer::v41 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<fs::path> fixture_dirs() {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(std::string(DEEPINFER_SHARED_DIR) + "/golden_v41"))
    if (fs::exists(e.path() / "config.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

json fixture_json(const fs::path& dir, const char* file) {
  return json::parse(read_text((dir / file).string()));
}

// The roles expected.json → layers records for one layer, as written by the fixture generator
// (comma-separated phrases such as "KV consumer of layer 2" or "reuses the top-k of layer 4").
struct RecordedRoles {
  int compress_ratio = 0;
  bool kv_source = false;
  int kv_consumer_of = -1;
  bool index_source = false;
  bool reindex = false;
  int reuses_topk_of = -1;
  bool candidate_source = false;
  bool uses_candidates = false;
  bool engram = false;
};

int trailing_int(const std::string& s, const std::string& prefix) {
  return std::stoi(s.substr(prefix.size()));
}

RecordedRoles parse_recorded(const std::string& text) {
  RecordedRoles r;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    auto starts = [&](const std::string& p) { return item.rfind(p, 0) == 0; };
    if (item == "sliding-window") {
    } else if (starts("compressed ratio ")) {
      r.compress_ratio = trailing_int(item, "compressed ratio ");
    } else if (item == "KV source") {
      r.kv_source = true;
    } else if (starts("KV consumer of layer ")) {
      r.kv_consumer_of = trailing_int(item, "KV consumer of layer ");
    } else if (item == "index source") {
      r.index_source = true;
    } else if (starts("index source (Reindex")) {
      r.index_source = r.reindex = true;
    } else if (starts("reuses the top-k of layer ")) {
      r.reuses_topk_of = trailing_int(item, "reuses the top-k of layer ");
    } else if (starts("candidate source")) {
      r.candidate_source = true;
    } else if (item == "top-k constrained by the candidate blocks") {
      r.uses_candidates = true;
    } else if (item == "Engram") {
      r.engram = true;
    } else {
      ADD_FAILURE() << "unknown role phrase in expected.json: '" << item << "' in '" << text << "'";
    }
  }
  return r;
}

TEST(GoldenV41, AllFixturesAreFound) { EXPECT_GE(fixture_dirs().size(), 5u); }

TEST(GoldenV41, EveryFixtureParsesAndMatchesItsConfigJson) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    auto c = load_config(dir.string());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const json t = fixture_json(dir, "config.json")["text_config"];
    EXPECT_EQ(c->model_type, "deepseek_v41_text");
    EXPECT_EQ(c->vocab_size, t["vocab_size"].get<int64_t>());
    EXPECT_EQ(c->num_layers, t["num_hidden_layers"].get<int>());
    EXPECT_EQ(c->compress_ratios, t["compress_ratios"].get<std::vector<int>>());
    EXPECT_EQ(c->kv_source_layer_ids, t["kv_source_layer_ids"].get<std::vector<int>>());
    EXPECT_EQ(c->index_source_layer_ids, t["index_source_layer_ids"].get<std::vector<int>>());
    EXPECT_EQ(c->candidate_source_layer_id, t["candidate_source_layer_id"].get<int>());
    EXPECT_EQ(c->candidate_topk_blocks, t["candidate_topk_blocks"].get<int>());
    EXPECT_EQ(c->candidate_block_size, t["candidate_block_size"].get<int>());
    EXPECT_EQ(c->index_topk, t["index_topk"].get<int>());
    EXPECT_DOUBLE_EQ(c->swiglu_limit, t["swiglu_limit"].get<double>());
    EXPECT_EQ(c->engram.layer_ids, t["engram_layer_ids"].get<std::vector<int>>());
    EXPECT_EQ(c->num_nextn_layers, t["num_nextn_predict_layers"].get<int>());
    EXPECT_EQ(static_cast<int>(c->compress_ratios.size()), c->num_layers + c->num_nextn_layers);
    EXPECT_EQ(c->dspark.target_layer_ids, t["dspark_target_layer_ids"].get<std::vector<int>>());
    EXPECT_EQ(c->dspark.block_size, 5);
    EXPECT_EQ(c->dspark.noise_token_id, 128799);

    // What golden_v41/README.md says every fixture shares.
    EXPECT_EQ(c->hidden_size, 64);
    EXPECT_EQ(c->num_heads, 4);
    EXPECT_EQ(c->num_kv_heads, 1);
    EXPECT_EQ(c->head_dim, 64);
    EXPECT_EQ(c->rope_dim, 16);
    EXPECT_EQ(c->nope_dim(), 48);
    EXPECT_EQ(c->q_lora_rank, 32);
    EXPECT_EQ(c->o_groups, 2);
    EXPECT_EQ(c->o_lora_rank, 16);
    EXPECT_EQ(c->sliding_window, 16);
    EXPECT_EQ(c->hc_mult, 4);
    EXPECT_EQ(c->mix_hc(), 24);
    EXPECT_EQ(c->hc_sinkhorn_iters, 20);
    EXPECT_DOUBLE_EQ(c->hc_eps, 1e-6);
    EXPECT_EQ(c->index_n_heads, 8);
    EXPECT_EQ(c->index_head_dim, 32);
    EXPECT_EQ(c->n_routed_experts, 4);
    EXPECT_EQ(c->experts_per_token, 2);
    EXPECT_EQ(c->n_shared_experts, 1);
    EXPECT_EQ(c->moe_intermediate_size, 16);
    EXPECT_TRUE(c->norm_topk_prob);
    EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.5);
    EXPECT_DOUBLE_EQ(c->gate_temp, 1.0);
    EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-20);
    EXPECT_EQ(c->bos_token_id, 0);
    EXPECT_EQ(c->eos_token_id, 1);
    EXPECT_EQ(c->pad_token_id, -1);  // null in the fixtures
    EXPECT_EQ(c->image_token_id, 129264);
    EXPECT_FALSE(c->tie_word_embeddings);
    EXPECT_FALSE(c->fp8_weights);  // all-F32 fixtures: no quantization_config
    // rope_parameters: main is plain, compress is YaRN with attention_factor 1.
    EXPECT_DOUBLE_EQ(c->rope_main.theta, 10000.0);
    EXPECT_FALSE(c->rope_main.yarn);
    EXPECT_DOUBLE_EQ(c->rope_compress.theta, 160000.0);
    EXPECT_TRUE(c->rope_compress.yarn);
    EXPECT_DOUBLE_EQ(c->rope_compress.factor, 16.0);
    EXPECT_EQ(c->rope_compress.original_max_position_embeddings, 128);
    EXPECT_DOUBLE_EQ(c->rope_compress.beta_fast, 32.0);
    EXPECT_DOUBLE_EQ(c->rope_compress.beta_slow, 1.0);
    EXPECT_DOUBLE_EQ(c->rope_compress.attention_factor, 1.0);
  }
}

TEST(GoldenV41, LayerRolesEqualThoseRecordedInExpectedJson) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    auto c = load_config(dir.string());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const json layers = fixture_json(dir, "expected.json")["layers"];
    ASSERT_EQ(static_cast<int>(layers.size()), c->num_layers);
    ASSERT_EQ(static_cast<int>(c->layers.size()), c->num_layers);
    for (int l = 0; l < c->num_layers; ++l) {
      const std::string text = layers[std::to_string(l)].get<std::string>();
      SCOPED_TRACE("layer " + std::to_string(l) + ": " + text);
      const RecordedRoles want = parse_recorded(text);
      const LayerRoles& got = c->layers[l];
      EXPECT_EQ(got.compress_ratio, want.compress_ratio);
      EXPECT_EQ(c->is_kv_source(l), want.kv_source);
      if (want.compress_ratio == 0) {
        EXPECT_EQ(got.kv, KvRole::kSlidingOnly);
        EXPECT_EQ(c->kv_source_of(l), -1);
        EXPECT_EQ(got.index, IndexRole::kNone);
        EXPECT_EQ(c->index_source_of(l), -1);
      } else {
        EXPECT_EQ(c->kv_source_of(l), want.kv_source ? l : want.kv_consumer_of);
        EXPECT_EQ(got.kv, want.kv_source ? KvRole::kSource : KvRole::kConsumer);
        EXPECT_EQ(c->index_source_of(l), want.index_source ? l : want.reuses_topk_of);
      }
      EXPECT_EQ(c->is_index_source(l), want.index_source);
      EXPECT_EQ(got.index == IndexRole::kReindex, want.reindex);
      EXPECT_EQ(got.index == IndexRole::kReuse, want.reuses_topk_of >= 0);
      EXPECT_EQ(c->is_candidate_source(l), want.candidate_source);
      EXPECT_EQ(c->uses_candidates(l), want.uses_candidates);
      EXPECT_EQ(c->is_engram_layer(l), want.engram);
    }
  }
}

TEST(GoldenV41, LayerTypesAndEngramTablesEqualTheFixtures) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    auto c = load_config(dir.string());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const json t = fixture_json(dir, "config.json")["text_config"];
    for (int l = 0; l < c->num_layers; ++l)
      EXPECT_EQ(layer_type_name(c->layer_type(l)), t["layer_types"][l].get<std::string>()) << l;
    const json expected = fixture_json(dir, "expected.json");
    if (!expected.contains("engram") || expected["engram"].is_null()) {
      EXPECT_TRUE(c->engram.layer_ids.empty());
      continue;
    }
    const json& e = expected["engram"];
    EXPECT_EQ(c->engram.num_embeddings, e["num_embeddings"].get<std::vector<int64_t>>());
    EXPECT_EQ(c->engram.compressed_vocab_size, e["compressed_vocab_size"].get<int64_t>());
    EXPECT_EQ(c->engram.layer_ids.size(), e["primes"].size());
    EXPECT_EQ(c->engram.max_ngram_size - 1, static_cast<int>(e["primes"][0].size()));
    EXPECT_EQ(c->engram.n_heads, static_cast<int>(e["primes"][0][0].size()));
    EXPECT_EQ(c->engram.vocab_size, t["engram_vocab_size"].get<int64_t>());
    EXPECT_EQ(c->engram.head_dim, t["engram_head_dim"].get<int>());
    EXPECT_EQ(c->engram.pad_id, t["engram_pad_id"].get<int64_t>());
  }
}

// The same fields at the top (a flat text config) give the same Config.
TEST(GoldenV41, FlatTextConfigGivesTheSameConfig) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    auto composite = load_config(dir.string());
    ASSERT_TRUE(composite.ok()) << composite.status().to_string();
    json top = fixture_json(dir, "config.json");
    json flat = top["text_config"];
    flat["image_token_id"] = top["image_token_id"];
    auto c = parse_config_json(flat.dump(), "flat.json");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(*c == *composite);
    // A flat config that says deepseek_v41 is read the same way.
    flat["model_type"] = "deepseek_v41";
    c = parse_config_json(flat.dump(), "flat.json");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->model_type, "deepseek_v41");
    c->model_type = composite->model_type;
    EXPECT_TRUE(*c == *composite);
  }
}

// The fixtures carry both RoPE spellings; without rope_parameters (and without the derived
// layer_types) the Hub spelling must give the same Config.
TEST(GoldenV41, HubRopeSpellingGivesTheSameConfig) {
  for (const fs::path& dir : fixture_dirs()) {
    SCOPED_TRACE(dir.string());
    auto composite = load_config(dir.string());
    ASSERT_TRUE(composite.ok()) << composite.status().to_string();
    json top = fixture_json(dir, "config.json");
    ASSERT_EQ(top["text_config"].erase("rope_parameters"), 1u);
    ASSERT_EQ(top["text_config"].erase("layer_types"), 1u);
    auto c = parse_config_json(top.dump(), "hub.json");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->rope_main == composite->rope_main);
    EXPECT_TRUE(c->rope_compress == composite->rope_compress);
    EXPECT_TRUE(*c == *composite);
  }
}

// Spec §11.1: the released V4.1-Flash config (composite; Hub RoPE spelling).
json released_config() {
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 18; ++i) ratios.push_back(2);
  for (int i = 0; i < 20; ++i) ratios.push_back(1);
  for (int i = 0; i < 3; ++i) ratios.push_back(0);
  json text = {
      {"model_type", "deepseek_v41_text"},
      {"vocab_size", 129280},
      {"hidden_size", 5120},
      {"num_hidden_layers", 40},
      {"num_attention_heads", 64},
      {"num_key_value_heads", 1},
      {"head_dim", 512},
      {"qk_rope_head_dim", 64},
      {"q_lora_rank", 1280},
      {"o_lora_rank", 1024},
      {"o_groups", 8},
      {"sliding_window", 128},
      {"rms_norm_eps", 1e-20},
      {"rope_theta", 10000},
      {"compress_rope_theta", 160000},
      {"rope_scaling",
       {{"type", "yarn"},
        {"factor", 16},
        {"beta_fast", 32},
        {"beta_slow", 1},
        {"original_max_position_embeddings", 65536}}},
      {"compress_ratios", ratios},
      {"kv_source_layer_ids", {2, 8, 14, 20}},
      {"index_source_layer_ids", {2, 8, 14, 20, 24, 28, 32, 36}},
      {"candidate_source_layer_id", 20},
      {"candidate_topk_blocks", 2048},
      {"candidate_block_size", 8},
      {"index_n_heads", 32},
      {"index_head_dim", 128},
      {"index_topk", 512},
      {"n_routed_experts", 384},
      {"num_experts_per_tok", 6},
      {"n_shared_experts", 1},
      {"moe_intermediate_size", 2304},
      {"scoring_func", "sqrtsoftplus"},
      {"topk_method", "noaux_tc"},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"swiglu_limit", 10.0},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"engram_layer_ids", {1, 14}},
      {"engram_num_embeddings", {384006168, 384016682}},
      {"engram_max_ngram_size", 4},
      {"engram_vocab_size", 16000000},
      {"engram_n_heads", 8},
      {"engram_head_dim", 256},
      {"engram_pad_token_id", 2},
      {"engram_compressed_vocab_size", 99092},
      {"num_nextn_predict_layers", 3},
      {"dspark_block_size", 5},
      {"dspark_noise_token_id", 128799},
      {"dspark_target_layer_ids", {37, 38, 39}},
      {"dspark_markov_rank", 256},
      {"dspark_n_routed_experts", 128},
      {"dspark_num_experts_per_tok", 3},
  };
  return json{
      {"model_type", "deepseek_v41"},
      {"architectures", {"DeepseekV41ForCausalLM"}},
      {"dtype", "bfloat16"},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"pad_token_id", 2},
      {"image_token_id", 129264},
      {"quantization_config",
       {{"quant_method", "fp8"},
        {"activation_scheme", "dynamic"},
        {"weight_block_size", {32, 32}},
        {"scale_fmt", "ue8m0"},
        {"expert_dtype", "fp4"}}},
      {"text_config", text},
      {"vision_config", {{"num_hidden_layers", 32}, {"hidden_size", 1024}}},
  };
}

TEST(ReleasedConfig, ParsesSpecConfig) {
  auto c = parse_config_json(released_config().dump(), "v41/config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->vocab_size, 129280);
  EXPECT_EQ(c->hidden_size, 5120);
  EXPECT_EQ(c->num_layers, 40);
  EXPECT_EQ(c->nope_dim(), 448);
  EXPECT_EQ(c->q_lora_rank, 1280);
  EXPECT_EQ(c->num_nextn_layers, 3);
  EXPECT_EQ(c->compress_ratios.size(), 43u);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-20);
  EXPECT_DOUBLE_EQ(c->rope_main.theta, 10000.0);
  EXPECT_FALSE(c->rope_main.yarn);
  EXPECT_DOUBLE_EQ(c->rope_compress.theta, 160000.0);
  EXPECT_TRUE(c->rope_compress.yarn);
  EXPECT_DOUBLE_EQ(c->rope_compress.factor, 16.0);
  EXPECT_EQ(c->rope_compress.original_max_position_embeddings, 65536);
  EXPECT_EQ(c->n_routed_experts, 384);
  EXPECT_EQ(c->experts_per_token, 6);
  EXPECT_EQ(c->moe_intermediate_size, 2304);
  EXPECT_DOUBLE_EQ(c->gate_temp, 1.0);  // HF default when absent
  EXPECT_EQ(c->bos_token_id, 0);
  EXPECT_EQ(c->eos_token_id, 1);
  EXPECT_EQ(c->pad_token_id, 2);
  EXPECT_EQ(c->image_token_id, 129264);
  EXPECT_TRUE(c->fp8_weights);
  EXPECT_EQ(c->weight_block_rows, 32);
  EXPECT_EQ(c->weight_block_cols, 32);
  EXPECT_TRUE(c->fp4_experts);
  EXPECT_EQ(c->engram.pad_id, 2);  // the spec's engram_pad_token_id spelling
  EXPECT_EQ(c->engram.num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(c->engram.max_ngram_size, 4);
  EXPECT_EQ(c->engram.compressed_vocab_size, 99092);
  EXPECT_EQ(c->dspark.target_layer_ids, (std::vector<int>{37, 38, 39}));
  EXPECT_EQ(c->dspark.experts_per_token, 3);

  // Spec §11.2.2–4: layers 0–1 sliding; groups at 2, 8, 14 (ratio 2) and 20 (ratio 1, also
  // the candidate source); Reindex at 24, 28, 32, 36 inside the candidate blocks.
  for (int l : {0, 1}) EXPECT_EQ(c->layers[l].kv, KvRole::kSlidingOnly) << l;
  for (int l = 2; l < 40; ++l) {
    SCOPED_TRACE(l);
    const int group = l < 8 ? 2 : l < 14 ? 8 : l < 20 ? 14 : 20;
    EXPECT_EQ(c->compress_ratio(l), l < 20 ? 2 : 1);
    EXPECT_EQ(c->kv_source_of(l), group);
    EXPECT_EQ(c->is_kv_source(l), l == group);
    const int index = l < 24 ? group : l - l % 4;
    EXPECT_EQ(c->index_source_of(l), index);
    EXPECT_EQ(c->layers[l].index, l == group   ? IndexRole::kSource
                                  : l == index ? IndexRole::kReindex
                                               : IndexRole::kReuse);
    EXPECT_EQ(c->is_candidate_source(l), l == 20);
    EXPECT_EQ(c->uses_candidates(l), l >= 24 && l % 4 == 0);
    EXPECT_EQ(c->is_engram_layer(l), l == 14);
  }
  EXPECT_TRUE(c->is_engram_layer(1));
  EXPECT_EQ(c->layers[14].engram_slot, 1);
}

TEST(ReleasedConfig, QuantizationInTextConfigWins) {
  json j = released_config();
  j["text_config"]["quantization_config"] = {{"quant_method", "fp8"},
                                             {"weight_block_size", {128, 128}}};
  auto c = parse_config_json(j.dump(), "v41");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->weight_block_rows, 128);
  EXPECT_FALSE(c->fp4_experts);
}

// --- errors: each names the origin and the field ----------------------------------------------

void expect_error(const json& j, const std::vector<std::string>& needles) {
  auto c = parse_config_json(j.dump(), "my/config.json");
  ASSERT_FALSE(c.ok()) << "accepted: " << j.dump().substr(0, 200);
  const std::string& msg = c.status().message();
  EXPECT_NE(msg.find("my/config.json"), std::string::npos) << msg;
  for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
}

json fixture(const char* name) {
  return fixture_json(fs::path(DEEPINFER_SHARED_DIR) / "golden_v41" / name, "config.json");
}

TEST(V41ConfigErrors, ModelType) {
  json j = fixture("v41_multi_src_alltopk");
  j["model_type"] = "deepseek_v4";
  expect_error(j, {"model_type", "deepseek_v4"});
  j.erase("model_type");
  expect_error(j, {"model_type"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["model_type"] = "deepseek_v4";
  expect_error(j, {"text_config.model_type", "deepseek_v4"});
  j["text_config"] = "none";
  expect_error(j, {"text_config"});
}

TEST(V41ConfigErrors, MissingFieldNamesItUnderTextConfig) {
  for (const char* field : {"hidden_size",         "vocab_size",
                            "num_hidden_layers",   "head_dim",
                            "q_lora_rank",         "o_groups",
                            "sliding_window",      "compress_ratios",
                            "kv_source_layer_ids", "index_source_layer_ids",
                            "index_topk",          "index_n_heads",
                            "num_experts_per_tok", "hc_mult",
                            "hc_sinkhorn_iters",   "swiglu_limit",
                            "rms_norm_eps",        "engram_num_embeddings",
                            "engram_head_dim",     "engram_compressed_vocab_size"}) {
    SCOPED_TRACE(field);
    json j = fixture("v41_engram_ratio1");
    ASSERT_EQ(j["text_config"].erase(field), 1u);
    expect_error(j, {std::string("text_config.") + field});
  }
  json j = fixture("v41_engram_ratio1");
  j["text_config"]["hidden_size"] = nullptr;
  expect_error(j, {"text_config.hidden_size"});
  // Neither qk_rope_head_dim nor a partial_rotary_factor.
  j = fixture("v41_engram_ratio1");
  j["text_config"]["rope_parameters"]["main"].erase("partial_rotary_factor");
  j["text_config"].erase("qk_rope_head_dim");
  expect_error(j, {"text_config.qk_rope_head_dim"});
  j = fixture("v41_engram_ratio1");
  j["text_config"]["rope_parameters"]["compress"].erase("factor");
  expect_error(j, {"text_config.rope_parameters.compress.factor"});
  j = fixture("v41_engram_ratio1");
  j["text_config"]["rope_parameters"].erase("compress");
  expect_error(j, {"text_config.rope_parameters"});
}

TEST(V41ConfigErrors, WrongType) {
  json j = fixture("v41_single_src_selective");
  j["text_config"]["num_attention_heads"] = "4";
  expect_error(j, {"text_config.num_attention_heads"});
  j = fixture("v41_single_src_selective");
  j["text_config"]["kv_source_layer_ids"] = 2;
  expect_error(j, {"text_config.kv_source_layer_ids"});
  j = fixture("v41_single_src_selective");
  j["text_config"]["index_source_layer_ids"][1] = "4";
  expect_error(j, {"text_config.index_source_layer_ids"});
  j = fixture("v41_single_src_selective");
  j["text_config"]["gate_temp"] = "1";
  expect_error(j, {"text_config.gate_temp"});
  j = fixture("v41_single_src_selective");
  j["text_config"]["rope_parameters"]["main"]["rope_theta"] = "1e4";
  expect_error(j, {"text_config.rope_parameters.main.rope_theta"});
  j = fixture("v41_single_src_selective");
  j["text_config"]["rope_parameters"]["compress"]["rope_type"] = "ntk";
  expect_error(j, {"rope_parameters.compress.rope_type", "ntk"});
}

TEST(V41ConfigErrors, UnsupportedRouting) {
  json j = fixture("v41_single_src_alltopk");
  j["text_config"]["scoring_func"] = "softmax";
  expect_error(j, {"text_config.scoring_func", "softmax"});
  j = fixture("v41_single_src_alltopk");
  j["text_config"]["topk_method"] = "greedy";
  expect_error(j, {"text_config.topk_method", "greedy"});
}

TEST(V41ConfigErrors, LayerSchedule) {
  json j = fixture("v41_multi_src_alltopk");     // [0,2,2,1,1,1,1,0]; KV [1,3]; index [1,3,5]
  j["text_config"]["compress_ratios"].erase(7);  // forgot the draft-layer entry
  expect_error(j, {"compress_ratios", "7", "8"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["compress_ratios"][7] = 1;
  expect_error(j, {"compress_ratios[7]", "draft"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["compress_ratios"][2] = 3;
  expect_error(j, {"compress_ratios[2]"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["compress_ratios"][2] = 1;  // ratio differs from its source's 2
  expect_error(j, {"compress_ratios[2]", "KV source 1"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["compress_ratios"][0] = 2;  // compressed before any KV source
  expect_error(j, {"compress_ratios[0]", "kv_source_layer_ids"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["kv_source_layer_ids"] = {0, 3};  // layer 0 is sliding only
  expect_error(j, {"kv_source_layer_ids", "0"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["kv_source_layer_ids"] = {3, 1};
  expect_error(j, {"kv_source_layer_ids", "order"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["index_source_layer_ids"] = {1, 5, 9};
  expect_error(j, {"index_source_layer_ids", "9"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["index_source_layer_ids"] = {1, 5};  // KV source 3 is missing
  expect_error(j, {"index_source_layer_ids", "3"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["candidate_source_layer_id"] = 4;
  expect_error(j, {"candidate_source_layer_id", "4"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["candidate_source_layer_id"] = 1;  // would constrain layer 3's other group
  expect_error(j, {"candidate_source_layer_id", "KV group"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["candidate_block_size"] = 0;
  expect_error(j, {"candidate_block_size"});
  j = fixture("v41_multi_src_alltopk");
  j["text_config"]["layer_types"][2] = "shared_compressed_attention";
  expect_error(j, {"text_config.layer_types[2]"});
}

TEST(V41ConfigErrors, Engram) {
  json j = fixture("v41_engram_ratio1");
  j["text_config"]["engram_num_embeddings"] = {168};
  expect_error(j, {"engram_num_embeddings"});
  j = fixture("v41_engram_ratio1");
  j["text_config"]["engram_layer_ids"] = {1, 6};
  expect_error(j, {"engram_layer_ids", "6"});
  j = fixture("v41_engram_ratio1");
  j["text_config"]["engram_max_ngram_size"] = 1;
  expect_error(j, {"engram_max_ngram_size"});
}

TEST(V41ConfigErrors, StructuralChecks) {
  json j = fixture("v41_single_src_alltopk");
  j["text_config"]["num_attention_heads"] = 3;  // not a multiple of o_groups 2
  expect_error(j, {"o_groups"});
  j = fixture("v41_single_src_alltopk");
  j["text_config"]["num_experts_per_tok"] = 5;
  expect_error(j, {"num_experts_per_tok"});
  j = fixture("v41_single_src_alltopk");
  j["text_config"]["num_key_value_heads"] = 4;
  expect_error(j, {"num_key_value_heads"});
  j = fixture("v41_single_src_alltopk");
  j["text_config"]["qk_rope_head_dim"] = 15;
  expect_error(j, {"qk_rope_head_dim"});
  j = fixture("v41_single_src_alltopk");
  j["text_config"]["hidden_size"] = 0;
  expect_error(j, {"hidden_size"});
}

TEST(V41ConfigErrors, MalformedQuantizationConfig) {
  json j = released_config();
  j["quantization_config"]["quant_method"] = "awq";
  expect_error(j, {"quantization_config.quant_method", "awq"});
  j = released_config();
  j["quantization_config"]["weight_block_size"] = {32};
  expect_error(j, {"quantization_config.weight_block_size"});
  j = released_config();
  j["quantization_config"] = "fp8";
  expect_error(j, {"quantization_config"});
}

TEST(V41ConfigErrors, NotJsonOrMissingFile) {
  auto c = parse_config_json("{\"model_type\": ", "broken.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("broken.json"), std::string::npos);
  c = load_config("/nonexistent/v41");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/v41/config.json"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace deepinfer::v41
