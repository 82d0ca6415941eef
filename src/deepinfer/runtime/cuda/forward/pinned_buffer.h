// Page-locked host memory that only grows: device copies to and from it run at full speed and
// asynchronously (per-step inputs, logits rows coming back).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "deepinfer/base/status.h"

namespace deepinfer::cuda {

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }

  // At least n elements; the contents are not kept when it grows.
  StatusOr<T*> reserve(size_t n) {
    if (n <= size_) return p_;
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
    size_ = 0;
    if (cudaError_t e = cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T));
        e != cudaSuccess)
      return resource_exhausted("page-locked host memory for " + std::to_string(n) +
                                " elements: " + cudaGetErrorString(e));
    size_ = n;
    return p_;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  size_t size_ = 0;
};

}  // namespace deepinfer::cuda
