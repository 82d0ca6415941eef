#include "deepinfer/model/deepseek_v4/rope.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::v4 {
namespace {

// YaRN correction range (dims below `low` keep their frequency, above `high` are divided by the
// factor), truncated to integers as in the reference.
void yarn_range(double theta, int dim, const YarnConfig& yarn, double* low, double* high) {
  auto correction_dim = [&](double rotations) {
    return dim * std::log(yarn.original_max_position_embeddings / (rotations * 2 * M_PI)) /
           (2 * std::log(theta));
  };
  *low = std::max(0.0, std::floor(correction_dim(yarn.beta_fast)));
  *high = std::min(static_cast<double>(dim - 1), std::ceil(correction_dim(yarn.beta_slow)));
  if (*low == *high) *high += 0.001;
}

}  // namespace

RopeTable::RopeTable(double theta, int dim, const YarnConfig* yarn, Precision precision)
    : precision_(precision) {
  const int half = dim / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) inv_freq_[i] = 1.0 / std::pow(theta, 2.0 * i / dim);
  if (yarn && yarn->enabled) {
    double low, high;
    yarn_range(theta, dim, *yarn, &low, &high);
    for (int i = 0; i < half; ++i) {
      double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      inv_freq_[i] = inv_freq_[i] * (1 - ramp) + inv_freq_[i] / yarn->factor * ramp;
    }
  }
  if (precision_ == Precision::kTorchFp32) init_torch_fp32(theta, dim, yarn);
}

void RopeTable::init_torch_fp32(double theta, int dim, const YarnConfig* yarn) {
  const int half = dim / 2;
  inv_freq_f32_.resize(half);
  const float base = static_cast<float>(theta);
  for (int i = 0; i < half; ++i) {
    const float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
    inv_freq_f32_[i] = 1.0f / pos_freq;
    if (!yarn || !yarn->enabled) continue;
    double low, high;
    yarn_range(theta, dim, *yarn, &low, &high);
    const float interp = 1.0f / (static_cast<float>(yarn->factor) * pos_freq);
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    const float extrap_factor = 1.0f - ramp;
    inv_freq_f32_[i] = interp * (1.0f - extrap_factor) + inv_freq_f32_[i] * extrap_factor;
  }
}

void RopeTable::rotate(float* x, int64_t pos, bool inverse) const {
  const bool f32 = precision_ == Precision::kTorchFp32;
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = f32 ? static_cast<double>(static_cast<float>(pos) * inv_freq_f32_[i])
                         : static_cast<double>(pos) * inv_freq_[i];
    const float c = static_cast<float>(std::cos(a));
    const float s = static_cast<float>(inverse ? -std::sin(a) : std::sin(a));
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x1 * c + x0 * s;
  }
}

}  // namespace deepinfer::v4
