#include "deepinfer/backend/cuda/attention/norm_rope.h"
#include "deepinfer/backend/cuda/attention/rope_pair.cuh"
#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/norm/rms_norm.h"
#include "deepinfer/backend/cuda/norm/rms_norm_row.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = kNormBlock;  // kPerBlock's sums follow rms_norm's block
constexpr int kWarpRows = kThreads / 32;

int64_t blocks_of(const NormRopeRows& r) {
  if (r.rows == 0) return 0;
  return r.norm == RowNorm::kPerBlock ? r.rows : (r.rows + kWarpRows - 1) / kWarpRows;
}

// Rotates pairs first, first + step, ... of the row's last rope_dim values. inv_first:
// inv_freq[first], loaded already.
__device__ inline void rotate_tail(float* row, int64_t d, int rope_dim, int64_t pos,
                                   const double* inv_freq, double inv_first, int first, int step) {
  for (int k = first; k < rope_dim / 2; k += step) {
    float c, s;
    rope_cos_sin(pos, k == first ? inv_first : inv_freq[k], false, &c, &s);
    rotate_pair(row + d - rope_dim + 2 * k, c, s);
  }
}

// The weights a thread reads, loaded before the PDL wait (beside the kernel ahead): its first
// inv_freq and, for a block-normalized row that fits in registers, the norm's weights.
struct NormRopeWeights {
  NormWeights norm;
  double inv_first = 0;
};

__global__ void __launch_bounds__(kThreads)
    norm_rope_kernel(NormRopeRows a, NormRopeRows b, int64_t a_blocks, int64_t d, int rope_dim,
                     const int64_t* positions, const double* inv_freq, float eps) {
  const auto w = pdl_grid_begin([&] {
    NormRopeWeights l;
    const NormRopeRows& r = blockIdx.x < a_blocks ? a : b;
    const bool per_block = r.norm == RowNorm::kPerBlock;
    if (per_block && norm_row_fits_regs(d)) l.norm = load_norm_weights(r.weight, d);
    const int first = per_block ? threadIdx.x : threadIdx.x & 31;
    if (first < rope_dim / 2) l.inv_first = inv_freq[first];
    return l;
  });
  __shared__ float scratch[32];
  const bool first = blockIdx.x < a_blocks;
  const NormRopeRows& r = first ? a : b;
  const int64_t block = first ? blockIdx.x : blockIdx.x - a_blocks;
  if (r.norm == RowNorm::kPerBlock) {  // block-uniform
    float* row = r.x + block * d;
    rms_norm_row(row, w.norm.v, r.weight, d, eps, row, scratch);
    __syncthreads();  // the row's values are written by every thread
    rotate_tail(row, d, rope_dim, positions[block / r.rows_per_pos], inv_freq, w.inv_first,
                threadIdx.x, kThreads);
    return;
  }
  const int64_t i = block * kWarpRows + (threadIdx.x >> 5);
  if (i >= r.rows) return;
  float* row = r.x + i * d;
  if (r.norm == RowNorm::kPerWarp) {
    rms_norm_row_warp(row, d, eps, row);
    __syncwarp();  // the tail's values are written by other lanes
  }
  rotate_tail(row, d, rope_dim, positions[i / r.rows_per_pos], inv_freq, w.inv_first,
              threadIdx.x & 31, 32);
}

}  // namespace

void norm_rope(const NormRopeRows& a, const NormRopeRows& b, int64_t d, int rope_dim,
               const int64_t* positions, const double* inv_freq, float eps, cudaStream_t stream) {
  const int64_t na = blocks_of(a), nb = blocks_of(b);
  if (na + nb == 0) return;
  launch_kernel(norm_rope_kernel, static_cast<unsigned>(na + nb), kThreads, 0, stream, a, b, na, d,
                rope_dim, positions, inv_freq, eps);
}

}  // namespace deepinfer::cuda
