#include "deepinfer/model/deepseek_v4/tiny_model_presets.h"

#include <nlohmann/json.hpp>

namespace deepinfer::v4 {
namespace {

using nlohmann::json;

// Shared by every preset: small dims with the real structure (hc 4, partial RoPE, groups).
json base_config() {
  return json{{"architectures", {"DeepseekV4ForCausalLM"}},
              {"model_type", "deepseek_v4"},
              {"torch_dtype", "bfloat16"},
              {"vocab_size", 129280},
              {"hidden_size", 64},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 1},
              {"head_dim", 64},
              {"qk_rope_head_dim", 16},
              {"q_lora_rank", 32},
              {"o_groups", 2},
              {"o_lora_rank", 32},
              {"sliding_window", 16},
              {"rope_theta", 10000.0},
              {"compress_rope_theta", 160000.0},
              {"rope_scaling",
               {{"type", "yarn"},
                {"factor", 16},
                {"original_max_position_embeddings", 65536},
                {"beta_fast", 32},
                {"beta_slow", 1}}},
              {"max_position_embeddings", 1048576},
              {"index_n_heads", 4},
              {"index_head_dim", 32},
              {"index_topk", 8},
              {"n_routed_experts", 8},
              {"num_experts_per_tok", 2},
              {"n_shared_experts", 1},
              {"moe_intermediate_size", 32},
              {"scoring_func", "sqrtsoftplus"},
              {"topk_method", "noaux_tc"},
              {"norm_topk_prob", true},
              {"routed_scaling_factor", 1.5},
              {"swiglu_limit", 10.0},
              {"hidden_act", "silu"},
              {"hc_mult", 4},
              {"hc_sinkhorn_iters", 20},
              {"hc_eps", 1e-6},
              {"rms_norm_eps", 1e-6},
              {"num_nextn_predict_layers", 1},
              {"tie_word_embeddings", false},
              {"bos_token_id", 0},
              {"eos_token_id", 1}};
}

// Spec §2.1's per-layer dims.
void apply_flash_dims(json& c) {
  c.update(json{{"hidden_size", 4096},
                {"num_attention_heads", 64},
                {"head_dim", 512},
                {"qk_rope_head_dim", 64},
                {"q_lora_rank", 1024},
                {"o_groups", 8},
                {"o_lora_rank", 1024},
                {"sliding_window", 128},
                {"index_n_heads", 64},
                {"index_head_dim", 128},
                {"index_topk", 512},
                {"n_routed_experts", 256},
                {"num_experts_per_tok", 6},
                {"n_shared_experts", 1},
                {"moe_intermediate_size", 2048}});
}

}  // namespace

std::vector<int> v4_flash_compress_ratios(int layers) {
  std::vector<int> r;
  for (int i = 0; i < layers; ++i) r.push_back(i < 2 ? 0 : i % 2 == 0 ? 4 : 128);
  r.push_back(0);  // MTP
  return r;
}

const std::vector<TinyPreset>& tiny_presets() {
  static const std::vector<TinyPreset> presets = {
      // default: every layer kind (sliding, CSA + indexer, HCA) and hash + score routing.
      {"default", {0, 4, 16, 4, 16, 0}, 2},
      {"sliding", {0, 0, 0}, 1},
      {"csa", {4, 4, 4, 0}, 1},
      {"hca", {16, 16, 0, 0}, 0},
      // The first 8 layers of V4-Flash (about 30 GB): the single-GPU benchmark model, and the
      // prefix the full model's first 8 layers must match (issue 22).
      {"v4-flash-8layer", v4_flash_compress_ratios(8), 3, true},
      // All 43 layers (about 149 GiB, spec §1): the multi-GPU model.
      {"v4-flash-full", v4_flash_compress_ratios(43), 3, true},
  };
  return presets;
}

const TinyPreset* find_tiny_preset(const std::string& name) {
  for (const TinyPreset& p : tiny_presets())
    if (p.name == name) return &p;
  return nullptr;
}

std::string tiny_preset_config_json(const TinyPreset& p) {
  json c = base_config();
  c["num_hidden_layers"] = static_cast<int>(p.ratios.size()) - 1;
  c["compress_ratios"] = p.ratios;
  c["num_hash_layers"] = p.hash_layers;
  if (p.flash_dims) apply_flash_dims(c);
  return c.dump();
}

}  // namespace deepinfer::v4
