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
#include "deepinfer/model/deepseek_v4/tensor_rng.h"
#include "deepinfer/model/deepseek_v4/tiny_model_presets.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/tensor/dtype.h"

namespace deepinfer::v4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How one manifest entry is stored; decides both the plan and the bytes.
enum class Storage { kI64, kFp8, kMxfp4, kF32, kBF16 };

Storage storage_of(const WeightSpec& s, bool quantized) {
  if (s.kind == WeightKind::kIndex) return Storage::kI64;  // tid2eid
  if (quantized && s.kind == WeightKind::kDense) return Storage::kFp8;
  if (quantized && s.kind == WeightKind::kExpert && s.shape[1] % 32 == 0) return Storage::kMxfp4;
  if (ends_with(s.name, "attn_sink") || s.name.find("hc_") != std::string::npos ||
      ends_with(s.name, ".ape") || ends_with(s.name, "gate.bias"))
    return Storage::kF32;  // as the Hub stores them
  return Storage::kBF16;
}

// The stored tensors of one manifest entry, as add_random_tensor makes them.
std::vector<PlannedTensor> stored_layout(const Config& c, const WeightSpec& s, bool quantized) {
  const int64_t rows = s.shape[0], cols = s.shape.size() > 1 ? s.shape[1] : 1;
  switch (storage_of(s, quantized)) {
    case Storage::kI64:
      return {planned_tensor(s.name, DType::kI64, s.shape)};
    case Storage::kFp8: {
      const int64_t br = c.weight_block_rows, bc = c.weight_block_cols;
      return {planned_tensor(s.name, DType::kF8E4M3, {rows, cols}),
              planned_tensor(scale_name(s.name), DType::kF8E8M0,
                             {(rows + br - 1) / br, (cols + bc - 1) / bc})};
    }
    case Storage::kMxfp4:
      return {planned_tensor(s.name, DType::kI8, {rows, cols / 2}),
              planned_tensor(scale_name(s.name), DType::kF8E8M0, {rows, cols / 32})};
    case Storage::kF32:
      return {planned_tensor(s.name, DType::kF32, s.shape)};
    case Storage::kBF16:
      return {planned_tensor(s.name, DType::kBF16, s.shape)};
  }
  return {};
}

// One manifest entry's random tensor(s) (a quantized weight adds its .scale). values() draws the
// entry's floats; rng shuffles tid2eid.
template <class Rng, class Values>
void add_random_tensor(const Config& c, const WeightSpec& s, bool quantized, Rng& rng,
                       const Values& values, std::vector<TensorRecord>* rec) {
  std::vector<TensorRecord>& out = *rec;
  const Storage storage = storage_of(s, quantized);
  if (storage == Storage::kI64) {  // tid2eid: distinct experts per token
    const int64_t K = s.shape[1];
    std::vector<int64_t> ids(s.shape[0] * K);
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
  const std::vector<float> v = values();
  if (storage == Storage::kFp8) {
    add_fp8(out, s.name, v, s.shape[0], s.shape[1], c.weight_block_rows, c.weight_block_cols);
  } else if (storage == Storage::kMxfp4) {
    add_mxfp4(out, s.name, v, s.shape[0], s.shape[1]);
  } else if (storage == Storage::kF32) {
    out.push_back({s.name, DType::kF32, s.shape, as_bytes(v.data(), v.size() * 4)});
  } else {
    out.push_back({s.name, DType::kBF16, s.shape, to_bf16(v)});
  }
}

// A model to write, resolved from the options.
struct Resolved {
  json config;  // as written to config.json
  Config c;
  bool quantized = false, streamed = false;
  size_t max_shard_bytes = 0;
  std::vector<WeightSpec> manifest;
};

StatusOr<Resolved> resolve(const TinyModelOptions& o) {
  Resolved r;
  bool flash = false;
  if (!o.config_path.empty()) {
    std::ifstream f(o.config_path);
    if (!f) return not_found(o.config_path + ": cannot open config");
    r.config = json::parse(f, nullptr, false);
    if (r.config.is_discarded()) return invalid_argument(o.config_path + ": invalid JSON");
  } else {
    const TinyPreset* p = find_tiny_preset(o.preset);
    if (!p) {
      std::string all;
      for (const auto& n : tiny_model_presets()) all += (all.empty() ? "" : ", ") + n;
      return invalid_argument("unknown --preset '" + o.preset + "' (one of: " + all + ")");
    }
    r.config = json::parse(tiny_preset_config_json(*p));
    flash = p->flash_dims;
  }
  r.quantized = o.quantized || flash;
  r.streamed = o.streamed || flash;
  // The flash presets' tensors reach 1 GiB (embed, head): 4 GiB shards, as on the Hub.
  r.max_shard_bytes =
      flash ? std::max<size_t>(o.max_shard_bytes, size_t{4} << 30) : o.max_shard_bytes;
  if (r.quantized)
    r.config["quantization_config"] = {{"quant_method", "fp8"},
                                       {"fmt", "e4m3"},
                                       {"scale_fmt", "ue8m0"},
                                       {"weight_block_size", {128, 128}},
                                       {"activation_scheme", "dynamic"}};
  ASSIGN_OR_RETURN(r.c,
                   parse_config_json(r.config.dump(),
                                     o.config_path.empty() ? "preset " + o.preset : o.config_path));
  r.manifest = weight_manifest(r.c);
  return r;
}

// Every stored tensor and the manifest entry (group) that makes it.
void plan_tensors(const Resolved& r, std::vector<PlannedTensor>* tensors,
                  std::vector<size_t>* group_of) {
  for (size_t i = 0; i < r.manifest.size(); ++i)
    for (PlannedTensor& t : stored_layout(r.c, r.manifest[i], r.quantized)) {
      tensors->push_back(std::move(t));
      group_of->push_back(i);
    }
}

Status write_streamed(const std::string& dir, const Resolved& r, const TinyModelOptions& o) {
  std::vector<PlannedTensor> tensors;
  std::vector<size_t> group_of;
  plan_tensors(r, &tensors, &group_of);
  uint64_t total = 0;
  for (const PlannedTensor& t : tensors) total += t.bytes;
  RETURN_IF_ERROR(check_model_room(dir, total));
  RETURN_IF_ERROR(prepare_model_dir(dir));
  StreamingWriteOptions wo;
  wo.max_shard_bytes = r.max_shard_bytes;
  wo.metadata = {{"format", "pt"}};
  wo.progress = o.stream_progress;
  auto make = [&](size_t g) -> StatusOr<std::vector<TensorRecord>> {
    const WeightSpec& s = r.manifest[g];
    TensorRng rng(o.seed, s.name, s.shape);
    std::vector<TensorRecord> out;
    add_random_tensor(
        r.c, s, r.quantized, rng, [&] { return name_seeded_values(s.name, s.shape, rng); }, &out);
    return out;
  };
  RETURN_IF_ERROR(write_sharded_streaming(dir, std::move(tensors), group_of, make, wo).status());
  return finish_model_dir(dir, r.config.dump(2), o.tokenizer_dir);
}

// The small presets' original recipe: one serial stream in manifest order, all in memory.
Status write_in_memory(const std::string& dir, const Resolved& r, const TinyModelOptions& o) {
  std::vector<std::vector<TensorRecord>> records(r.manifest.size());
  generate_tensors(r.manifest.size(), false, o.seed, o.progress,
                   [&](size_t i, std::mt19937_64& rng, std::normal_distribution<float>& normal) {
                     const WeightSpec& s = r.manifest[i];
                     add_random_tensor(
                         r.c, s, r.quantized, rng,
                         [&] { return random_values(s.name, s.shape, rng, normal); }, &records[i]);
                   });
  std::vector<TensorRecord> out;
  for (auto& rec : records)
    for (auto& t : rec) out.push_back(std::move(t));
  records.clear();
  return write_model_dir(dir, std::move(out), r.max_shard_bytes, r.config.dump(2), o.tokenizer_dir);
}

}  // namespace

std::vector<std::string> tiny_model_presets() {
  std::vector<std::string> names;
  for (const TinyPreset& p : tiny_presets()) names.push_back(p.name);
  return names;
}

Status write_tiny_model(const std::string& dir, const TinyModelOptions& o) {
  ASSIGN_OR_RETURN(Resolved r, resolve(o));
  return r.streamed ? write_streamed(dir, r, o) : write_in_memory(dir, r, o);
}

StatusOr<TinyModelPlan> plan_tiny_model(const TinyModelOptions& o) {
  ASSIGN_OR_RETURN(Resolved r, resolve(o));
  std::vector<PlannedTensor> tensors;
  std::vector<size_t> group_of;
  plan_tensors(r, &tensors, &group_of);
  TinyModelPlan plan;
  plan.config_json = r.config.dump(2);
  plan.streamed = r.streamed;
  plan.tensors = tensors.size();
  plan.max_shard_bytes = r.max_shard_bytes;
  ASSIGN_OR_RETURN(ShardPlan shards, plan_shards(std::move(tensors), r.max_shard_bytes));
  plan.total_bytes = shards.total_bytes;
  plan.shards = shards.shards.size();
  return plan;
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
