#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/runtime/cuda/forward_v41/dspark_kernels.h"

namespace deepinfer::cuda::v41f {
namespace {

__global__ void markov_bias_kernel(const float* embed, const float* head, const int32_t* prev,
                                   float* logits, int64_t vocab, int rank) {
  pdl_grid_begin();
  const int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (v >= vocab) return;
  const float* e = embed + int64_t{*prev} * rank;
  const float* h = head + v * rank;
  float acc = 0.0f;
  for (int r = 0; r < rank; ++r) acc = __fmaf_rn(h[r], e[r], acc);
  logits[v] += acc;
}

__global__ void confidence_kernel(const float* proj, const float* x, const float* embed,
                                  const int32_t* prev, int64_t hidden, int rank, float* out) {
  pdl_grid_begin();
  __shared__ float scratch[32];
  const float* e = embed + int64_t{*prev} * rank;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden + rank; i += blockDim.x)
    acc = __fmaf_rn(proj[i], i < hidden ? x[i] : e[i - hidden], acc);
  const float z = block_sum(acc, scratch);
  if (threadIdx.x == 0) *out = 1.0f / (1.0f + expf(-z));
}

__global__ void hc_mean_kernel(const float* X, int64_t n, int hc, int64_t hidden, float* out,
                               int64_t stride) {
  pdl_grid_begin();
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= n * hidden) return;
  const int64_t t = k / hidden, i = k % hidden;
  float sum = 0.0f;
  for (int j = 0; j < hc; ++j) sum = __fadd_rn(sum, X[(t * hc + j) * hidden + i]);
  out[t * stride + i] = __fdiv_rn(sum, static_cast<float>(hc));
}

}  // namespace

void hc_mean_rows(const float* X, int64_t n, int hc, int64_t hidden, float* out, int64_t stride,
                  cudaStream_t stream) {
  if (n <= 0) return;
  launch_kernel(hc_mean_kernel, static_cast<unsigned>((n * hidden + 255) / 256), 256, 0, stream, X,
                n, hc, hidden, out, stride);
}

void markov_bias(const float* markov_embed, const float* markov_head, const int32_t* prev,
                 float* logits, int64_t vocab, int rank, cudaStream_t stream) {
  launch_kernel(markov_bias_kernel, static_cast<unsigned>((vocab + 255) / 256), 256, 0, stream,
                markov_embed, markov_head, prev, logits, vocab, rank);
}

void draft_confidence(const float* proj, const float* x, const float* markov_embed,
                      const int32_t* prev, int64_t hidden, int rank, float* out,
                      cudaStream_t stream) {
  launch_kernel(confidence_kernel, 1, 256, 0, stream, proj, x, markov_embed, prev, hidden, rank,
                out);
}

}  // namespace deepinfer::cuda::v41f
