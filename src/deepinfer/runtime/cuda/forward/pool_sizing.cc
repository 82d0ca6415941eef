#include "deepinfer/runtime/cuda/forward/pool_sizing.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace deepinfer::cuda {
namespace {

std::string gib(double bytes) {  // MiB below a GiB (tiny test models)
  char b[32];
  if (bytes >= double(1 << 30))
    std::snprintf(b, sizeof b, "%.2f GiB", bytes / double(1 << 30));
  else
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / double(1 << 20));
  return std::string(b);
}

}  // namespace

StatusOr<int64_t> pool_pages(const PoolSizing& p) {
  size_t free = 0, total = 0;
  const cudaError_t e = cudaMemGetInfo(&free, &total);
  if (e != cudaSuccess)
    return internal_error(std::string("cudaMemGetInfo failed: ") + cudaGetErrorString(e));
  const int64_t limit = static_cast<int64_t>(p.fraction * double(total)) - kPoolMargin;
  const int64_t slot = p.slot_bytes, per = p.slot_bytes / p.page_bytes;
  const int64_t used = int64_t(total - free);  // one slot's pages included
  if (p.pool_bytes == 0 && used > limit) {
    char frac[32];
    std::snprintf(frac, sizeof frac, "%g", p.fraction);
    return resource_exhausted(
        "the device's used memory after the weights (" + gib(double(p.weight_bytes)) +
        "), the forward's scratch and the pages of one sequence (" + gib(double(slot)) + ", " +
        std::to_string(p.max_tokens) + " tokens) is " + gib(double(used)) +
        " (other processes included), more than memory_fraction " + frac + " of its " +
        gib(double(total)) + " less a " + gib(double(kPoolMargin)) + " margin");
  }
  int64_t pages = (limit - used + slot) / p.page_bytes;
  if (p.pool_bytes > 0) {
    pages = p.pool_bytes / p.page_bytes;
    if (pages < per)
      return resource_exhausted("a pool of " + gib(double(p.pool_bytes)) +
                                " holds no sequence of " + std::to_string(p.max_tokens) +
                                " tokens (" + gib(double(slot)) + ")");
    if (p.pool_bytes > int64_t(free) + slot - kPoolMargin)
      return resource_exhausted("a pool of " + gib(double(p.pool_bytes)) +
                                " exceeds the device's free memory (" + gib(double(free)) +
                                " after the weights and scratch, less a " +
                                gib(double(kPoolMargin)) + " margin)");
  }
  return pages;
}

}  // namespace deepinfer::cuda
