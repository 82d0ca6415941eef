#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/moe/expert_math.cuh"
#include "deepinfer/backend/cuda/moe/experts.h"

namespace deepinfer::cuda {
namespace {

using moe_detail::blocks_for;

__global__ void gather_bf16(const float* x, const int32_t* rows, int64_t n, int64_t d,
                            __nv_bfloat16* out) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n * d) out[i] = __float2bfloat16_rn(x[int64_t{rows[i / d]} * d + i % d]);
}

__global__ void swiglu_kernel(const float* g, const float* u, const float* row_w, int64_t n,
                              int64_t inter, bool clamp, float lim, bool scale, __nv_bfloat16* h) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * inter) return;
  h[i] = moe_detail::swiglu_bf16(g[i], u[i], clamp, lim, scale ? row_w[i / inter] : 1.0f);
}

__global__ void scatter_kernel(const float* y, const int32_t* dst_rows, const float* row_w,
                               int64_t n, int64_t d, bool scale, float* dst) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * d) return;
  const int64_t r = i / d;
  dst[int64_t{dst_rows[r]} * d + i % d] = y[i] * (scale ? row_w[r] : 1.0f);
}

// out[t] = sum_k slots[t, k] in routing order, then + shared[t] (the CPU reference's order).
__global__ void combine_kernel(const float* slots, const float* shared, int64_t tokens, int k,
                               int64_t d, float* out) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= tokens * d) return;
  const int64_t t = i / d, c = i % d;
  float acc = 0;
  for (int j = 0; j < k; ++j) acc += slots[(t * k + j) * d + c];
  if (shared) acc += shared[i];
  out[i] = acc;
}

}  // namespace

void moe_detail::combine_slots(const float* slots, const float* shared, int64_t tokens, int k,
                               int64_t d, float* out, cudaStream_t stream) {
  launch_kernel(combine_kernel, blocks_for(tokens * d), 256, 0, stream, slots, shared, tokens, k, d,
                out);
}

void MoeRunner::expert(const MoeArgs& a, const ExpertWeights& w, int64_t inter, bool clamp,
                       const int32_t* src_rows, const int32_t* dst_rows, const float* row_weights,
                       int64_t rows, float* dst, cudaStream_t stream) {
  const int64_t H = a.hidden;
  __nv_bfloat16* xg = scratch(xg_, rows * H);
  __nv_bfloat16* hb = scratch(hb_, rows * inter);
  float* g = scratch(g_, rows * inter);
  float* u = scratch(u_, rows * inter);
  float* y = scratch(y_, rows * H);
  launch_kernel(gather_bf16, blocks_for(rows * H), 256, 0, stream, a.x, src_rows, rows, H, xg);
  linear_.run(w.w1, xg, g, rows, stream);
  linear_.run(w.w3, xg, u, rows, stream);
  launch_kernel(swiglu_kernel, blocks_for(rows * inter), 256, 0, stream, g, u, row_weights, rows,
                inter, clamp, a.swiglu_limit, a.weight_before_w2, hb);
  linear_.run(w.w2, hb, y, rows, stream);
  launch_kernel(scatter_kernel, blocks_for(rows * H), 256, 0, stream, y, dst_rows, row_weights,
                rows, H, !a.weight_before_w2, dst);
}

void MoeRunner::dense_expert(const MoeArgs& a, const ExpertWeights& w, int64_t inter, bool clamp,
                             const __nv_bfloat16* xb, float* g, float* u, __nv_bfloat16* hb,
                             float* dst, cudaStream_t stream) {
  const int64_t T = a.tokens;
  linear_.run(w.w1, xb, g, T, stream);
  linear_.run(w.w3, xb, u, T, stream);
  launch_kernel(swiglu_kernel, blocks_for(T * inter), 256, 0, stream, g, u, nullptr, T, inter,
                clamp, a.swiglu_limit, false, hb);
  linear_.run(w.w2, hb, dst, T, stream);
}

void MoeRunner::run(const MoeArgs& a, cudaStream_t stream) {
  const int64_t T = a.tokens, H = a.hidden;
  const int K = a.top_k, E = static_cast<int>(a.experts.size());
  if (T == 0) return;
  std::vector<int32_t> ids(T * K);
  std::vector<float> wts(T * K);
  DI_CUDA_CHECK(
      cudaMemcpyAsync(ids.data(), a.expert_ids, ids.size() * 4, cudaMemcpyDeviceToHost, stream));
  DI_CUDA_CHECK(
      cudaMemcpyAsync(wts.data(), a.weights, wts.size() * 4, cudaMemcpyDeviceToHost, stream));
  DI_CUDA_CHECK(cudaStreamSynchronize(stream));

  // Per expert: source token rows, destination slot rows (t * K + k) and weights, back to back.
  std::vector<std::vector<int32_t>> slots_of(E);
  for (int64_t s = 0; s < T * K; ++s) {
    if (ids[s] < 0 || ids[s] >= E) {
      std::fprintf(stderr, "moe: expert id %d outside 0..%d\n", ids[s], E - 1);
      std::abort();
    }
    slots_of[ids[s]].push_back(static_cast<int32_t>(s));
  }
  std::vector<int32_t> src, dst;
  std::vector<float> rw;
  std::vector<int64_t> begin(E + 1);
  for (int e = 0; e < E; ++e) {
    begin[e] = static_cast<int64_t>(src.size());
    for (int32_t s : slots_of[e]) {
      src.push_back(s / K);
      dst.push_back(s);
      rw.push_back(wts[s]);
    }
  }
  begin[E] = static_cast<int64_t>(src.size());
  const int64_t n = begin[E];
  int32_t* rows = scratch(rows_, 2 * n);
  float* row_w = scratch(row_w_, n);
  DI_CUDA_CHECK(cudaMemcpyAsync(rows, src.data(), n * 4, cudaMemcpyHostToDevice, stream));
  DI_CUDA_CHECK(cudaMemcpyAsync(rows + n, dst.data(), n * 4, cudaMemcpyHostToDevice, stream));
  DI_CUDA_CHECK(cudaMemcpyAsync(row_w, rw.data(), n * 4, cudaMemcpyHostToDevice, stream));

  float* slots = scratch(slots_, T * K * H);
  for (int e = 0; e < E; ++e) {
    const int64_t cnt = begin[e + 1] - begin[e];
    if (cnt == 0) continue;
    expert(a, a.experts[e], a.inter, /*clamp=*/true, rows + begin[e], rows + n + begin[e],
           row_w + begin[e], cnt, slots, stream);
  }
  float* shared = nullptr;
  if (a.shared) {
    // Every token, weight 1: no gather or scatter, the routed scratch reused in stream order.
    const int64_t I = a.shared_inter;
    __nv_bfloat16* xb = scratch(xg_, T * H);
    to_bf16(a.x, T * H, xb, stream);
    shared = scratch(shared_out_, T * H);
    dense_expert(a, *a.shared, I, a.clamp_shared, xb, scratch(g_, T * I), scratch(u_, T * I),
                 scratch(hb_, T * I), shared, stream);
  }
  moe_detail::combine_slots(slots, shared, T, K, H, a.out, stream);
  // The host vectors above feed async copies: finish them before they go out of scope.
  DI_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace deepinfer::cuda
