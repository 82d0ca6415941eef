// Kernel launches with programmatic dependent launch (PDL, SM90). A decode step is about 350
// launches, most of a few microseconds; launched plainly, each waits for the one before it to
// finish before its own launch starts. With PDL the next kernel's blocks are scheduled while the
// current kernel still runs and wait in pdl_grid_begin() until it has finished and its writes
// are visible, so the launch latency hides behind the running kernel (decision 0022).
//
// The rule, checked by tools/lint/check_pdl.py: every __global__ function under
// src/deepinfer/*/cuda starts with pdl_grid_begin() (or its form that first reads weights, alone
// or as `const auto name = pdl_grid_begin(...)`), and every launch there is launch_kernel().
// A kernel launched with the attribute that did not wait first could read its inputs before they
// are written. Launches elsewhere (tests, cuBLAS) stay plain and fully ordered.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "deepinfer/backend/cuda/cuda_check.h"

namespace deepinfer::cuda {

// Whether launch_kernel sets the PDL attribute: yes unless DEEPINFER_PDL=0 (read once per process;
// the kernels' waits are no-ops in a plain launch, so 0 gives the old ordering for comparison).
bool pdl_enabled();

// The first statement of every kernel. It waits for the previous kernel in the stream (every block
// done, its memory visible), then lets the next kernel's blocks be scheduled. Waiting before
// releasing keeps the chain ordered: kernel i + 2 can start only after kernel i + 1 passed its
// wait, which is after kernel i finished, so at most one kernel waits beside the running one.
__device__ __forceinline__ void pdl_grid_begin() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The same, after `weights_only()`, which runs before the wait, beside the kernel ahead: it may
// read (or ask L2 for) only memory that no kernel writes while the model runs, such as weights,
// and kernel parameters. Returns what weights_only returns, so a kernel may begin with
// `const auto w = pdl_grid_begin([&] { ...; return loaded; });` and keep weights it loaded in
// registers.
template <typename WeightsOnly>
__device__ __forceinline__ auto pdl_grid_begin(WeightsOnly&& weights_only) {
  if constexpr (std::is_void_v<decltype(weights_only())>) {
    weights_only();
    pdl_grid_begin();
  } else {
    auto loaded = weights_only();
    pdl_grid_begin();
    return loaded;
  }
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute; aborts on a launch error.
// Launches on the legacy default stream (nullptr: the op tests' one-off calls) stay plain: that
// stream orders itself against every other blocking stream, and the model never runs on it.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = pdl_enabled() && stream != nullptr ? 1 : 0;
  DI_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace deepinfer::cuda
