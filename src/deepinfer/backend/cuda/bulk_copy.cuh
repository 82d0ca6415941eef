// SM90 bulk copies (cp.async.bulk: the TMA unit copying a contiguous run of global memory into
// shared memory) and the mbarriers that say when one has landed. A copy holds no registers while
// in flight, so a warp can keep many kilobytes of weights coming while it multiplies others.
// Also bulk prefetches into L2 (cp.async.bulk.prefetch.L2), whole runs at an instruction.
#pragma once

#include <cstdint>

namespace deepinfer::cuda::bulk {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// An mbarrier that one thread arrives on (with the bytes it expects), the copy completes.
__device__ __forceinline__ void barrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}

// Makes barrier_init's writes visible to the copy unit before the first copy names the barrier.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Orders this thread's earlier shared-memory reads (ordinary loads) before a copy it issues next
// into the same bytes.
__device__ __forceinline__ void fence_before_copy() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global `src` to shared
// `dst`; `bar`'s current phase completes once they have landed.
__device__ __forceinline__ void copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Waits until `bar`'s phase of parity `parity` (0 for its first use, then 1, 0, ...) completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// Asks L2 for `bytes` (a multiple of 16) of global memory from `src` (16-byte aligned): one
// instruction for a whole run, no registers or shared memory held while the bytes come.
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// prefetch_l2 over a run of `bytes` from `first`, split over the block's threads a 4 KB chunk
// each. A run that is not 16-byte aligned is not asked for, nor a tail past a multiple of 16.
__device__ __forceinline__ void prefetch_l2_run(const void* first, int64_t bytes) {
  constexpr int64_t kChunk = 4096;
  if (reinterpret_cast<uintptr_t>(first) % 16 != 0) return;
  bytes &= ~int64_t{15};
  const auto* p = static_cast<const uint8_t*>(first);
  for (int64_t off = threadIdx.x * kChunk; off < bytes; off += int64_t{blockDim.x} * kChunk)
    prefetch_l2(p + off, static_cast<uint32_t>(bytes - off < kChunk ? bytes - off : kChunk));
}

}  // namespace deepinfer::cuda::bulk
