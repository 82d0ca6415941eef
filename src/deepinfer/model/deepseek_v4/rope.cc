#include "deepinfer/model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::v4 {

RopeTable::RopeTable(double theta, int dim, const YarnConfig* yarn) {
  const int half = dim / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) inv_freq_[i] = 1.0 / std::pow(theta, 2.0 * i / dim);
  if (!yarn || !yarn->enabled) return;
  // YaRN frequency blend: dims below `low` keep their frequency, above `high` are divided by
  // the factor, linear in between. Correction range truncated to integers as in the reference.
  auto correction_dim = [&](double rotations) {
    return dim * std::log(yarn->original_max_position_embeddings / (rotations * 2 * M_PI)) /
           (2 * std::log(theta));
  };
  double low = std::max(0.0, std::floor(correction_dim(yarn->beta_fast)));
  double high = std::min(static_cast<double>(dim - 1), std::ceil(correction_dim(yarn->beta_slow)));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    inv_freq_[i] = inv_freq_[i] * (1 - ramp) + inv_freq_[i] / yarn->factor * ramp;
  }
}

void RopeTable::rotate(float* x, int64_t pos, bool inverse) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];
    const float c = static_cast<float>(std::cos(a));
    const float s = static_cast<float>(inverse ? -std::sin(a) : std::sin(a));
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x1 * c + x0 * s;
  }
}

}  // namespace deepinfer::v4
