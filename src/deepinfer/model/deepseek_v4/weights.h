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
}

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

// All weights as fp32 (integer tables as int32), keyed by canonical name.
class Weights {
 public:
  const float* f(const std::string& name) const;  // CHECKs presence (manifest is validated)
  const int32_t* i(const std::string& name) const;
  bool has(const std::string& name) const { return f32_.count(name) || i32_.count(name); }
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

// Validates the checkpoint against the manifest (missing, unexpected, shape, dtype) and
// dequantizes everything to fp32. Errors name the tensor and its file.
StatusOr<Weights> load_weights(const Checkpoint& ckpt, const Config& c,
                               const std::function<void(const LoadProgress&)>& progress = {});

}  // namespace deepinfer::v4
