// The deepseek_v4 tensor manifest (what a checkpoint must hold) and fp32 weight loading.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer {
class Checkpoint;
struct TensorInfo;
}  // namespace deepinfer

namespace deepinfer::v4 {

enum class WeightKind {
  kFloat,   // must be stored as F32/BF16/F16
  kDense,   // float, or F8_E4M3 with a 128x128 (config) block `.scale`
  kExpert,  // float, F8_E4M3 block-scaled, or packed MXFP4 (I8/U8 [out, in/2] + E8M0 `.scale`)
  kIndex,   // integer table (tid2eid): I64 or I32
};

struct WeightSpec {
  std::string name;            // canonical (Hub) name
  std::vector<int64_t> shape;  // logical shape
  WeightKind kind;
};

// Every tensor a checkpoint of this config holds, in a stable order.
std::vector<WeightSpec> weight_manifest(const Config& c);

// Manifest pieces the V4 family's blocks share (V4.1's too); each tensor goes to
// add(name under the block's prefix, logical shape, how it may be stored).
using TensorSink = std::function<void(const std::string&, std::vector<int64_t>, WeightKind)>;

// Both norms, both mHC sites, and the attention projections up to the sinks.
struct BlockCoreDims {
  int64_t hidden = 0, hc_mult = 0, head_dim = 0, num_heads = 0, q_lora_rank = 0;
  int64_t o_groups = 0, o_lora_rank = 0;
};
void block_core_tensors(const BlockCoreDims& dims, const TensorSink& add);
// The routed experts (w1, w3, w2 each) and the shared experts, if any.
void expert_tensors(int64_t hidden, int64_t moe_intermediate, int n_routed, int n_shared,
                    const TensorSink& add);

// All weights as fp32 (integer tables as int32), keyed by canonical name.
class Weights {
 public:
  const float* f(const std::string& name) const;  // CHECKs presence (manifest is validated)
  const int32_t* i(const std::string& name) const;
  bool has(const std::string& name) const { return f32_.count(name) || i32_.count(name); }
  int64_t bytes() const;  // every tensor held, as stored here
  std::unordered_map<std::string, std::vector<float>>& f32() { return f32_; }
  std::unordered_map<std::string, std::vector<int32_t>>& i32() { return i32_; }

 private:
  std::unordered_map<std::string, std::vector<float>> f32_;
  std::unordered_map<std::string, std::vector<int32_t>> i32_;
};

struct LoadProgress {
  int64_t tensors_done = 0, tensors_total = 0;
  int64_t bytes_done = 0, bytes_total = 0;
};

// Where a manifest entry lives in a checkpoint and how it is stored; the TensorInfo pointers
// live as long as the Checkpoint.
enum class WeightFormat {
  kFloat,     // F32/BF16/F16 as logically shaped
  kFp8Block,  // F8_E4M3 + a 128x128 (config) block `.scale`
  kMxfp4,     // packed FP4 [out, in/2] + E8M0 `.scale` per 32 elements
  kIndex,     // I64/I32 table
};

struct WeightSource {
  WeightSpec spec;
  const TensorInfo* tensor = nullptr;
  const TensorInfo* scale = nullptr;  // quantized formats
  WeightFormat format = WeightFormat::kFloat;
  int64_t numel() const;         // logical
  int64_t stored_bytes() const;  // the tensor and its scale as stored
};

// A config that counts MTP layers over a checkpoint holding no "mtp." tensor at all (a
// transformers save_pretrained directory: transformers drops them) loads without them: MTP is
// switched off (num_mtp_layers 0, its compress_ratios entries dropped) and one line says so on
// stderr. Returns whether it did. A checkpoint with some MTP tensors is left to the manifest
// check, which names the missing one.
bool drop_absent_mtp(const Checkpoint& ckpt, Config* c);

// Validates the checkpoint against the manifest (missing, unexpected, shape, dtype, scale
// present) without reading tensor data; one source per manifest entry, in manifest order. Errors
// name the tensor and its file. For loaders that convert on their own (the GPU's).
StatusOr<std::vector<WeightSource>> resolve_weights(const Checkpoint& ckpt, const Config& c);

// One source's values on the host: floats dequantized to fp32 (numel floats), or the index
// table as int32 with every expert id range-checked.
Status load_float(const WeightSource& src, const Config& c, float* out);
Status load_index(const WeightSource& src, const Config& c, std::vector<int32_t>* out);

// Validates the checkpoint against the manifest (missing, unexpected, shape, dtype) and
// dequantizes to fp32 every tensor `keep` accepts (null: all; expert parallelism loads only its
// rank's experts). Errors name the tensor and its file.
StatusOr<Weights> load_weights(const Checkpoint& ckpt, const Config& c,
                               const std::function<void(const LoadProgress&)>& progress = {},
                               const std::function<bool(const std::string&)>& keep = {});

}  // namespace deepinfer::v4
