// Typed deepseek_v4 configuration, parsed from a checkpoint's config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::v4 {

struct YarnConfig {
  bool enabled = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct Config {
  std::string model_type;  // "deepseek_v4"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int rope_dim = 0;  // qk_rope_head_dim: the trailing dims of every head that get RoPE
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int sliding_window = 0;
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  YarnConfig yarn;                   // applies to compressed layers only
  std::vector<int> compress_ratios;  // num_layers + num_mtp_layers entries; 0 = sliding only
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int n_routed_experts = 0;
  int experts_per_token = 0;
  int n_shared_experts = 0;
  int moe_intermediate_size = 0;
  double routed_scaling_factor = 1.0;
  int num_hash_layers = 0;  // the first num_hash_layers layers route by tid2eid
  double swiglu_limit = 0.0;
  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int num_mtp_layers = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  // quantization_config: FP8 weight block shape (when quant_method is fp8).
  bool fp8_weights = false;
  int weight_block_rows = 128;
  int weight_block_cols = 128;

  int compress_ratio(int layer) const { return compress_ratios[layer]; }
  int nope_dim() const { return head_dim - rope_dim; }
  int mix_hc() const { return (2 + hc_mult) * hc_mult; }
  bool is_hash_layer(int layer) const { return layer < num_hash_layers; }
};

// A compressed layer of ratio 4 is the overlapping CSA kind (two series, with an indexer); every
// other nonzero ratio is the non-overlapping HCA kind (spec §6.6).
inline bool is_csa_ratio(int ratio) { return ratio == 4; }

// Accepts both the Hub spelling (compress_ratios, num_hash_layers, rope_scaling) and the
// transformers save_pretrained spelling (layer_types + compress_rates, mlp_layer_types,
// rope_parameters). Errors name the file and the field.
StatusOr<Config> parse_config_json(const std::string& json_text, const std::string& origin);
StatusOr<Config> load_config(const std::string& model_dir);
// Structural checks (divisibility, ranges) shared by every way a Config is made.
Status validate_config(const Config& c, const std::string& origin);

}  // namespace deepinfer::v4
