// The model's weights on the device: projections as bf16 [out, in] (the GEMM operand type),
// everything the other ops read as fp32 (norms, mHC, sinks, ape, embedding, and the router,
// whose top-k must not flip on rounding), tid2eid as int32. The MTP layer is not uploaded.
//
// Loaded straight from the checkpoint: FP8 and MXFP4 tensors travel to the device as stored and
// are dequantized there (quant/dequantize.h), so host memory never holds more than one float
// tensor and a 34 GB quantized checkpoint needs no 230 GB of host fp32.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/weights.h"

namespace deepinfer {
class Checkpoint;
}

namespace deepinfer::cuda {

class DeviceWeights {
 public:
  // Validates the checkpoint as load_weights does (errors name the tensor and file), then uploads.
  // progress, when set, is called after every tensor.
  static StatusOr<DeviceWeights> load(const v4::Config& c, const Checkpoint& ckpt,
                                      const std::function<void(const v4::LoadProgress&)>& progress);

  // Abort naming the tensor when absent: the manifest was validated at load, so a miss is a bug.
  const __nv_bfloat16* bf16(const std::string& name) const;
  const float* f(const std::string& name) const;
  const int32_t* i(const std::string& name) const;
  int64_t bytes() const { return bytes_; }

 private:
  DeviceWeights() = default;

  std::unordered_map<std::string, DeviceBuffer<uint16_t>> bf16_;
  std::unordered_map<std::string, DeviceBuffer<float>> f32_;
  std::unordered_map<std::string, DeviceBuffer<int32_t>> i32_;
  int64_t bytes_ = 0;
};

// Whether the forward uses `name` (a canonical weight name) as a bf16 GEMM operand.
bool is_bf16_projection(const std::string& name);

}  // namespace deepinfer::cuda
