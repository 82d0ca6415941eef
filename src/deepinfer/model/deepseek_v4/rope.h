// Interleaved partial RoPE (spec §5): pairs (x[2i], x[2i+1]) of the trailing rope dims rotate by
// pos * theta_i. Compressed layers use compress_rope_theta with YaRN (no mscale).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

class RopeTable {
 public:
  // kDouble: frequencies and angles in double (the V4 reference path). kTorchFp32: every step in
  // fp32 the way transformers builds its tables (frequencies, YaRN blend, angle = f32(pos) *
  // inv_freq), for models whose forward rounds the rotated values through FP8/FP4 (V4.1), where
  // a last-bit difference in an angle can move a value across a quantization bucket.
  enum class Precision { kDouble, kTorchFp32 };

  RopeTable() = default;
  RopeTable(double theta, int dim, const YarnConfig* yarn,
            Precision precision = Precision::kDouble);
  // Rotates dim values in place (the rope tail of a head); inverse uses the conjugate angle.
  void rotate(float* x, int64_t pos, bool inverse = false) const;
  const std::vector<double>& inv_freq() const { return inv_freq_; }

 private:
  void init_torch_fp32(double theta, int dim, const YarnConfig* yarn);

  Precision precision_ = Precision::kDouble;
  std::vector<double> inv_freq_;
  std::vector<float> inv_freq_f32_;  // kTorchFp32
};

}  // namespace deepinfer::v4
