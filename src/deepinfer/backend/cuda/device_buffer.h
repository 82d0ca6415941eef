// Owning device allocation (cudaMalloc; managed memory is avoided on purpose, see DESIGN.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n) DI_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    DI_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    DI_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Every byte 0xFF: as floats that is NaN, so an element no kernel wrote never passes a check.
  void poison() { DI_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T))); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// How many times grow() has reallocated any buffer. A captured CUDA graph holds raw device
// pointers, so it is stale once this count moves past the value it was captured at.
inline std::atomic<uint64_t>& regrowth_count() {
  static std::atomic<uint64_t> n{0};
  return n;
}

// Scratch that grows on demand to the largest size seen and is then reused.
template <typename T>
T* grow(DeviceBuffer<T>& b, size_t n) {
  if (b.size() < n) {
    b = DeviceBuffer<T>(n);
    ++regrowth_count();
  }
  return b.get();
}

}  // namespace deepinfer::cuda
