#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/mhc/mhc.h"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHc = 8;
constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;

__device__ inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

constexpr int kSliceThreads = 128;
constexpr int kSliceWarps = kSliceThreads / 32;
constexpr int kSlice = 512;  // values of a token's streams per partial block
constexpr int kAcc = 8;      // mixes a thread accumulates per pass

__host__ __device__ inline int64_t slices(int64_t n) { return (n + kSlice - 1) / kSlice; }

// Block (s, t): over values [s * kSlice, (s + 1) * kSlice) of token t's streams X (n values),
// part[t][s][r] = fn[r] . X for r < rows, and part[t][s][rows] = X . X.
__global__ void __launch_bounds__(kSliceThreads)
    mix_partials_kernel(const float* fn, const float* Xall, int64_t n, int rows, float* part) {
  __shared__ float wsum[kSliceWarps][kMaxMix + 1];
  const int64_t t = blockIdx.y, s = blockIdx.x, S = gridDim.x;
  const float* X = Xall + t * n;
  const int64_t i0 = s * kSlice, i1 = min(n, i0 + kSlice);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float ss = 0;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += kSliceThreads) ss += X[i] * X[i];
  ss = warp_reduce(ss, SumOp{});
  if (lane == 0) wsum[warp][rows] = ss;
  for (int r0 = 0; r0 < rows; r0 += kAcc) {
    float acc[kAcc];
#pragma unroll
    for (int j = 0; j < kAcc; ++j) acc[j] = 0.0f;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += kSliceThreads) {
      const float x = X[i];
#pragma unroll
      for (int j = 0; j < kAcc; ++j)
        if (r0 + j < rows) acc[j] += fn[(r0 + j) * n + i] * x;
    }
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      const float v = warp_reduce(acc[j], SumOp{});
      if (lane == 0 && r0 + j < rows) wsum[warp][r0 + j] = v;
    }
  }
  __syncthreads();
  float* out = part + (t * S + s) * (rows + 1);
  for (int r = threadIdx.x; r <= rows; r += kSliceThreads) {
    float v = 0;
    for (int w = 0; w < kSliceWarps; ++w) v += wsum[w][r];
    out[r] = v;
  }
}

void launch_partials(const HcArgs& a, const float* X, int rows, cudaStream_t stream) {
  if (!a.partials) {
    std::fprintf(stderr, "mhc: HcArgs::partials is null\n");
    std::abort();
  }
  const int64_t n = a.hc * a.hidden;
  const dim3 grid(static_cast<unsigned>(slices(n)), static_cast<unsigned>(a.tokens));
  mix_partials_kernel<<<grid, kSliceThreads, 0, stream>>>(a.fn, X, n, rows, a.partials);
  DI_CUDA_LAUNCH_CHECK();
}

// m[r] = fn[r] . (X * rsqrt(mean(X^2) + eps)) for token blockIdx.x from its partial sums (the
// norm factor is a scalar, so it multiplies the raw dot products), summed in slice order.
__device__ void mixes(const HcArgs& a, int rows, float* m) {
  __shared__ float inv;
  const int64_t n = a.hc * a.hidden, S = slices(n), t = blockIdx.x;
  const float* part = a.partials + t * S * (rows + 1);
  if (threadIdx.x == 0) {
    float ss = 0;
    for (int64_t s = 0; s < S; ++s) ss += part[s * (rows + 1) + rows];
    inv = rsqrtf(ss / static_cast<float>(n) + a.norm_eps);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    float acc = 0;
    for (int64_t s = 0; s < S; ++s) acc += part[s * (rows + 1) + r];
    m[r] = acc * inv;
  }
  __syncthreads();
}

// pre_in null: the collapse uses the site's own pre (V4). Otherwise (V4.1's deferred mHC) it uses
// pre_in (the previous site's), and the site's own pre goes to pre_out (which may alias pre_in).
__global__ void hc_pre_kernel(HcArgs a, const float* Xall, const float* pre_in, float* pre_out,
                              float* y, float* post, float* comb) {
  __shared__ float m[kMaxMix], pre[kMaxHc], c[kMaxHc * kMaxHc], collapse[kMaxHc];
  const int hc = a.hc;
  const int64_t t = blockIdx.x, H = a.hidden;
  const float* X = Xall + t * hc * H;
  mixes(a, (2 + hc) * hc, m);
  if (threadIdx.x == 0) {
    const float eps = a.hc_eps;
    for (int j = 0; j < hc; ++j) {
      pre[j] = sigmoidf(m[j] * a.scale[0] + a.base[j]) + eps;
      post[t * hc + j] = 2.0f * sigmoidf(m[hc + j] * a.scale[1] + a.base[hc + j]);
      collapse[j] = pre_in ? pre_in[t * hc + j] : pre[j];
      if (pre_out) pre_out[t * hc + j] = pre[j];
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
    for (int j = 0; j < hc; ++j) s += collapse[j] * X[j * H + d];
    y[t * H + d] = s;
  }
}

__global__ void hc_collapse_kernel(const float* pre, const float* Xall, int hc, int64_t H,
                                   float* y) {
  const int64_t t = blockIdx.x;
  const float* X = Xall + t * hc * H;
  for (int64_t d = threadIdx.x; d < H; d += blockDim.x) {
    float s = 0;
    for (int j = 0; j < hc; ++j) s += pre[t * hc + j] * X[j * H + d];
    y[t * H + d] = s;
  }
}

__global__ void hc_head_kernel(HcArgs a, const float* Xall, float* y) {
  __shared__ float m[kMaxHc];
  const int hc = a.hc;
  const int64_t t = blockIdx.x, H = a.hidden;
  const float* X = Xall + t * hc * H;
  mixes(a, hc, m);
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

size_t hc_scratch_floats(int64_t tokens, int hc, int64_t hidden) {
  return static_cast<size_t>(tokens * slices(hc * hidden) * ((2 + hc) * hc + 1));
}

void hc_pre(const HcArgs& a, const float* X, float* y, float* post, float* comb,
            cudaStream_t stream) {
  check_hc(a.hc);
  if (a.tokens == 0) return;
  launch_partials(a, X, (2 + a.hc) * a.hc, stream);
  hc_pre_kernel<<<static_cast<unsigned>(a.tokens), kThreads, 0, stream>>>(a, X, nullptr, nullptr, y,
                                                                          post, comb);
  DI_CUDA_LAUNCH_CHECK();
}

void hc_pre_deferred(const HcArgs& a, const float* X, const float* pre_in, float* pre_out, float* y,
                     float* post, float* comb, cudaStream_t stream) {
  check_hc(a.hc);
  if (a.tokens == 0) return;
  launch_partials(a, X, (2 + a.hc) * a.hc, stream);
  hc_pre_kernel<<<static_cast<unsigned>(a.tokens), kThreads, 0, stream>>>(a, X, pre_in, pre_out, y,
                                                                          post, comb);
  DI_CUDA_LAUNCH_CHECK();
}

void hc_collapse(const float* pre, const float* X, int64_t tokens, int hc, int64_t hidden, float* y,
                 cudaStream_t stream) {
  check_hc(hc);
  if (tokens == 0) return;
  hc_collapse_kernel<<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(pre, X, hc, hidden, y);
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
  launch_partials(a, X, a.hc, stream);
  hc_head_kernel<<<static_cast<unsigned>(a.tokens), kThreads, 0, stream>>>(a, X, y);
  DI_CUDA_LAUNCH_CHECK();
}

}  // namespace deepinfer::cuda
