// The k best of n scores held by one block, by radix select rather than a sort. The order is the
// indexer's: higher score first, ties to the lower index (the CPU reference's top_k_indices).
// Four 8-bit histogram passes over the scores' rank bits find the k-th best value T; one scan in
// index order then keeps every entry better than T and the first (k - those) entries equal to T.
// The winners come out in ascending index order, which is the order the indexer writes, so no
// sort is needed at all (a bitonic sort of 1024 entries took 40 us a call at decode).
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

// A score's rank bits: ascending as unsigned is descending as float (NaNs by their bits, as the
// 64-bit keys of the sort path order them).
__device__ inline uint32_t rank_bits(float score) {
  uint32_t u = __float_as_uint(score);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending float order as unsigned
  return ~u;
}

// Shared memory radix_topk needs beside the n rank bits.
struct RadixScratch {
  uint32_t hist[256];
  uint32_t warp_sums[2][32];
  uint32_t found[2];  // the pass's bin and the count before it
};

// Exclusive prefix over the block of one value a thread (blockDim.x a multiple of 32); `sums`
// holds 32 words of shared memory. Ends with a barrier, so `sums` can be reused.
__device__ inline uint32_t block_exclusive_scan(uint32_t v, uint32_t* sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  uint32_t incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t x = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += x;
  }
  if (lane == 31) sums[warp] = incl;
  __syncthreads();
  uint32_t before = 0;
  for (int w = 0; w < warp && w < warps; ++w) before += sums[w];
  __syncthreads();
  return before + incl - v;
}

// rank[0..n) in shared memory (rank_bits of each score); 0 < k <= n. Calls emit(slot, i) once for
// each winner i, slots 0..k-1 in ascending i. Every thread of the block must call it.
template <typename Emit>
__device__ void radix_topk(const uint32_t* rank, int n, int k, RadixScratch& s, Emit emit) {
  const int tid = threadIdx.x, lane = tid & 31;
  uint32_t prefix = 0, mask = 0;
  uint32_t remaining = static_cast<uint32_t>(k);  // winners still to find inside the prefix
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += blockDim.x) s.hist[i] = 0;
    __syncthreads();
    // Scores cluster (ReLU zeros, few levels), so lanes with the same bin add once together.
    for (int base = 0; base < n; base += blockDim.x) {
      const int i = base + tid;
      const uint32_t r = i < n ? rank[i] : 0;
      const bool in = i < n && (r & mask) == prefix;
      const uint32_t bin = in ? (r >> shift) & 0xffu : 0x100u;
      const uint32_t peers = __match_any_sync(0xffffffffu, bin);
      if (in && __ffs(peers) - 1 == lane) atomicAdd(&s.hist[bin], __popc(peers));
    }
    __syncthreads();
    // The bin where the running count passes `remaining`.
    const uint32_t c = tid < 256 ? s.hist[tid] : 0;
    const uint32_t before = block_exclusive_scan(c, s.warp_sums[0]);
    if (tid < 256 && before < remaining && remaining <= before + c) {
      s.found[0] = static_cast<uint32_t>(tid);
      s.found[1] = before;
    }
    __syncthreads();
    prefix |= s.found[0] << shift;
    mask |= 0xffu << shift;
    remaining -= s.found[1];
    __syncthreads();  // found is rewritten by the next pass
  }
  // prefix is T: take every rank below it and the first `remaining` equal to it. Each warp owns a
  // contiguous run of indices (lanes on consecutive words: no bank conflicts), so a scan of the
  // warps' counts gives each its first slot, and ballots the lanes' slots inside it.
  const int warps = static_cast<int>(blockDim.x >> 5), warp = tid >> 5;
  const int seg = ((n + warps - 1) / warps + 31) & ~31;
  const int lo = warp * seg, hi = lo + seg < n ? lo + seg : n;
  uint32_t less = 0, equal = 0;
  for (int i = lo + lane; i < hi; i += 32) {
    less += rank[i] < prefix;
    equal += rank[i] == prefix;
  }
  for (int o = 16; o > 0; o >>= 1) {
    less += __shfl_xor_sync(0xffffffffu, less, o);
    equal += __shfl_xor_sync(0xffffffffu, equal, o);
  }
  uint32_t equal_before =
      __shfl_sync(0xffffffffu, block_exclusive_scan(lane == 0 ? equal : 0, s.warp_sums[1]), 0);
  const uint32_t less_before =
      __shfl_sync(0xffffffffu, block_exclusive_scan(lane == 0 ? less : 0, s.warp_sums[0]), 0);
  uint32_t slot = less_before + (equal_before < remaining ? equal_before : remaining);
  const uint32_t below = (1u << lane) - 1;
  for (int base = lo; base < hi; base += 32) {
    const int i = base + lane;
    const uint32_t r = i < hi ? rank[i] : 0xffffffffu;
    const bool is_less = i < hi && r < prefix, is_equal = i < hi && r == prefix;
    const uint32_t equals = __ballot_sync(0xffffffffu, is_equal);
    const bool take = is_less || (is_equal && equal_before + __popc(equals & below) < remaining);
    const uint32_t takes = __ballot_sync(0xffffffffu, take);
    if (take) emit(static_cast<int>(slot + __popc(takes & below)), i);
    slot += __popc(takes);
    equal_before += __popc(equals);
  }
}

}  // namespace deepinfer::cuda
