#include <cmath>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/engram/engram_gate.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;

// One block per (token, stream): three block sums, then the gated add.
__global__ void engram_gate_kernel(const float* kv, const float* qw, const float* kw, int hc,
                                   int64_t H, float eps, float inv_sqrt_h, float* X) {
  pdl_grid_begin();
  __shared__ float part[3][kThreads / 32];
  __shared__ float gate;
  const int64_t t = blockIdx.x / hc;
  const int j = blockIdx.x % hc;
  float* x = X + (t * hc + j) * H;
  const float* row = kv + t * (hc + 1) * H;
  const float* key = row + j * H;
  const float* value = row + hc * H;
  float dot = 0, xx = 0, kk = 0;
  for (int64_t d = threadIdx.x; d < H; d += blockDim.x) {
    const float xv = x[d], k = key[d];
    dot += xv * (qw[j * H + d] * kw[j * H + d]) * k;
    xx += xv * xv;
    kk += k * k;
  }
  dot = warp_sum(dot), xx = warp_sum(xx), kk = warp_sum(kk);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) part[0][warp] = dot, part[1][warp] = xx, part[2][warp] = kk;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sd = 0, sx = 0, sk = 0;
    for (int w = 0; w < kThreads / 32; ++w) sd += part[0][w], sx += part[1][w], sk += part[2][w];
    const float rstd = (1.0f / sqrtf(sx / H + eps)) * (1.0f / sqrtf(sk / H + eps));
    const float s = sd * rstd * inv_sqrt_h;
    const float r = copysignf(sqrtf(fmaxf(fabsf(s), 1e-6f)), s);
    gate = 1.0f / (1.0f + expf(-r));
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < H; d += blockDim.x) x[d] += gate * value[d];
}

}  // namespace

void engram_gate(const float* kv, const float* q_weight, const float* k_weight, int64_t n, int hc,
                 int64_t hidden, float eps, float* X, cudaStream_t stream) {
  if (n == 0) return;
  const float inv_sqrt_h = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hidden)));
  launch_kernel(engram_gate_kernel, static_cast<unsigned>(n * hc), kThreads, 0, stream, kv,
                q_weight, k_weight, hc, hidden, eps, inv_sqrt_h, X);
}

}  // namespace deepinfer::cuda
