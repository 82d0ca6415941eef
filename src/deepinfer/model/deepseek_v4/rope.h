// Interleaved partial RoPE (spec §5): pairs (x[2i], x[2i+1]) of the trailing rope dims rotate by
// pos * theta_i. Compressed layers use compress_rope_theta with YaRN (no mscale).
#pragma once

#include <cstdint>
#include <vector>

#include "deepinfer/model/deepseek_v4/config.h"

namespace deepinfer::v4 {

class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(double theta, int dim, const YarnConfig* yarn);
  // Rotates dim values in place (the rope tail of a head); inverse uses the conjugate angle.
  void rotate(float* x, int64_t pos, bool inverse = false) const;
  const std::vector<double>& inv_freq() const { return inv_freq_; }

 private:
  std::vector<double> inv_freq_;
};

}  // namespace deepinfer::v4
