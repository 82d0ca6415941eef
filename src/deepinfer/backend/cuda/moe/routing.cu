#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/moe/routing.h"

namespace deepinfer::cuda {
namespace {

constexpr int kWarps = 4;  // tokens per block
constexpr int kMaxTopK = 16;

__device__ inline float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Better = higher score, then lower id.
__device__ inline bool better(float s, int i, float bs, int bi) {
  return s > bs || (s == bs && i < bi);
}

// Experts a lane's bias values cover from registers (E up to 32 times this: V4's 256).
constexpr int kBiasRegs = 8;
struct BiasRegs {
  float v[kBiasRegs];
};
__device__ inline bool bias_in_regs(const RoutingArgs& a) {
  return a.bias && !a.tid2eid && a.num_experts <= 32 * kBiasRegs;
}

__global__ void route_kernel(RoutingArgs a, int32_t* expert_ids, float* weights) {
  // The bias is a weight: loaded before the PDL wait, beside the kernel ahead, where E allows.
  const auto bias = pdl_grid_begin([&] {
    BiasRegs b;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < kBiasRegs; ++u)
      b.v[u] = bias_in_regs(a) && lane + 32 * u < a.num_experts ? a.bias[lane + 32 * u] : 0.0f;
    return b;
  });
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int E = a.num_experts, K = a.top_k;
  const bool bias_regs = bias_in_regs(a);
  extern __shared__ float smem[];
  const int64_t t = int64_t{blockIdx.x} * kWarps + warp;
  if (t >= a.tokens) return;
  float* aff = smem + warp * 2 * E;
  float* sel = aff + E;
  if (bias_regs) {
#pragma unroll
    for (int u = 0; u < kBiasRegs; ++u) {
      const int e = lane + 32 * u;
      if (e >= E) break;
      aff[e] = sqrtf(softplusf(a.logits[t * E + e] / a.temperature));
      sel[e] = aff[e] + bias.v[u];
    }
  } else {
    for (int e = lane; e < E; e += 32) {
      aff[e] = sqrtf(softplusf(a.logits[t * E + e] / a.temperature));
      if (!a.tid2eid) sel[e] = aff[e] + a.bias[e];
    }
  }
  __syncwarp();
  int picked[kMaxTopK];
  if (a.tid2eid) {
    for (int k = 0; k < K; ++k) picked[k] = a.tid2eid[int64_t{a.token_ids[t]} * K + k];
  } else {
    for (int k = 0; k < K; ++k) {
      float bs = -INFINITY;
      int bi = 0x7fffffff;
      for (int e = lane; e < E; e += 32)
        if (better(sel[e], e, bs, bi)) bs = sel[e], bi = e;
      for (int o = 16; o > 0; o >>= 1) {
        const float os = __shfl_xor_sync(0xffffffffu, bs, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(os, oi, bs, bi)) bs = os, bi = oi;
      }
      picked[k] = bi;
      __syncwarp();
      if (lane == 0) sel[bi] = -INFINITY;
      __syncwarp();
    }
  }
  if (lane == 0) {
    float sum = 0;
    for (int k = 0; k < K; ++k) sum += aff[picked[k]];
    const float scale = a.normalize ? a.route_scale / (sum + 1e-20f) : a.route_scale;
    for (int k = 0; k < K; ++k) {
      expert_ids[t * K + k] = picked[k];
      weights[t * K + k] = aff[picked[k]] * scale;  // unnormalized: a * route_scale
    }
  }
}

}  // namespace

void route(const RoutingArgs& a, int32_t* expert_ids, float* weights, cudaStream_t stream) {
  if (a.top_k < 1 || a.top_k > kMaxTopK || a.top_k > a.num_experts) {
    std::fprintf(stderr, "route: top_k %d outside 1..min(%d, %d)\n", a.top_k, kMaxTopK,
                 a.num_experts);
    std::abort();
  }
  if (a.tokens == 0) return;
  const unsigned blocks = static_cast<unsigned>((a.tokens + kWarps - 1) / kWarps);
  const size_t smem = sizeof(float) * kWarps * 2 * a.num_experts;
  launch_kernel(route_kernel, blocks, kWarps * 32, smem, stream, a, expert_ids, weights);
}

}  // namespace deepinfer::cuda
