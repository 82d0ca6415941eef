#include <cuda_bf16.h>

#include <algorithm>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/runtime/cuda/forward/forward_kernels.h"

namespace deepinfer::cuda {
namespace {

unsigned blocks_for(int64_t work) { return static_cast<unsigned>((work + 255) / 256); }

// X[t, j, d] += e[t, d] for every stream j.
__global__ void add_to_streams_kernel(float* X, const float* e, int64_t n, int hc, int64_t hidden) {
  pdl_grid_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * hc * hidden) return;
  const int64_t t = i / (hc * hidden), d = i % hidden;
  X[i] += e[t * hidden + d];
}

__global__ void embed_kernel(const float* embed, const int32_t* ids, int64_t n, int hc,
                             int64_t hidden, float* X) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * hc * hidden) return;
  const int64_t t = i / (hc * hidden), d = i % hidden;
  X[i] = embed[int64_t{ids[t]} * hidden + d];
}

__global__ void store_entries_kernel(const float* src, int64_t n, int64_t e0, EntryPages dst) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * dst.dim) return;
  dst.entry(0, e0 + i / dst.dim)[i % dst.dim] = src[i];
}

__global__ void fill_kernel(float* p, int64_t n, float value) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) p[i] = value;
}

__global__ void positions_kernel(int64_t* out, int64_t n, int64_t start, int64_t step) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = start + i * step;
}

__global__ void ring_write_kernel(const float* kv, int64_t n, int64_t pos0, int dim, float* ring,
                                  int64_t ring_rows) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t t = i / dim;
  ring[((pos0 + t) % ring_rows) * dim + i % dim] = kv[i];
}

// The value of channel ch (of width) for absolute position p: from the chunk (gate + ape) or,
// before pos0, from the unfinished window the chunk continues.
struct TokenRow {
  const CompressorChunk& c;
  __device__ float kv(int64_t p, int ch) const {
    if (p >= c.pos0) return c.kv[(p - c.pos0) * c.width + ch];
    return c.pending_kv[(p % c.ratio) * c.width + ch];
  }
  __device__ float gate(int64_t p, int ch) const {
    const int slot = static_cast<int>(p % c.ratio);
    if (p >= c.pos0) return c.gate[(p - c.pos0) * c.width + ch] + c.ape[slot * c.width + ch];
    return c.pending_gate[slot * c.width + ch];
  }
};

__global__ void windows_kernel(CompressorChunk c, float* win_kv, float* win_gate) {
  pdl_grid_begin();
  const int slots = c.slots();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= c.windows() * slots * c.dim) return;
  const int64_t w = i / (slots * c.dim);
  const int j = static_cast<int>(i / c.dim % slots), ch = static_cast<int>(i % c.dim);
  const int64_t e = c.first_entry() + w;
  const TokenRow row{c};
  const int64_t unfinished = c.first_entry() * c.ratio;  // first position not in a window yet
  float kv, gate;
  if (c.overlap() && j < c.ratio) {
    // The previous window's A-half.
    const int64_t p = (e - 1) * c.ratio + j;
    if (e == 0) {
      kv = 0.0f, gate = -INFINITY;
    } else if (p >= unfinished) {
      kv = row.kv(p, ch), gate = row.gate(p, ch);
    } else {
      kv = c.prev_kv[j * c.dim + ch], gate = c.prev_gate[j * c.dim + ch];
    }
  } else {
    const int k = c.overlap() ? j - c.ratio : j;
    const int64_t p = e * c.ratio + k;
    const int cc = c.overlap() ? c.dim + ch : ch;
    kv = row.kv(p, cc), gate = row.gate(p, cc);
  }
  win_kv[i] = kv;
  win_gate[i] = gate;
}

__global__ void advance_prev_kernel(CompressorChunk c) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= int64_t{c.ratio} * c.dim) return;
  const int j = static_cast<int>(i / c.dim), ch = static_cast<int>(i % c.dim);
  const int64_t last = (c.pos0 + c.n) / c.ratio - 1;
  const int64_t p = last * c.ratio + j;
  const TokenRow row{c};
  c.prev_kv[i] = row.kv(p, ch);
  c.prev_gate[i] = row.gate(p, ch);
}

__global__ void advance_pending_kernel(CompressorChunk c) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= int64_t{c.ratio} * c.width) return;
  const int j = static_cast<int>(i / c.width), ch = static_cast<int>(i % c.width);
  const int64_t end = c.pos0 + c.n;
  const int64_t p = end / c.ratio * c.ratio + j;
  if (p >= end) {
    c.pending_kv[i] = 0.0f;
    c.pending_gate[i] = -INFINITY;
  } else if (p >= c.pos0) {
    c.pending_kv[i] = c.kv[(p - c.pos0) * c.width + ch];
    c.pending_gate[i] = c.gate[(p - c.pos0) * c.width + ch] + c.ape[j * c.width + ch];
  }  // else: p is in the old unfinished window, already in slot j.
}

__global__ void select_all_kernel(int64_t n, int64_t pos0, int ratio, int max_selected,
                                  int32_t* selected, int32_t* num_selected) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * max_selected) return;
  const int64_t t = i / max_selected;
  const int j = static_cast<int>(i % max_selected);
  const int visible = static_cast<int>((pos0 + t + 1) / ratio);
  selected[i] = j < visible ? j : -1;
  if (j == 0) num_selected[t] = visible;
}

// Between [n, groups, w] (row-major rows) and [groups, n, w] (one contiguous GEMM input a group),
// fp32 in, bf16 out; kToGroups picks the direction. Four values a thread, and the row from the
// grid's y, so no 64-bit division runs per value (the element-wise form ran at a third of the
// memory's speed).
template <bool kToGroups>
__global__ void regroup_bf16_kernel(const float* src, int64_t n, int groups, int w4,
                                    __nv_bfloat16* dst) {
  pdl_grid_begin();
  const int row4 = groups * w4;  // float4s of a row
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y)
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < row4; j += gridDim.x * blockDim.x) {
      const int g = j / w4, k = j - g * w4;
      const int64_t rows = t * row4 + j, grouped = (int64_t{g} * n + t) * w4 + k;
      const float4 v = reinterpret_cast<const float4*>(src)[kToGroups ? rows : grouped];
      __nv_bfloat162* out =
          reinterpret_cast<__nv_bfloat162*>(dst) + 2 * (kToGroups ? grouped : rows);
      out[0] = __floats2bfloat162_rn(v.x, v.y);
      out[1] = __floats2bfloat162_rn(v.z, v.w);
    }
}

// The same one value a thread, for widths that are not a multiple of 4.
template <bool kToGroups>
__global__ void regroup_bf16_scalar_kernel(const float* src, int64_t n, int groups, int64_t w,
                                           __nv_bfloat16* dst) {
  pdl_grid_begin();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * groups * w) return;
  const int64_t t = i / (groups * w), g = i / w % groups, k = i % w;
  const int64_t grouped = (g * n + t) * w + k;
  dst[kToGroups ? grouped : i] = __float2bfloat16_rn(src[kToGroups ? i : grouped]);
}

template <bool kToGroups>
void regroup_bf16(const float* src, int64_t n, int groups, int64_t w, __nv_bfloat16* dst,
                  cudaStream_t stream) {
  if (n == 0 || groups == 0 || w == 0) return;
  if (w % 4 == 0) {
    const int row4 = static_cast<int>(groups * w / 4);
    const dim3 grid((row4 + 255) / 256, static_cast<unsigned>(std::min<int64_t>(n, 65535)));
    launch_kernel(regroup_bf16_kernel<kToGroups>, grid, 256, 0, stream, src, n, groups,
                  static_cast<int>(w / 4), dst);
  } else {
    launch_kernel(regroup_bf16_scalar_kernel<kToGroups>, blocks_for(n * groups * w), 256, 0, stream,
                  src, n, groups, w, dst);
  }
}

}  // namespace

void embed_rows(const float* embed, const int32_t* ids, int64_t n, int hc, int64_t hidden, float* X,
                cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(embed_kernel, blocks_for(n * hc * hidden), 256, 0, stream, embed, ids, n, hc,
                hidden, X);
}

void add_to_streams(float* X, const float* e, int64_t n, int hc, int64_t hidden,
                    cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(add_to_streams_kernel, blocks_for(n * hc * hidden), 256, 0, stream, X, e, n, hc,
                hidden);
}

void fill_positions(int64_t* out, int64_t n, int64_t start, int64_t step, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(positions_kernel, blocks_for(n), 256, 0, stream, out, n, start, step);
}

void ring_write(const float* kv, int64_t n, int64_t pos0, int dim, float* ring, int64_t ring_rows,
                cudaStream_t stream) {
  // Only the last ring_rows positions survive; skipping the rest keeps writes to a row unique.
  const int64_t skip = n > ring_rows ? n - ring_rows : 0;
  if (n - skip <= 0) return;
  launch_kernel(ring_write_kernel, blocks_for((n - skip) * dim), 256, 0, stream, kv + skip * dim,
                n - skip, pos0 + skip, dim, ring, ring_rows);
}

void store_entries(const float* src, int64_t n, int64_t e0, const EntryPages& dst,
                   cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(store_entries_kernel, blocks_for(n * dst.dim), 256, 0, stream, src, n, e0, dst);
}

void fill_floats(float* p, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(fill_kernel, blocks_for(n), 256, 0, stream, p, n, value);
}

void compressor_windows(const CompressorChunk& c, float* win_kv, float* win_gate,
                        cudaStream_t stream) {
  const int64_t work = c.windows() * c.slots() * c.dim;
  if (work == 0) return;
  launch_kernel(windows_kernel, blocks_for(work), 256, 0, stream, c, win_kv, win_gate);
}

void compressor_advance(const CompressorChunk& c, cudaStream_t stream) {
  if (c.n == 0) return;
  // prev first: it may read unfinished-window rows that the pending update then overwrites.
  if (c.overlap() && c.windows() > 0) {
    launch_kernel(advance_prev_kernel, blocks_for(int64_t{c.ratio} * c.dim), 256, 0, stream, c);
  }
  launch_kernel(advance_pending_kernel, blocks_for(int64_t{c.ratio} * c.width), 256, 0, stream, c);
}

void select_all_visible(int64_t n, int64_t pos0, int ratio, int max_selected, int32_t* selected,
                        int32_t* num_selected, cudaStream_t stream) {
  if (n == 0 || max_selected == 0) return;
  launch_kernel(select_all_kernel, blocks_for(n * max_selected), 256, 0, stream, n, pos0, ratio,
                max_selected, selected, num_selected);
}

void split_groups_bf16(const float* o, int64_t n, int groups, int64_t gin, __nv_bfloat16* og,
                       cudaStream_t stream) {
  regroup_bf16<true>(o, n, groups, gin, og, stream);
}

void merge_groups_bf16(const float* zg, int64_t n, int groups, int64_t width, __nv_bfloat16* z,
                       cudaStream_t stream) {
  regroup_bf16<false>(zg, n, groups, width, z, stream);
}

}  // namespace deepinfer::cuda
