#include "deepinfer/model/deepseek_v4/mhc.h"

#include <cmath>
#include <vector>

#include "deepinfer/backend/cpu/cpu_ops.h"

namespace deepinfer::v4 {
namespace {

// m = fn · (X * rsqrt(mean(X^2) + eps)) over the flattened streams.
void mixes(const Config& c, const float* fn, int rows, const float* X, float* m) {
  const int64_t n = int64_t(c.hc_mult) * c.hidden_size;
  std::vector<float> flat(n);
  cpu::rms_norm(X, nullptr, n, static_cast<float>(c.rms_norm_eps), flat.data());
  for (int r = 0; r < rows; ++r) m[r] = cpu::dot(fn + r * n, flat.data(), n);
}

}  // namespace

void hc_pre(const Config& c, const HcWeights& w, const float* X, float* y, float* post,
            float* comb) {
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  const float eps = static_cast<float>(c.hc_eps);
  std::vector<float> m(c.mix_hc());
  mixes(c, w.fn, c.mix_hc(), X, m.data());
  std::vector<float> pre(hc);
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
  for (int it = 1; it < c.hc_sinkhorn_iters; ++it) {
    row_norm();
    col_norm();
  }
  for (int64_t d = 0; d < H; ++d) {
    float s = 0;
    for (int j = 0; j < hc; ++j) s += pre[j] * X[j * H + d];
    y[d] = s;
  }
}

void hc_post(const Config& c, const float* f, const float* post, const float* comb, float* X) {
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  std::vector<float> out(hc * H);
  for (int k = 0; k < hc; ++k)
    for (int64_t d = 0; d < H; ++d) {
      float s = post[k] * f[d];
      for (int j = 0; j < hc; ++j) s += comb[j * hc + k] * X[j * H + d];
      out[k * H + d] = s;
    }
  std::copy(out.begin(), out.end(), X);
}

void hc_head(const Config& c, const HcWeights& w, const float* X, float* y) {
  const int hc = c.hc_mult;
  const int64_t H = c.hidden_size;
  std::vector<float> m(hc);
  mixes(c, w.fn, hc, X, m.data());
  for (int j = 0; j < hc; ++j)
    m[j] = cpu::sigmoid(m[j] * w.scale[0] + w.base[j]) + static_cast<float>(c.hc_eps);
  for (int64_t d = 0; d < H; ++d) {
    float s = 0;
    for (int j = 0; j < hc; ++j) s += m[j] * X[j * H + d];
    y[d] = s;
  }
}

}  // namespace deepinfer::v4
