// Typed deepseek_v41 (DeepSeek-V4.1-Flash text model) configuration, parsed from config.json, and
// the per-layer roles the cross-layer sharing schedule derives from it (spec §11).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepinfer/base/status.h"

namespace deepinfer::v41 {

// One RoPE table. V4.1 keeps two: `main` for the sliding-window branch and `compress` for the
// compressed branch (HF rope_parameters.main / .compress; Hub rope_theta / compress_rope_theta +
// rope_scaling, which applies to the compressed branch only).
struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double attention_factor = 1.0;  // YaRN mscale; absent means 1.0, as for V4

  friend bool operator==(const RopeConfig&, const RopeConfig&) = default;
};

// transformers' layer_types: derived from kv_source_layer_ids alone (consumers read "sliding").
enum class LayerType { kSlidingAttention, kSharedCompressedAttention };

// Who owns the compressed KV a layer attends to.
enum class KvRole {
  kSlidingOnly,  // compress ratio 0: the sliding window only
  kSource,       // owns a compressor; publishes latents and indexer keys for its group
  kConsumer,     // reads the latents/keys of kv_source_of(layer)
};

// Where a compressed layer's sparse top-k comes from.
enum class IndexRole {
  kNone,     // sliding only
  kSource,   // a KV source that scores its own indexer keys
  kReindex,  // an index source that is not a KV source: own wq_b/weights_proj, the group's keys
  kReuse,    // reuses the top-k of index_source_of(layer)
};

struct LayerRoles {
  int compress_ratio = 0;
  KvRole kv = KvRole::kSlidingOnly;
  int kv_source = -1;  // self for a source, -1 when sliding only
  IndexRole index = IndexRole::kNone;
  int index_source = -1;          // self for an index source, -1 when sliding only
  bool candidate_source = false;  // publishes the level-1 candidate blocks
  bool uses_candidates = false;   // an index source after the candidate source: level-2 top-k
  int engram_slot = -1;           // position in engram.layer_ids, -1 when no Engram

  friend bool operator==(const LayerRoles&, const LayerRoles&) = default;
};

struct EngramConfig {
  std::vector<int> layer_ids;
  std::vector<int64_t> num_embeddings;  // rows of each Engram layer's table, by slot
  int max_ngram_size = 0;               // n runs 2..max_ngram_size
  int64_t vocab_size = 0;               // the primes of every (n, head) are above this
  int n_heads = 0;
  int head_dim = 0;
  int64_t pad_id = 2;  // engram_pad_id (HF) / engram_pad_token_id (spec §11.1)
  int64_t compressed_vocab_size = 0;

  friend bool operator==(const EngramConfig&, const EngramConfig&) = default;
};

// The DSpark drafter (spec §11.2.9). Parsed so the config round-trips; nothing runs it yet.
struct DsparkConfig {
  int block_size = 0;
  int64_t noise_token_id = -1;
  std::vector<int> target_layer_ids;
  int markov_rank = 0;
  int n_routed_experts = 0;
  int experts_per_token = 0;

  friend bool operator==(const DsparkConfig&, const DsparkConfig&) = default;
};

struct Config {
  std::string model_type;  // the text model's: "deepseek_v41_text" (or "deepseek_v41" when flat)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 1;
  int head_dim = 0;
  int rope_dim = 0;  // qk_rope_head_dim: the trailing dims of every head that get RoPE
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int sliding_window = 0;
  int64_t max_position_embeddings = 0;
  RopeConfig rope_main;
  RopeConfig rope_compress;

  // Layer schedule: num_layers + num_nextn_layers entries (the draft layers' are 0).
  std::vector<int> compress_ratios;
  std::vector<int> kv_source_layer_ids;
  std::vector<int> index_source_layer_ids;
  int candidate_source_layer_id = -1;  // -1: no two-level top-k
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;

  int n_routed_experts = 0;
  int experts_per_token = 0;
  int n_shared_experts = 0;
  int moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double gate_temp = 1.0;
  double swiglu_limit = 0.0;

  int hc_mult = 0;
  int hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;

  int num_nextn_layers = 0;  // num_nextn_predict_layers: the DSpark draft layers
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t pad_token_id = -1;
  int64_t image_token_id = -1;
  bool tie_word_embeddings = false;

  EngramConfig engram;
  DsparkConfig dspark;

  // quantization_config (fp8 dense weights with square-ish E8M0 blocks, FP4 experts).
  bool fp8_weights = false;
  int weight_block_rows = 32;
  int weight_block_cols = 32;
  bool fp4_experts = false;

  // Derived by finalize_config, one entry per backbone layer.
  std::vector<LayerRoles> layers;

  int compress_ratio(int layer) const { return compress_ratios[layer]; }
  int nope_dim() const { return head_dim - rope_dim; }
  int mix_hc() const { return (2 + hc_mult) * hc_mult; }
  LayerType layer_type(int layer) const {
    return is_kv_source(layer) ? LayerType::kSharedCompressedAttention
                               : LayerType::kSlidingAttention;
  }
  bool is_kv_source(int layer) const { return layers[layer].kv == KvRole::kSource; }
  int kv_source_of(int layer) const { return layers[layer].kv_source; }
  bool is_index_source(int layer) const {
    return layers[layer].index == IndexRole::kSource || layers[layer].index == IndexRole::kReindex;
  }
  int index_source_of(int layer) const { return layers[layer].index_source; }
  bool is_candidate_source(int layer) const { return layers[layer].candidate_source; }
  bool uses_candidates(int layer) const { return layers[layer].uses_candidates; }
  bool is_engram_layer(int layer) const { return layers[layer].engram_slot >= 0; }

  friend bool operator==(const Config&, const Config&) = default;
};

// Reads the composite layout (model_type deepseek_v41, model fields under text_config with
// model_type deepseek_v41_text; bos/eos/pad/image_token_id and quantization_config may sit at
// the top) and a flat text config (the same fields at the top). Errors name origin and field.
StatusOr<Config> parse_config_json(const std::string& json_text, const std::string& origin);
StatusOr<Config> load_config(const std::string& model_dir);
// Structural checks of the fields, then fills `layers`. Every way a Config is made ends here.
Status finalize_config(Config* c, const std::string& origin);

const char* layer_type_name(LayerType t);  // transformers' spelling

}  // namespace deepinfer::v41
