#include "deepinfer/model/deepseek_v4/config.h"

#include <nlohmann/json.hpp>

#include "deepinfer/model/config_field_reader.h"

namespace deepinfer::v4 {
namespace {

using nlohmann::json;

using model_config::FieldReader;

int ratio_of_layer_type(const std::string& t, const json& rates, bool* ok) {
  *ok = true;
  if (t == "sliding_attention") return 0;
  if (rates.is_object() && rates.contains(t) && rates[t].is_number_integer()) return rates[t];
  if (t == "compressed_sparse_attention") return 4;
  if (t == "heavily_compressed_attention") return 128;
  *ok = false;
  return 0;
}

}  // namespace

StatusOr<Config> parse_config_json(const std::string& json_text, const std::string& origin) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(origin + ": not a JSON object");
  Config c;
  FieldReader r(j, origin);
  r.req("model_type", &c.model_type);
  RETURN_IF_ERROR(r.status());
  if (c.model_type != "deepseek_v4") {
    return invalid_argument(origin + ": unsupported model_type '" + c.model_type +
                            "' (this build supports 'deepseek_v4')");
  }
  std::string scoring = "sqrtsoftplus";
  r.opt("scoring_func", &scoring);
  if (r.status().ok() && scoring != "sqrtsoftplus")
    r.fail("scoring_func '" + scoring + "' is not supported (only 'sqrtsoftplus')");
  r.req("vocab_size", &c.vocab_size);
  r.req("hidden_size", &c.hidden_size);
  r.req("num_hidden_layers", &c.num_layers);
  r.req("num_attention_heads", &c.num_heads);
  r.req("head_dim", &c.head_dim);
  r.req("q_lora_rank", &c.q_lora_rank);
  r.req("o_groups", &c.o_groups);
  r.req("o_lora_rank", &c.o_lora_rank);
  r.req("sliding_window", &c.sliding_window);
  r.opt("rope_theta", &c.rope_theta);
  r.opt("compress_rope_theta", &c.compress_rope_theta);
  r.req("index_n_heads", &c.index_n_heads);
  r.req("index_head_dim", &c.index_head_dim);
  r.req("index_topk", &c.index_topk);
  r.req("n_routed_experts", &c.n_routed_experts);
  r.req("num_experts_per_tok", &c.experts_per_token);
  r.opt("n_shared_experts", &c.n_shared_experts);
  r.req("moe_intermediate_size", &c.moe_intermediate_size);
  r.opt("routed_scaling_factor", &c.routed_scaling_factor);
  r.req("swiglu_limit", &c.swiglu_limit);
  r.req("hc_mult", &c.hc_mult);
  r.req("hc_sinkhorn_iters", &c.hc_sinkhorn_iters);
  r.opt("hc_eps", &c.hc_eps);
  r.opt("rms_norm_eps", &c.rms_norm_eps);
  r.opt("num_nextn_predict_layers", &c.num_mtp_layers);
  r.opt("bos_token_id", &c.bos_token_id);
  r.opt("eos_token_id", &c.eos_token_id);
  RETURN_IF_ERROR(r.status());

  // RoPE dims: Hub qk_rope_head_dim, or transformers' partial_rotary_factor.
  if (r.has("qk_rope_head_dim")) {
    r.req("qk_rope_head_dim", &c.rope_dim);
  } else if (r.has("partial_rotary_factor")) {
    double f = 0;
    r.req("partial_rotary_factor", &f);
    c.rope_dim = static_cast<int>(f * c.head_dim + 0.5);
  } else {
    r.fail("missing required field 'qk_rope_head_dim'");
  }

  // Layer schedule: Hub compress_ratios (layers + MTP), else transformers layer_types.
  if (r.has("compress_ratios")) {
    const json& a = r.at("compress_ratios");
    if (!a.is_array()) r.fail("field 'compress_ratios' must be an array");
    for (const json& v : a) {
      if (!v.is_number_integer()) {
        r.fail("field 'compress_ratios' must hold integers");
        break;
      }
      c.compress_ratios.push_back(v.get<int>());
    }
  } else if (r.has("layer_types")) {
    const json& a = r.at("layer_types");
    json rates = r.has("compress_rates") ? r.at("compress_rates") : json();
    for (const json& v : a) {
      bool ok = v.is_string();
      int ratio = ok ? ratio_of_layer_type(v.get<std::string>(), rates, &ok) : 0;
      if (!ok) {
        r.fail("field 'layer_types' has an unknown entry " + v.dump());
        break;
      }
      c.compress_ratios.push_back(ratio);
    }
    for (int i = 0; i < c.num_mtp_layers; ++i) c.compress_ratios.push_back(0);  // MTP: sliding
  } else {
    r.fail("missing required field 'compress_ratios' (or 'layer_types')");
  }
  RETURN_IF_ERROR(r.status());

  // Hash layers: Hub num_hash_layers, else the leading run of "hash_moe" in mlp_layer_types.
  if (r.has("num_hash_layers")) {
    r.req("num_hash_layers", &c.num_hash_layers);
  } else if (r.has("mlp_layer_types")) {
    const json& a = r.at("mlp_layer_types");
    bool in_prefix = true;
    for (const json& v : a) {
      bool hash = v.is_string() && v.get<std::string>() == "hash_moe";
      if (hash && !in_prefix) r.fail("field 'mlp_layer_types': hash_moe must come first");
      if (hash)
        ++c.num_hash_layers;
      else
        in_prefix = false;
    }
  } else {
    c.num_hash_layers = 3;  // transformers' default for deepseek_v4
  }

  // YaRN for the compressed layers: Hub rope_scaling, else rope_parameters.compress.
  json yarn;
  if (r.has("rope_scaling")) {
    yarn = r.at("rope_scaling");
  } else if (r.has("rope_parameters") && r.at("rope_parameters").contains("compress")) {
    yarn = r.at("rope_parameters")["compress"];
    if (yarn.contains("rope_theta") && yarn["rope_theta"].is_number())
      c.compress_rope_theta = yarn["rope_theta"].get<double>();
  }
  if (yarn.is_object()) {
    std::string type = yarn.value("rope_type", yarn.value("type", std::string("default")));
    if (type == "yarn") {
      FieldReader y(yarn, origin + " (rope scaling)");
      c.yarn.enabled = true;
      y.req("factor", &c.yarn.factor);
      y.req("original_max_position_embeddings", &c.yarn.original_max_position_embeddings);
      y.opt("beta_fast", &c.yarn.beta_fast);
      y.opt("beta_slow", &c.yarn.beta_slow);
      if (yarn.contains("attention_factor") && yarn["attention_factor"] != 1.0)
        y.fail("rope scaling 'attention_factor' must be 1.0 for deepseek_v4 (no YaRN mscale)");
      RETURN_IF_ERROR(y.status());
    } else if (type != "default") {
      r.fail("rope scaling type '" + type + "' is not supported (yarn or default)");
    }
  }

  if (r.has("quantization_config")) {
    const json& q = r.at("quantization_config");
    FieldReader qr(q, origin + " (quantization_config)");
    std::string method;
    qr.req("quant_method", &method);
    RETURN_IF_ERROR(qr.status());
    if (method != "fp8")
      return invalid_argument(origin + ": quantization_config.quant_method '" + method +
                              "' is not supported (fp8)");
    c.fp8_weights = true;
    if (q.contains("weight_block_size")) {
      const json& b = q["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer())
        return invalid_argument(origin +
                                ": quantization_config.weight_block_size must be [rows, cols]");
      c.weight_block_rows = b[0];
      c.weight_block_cols = b[1];
    }
  }
  RETURN_IF_ERROR(r.status());
  RETURN_IF_ERROR(validate_config(c, origin));
  return c;
}

Status validate_config(const Config& c, const std::string& origin) {
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
  RETURN_IF_ERROR(positive(c.sliding_window, "sliding_window"));
  RETURN_IF_ERROR(positive(c.hc_mult, "hc_mult"));
  RETURN_IF_ERROR(positive(c.hc_sinkhorn_iters, "hc_sinkhorn_iters"));
  RETURN_IF_ERROR(positive(c.n_routed_experts, "n_routed_experts"));
  RETURN_IF_ERROR(positive(c.experts_per_token, "num_experts_per_tok"));
  if (c.rope_dim <= 0 || c.rope_dim % 2 || c.rope_dim > c.head_dim || c.rope_dim > c.index_head_dim)
    return bad("qk_rope_head_dim must be even and at most head_dim and index_head_dim");
  if (c.o_groups <= 0 || c.num_heads % c.o_groups)
    return bad("num_attention_heads must be a multiple of o_groups");
  if (c.experts_per_token > c.n_routed_experts)
    return bad("num_experts_per_tok exceeds n_routed_experts");
  if (static_cast<int>(c.compress_ratios.size()) != c.num_layers + c.num_mtp_layers)
    return bad("compress_ratios has " + std::to_string(c.compress_ratios.size()) +
               " entries, expected num_hidden_layers + num_nextn_predict_layers = " +
               std::to_string(c.num_layers + c.num_mtp_layers));
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    int r = c.compress_ratios[i];
    if (r < 0 || (r > 0 && r != 4 && (r < 2 || (r & (r - 1)))))
      return bad("compress_ratios[" + std::to_string(i) + "] = " + std::to_string(r) +
                 " is not 0, 4 or a power of two");
    if (static_cast<int>(i) >= c.num_layers && r != 0)
      return bad("compress_ratios[" + std::to_string(i) + "] (MTP layer) must be 0");
  }
  if (c.num_hash_layers < 0 || c.num_hash_layers > c.num_layers)
    return bad("num_hash_layers out of range");
  if (c.num_mtp_layers < 0 || c.num_mtp_layers > 1)
    return bad("num_nextn_predict_layers must be 0 or 1");
  return ok_status();
}

StatusOr<Config> load_config(const std::string& model_dir) {
  std::string path;
  ASSIGN_OR_RETURN(std::string text, model_config::read_config_file(model_dir, &path));
  return parse_config_json(text, path);
}

}  // namespace deepinfer::v4
