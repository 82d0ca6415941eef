#include "deepinfer/backend/cpu/cpu_ops.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>

#include "deepinfer/base/sanitized_build.h"
#include "deepinfer/base/thread_pool.h"

#ifdef DEEPINFER_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace deepinfer::cpu {

namespace {

// Sanitizer builds check an operand range once per kernel call, then run the inner products
// uninstrumented: ASan's per-element checks kept dot() from vectorizing and made it about half
// of the sanitizer tree's model-level test time. A bad range still stops with ASan's report.
#ifdef DEEPINFER_ASAN
#define DEEPINFER_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined"), noinline))
void require_addressable(const void* p, int64_t count, int64_t elem_bytes) {
  if (count <= 0) return;
  const auto* bad = static_cast<const volatile char*>(
      __asan_region_is_poisoned(const_cast<void*>(p), static_cast<size_t>(count * elem_bytes)));
  if (bad) (void)*bad;  // an instrumented load: ASan reports this byte with its allocation
}
#else
#define DEEPINFER_UNINSTRUMENTED
void require_addressable(const void*, int64_t, int64_t) {}
#endif

DEEPINFER_UNINSTRUMENTED float dot_unchecked(const float* a, const float* b, int64_t n) {
  // Eight independent partial sums: vectorizable without -ffast-math, and still a fixed order.
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[k + j] * b[k + j];
  float tail = 0;
  for (; k < n; ++k) tail += a[k] * b[k];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  require_addressable(a, n, sizeof(float));
  require_addressable(b, n, sizeof(float));
  return dot_unchecked(a, b, n);
}

namespace {

std::atomic<bool> g_bf16_operands{false};

float round_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

std::vector<float> rounded(const float* p, int64_t n) {
  std::vector<float> v(p, p + n);
  for (float& x : v) x = round_bf16(x);
  return v;
}

}  // namespace

void set_bf16_operands(bool on) { g_bf16_operands = on; }

void linear(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y) {
  if (g_bf16_operands) {
    const std::vector<float> wb = rounded(w, out * in), xb = rounded(x, n * in);
    linear_fp32(wb.data(), out, in, xb.data(), n, y);
    return;
  }
  linear_fp32(w, out, in, x, n, y);
}

void linear_fp32(const float* w, int64_t out, int64_t in, const float* x, int64_t n, float* y) {
  const int64_t work = out * n;
  require_addressable(w, out * in, sizeof(float));
  require_addressable(x, n * in, sizeof(float));
  require_addressable(y, n * out, sizeof(float));
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const float* row = w + o * in;
      for (int64_t t = 0; t < n; ++t) y[t * out + o] = dot_unchecked(row, x + t * in, in);
    }
  };
  if (work * in < (1 << 15)) {
    body(0, out);
    return;
  }
  ThreadPool::default_pool().parallel_for(
      out, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, in)), body);
}

void grouped_linear(const float* w, int groups, int64_t out_per_group, int64_t in_per_group,
                    const float* x, int64_t n, float* y) {
  const int64_t out = groups * out_per_group, in = groups * in_per_group;
  std::vector<float> wb, xb;
  if (g_bf16_operands) {
    wb = rounded(w, out * in_per_group), xb = rounded(x, n * in);
    w = wb.data(), x = xb.data();
  }
  require_addressable(w, out * in_per_group, sizeof(float));
  require_addressable(x, n * in, sizeof(float));
  require_addressable(y, n * out, sizeof(float));
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const float* row = w + o * in_per_group;
      const int64_t g = o / out_per_group;
      for (int64_t t = 0; t < n; ++t)
        y[t * out + o] = dot_unchecked(row, x + t * in + g * in_per_group, in_per_group);
    }
  };
  if (out * n * in_per_group < (1 << 15)) {
    body(0, out);
    return;
  }
  ThreadPool::default_pool().parallel_for(
      out, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, in_per_group)), body);
}

void rms_norm(const float* x, const float* weight, int64_t d, float eps, float* y) {
  double ss = 0;
  for (int64_t k = 0; k < d; ++k) ss += static_cast<double>(x[k]) * x[k];
  const float r = 1.0f / std::sqrt(static_cast<float>(ss / d) + eps);
  for (int64_t k = 0; k < d; ++k) y[k] = weight ? weight[k] * (x[k] * r) : x[k] * r;
}

void swiglu(float* gate, const float* up, int64_t n, bool clamp, float limit) {
  for (int64_t k = 0; k < n; ++k) {
    float g = gate[k], u = up[k];
    if (clamp) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    gate[k] = silu(g) * u;
  }
}

void sink_attention(const float* q, const float* const* keys, int64_t n, float sink, int hd,
                    float scale, float* out) {
  std::vector<float> logits(n);
  float mx = sink;
  for (int64_t k = 0; k < n; ++k) {
    logits[k] = dot(q, keys[k], hd) * scale;
    mx = std::max(mx, logits[k]);
  }
  float den = std::exp(sink - mx);
  for (int64_t k = 0; k < n; ++k) den += (logits[k] = std::exp(logits[k] - mx));
  std::fill(out, out + hd, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    const float p = logits[k] / den;
    for (int d = 0; d < hd; ++d) out[d] += p * keys[k][d];
  }
}

void softmax_pool(const float* const* kv, const float* const* gate, int rows, int dim, float* out) {
  for (int c = 0; c < dim; ++c) {
    float mx = -INFINITY;
    for (int j = 0; j < rows; ++j) mx = std::max(mx, gate[j][c]);
    float den = 0, num = 0;
    for (int j = 0; j < rows; ++j) {
      const float e = std::exp(gate[j][c] - mx);
      den += e;
      num += e * kv[j][c];
    }
    out[c] = num / den;
  }
}

float indexer_score(const float* q, const float* w, const float* key, int heads, int head_dim,
                    float weight_scale, float score_scale) {
  float s = 0;
  for (int h = 0; h < heads; ++h)
    s += w[h] * weight_scale *
         (std::max(0.0f, dot(q + int64_t(h) * head_dim, key, head_dim)) * score_scale);
  return s;
}

std::vector<int64_t> top_k_indices(const float* scores, int64_t n, int64_t k) {
  std::vector<int64_t> picks(n);
  std::iota(picks.begin(), picks.end(), 0);
  k = std::min(k, n);
  std::partial_sort(picks.begin(), picks.begin() + k, picks.end(), [&](int64_t a, int64_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  });
  picks.resize(k);
  std::sort(picks.begin(), picks.end());
  return picks;
}

}  // namespace deepinfer::cpu
