// The model's weights on the device. Projections stay in their checkpoint format
// (DeviceMatrix: FP8 block-scaled and MXFP4 as stored, their scales beside them; float
// projections as bf16), so the device holds about the checkpoint's bytes. Everything the other
// ops read is fp32 (norms, mHC, sinks, ape, embedding, and the router, whose top-k must not flip
// on rounding), tid2eid int32. The MTP layer is not uploaded.
//
// Loaded straight from the checkpoint, one tensor at a time: host memory never holds more than
// one float tensor.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/quant/device_matrix.h"
#include "deepinfer/base/status.h"
#include "deepinfer/model/deepseek_v4/config.h"
#include "deepinfer/model/deepseek_v4/weights.h"
#include "deepinfer/model/deepseek_v41/config.h"

namespace deepinfer {
class Checkpoint;
}

namespace deepinfer::cuda {

struct SourceView;

class DeviceWeights {
 public:
  // Validates the checkpoint as load_weights does (errors name the tensor and file), then uploads.
  // progress, when set, is called after every tensor. The MTP layer (mtp.*) is uploaded only
  // with_mtp (speculative decoding asked for).
  static StatusOr<DeviceWeights> load(const v4::Config& c, const Checkpoint& ckpt,
                                      const std::function<void(const v4::LoadProgress&)>& progress,
                                      bool with_mtp = false);

  // Abort naming the tensor when absent: the manifest was validated at load, so a miss is a bug.
  // deepseek_v41: the same, less the Engram tables, which stay in host memory.
  // with_drafter: the DSpark tensors too (mtp.*; speculative decoding asked for).
  static StatusOr<DeviceWeights> load(const v41::Config& c, const Checkpoint& ckpt,
                                      const std::function<void(const v4::LoadProgress&)>& progress,
                                      bool with_drafter = false);
  const DeviceMatrix& matrix(const std::string& name) const;
  const float* f(const std::string& name) const;
  const int32_t* i(const std::string& name) const;
  int64_t bytes() const { return bytes_; }                // on the device
  int64_t stored_bytes() const { return stored_bytes_; }  // the same tensors in the checkpoint
  // Elements of the largest FP8 or MXFP4 matrix: Linear's dequantization scratch.
  int64_t largest_quantized() const { return largest_quantized_; }

 private:
  DeviceWeights() = default;
  Status add(const SourceView& s, const std::function<Status(float*)>& load_float,
             const std::function<Status(std::vector<int32_t>*)>& load_index, bool projection);

  // A projection's device bytes: the weight (bf16, E4M3 or packed FP4) and its scales.
  struct Matrix {
    DeviceBuffer<uint8_t> data, mx_scale;
    DeviceBuffer<float> block_scale;
    DeviceMatrix view;
  };
  std::unordered_map<std::string, Matrix> mats_;
  std::unordered_map<std::string, DeviceBuffer<float>> f32_;
  std::unordered_map<std::string, DeviceBuffer<int32_t>> i32_;
  int64_t bytes_ = 0, stored_bytes_ = 0, largest_quantized_ = 0;
};

// Whether the forward uses `name` (a canonical weight name) as a projection (a DeviceMatrix).
bool is_projection(const std::string& name);

}  // namespace deepinfer::cuda
