// Dynamic shared memory above 48 KB must be opted into per kernel, and the attribute belongs to
// the current device's context, so each (kernel, device) pair is raised once. The limit set is
// the device's opt-in maximum less the kernel's static shared memory (their sum may not exceed
// it): any launch that fits the device then fits the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::cuda {

// One per kernel, as a function-local static (its construction is thread-safe):
//   static SmemLimit limit(reinterpret_cast<const void*>(my_kernel));
//   limit.ensure(bytes);
// Hot-path cost after the first call per device: cudaGetDevice and an uncontended once_flag.
class SmemLimit {
 public:
  static constexpr int kMaxDevices = 64;

  explicit SmemLimit(const void* kernel) : kernel_(kernel) {}

  // Before launching with `bytes` of dynamic shared memory on the current device.
  void ensure(size_t bytes) {
    int dev = 0;
    DI_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= kMaxDevices) {
      std::fprintf(stderr, "SmemLimit: device %d beyond the %d this build tracks\n", dev,
                   kMaxDevices);
      std::abort();
    }
    std::call_once(raised_[dev], [&] {
      int optin = 0;
      DI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
      cudaFuncAttributes attr;
      DI_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_));
      limit_[dev] = optin - static_cast<int>(attr.sharedSizeBytes);
      DI_CUDA_CHECK(
          cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, limit_[dev]));
    });
    // A size the op's own limits should have excluded: name it rather than fail the launch.
    if (bytes > static_cast<size_t>(limit_[dev])) {
      std::fprintf(stderr, "SmemLimit: %zu bytes of dynamic shared memory exceed device %d's %d\n",
                   bytes, dev, limit_[dev]);
      std::abort();
    }
  }

 private:
  const void* kernel_;
  std::once_flag raised_[kMaxDevices];
  int limit_[kMaxDevices] = {};  // written once per device, under raised_
};

}  // namespace deepinfer::cuda
