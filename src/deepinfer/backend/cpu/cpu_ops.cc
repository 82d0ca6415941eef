#include "deepinfer/backend/cpu/cpu_ops.h"

#include <algorithm>

#include "deepinfer/base/thread_pool.h"

namespace deepinfer::cpu {

float dot(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums: vectorizable without -ffast-math, and still a fixed order.
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[k + j] * b[k + j];
  float tail = 0;
  for (; k < n; ++k) tail += a[k] * b[k];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

void linear(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y) {
  const int64_t work = out * n;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const float* row = w + o * in;
      for (int64_t t = 0; t < n; ++t) y[t * out + o] = dot(row, x + t * in, in);
    }
  };
  if (work * in < (1 << 15)) {
    body(0, out);
    return;
  }
  ThreadPool::default_pool().parallel_for(
      out, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, in)), body);
}

void rms_norm(const float* x, const float* weight, int64_t d, float eps, float* y) {
  double ss = 0;
  for (int64_t k = 0; k < d; ++k) ss += static_cast<double>(x[k]) * x[k];
  const float r = 1.0f / std::sqrt(static_cast<float>(ss / d) + eps);
  for (int64_t k = 0; k < d; ++k) y[k] = weight ? weight[k] * (x[k] * r) : x[k] * r;
}

}  // namespace deepinfer::cpu
