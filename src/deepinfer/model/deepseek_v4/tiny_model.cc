#include "deepinfer/model/deepseek_v4/tiny_model.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/random_tensors.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::v4 {
namespace {

namespace fs = std::filesystem;
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

struct Preset {
  const char* name;
  std::vector<int> ratios;  // layers then MTP (0)
  int hash_layers;
  // V4-Flash's real per-layer dims (spec §3), always FP8 + MXFP4, generated in parallel with
  // one RNG stream per tensor (a serial stream would take minutes for 50B values).
  bool flash_dims = false;
};

// default: every layer kind (sliding, CSA + indexer, HCA) and hash + score routing.
const Preset kPresets[] = {
    {"default", {0, 4, 16, 4, 16, 0}, 2},
    {"sliding", {0, 0, 0}, 1},
    {"csa", {4, 4, 4, 0}, 1},
    {"hca", {16, 16, 0, 0}, 0},
    // The first 8 layers of V4-Flash's schedule (2 sliding, then CSA/HCA alternating), about
    // 30 GB: the benchmark model of issue 5.
    {"v4-flash-8layer", {0, 0, 4, 128, 4, 128, 4, 128, 0}, 3, true},
};

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

json preset_config(const Preset& p) {
  json c = base_config();
  c["num_hidden_layers"] = static_cast<int>(p.ratios.size()) - 1;
  c["compress_ratios"] = p.ratios;
  c["num_hash_layers"] = p.hash_layers;
  if (p.flash_dims) apply_flash_dims(c);
  return c;
}

// One manifest entry's random tensor(s) (a quantized weight adds its .scale).
void add_random_tensor(const Config& c, const WeightSpec& s, bool quantized, std::mt19937_64& rng,
                       std::normal_distribution<float>& normal, std::vector<TensorRecord>* rec) {
  std::vector<TensorRecord>& out = *rec;
  int64_t numel = 1;
  for (int64_t d : s.shape) numel *= d;
  if (s.kind == WeightKind::kIndex) {  // tid2eid: distinct experts per token
    const int64_t K = s.shape[1];
    std::vector<int64_t> ids(numel);
    std::vector<int64_t> perm(c.n_routed_experts);
    for (int64_t t = 0; t < s.shape[0]; ++t) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::copy(perm.begin(), perm.begin() + K, ids.begin() + t * K);
    }
    out.push_back({s.name, DType::kI64, s.shape, as_bytes(ids.data(), ids.size() * 8)});
    return;
  }
  // Non-trivial values everywhere: norms near 1, sinks/ape/bias/base of order 1.
  const std::vector<float> v = random_values(s.name, s.shape, rng, normal);
  const bool fp8 = quantized && s.kind == WeightKind::kDense;
  const bool fp4 = quantized && s.kind == WeightKind::kExpert && s.shape[1] % 32 == 0;
  if (fp8) {
    add_fp8(out, s.name, v, s.shape[0], s.shape[1], c.weight_block_rows, c.weight_block_cols);
  } else if (fp4) {
    add_mxfp4(out, s.name, v, s.shape[0], s.shape[1]);
  } else if (ends_with(s.name, "attn_sink") || s.name.find("hc_") != std::string::npos ||
             ends_with(s.name, ".ape") || ends_with(s.name, "gate.bias")) {
    out.push_back({s.name, DType::kF32, s.shape, as_bytes(v.data(), v.size() * 4)});  // as Hub
  } else {
    out.push_back({s.name, DType::kBF16, s.shape, to_bf16(v)});
  }
}

}  // namespace

std::vector<std::string> tiny_model_presets() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.push_back(p.name);
  return names;
}

Status write_tiny_model(const std::string& dir, const TinyModelOptions& o) {
  json cj;
  bool flash = false;
  if (!o.config_path.empty()) {
    std::ifstream f(o.config_path);
    if (!f) return not_found(o.config_path + ": cannot open config");
    cj = json::parse(f, nullptr, false);
    if (cj.is_discarded()) return invalid_argument(o.config_path + ": invalid JSON");
  } else {
    const Preset* p = nullptr;
    for (const auto& q : kPresets)
      if (o.preset == q.name) p = &q;
    if (!p) {
      std::string all;
      for (const auto& n : tiny_model_presets()) all += (all.empty() ? "" : ", ") + n;
      return invalid_argument("unknown --preset '" + o.preset + "' (one of: " + all + ")");
    }
    cj = preset_config(*p);
    flash = p->flash_dims;
  }
  const bool quantized = o.quantized || flash;
  if (quantized)
    cj["quantization_config"] = {{"quant_method", "fp8"},
                                 {"fmt", "e4m3"},
                                 {"scale_fmt", "ue8m0"},
                                 {"weight_block_size", {128, 128}},
                                 {"activation_scheme", "dynamic"}};
  ASSIGN_OR_RETURN(
      Config c,
      parse_config_json(cj.dump(), o.config_path.empty() ? "preset " + o.preset : o.config_path));
  const std::vector<WeightSpec> manifest = weight_manifest(c);
  std::vector<std::vector<TensorRecord>> records(manifest.size());
  generate_tensors(manifest.size(), flash, o.seed, o.progress,
                   [&](size_t i, std::mt19937_64& rng, std::normal_distribution<float>& normal) {
                     add_random_tensor(c, manifest[i], quantized, rng, normal, &records[i]);
                   });
  std::vector<TensorRecord> out;
  for (auto& r : records)
    for (auto& t : r) out.push_back(std::move(t));
  records.clear();
  return write_model_dir(
      dir, std::move(out),
      flash ? std::max<size_t>(o.max_shard_bytes, size_t{4} << 30) : o.max_shard_bytes, cj.dump(2),
      o.tokenizer_dir);
}

StatusOr<std::string> ensure_default_model(const std::string& tokenizer_dir) {
  std::string root;
  if (const char* d = std::getenv("DEEPINFER_CACHE_DIR")) {
    root = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME")) {
    root = std::string(x) + "/deepinfer";
  } else if (const char* h = std::getenv("HOME")) {
    root = std::string(h) + "/.cache/deepinfer";
  } else {
    return failed_precondition("no cache directory: set DEEPINFER_CACHE_DIR");
  }
  // Versioned name: a change to the default's recipe gets a fresh directory.
  const std::string dir = root + "/tiny-default-v1";
  if (fs::exists(dir + "/READY")) return dir;
  const std::string tmp = dir + ".tmp" + std::to_string(::getpid());
  TinyModelOptions o;
  o.quantized = true;
  o.tokenizer_dir = tokenizer_dir;
  RETURN_IF_ERROR(write_tiny_model(tmp, o));
  std::ofstream(tmp + "/READY") << "deepinfer embedded default (preset default, seed 0)\n";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec && !fs::exists(dir + "/READY"))
    return data_loss("cannot move " + tmp + " to " + dir + ": " + ec.message());
  fs::remove_all(tmp, ec);
  return dir;
}

}  // namespace deepinfer::v4
