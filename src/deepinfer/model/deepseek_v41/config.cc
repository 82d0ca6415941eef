#include "deepinfer/model/deepseek_v41/config.h"

#include <nlohmann/json.hpp>

#include "deepinfer/model/config_field_reader.h"

namespace deepinfer::v41 {
namespace {

using nlohmann::json;

using model_config::FieldReader;

// One rope_parameters entry, or the Hub rope_scaling object.
Status read_rope(const json& j, const std::string& origin, const std::string& field,
                 bool theta_required, RopeConfig* rope) {
  if (!j.is_object()) return invalid_argument(origin + ": field '" + field + "' must be an object");
  FieldReader r(j, origin, field + ".");
  if (theta_required) r.req("rope_theta", &rope->theta);
  std::string type = "default";
  if (r.has("rope_type")) {
    r.req("rope_type", &type);
  } else {
    r.opt("type", &type);
  }
  RETURN_IF_ERROR(r.status());
  if (type == "yarn") {
    rope->yarn = true;
    r.req("factor", &rope->factor);
    r.req("original_max_position_embeddings", &rope->original_max_position_embeddings);
    r.opt("beta_fast", &rope->beta_fast);
    r.opt("beta_slow", &rope->beta_slow);
    r.opt("attention_factor", &rope->attention_factor);
  } else if (type != "default") {
    r.fail("field '" + r.name("rope_type") + "' is '" + type + "' (supported: yarn, default)");
  }
  return r.status();
}

Status read_quantization(const json& q, const std::string& origin, const std::string& field,
                         Config* c) {
  if (!q.is_object()) return invalid_argument(origin + ": field '" + field + "' must be an object");
  FieldReader r(q, origin, field + ".");
  std::string method;
  r.req("quant_method", &method);
  RETURN_IF_ERROR(r.status());
  if (method != "fp8")
    return invalid_argument(origin + ": field '" + field + ".quant_method' is '" + method +
                            "' (supported: fp8)");
  c->fp8_weights = true;
  if (r.has("weight_block_size")) {
    const json& b = r.at("weight_block_size");
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer())
      return invalid_argument(origin + ": field '" + field +
                              ".weight_block_size' must be [rows, cols]");
    c->weight_block_rows = b[0];
    c->weight_block_cols = b[1];
  }
  std::string expert_dtype;
  r.opt("expert_dtype", &expert_dtype);
  c->fp4_experts = expert_dtype == "fp4";
  return r.status();
}

bool contains(const std::vector<int>& v, int x) {
  for (int e : v)
    if (e == x) return true;
  return false;
}

}  // namespace

const char* layer_type_name(LayerType t) {
  return t == LayerType::kSharedCompressedAttention ? "shared_compressed_attention"
                                                    : "sliding_attention";
}

StatusOr<Config> parse_config_json(const std::string& json_text, const std::string& origin) {
  json top = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded() || !top.is_object())
    return invalid_argument(origin + ": not a JSON object");
  Config c;
  std::string top_type;
  {
    FieldReader r(top, origin, "");
    r.req("model_type", &top_type);
    RETURN_IF_ERROR(r.status());
  }
  const bool composite = top_type == "deepseek_v41" && top.contains("text_config");
  if (top_type != "deepseek_v41" && top_type != "deepseek_v41_text")
    return invalid_argument(origin + ": unsupported model_type '" + top_type +
                            "' (expected 'deepseek_v41' or 'deepseek_v41_text')");
  if (composite && !top["text_config"].is_object())
    return invalid_argument(origin + ": field 'text_config' must be an object");
  const json& text = composite ? top["text_config"] : top;
  FieldReader r(text, origin, composite ? "text_config." : "");
  c.model_type = top_type;
  if (composite) {
    r.req("model_type", &c.model_type);
    RETURN_IF_ERROR(r.status());
    if (c.model_type != "deepseek_v41_text")
      return invalid_argument(origin + ": unsupported text_config.model_type '" + c.model_type +
                              "' (expected 'deepseek_v41_text')");
  }

  // The composite's top level may carry the token ids, embeddings tying and quantization
  // (spec §11.1); text_config wins where both have them.
  FieldReader t(top, origin, "");
  for (FieldReader* f : {&t, &r}) {
    f->opt("bos_token_id", &c.bos_token_id);
    f->opt("eos_token_id", &c.eos_token_id);
    f->opt("pad_token_id", &c.pad_token_id);
    f->opt("image_token_id", &c.image_token_id);
    f->opt("tie_word_embeddings", &c.tie_word_embeddings);
    if (!composite) break;
  }
  RETURN_IF_ERROR(t.status());

  std::string scoring = "sqrtsoftplus";
  r.opt("scoring_func", &scoring);
  if (r.status().ok() && scoring != "sqrtsoftplus")
    r.fail("field '" + r.name("scoring_func") + "' is '" + scoring +
           "' (only 'sqrtsoftplus' is supported)");
  std::string topk_method = "noaux_tc";
  r.opt("topk_method", &topk_method);
  if (r.status().ok() && topk_method != "noaux_tc")
    r.fail("field '" + r.name("topk_method") + "' is '" + topk_method +
           "' (only 'noaux_tc' is supported)");

  r.req("vocab_size", &c.vocab_size);
  r.req("hidden_size", &c.hidden_size);
  r.req("num_hidden_layers", &c.num_layers);
  r.req("num_attention_heads", &c.num_heads);
  r.opt("num_key_value_heads", &c.num_kv_heads);
  r.req("head_dim", &c.head_dim);
  r.req("q_lora_rank", &c.q_lora_rank);
  r.req("o_groups", &c.o_groups);
  r.req("o_lora_rank", &c.o_lora_rank);
  r.req("sliding_window", &c.sliding_window);
  r.opt("max_position_embeddings", &c.max_position_embeddings);

  r.req("compress_ratios", &c.compress_ratios);
  r.req("kv_source_layer_ids", &c.kv_source_layer_ids);
  r.req("index_source_layer_ids", &c.index_source_layer_ids);
  r.opt("candidate_source_layer_id", &c.candidate_source_layer_id);
  r.opt("candidate_topk_blocks", &c.candidate_topk_blocks);
  r.opt("candidate_block_size", &c.candidate_block_size);
  r.req("index_n_heads", &c.index_n_heads);
  r.req("index_head_dim", &c.index_head_dim);
  r.req("index_topk", &c.index_topk);

  r.req("n_routed_experts", &c.n_routed_experts);
  r.req("num_experts_per_tok", &c.experts_per_token);
  r.opt("n_shared_experts", &c.n_shared_experts);
  r.req("moe_intermediate_size", &c.moe_intermediate_size);
  r.opt("norm_topk_prob", &c.norm_topk_prob);
  r.opt("routed_scaling_factor", &c.routed_scaling_factor);
  r.opt("gate_temp", &c.gate_temp);
  r.req("swiglu_limit", &c.swiglu_limit);

  r.req("hc_mult", &c.hc_mult);
  r.req("hc_sinkhorn_iters", &c.hc_sinkhorn_iters);
  r.opt("hc_eps", &c.hc_eps);
  r.req("rms_norm_eps", &c.rms_norm_eps);
  r.opt("num_nextn_predict_layers", &c.num_nextn_layers);

  r.opt("engram_layer_ids", &c.engram.layer_ids);
  if (!c.engram.layer_ids.empty()) {
    r.req("engram_num_embeddings", &c.engram.num_embeddings);
    r.req("engram_max_ngram_size", &c.engram.max_ngram_size);
    r.req("engram_vocab_size", &c.engram.vocab_size);
    r.req("engram_n_heads", &c.engram.n_heads);
    r.req("engram_head_dim", &c.engram.head_dim);
    if (r.has("engram_pad_id")) {
      r.req("engram_pad_id", &c.engram.pad_id);
    } else {
      r.opt("engram_pad_token_id", &c.engram.pad_id);
    }
    r.req("engram_compressed_vocab_size", &c.engram.compressed_vocab_size);
  }

  r.opt("dspark_block_size", &c.dspark.block_size);
  r.opt("dspark_noise_token_id", &c.dspark.noise_token_id);
  r.opt("dspark_target_layer_ids", &c.dspark.target_layer_ids);
  r.opt("dspark_markov_rank", &c.dspark.markov_rank);
  r.opt("dspark_n_routed_experts", &c.dspark.n_routed_experts);
  r.opt("dspark_num_experts_per_tok", &c.dspark.experts_per_token);
  RETURN_IF_ERROR(r.status());

  // RoPE: transformers' rope_parameters {main, compress}, else the Hub's rope_theta,
  // compress_rope_theta and rope_scaling (YaRN on the compressed branch only).
  double partial_rotary_factor = 0;
  if (r.has("rope_parameters")) {
    const json& p = r.at("rope_parameters");
    const std::string field = r.name("rope_parameters");
    if (!p.is_object() || !p.contains("main") || !p.contains("compress"))
      return invalid_argument(origin + ": field '" + field + "' must hold 'main' and 'compress'");
    RETURN_IF_ERROR(read_rope(p["main"], origin, field + ".main", true, &c.rope_main));
    RETURN_IF_ERROR(read_rope(p["compress"], origin, field + ".compress", true, &c.rope_compress));
    if (p["main"].contains("partial_rotary_factor") &&
        p["main"]["partial_rotary_factor"].is_number())
      partial_rotary_factor = p["main"]["partial_rotary_factor"].get<double>();
  } else {
    c.rope_compress.theta = 160000.0;
    r.opt("rope_theta", &c.rope_main.theta);
    r.opt("compress_rope_theta", &c.rope_compress.theta);
    RETURN_IF_ERROR(r.status());
    if (r.has("rope_scaling"))
      RETURN_IF_ERROR(
          read_rope(r.at("rope_scaling"), origin, r.name("rope_scaling"), false, &c.rope_compress));
  }
  if (r.has("qk_rope_head_dim")) {
    r.req("qk_rope_head_dim", &c.rope_dim);
  } else if (partial_rotary_factor > 0) {
    c.rope_dim = static_cast<int>(partial_rotary_factor * c.head_dim + 0.5);
  } else {
    r.fail("missing required field '" + r.name("qk_rope_head_dim") + "'");
  }
  RETURN_IF_ERROR(r.status());

  if (r.has("quantization_config")) {
    RETURN_IF_ERROR(
        read_quantization(r.at("quantization_config"), origin, r.name("quantization_config"), &c));
  } else if (composite && t.has("quantization_config")) {
    RETURN_IF_ERROR(
        read_quantization(t.at("quantization_config"), origin, "quantization_config", &c));
  }

  RETURN_IF_ERROR(finalize_config(&c, origin));

  // layer_types is derived data in transformers; when present it must agree with ours.
  if (r.has("layer_types")) {
    const json& a = r.at("layer_types");
    const std::string field = r.name("layer_types");
    if (!a.is_array() || static_cast<int>(a.size()) != c.num_layers)
      return invalid_argument(origin + ": field '" + field + "' must list num_hidden_layers = " +
                              std::to_string(c.num_layers) + " entries");
    for (int l = 0; l < c.num_layers; ++l) {
      const char* want = layer_type_name(c.layer_type(l));
      if (!a[l].is_string() || a[l].get<std::string>() != want)
        return invalid_argument(origin + ": field '" + field + "[" + std::to_string(l) + "]' is " +
                                a[l].dump() + ", but kv_source_layer_ids make it '" + want + "'");
    }
  }
  return c;
}

Status finalize_config(Config* cp, const std::string& origin) {
  Config& c = *cp;
  auto bad = [&](const std::string& m) { return invalid_argument(origin + ": " + m); };
  auto positive = [&](int64_t v, const char* name) -> Status {
    if (v <= 0) return bad(std::string("field '") + name + "' must be positive");
    return ok_status();
  };
  RETURN_IF_ERROR(positive(c.vocab_size, "vocab_size"));
  RETURN_IF_ERROR(positive(c.hidden_size, "hidden_size"));
  RETURN_IF_ERROR(positive(c.num_layers, "num_hidden_layers"));
  RETURN_IF_ERROR(positive(c.num_heads, "num_attention_heads"));
  RETURN_IF_ERROR(positive(c.head_dim, "head_dim"));
  RETURN_IF_ERROR(positive(c.q_lora_rank, "q_lora_rank"));
  RETURN_IF_ERROR(positive(c.o_lora_rank, "o_lora_rank"));
  RETURN_IF_ERROR(positive(c.sliding_window, "sliding_window"));
  RETURN_IF_ERROR(positive(c.hc_mult, "hc_mult"));
  RETURN_IF_ERROR(positive(c.hc_sinkhorn_iters, "hc_sinkhorn_iters"));
  RETURN_IF_ERROR(positive(c.n_routed_experts, "n_routed_experts"));
  RETURN_IF_ERROR(positive(c.experts_per_token, "num_experts_per_tok"));
  RETURN_IF_ERROR(positive(c.moe_intermediate_size, "moe_intermediate_size"));
  RETURN_IF_ERROR(positive(c.index_n_heads, "index_n_heads"));
  RETURN_IF_ERROR(positive(c.index_head_dim, "index_head_dim"));
  RETURN_IF_ERROR(positive(c.index_topk, "index_topk"));
  RETURN_IF_ERROR(positive(c.weight_block_rows, "quantization_config.weight_block_size"));
  RETURN_IF_ERROR(positive(c.weight_block_cols, "quantization_config.weight_block_size"));
  if (c.num_kv_heads != 1) return bad("field 'num_key_value_heads' must be 1 (one shared KV head)");
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim || c.rope_dim > c.index_head_dim)
    return bad("field 'qk_rope_head_dim' (" + std::to_string(c.rope_dim) +
               ") must be even and at most head_dim and index_head_dim");
  if (c.o_groups <= 0 || c.num_heads % c.o_groups)
    return bad("field 'num_attention_heads' must be a multiple of 'o_groups'");
  if (c.experts_per_token > c.n_routed_experts)
    return bad("field 'num_experts_per_tok' exceeds 'n_routed_experts'");
  if (c.num_nextn_layers < 0) return bad("field 'num_nextn_predict_layers' must be >= 0");

  const int n = c.num_layers;
  if (static_cast<int>(c.compress_ratios.size()) != n + c.num_nextn_layers)
    return bad("field 'compress_ratios' has " + std::to_string(c.compress_ratios.size()) +
               " entries, expected num_hidden_layers + num_nextn_predict_layers = " +
               std::to_string(n + c.num_nextn_layers));
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    int r = c.compress_ratios[i];
    const std::string at = "field 'compress_ratios[" + std::to_string(i) + "]' = ";
    if (r < 0 || (r & (r - 1))) return bad(at + std::to_string(r) + " is not 0 or a power of two");
    if (static_cast<int>(i) >= n && r != 0) return bad(at + "must be 0 (a draft layer)");
  }

  // Layer id lists: strictly increasing backbone layers.
  auto check_ids = [&](const std::vector<int>& ids, const char* field, bool compressed) -> Status {
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string at = std::string("field '") + field + "' entry " + std::to_string(ids[i]);
      if (ids[i] < 0 || ids[i] >= n) return bad(at + " is not a layer below num_hidden_layers");
      if (i > 0 && ids[i] <= ids[i - 1]) return bad(at + " is out of order or repeated");
      if (compressed && c.compress_ratios[ids[i]] == 0)
        return bad(at + " is a sliding-only layer (compress_ratios 0)");
    }
    return ok_status();
  };
  RETURN_IF_ERROR(check_ids(c.kv_source_layer_ids, "kv_source_layer_ids", true));
  RETURN_IF_ERROR(check_ids(c.index_source_layer_ids, "index_source_layer_ids", true));
  RETURN_IF_ERROR(check_ids(c.engram.layer_ids, "engram_layer_ids", false));
  for (int s : c.kv_source_layer_ids)
    if (!contains(c.index_source_layer_ids, s))
      return bad("field 'index_source_layer_ids' lacks KV source " + std::to_string(s) +
                 " (a KV source publishes its group's indexer keys and scores them)");
  for (int d : c.dspark.target_layer_ids)
    if (d < 0 || d >= n)
      return bad("field 'dspark_target_layer_ids' entry " + std::to_string(d) +
                 " is not a layer below num_hidden_layers");

  if (c.candidate_source_layer_id != -1) {
    if (!contains(c.index_source_layer_ids, c.candidate_source_layer_id))
      return bad("field 'candidate_source_layer_id' = " +
                 std::to_string(c.candidate_source_layer_id) + " is not an index source");
    RETURN_IF_ERROR(positive(c.candidate_topk_blocks, "candidate_topk_blocks"));
    RETURN_IF_ERROR(positive(c.candidate_block_size, "candidate_block_size"));
  }

  if (!c.engram.layer_ids.empty()) {
    if (c.engram.num_embeddings.size() != c.engram.layer_ids.size())
      return bad("field 'engram_num_embeddings' has " +
                 std::to_string(c.engram.num_embeddings.size()) +
                 " entries, expected one per engram_layer_ids entry (" +
                 std::to_string(c.engram.layer_ids.size()) + ")");
    if (c.engram.max_ngram_size < 2) return bad("field 'engram_max_ngram_size' must be >= 2");
    RETURN_IF_ERROR(positive(c.engram.n_heads, "engram_n_heads"));
    RETURN_IF_ERROR(positive(c.engram.head_dim, "engram_head_dim"));
    RETURN_IF_ERROR(positive(c.engram.vocab_size, "engram_vocab_size"));
    RETURN_IF_ERROR(positive(c.engram.compressed_vocab_size, "engram_compressed_vocab_size"));
    for (size_t i = 0; i < c.engram.num_embeddings.size(); ++i)
      if (c.engram.num_embeddings[i] <= 0)
        return bad("field 'engram_num_embeddings[" + std::to_string(i) + "]' must be positive");
  }

  // Per-layer roles (who owns the compressed KV, where the top-k comes from).
  c.layers.assign(n, LayerRoles{});
  int kv_source = -1, index_source = -1;
  for (int l = 0; l < n; ++l) {
    LayerRoles& L = c.layers[l];
    L.compress_ratio = c.compress_ratios[l];
    for (size_t i = 0; i < c.engram.layer_ids.size(); ++i)
      if (c.engram.layer_ids[i] == l) L.engram_slot = static_cast<int>(i);
    const bool is_kv_source = contains(c.kv_source_layer_ids, l);
    const bool is_index_source = contains(c.index_source_layer_ids, l);
    if (is_kv_source) kv_source = l;
    if (is_index_source) index_source = l;
    if (L.compress_ratio == 0) continue;
    if (kv_source < 0)
      return bad("field 'compress_ratios[" + std::to_string(l) +
                 "]' is compressed, but no kv_source_layer_ids entry comes at or before it");
    if (c.compress_ratios[kv_source] != L.compress_ratio)
      return bad("field 'compress_ratios[" + std::to_string(l) +
                 "]' = " + std::to_string(L.compress_ratio) + " differs from its KV source " +
                 std::to_string(kv_source) + "'s ratio " +
                 std::to_string(c.compress_ratios[kv_source]));
    L.kv = is_kv_source ? KvRole::kSource : KvRole::kConsumer;
    L.kv_source = kv_source;
    // Every KV source is an index source, so index_source is within this layer's group.
    L.index = is_index_source ? (is_kv_source ? IndexRole::kSource : IndexRole::kReindex)
                              : IndexRole::kReuse;
    L.index_source = index_source;
    L.candidate_source = l == c.candidate_source_layer_id;
    L.uses_candidates =
        is_index_source && c.candidate_source_layer_id >= 0 && c.candidate_source_layer_id < l;
    if (L.uses_candidates && c.layers[c.candidate_source_layer_id].kv_source != kv_source)
      return bad("field 'candidate_source_layer_id' = " +
                 std::to_string(c.candidate_source_layer_id) + " is in another KV group than " +
                 "index source " + std::to_string(l) + ", whose top-k it would constrain");
  }
  return ok_status();
}

StatusOr<Config> load_config(const std::string& model_dir) {
  std::string path;
  ASSIGN_OR_RETURN(std::string text, model_config::read_config_file(model_dir, &path));
  return parse_config_json(text, path);
}

}  // namespace deepinfer::v41
