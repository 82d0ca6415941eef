// launch_kernel's programmatic dependent launch (backend/cuda/launch.cuh, decision 0022): a chain
// of kernels, each reading what the one before it wrote, must see every write, in a stream and in
// a replayed graph. Every other link is slow (it spins before writing), so a dependent that the
// runtime schedules early would read stale values if pdl_grid_begin() did not wait; grids of 1,
// 7 and 300 blocks mix single waves with a kernel larger than the GPU holds at once.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "deepinfer/backend/cuda/cuda_check.h"
#include "deepinfer/backend/cuda/device_buffer.h"
#include "deepinfer/backend/cuda/launch.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;

// out[i] = in[i] + 1 over n values; `spin` clock cycles of waiting first in each block.
__global__ void add_one_kernel(const int32_t* in, int32_t* out, int64_t n, int64_t spin) {
  pdl_grid_begin();
  const long long start = clock64();
  while (clock64() - start < spin) {
  }
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = in[i] + 1;
}

// `links` launches alternating a -> b and b -> a; returns the buffer holding the result.
int32_t* chain(int32_t* a, int32_t* b, int64_t n, int links, cudaStream_t stream) {
  constexpr unsigned kGrids[] = {1, 7, 300};
  for (int k = 0; k < links; ++k) {
    const int32_t* in = k % 2 ? b : a;
    int32_t* out = k % 2 ? a : b;
    const int64_t spin = k % 2 ? 0 : 20000;  // about 10 us at the H100's clock
    launch_kernel(add_one_kernel, kGrids[k % 3], kThreads, 0, stream, in, out, n, spin);
  }
  return links % 2 ? b : a;
}

TEST(CudaLaunch, EachKernelOfAChainSeesThePreviousKernelsWrites) {
  const int64_t n = 300 * kThreads * 3 + 17;  // more values than the largest grid's threads
  const int kLinks = 60;
  std::vector<int32_t> start(n);
  for (int64_t i = 0; i < n; ++i) start[i] = static_cast<int32_t>(i % 1000);
  cudaStream_t stream;
  DI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("PDL %s\n", pdl_enabled() ? "on" : "off (DEEPINFER_PDL=0)");

  DeviceBuffer<int32_t> a(start), b(n);
  b.poison();
  int32_t* result = chain(a.get(), b.get(), n, kLinks, stream);
  DI_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<int32_t> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = start[i] + kLinks;
  EXPECT_EQ((result == a.get() ? a : b).download(), want) << "stream";

  // The same chain captured once and replayed three times: each replay adds kLinks again.
  a.upload(start);
  b.poison();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DI_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  result = chain(a.get(), b.get(), n, kLinks, stream);
  DI_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  DI_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(result, a.get()) << "an even chain ends where it started, so replays compose";
  for (int replay = 1; replay <= 3; ++replay) {
    DI_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    DI_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int64_t i = 0; i < n; ++i) want[i] = start[i] + replay * kLinks;
    EXPECT_EQ(a.download(), want) << "graph replay " << replay;
  }
  DI_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DI_CUDA_CHECK(cudaGraphDestroy(graph));
  DI_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace deepinfer::cuda
