#include "deepinfer/model/deepseek_v41/tiny_model.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "deepinfer/loader/safetensors_writer.h"
#include "deepinfer/loader/streaming_shard_writer.h"
#include "deepinfer/model/deepseek_v4/random_tensors.h"
#include "deepinfer/model/deepseek_v4/tensor_rng.h"
#include "deepinfer/model/deepseek_v41/config.h"
#include "deepinfer/model/deepseek_v41/engram_hash.h"
#include "deepinfer/model/deepseek_v41/engram_token_map.h"
#include "deepinfer/model/deepseek_v41/weights.h"
#include "deepinfer/tensor/dtype.h"
#include "deepinfer/tokenizer/tokenizer.h"

namespace deepinfer::v41 {
namespace {

using nlohmann::json;

struct Preset {
  const char* name;
  bool flash_dims;  // spec §11.1's dims, FP8 + MXFP4, streamed (write_streamed)
  bool dspark;      // with DSpark draft layers and their tensors
};

const Preset kPresets[] = {
    {"v41-default", false, false}, {"v41-flash-8layer", true, false}, {"v41-dspark", false, true}};

// v41-default's schedule plus three DSpark stages (as released) at tiny dims: taps from layers 3,
// 5 and 6 (a consumer, a reuse layer, the last), blocks of 5, 4 experts top-2, Markov rank 8.
void add_dspark(json& t) {
  std::vector<int> ratios = t["compress_ratios"].get<std::vector<int>>();
  ratios.insert(ratios.end(), {0, 0, 0});
  const int64_t vocab = t["vocab_size"].get<int64_t>();
  t.update(json{{"num_nextn_predict_layers", 3},
                {"compress_ratios", ratios},
                {"dspark_block_size", 5},
                // The released id when the vocabulary has it (the bundled tokenizer's does).
                {"dspark_noise_token_id", std::min<int64_t>(128799, vocab - 1)},
                {"dspark_target_layer_ids", {3, 5, 6}},
                {"dspark_markov_rank", 8},
                {"dspark_n_routed_experts", 4},
                {"dspark_num_experts_per_tok", 2}});
}

// The schedule both presets share: every layer role of spec §11.2 in 7 (tiny) or 8 layers.
json schedule(bool flash) {
  std::vector<int> ratios = {0, 0, 2, 2, 1, 1, 1};
  if (flash) ratios.push_back(1);
  return json{{"num_hidden_layers", static_cast<int>(ratios.size())},
              {"num_nextn_predict_layers", 0},
              {"compress_ratios", ratios},
              {"kv_source_layer_ids", {2, 4}},
              {"index_source_layer_ids", {2, 4, 6}},
              {"candidate_source_layer_id", 4},
              {"engram_layer_ids", {1, 4}}};
}

json rope(int64_t original_max_position) {
  const json yarn = {{"rope_type", "yarn"},
                     {"factor", 16.0},
                     {"original_max_position_embeddings", original_max_position},
                     {"beta_fast", 32},
                     {"beta_slow", 1}};
  json compress = yarn;
  compress["rope_theta"] = 160000.0;
  compress["attention_factor"] = 1.0;
  // Both spellings, as save_pretrained writes them (golden_v41 config.json).
  return json{
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"rope_scaling", yarn},
      {"rope_parameters",
       {{"main", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}, {"compress", compress}}}};
}

json text_config(bool flash) {
  json t = {{"model_type", "deepseek_v41_text"},
            {"architectures", {"DeepseekV41ForCausalLM"}},
            {"hidden_size", 64},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 1},
            {"head_dim", 64},
            {"qk_rope_head_dim", 16},
            {"q_lora_rank", 32},
            {"o_groups", 2},
            {"o_lora_rank", 16},
            {"sliding_window", 16},
            {"max_position_embeddings", 1048576},
            {"index_n_heads", 4},
            {"index_head_dim", 32},
            {"index_topk", 8},
            {"candidate_topk_blocks", 4},
            {"candidate_block_size", 4},
            {"n_routed_experts", 8},
            {"num_experts_per_tok", 2},
            {"n_shared_experts", 1},
            {"moe_intermediate_size", 32},
            {"scoring_func", "sqrtsoftplus"},
            {"topk_method", "noaux_tc"},
            {"norm_topk_prob", true},
            {"routed_scaling_factor", 1.5},
            {"gate_temp", 1.0},
            {"swiglu_limit", 10.0},
            {"hidden_act", "silu"},
            {"hc_mult", 4},
            {"hc_sinkhorn_iters", 20},
            {"hc_eps", 1e-6},
            {"rms_norm_eps", 1e-20},
            {"engram_max_ngram_size", 3},
            {"engram_n_heads", 2},
            {"engram_head_dim", 32},
            {"engram_vocab_size", 37},
            {"engram_pad_id", 2},
            {"bos_token_id", 0},
            {"eos_token_id", 1},
            {"tie_word_embeddings", false}};
  t.update(schedule(flash));
  if (flash) {
    t.update(json{{"vocab_size", 129280},
                  {"hidden_size", 5120},
                  {"num_attention_heads", 64},
                  {"head_dim", 512},
                  {"qk_rope_head_dim", 64},
                  {"q_lora_rank", 1280},
                  {"o_groups", 8},
                  {"o_lora_rank", 1024},
                  {"sliding_window", 128},
                  {"index_n_heads", 32},
                  {"index_head_dim", 128},
                  {"index_topk", 512},
                  {"candidate_topk_blocks", 2048},
                  {"candidate_block_size", 8},
                  {"n_routed_experts", 384},
                  {"num_experts_per_tok", 6},
                  {"moe_intermediate_size", 2304},
                  {"engram_max_ngram_size", 4},
                  {"engram_n_heads", 8},
                  {"engram_head_dim", 256},
                  // Shrunk 100x from 16,000,000: tables of ~3.84M rows instead of ~384M.
                  {"engram_vocab_size", 160000}});
  }
  t.update(rope(flash ? 65536 : 128));
  return t;
}

// engram_compressed_vocab_size and the tables' rows follow from the tokenizer and the hash
// parameters; the tiny model's vocabulary is the tokenizer's, so every id has an Engram entry.
Status fill_engram_sizes(json& t, const std::string& tokenizer_dir, bool flash) {
  if (tokenizer_dir.empty())
    return invalid_argument(
        "make-tiny-model: the deepseek_v41 presets have Engram layers and "
        "need --tokenizer (its tokenizer.json gives the Engram token map)");
  ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tok,
                   tokenizer::Tokenizer::from_file(tokenizer_dir + "/tokenizer.json"));
  ASSIGN_OR_RETURN(EngramTokenMap map, build_engram_token_map(*tok));
  if (!flash) t["vocab_size"] = static_cast<int64_t>(map.compressed.size());
  const int64_t pad = t["engram_pad_id"].get<int64_t>();
  if (pad >= static_cast<int64_t>(map.compressed.size()))
    return invalid_argument(tokenizer_dir + "/tokenizer.json has no engram_pad_id " +
                            std::to_string(pad));
  t["engram_compressed_vocab_size"] = map.compressed_vocab_size;
  EngramHashParams params;
  params.layer_ids = t["engram_layer_ids"].get<std::vector<int32_t>>();
  params.max_ngram_size = t["engram_max_ngram_size"].get<int32_t>();
  params.n_heads = t["engram_n_heads"].get<int32_t>();
  params.vocab_size = t["engram_vocab_size"].get<int64_t>();
  params.compressed_vocab_size = map.compressed_vocab_size;
  params.pad_id = map.compressed[pad];
  ASSIGN_OR_RETURN(EngramHasher hasher, EngramHasher::create(params));
  std::vector<int64_t> rows;
  const int last = hasher.n_cols() - 1;
  for (int layer = 0; layer < hasher.n_layers(); ++layer)
    rows.push_back(hasher.offset(layer, last) + hasher.prime(layer, last));
  t["engram_num_embeddings"] = rows;
  return ok_status();
}

json quantization_config() {
  return json{{"quant_method", "fp8"},          {"fmt", "e4m3"},
              {"scale_fmt", "ue8m0"},           {"weight_block_size", {32, 32}},
              {"activation_scheme", "dynamic"}, {"expert_dtype", "fp4"}};
}

// How one manifest entry is stored (the released checkpoint's storage); decides both the
// streamed writer's plan and the bytes.
enum class Storage { kEngramFp8, kEngramBf16, kMxfp4, kFp8, kF32, kBF16 };

Storage storage_of(const WeightSpec& s, bool quantized) {
  if (s.kind == WeightKind::kEngramTable)
    return quantized ? Storage::kEngramFp8 : Storage::kEngramBf16;
  const int64_t cols = s.shape.size() > 1 ? s.shape[1] : 1;
  if (quantized && s.kind == WeightKind::kExpert && cols % 32 == 0) return Storage::kMxfp4;
  if (quantized && (s.kind == WeightKind::kDense || s.kind == WeightKind::kExpert))
    return Storage::kFp8;
  if (v4::ends_with(s.name, "attn_sink") || s.name.find("hc_") != std::string::npos ||
      v4::ends_with(s.name, "gate.bias") || v4::ends_with(s.name, "gate.bias_vl"))
    return Storage::kF32;
  return Storage::kBF16;
}

// The name whose role sizes an entry's values (v4::value_moments): the Engram gains are used as
// a product q_w * k_w, so they stay near 1, as norms.
std::string values_name(const WeightSpec& s) {
  if (v4::ends_with(s.name, "engram.q_weight") || v4::ends_with(s.name, "engram.k_weight"))
    return s.name + ".norm.weight";
  return s.name;
}

// The stored tensors of one manifest entry, as add_random_tensor makes them.
std::vector<PlannedTensor> stored_layout(const Config& c, const WeightSpec& s, bool quantized) {
  const int64_t rows = s.shape[0], cols = s.shape.size() > 1 ? s.shape[1] : 1;
  switch (storage_of(s, quantized)) {
    case Storage::kEngramFp8:
      return {v4::planned_tensor(s.name, DType::kF8E4M3, {rows, cols}),
              v4::planned_tensor(v4::scale_name(s.name), DType::kF8E8M0, {rows, (cols + 31) / 32})};
    case Storage::kEngramBf16:
      return {v4::planned_tensor(s.name, DType::kBF16, s.shape),
              v4::planned_tensor(v4::scale_name(s.name), DType::kF32, {rows, 1})};
    case Storage::kMxfp4:
      return {v4::planned_tensor(s.name, DType::kI8, {rows, cols / 2}),
              v4::planned_tensor(v4::scale_name(s.name), DType::kF8E8M0, {rows, cols / 32})};
    case Storage::kFp8: {
      const int64_t br = c.weight_block_rows, bc = c.weight_block_cols;
      return {v4::planned_tensor(s.name, DType::kF8E4M3, {rows, cols}),
              v4::planned_tensor(v4::scale_name(s.name), DType::kF8E8M0,
                                 {(rows + br - 1) / br, (cols + bc - 1) / bc})};
    }
    case Storage::kF32:
      return {v4::planned_tensor(s.name, DType::kF32, s.shape)};
    case Storage::kBF16:
      return {v4::planned_tensor(s.name, DType::kBF16, s.shape)};
  }
  return {};
}

// One manifest entry's random tensor(s) in the storage the released checkpoint uses; values()
// draws the entry's floats.
template <class Values>
void add_random_tensor(const Config& c, const WeightSpec& s, bool quantized, const Values& values,
                       std::vector<TensorRecord>* out) {
  const std::vector<float> v = values();
  const int64_t rows = s.shape[0], cols = s.shape.size() > 1 ? s.shape[1] : 1;
  switch (storage_of(s, quantized)) {
    case Storage::kEngramFp8:  // FP8 rows, E8M0 per 32 channels: [rows, ceil(dim / 32)]
      v4::add_fp8(*out, s.name, v, rows, cols, 1, 32);
      return;
    case Storage::kEngramBf16: {  // the scale exists even for a float table (and is not applied)
      out->push_back({s.name, DType::kBF16, s.shape, v4::to_bf16(v)});
      const std::vector<float> ones(rows, 1.0f);
      out->push_back({v4::scale_name(s.name),
                      DType::kF32,
                      {rows, 1},
                      v4::as_bytes(ones.data(), ones.size() * 4)});
      return;
    }
    case Storage::kMxfp4:
      v4::add_mxfp4(*out, s.name, v, rows, cols);
      return;
    case Storage::kFp8:
      v4::add_fp8(*out, s.name, v, rows, cols, c.weight_block_rows, c.weight_block_cols);
      return;
    case Storage::kF32:
      out->push_back({s.name, DType::kF32, s.shape, v4::as_bytes(v.data(), v.size() * 4)});
      return;
    case Storage::kBF16:
      out->push_back({s.name, DType::kBF16, s.shape, v4::to_bf16(v)});
      return;
  }
}

// Streamed (the flash preset; --streamed): each entry made from (seed, name, shape) alone, in
// parallel, and written shard by shard (v4's streamed writer: the 60 GB preset is never held
// whole, and a disk without room fails before anything is written).
Status write_streamed(const std::string& dir, const Config& c,
                      const std::vector<WeightSpec>& manifest, bool quantized,
                      size_t max_shard_bytes, const std::string& config_json,
                      const v4::TinyModelOptions& o) {
  std::vector<PlannedTensor> tensors;
  std::vector<size_t> group_of;
  uint64_t total = 0;
  for (size_t i = 0; i < manifest.size(); ++i)
    for (PlannedTensor& t : stored_layout(c, manifest[i], quantized)) {
      total += t.bytes;
      tensors.push_back(std::move(t));
      group_of.push_back(i);
    }
  RETURN_IF_ERROR(v4::check_model_room(dir, total));
  RETURN_IF_ERROR(v4::prepare_model_dir(dir));
  StreamingWriteOptions wo;
  wo.max_shard_bytes = max_shard_bytes;
  wo.metadata = {{"format", "pt"}};
  wo.progress = o.stream_progress;
  auto make = [&](size_t g) -> StatusOr<std::vector<TensorRecord>> {
    const WeightSpec& s = manifest[g];
    v4::TensorRng rng(o.seed, s.name, s.shape);
    std::vector<TensorRecord> out;
    add_random_tensor(
        c, s, quantized, [&] { return v4::name_seeded_values(values_name(s), s.shape, rng); },
        &out);
    return out;
  };
  RETURN_IF_ERROR(write_sharded_streaming(dir, std::move(tensors), group_of, make, wo).status());
  return v4::finish_model_dir(dir, config_json, o.tokenizer_dir);
}

}  // namespace

std::vector<std::string> tiny_model_presets() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.push_back(p.name);
  return names;
}

StatusOr<std::string> tiny_model_config_json(const std::string& preset,
                                             const std::string& tokenizer_dir) {
  const Preset* p = nullptr;
  for (const auto& q : kPresets)
    if (preset == q.name) p = &q;
  if (!p) return invalid_argument("unknown deepseek_v41 preset '" + preset + "'");
  json text = text_config(p->flash_dims);
  RETURN_IF_ERROR(fill_engram_sizes(text, tokenizer_dir, p->flash_dims));
  if (p->dspark) add_dspark(text);
  // The released layout: composite config, the ids and quantization_config at the top.
  json cj = {{"architectures", {"DeepseekV41ForCausalLM"}},
             {"model_type", "deepseek_v41"},
             {"dtype", "bfloat16"},
             {"bos_token_id", 0},
             {"eos_token_id", 1},
             {"pad_token_id", 2},
             {"tie_word_embeddings", false},
             {"text_config", text}};
  if (p->flash_dims) {
    cj["image_token_id"] = 129264;
    cj["quantization_config"] = quantization_config();
  }
  return cj.dump(2);
}

bool is_tiny_model_preset(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name) return true;
  return false;
}

Status write_tiny_model(const std::string& dir, const v4::TinyModelOptions& o) {
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
    flash = p->flash_dims;
    ASSIGN_OR_RETURN(std::string text, tiny_model_config_json(o.preset, o.tokenizer_dir));
    cj = json::parse(text);
  }
  const bool quantized = o.quantized || flash;
  if (quantized) cj["quantization_config"] = quantization_config();
  ASSIGN_OR_RETURN(
      Config c,
      parse_config_json(cj.dump(), o.config_path.empty() ? "preset " + o.preset : o.config_path));
  // A config with draft layers gets their tensors too (the released checkpoint has them).
  const std::vector<WeightSpec> manifest = weight_manifest(c, c.num_nextn_layers > 0);
  const size_t shard_bytes =
      flash ? std::max<size_t>(o.max_shard_bytes, size_t{4} << 30) : o.max_shard_bytes;
  if (flash || o.streamed)
    return write_streamed(dir, c, manifest, quantized, shard_bytes, cj.dump(2), o);
  // The small presets' recipe: one serial random stream in manifest order, all in memory.
  std::vector<std::vector<TensorRecord>> records(manifest.size());
  v4::generate_tensors(
      manifest.size(), false, o.seed, o.progress,
      [&](size_t i, std::mt19937_64& rng, std::normal_distribution<float>& normal) {
        const WeightSpec& s = manifest[i];
        add_random_tensor(
            c, s, quantized,
            [&] { return v4::random_values(values_name(s), s.shape, rng, normal); }, &records[i]);
      });
  std::vector<TensorRecord> out;
  for (auto& r : records)
    for (auto& t : r) out.push_back(std::move(t));
  records.clear();
  return v4::write_model_dir(dir, std::move(out), shard_bytes, cj.dump(2), o.tokenizer_dir);
}

}  // namespace deepinfer::v41
