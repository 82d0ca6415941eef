#include "deepinfer/model/deepseek_v4/mhc.h"

#include <cmath>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"

namespace deepinfer::v4 {
namespace {

// m = fn · (X * rsqrt(mean(X^2) + eps)) over the flattened streams.
void mixes(const HcDims& d, const float* fn, int rows, const float* X, float* m) {
  const int64_t n = int64_t(d.hc_mult) * d.hidden;
  std::vector<float> flat(n);
  cpu::rms_norm(X, nullptr, n, d.norm_eps, flat.data());
  for (int r = 0; r < rows; ++r) m[r] = cpu::dot(fn + r * n, flat.data(), n);
}

}  // namespace

HcDims hc_dims(const Config& c) {
  return {c.hc_mult, c.hidden_size, c.hc_sinkhorn_iters, static_cast<float>(c.rms_norm_eps),
          static_cast<float>(c.hc_eps)};
}

void hc_mixes(const HcDims& d, const HcWeights& w, const float* X, float* pre, float* post,
              float* comb) {
  const int hc = d.hc_mult;
  const float eps = d.hc_eps;
  std::vector<float> m(d.mix());
  mixes(d, w.fn, d.mix(), X, m.data());
  for (int j = 0; j < hc; ++j) {
    pre[j] = cpu::sigmoid(m[j] * w.scale[0] + w.base[j]) + eps;
    post[j] = 2.0f * cpu::sigmoid(m[hc + j] * w.scale[1] + w.base[hc + j]);
  }
  // Sinkhorn: row softmax + eps, column normalize, then (iters - 1) x (row, column).
  for (int j = 0; j < hc; ++j) {
    float* row = comb + j * hc;
    float mx = -INFINITY;
    for (int k = 0; k < hc; ++k) {
      row[k] = m[2 * hc + j * hc + k] * w.scale[2] + w.base[2 * hc + j * hc + k];
      mx = std::max(mx, row[k]);
    }
    float s = 0;
    for (int k = 0; k < hc; ++k) s += (row[k] = std::exp(row[k] - mx));
    for (int k = 0; k < hc; ++k) row[k] = row[k] / s + eps;
  }
  auto col_norm = [&] {
    for (int k = 0; k < hc; ++k) {
      float s = 0;
      for (int j = 0; j < hc; ++j) s += comb[j * hc + k];
      for (int j = 0; j < hc; ++j) comb[j * hc + k] /= (s + eps);
    }
  };
  auto row_norm = [&] {
    for (int j = 0; j < hc; ++j) {
      float s = 0;
      for (int k = 0; k < hc; ++k) s += comb[j * hc + k];
      for (int k = 0; k < hc; ++k) comb[j * hc + k] /= (s + eps);
    }
  };
  col_norm();
  for (int it = 1; it < d.sinkhorn_iters; ++it) {
    row_norm();
    col_norm();
  }
}

void hc_collapse(const HcDims& d, const float* pre, const float* X, float* y) {
  const int hc = d.hc_mult;
  const int64_t H = d.hidden;
  for (int64_t i = 0; i < H; ++i) {
    float s = 0;
    for (int j = 0; j < hc; ++j) s += pre[j] * X[j * H + i];
    y[i] = s;
  }
}

void hc_expand(const HcDims& d, const float* f, const float* post, const float* comb, float* X) {
  const int hc = d.hc_mult;
  const int64_t H = d.hidden;
  std::vector<float> out(hc * H);
  for (int k = 0; k < hc; ++k)
    for (int64_t i = 0; i < H; ++i) {
      float s = post[k] * f[i];
      for (int j = 0; j < hc; ++j) s += comb[j * hc + k] * X[j * H + i];
      out[k * H + i] = s;
    }
  std::copy(out.begin(), out.end(), X);
}

void hc_pre(const Config& c, const HcWeights& w, const float* X, float* y, float* post,
            float* comb) {
  const HcDims d = hc_dims(c);
  std::vector<float> pre(d.hc_mult);
  hc_mixes(d, w, X, pre.data(), post, comb);
  hc_collapse(d, pre.data(), X, y);
}

void hc_post(const Config& c, const float* f, const float* post, const float* comb, float* X) {
  hc_expand(hc_dims(c), f, post, comb, X);
}

void hc_head(const Config& c, const HcWeights& w, const float* X, float* y) {
  const HcDims d = hc_dims(c);
  const int hc = d.hc_mult;
  std::vector<float> m(hc);
  mixes(d, w.fn, hc, X, m.data());
  for (int j = 0; j < hc; ++j) m[j] = cpu::sigmoid(m[j] * w.scale[0] + w.base[j]) + d.hc_eps;
  hc_collapse(d, m.data(), X, y);
}

}  // namespace deepinfer::v4
