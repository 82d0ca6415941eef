#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHc = 8;
constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// m[r] = fn[r] . (X * rsqrt(mean(X^2) + eps)) over the flattened streams of one token: the
// norm factor is a scalar, so it multiplies the raw dot products.
__device__ void mixes(const HcArgs& a, const float* X, int rows, float* m, float* scratch) {
  const int64_t n = a.hc * a.hidden;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += X[i] * X[i];
  const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(n) + a.norm_eps);
  for (int r = 0; r < rows; ++r) {
    float acc = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += a.fn[r * n + i] * X[i];
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) m[r] = acc * inv;
  }
  __syncthreads();
}

__global__ void hc_pre_kernel(HcArgs a, const float* Xall, float* y, float* post, float* comb) {
  __shared__ float scratch[32], m[kMaxMix], pre[kMaxHc], c[kMaxHc * kMaxHc];
  const int hc = a.hc;
  const int64_t t = blockIdx.x, H = a.hidden;
  const float* X = Xall + t * hc * H;
  mixes(a, X, (2 + hc) * hc, m, scratch);
  if (threadIdx.x == 0) {
    const float eps = a.hc_eps;
    for (int j = 0; j < hc; ++j) {
      pre[j] = sigmoidf(m[j] * a.scale[0] + a.base[j]) + eps;
      post[t * hc + j] = 2.0f * sigmoidf(m[hc + j] * a.scale[1] + a.base[hc + j]);
    }
    // Sinkhorn: row softmax + eps, column normalize, then (iters - 1) x (row, column).
    for (int j = 0; j < hc; ++j) {
      float mx = -INFINITY;
      for (int k = 0; k < hc; ++k) {
        c[j * hc + k] = m[2 * hc + j * hc + k] * a.scale[2] + a.base[2 * hc + j * hc + k];
        mx = fmaxf(mx, c[j * hc + k]);
      }
      float s = 0;
      for (int k = 0; k < hc; ++k) s += (c[j * hc + k] = expf(c[j * hc + k] - mx));
      for (int k = 0; k < hc; ++k) c[j * hc + k] = c[j * hc + k] / s + eps;
    }
    auto col_norm = [&] {
      for (int k = 0; k < hc; ++k) {
        float s = 0;
        for (int j = 0; j < hc; ++j) s += c[j * hc + k];
        for (int j = 0; j < hc; ++j) c[j * hc + k] /= (s + eps);
      }
    };
    auto row_norm = [&] {
      for (int j = 0; j < hc; ++j) {
        float s = 0;
        for (int k = 0; k < hc; ++k) s += c[j * hc + k];
        for (int k = 0; k < hc; ++k) c[j * hc + k] /= (s + eps);
      }
    };
    col_norm();
    for (int it = 1; it < a.sinkhorn_iters; ++it) {
      row_norm();
      col_norm();
    }
    for (int i = 0; i < hc * hc; ++i) comb[t * hc * hc + i] = c[i];
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < H; d += blockDim.x) {
    float s = 0;
    for (int j = 0; j < hc; ++j) s += pre[j] * X[j * H + d];
    y[t * H + d] = s;
  }
}

__global__ void hc_head_kernel(HcArgs a, const float* Xall, float* y) {
  __shared__ float scratch[32], m[kMaxHc];
  const int hc = a.hc;
  const int64_t t = blockIdx.x, H = a.hidden;
  const float* X = Xall + t * hc * H;
  mixes(a, X, hc, m, scratch);
  for (int64_t d = threadIdx.x; d < H; d += blockDim.x) {
    float s = 0;
    for (int j = 0; j < hc; ++j)
      s += (sigmoidf(m[j] * a.scale[0] + a.base[j]) + a.hc_eps) * X[j * H + d];
    y[t * H + d] = s;
  }
}

// One thread per (token, d): reads the hc inputs of column d before writing any output.
__global__ void hc_post_kernel(const float* f, const float* post, const float* comb, int64_t tokens,
                               int hc, int64_t H, float* X) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= tokens * H) return;
  const int64_t t = i / H, d = i % H;
  float* Xt = X + t * hc * H;
  float in[kMaxHc];
  for (int j = 0; j < hc; ++j) in[j] = Xt[j * H + d];
  const float* ct = comb + t * hc * hc;
  for (int k = 0; k < hc; ++k) {
    float s = post[t * hc + k] * f[t * H + d];
    for (int j = 0; j < hc; ++j) s += ct[j * hc + k] * in[j];
    Xt[k * H + d] = s;
  }
}

void check_hc(int hc) {
  if (hc < 1 || hc > kMaxHc) {
    std::fprintf(stderr, "mhc: hc_mult %d outside 1..%d\n", hc, kMaxHc);
    std::abort();
  }
}

}  // namespace

void hc_pre(const HcArgs& a, const float* X, float* y, float* post, float* comb,
            cudaStream_t stream) {
  check_hc(a.hc);
  if (a.tokens == 0) return;
  hc_pre_kernel<<<static_cast<unsigned>(a.tokens), kThreads, 0, stream>>>(a, X, y, post, comb);
  DI_CUDA_LAUNCH_CHECK();
}

void hc_post(const float* f, const float* post, const float* comb, int64_t tokens, int hc,
             int64_t hidden, float* X, cudaStream_t stream) {
  check_hc(hc);
  const int64_t work = tokens * hidden;
  if (work == 0) return;
  hc_post_kernel<<<static_cast<unsigned>((work + 255) / 256), 256, 0, stream>>>(
      f, post, comb, tokens, hc, hidden, X);
  DI_CUDA_LAUNCH_CHECK();
}

void hc_head(const HcArgs& a, const float* X, float* y, cudaStream_t stream) {
  check_hc(a.hc);
  if (a.tokens == 0) return;
  hc_head_kernel<<<static_cast<unsigned>(a.tokens), kThreads, 0, stream>>>(a, X, y);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda
