#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/indexer/indexer.h"
#include "deepinfer/backend/cuda/indexer/radix_topk.cuh"
#include "deepinfer/backend/cuda/indexer/scores_mma.h"
#include "deepinfer/backend/cuda/launch.cuh"
#include "deepinfer/backend/cuda/reduce.cuh"
#include "deepinfer/backend/cuda/smem_limit.h"

namespace deepinfer::cuda {
namespace {

constexpr int kEntriesPerBlock = 32;

// Past scores_mma's dims, in fp32 on CUDA cores. Block: one query, kEntriesPerBlock entries, one
// warp per entry at a time. Lane l owns heads l, l+32, ...; q sits in shared memory with rows
// padded by one float (no bank conflicts).
__global__ void scores_kernel(IndexerArgs a, float* scores) {
  pdl_grid_begin();
  extern __shared__ float smem[];
  const int hd = a.head_dim, nh = a.num_heads, qstride = hd + 1;
  float* qs = smem;                 // nh x (hd + 1)
  float* ks = smem + nh * qstride;  // warps x hd
  const int64_t t = blockIdx.x;
  int64_t seq, visible;
  a.query_view(t, seq, visible);
  const int64_t e0 = int64_t{blockIdx.y} * kEntriesPerBlock;
  if (e0 >= visible) return;
  for (int i = threadIdx.x; i < nh * hd; i += blockDim.x)
    qs[(i / hd) * qstride + i % hd] = a.q[t * nh * hd + i];
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float* kw = ks + warp * hd;
  for (int64_t e = e0 + warp; e < e0 + kEntriesPerBlock && e < visible; e += warps) {
    const float* key = a.keys.entry(seq, e);
    for (int d = lane; d < hd; d += 32) kw[d] = key[d];
    __syncwarp();
    float acc = 0;
    for (int h = lane; h < nh; h += 32) {
      float dot = 0;
      for (int d = 0; d < hd; ++d) dot += qs[h * qstride + d] * kw[d];
      acc += a.w[t * nh + h] * a.weight_scale * (fmaxf(dot, 0.0f) * a.score_scale);
    }
    acc = warp_sum(acc);
    if (lane == 0) scores[t * a.num_entries + e] = acc;
    __syncwarp();
  }
}

// Scores map to unsigned keys whose ascending order is descending score, then ascending index.
__device__ inline unsigned long long sort_key(uint32_t rank, int32_t idx) {
  return (static_cast<unsigned long long>(rank) << 32) | static_cast<unsigned>(idx);
}

__device__ void bitonic_sort(unsigned long long* v, int n) {
  for (int k = 2; k <= n; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int l = i ^ j;
        if (l > i) {
          const bool up = (i & k) == 0;
          if ((v[i] > v[l]) == up) {
            const unsigned long long x = v[i];
            v[i] = v[l];
            v[l] = x;
          }
        }
      }
      __syncthreads();
    }
}

// positions/query_seq: batched decode (see indexer_topk_rows); null for one sequence at pos0.
__device__ inline int visible_of(int64_t t, int64_t pos0, const int64_t* positions,
                                 const int32_t* query_seq, int ratio) {
  return static_cast<int>(indexer_visible(t, pos0, positions, query_seq, ratio));
}

// keys[0..n) hold sorted winners first: their indices re-sorted ascending (the CPU reference's
// order) into selected, -1 padded.
__device__ void write_winners(unsigned long long* keys, int n, int k, int top_k, int32_t* selected,
                              int32_t* num_selected) {
  int m = 1;
  while (m < k) m <<= 1;
  unsigned long long* idx = keys + n;
  for (int i = threadIdx.x; i < m; i += blockDim.x)
    idx[i] = i < k ? (keys[i] & 0xffffffffull) : ~0ull;
  __syncthreads();
  bitonic_sort(idx, m);
  for (int i = threadIdx.x; i < top_k; i += blockDim.x)
    selected[i] = i < k ? static_cast<int32_t>(idx[i]) : -1;
  if (threadIdx.x == 0) *num_selected = k;
}

// The top-k kernels' block size (radix_topk wants at least 256 threads).
constexpr int kTopkThreads = 512;

// One block per query: its visible scores' rank bits in shared memory, radix-selected.
__global__ void topk_kernel(const float* scores, int64_t num_entries, int64_t pos0,
                            const int64_t* positions, const int32_t* query_seq, int ratio,
                            int top_k, int32_t* selected, int32_t* num_selected) {
  pdl_grid_begin();
  extern __shared__ uint32_t ranks[];
  __shared__ RadixScratch scratch;
  const int64_t t = blockIdx.x;
  const int visible = visible_of(t, pos0, positions, query_seq, ratio);
  const int k = visible < top_k ? visible : top_k;
  for (int i = threadIdx.x; i < visible; i += blockDim.x)
    ranks[i] = rank_bits(scores[t * num_entries + i]);
  __syncthreads();
  int32_t* sel = selected + t * top_k;
  if (k > 0) radix_topk(ranks, visible, k, scratch, [&](int slot, int i) { sel[slot] = i; });
  for (int i = k + threadIdx.x; i < top_k; i += blockDim.x) sel[i] = -1;
  if (threadIdx.x == 0) num_selected[t] = k;
}

// More visible entries than one block holds: block (t, c) selects the best top_k of chunk c
// (kMaxIndexerEntries entries) of query t and writes their keys to cand[t][c] (~0 padded); the
// merge then sorts every chunk's survivors. The keys carry the global index, so ties still go to
// the earlier entry whatever chunk it is in.
__global__ void topk_chunk_kernel(const float* scores, int64_t num_entries, int64_t pos0,
                                  const int64_t* positions, const int32_t* query_seq, int ratio,
                                  int top_k, int chunks, unsigned long long* cand) {
  pdl_grid_begin();
  extern __shared__ uint32_t chunk_ranks[];
  __shared__ RadixScratch scratch;
  const int64_t t = blockIdx.x;
  const int c = blockIdx.y;
  const int visible = visible_of(t, pos0, positions, query_seq, ratio);
  const int lo = c * static_cast<int>(kMaxIndexerEntries);
  const int count = visible - lo < int(kMaxIndexerEntries) ? visible - lo : int(kMaxIndexerEntries);
  unsigned long long* out = cand + (t * chunks + c) * top_k;
  if (count <= 0) {
    for (int i = threadIdx.x; i < top_k; i += blockDim.x) out[i] = ~0ull;
    return;
  }
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    chunk_ranks[i] = rank_bits(scores[t * num_entries + lo + i]);
  __syncthreads();
  const int k = count < top_k ? count : top_k;
  radix_topk(chunk_ranks, count, k, scratch,
             [&](int slot, int i) { out[slot] = sort_key(chunk_ranks[i], lo + i); });
  for (int i = k + threadIdx.x; i < top_k; i += blockDim.x) out[i] = ~0ull;
}

__global__ void topk_merge_kernel(const unsigned long long* cand, int chunks, int64_t pos0,
                                  const int64_t* positions, const int32_t* query_seq, int ratio,
                                  int top_k, int32_t* selected, int32_t* num_selected) {
  pdl_grid_begin();
  extern __shared__ unsigned long long keys[];
  const int64_t t = blockIdx.x;
  const int visible = visible_of(t, pos0, positions, query_seq, ratio);
  const int k = visible < top_k ? visible : top_k;
  const int total = chunks * top_k;
  int n = 1;
  while (n < total) n <<= 1;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    keys[i] = i < total ? cand[t * total + i] : ~0ull;
  __syncthreads();
  bitonic_sort(keys, n);
  write_winners(keys, n, k, top_k, selected + t * top_k, num_selected + t);
}

// The chunked path's survivors, reserved before any graph capture (indexer_topk_reserve).
DeviceBuffer<unsigned long long> g_candidates;

int chunks_for(int64_t entries) {
  return static_cast<int>((entries + kMaxIndexerEntries - 1) / kMaxIndexerEntries);
}

}  // namespace

void indexer_scores(const IndexerArgs& a, float* scores, cudaStream_t stream) {
  if (a.num_queries == 0 || a.num_entries == 0) return;
  if (indexer_scores_mma_fits(a)) {
    indexer_scores_mma(a, scores, stream);
    return;
  }
  const int threads = 256;
  const size_t smem =
      sizeof(float) * (a.num_heads * (a.head_dim + 1) + (threads / 32) * a.head_dim);
  static SmemLimit limit(reinterpret_cast<const void*>(scores_kernel));
  limit.ensure(smem);
  dim3 grid(static_cast<unsigned>(a.num_queries),
            static_cast<unsigned>((a.num_entries + kEntriesPerBlock - 1) / kEntriesPerBlock));
  launch_kernel(scores_kernel, grid, threads, smem, stream, a, scores);
}

namespace {

// `most`: the largest visible count any query of the launch can have (sizes the sort).
void launch_topk(const float* scores, int64_t num_queries, int64_t num_entries, int64_t most,
                 int64_t pos0, const int64_t* positions, const int32_t* query_seq, int ratio,
                 int top_k, int32_t* selected, int32_t* num_selected, cudaStream_t stream) {
  if (num_queries == 0) return;
  if (most > indexer_topk_capacity(top_k)) {
    std::fprintf(stderr,
                 "indexer_topk: %lld visible entries exceed the %lld this top-k (%d) serves\n",
                 (long long)most, (long long)indexer_topk_capacity(top_k), top_k);
    std::abort();
  }
  if (most <= kMaxIndexerEntries) {
    const size_t smem = sizeof(uint32_t) * most;
    static SmemLimit limit(reinterpret_cast<const void*>(topk_kernel));
    limit.ensure(smem);
    launch_kernel(topk_kernel, static_cast<unsigned>(num_queries), kTopkThreads, smem, stream,
                  scores, num_entries, pos0, positions, query_seq, ratio, top_k, selected,
                  num_selected);
    return;
  }
  const int chunks = chunks_for(most);
  const size_t need = size_t(num_queries) * chunks * top_k;
  if (g_candidates.size() < need) {
    std::fprintf(stderr,
                 "indexer_topk: %lld queries over %lld entries need indexer_topk_reserve first\n",
                 (long long)num_queries, (long long)most);
    std::abort();
  }
  const size_t chunk_smem = sizeof(uint32_t) * kMaxIndexerEntries;
  static SmemLimit chunk_limit(reinterpret_cast<const void*>(topk_chunk_kernel));
  chunk_limit.ensure(chunk_smem);
  launch_kernel(topk_chunk_kernel, dim3(unsigned(num_queries), unsigned(chunks)), kTopkThreads,
                chunk_smem, stream, scores, num_entries, pos0, positions, query_seq, ratio, top_k,
                chunks, g_candidates.get());
  int64_t m = 1, n = 1;
  while (m < top_k) m <<= 1;
  while (n < int64_t{chunks} * top_k) n <<= 1;
  const size_t merge_smem = sizeof(unsigned long long) * (n + m);
  static SmemLimit merge_limit(reinterpret_cast<const void*>(topk_merge_kernel));
  merge_limit.ensure(merge_smem);
  launch_kernel(topk_merge_kernel, static_cast<unsigned>(num_queries), kTopkThreads, merge_smem,
                stream, g_candidates.get(), chunks, pos0, positions, query_seq, ratio, top_k,
                selected, num_selected);
}

}  // namespace

int64_t indexer_topk_capacity(int top_k) {
  int64_t m = 1;
  while (m < top_k) m <<= 1;
  // The merge sorts every chunk's top_k survivors in one block of kMaxIndexerEntries keys.
  return std::max<int64_t>(1, kMaxIndexerEntries / m) * kMaxIndexerEntries;
}

void indexer_topk_reserve(int64_t num_queries, int64_t num_entries, int top_k) {
  if (num_entries <= kMaxIndexerEntries) return;
  const size_t need = size_t(num_queries) * chunks_for(num_entries) * top_k;
  if (g_candidates.size() < need) g_candidates = DeviceBuffer<unsigned long long>(need);
}

void indexer_topk(const float* scores, int64_t num_queries, int64_t num_entries, int64_t pos0,
                  int ratio, int top_k, int32_t* selected, int32_t* num_selected,
                  cudaStream_t stream) {
  launch_topk(scores, num_queries, num_entries, (pos0 + num_queries) / ratio, pos0, nullptr,
              nullptr, ratio, top_k, selected, num_selected, stream);
}

void indexer_topk_rows(const float* scores, int64_t num_queries, int64_t num_entries,
                       const int64_t* positions, const int32_t* query_seq, int ratio, int top_k,
                       int32_t* selected, int32_t* num_selected, cudaStream_t stream) {
  launch_topk(scores, num_queries, num_entries, num_entries, 0, positions, query_seq, ratio, top_k,
              selected, num_selected, stream);
}

}  // namespace deepinfer::cuda
