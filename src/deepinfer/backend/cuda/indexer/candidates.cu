#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/indexer/candidates.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline int64_t visible_of(const CandidateArgs& a, int64_t t) {
  const int64_t v = (a.pos0 + t + 1) / a.ratio;
  return v < a.num_entries ? v : a.num_entries;
}

// Higher score, then lower block.
__device__ inline bool better(float s, int i, float bs, int bi) {
  return s > bs || (s == bs && i < bi);
}

// One block per query; best[] in shared memory (max_blocks floats).
__global__ void candidate_blocks_kernel(CandidateArgs a, const float* scores, uint8_t* keep) {
  pdl_grid_begin();
  extern __shared__ float best[];
  __shared__ float red_s[kThreads / 32];
  __shared__ int red_i[kThreads / 32];
  const int64_t t = blockIdx.x;
  const int64_t visible = visible_of(a, t);
  const int bs = a.block_size;
  const int nb = static_cast<int>((a.num_entries + bs - 1) / bs);
  const float* row = scores + t * a.num_entries;
  uint8_t* out = keep + t * a.max_blocks;
  for (int b = threadIdx.x; b < a.max_blocks; b += blockDim.x) out[b] = 0;
  for (int b = threadIdx.x; b < nb; b += blockDim.x) {
    float m = -INFINITY;
    const int64_t e1 = int64_t{b + 1} * bs < visible ? int64_t{b + 1} * bs : visible;
    for (int64_t e = int64_t{b} * bs; e < e1; ++e) m = fmaxf(m, row[e]);
    best[b] = m;
  }
  __syncthreads();
  if (threadIdx.x == 0 && visible > 0) best[(visible - 1) / bs] = INFINITY;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int k = 0; k < a.top_blocks && k < nb; ++k) {
    float s = -INFINITY;
    int i = 0x7fffffff;
    for (int b = threadIdx.x; b < nb; b += blockDim.x)
      if (better(best[b], b, s, i)) s = best[b], i = b;
    for (int o = 16; o > 0; o >>= 1) {
      const float os = __shfl_xor_sync(0xffffffffu, s, o);
      const int oi = __shfl_xor_sync(0xffffffffu, i, o);
      if (better(os, oi, s, i)) s = os, i = oi;
    }
    if (lane == 0) red_s[warp] = s, red_i[warp] = i;
    __syncthreads();
    if (threadIdx.x == 0) {
      float ws = red_s[0];
      int wi = red_i[0];
      for (int w = 1; w < kThreads / 32; ++w)
        if (better(red_s[w], red_i[w], ws, wi)) ws = red_s[w], wi = red_i[w];
      // Only blocks with a visible entry count as kept; a taken -inf block still used up one of
      // the top_blocks, as on the CPU. Taken blocks leave the race as NaN (never better).
      if (wi < nb) {
        out[wi] = ws > -INFINITY;
        best[wi] = NAN;
      }
    }
    __syncthreads();
  }
}

__global__ void mask_kernel(CandidateArgs a, const uint8_t* keep, float* scores) {
  pdl_grid_begin();
  const int64_t t = blockIdx.y;
  const int64_t visible = visible_of(a, t);
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < visible;
       e += int64_t{gridDim.x} * blockDim.x)
    if (!keep[t * a.max_blocks + e / a.block_size]) scores[t * a.num_entries + e] = -INFINITY;
}

__global__ void drop_kernel(const float* scores, int64_t nq, int64_t ne, int max_selected,
                            int32_t* selected, int32_t* num_selected) {
  pdl_grid_begin();
  const int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= nq) return;
  int32_t* sel = selected + t * max_selected;
  int kept = 0;
  for (int j = 0; j < num_selected[t]; ++j) {
    const int32_t e = sel[j];
    if (scores[t * ne + e] > -INFINITY) sel[kept++] = e;
  }
  for (int j = kept; j < num_selected[t]; ++j) sel[j] = -1;
  num_selected[t] = kept;
}

}  // namespace

void candidate_blocks(const CandidateArgs& a, const float* scores, uint8_t* keep,
                      cudaStream_t stream) {
  if (a.num_queries == 0) return;
  const int64_t nb = (a.num_entries + a.block_size - 1) / a.block_size;
  if (a.max_blocks < nb || a.block_size < 1 || a.ratio < 1) {
    std::fprintf(stderr, "candidate_blocks: %lld blocks exceed keep's stride %d\n",
                 static_cast<long long>(nb), a.max_blocks);
    std::abort();
  }
  const size_t smem = sizeof(float) * (nb > 0 ? nb : 1);
  launch_kernel(candidate_blocks_kernel, static_cast<unsigned>(a.num_queries), kThreads, smem,
                stream, a, scores, keep);
}

void mask_outside_candidates(const CandidateArgs& a, const uint8_t* keep, float* scores,
                             cudaStream_t stream) {
  if (a.num_queries == 0 || a.num_entries == 0) return;
  const int64_t xblocks = (a.num_entries + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(xblocks < 64 ? xblocks : 64),
                  static_cast<unsigned>(a.num_queries));
  launch_kernel(mask_kernel, grid, kThreads, 0, stream, a, keep, scores);
}

void drop_masked_picks(const float* scores, int64_t num_queries, int64_t num_entries,
                       int max_selected, int32_t* selected, int32_t* num_selected,
                       cudaStream_t stream) {
  if (num_queries == 0) return;
  launch_kernel(drop_kernel, static_cast<unsigned>((num_queries + 127) / 128), 128, 0, stream,
                scores, num_queries, num_entries, max_selected, selected, num_selected);
}

}  // namespace deepinfer::cuda
